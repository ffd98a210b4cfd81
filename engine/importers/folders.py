"""The files of a folder an owner gives an import, read the one way every importer reads them.

An import reads what it was given and nothing else:

- a symbolic link inside the folder (to a file or to a folder) is never followed: where it points
  is outside what the owner chose to import, so it is left out and named (``symlinks``), and the
  import says so in its notes and ``leftOut``;
- dot-files and dot-folders (``.obsidian``, ``.git``, ``.bash_history``, ``.DS_Store``) are an
  editor's or a shell's own, never the owner's knowledge: left out without a word;
- a file is opened without following a link at its last step, so a file swapped for a link
  between the walk and the read is refused rather than read through.

The folder given itself may be a link (``~/notes`` pointing at a synced folder): the owner named it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..core.errors import InvalidParams
from ..core.words import counted

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


@dataclass(frozen=True)
class InputFolder:
    """A folder's regular files (posix paths relative to it, sorted) and the links left out of them."""

    root: Path
    files: tuple[str, ...]
    symlinks: tuple[str, ...]

    def read(self, relative: str) -> bytes:
        """The bytes of one of ``files``; a link (or a file that cannot be read) is refused naming it."""
        return read_regular_file(self.root / relative, relative)


def walk_input(root: Path, *, depth: int | None = None,
               skip_folder: Callable[[str], bool] = lambda name: False) -> InputFolder:
    """The regular files under ``root`` at most ``depth`` path parts deep (None: any depth), dot-files,
    dot-folders and folders ``skip_folder`` names left out, links not followed; unreadable folders are
    passed over as ``os.walk`` does."""
    files: list[str] = []
    symlinks: list[str] = []
    for directory, subdirs, names in os.walk(root):
        relative = Path(directory).relative_to(root)
        deeper = depth is None or len(relative.parts) + 1 < depth
        kept = []
        for name in sorted(subdirs):
            if name.startswith(".") or skip_folder(name):
                continue
            if Path(directory, name).is_symlink():
                symlinks.append((relative / name).as_posix())
            elif deeper:
                kept.append(name)
        subdirs[:] = kept
        for name in sorted(names):
            if name.startswith("."):
                continue
            path = Path(directory, name)
            if path.is_symlink():
                symlinks.append((relative / name).as_posix())
            elif path.is_file():
                files.append((relative / name).as_posix())
    return InputFolder(root, tuple(sorted(files)), tuple(sorted(symlinks)))


def hidden(relative: str) -> bool:
    """Whether a path inside an input (a folder's, or a member of a zip, parts split by "/") has a part
    starting with a dot (a dot-file, a dot-folder, ``..``): never an import's to take, as ``walk_input``
    leaves such files out of a folder."""
    return any(part.startswith(".") for part in relative.split("/"))


def read_regular_file(path: Path, name: str | None = None) -> bytes:
    """The bytes of a regular file, opened without following a link at its last step; InvalidParams
    naming it (``name``, else the path) when it is a link or cannot be read."""
    shown = name or str(path)
    try:
        descriptor = os.open(path, os.O_RDONLY | _NOFOLLOW)
    except OSError as exc:
        if path.is_symlink():
            raise InvalidParams(f"{shown} is a symbolic link; an import follows none", file=shown) from exc
        raise InvalidParams(f"cannot read {shown}: {exc.strerror or exc}", file=shown) from exc
    try:
        with os.fdopen(descriptor, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise InvalidParams(f"cannot read {shown}: {exc.strerror or exc}", file=shown) from exc


def left_out_notes(symlinks: tuple[str, ...] | list[str]) -> list[str]:
    """What an import says of the links it did not follow: one note naming them all."""
    if not symlinks:
        return []
    shown = ", ".join(symlinks[:10]) + (f" and {len(symlinks) - 10} more" if len(symlinks) > 10 else "")
    return [f"Left out {counted(len(symlinks), 'symbolic link')}, which an import never follows: {shown}."]
