"""A unified diff as coloured HTML, in colours that read on the palette in force (light or dark).

Added lines are green and removed ones red, each on a faint background of its colour, hunk headers muted;
the colours are chosen for the palette when the HTML is made (a ``SafeTextBrowser`` makes it again when
the palette changes).  Record History and Sync's conflicts both show diffs this way.
"""

from __future__ import annotations

from .widgets import esc, is_dark

# Diff lines' text colours: added and removed, for a light and a dark palette.
DIFF_COLOURS = {
    ("added", False): "#1a7f37", ("added", True): "#7ee787",
    ("removed", False): "#cf222e", ("removed", True): "#ff7b72",
}
# The faint background behind each, so a line's kind reads at a glance (text above 4.5:1 on it).
DIFF_BACKGROUNDS = {
    ("added", False): "#e6ffec", ("added", True): "#12361e",
    ("removed", False): "#ffebe9", ("removed", True): "#471a1a",
}


def diff_style(kind: str, dark: bool | None = None) -> str:
    """The inline style of an ``added`` or ``removed`` line (or value) on the palette in force."""
    dark = is_dark() if dark is None else dark
    return f"color: {DIFF_COLOURS[(kind, dark)]}; background-color: {DIFF_BACKGROUNDS[(kind, dark)]}"


def diff_html(diff: str, dark: bool | None = None) -> str:
    """``diff`` (unified) as HTML: added lines green, removed red, file and hunk headers muted; a long line (a
    paragraph, as notes are written) wraps to the pane instead of running off its right edge."""
    dark = is_dark() if dark is None else dark
    lines = []
    for line in diff.splitlines():
        if line.startswith(("+++", "---", "@@")):
            lines.append(f'<span class="muted">{esc(line)}</span>')
        elif line.startswith("+"):
            lines.append(f'<span style="{diff_style("added", dark)}">{esc(line)}</span>')
        elif line.startswith("-"):
            lines.append(f'<span style="{diff_style("removed", dark)}">{esc(line)}</span>')
        else:
            lines.append(esc(line))
    return '<pre style="white-space: pre-wrap">' + "\n".join(lines) + "</pre>"
