"""The sidebar: an icon for every view, and the engine's counts, which follow an agent's writes live."""

from __future__ import annotations

import threading

import pytest
from PySide6.QtCore import QSettings, QSize
from PySide6.QtGui import QIcon

from desktop.client import OperatorClient
from desktop.sidebar import ICONS
from tests.desktop import test_live
from tests.desktop.test_live import save_page

pytestmark = pytest.mark.usefixtures("isolated_settings")
served_again, open_window = test_live.served_again, test_live.open_window  # the live tests' fixtures


@pytest.fixture
def isolated_settings(tmp_path, monkeypatch):
    """The window's settings in the test's own folder (the theme choice is read from there)."""
    monkeypatch.setattr("desktop.main_window.desk_settings",
                        lambda: QSettings(str(tmp_path / "desktop.ini"), QSettings.Format.IniFormat))


def painted_pixels(icon: QIcon) -> int:
    image = icon.pixmap(QSize(20, 20)).toImage()
    return sum(1 for x in range(image.width()) for y in range(image.height()) if image.pixelColor(x, y).alpha())


def engine_counts(state, agent: str = "main") -> dict[str, int]:
    """What the engine says, asked directly (off the GUI thread, as a second operator)."""
    results: dict[str, int] = {}

    def ask() -> None:
        client = OperatorClient(state)
        inventory = client.call("operator/inventory")
        store = next(a for a in inventory["agents"] if a["name"] == agent)["store"]["storeId"]
        results["agents"] = len(inventory["agents"])
        notes = {"agent": agent, "kinds": ["page", "claim"], "limit": 1}  # as Records lists them, links left out
        results["records"] = client.call("operator/records", notes)["total"]
        results["approvals"] = client.call("operator/approvals", {"agent": agent, "limit": 1})["total"]
        results["partitions"] = len(client.call("operator/partitions", {"store": store})["partitions"])
        results["models"] = len(client.call("operator/models")["installed"])
        client.close()

    worker = threading.Thread(target=ask, name="test-operator")
    worker.start()
    worker.join(30)
    return results


def test_every_view_has_an_icon_drawn_in_the_palette(qtbot, served_again, open_window) -> None:
    window = open_window(served_again.state)
    sidebar = window.navigation
    assert sidebar.count() == len(window.views)
    for number, view in enumerate(window.views):
        item = sidebar.item(number)
        assert item.text() == view.title and not item.icon().isNull()
        assert painted_pixels(item.icon()) > 20  # a glyph, not an empty square
    assert sidebar.icon_names() == [ICONS[view.title] for view in window.views]


def test_the_counts_are_the_engines_and_follow_an_agents_write_without_f5(
        qtbot, served_again, open_window) -> None:
    window = open_window(served_again.state)
    sidebar = window.navigation
    views = {"agents": window.agents_view, "records": window.records_view, "approvals": window.approvals_view,
             "partitions": window.partitions_view, "models": window.models_view}
    expected = engine_counts(served_again.state)
    qtbot.waitUntil(lambda: all(sidebar.count_of(view) == expected[key] for key, view in views.items()),
                    timeout=10_000)
    assert expected["agents"] == 1 and expected["records"] > 0 and expected["approvals"] == 1
    assert sidebar.count_of(window.health_view) is None  # a view the engine reports no count for shows none

    token = served_again.engine.registry.add_credential("main")
    window.show_view(window.views.index(window.agents_view))  # away from Records, where the window opens
    with qtbot.waitSignal(window.counts.sig_counts_updated, timeout=10_000,
                          check_params_cb=lambda counts: counts.get("Records") == expected["records"] + 1):
        save_page(served_again, token, "Counted as it is written")  # the window is on Agents & stores, not Records
    assert sidebar.count_of(window.records_view) == expected["records"] + 1
    assert window.current_view() is window.agents_view


def test_the_icons_are_painted_once_the_window_has_painted_not_before(qtbot, served, tmp_path) -> None:
    from PySide6.QtCore import QEvent, QObject

    from desktop.main_window import MainWindow
    from desktop.tasks import EngineTasks

    class FirstPaint(QObject):
        """Whether the icons were there when the window's first paint began."""

        icons_then: bool | None = None

        def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt's name
            if event.type() == QEvent.Type.Paint and self.icons_then is None:
                self.icons_then = window.navigation.icons_painted
            return False

    tasks = EngineTasks()
    window = MainWindow(tasks, served)
    qtbot.addWidget(window)
    first_paint = FirstPaint(window)
    window.installEventFilter(first_paint)
    try:
        assert not window.navigation.icons_painted and window.navigation.item(0).icon().isNull()
        window.show()  # the first paint does not wait for the icon font
        qtbot.waitUntil(lambda: window.navigation.icons_painted, timeout=5_000)
        assert first_paint.icons_then is False
        assert not window.navigation.item(0).icon().isNull() and not window.refresh_action.icon().isNull()
    finally:
        tasks.shutdown()
