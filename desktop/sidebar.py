"""The sidebar: one row per view, with an icon and the count the engine reports for it.

Icons come from qtawesome's Material Design set (``mdi6.*``), drawn in the
palette's text colour and drawn again when the palette changes (a light or
dark theme).  qtawesome paints its icon font with Qt, so it works on every
platform, the offscreen one included.  Only that one font is loaded
(``load_icons``, through qtawesome's ``IconicFont``), not the twelve
qtawesome bundles, and only once the window has first painted: it costs
about 0.2 s and 19 MiB, which the window's first paint does not wait for.

Counts (``SidebarCounts``) are the figures the engine already answers with:
agents (``operator/inventory``), the current pages and claims of the agent's
private partition (``operator/records``, one row asked for, its ``total`` read;
links are counted on the pages, as Records lists them by default), its
approved recall blocks (``operator/approvals``), the partitions of its store
(``operator/partitions``) and the installed models (``operator/models``).
They are asked again when the agent changes, on F5, and after each batch of
the engine's change notifications the window applies, so they follow what
agents do.  A count the engine cannot give (a store not created yet) is
left off, never shown as 0.  They are asked in the background
(``EngineTasks.request(background=True)``): the view in front is answered
first, and the counts follow it by a few cheap calls (tens of milliseconds
each, the ``limit: 1`` pages' totals).
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QEvent, QModelIndex, QObject, QPersistentModelIndex, QRect, QSize, Qt, Signal
from PySide6.QtGui import QGuiApplication, QIcon, QPainter, QPalette
from PySide6.QtWidgets import (
    QListWidget,
    QListWidgetItem,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QWidget,
)

from .records.view import NOTE_KINDS
from .tasks import EngineTasks

FULL_PX, COMPACT_PX = 230, 48  # the sidebar's width with its names and counts, and with its icons alone
COUNT_ROLE = Qt.ItemDataRole.UserRole + 10  # the count shown at the right of a row (None: none)
# qtawesome 1.4.2's Material Design 6 font (pinned in pyproject.toml, so the file names are known).
ICON_FONT = ("mdi6", "materialdesignicons6-webfont-6.9.96.ttf", "materialdesignicons6-webfont-charmap-6.9.96.json")
_FONT: dict[str, Any] = {}  # the icon font, read once per process (qtawesome keeps its own fonts the same way)
DEFAULT_ICON = "mdi6.view-dashboard-outline"
ICONS = {  # by view title; a view may name its own with an ``icon_name`` attribute
    "Agents & stores": "mdi6.account-multiple-outline",
    "Records": "mdi6.file-document-multiple-outline",
    "Vocabulary": "mdi6.shape-outline",
    "Recall approvals": "mdi6.check-decagram-outline",
    "What the agent sees": "mdi6.eye-outline",
    "Health": "mdi6.heart-pulse",
    "Recall gate": "mdi6.gate",
    "Models": "mdi6.cube-outline",
    "Partitions": "mdi6.chart-pie",
    "Sync": "mdi6.sync",
}


def load_icons() -> Any:
    """The icon font, read the first time (its files: on the GUI thread, where Qt adds fonts)."""
    if "font" not in _FONT:
        from qtawesome.iconic_font import IconicFont  # imported here: qtawesome's import is most of the cost

        _FONT["font"] = IconicFont(ICON_FONT)
    return _FONT["font"]


def icon(name: str, palette: QPalette | None = None) -> QIcon:
    """A Material Design icon in the palette's text colour (its disabled colour when disabled)."""
    palette = palette or QGuiApplication.palette()
    return load_icons().icon(name, color=palette.color(QPalette.ColorRole.WindowText),
                          color_disabled=palette.color(QPalette.ColorGroup.Disabled, QPalette.ColorRole.WindowText),
                          color_active=palette.color(QPalette.ColorRole.WindowText),
                          color_selected=palette.color(QPalette.ColorRole.HighlightedText))


def view_shortcut(number: int) -> str | None:
    """The key that shows the ``number``th view (from 1): Ctrl+1 to Ctrl+9, then Ctrl+0 for the tenth."""
    return f"Ctrl+{number % 10}" if number <= 10 else None


def icon_name(view: Any) -> str:
    return getattr(view, "icon_name", None) or ICONS.get(getattr(view, "title", ""), DEFAULT_ICON)


class _CountDelegate(QStyledItemDelegate):
    """Paints a row as usual, then its count at the right edge in the placeholder colour; in a compact
    sidebar, the icon alone."""

    def __init__(self, sidebar: Sidebar) -> None:
        super().__init__(sidebar)
        self.sidebar = sidebar

    def initStyleOption(self, option: QStyleOptionViewItem,  # noqa: N802 - Qt's name
                        index: QModelIndex | QPersistentModelIndex) -> None:
        super().initStyleOption(option, index)
        if self.sidebar.compact:
            option.text = ""  # the name and count are on hover
            option.decorationPosition = QStyleOptionViewItem.Position.Top
            option.decorationAlignment = Qt.AlignmentFlag.AlignCenter

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex) -> None:
        count = index.data(COUNT_ROLE)
        super().paint(painter, option, index)
        if count is None or self.sidebar.compact:
            return
        painter.save()
        selected = bool(option.state & QStyle.StateFlag.State_Selected)
        role = QPalette.ColorRole.HighlightedText if selected else QPalette.ColorRole.PlaceholderText
        painter.setPen(option.palette.color(role))
        area = QRect(option.rect).adjusted(0, 0, -10, 0)
        painter.drawText(area, int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter), f"{count:,}")
        painter.restore()

    def sizeHint(self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex) -> QSize:
        size = super().sizeHint(option, index)
        if self.sidebar.compact:  # the icon alone, centred in the sidebar's width
            return QSize(self.sidebar.viewport().width(), max(size.height(), 30))
        return QSize(size.width() + 48, max(size.height(), 30))


