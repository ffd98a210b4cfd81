"""What changed between two kept revisions of a record, as the desktop's History shows it.

The file diff (``operator/diff``'s ``diff``) is exact but reads as YAML; an owner asks "what changed": the
body, as a diff of its lines, and the frontmatter keys whose values differ, with the value before and after.
Each revision of ``operator/history`` also names what changed since the one before it (``changed``: ``body``
and the keys), so the list reads "body, tags" without a diff asked per row.  Both are worked out here, on the
store's lane, from the revision archive: the desktop never parses record files.
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Any, Literal

from ..core.answers import JsonValue, NotRequired, TypedDict
from ..store.answers import RecordHistory, Revision
from ..store.catalog_reads import RevisionRow
from ..vault.records import Record, parse_record

if TYPE_CHECKING:
    from ..access.authority import Authority, Caller, StoreEntry
    from ..store.open_store import OpenStore

BODY = "body"  # what ``changed`` names for the body; every other name is a frontmatter key


class FieldChange(TypedDict):
    """One frontmatter key whose value differs: ``from`` and ``to`` are the values as the files hold them
    (null where the key is absent: ``change`` says which)."""

    name: str
    change: Literal["added", "removed", "changed"]
    before: JsonValue
    after: JsonValue


class ChangedRevision(Revision):
    """A revision as History lists it: ``changed`` names the body and the keys that differ from the revision
    before it (empty for the first; absent where either file is not a readable record)."""

    changed: NotRequired[list[str]]


class OperatorHistory(RecordHistory):
    revisions: list[ChangedRevision]  # type: ignore[misc]  # a revision with what it changed


def field_changes(before: Record, after: Record) -> list[FieldChange]:
    """The frontmatter keys whose values differ, in the newer file's order (removed keys last)."""
    changes: list[FieldChange] = []
    old, new = before.frontmatter, after.frontmatter
    for name in [*new, *(key for key in old if key not in new)]:
        if name in old and name in new and old[name] == new[name]:
            continue
        change: Literal["added", "removed", "changed"] = (
            "added" if name not in old else "removed" if name not in new else "changed")
        changes.append({"name": str(name), "change": change, "before": old.get(name), "after": new.get(name)})
    return changes


def changed_names(before: Record, after: Record) -> list[str]:
    """``body`` when the body differs, then the keys ``field_changes`` finds."""
    names = [BODY] if before.body != after.body else []
    return names + [change["name"] for change in field_changes(before, after)]


def body_diff(before: Record, after: Record, old: int | str, new: int | str, max_lines: int) -> tuple[str, bool]:
    """A unified diff of the two bodies (``revision N`` as the file names), and whether it was cut."""
    lines = list(difflib.unified_diff(before.body.splitlines(), after.body.splitlines(), f"revision {old}",
                                      f"revision {new}", lineterm=""))
    return "\n".join(lines[:max_lines]), len(lines) > max_lines


def parsed(row: RevisionRow) -> Record | None:
    record, _ = parse_record(row.content, row.path)
    return record


def record_history(engine: "StoreEntry[OpenStore]", caller: "Caller", record_id: str,
                   history: RecordHistory) -> OperatorHistory:
    """``history`` (the store's answer) with each revision's ``changed``, read from the revision archive."""
    # Each kept version by its number and sha256: an edit outside the engine keeps the number of the
    # version before it, so the number alone names two.
    def work(runtime: "OpenStore", authority: "Authority") -> dict[tuple[int, str], list[str]]:
        changed: dict[tuple[int, str], list[str]] = {}
        previous: Record | None = None
        for number, row in enumerate(runtime.catalog.revisions(authority.partition, record_id)):
            record = parsed(row)
            if record is not None and (number == 0 or previous is not None):
                changed[row.revision, row.sha256] = [] if previous is None else changed_names(previous, record)
            previous = record
        return changed

    changed = engine.on_store(caller, work)
    revisions: list[ChangedRevision] = []
    for revision in history["revisions"]:
        entry: ChangedRevision = {**revision}  # type: ignore[typeddict-item]
        if (revision["revision"], revision["sha256"]) in changed:
            entry["changed"] = changed[revision["revision"], revision["sha256"]]
        revisions.append(entry)
    return {**history, "revisions": revisions}  # type: ignore[typeddict-item]


def structured_diff(before_row: RevisionRow, after_row: RevisionRow, labels: tuple[str, str],
                    max_lines: int) -> dict[str, Any]:
    """``readable`` (both files are records), the ``fields`` that changed and the ``bodyDiff`` (its versions
    named by ``labels``, as ``store.catalog_reads.version_label`` names them)."""
    before, after = parsed(before_row), parsed(after_row)
    if before is None or after is None:
        return {"readable": False, "fields": [], "bodyDiff": "", "bodyTruncated": False}
    text, cut = body_diff(before, after, *labels, max_lines)
    return {"readable": True, "fields": field_changes(before, after), "bodyDiff": text, "bodyTruncated": cut}
