"""A benchmark's report written into its document without losing the sections written there by hand.

A benchmark's command writes its figures at the top of its document in docs/benchmarks/; below them the team
writes up the runs it made by hand (side-by-side comparisons, profiles, what was tried and dropped).  Writing
the report replaces the top and keeps those sections: from the line ``HAND_WRITTEN`` on, or, in a document
that has no such line yet, from its first ``## `` heading that the new report does not write itself.  The
line is then put before them, so the next run finds them by it.
"""

from __future__ import annotations

from pathlib import Path

HAND_WRITTEN = ("<!-- The sections below are written by hand. The benchmark's command rewrites what is above "
                "this line and keeps the rest. -->")


def write_report(path: Path | str, text: str) -> None:
    """``text`` in place of the measured part of the document at ``path``, its hand-written sections kept."""
    path = Path(path)
    kept = written_by_hand(path.read_text(encoding="utf-8") if path.is_file() else "", text)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{text.rstrip()}\n\n{HAND_WRITTEN}\n\n{kept}" if kept else text, encoding="utf-8")


def written_by_hand(document: str, report: str) -> str:
    """The sections of ``document`` that ``report`` does not write: those after ``HAND_WRITTEN``, else those
    from the first ``## `` heading ``report`` has not; empty when there are none."""
    if HAND_WRITTEN in document:
        kept = document.split(HAND_WRITTEN, 1)[1].strip("\n")
        return f"{kept}\n" if kept else ""
    made = {line.rstrip() for line in report.splitlines() if line.startswith("## ")}
    lines = document.splitlines()
    start = next((number for number, line in enumerate(lines)
                  if line.startswith("## ") and line.rstrip() not in made), None)
    return "\n".join(lines[start:]).rstrip("\n") + "\n" if start is not None else ""
