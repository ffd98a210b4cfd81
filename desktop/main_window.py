"""The Knowledge Desk window: an agent selector, the views, and the message bar.

The window is a client of the engine: it attaches to the running engine or
starts one (on the worker thread), then every view asks through
``EngineTasks``.  Views scoped to an agent load when they are shown, for the
agent chosen in the toolbar.

It is live (``desktop/live.py``): the engine's change notifications are
gathered for ``LIVE_GATHER_MS`` and then the views they concern reload, the
one in front at once and the others when next shown; the status bar says
at once when the engine is lost, and when one is back the window reconnects,
clears the errors of the old one and reloads every view.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QByteArray, QCoreApplication, QEvent, QPoint, QRect, QSettings, QSize, Qt, QTimer, Signal
from PySide6.QtGui import (QAction, QActionGroup, QCloseEvent, QGuiApplication, QKeySequence, QPaintEvent,
                           QResizeEvent)
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QMainWindow,
    QMessageBox,
    QScrollArea,
    QStackedWidget,
    QToolBar,
    QVBoxLayout,
    QWidget,
)

from engine.core.links import record_link
from engine.state.statedir import StateDir

from . import launcher
from .agents.view import AgentsView
from .approvals.view import ApprovalsView
from .common.widgets import DeskTable, MessageBar, named, plain_label
from .connect.agent_dialog import ConnectAgentDialog
from .connect.settings_dialog import SettingsDialog
from .gate.view import GateView
from .health.view import HealthView
from .links import LinkOpener
from .live import EngineWatch
from .menus import MenuBar, ShortcutsDialog
from .model_manager.view import ModelsView
from .partitions.view import PartitionsView
from .preview.view import PreviewView
from .records.view import RecordsView
from .sidebar import Sidebar, SidebarCounts, icon, view_shortcut
from .sync.view import SyncView
from .tasks import EngineTasks, says_no_store
from .theme import THEMES, ThemeController, desk_settings
from .transfer.dialogs import ExportDialog, ImportDialog, owner_agents
from .tray import DeskTray
from .vocabulary.view import VocabularyView

LIVE_GATHER_MS = 300  # changes arriving within this long share one reload: at most about three a second
NO_AGENTS_TEXT = "No agents yet: add one with Add agent… (Ctrl+N)."
COUNTED_TOPICS = {"publications", "stores", "grants", "jobs", "models"}  # the changes that can move a sidebar count
DEFAULT_SIZE = QSize(1280, 800)
FRAME_ROOM = QSize(16, 48)  # a window manager's borders and title bar, outside the size a window is given
GEOMETRY_KEY = "window/geometry"  # the window's size, place and maximised state when it last closed
COMPACT_BELOW_PX = 1000  # a window narrower than this shows the sidebar's icons only, the names on hover
SUMMARY_ASIDE = ("The import's summary is set aside: File › Import… (Ctrl+I) shows it again, its other links "
                 "with it.")


def fitted(wanted: QSize, available: QSize) -> QSize:
    """``wanted``, made smaller where the screen's free area (less a frame's room) is: a window opened on a
    1024x768 screen fits on it rather than running off its right and bottom edges."""
    return wanted.boundedTo(available - FRAME_ROOM)


class ViewStack(QStackedWidget):
    """The views, one shown at a time, asking for the room of the view shown only (a stacked widget asks for
    its largest page's), so that a window too small for a view scrolls that view alone."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.currentChanged.connect(lambda _number: self.updateGeometry())

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        shown = self.currentWidget()
        return shown.minimumSizeHint().expandedTo(shown.minimumSize()) if shown is not None else QSize(0, 0)

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        shown = self.currentWidget()
        return shown.sizeHint() if shown is not None else QSize(0, 0)

    def hasHeightForWidth(self) -> bool:  # noqa: N802 - Qt's name
        # A view's height for a width is the height its wrapped text would like, more than it needs: the view is
        # squeezed to the window's height down to its minimum, as it was without the scroll area around it.
        return False


def placed(size: QSize, available: QRect) -> QPoint:
    """Where a window of ``size`` (its frame's room added) sits centred in the screen's free area: asked for
    rather than left to the window manager, which may cascade a second window down and off a small screen."""
    room = available.size() - size - FRAME_ROOM
    return available.topLeft() + QPoint(max(0, room.width() // 2), max(0, room.height() // 2))


class MainWindow(QMainWindow):
    sig_engine_connected = Signal(str)
    """The operator connection is open (a description of the engine)."""

    sig_live_applied = Signal(object)
    """A batch of the engine's change notifications was applied (the views it reloaded)."""

    def __init__(self, tasks: EngineTasks, state: StateDir, parent: QWidget | None = None, *,
                 settings: QSettings | None = None) -> None:
        super().__init__(parent)
        self.theme = ThemeController(settings if settings is not None else desk_settings(), self)
        self.theme.apply()
        self.tasks = tasks
        self.state = state
        self.handle: launcher.EngineHandle | None = None
        self.agent: str | None = None
        self.setWindowTitle(f"Knowledge Desk — {state.root}")
        self._restore_geometry()

        self.agents_view = AgentsView(tasks)
        self.records_view = RecordsView(tasks, settings=self.theme.settings)
        self.vocabulary_view = VocabularyView(tasks)
        self.approvals_view = ApprovalsView(tasks)
        self.preview_view = PreviewView(tasks)
        self.health_view = HealthView(tasks)
        self.gate_view = GateView(tasks)
        self.models_view = ModelsView(tasks)
        self.partitions_view = PartitionsView(tasks)
        self.sync_view = SyncView(tasks)
        self.views: list[QWidget] = [self.agents_view, self.records_view, self.vocabulary_view,
                                     self.approvals_view, self.preview_view, self.health_view, self.gate_view,
                                     self.models_view, self.partitions_view, self.sync_view]
        self.inventory: dict[str, Any] = {"agents": [], "stores": []}
        self._inventoried = False  # the first inventory has come (the window opens on Records, or without agents
        # on Agents & stores once it knows)
        self._shown: set[int] = set()  # views shown at least once (they hold something to reload)
        self._stale: set[int] = set()  # views a change concerned while they were not in front
        self._live_changes: list[dict[str, Any]] = []
        self._live_resync = False
        self._live_timer = QTimer(self)
        self._live_timer.setSingleShot(True)
        self._live_timer.setInterval(LIVE_GATHER_MS)
        self._live_timer.timeout.connect(self._apply_changes)
        self._lost = False
        self._connecting = False
        self.watch = EngineWatch(state, parent=self)
        self.watch.sig_changes_arrived.connect(self._on_changes_arrived)
        self.watch.sig_engine_found.connect(self._on_engine_found)
        self.watch.sig_engine_lost.connect(self._on_engine_lost)

        self.navigation = Sidebar(self.views)
        self._icons_asked = False  # the icons are painted after the window's first paint (``paintEvent``)
        self.counts = SidebarCounts(tasks, self.navigation, {
            "agents": self.agents_view, "records": self.records_view, "approvals": self.approvals_view,
            "partitions": self.partitions_view, "models": self.models_view}, parent=self)
        self.stack = ViewStack()
        for view in self.views:
            self.stack.addWidget(view)
        # On a screen smaller than a view needs (800x600, or a laptop's at 200 %), the window still fits on it:
        # the view scrolls inside it rather than the window running off the screen's edges.
        self.view_area = QScrollArea()
        self.view_area.setWidgetResizable(True)
        self.view_area.setFrameShape(QScrollArea.Shape.NoFrame)
        self.view_area.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # no Tab stop of its own: Tab goes into the view
        holder = QWidget()  # asks the stack, not its stacked layout (the largest of every view), for its room
        holder_layout = QVBoxLayout(holder)
        holder_layout.setContentsMargins(0, 0, 0, 0)
        holder_layout.addWidget(self.stack)
        self.view_area.setWidget(holder)
        self.stack.currentChanged.connect(self._fit_view_area)
        self.navigation.currentRowChanged.connect(self._on_view_chosen)
        self.messages = MessageBar()
        central = QWidget()
        central_layout = QVBoxLayout(central)
        central_layout.setContentsMargins(4, 4, 4, 4)
        central_layout.addWidget(self.messages)
        body = QHBoxLayout()
        body.addWidget(self.navigation)
        body.addWidget(self.view_area, 1)
        central_layout.addLayout(body, 1)
        self.setCentralWidget(central)

        self.agent_picker = QComboBox()
        self.agent_picker.setMinimumContentsLength(16)
        self.agent_picker.setToolTip("Whose private partition the views show (Ctrl+L)")
        named(self.agent_picker, "Agent")
        self.agent_picker.currentIndexChanged.connect(self._on_agent_chosen)
        self._build_actions()
        self.connection_label = plain_label("Connecting to the Knowledge engine…")
        self.statusBar().addPermanentWidget(self.connection_label)

        tasks.sig_error_raised.connect(self._on_error_raised)
        tasks.sig_error_withdrawn.connect(self.messages.clear_error)
        tasks.sig_busy_changed.connect(self._on_busy_changed)
        self.agents_view.sig_inventory_changed.connect(self._on_inventory)
        self.agents_view.sig_status_reported.connect(self.messages.show_info)
        self.agents_view.sig_status_withdrawn.connect(self.messages.clear_info)
        self.sync_view.sig_status_reported.connect(self.messages.show_info)
        self.models_view.sig_content_loaded.connect(  # the sidebar counts what the view lists
            lambda report: self.navigation.set_count(self.models_view, len(report.get("installed") or [])))
        self.records_view.page.sig_change_request_copied.connect(self._on_change_request_copied)
        self.records_view.sig_models_requested.connect(lambda: self.show_view(self.views.index(self.models_view)))
        self.vocabulary_view.sig_record_requested.connect(self.open_record)
        self.approvals_view.sig_record_requested.connect(self.open_record)
        self.gate_view.sig_record_requested.connect(self.open_record)
        self.gate_view.settings.sig_settings_saved.connect(self._on_gate_settings_saved)
        self.theme.sig_theme_applied.connect(self._on_theme_applied)
        self.navigation.setCurrentRow(self.views.index(self.records_view))  # the notes first, as a notes app opens
        self._build_desk_tools()

    def _build_actions(self) -> None:
        """The menu bar (every action, with its shortcut) and the toolbar; features add theirs via ``self.menus``."""
        toolbar = QToolBar("Main")
        toolbar.setObjectName("mainToolbar")
        toolbar.setMovable(False)
        toolbar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.addToolBar(toolbar)
        agent_label = plain_label(" Agent: ")
        agent_label.setBuddy(self.agent_picker)
        toolbar.addWidget(agent_label)
        toolbar.addWidget(self.agent_picker)
        self.toolbar = toolbar
        self.menus = MenuBar(self)

        def action(text: str, shortcut: QKeySequence | QKeySequence.StandardKey | str | None, slot: Any, *,
                   on_toolbar: bool = False, menu: str = "File", tip: str | None = None,
                   separator_before: bool = False) -> QAction:
            made = self.menus.action(menu, text, slot, shortcut, tip=tip, separator_before=separator_before)
            if on_toolbar:
                toolbar.addAction(made)
            return made

        self._build_transfer_actions()  # File: Import…, Export… first, then the two ways to quit
        # Ctrl+Q by name: Qt's standard Quit key is empty on platforms without a desktop theme.
        self.quit_action = action("&Quit", "Ctrl+Q", self.close, separator_before=True,
                                  tip="Close the window; the engine keeps serving agents")
        self.quit_action.setMenuRole(QAction.MenuRole.QuitRole)
        self.stop_action = action("Quit and &stop the engine", "Ctrl+Shift+Q", self.quit_and_stop_engine,
                                  tip="Close the window and stop the engine, which then stops serving agents")
        self.stop_action.setEnabled(False)

        self.find_action = action("&Find records…", QKeySequence.StandardKey.Find, self.focus_search,
                                  on_toolbar=True, menu="Edit", tip="Search the agent's records (BM25)")
        self.change_request_action = action(
            "Copy a &change request", "Ctrl+Shift+C", self.copy_change_request, menu="Edit",
            tip="Copy a message for the agent's chat naming the record shown, its revision and content hash")

        views = QActionGroup(self)
        self.view_actions: list[QAction] = []
        for number, view in enumerate(self.views, start=1):
            made = action(view.title.replace("&", "&&"), view_shortcut(number),
                          lambda _=False, n=number: self.show_view(n - 1), menu="View")
            made.setCheckable(True)
            views.addAction(made)
            self.view_actions.append(made)
        self.back_action = action("&Back", QKeySequence.StandardKey.Back, self.go_back, menu="View",
                                  separator_before=True, tip="The record shown before this one")
        self.refresh_action = action("&Refresh", QKeySequence.StandardKey.Refresh, self.refresh, on_toolbar=True,
                                     menu="View", tip="Reload every view from the engine")
        action("Choose &agent", "Ctrl+L", self.agent_picker.setFocus, menu="View",
               tip="Whose private partition the views show")
        self._build_theme_menu()

        self.add_agent_action = action("&Add agent…", "Ctrl+N", self.add_agent, menu="Engine",
                                       tip="Register an agent with the engine; its token is shown once")

        action("&Keyboard shortcuts", "F1", self.show_shortcuts, menu="Help")
        about = action("&About Knowledge Desk", None, self.show_about, menu="Help")
        about.setMenuRole(QAction.MenuRole.AboutRole)

    def _build_theme_menu(self) -> None:
        menu = self.menus.menu("View").addMenu("&Theme")
        group = QActionGroup(self)
        self.theme_actions: dict[str, QAction] = {}
        for choice in THEMES:
            made = QAction({"system": "&System", "light": "&Light", "dark": "&Dark"}[choice], self)
            made.setCheckable(True)
            made.setChecked(choice == self.theme.choice)
            made.triggered.connect(lambda _=False, c=choice: self.theme.set_choice(c))
            group.addAction(made)
            menu.addAction(made)
            self.theme_actions[choice] = made

    def _paint_icons(self) -> None:
        """The sidebar's and the toolbar's icons (once the window has painted, and after a theme change)."""
        self.navigation.paint_icons()
        self.find_action.setIcon(icon("mdi6.magnify"))
        self.refresh_action.setIcon(icon("mdi6.refresh"))

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 - Qt's name
        super().paintEvent(event)
        if not self.navigation.icons_painted and not self._icons_asked:
            # After the first paint, which does not wait for the icon font (qtawesome's import: most of a second
            # on a loaded machine).  Not at show: on X the first paint comes after the window manager maps the
            # window, and a timer set at show would run first.
            self._icons_asked = True
            QTimer.singleShot(0, self, self._paint_icons)

    def _fit_view_area(self, _number: int) -> None:
        """The view area sized again for the view now shown (the area sizes its content only when asked)."""
        QCoreApplication.postEvent(self.view_area, QEvent(QEvent.Type.LayoutRequest))

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt's name
        super().resizeEvent(event)
        self.navigation.set_compact(self.width() < COMPACT_BELOW_PX)  # a small screen: the views get the room

    def _on_theme_applied(self, _applied: str) -> None:
        if self.navigation.icons_painted:
            self._paint_icons()

    def show_shortcuts(self) -> None:
        self.shortcuts_dialog = ShortcutsDialog(self.menus.shortcuts(), self)
        self.shortcuts_dialog.open()

    def show_about(self) -> None:
        where = self.handle.description if self.handle is not None else "not connected"
        self.about_box = QMessageBox(QMessageBox.Icon.Information, "About Knowledge Desk",
                                     "Knowledge Desk: an evidence-backed knowledge vault that serves as memory for "
                                     f"local AI agents.\n\nState directory: {self.state.root}\nEngine: {where}",
                                     QMessageBox.StandardButton.Close, self)
        self.about_box.open()

    def _build_desk_tools(self) -> None:
        """Record links, the tray icon, and their actions (Connect an agent…, Settings…, Copy link)."""
        self.links = LinkOpener(self)
        self.records_view.page.sig_record_link_activated.connect(self.open_link)  # a link in a record's text
        self.tray = DeskTray(self)

        def connect_agent() -> None:
            dialog = ConnectAgentDialog(self.tasks, self.inventory.get("agents", []), self.agent, parent=self)
            dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
            self.agents_view.sig_inventory_changed.connect(dialog.follow)  # agents added or removed meanwhile
            dialog.show()
            self.connect_dialog = dialog

        def settings() -> None:
            dialog = SettingsDialog(self.tasks, parent=self)
            dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
            dialog.sig_settings_saved.connect(lambda _inventory: self.agents_view.refresh())
            dialog.show()
            self.agents_view.sig_inventory_changed.connect(dialog.follow)  # changed meanwhile elsewhere
            self.settings_dialog = dialog

        def copy_record_link() -> None:
            page = self.records_view.page
            agent = next((a for a in self.inventory.get("agents", []) if a.get("name") == page.agent), {})
            store = (agent.get("store") or {}).get("storeId")
            if page.record is None or not store or self.current_view() is not self.records_view:
                self.messages.show_info("Open a record in Records first; its link is what agents cite.")
                return
            link = record_link(store, page.record["id"])
            QGuiApplication.clipboard().setText(link)
            self.messages.show_info(f"Copied {link}: it opens this record in the window (knowledge open).")

        self.connect_agent_action = self.menus.action(
            "Engine", "&Connect an agent…", connect_agent, "Ctrl+Shift+A", separator_before=True,
            tip="Ready configurations for every MCP client, and the agents seen connected")
        self.settings_action = self.menus.action(
            "Engine", "&Settings…", settings, "Ctrl+,",
            tip="search_knowledge, writes and workspace roots; the engine checks them")
        self.copy_link_action = self.menus.action(
            "Edit", "Copy &link to this record", copy_record_link, "Ctrl+Shift+L",
            tip="The record's knowledge:// link, which agents cite")

        def show_connections() -> None:
            page = self.records_view.page
            if page.record is None or self.current_view() is not self.records_view:
                self.messages.show_info("Open a record in Records (Ctrl+2) first to see its connections.")
                return
            page.graph_button.click()

        self.connections_action = self.menus.action(
            "View", "Show &connections", show_connections, "Ctrl+Shift+G", separator_before=True,
            tip="A graph of the record shown, its relationships and the records it links to")

    def open_link(self, url: str | None) -> None:
        """Come forward, at the record a ``knowledge://record/...`` link names when one is given."""
        if url is None:
            self.links.bring_forward()
        else:
            self.links.open(url)

    def _build_transfer_actions(self) -> None:
        """File: Import… (Ctrl+I) and Export… (Ctrl+E), each a dialog following the engine's job."""
        self.import_dialog: ImportDialog | None = None
        self.export_dialog: ExportDialog | None = None

        def open_import() -> None:
            if self.import_dialog is not None and self.import_dialog.kept_aside:  # as the owner left it
                self.messages.clear_info(SUMMARY_ASIDE)
                self.import_dialog.open()
                return
            owners = owner_agents(self.inventory)
            others = [agent["name"] for agent in self.inventory.get("agents", []) if agent["name"] not in owners]
            self.import_dialog = ImportDialog(self.tasks, owners, self.agent, self, not_owners=others)
            self.import_dialog.sig_show_requested.connect(self.show_imported)
            self.agents_view.sig_inventory_changed.connect(self.import_dialog.follow)  # agents added meanwhile
            self.import_dialog.open()

        def open_export() -> None:
            store = self._agent_store()
            self.export_dialog = ExportDialog(self.tasks, self.inventory.get("stores", []), store, self)
            self.agents_view.sig_inventory_changed.connect(self.export_dialog.follow)  # stores made meanwhile
            self.export_dialog.open()

        self.import_action = self.menus.action(
            "File", "&Import…", open_import, "Ctrl+I",
            tip="Bring in a ChatGPT or Claude export, Markdown notes, mem0 memories or MEMORY.md")
        self.export_action = self.menus.action("File", "&Export…", open_export, "Ctrl+E",
                                               tip="Write a store's portable archive")

    # --- engine --------------------------------------------------------------------------------

    def connect_engine(self, *, demo: bool = False) -> None:
        """Attach to (or start) the engine on the worker thread, then load the first view."""
        self._say_connecting(True)  # the tables say "Loading…" meanwhile, not that there are no agents
        self.tasks.run(lambda: launcher.connect(self.state, demo=demo), self._on_connected,
                       on_error=self._on_connect_failed)

    def _say_connecting(self, connecting: bool) -> None:
        """Every table says "Loading…" from the first connection until the first inventory (then an agent is
        chosen and the views load), not "No agents yet" or "Choose an agent"."""
        self._connecting = connecting
        for shown in self.stack.findChildren(DeskTable):
            if hasattr(shown.model(), "set_connecting"):
                shown.model().set_connecting(connecting)

    def _on_error_raised(self, message: str) -> None:
        """A request failed with no handler of its own: the bar shows it, unless it only says that the agent has
        no store yet, which the views say calmly where the data would be (it is no problem)."""
        if not says_no_store(message):
            self.messages.show_error(message)

    def _on_connected(self, connection: tuple[Any, launcher.EngineHandle]) -> None:
        client, self.handle = connection
        self.tasks.use_client(client)
        self.connection_label.setText(f"Connected: {self.handle.description}")
        self.stop_action.setEnabled(True)
        self.sig_engine_connected.emit(self.handle.description)
        self.agents_view.refresh()
        self.watch.start()

    def _on_connect_failed(self, message: str) -> None:
        self.connection_label.setText("Not connected")
        self._say_connecting(False)
        self.agents_view.load_failed(message)
        self.messages.show_error(f"Could not connect to the Knowledge engine: {message}")
        self.watch.start()  # attaches when an engine appears

    def _on_engine_found(self, info: dict[str, Any]) -> None:
        """The watch subscribed to an engine: the one connected to, or a new one after a loss."""
        if self.handle is None:  # the first connection failed: attach now
            self.messages.clear_error()
            self.tasks.run(lambda: launcher.connect(self.state), self._on_connected,
                           on_error=self._on_connect_failed)
            return
        same = all(info.get(key) == self.handle.info.get(key) for key in ("pid", "port", "started_at"))
        if not same:
            ours = self.handle.started_pid if self.handle.started_pid == info.get("pid") else None
            self.handle = launcher.EngineHandle(info, started_pid=ours)
        self.connection_label.setText(f"Connected: {self.handle.description}")
        self.stop_action.setEnabled(True)
        if self._lost or not same:
            self._lost = False
            self.messages.clear_error()  # what went wrong with the old engine is over
            self.sig_engine_connected.emit(self.handle.description)
            self.refresh_all()

    def _on_engine_lost(self, reason: str) -> None:
        self._lost = True
        self.stop_action.setEnabled(False)
        was = f"engine pid {self.handle.info.get('pid')}" if self.handle is not None else "the engine"
        self.connection_label.setText(f"Engine lost: {was} ({reason}); reconnecting when one is back")

    # --- live updates ---------------------------------------------------------------------------

    def _on_changes_arrived(self, params: dict[str, Any]) -> None:
        self._live_changes.extend(params.get("changes") or [])
        self._live_resync = self._live_resync or bool(params.get("resync"))
        if not self._live_timer.isActive():
            self._live_timer.start()  # not restarted by later arrivals: a steady stream still reloads

    def _apply_changes(self) -> None:
        changes, resync = self._live_changes, self._live_resync
        self._live_changes, self._live_resync = [], False
        concerned = set(range(len(self.views))) if resync else self._concerned(changes)
        current = self.stack.currentIndex()
        for number in sorted(concerned):
            view = self.views[number]
            if number == current or view is self.agents_view:  # the inventory drives the agent picker
                getattr(view, "live_refresh", view.refresh)()
            elif number in self._shown:
                self._stale.add(number)
        records = self.views.index(self.records_view)
        if records not in concerned and self._committed(changes):
            self.records_view.page.refresh()  # its History shows each revision's commit; the lists none
            concerned.add(records)
        if resync or any(change.get("topic") in COUNTED_TOPICS for change in changes):
            self._refresh_counts()
        self.sig_live_applied.emit(sorted(self.views[n].title for n in concerned))

    def _committed(self, changes: list[dict[str, Any]]) -> bool:
        """Whether the git checkpoint of the agent's store committed (the engine says ``health`` then)."""
        mine = self._agent_store()
        return any(change.get("topic") == "health" and change.get("storeId") in (None, mine) for change in changes)

    def _concerned(self, changes: list[dict[str, Any]]) -> set[int]:
        """Which views show something the changes touched (by store, for the agent in view)."""
        mine = self._agent_store()
        views: set[QWidget] = set()
        for change in changes:
            topic, store = change.get("topic"), change.get("storeId")
            ours = store is None or store == mine
            if topic == "publications":
                views.add(self.partitions_view)
                if ours and change.get("partition") == "private":
                    views.update((self.records_view, self.vocabulary_view, self.approvals_view,
                                  self.preview_view, self.health_view))
            elif topic == "stores":
                views.update((self.agents_view, self.partitions_view, self.preview_view, self.health_view,
                              self.gate_view, self.models_view, self.sync_view))
            elif topic == "grants":
                views.update((self.partitions_view, self.preview_view))
            elif topic == "gate" and ours:
                views.add(self.gate_view)
            elif topic == "jobs":
                views.add(self.models_view)
            elif topic == "models":  # the gate's replay chooses among the installed models too
                views.update((self.models_view, self.gate_view))
            elif topic == "health" and ours:
                views.update((self.health_view, self.partitions_view))
            elif topic == "sync":  # every store's: the view lists them all
                views.add(self.sync_view)
        return {self.views.index(view) for view in views}

    def _agent_entry(self) -> dict[str, Any]:
        return next((a for a in self.inventory.get("agents", []) if a.get("name") == self.agent), {})

    def _agent_store(self) -> str | None:
        """The id of the store the agent in view uses (None: none chosen, or its store is not created yet)."""
        return (self._agent_entry().get("store") or {}).get("storeId")

    def quit_and_stop_engine(self) -> None:
        """Ctrl+Shift+Q: stop the engine, whether this window started it or attached to it, and close."""
        handle, state = self.handle, self.state
        if handle is not None and not self._lost:
            self.tasks.run(lambda: launcher.stop_engine(handle, state), lambda _: self.close())
        else:
            self.close()

    def _restore_geometry(self) -> None:
        """The size and place the window had when it last closed, kept on the screen it opens on (made smaller
        and put back in the screen's free area when it would run off it); the first time, ``DEFAULT_SIZE``
        fitted to the screen, centred."""
        available = self.screen().availableGeometry()
        saved = self.theme.settings.value(GEOMETRY_KEY)
        if isinstance(saved, QByteArray) and self.restoreGeometry(saved):
            if self.windowState() & (Qt.WindowState.WindowMaximized | Qt.WindowState.WindowFullScreen):
                return
            self.resize(fitted(self.size(), available.size()))
            if not available.contains(QRect(self.pos(), self.size() + FRAME_ROOM)):
                self.move(placed(self.size(), available))
            return
        self.resize(fitted(DEFAULT_SIZE, available.size()))
        self.move(placed(self.size(), available))  # the frame's top left: inside the screen, whatever opened before

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 - Qt's name
        self.theme.settings.setValue(GEOMETRY_KEY, self.saveGeometry())
        self._live_timer.stop()
        self.watch.stop()
        self.tasks.shutdown()
        super().closeEvent(event)

    # --- views and agent ------------------------------------------------------------------------

    def show_view(self, number: int) -> None:
        self.navigation.setCurrentRow(number)

    def current_view(self) -> QWidget:
        return self.stack.currentWidget()

    def _on_view_chosen(self, number: int) -> None:
        if number < 0:
            return
        if number != self.stack.currentIndex():
            self.messages.clear_info()  # a confirmation said in the view left behind
        self.stack.setCurrentIndex(number)
        self.view_actions[number].setChecked(True)
        view = self.views[number]
        self._shown.add(number)
        if hasattr(view, "set_agent"):
            view.set_agent(self.agent)
        if number in self._stale:
            self._stale.discard(number)
            getattr(view, "live_refresh", view.refresh)()

    def _on_inventory(self, inventory: dict[str, Any]) -> None:
        agent_before, store_before = self.agent, self._agent_store()
        first, self._inventoried = not self._inventoried, True
        if self._connecting:
            self._say_connecting(False)
        self.inventory = inventory
        self.partitions_view.set_inventory(inventory)
        self.sync_view.set_inventory(inventory)
        names = [agent["name"] for agent in inventory["agents"]]
        current = self.agent if self.agent in names else _default_agent(inventory["agents"])
        self.agent_picker.blockSignals(True)
        self.agent_picker.clear()
        self.agent_picker.addItems(names)
        self.agent_picker.setCurrentIndex(names.index(current) if current in names else -1)
        self.agent_picker.blockSignals(False)
        self._set_agent(current)
        if current == agent_before and self._agent_store() != store_before:
            self._store_changed()  # created by the agent's first write, or another store used: its data is new
        if not names:
            if first and self.current_view() is self.records_view:
                self.show_view(self.views.index(self.agents_view))  # no notes to open on: where one is added
            self.messages.show_info(NO_AGENTS_TEXT)  # after the move, which clears what the bar said before
        else:
            self.messages.clear_info(NO_AGENTS_TEXT)  # one was added (here or with the CLI)

    def _store_changed(self) -> None:
        """The agent in view has another store than the views read (the one its first write created, say):
        the view in front reloads at once, the others shown so far when next shown."""
        self.messages.clear_error()
        current = self.stack.currentIndex()
        for number, view in enumerate(self.views):
            if view is self.agents_view or not hasattr(view, "set_agent"):
                continue  # the inventory is what told; views with no agent read no store of the agent's
            if number == current:
                view.refresh()  # type: ignore[attr-defined]
            elif number in self._shown:
                self._stale.add(number)

    def _on_agent_chosen(self, _index: int) -> None:
        self._set_agent(self.agent_picker.currentText() or None)

    def _set_agent(self, agent: str | None) -> None:
        if agent != self.agent:
            self.messages.clear_error()  # a problem of the agent left behind is not this one's
            self.messages.clear_info()
        self.agent = agent
        view = self.current_view()
        if hasattr(view, "set_agent"):
            view.set_agent(agent)
        self._refresh_counts()

    def _refresh_counts(self) -> None:
        """The sidebar's counts, for the agent in view (after a change, the agent chosen, F5)."""
        self.counts.set_inventory_count(self.inventory)
        self.counts.refresh(self.agent, self._agent_store())

    def refresh(self) -> None:
        """F5: every view reloads (those never shown load when they are)."""
        self.refresh_all()

    def refresh_all(self) -> None:
        """Every view shown reloads; a problem from before is cleared (a reload that meets it again says so)."""
        self.messages.clear_error()
        self._stale.clear()
        current = self.stack.currentIndex()
        self.agents_view.refresh()
        for number, view in enumerate(self.views):
            if view is not self.agents_view and (number == current or number in self._shown):
                view.refresh()  # type: ignore[attr-defined]

    def focus_search(self) -> None:
        self.show_view(self.views.index(self.records_view))
        self.records_view.focus_search()

    def open_record(self, record_id: str) -> None:
        self.show_view(self.views.index(self.records_view))
        self.records_view.open_record(record_id)

    def show_imported(self, agent: str, what: str, target: str) -> None:
        """A link of the import's summary: Records, for the agent the import went to, at the record
        (``record``), browsing the kind (and type) of record it made (``browse``) or the folder it imported
        (``folder``).  The dialog is set aside, so that the owner sees what they asked for; File › Import…
        shows it again, its summary (the other links) with it."""
        if self.import_dialog is not None:
            self.import_dialog.set_aside()
        if agent != self.agent:
            if self.agent_picker.findText(agent) < 0:
                self.messages.show_info(f"{agent} is not in the agent list yet; choose it in the toolbar "
                                        "(Ctrl+L) once it shows, then open Records. " + SUMMARY_ASIDE)
                return
            self.agent_picker.setCurrentText(agent)
        self.show_view(self.views.index(self.records_view))
        self.messages.show_info(SUMMARY_ASIDE)  # said in Records: leaving a view clears what it said
        if what == "record":
            self.records_view.open_record(target)
        elif what == "folder":
            self.records_view.browse_folder(target)
        else:
            kind, _, record_type = target.partition("/")  # ``page/source``: the pages of that type
            self.records_view.browse_type(kind, record_type or None)

    def go_back(self) -> None:
        if self.current_view() is self.records_view:
            self.records_view.go_back()

    def copy_change_request(self) -> None:
        if self.current_view() is self.records_view and self.records_view.page.record is not None:
            self.records_view.page.copy_change_request()
        else:
            self.messages.show_info("Open a record in Records (Ctrl+2) to copy a change request for it.")

    def add_agent(self) -> None:
        self.show_view(self.views.index(self.agents_view))
        self.agents_view.add_button.click()

    def _on_gate_settings_saved(self, _result: dict[str, Any]) -> None:
        self.messages.show_info("Recall gate settings saved to config.json.")

    def _on_change_request_copied(self, message: str) -> None:
        self.messages.show_info("Copied a change request to the clipboard; paste it into the agent's chat. "
                                "Nothing was sent.")

    def _on_busy_changed(self, busy: bool) -> None:
        self.statusBar().showMessage("Working…" if busy else "")


def _default_agent(agents: list[dict[str, Any]]) -> str | None:
    owners = [agent["name"] for agent in agents if agent.get("owner")]
    names = [agent["name"] for agent in agents]
    return "main" if "main" in names else (owners or names or [None])[0]
