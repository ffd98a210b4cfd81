"""What an import or an export says it did: the words ``knowledge import`` and ``knowledge export`` print
and the window's Import and Export dialogs show, from the result either returns."""

from __future__ import annotations

from typing import Any

from ..core.words import counted


def import_summary(result: dict[str, Any]) -> str:
    reused = result.get("reused") or {}
    if result.get("dryRun"):  # what a real run would write, and what an earlier run made
        made = result.get("wouldCreate") or {}
        counts = {kind: n + reused.get(kind, 0) for kind, n in made.items()}
    else:
        counts = result.get("imported") or {}
        made = {kind: n - reused.get(kind, 0) for kind, n in counts.items()}  # what this run wrote
    lines = []
    if "tokenFile" in result:
        lines.append(f"Registered owner agent {result['agent']}; its token is in {result['tokenFile']}.")
    if result.get("dryRun"):
        lines.append(_dry_run_summary(result["format"], counts, made, reused))
    elif not any(counts.values()):  # no record stands for the input: nothing written, nobody registered
        lines.append(f"Nothing imported: the {result['format']} input holds nothing to import; nothing was "
                     "written and no agent was registered.")
    elif not any(made.values()):
        lines.append(f"Nothing new: all {_listed(counts, 'and')} of the {result['format']} input in "
                     f"{result['agent']}'s store were already made by an earlier run of this input; nothing was "
                     "written.")
    elif any(reused.values()):
        lines.append(f"Imported {result['format']} into {result['agent']}'s store: {_listed(made)} new, "
                     f"and {_listed(reused)} reused (made by an earlier run of this input).")
    else:
        lines.append(f"Imported {result['format']} into {result['agent']}'s store: {_listed(counts)}.")
    lines.extend(result.get("notes") or [])
    return "\n".join(lines)


def _dry_run_summary(format_name: str, counts: dict[str, int], made: dict[str, int], reused: dict[str, int]) -> str:
    """A dry run's line: what a real run would write, and what it would find an earlier run made."""
    if any(made.values()) or not any(counts.values()):
        also = f", and reuse {_listed(reused)} (made by an earlier run of this input)" if any(reused.values()) else ""
        return f"Dry run of the {format_name} import: it would create {_listed(made)}{also}; nothing was written."
    return (f"Dry run of the {format_name} import: nothing new: all {_listed(counts, 'and')} of the input were "
            "already made by an earlier run of this input; nothing was written.")


def _listed(counts: dict[str, int], last: str = "") -> str:
    """``2 sources, 1 page``, ``1,875 pages`` (``last``: the word before the last count, ``2 sources and 1 page``)."""
    shown = [counted(n, kind[:-1], kind) for kind, n in counts.items() if n]
    if last and len(shown) > 1:
        return f"{', '.join(shown[:-1])} {last} {shown[-1]}"
    return ", ".join(shown) or "nothing"


def export_summary(result: dict[str, Any]) -> str:
    name = f" ({result['name']})" if result.get("name") else ""
    lines = [f"Exported store {result['storeId']}{name} to {result['archive']}: {result['files']} vault files, "
             f"{result['revisions']} kept revisions, {result['conversations']} conversation owners.",
             f"History: {(result.get('history') or {}).get('note')}."]
    lines.extend(f"Left out (not a regular file, or a name that is not UTF-8): {path}"
                 for path in result.get("skipped") or [])
    return "\n".join(lines)
