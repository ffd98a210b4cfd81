"""Light and dark themes: follow the system's colour scheme, or the owner's choice, remembered.

``System`` (the default) follows ``QStyleHints.colorScheme`` and changes
with it while the window is open.  ``Light`` and ``Dark`` ask the platform
for that scheme (``QStyleHints.setColorScheme``, which native platforms
honour, title bars included).  Where the palette Qt ends up with does not
match the scheme wanted (a platform with no theme of its own, such as X11
without a desktop environment's Qt theme, or the offscreen platform), the
application gets a light or dark palette of its own: Qt's palette generated
from one window colour, with readable link and placeholder colours.  The
choice is kept in ``QSettings`` under ``THEME_KEY``.

The views take every colour from the application palette (HTML re-renders
when it changes), so nothing else needs to know which theme is in force.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, QSettings, Qt, Signal
from PySide6.QtGui import QColor, QGuiApplication, QPalette

from .common.widgets import is_dark

THEMES = ("system", "light", "dark")
THEME_KEY = "view/theme"

_SCHEMES = {"light": Qt.ColorScheme.Light, "dark": Qt.ColorScheme.Dark}


def desk_settings() -> QSettings:
    """The window's own settings (``~/.config/knowledge-desk/desktop.ini`` on Linux), apart from the engine's."""
    return QSettings(QSettings.Format.IniFormat, QSettings.Scope.UserScope, "knowledge-desk", "desktop")


def own_palette(dark: bool) -> QPalette:
    """A complete light or dark palette, for platforms whose own palette does not follow the scheme."""
    palette = QPalette(QColor("#353535" if dark else "#efefef"))  # Qt derives the other roles from it
    roles = {
        QPalette.ColorRole.Base: "#252525" if dark else "#ffffff",
        QPalette.ColorRole.AlternateBase: "#2e2e2e" if dark else "#f5f5f5",
        QPalette.ColorRole.Text: "#e8e8e8" if dark else "#1b1b1b",
        QPalette.ColorRole.WindowText: "#e8e8e8" if dark else "#1b1b1b",
        QPalette.ColorRole.ButtonText: "#e8e8e8" if dark else "#1b1b1b",
        QPalette.ColorRole.PlaceholderText: "#9a9a9a" if dark else "#6b6b6b",
        QPalette.ColorRole.ToolTipBase: "#3c3c3c" if dark else "#ffffdc",
        QPalette.ColorRole.ToolTipText: "#e8e8e8" if dark else "#1b1b1b",
        QPalette.ColorRole.Link: "#6cb2ff" if dark else "#0b57d0",
        QPalette.ColorRole.LinkVisited: "#c597ff" if dark else "#6a1b9a",
        QPalette.ColorRole.Highlight: "#2f6fd0" if dark else "#308cc6",
        QPalette.ColorRole.HighlightedText: "#ffffff",
    }
    for role, colour in roles.items():
        palette.setColor(QPalette.ColorGroup.Active, role, QColor(colour))
        palette.setColor(QPalette.ColorGroup.Inactive, role, QColor(colour))
    for role in (QPalette.ColorRole.Text, QPalette.ColorRole.WindowText, QPalette.ColorRole.ButtonText):
        palette.setColor(QPalette.ColorGroup.Disabled, role, QColor("#7f7f7f"))
    return palette


class ThemeController(QObject):
    """Applies the theme chosen (system, light or dark) to the application, and remembers the choice."""

    sig_theme_applied = Signal(str)
    """A theme was applied; the argument is the palette now in force: "light" or "dark"."""

    def __init__(self, settings: QSettings, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.settings = settings
        stored = str(settings.value(THEME_KEY, "system") or "system")
        self.choice = stored if stored in THEMES else "system"
        hints = QGuiApplication.styleHints()
        hints.colorSchemeChanged.connect(self._on_system_scheme_changed)

    def set_choice(self, choice: str) -> None:
        """Use ``choice`` (one of ``THEMES``) from now on, and remember it."""
        if choice not in THEMES:
            raise ValueError(f"a theme is one of {', '.join(THEMES)}, not {choice!r}")
        self.choice = choice
        self.settings.setValue(THEME_KEY, choice)
        self.settings.sync()
        self.apply()

    def wanted_dark(self) -> bool:
        if self.choice == "system":
            return QGuiApplication.styleHints().colorScheme() == Qt.ColorScheme.Dark
        return self.choice == "dark"

    def apply(self) -> str:
        """Bring the application's palette in line with the choice; returns "light" or "dark"."""
        app = QGuiApplication.instance()
        assert isinstance(app, QGuiApplication)
        hints = QGuiApplication.styleHints()
        if self.choice == "system":
            hints.unsetColorScheme()
        else:
            hints.setColorScheme(_SCHEMES[self.choice])
        app.setPalette(QPalette())  # the platform's palette for the scheme in force
        dark = self.wanted_dark()
        if is_dark(QGuiApplication.palette()) != dark:
            app.setPalette(own_palette(dark))  # the platform did not follow: use ours
        applied = "dark" if is_dark(QGuiApplication.palette()) else "light"
        self.sig_theme_applied.emit(applied)
        return applied

    def _on_system_scheme_changed(self, _scheme: Qt.ColorScheme) -> None:
        if self.choice == "system":
            self.apply()
