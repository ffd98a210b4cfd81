"""Which names an Obsidian embed (``![[name.ext]]``) gives that are files, not notes: images, other files and
Obsidian Bases.

The window's note renderer and the owner's search snippets read embeds by the same suffixes.
"""

from __future__ import annotations

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp", ".bmp", ".avif", ".tif", ".tiff")
FILE_SUFFIXES = (".pdf", ".mp3", ".wav", ".ogg", ".m4a", ".mp4", ".webm", ".mov", ".csv", ".zip", ".canvas")
BASE_SUFFIX = ".base"  # an Obsidian Base (``![[Books.base#By year]]``): a view of notes, no note itself