class Sidebar(QListWidget):
    """The views, one row each: icon, title and count; choosing a row shows its view.  Compact (a narrow
    window), the icons alone, each row's title, count and shortcut on hover."""

    def __init__(self, views: list[Any], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.views = views
        self.compact = False
        self.setFixedWidth(FULL_PX)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)  # its rows fit its width
        self.setIconSize(QSize(20, 20))
        self.setItemDelegate(_CountDelegate(self))
        self.setUniformItemSizes(True)
        self.setAccessibleName("Views")
        self.setAccessibleDescription("What the window shows; Ctrl+1 to Ctrl+9 and Ctrl+0 show each view")
        for number, view in enumerate(views, start=1):
            item = QListWidgetItem(view.title)
            self.addItem(item)
            self._say(number - 1)
        self.icons_painted = False  # painted once the window has shown (``paint_icons``)

    def set_compact(self, compact: bool) -> None:
        """The icons alone (``COMPACT_PX`` wide), or each row's icon, title and count."""
        if compact != self.compact:
            self.compact = compact
            self.setFixedWidth(COMPACT_PX if compact else FULL_PX)
            self.doItemsLayout()
            self.viewport().update()

    def set_count(self, view: Any, count: int | None) -> None:
        """Show ``count`` beside ``view`` (None: no count)."""
        number = self.views.index(view)
        self.item(number).setData(COUNT_ROLE, count)
        self._say(number)

    def _say(self, number: int) -> None:
        """A row's title and count, for the hover and for screen readers; its shortcut on hover too."""
        item, view = self.item(number), self.views[number]
        count = item.data(COUNT_ROLE)
        title = view.title if count is None else f"{view.title}: {count:,}"
        key = view_shortcut(number + 1)
        item.setToolTip(f"{title} ({key})" if key else title)
        item.setData(Qt.ItemDataRole.AccessibleTextRole, title)

    def count_of(self, view: Any) -> int | None:
        return self.item(self.views.index(view)).data(COUNT_ROLE)

    def icon_names(self) -> list[str]:
        return [icon_name(view) for view in self.views]

    def paint_icons(self) -> None:
        """Give every row its icon, in the palette's colours (again after a theme change)."""
        palette = QGuiApplication.palette()
        for number, view in enumerate(self.views):
            self.item(number).setIcon(icon(icon_name(view), palette))
        self.icons_painted = True

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 - Qt's name
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange and self.icons_painted:
            self.paint_icons()


class SidebarCounts(QObject):
    """Asks the engine for the sidebar's counts, for the agent in view; a newer round replaces an older one."""

    sig_counts_updated = Signal(object)
    """A round of counts arrived: ``{view title: count or None}`` for the counts it asked."""

    def __init__(self, tasks: EngineTasks, sidebar: Sidebar, views: dict[str, Any], parent: QObject | None = None
                 ) -> None:
        super().__init__(parent)
        self.tasks = tasks
        self.sidebar = sidebar
        self.views = views  # "agents", "records", "approvals", "partitions", "models" -> the view
        self._round = 0

    def set_inventory_count(self, inventory: dict[str, Any]) -> None:
        self.sidebar.set_count(self.views["agents"], len(inventory.get("agents") or []))

    def refresh(self, agent: str | None, store_id: str | None) -> None:
        """Ask every count again for ``agent`` (and its store)."""
        self._round += 1
        this_round = self._round
        requests: list[tuple[str, str, dict[str, Any] | None]] = [("models", "operator/models", None)]
        if agent is not None:
            requests += [("records", "operator/records",
                          {"agent": agent, "status": "current", "kinds": NOTE_KINDS, "limit": 1}),
                         ("approvals", "operator/approvals", {"agent": agent, "limit": 1})]
        else:
            for key in ("records", "approvals"):
                self.sidebar.set_count(self.views[key], None)
        if store_id is not None:
            requests.append(("partitions", "operator/partitions", {"store": store_id}))
        else:
            self.sidebar.set_count(self.views["partitions"], None)
        readers = {"records": lambda r: int(r["total"]), "approvals": lambda r: int(r["total"]),
                   "partitions": lambda r: len(r.get("partitions") or []),
                   "models": lambda r: len(r.get("installed") or [])}
        results: dict[str, int | None] = {}
        for key, method, params in requests:
            def done(result: dict[str, Any], key: str = key) -> None:
                self._arrived(this_round, key, readers[key](result), results, len(requests))

            def failed(_message: str, key: str = key) -> None:
                self._arrived(this_round, key, None, results, len(requests))  # no count is better than a wrong one

            self.tasks.request(method, params, done, on_error=failed, owner=self, background=True)

    def _arrived(self, this_round: int, key: str, count: int | None, results: dict[str, int | None],
                 expected: int) -> None:
        if this_round != self._round:
            return  # an older round, for another agent or before newer changes
        self.sidebar.set_count(self.views[key], count)
        results[self.views[key].title] = count
        if len(results) == expected:
            self.sig_counts_updated.emit(dict(results))
