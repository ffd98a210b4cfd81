"""Connect an agent and Settings: ready client configurations, recent connections, owner settings the
engine checks.  A real engine serves a real socket; the agent connection is a real socket client."""

from __future__ import annotations

import json
import re
import shlex
import socket
import threading

import pytest
from PySide6.QtGui import QGuiApplication

from desktop.common.times import clock_time, local_now
from desktop.connect.agent_dialog import CLIENT_TABS, ConnectAgentDialog
from desktop.connect.settings_dialog import SettingsDialog
from desktop.main_window import MainWindow
from desktop.tasks import EngineTasks


def server_of(client: str, text: str) -> dict:
    """The stdio server entry of a configuration as each client reads it."""
    if client == "claude-code":
        return json.loads(shlex.split(text)[-1])
    if client == "codex":
        import tomllib
        return tomllib.loads(text)["mcp_servers"]["knowledge"]
    data = json.loads(text)
    return {"vscode": lambda: data["servers"], "openclaw": lambda: data["mcp"]["servers"]}.get(
        client, lambda: data["mcpServers"])()["knowledge"]


def connect_as_agent(port: int, token: str, instance: str) -> threading.Thread:
    """An agent's connection that stays open until the returned thread is joined (it reads to the end)."""
    opened = threading.Event()

    def talk() -> None:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
            connection.sendall(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "clientInfo": {"name": "test-client", "version": "1"},
                "_meta": {"knowledge": {"token": token, "audience": {"kind": "owner-private"},
                                        "instance": instance}}}}).encode() + b"\n")
            connection.makefile("rb").readline()
            opened.set()

    worker = threading.Thread(target=talk, name="test-agent")
    worker.start()
    assert opened.wait(30)
    return worker


@pytest.fixture
def guest(served_engine) -> str:
    served_engine.add_agent("guest")
    return "guest"


def inventory_agents(served_engine) -> list[dict]:
    return [{"name": a["name"], "owner": a["owner"]} for a in served_engine.agents()]


def test_every_client_gets_a_working_configuration_and_copy_puts_it_on_the_clipboard(
        qtbot, tasks, served_engine, guest, gui_thread_guard) -> None:
    gui_thread_guard.active = False
    agents = inventory_agents(served_engine)
    gui_thread_guard.active = True
    dialog = ConnectAgentDialog(tasks, agents, "main")
    qtbot.addWidget(dialog)
    with qtbot.waitSignal(dialog.sig_setup_loaded, timeout=10_000):
        dialog.show()
    assert [dialog.tabs.tabText(n) for n in range(dialog.tabs.count())] == [title for _, title in CLIENT_TABS]
    for client, tab in dialog.client_tabs.items():
        server = server_of(client, tab.config.toPlainText())
        assert server["args"][:3] == ["mcp", "--agent", "main"] and "--audience" not in server["args"], client
        assert tab.copy_button.isEnabled() and tab.where.text()
    assert "has owner authority" in dialog.audience_note.text()

    tab = dialog.client_tabs["vscode"]
    with qtbot.waitSignal(dialog.sig_copied) as copied:
        tab.copy_button.click()
    assert copied.args == ["vscode"] and QGuiApplication.clipboard().text() == tab.config.toPlainText()

    with qtbot.waitSignal(dialog.sig_setup_loaded, timeout=10_000):
        dialog.agent_picker.setCurrentText("guest")  # no owner authority: its own conversation, as the CLI says
    args = server_of("cursor", dialog.client_tabs["cursor"].config.toPlainText())["args"]
    assert args[args.index("--audience") + 1] == "conversation" and "--session-id" in args
    note = dialog.audience_note.text()
    assert "no owner authority" in note and "knowledge grants add guest" in note
    assert dialog.session_key.isEnabled()

    dialog.instance.setText("desk-laptop")
    dialog.session_key.setText("chat-7")
    with qtbot.waitSignal(dialog.sig_setup_loaded, timeout=10_000):
        dialog.session_key.editingFinished.emit()  # as leaving the field does
    args = server_of("vscode", dialog.client_tabs["vscode"].config.toPlainText())["args"]
    assert args[args.index("--instance") + 1] == "desk-laptop" and args[args.index("--session-key") + 1] == "chat-7"
    assert "session key chat-7" in dialog.audience_note.text()

    dialog.instance.setText("x" * 300)  # the engine checks it, as the command line's --instance
    with qtbot.waitSignal(dialog.sig_setup_loaded, timeout=10_000):
        dialog.instance.editingFinished.emit()
    tab = dialog.client_tabs["generic"]
    assert tab.where.text().startswith("Problem:") and not tab.copy_button.isEnabled()

    with qtbot.waitSignal(dialog.sig_setup_loaded, timeout=10_000):
        dialog.agent_picker.setCurrentText("main")
    assert not dialog.session_key.isEnabled() and dialog.instance.text() == ""


