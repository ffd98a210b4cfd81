"""What a copied git folder in an archive (``history/.git/``) may hold: objects and refs, nothing else.

The restored folder becomes the store's ``vault/.git``, which the engine's git then reads and writes.  So it
carries only what a history is, each file checked for its form before anything is written:

- objects: loose objects, packs (with their index, reverse index, bitmap and mtimes), the pack list and
  the commit graph, which git only reads as data;
- refs: ``HEAD`` (``ref: refs/heads/<name>`` or an object id), loose refs under ``refs/heads/``,
  ``refs/tags/`` and ``refs/remotes/`` (an object id, or ``ref: `` another such ref), and ``packed-refs``
  (``<id> <ref>`` lines, ``^<id>`` peeled lines, its ``# pack-refs with:`` header).

Everything else is refused: ``objects/info/alternates`` and ``http-alternates`` (git would read another
repository's objects, live), hooks and config (commands git runs), any file the list does not name.  A
ref's name follows ``git check-ref-format`` (no ``..``, no component starting with ``.`` or ``-`` or
ending in ``.lock``, no control character, space or ``~^:?*[\\``, no ``@{``, no empty component).
"""

from __future__ import annotations

import re
from typing import Any, Callable

_OID = r"(?:[0-9a-f]{40}|[0-9a-f]{64})"  # SHA-1 or SHA-256
_PARTS = re.compile(
    rf"objects/[0-9a-f]{{2}}/(?:[0-9a-f]{{38}}|[0-9a-f]{{62}})"
    rf"|objects/pack/pack-{_OID}\.(?:pack|idx|rev|bitmap|mtimes)"
    rf"|objects/info/(?:packs|commit-graph|commit-graphs/commit-graph-chain|commit-graphs/graph-{_OID}\.graph)"
    r"|HEAD|packed-refs|refs/(?:heads|tags|remotes)/.+"
)
_REF_PREFIXES = ("refs/heads/", "refs/tags/", "refs/remotes/")
_REF_FORBIDDEN = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|@\{|//")
_OID_LINE = re.compile(rf"{_OID}\n?")
_SYMREF = re.compile(r"ref: (\S+)\n?")
_PACKED_LINE = re.compile(rf"({_OID}) (\S+)|\^{_OID}")
REF_FILE_MAX_BYTES = 4096  # an object id or a symbolic ref and its newline: far less


def is_copied_history_part(relpath: str) -> bool:
    """Whether a path inside ``.git`` is one a restored history may hold (the module's list)."""
    if not _PARTS.fullmatch(relpath):
        return False
    return not relpath.startswith("refs/") or is_ref_name(relpath)


def is_ref_name(name: str) -> bool:
    """Whether ``name`` is a branch, tag or remote-tracking ref whose name ``git check-ref-format`` takes, and
    which starts no component with ``-``."""
    if not name.startswith(_REF_PREFIXES) or name.endswith(("/", ".")) or _REF_FORBIDDEN.search(name):
        return False
    short = name.split("/", 2)[2]
    return bool(short) and short != "@" and all(
        part and not part.startswith((".", "-")) and not part.endswith(".lock") for part in short.split("/"))


def check_git_folder(parts: dict[str, str], read: Callable[[str], bytes], refuse: Any) -> None:
    """Check the refs of a copied git folder (``parts``: path inside ``.git`` -> archive member; every path
    already ``is_copied_history_part``): HEAD, each loose ref and packed-refs hold what git would write."""
    for part, member in sorted(parts.items()):
        if part == "HEAD":
            _check_ref_file(read(member), member, refuse, head=True)
        elif part.startswith("refs/"):
            _check_ref_file(read(member), member, refuse, head=False)
        elif part == "packed-refs":
            _check_packed_refs(read(member), member, refuse)


def _check_ref_file(data: bytes, member: str, refuse: Any, *, head: bool) -> None:
    text = _ascii(data, member, refuse) if len(data) <= REF_FILE_MAX_BYTES else None
    if text is not None and _OID_LINE.fullmatch(text):
        return
    symref = _SYMREF.fullmatch(text) if text is not None else None
    if symref is not None and is_ref_name(symref.group(1)) and (not head or symref.group(1).startswith("refs/heads/")):
        return
    shape = "'ref: refs/heads/<name>' or an object id" if head else "an object id or 'ref: <ref>'"
    raise refuse(f"a ref holds {shape} only, its ref a valid name (git check-ref-format, no leading '-')", member)


def _check_packed_refs(data: bytes, member: str, refuse: Any) -> None:
    lines = _ascii(data, member, refuse).split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for number, line in enumerate(lines, start=1):
        if number == 1 and line.startswith("# pack-refs with:"):
            continue
        found = _PACKED_LINE.fullmatch(line)
        if found is None or (found.group(2) is not None and not is_ref_name(found.group(2))):
            raise refuse(f"packed-refs line {number} is not '<object id> <ref>' with a valid ref name, nor "
                         "'^<object id>'", member)


def _ascii(data: bytes, member: str, refuse: Any) -> str:
    try:
        return data.decode("ascii")
    except UnicodeDecodeError:
        raise refuse("a ref file holds bytes that are not ASCII", member) from None
