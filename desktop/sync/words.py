"""What the Sync section says: a remote's state in plain words, times relative to now, and a coloured diff.

Pure functions of the engine's status shapes (``engine/sync/status.py``) and of ``now``, so what the
owner reads is tested without a clock: the view passes its own ``now`` (local time, aware), and a time
is shown in ``now``'s zone.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from engine.sync.status import conflict_kind_words

from ..common.diffs import diff_html
from ..common.times import ago, clock_time
from ..common.widgets import esc

# What a failed round's finding (docs/sync.md) means, said to the owner; the engine's own message, which
# names the path or the remote's answer, is shown beside it.
FAILURES = {
    "unreachable": "the remote could not be reached",
    "rewritten": "the remote's history was rewritten (nothing was pushed over it)",
    "unsafe_path": "the remote holds a file outside the vault's folders",
    "symlink": "the remote holds a symbolic link",
    "submodule": "the remote holds a submodule",
    "too_large": "the remote holds a file over the size limits",
    "invalid_record": "the remote holds a record that is not valid",
    "other_store": "the remote holds another store",
    "not_a_vault": "the remote does not hold a vault",
    "partition_missing": "the remote lacks a whole partition folder",
    "git_failed": "git failed",
    "git_missing": "git is not installed",
}


def failure(error: dict[str, Any] | None) -> str:
    """Why a round failed, in plain words (the engine's message when the finding is not one listed)."""
    if not error:
        return "the reason was not recorded"
    return FAILURES.get(error.get("code") or "", "") or (error.get("message") or "").rstrip(".") or "unknown"


def remote_state(remote: dict[str, Any], now: datetime, *, reason: bool = False) -> str:
    """``Last synced 3 minutes ago``, ``Failing since 10:02: the remote could not be reached``, ...

    With ``reason``, a failure is said in the engine's own message, which names why (the credentials git
    lacks, the repository that is not there): for the message bar, which has no tooltip to hold it."""
    state = remote.get("state")
    if state == "syncing":
        return "Syncing now…"
    if state == "failing":
        error = remote.get("lastError") or {}
        why = (error.get("message") or "").rstrip(".") if reason else ""
        said = f"Failing since {clock_time(error.get('at') or remote.get('lastAttempt'), now)}: {why or failure(error)}"
        if remote.get("lastSuccess"):
            said += f" (last synced {ago(remote['lastSuccess'], now)})"
        return said
    if state == "ok" or remote.get("lastSuccess"):
        return f"Last synced {ago(remote.get('lastSuccess') or remote.get('lastAttempt'), now)}"
    return "Not synced yet"


def count(value: int | None) -> str:
    """Ahead or behind: a number of commits, or that it is not known until a round has run."""
    return "not known yet" if value is None else f"{value:,}"


def other_machines(remote: dict[str, Any]) -> str:
    """The other machines on a remote by the names their computers gave them (``laptop, study-pc``); a machine
    that recorded none (an older version's) by its sync id, and a name two of them share with the id too."""
    names = remote.get("machineNames") or {}
    shown = [names.get(machine) or machine for machine in remote.get("machines") or []]
    return ", ".join(f"{said} ({machine})" if shown.count(said) > 1 else said
                     for said, machine in zip(shown, remote.get("machines") or [])) or "none yet"


def other_machines_tip(remote: dict[str, Any]) -> str:
    """Each other machine with its sync id, the one conflicts and the engine's log name it by."""
    names = remote.get("machineNames") or {}
    lines = [f"{names[machine]}: sync id {machine}" if machine in names else
             f"{machine}: no name recorded (it runs an older version of Knowledge Desk)"
             for machine in remote.get("machines") or []]
    return "\n".join(lines) or "No other machine has synced this store through this remote yet."


def revision(found: dict[str, Any] | None) -> str:
    """``revision 4`` (``revision 1.1`` for an edit made outside the engine) of a conflict's side, named as the
    record's History names it; a file that is no record has none."""
    if not found:
        return "none (removed)"
    if found.get("revision") is None:
        return "the file"
    return f"revision {found.get('label') or found['revision']}"


def version(found: dict[str, Any] | None) -> str:
    """``revision 4 (pages/person/alice.md)`` of a conflict's side; a file that is no record has no revision."""
    if not found:
        return "none (removed)"
    where = found.get("path") or ""
    return f"{revision(found)} ({where})" if found.get("revision") is not None else where


def dated(found: dict[str, Any] | None, now: datetime) -> str:
    """``, written 3 minutes ago``: when a side was written, as History dates it; a version that kept the
    number of the one before it (edited outside the engine, ``1.1``) still carries that one's ``updated_at``,
    so it is dated when this machine first kept it."""
    if not found:
        return ""
    if "." in str(found.get("label") or "") and found.get("seenAt"):
        return f", edited outside the engine, seen {ago(found['seenAt'], now)}"
    return f", written {ago(found['updatedAt'], now)}" if found.get("updatedAt") else ""


def conflict_name(conflict: dict[str, Any]) -> str:
    """What the owner calls the conflict's record: its title; else its id, or the file's path for a file that is
    no record."""
    return conflict.get("title") or conflict.get("recordId") or (conflict.get("standing") or {}).get("path") or "a file"


def conflict_kind(conflict: dict[str, Any]) -> str:
    """What the conflict is, in the words ``knowledge sync status`` says it in."""
    return conflict_kind_words(conflict.get("kind"))


def conflict_html(conflict: dict[str, Any], now: datetime) -> str:
    """Which version stands, where the other is kept, and the diff from the other to the standing one."""
    standing, other = conflict.get("standing") or {}, conflict.get("other")
    title, path = conflict.get("title"), standing.get("path") or "A file"
    record = f" ({path})" if title else f" (record {conflict['recordId']})" if conflict.get("recordId") else ""
    parts = [f"<h3>{esc(title or path)}{esc(record)}</h3>",
             f"<div><b>Stands:</b> {esc(version(standing))}{esc(dated(standing, now))}</div>",
             f"<div><b>Not standing:</b> {esc(version(other))}{esc(dated(other, now))}"
             " — kept in the record's history and in git</div>",
             f"<div class=\"muted\">{esc(conflict_kind(conflict).capitalize())}; met syncing with "
             f"{esc(conflict.get('remote'))} {esc(ago(conflict.get('at'), now))}. Dismiss it once read: both "
             "versions stay.</div>"]
    diff = conflict.get("diff") or ""
    parts.append(diff_html(diff) if diff else "<div class=\"muted\">The two versions hold the same text.</div>")
    return "".join(parts)