def test_the_agents_seen_connected_recently_are_listed(qtbot, tasks, served_engine, gui_thread_guard) -> None:
    gui_thread_guard.active = False
    token = served_engine.registry.add_credential("main")
    port = served_engine_port(served_engine)
    agents = inventory_agents(served_engine)
    gui_thread_guard.active = True
    dialog = ConnectAgentDialog(tasks, agents, "main")
    qtbot.addWidget(dialog)
    with qtbot.waitSignal(dialog.sig_connections_loaded, timeout=10_000) as loaded:
        dialog.show()
    assert loaded.args == [0] and "No agent has connected" in dialog.connections_note.text()

    worker = connect_as_agent(port, token, "laptop-main")
    worker.join(30)
    with qtbot.waitSignal(dialog.sig_connections_loaded, timeout=10_000) as loaded:
        dialog.load_connections()
    assert loaded.args == [1]
    cells = [dialog.connections.item(0, column).text() for column in range(dialog.connections.columnCount())]
    assert cells[:4] == ["main", "laptop-main", "owner-private", "test-client 1"] and cells[6] == "0"
    for column in (4, 5):  # first and last seen: the owner's local time, the exact moment on hover
        stored = re.search(r"stored as (\S+)\)$", dialog.connections.item(0, column).toolTip()).group(1)
        assert cells[column] == clock_time(stored, local_now()) and stored not in cells[column]


def served_engine_port(engine) -> int:
    return engine.state.read_engine_info()["port"]


def test_settings_are_saved_through_the_engine_and_a_bad_root_is_refused(qtbot, tasks, served_engine, tmp_path,
                                                                         gui_thread_guard) -> None:
    gui_thread_guard.active = False
    (tmp_path / "projects").mkdir()
    config = served_engine.state.config
    gui_thread_guard.active = True
    dialog = SettingsDialog(tasks)
    qtbot.addWidget(dialog)
    with qtbot.waitSignal(dialog.sig_settings_loaded, timeout=10_000):
        dialog.show()
    assert not dialog.search_knowledge.isChecked() and dialog.writes.isChecked() and dialog.workspace_roots() == []

    dialog.search_knowledge.setChecked(True)
    dialog.new_root.setText(str(tmp_path / "projects"))
    dialog.add_root()
    with qtbot.waitSignal(dialog.sig_settings_saved, timeout=10_000) as saved:
        dialog.save_button.click()
    assert saved.args[0]["settings"]["workspaceRoots"] == [str(tmp_path / "projects")]
    assert "Saved" in dialog.message.text()
    gui_thread_guard.active = False
    current = served_engine.settings.current()
    written = config.read_bytes()
    gui_thread_guard.active = True
    assert current.knowledge_runtime_enabled and current.workspace_roots == (str(tmp_path / "projects"),)

    dialog.writes.setChecked(False)
    dialog.new_root.setText("projects/relative")
    dialog.add_root()
    with qtbot.waitSignal(dialog.sig_save_refused, timeout=10_000) as refused:
        dialog.save_button.click()
    assert "absolute" in refused.args[0] and dialog.message.text().startswith("Not saved:")
    assert dialog.workspace_roots()[-1] == "projects/relative" and not dialog.writes.isChecked()  # the edit stays
    gui_thread_guard.active = False
    assert config.read_bytes() == written and served_engine.settings.current().writes_enabled  # nothing changed
    gui_thread_guard.active = True


def test_the_window_offers_both_dialogs_in_its_tools_menu(qtbot, served) -> None:
    tasks = EngineTasks()
    window = MainWindow(tasks, served)
    qtbot.addWidget(window)
    window.show()
    try:
        with qtbot.waitSignal(window.agents_view.sig_inventory_changed, timeout=10_000):
            window.connect_engine()
        assert window.connect_agent_action.shortcut().toString() == "Ctrl+Shift+A"
        assert window.settings_action.shortcut().toString() == "Ctrl+,"
        window.connect_agent_action.trigger()
        dialog = window.connect_dialog
        qtbot.waitUntil(lambda: dialog.client_tabs["generic"].copy_button.isEnabled(), timeout=10_000)
        assert dialog.agent_picker.currentText() == "main" and dialog.isVisible()
        with qtbot.waitSignal(window.agents_view.sig_inventory_changed, timeout=10_000):
            window.settings_action.trigger()
            settings = window.settings_dialog
            qtbot.waitUntil(lambda: settings.save_button.isEnabled(), timeout=10_000)
            settings.search_knowledge.setChecked(True)
            settings.save_button.click()  # saved settings reload the inventory the window shows
    finally:
        window.close()
        tasks.shutdown()
