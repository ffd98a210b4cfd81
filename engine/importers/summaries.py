"""What an import or an export says it did: the words ``knowledge import`` and ``knowledge export`` print
and the window's Import and Export dialogs show, from the result either returns."""

from __future__ import annotations

from typing import Any


def import_summary(result: dict[str, Any]) -> str:
    counts = result.get("wouldCreate") or result.get("imported") or {}
    shown = ", ".join(f"{n} {kind}" for kind, n in counts.items() if n) or "nothing"
    lines = []
    if "tokenFile" in result:
        lines.append(f"Registered owner agent {result['agent']}; its token is in {result['tokenFile']}.")
    if result.get("dryRun"):
        lines.append(f"Dry run of the {result['format']} import: it would create {shown}; nothing was written.")
    elif not any(counts.values()):  # no record stands for the input: nothing written, nobody registered
        lines.append(f"Nothing imported: the {result['format']} input holds nothing to import; nothing was "
                     "written and no agent was registered.")
    else:
        lines.append(f"Imported {result['format']} into {result['agent']}'s store: {shown} "
                     "(records an earlier run of the same input made are reused, not repeated).")
    lines.extend(result.get("notes") or [])
    return "\n".join(lines)


def export_summary(result: dict[str, Any]) -> str:
    name = f" ({result['name']})" if result.get("name") else ""
    lines = [f"Exported store {result['storeId']}{name} to {result['archive']}: {result['files']} vault files, "
             f"{result['revisions']} kept revisions, {result['conversations']} conversation owners.",
             f"History: {(result.get('history') or {}).get('note')}."]
    lines.extend(f"Left out (not a regular file, or a name that is not UTF-8): {path}"
                 for path in result.get("skipped") or [])
    return "\n".join(lines)
