"""Records: Recent, Browse by type and Search over one agent's private partition, and the record page.

Every list is a ``PagedModel``: it asks the engine for one page at a time as
the list scrolls, so a partition of 100,000 records opens as fast as one of
ten.  Search is the owner's search (``operator/search``): hybrid (keywords and the installed embedding model)
or keywords, as the owner picks beside the field (remembered in the window's settings), with a line saying
how the results were ranked and, without an embedding model, a link to Models; each hit's snippet shows up to
three lines with the query's words in bold (snippets.py).

Links belong to pages: relationship records (an imported vault's ``[[links]]``
become hundreds of them) stay records, but each list shows pages and claims
unless the owner ticks its *Show links* box, which is remembered per list in
the window's settings; a page shows its links on its own Links tab.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QEvent, QModelIndex, QObject, QSettings, Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QLineEdit,
    QPushButton,
    QSplitter,
    QTableView,
    QTabWidget,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from engine.core.words import counted

from ..common.models import ROW_ROLE, Column, PagedModel, Row, RowsModel
from ..common.times import brief_ago, exact_time, local_now, window_clock
from ..common.widgets import named, plain_label, table
from ..tasks import EngineTasks, says_no_store
from .conversations import shown_snippet
from .graph import ConnectionsWindow
from .page import NOTE_KINDS, RecordPage
from .snippets import show_snippets

PAGE_SIZE = 200
SEARCH_PAGE_SIZE = 50
LINK_KIND = "relationship"
SHOW_LINKS_KEY = "records/showLinks/{list}"  # in the window's settings, one per list: recent, browse, search
NO_MODEL = ("not_installed", "not_configured")  # operator/search's ``embedding``: nothing to rank by meaning
SEARCH_MODE_KEY = "records/searchMode"  # in the window's settings: auto, keyword or hybrid
# The search modes the owner picks from: (operator/search mode, label, tooltip).
SEARCH_MODES = (
    ("auto", "Auto", "Hybrid when an embedding model is installed, keyword otherwise"),
    ("keyword", "Keywords", "Notes holding the words you typed (titles and aliases count more); words such as "
                            "\"to\" or \"how\" never match on their own"),
    ("hybrid", "Meaning", "Keywords and the installed embedding model together: finds the note that answers a "
                          "question even when it uses other words"),
)


def _type(row: Row) -> str:
    return row.get("type") or ""


def _kind_or_type(row: Row) -> str:
    """One word for what a hit is: its type where it has one ("note", "project"), else its kind ("claim")."""
    return row.get("type") or row.get("kind") or ""


def _kind_and_type(row: Row) -> str:
    kind, kind_type = row.get("kind") or "", row.get("type")
    return f"{kind}, type {kind_type}" if kind_type else kind


# One column for what a record is, not Kind and Type side by side ("page", "note" on every row took a narrow
# window's room from the search's snippet and left the lists' Status reading "curr…").
KIND_COLUMN = Column("Kind", _kind_or_type, tooltip=_kind_and_type, whole=True)  # "decision", never "deci…"
RECORD_COLUMNS = [
    Column("Title", lambda r: r.get("title") or r.get("id"), stretch=True),
    KIND_COLUMN,
    # Short ("42 min ago") and whole: a narrow list keeps room for the title and never reads "42 minutes …".
    Column("Updated", lambda r: brief_ago(r.get("updatedAt"), local_now()),
           tooltip=lambda r: exact_time(r.get("updatedAt"), local_now()), whole=True),
    Column("Status", lambda r: r.get("status"), whole=True),  # "current", "superseded": never "curr…"
]
# Painted by snippets.py on up to three lines, the query's words in bold; its text is the words alone (an
# imported conversation's times in local time, as painted).
SNIPPET_COLUMN = Column("Snippet", lambda r: " ".join(shown_snippet(r, local_now())[0].split()))
SEARCH_COLUMNS = [
    # The snippet says more; in a small window the title keeps room for a word a line (search rows are three
    # lines tall, and the title wraps over them).
    Column("Title", lambda r: r.get("title") or r.get("id"), max_width=200, min_width=90),
    KIND_COLUMN,
    Column("Score", lambda r: r.get("score"), align_right=True),
    SNIPPET_COLUMN,
]
TYPE_COLUMNS = [
    Column("Kind", lambda r: r.get("kind")),
    Column("Type", _type),
    Column("Records", lambda r: r.get("count"), align_right=True),
]

RECORD_PAGE_MIN_WIDTH = 380  # px: a record's title, its two buttons and the tabs' names read whole


class RecordsView(QWidget):
    title = "Records"

    sig_content_loaded = Signal(str)
    """A list's first page arrived (which list: recent, types, browse or search)."""

    sig_models_requested = Signal()
    """The owner followed the search's link to Models (no embedding model installed)."""

    def __init__(self, tasks: EngineTasks, parent: QWidget | None = None, *,
                 settings: QSettings | None = None) -> None:
        super().__init__(parent)
        self.tasks = tasks
        self.settings = settings  # where each list's Show links is kept (None: for this window only)
        self.agent: str | None = None
        self._types: list[Row] = []  # every (kind, type) count, links included: the Browse list filters them
        self._back: list[str] = []
        self._shown: str | None = None  # the id of the record on the page (while it loads too)
        self._browsing: dict[str, Any] | None = None  # the filters of the type (or tag) being browsed
        # Where the owner was when they clicked a tag (the tab, and what Browse listed): Back returns there.
        self._before_tag: tuple[int, dict[str, Any] | None] | None = None

        # Relative times ("3 minutes ago") move on while the window is open: the page's are made again, the
        # lists' painted again, once a minute.
        self.clock = window_clock(self, self._on_clock)

        self.recent_model = PagedModel(RECORD_COLUMNS, self)
        self.types_model = RowsModel(TYPE_COLUMNS, self)
        self.browse_model = PagedModel(RECORD_COLUMNS, self)
        self.search_model = PagedModel(SEARCH_COLUMNS, self)
        self.folder_model = PagedModel(RECORD_COLUMNS, self)
        self._folder: str | None = None  # the folder whose notes are listed
        self.recent_model.sig_page_loaded.connect(lambda _: self.sig_content_loaded.emit("recent"))
        self.browse_model.sig_page_loaded.connect(lambda _: self.sig_content_loaded.emit("browse"))
        self.search_model.sig_page_loaded.connect(self._on_search_page)
        self.search_model.sig_load_failed.connect(self._on_search_failed)
        for model in (self.recent_model, self.browse_model, self.search_model):
            model.sig_load_failed.connect(self.tasks.sig_error_raised.emit)

        self.include_all = QCheckBox("Include &non-current records")
        self.include_all.setToolTip("Historical, withdrawn, superseded and invalid records too")
        self.include_all.toggled.connect(lambda _: (self._describe_empty(), self.refresh()))
        self.show_links = {name: self._links_box(name) for name in ("recent", "browse", "search")}
        self.recent_table = named(self._list(self.recent_model), "Recent records",
                                  "The records saved or changed last, newest first; Enter opens one")
        self.types_table = named(table(self.types_model), "Record types",
                                 "Each kind and type of record with how many there are; choose one to list them")
        self.types_table.selectionModel().selectionChanged.connect(self._on_type_selected)
        self.browse_table = named(self._list(self.browse_model), "Records of the chosen type")
        # Above the list while it shows the notes holding a tag (a tag clicked on a record page).
        self.tag_label = plain_label()
        self.tag_label.setWordWrap(True)
        self.tag_back = QPushButton("B&ack")
        self.tag_back.setToolTip("Back to the list shown before the tag was clicked")
        self.tag_back.clicked.connect(self.leave_tag)
        self.tag_bar = QWidget()
        tag_row = QHBoxLayout(self.tag_bar)
        tag_row.setContentsMargins(0, 0, 0, 0)
        tag_row.addWidget(self.tag_label, 1)
        tag_row.addWidget(self.tag_back)
        self.tag_bar.hide()
        self.browse_model.sig_page_loaded.connect(lambda _count: self._say_tag())
        self.query = named(QLineEdit(), "Search words or question")
        self.query.setPlaceholderText("Search words or ask a question")
        self.query.returnPressed.connect(self.search)
        self.query.installEventFilter(self)  # Down goes to the results
        self.search_mode = named(QComboBox(), "Rank results by")
        self.search_mode.setToolTip("How results are ranked")
        for mode, label, tooltip in SEARCH_MODES:
            self.search_mode.addItem(label, mode)
            self.search_mode.setItemData(self.search_mode.count() - 1, tooltip, Qt.ItemDataRole.ToolTipRole)
        stored = self.settings.value(SEARCH_MODE_KEY) if self.settings is not None else None
        self.search_mode.setCurrentIndex(max(0, self.search_mode.findData(stored or "auto")))
        self.search_mode.currentIndexChanged.connect(self._on_search_mode_changed)
        self._answered_by = ""  # how the last search was ranked, in words, for the summary line
        search_button = QPushButton("&Search")
        search_button.clicked.connect(self.search)
        self.search_summary = plain_label()
        self.search_summary.setWordWrap(True)  # the why of keyword-only ranking can be long
        # A link to Models, drawn as one (labels show their text as written: plain_label).
        self.models_link = QPushButton("Install an embedding model in Models…")
        self.models_link.setFlat(True)
        self.models_link.setCursor(Qt.CursorShape.PointingHandCursor)
        self.models_link.setToolTip("Search by meaning needs an embedding model (Models, Embedding)")
        self.models_link.setStyleSheet(
            "QPushButton { color: palette(link); text-decoration: underline; border: none; padding: 0; }")
        self.models_link.clicked.connect(self.sig_models_requested.emit)
        self.models_link.hide()
        self.search_table = named(self._list(self.search_model), "Search results",
                                  "Each hit's title, kind, score and snippet; Enter opens one")
        show_snippets(self.search_table, SEARCH_COLUMNS.index(SNIPPET_COLUMN))
        self.search_table.setWordWrap(True)

        recent = QWidget()
        recent_layout = QVBoxLayout(recent)
        recent_layout.addWidget(self.recent_table, 1)
        recent_layout.addWidget(self.show_links["recent"])
        browse_lists = QSplitter(Qt.Orientation.Vertical)
        browse_lists.addWidget(self.types_table)
        browse_lists.addWidget(self.browse_table)
        browse = QWidget()
        browse_layout = QVBoxLayout(browse)
        browse_layout.addWidget(self.tag_bar)
        browse_layout.addWidget(browse_lists, 1)
        browse_layout.addWidget(self.show_links["browse"])
        search = QWidget()
        search_layout = QVBoxLayout(search)
        row = QHBoxLayout()
        row.addWidget(self.query, 1)
        row.addWidget(self.search_mode)
        row.addWidget(search_button)
        search_layout.addLayout(row)
        # The link goes under the summary: beside it, in a small window, it left the summary a column a few
        # words wide.
        search_layout.addWidget(self.search_summary)
        search_layout.addWidget(self.models_link, 0, Qt.AlignmentFlag.AlignLeft)
        search_layout.addWidget(self.search_table, 1)
        search_layout.addWidget(self.show_links["search"])
        self.modes = QTabWidget()
        self.modes.addTab(recent, "Recen&t")
        self.modes.addTab(browse, "&Browse by type")
        self.modes.addTab(search, "Sea&rch")
        self.folders_tree = named(QTreeWidget(), "Folders")
        self.folders_tree.setHeaderLabels(["Folder", "Notes"])
        self.folders_tree.headerItem().setToolTip(1, "The notes a folder holds itself; with subfolders, how many "
                                                     "it holds in all after them")
        self.folders_tree.setToolTip("The folders of the vaults imported into this store, as they were on disk")
        self.folders_tree.itemSelectionChanged.connect(self._on_folder_selected)
        self.folder_table = named(self._list(self.folder_model), "Notes in the chosen folder")
        folder_lists = QSplitter(Qt.Orientation.Vertical)
        folder_lists.addWidget(self.folders_tree)
        folder_lists.addWidget(self.folder_table)
        self.modes.addTab(folder_lists, "Fol&ders")
        self.modes.currentChanged.connect(self._on_mode_chosen)
        left = QWidget()
        left_layout = QVBoxLayout(left)
        left_layout.setContentsMargins(0, 0, 0, 0)
        left_layout.addWidget(self.modes, 1)
        left_layout.addWidget(self.include_all)

        self.page = RecordPage(tasks, self)
        self.page.sig_record_requested.connect(self.open_record)
        self.page.sig_connections_requested.connect(self.show_connections)
        self.page.sig_tag_requested.connect(self.browse_tag)
        self.connections_window: ConnectionsWindow | None = None
        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.addWidget(left)
        splitter.addWidget(self.page)
        splitter.setStretchFactor(1, 2)
        # In a narrow window the lists give way before the page: below this its header wraps letter by letter.
        self.page.setMinimumWidth(RECORD_PAGE_MIN_WIDTH)
        splitter.setCollapsible(1, False)
        splitter.setSizes([600, 680])  # room for the lists' columns beside their titles
        layout = QVBoxLayout(self)
        layout.addWidget(splitter)
        self._describe_empty()

    def _describe_empty(self) -> None:
        """What each empty list says: what is empty and what to do (for the agent in view)."""
        if self.agent is None:
            for view in (self.recent_table, self.types_table, self.browse_table, self.search_table,
                         self.folder_table):
                view.set_empty_text("Choose an agent in the toolbar (Ctrl+L) to see its records.")
            return
        every = self.include_all.isChecked()
        hidden = "" if every else (" Historical, withdrawn and superseded records are hidden: tick Include "
                                   "non-current records to list them.")
        links = ("" if self.show_links["recent"].isChecked()
                 else " Links between records are not listed here: tick Show links.")
        self.recent_table.set_empty_text(f"No {'' if every else 'current '}pages or claims in {self.agent}'s "
                                         f"private partition yet. They appear here as soon as the agent saves "
                                         f"knowledge.{hidden}{links}")
        self.types_table.set_empty_text(f"No record types yet: {self.agent}'s private partition holds no records.")
        self.browse_table.set_empty_text("Choose a type above to list its records.")
        self.folder_table.set_empty_text("Choose a folder above to list its notes. Folders are those of the vaults "
                                         "imported into this store (File ▸ Import…, Markdown notes).")
        text = self.query.text().strip()
        self.search_table.set_empty_text(
            f"No record of {self.agent} matches \u201c{text}\u201d. Try fewer or other words."
            if text and self.search_model.source_set else
            f"Type words above and press Enter to search {self.agent}'s records (titles, aliases and text).")

    def _links_box(self, name: str) -> QCheckBox:
        """This list's *Show links* box, as the owner last left it."""
        box = QCheckBox("Show lin&ks")
        box.setToolTip("Also list relationship records (the links between records, such as an imported note's "
                       "[[wiki links]]). A page lists its own on its Links tab.")
        stored = self.settings.value(SHOW_LINKS_KEY.format(list=name)) if self.settings is not None else None
        box.setChecked(str(stored).lower() == "true")
        box.toggled.connect(lambda shown: (self._on_show_links_toggled(name, shown), self._describe_empty()))
        return box

    def _on_show_links_toggled(self, name: str, shown: bool) -> None:
        if self.settings is not None:
            self.settings.setValue(SHOW_LINKS_KEY.format(list=name), shown)
        if self.agent is None:
            return
        if name == "recent":
            self.recent_model.set_source(self._records_source(self._recent_filters()))
        elif name == "browse":
            self._show_types()
            if self._browsing is not None and "tag" in self._browsing:  # the tag's notes, with links or without
                self._browsing = {**{key: value for key, value in self._browsing.items() if key != "kinds"},
                                  **self._kinds("browse")}
                self.browse_model.set_source(self._records_source(self._browsing))
            elif self._browsing is not None and self._browsing["kind"] == LINK_KIND and not shown:
                self._browsing = None  # the type browsed is a relation, hidden now
                self.browse_model.set_source(None)
        elif self.query.text().strip() and self.search_model.source_set:
            self._run_search(self.query.text().strip())

    def _kinds(self, name: str) -> dict[str, Any]:
        """The ``kinds`` filter of a list: none while it shows links, else pages and claims."""
        return {} if self.show_links[name].isChecked() else {"kinds": NOTE_KINDS}

    def _recent_filters(self) -> dict[str, Any]:
        return {"status": "all" if self.include_all.isChecked() else "current", "order": "updated",
                **self._kinds("recent")}

    def _list(self, model: PagedModel) -> QTableView:
        view = table(model)
        view.activated.connect(self._on_row_activated)
        view.clicked.connect(self._on_row_activated)
        model.sig_page_loaded.connect(lambda _count: self._select_shown(view))
        return view

    def _select_shown(self, view: QTableView) -> None:
        """A list reloaded (an agent wrote, F5): its row of the record on the page is selected again."""
        if self._shown is None or view.selectionModel().hasSelection():
            return
        model = view.model()
        row = next((n for n, r in enumerate(model.rows()) if r.get("id") == self._shown), None)
        if row is not None:
            view.selectRow(row)

    # --- agent and lists ------------------------------------------------------------------------

    def set_agent(self, agent: str | None) -> None:
        if agent == self.agent:
            return
        self.agent = agent
        self._back.clear()
        self._shown = None
        self._browsing, self._before_tag = None, None  # a type or tag browsed is the last agent's
        self.tag_bar.hide()
        self._mark_shown()
        self.page.clear()
        self._describe_empty()
        if self.connections_window is not None:
            self.connections_window.close()
        self.refresh()

    def refresh(self) -> None:
        if self.agent is None:
            for model in (self.recent_model, self.browse_model, self.search_model, self.folder_model):
                model.set_source(None)
            self.folders_tree.clear()
            self._types = []
            self.types_model.set_rows([])
            return
        self.recent_model.set_source(self._records_source(self._recent_filters()))
        if self._browsing is not None and "tag" in self._browsing:  # a tag's notes: listed again where they are
            self._browsing = {**self._browsing, "status": self._status()}
            self.browse_model.set_source(self._records_source(self._browsing))
        else:
            self._browsing = None
            self.browse_model.set_source(None)
        self.tasks.request("operator/types", {"agent": self.agent}, self._on_types, owner=self)
        self._load_folders()
        if self.query.text().strip():  # asked again where it is: the owner stays on the tab they chose
            self.search_summary.setText("Searching…")
            self._run_search(self.query.text().strip())

    def live_refresh(self) -> None:
        """An agent wrote: every list reloads where it is (the tab, the type browsed, the search typed)."""
        if self.agent is None:
            return
        self.recent_model.set_source(self._records_source(self._recent_filters()))
        self.tasks.request("operator/types", {"agent": self.agent}, self._on_types, owner=self)
        if self._browsing is not None:
            self.browse_model.set_source(self._records_source(self._browsing))
        self._load_folders()
        if self.query.text().strip() and self.search_model.rowCount():
            self._run_search(self.query.text().strip())
        if self._shown is not None:  # what was written may be about it (a claim, a link)
            if self.page.shown_id == self._shown:
                self.page.refresh()
            else:
                self.page.show_record(self.agent, self._shown)
        if self.connections_window is not None and self.connections_window.isVisible():
            self.connections_window.reload()

    def _records_source(self, filters: dict[str, Any]) -> Any:
        agent = self.agent

        def source(offset: Any, deliver: Any, fail: Any) -> None:
            params = {"agent": agent, **filters, "offset": offset or 0, "limit": PAGE_SIZE}
            self.tasks.request("operator/records", params,
                               lambda page: deliver(page["records"], page.get("nextOffset"), page["total"]),
                               on_error=fail, owner=self)

        return source

    # --- folders ------------------------------------------------------------------------------

    def _load_folders(self) -> None:
        self.tasks.request("operator/folders", {"agent": self.agent}, self._on_folders,
                           on_error=lambda _error: self._on_folders({"folders": []}), owner=self)

    def _on_folders(self, result: dict[str, Any]) -> None:
        """The folder tree: one item a folder, nested as on disk, with the notes it holds itself and, when it
        has subfolders, how many in all."""
        self.folders_tree.blockSignals(True)
        self.folders_tree.clear()
        items: dict[str, QTreeWidgetItem] = {}
        for entry in result["folders"]:
            parts = entry["folder"].split("/")
            for depth in range(1, len(parts) + 1):
                path = "/".join(parts[:depth])
                if path not in items:
                    parent = items.get("/".join(parts[:depth - 1])) if depth > 1 else None
                    item = QTreeWidgetItem([parts[depth - 1], ""])
                    item.setData(0, Qt.ItemDataRole.UserRole, path)
                    (parent.addChild(item) if parent is not None else self.folders_tree.addTopLevelItem(item))
                    items[path] = item
            items[entry["folder"]].setData(1, Qt.ItemDataRole.UserRole, entry["notes"])
        for number in range(self.folders_tree.topLevelItemCount()):
            _count_notes(self.folders_tree.topLevelItem(number))
        self.folders_tree.expandAll()
        self.folders_tree.resizeColumnToContents(0)
        if self._folder in items:
            items[self._folder].setSelected(True)
        self.folders_tree.blockSignals(False)
        if self._folder is not None:  # reloaded where it is: the owner stays on the tab they chose
            self.browse_folder(self._folder if self._folder in items else None, show=False)
        self.sig_content_loaded.emit("folders")

    def _on_folder_selected(self) -> None:
        chosen = self.folders_tree.selectedItems()
        if chosen:
            self.browse_folder(chosen[0].data(0, Qt.ItemDataRole.UserRole))

    def browse_folder(self, folder: str | None, *, show: bool = True) -> None:
        """List the notes imported from ``folder`` (a path as operator/folders names it), by title; ``show``
        brings the Folders tab forward (the owner chose the folder, not a reload)."""
        self._folder, agent = folder, self.agent
        if folder is None or agent is None:
            self.folder_model.set_source(None)
            return

        def source(offset: Any, deliver: Any, fail: Any) -> None:
            params = {"agent": agent, "folder": folder, "offset": offset or 0, "limit": PAGE_SIZE}
            self.tasks.request("operator/folders", params,
                               lambda page: deliver(page["records"], page.get("nextOffset"), page["total"]),
                               on_error=fail, owner=self)

        if show:
            self.modes.setCurrentIndex(self.modes.indexOf(self.folders_tree.parentWidget()))
        self.folder_model.set_source(source)

    def _on_types(self, result: dict[str, Any]) -> None:
        self._types = result["types"]
        self._show_types()
        self.sig_content_loaded.emit("types")

    def _show_types(self) -> None:
        links = self.show_links["browse"].isChecked()
        self.types_model.set_rows([row for row in self._types if links or row.get("kind") != LINK_KIND])
        self.types_table.resizeColumnsToContents()

    def _on_type_selected(self) -> None:
        rows = self.types_table.selectionModel().selectedRows()
        chosen = self.types_model.row(rows[0].row()) if rows else None
        if chosen is not None:
            self.browse_type(chosen["kind"], chosen.get("type"))

    def browse_type(self, kind: str, record_type: str | None) -> None:
        filters: dict[str, Any] = {"kind": kind, "order": "title", "status": self._status()}
        if record_type:
            filters["type"] = record_type
        self.modes.setCurrentIndex(1)
        self._browsing = filters
        self._before_tag = None
        self.tag_bar.hide()
        self.browse_model.set_source(self._records_source(filters))

    def _status(self) -> str:
        return "all" if self.include_all.isChecked() else "current"

    def browse_tag(self, tag: str) -> None:
        """List the notes holding ``tag`` or a tag nested in it (``project`` lists ``#project/alpha`` too), by
        title, in Browse; Back returns to the list shown before."""
        if self.agent is None:
            return
        if self._before_tag is None:
            self._before_tag = (self.modes.currentIndex(), self._browsing)
        self._browsing = {"tag": tag, "order": "title", "status": self._status(), **self._kinds("browse")}
        self.types_table.blockSignals(True)
        self.types_table.selectionModel().blockSignals(True)
        self.types_table.clearSelection()
        self.types_table.selectionModel().blockSignals(False)
        self.types_table.blockSignals(False)
        self.tag_label.setText(f"Notes tagged #{tag}…")
        self.tag_bar.show()
        self.modes.setCurrentIndex(1)
        self.browse_model.set_source(self._records_source(self._browsing))

    def _say_tag(self) -> None:
        """The tag bar says how many notes hold the tag listed."""
        if self._browsing is None or "tag" not in self._browsing:
            return
        total = self.browse_model.total if self.browse_model.total is not None else self.browse_model.rowCount()
        tag = self._browsing["tag"]
        self.tag_label.setText(f"{counted(total, 'note')} tagged #{tag} or a tag inside it (#{tag}/…)"
                               if total else f"No {'' if self.include_all.isChecked() else 'current '}note is "
                               f"tagged #{tag}.")

    def leave_tag(self) -> None:
        """Back from a tag's notes: the tab and the list the owner was on when they clicked it."""
        if self._before_tag is None:
            return
        tab, browsing = self._before_tag
        self._before_tag = None
        self.tag_bar.hide()
        self._browsing = browsing
        self.browse_model.set_source(self._records_source(browsing) if browsing is not None else None)
        self.modes.setCurrentIndex(tab)

    def search(self) -> None:
        text = self.query.text().strip()
        if not text or self.agent is None:
            return
        self.modes.setCurrentIndex(2)
        self.search_summary.setText("Searching…")
        self._run_search(text)
        self._describe_empty()

    def _run_search(self, text: str) -> None:
        agent, kinds, mode = self.agent, self._kinds("search"), self.search_mode.currentData()

        def source(cursor: Any, deliver: Any, fail: Any) -> None:
            params: dict[str, Any] = {"agent": agent, "query": text, "limit": SEARCH_PAGE_SIZE, "mode": mode, **kinds}
            if cursor:
                params["cursor"] = cursor

            def answered(result: dict[str, Any]) -> None:
                if not cursor:
                    self._answered_by = answered_by(result)
                    self.models_link.setVisible(result.get("embedding") in NO_MODEL)
                deliver(result["hits"], result.get("nextCursor"), None)

            self.tasks.request("operator/search", params, answered, on_error=fail, owner=self)

        self.search_model.set_source(source)

    def _on_search_mode_changed(self) -> None:
        if self.settings is not None:
            self.settings.setValue(SEARCH_MODE_KEY, self.search_mode.currentData())
        if self.query.text().strip() and self.search_model.source_set:
            self.search()

    def _on_clock(self) -> None:
        self.page.refresh_times()
        for view in (self.recent_table, self.browse_table, self.search_table, self.folder_table):
            view.refit()  # "just now" becomes "42 min ago": the Updated column widens, never "42 min …"

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        """Down in the search box goes to the results, their first row chosen (Enter then opens it)."""
        if (watched is self.query and event.type() == QEvent.Type.KeyPress
                and event.key() == Qt.Key.Key_Down and self.search_model.rowCount()):
            self.modes.setCurrentIndex(2)
            self.search_table.setFocus(Qt.FocusReason.TabFocusReason)
            if not self.search_table.selectionModel().hasSelection():
                self.search_table.selectRow(0)
            return True
        return super().eventFilter(watched, event)

    def _on_mode_chosen(self, index: int) -> None:
        """The Search tab chosen (clicked, Alt+H): what the owner types next is the search, never a jump in
        the sidebar to the view whose name starts with that letter."""
        if index == 2 and not self.search_table.hasFocus():
            self.query.setFocus(Qt.FocusReason.OtherFocusReason)

    def focus_search(self) -> None:
        self.modes.setCurrentIndex(2)
        self.query.setFocus()
        self.query.selectAll()

    def _on_search_page(self, count: int) -> None:
        more = "" if self.search_model.exhausted else " (scroll for more)"
        found = f"{count:,} matching records shown{more}" if count else "No matches"
        self.search_summary.setText(f"{found} · {self._answered_by}" if self._answered_by else found)
        self.sig_content_loaded.emit("search")

    def _on_search_failed(self, message: str) -> None:
        """No answer came: the summary says why instead of "Searching…"."""
        self.search_summary.setText(f"Not searched: {self.agent} has no store yet." if says_no_store(message)
                                    else f"Not searched: {message}")

    # --- the record page --------------------------------------------------------------------------

    def _on_row_activated(self, index: QModelIndex) -> None:
        row = index.data(ROW_ROLE)
        if row is not None:
            self.open_record(row["id"])

    def open_record(self, record_id: str) -> None:
        if self.agent is None:
            return
        if self.page.record is not None and self.page.record.get("id") != record_id:
            self._back.append(self.page.record["id"])
        self._show(record_id)

    def go_back(self) -> None:
        if self._back and self.agent is not None:
            self._show(self._back.pop())

    def _show(self, record_id: str) -> None:
        """``record_id`` on the page, its row in every list marked as the one open: the arrow keys move a list's
        selection without opening what they pass (Enter opens it), so the mark says which is open meanwhile."""
        self._shown = record_id
        self._mark_shown()
        self.page.show_record(self.agent or "", record_id)

    def _mark_shown(self) -> None:
        for model in (self.recent_model, self.browse_model, self.search_model, self.folder_model):
            model.mark(self._shown)

    # --- the connections graph --------------------------------------------------------------------

    def show_connections(self, record: dict[str, Any]) -> ConnectionsWindow | None:
        """Open (or bring forward) the graph window, centred on ``record``; its clicks open records here."""
        if self.agent is None:
            return None
        if self.connections_window is None:
            self.connections_window = ConnectionsWindow(self.tasks, self)
            self.connections_window.sig_record_requested.connect(self.open_record)
        window = self.connections_window
        window.show_record(self.agent, {key: record.get(key) for key in ("id", "title", "kind", "status")})
        window.show()
        window.raise_()
        window.activateWindow()
        return window


def _count_notes(item: QTreeWidgetItem) -> int:
    """Write a folder's count, its own notes then ``(N in all)`` when it has subfolders; returns the total."""
    own = item.data(1, Qt.ItemDataRole.UserRole) or 0
    total = own + sum(_count_notes(item.child(number)) for number in range(item.childCount()))
    shown = f"{own:,}" if own else ""
    item.setText(1, f"{shown} ({total:,} in all)".lstrip() if item.childCount() else shown)
    return total


def answered_by(result: dict[str, Any]) -> str:
    """How ``operator/search`` ranked its answer, in the owner's words."""
    if result.get("mode") == "hybrid":
        if result.get("vectors") == "building":
            return "ranked by keywords and meaning (some notes are still being read for meaning)"
        return "ranked by keywords and meaning"
    if result.get("embedding") in NO_MODEL:
        return "Keyword only: no embedding model installed"
    why = result.get("hybridUnavailable")
    return f"Keyword only: {why}" if why else "ranked by keywords"
