"""How a Logseq graph's notes are named, for the Markdown importer.

A Logseq graph is a folder of Markdown files (``pages/``, ``journals/``) beside a ``logseq/config.edn``.
Logseq names a page by its title, not by its file: ``pages/Project___Alpha.md`` (or ``Project%2FAlpha.md``,
the older way) is the page ``Project/Alpha``, which ``[[Project/Alpha]]`` names; a journal's file
``journals/2025_05_27.md`` is the day, titled as the graph's ``:journal/page-title-format`` writes it
(``May 27th, 2025`` by default), which is how links name it.  A page's properties are ``key:: value`` lines
at the top of the file, before its first bullet: ``title::``, ``alias::`` and ``tags::`` (values separated
by commas, each a name or a ``[[name]]``) are the page's title, aliases and tags.  ``#tag`` and
``#[[multi word tag]]`` in the text are tags.  A block reference ``((uuid))`` (bare or in ``{{embed ((uuid))}}``)
links the page holding the block (its ``id:: uuid`` line).

Logseq browses namespaced pages as a tree (``Project/Alpha`` is the page Alpha under Project), so the window's
Folders lists a graph's page under its namespace, beneath its file's folder (``pages/Project``:
``namespace_folder``).

These rules hold only for a graph (the folder imported, or a folder above it, holds ``logseq/config.edn``):
an Obsidian vault's ``a___b.md`` stays the note ``a___b``.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import unquote

CONFIG = PurePosixPath("logseq") / "config.edn"
CONFIG_MAX_BYTES = 1_000_000  # a graph's settings file is a few KB; a larger one is not read for the journal format
DEFAULT_JOURNAL_TITLE = "MMM do, yyyy"  # Logseq's own default
_PROPERTY = re.compile(r"^([A-Za-z][\w-]*):: ?(.*)$")
_JOURNAL_FILE = re.compile(r"^(\d{4})_(\d{2})_(\d{2})$")
_TITLE_FORMAT = re.compile(r":journal/page-title-format\s+\"([^\"\n]+)\"")
_DATE_TOKEN = re.compile(r"yyyy|MMMM|MMM|MM|M|EEEE|EEE|E|do|dd|d")
_NAME = re.compile(r"#?\[\[([^\[\]]+)\]\]|([^,\[]+)")  # one name of a property's value, in order
# A block reference, ``((6745a1c2-...))``, and a block's id, ``id:: 6745a1c2-...`` on a line of its own under its
# bullet.
_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
BLOCK_REFERENCE = re.compile(rf"\(\(({_UUID})\)\)")
_BLOCK_ID = re.compile(rf"^\s*id:: ?({_UUID})\s*$", re.MULTILINE)
# ``#[[multi word tag]]``: after white space or at a line's start, as a ``#tag`` is.
INLINE_TAG = re.compile(r"(?:^|(?<=\s))#\[\[([^\[\]\n]+)\]\]")


@dataclass(frozen=True)
class Graph:
    """A Logseq graph's settings the importer reads: how its journals' titles are written."""

    journal_title: str = DEFAULT_JOURNAL_TITLE


def graph_of(root: Path) -> Graph | None:
    """The Logseq graph the folder is, or is inside (``<graph>/pages`` imported alone), else None."""
    for folder in (root.absolute(), *root.absolute().parents):
        config = folder / CONFIG
        if config.is_file() and not config.is_symlink():
            return Graph(_journal_title(config))
    return None


def _journal_title(config: Path) -> str:
    """The ``:journal/page-title-format`` a graph's ``config.edn`` sets on a line not commented out, else the
    default: an unreadable or unknown file is Logseq's default, never the import's failure."""
    try:
        if config.stat().st_size > CONFIG_MAX_BYTES:
            return DEFAULT_JOURNAL_TITLE
        text = config.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return DEFAULT_JOURNAL_TITLE
    for line in text.splitlines():
        found = _TITLE_FORMAT.search(line.split(";", 1)[0])
        if found:
            return found.group(1)
    return DEFAULT_JOURNAL_TITLE


def page_title(graph: Graph, path: str) -> tuple[str, str | None]:
    """The title Logseq shows for the file at ``path`` (relative, with ``/``), and for a journal its day in ISO
    form (``2025-05-27``), an alias to find it by; else None."""
    stem = PurePosixPath(path).stem
    day = _journal_day(stem) if PurePosixPath(path).parent.name == "journals" else None
    if day is not None:
        return format_day(day, graph.journal_title), day.isoformat()
    return unquote(stem).replace("___", "/"), None


def namespace_folder(path: str, title: str) -> str:
    """The folder a graph's page at ``path`` is browsed in: its file's folder, then the namespace of its title
    (``pages/Project___Alpha.md`` titled ``Project/Alpha`` is in ``pages/Project``; ``Alpha`` in ``pages``).  A
    journal is in its folder: its title is a day, never a namespace."""
    folder = path.rpartition("/")[0]
    stem = PurePosixPath(path).stem
    if PurePosixPath(path).parent.name == "journals" and _journal_day(stem) is not None:
        return folder
    namespace = [part.strip() for part in title.split("/")[:-1] if part.strip()]
    return "/".join(part for part in (folder, *namespace) if part)


def _journal_day(stem: str) -> datetime.date | None:
    found = _JOURNAL_FILE.match(stem)
    if not found:
        return None
    try:
        return datetime.date(*(int(part) for part in found.groups()))
    except ValueError:
        return None


def format_day(day: datetime.date, pattern: str) -> str:
    """A day written with the date-fns tokens Logseq's journal titles use (``yyyy``, ``MM``, ``MMM``, ``do``,
    ``EEE``, ...); other letters stay as written."""
    def token(match: re.Match[str]) -> str:
        return {"yyyy": f"{day.year:04d}", "MMMM": day.strftime("%B"), "MMM": day.strftime("%b"),
                "MM": f"{day.month:02d}", "M": str(day.month), "EEEE": day.strftime("%A"),
                "EEE": day.strftime("%a"), "E": day.strftime("%a"), "do": _ordinal(day.day),
                "dd": f"{day.day:02d}", "d": str(day.day)}[match.group(0)]
    return _DATE_TOKEN.sub(token, pattern)


def _ordinal(number: int) -> str:
    suffix = "th" if 10 <= number % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    return f"{number}{suffix}"


def page_properties(body: str) -> dict[str, str]:
    """The page's ``key:: value`` lines at the top of its text (keys lower case, the first of each kept)."""
    properties: dict[str, str] = {}
    for line in body.splitlines():
        found = _PROPERTY.match(line.strip())
        if not found:
            break
        properties.setdefault(found.group(1).lower(), found.group(2).strip())
    return properties


def property_names(value: str) -> list[str]:
    """The names a property's value lists: ``[[AI Rules]], notes, #[[multi word]]`` is
    ``AI Rules``, ``notes``, ``multi word`` (a comma inside ``[[...]]`` belongs to its name)."""
    names = [(bracketed or plain).strip().lstrip("#").strip() for bracketed, plain in _NAME.findall(value)]
    return [name for name in names if name]


def block_ids(text: str) -> list[str]:
    """The ids of a page's blocks (``id::`` lines), lower case: what ``((id))`` in another page refers to."""
    return [found.lower() for found in _BLOCK_ID.findall(text)] if "id::" in text else []
