"""Light and dark themes (the system's by default, or View › Theme, remembered), the message bar's own
colours, readable in both, and the confirmation of saved gate settings."""

from __future__ import annotations

from typing import Iterator

import pytest
from PySide6.QtCore import QSettings, Qt
from PySide6.QtGui import QColor, QGuiApplication, QPalette

from desktop.common.widgets import BAR_COLOURS, MessageBar, is_dark
from desktop.theme import THEME_KEY, ThemeController
from tests.desktop.conftest import wait_for_signal


@pytest.fixture
def settings(tmp_path) -> QSettings:
    return QSettings(str(tmp_path / "desktop.ini"), QSettings.Format.IniFormat)


@pytest.fixture
def restore_theme(qapp, settings) -> Iterator[None]:
    yield
    settings.setValue(THEME_KEY, "system")
    ThemeController(settings).apply()  # later tests get the system's palette back


@pytest.fixture
def window_settings(settings, restore_theme):
    return settings


@pytest.fixture
def window(connected_window):
    return connected_window


def contrast(one: str, other: str) -> float:
    """The WCAG contrast ratio of two colours."""
    def luminance(name: str) -> float:
        channels = []
        for value in QColor(name).getRgbF()[:3]:
            channels.append(value / 12.92 if value <= 0.03928 else ((value + 0.055) / 1.055) ** 2.4)
        return 0.2126 * channels[0] + 0.7152 * channels[1] + 0.0722 * channels[2]

    high, low = sorted((luminance(one), luminance(other)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_the_system_scheme_is_followed_by_default_and_a_choice_is_remembered(qtbot, settings,
                                                                               restore_theme) -> None:
    theme = ThemeController(settings)
    assert theme.choice == "system"
    system_dark = QGuiApplication.styleHints().colorScheme() == Qt.ColorScheme.Dark
    assert theme.apply() == ("dark" if system_dark else "light") == ("dark" if is_dark() else "light")

    with qtbot.waitSignal(theme.sig_theme_applied, check_params_cb=lambda applied: applied == "dark"):
        theme.set_choice("dark")
    palette = QGuiApplication.palette()
    assert is_dark(palette) and contrast(palette.color(QPalette.ColorRole.Text).name(),
                                         palette.color(QPalette.ColorRole.Base).name()) > 7
    assert contrast(palette.color(QPalette.ColorRole.Link).name(), palette.color(QPalette.ColorRole.Base).name()) > 4.5
    assert QSettings(settings.fileName(), QSettings.Format.IniFormat).value(THEME_KEY) == "dark"
    assert ThemeController(QSettings(settings.fileName(), QSettings.Format.IniFormat)).choice == "dark"

    assert theme.set_choice("light") is None and not is_dark()
    with pytest.raises(ValueError, match="system, light, dark"):
        theme.set_choice("purple")
    assert theme.choice == "light" and settings.value(THEME_KEY) == "light"  # a bad choice changes nothing


def test_view_theme_switches_the_window_and_its_html_follows(qtbot, window) -> None:
    theme_actions = window.theme_actions
    assert [plain for plain in theme_actions] == ["system", "light", "dark"] and theme_actions["system"].isChecked()
    window.show_view(window.views.index(window.health_view))
    qtbot.waitUntil(lambda: "Store:" in window.health_view.summary.toPlainText(), timeout=10_000)
    light_text = QGuiApplication.palette().color(QPalette.ColorRole.Text).name()

    theme_actions["dark"].trigger()
    assert window.theme.choice == "dark" and is_dark()
    dark_text = QGuiApplication.palette().color(QPalette.ColorRole.Text).name()
    assert dark_text != light_text  # the HTML is rendered again in the new colours (on the palette's change event)
    qtbot.waitUntil(lambda: dark_text in window.health_view.summary.document().defaultStyleSheet(), timeout=5_000)
    assert theme_actions["dark"].isChecked() and not theme_actions["system"].isChecked()
    assert not window.navigation.item(0).icon().isNull()

    theme_actions["system"].trigger()
    assert window.theme.choice == "system"


@pytest.mark.parametrize("dark", [False, True])
def test_the_message_bar_has_its_own_readable_colours(qtbot, settings, restore_theme, dark) -> None:
    theme = ThemeController(settings)
    theme.set_choice("dark" if dark else "light")
    bar = MessageBar()
    qtbot.addWidget(bar)
    highlight = QGuiApplication.palette().color(QPalette.ColorRole.Highlight).name()
    for error, show in ((True, bar.show_error), (False, bar.show_info)):
        show("Something to read")
        background = bar.palette().color(QPalette.ColorRole.Window).name()
        text = bar.label.palette().color(QPalette.ColorRole.WindowText).name()
        assert (background, text) == BAR_COLOURS[("error" if error else "info", dark)]
        assert background != highlight and contrast(background, text) > 7
    error_colours = BAR_COLOURS[("error", dark)]
    bar.show_error("Still here")
    theme.set_choice("light" if dark else "dark")  # the theme changes while the bar is shown
    qtbot.waitUntil(lambda: bar.palette().color(QPalette.ColorRole.Window).name()
                    == BAR_COLOURS[("error", not dark)][0], timeout=5_000)
    assert BAR_COLOURS[("error", not dark)] != error_colours


def test_saving_gate_settings_is_confirmed_in_the_window(qtbot, window) -> None:
    window.show_view(window.views.index(window.gate_view))
    form = window.gate_view.settings
    qtbot.waitUntil(lambda: form.current is not None and form.save_button.isEnabled(), timeout=10_000)
    wait_for_signal(qtbot, form.sig_settings_saved, form.save_button.click)
    assert window.messages.isVisible() and not window.messages.error
    assert window.messages.label.text() == "Recall gate settings saved to config.json."
    assert form.verdict.text() == "Saved to config.json."
