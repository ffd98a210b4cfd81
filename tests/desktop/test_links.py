"""Record links in the window: `knowledge open URL`, one window per state directory, opening at the record.

The engine is real and serves a real socket; a second `knowledge open` is a real process that finds the
running window through its local socket.
"""

from __future__ import annotations

import json
import os
import socket
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QUrl
from PySide6.QtGui import QGuiApplication

import desktop.app
from desktop.common.widgets import SafeTextBrowser
from desktop.links import InstanceServer, agent_for_store, instance_name, send_to_running
from desktop.main_window import MainWindow
from desktop.tasks import EngineTasks
from engine.access.authority import OperatorCaller
from engine.cli.commands import main
from engine.core.ids import new_id
from engine.core.links import record_link
from engine.state.statedir import StateDir

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def window(qtbot, served):
    tasks = EngineTasks()
    made = MainWindow(tasks, served)
    qtbot.addWidget(made)
    made.show()
    qtbot.waitExposed(made)
    yield made
    made.close()
    tasks.shutdown()


@pytest.fixture
def a_record(served_engine) -> tuple[str, str, str]:
    """A demo record's link, its id and its title."""
    hit = served_engine.search(OperatorCaller("main"), {"query": "Dana"})["hits"][0]
    store_id = served_engine.resolver.agent_view("main")["storeId"]
    return record_link(store_id, hit["id"]), hit["id"], hit["title"]


def send(instance: InstanceServer, raw: bytes) -> bytes:
    """What another run sends the window's local socket, with a plain socket (a Qt one would hold the GIL
    while it waits, and the window could not answer in this process)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.settimeout(10)
        connection.connect(instance.server.fullServerName())
        connection.sendall(raw)
        reply = b""
        while not reply.endswith(b"\n"):
            chunk = connection.recv(4096)
            if not chunk:
                break
            reply += chunk
        return reply


def in_thread(work: Any) -> tuple[threading.Thread, list[Any]]:
    """Run blocking socket work off the GUI thread, as another process would (the window keeps answering)."""
    results: list[Any] = []
    worker = threading.Thread(target=lambda: results.append(work()), name="test-open")
    worker.start()
    return worker, results


def test_a_bad_link_is_refused_with_exit_2_and_nothing_opens(tmp_path, capsys, monkeypatch) -> None:
    opened: list[Any] = []
    monkeypatch.setattr(desktop.app, "run", lambda *args, **kwargs: opened.append(args) or 0)
    state = tmp_path / "state"
    for bad in ("https://example.com/", "knowledge://record/st_x/pg_1", f"knowledge://record/{new_id('st')}/..",
                f"knowledge://page/{new_id('st')}/{new_id('pg')}"):
        assert main(["--state-dir", str(state), "open", bad]) == 2
        err = capsys.readouterr().err
        assert "not a Knowledge record link" in err and "knowledge://record/<store id>/<record id>" in err
        assert main(["--state-dir", str(state), "desktop", bad]) == 2
        capsys.readouterr()
    assert opened == [] and not state.exists()


def test_a_link_opens_the_window_at_the_record_once_the_inventory_is_there(qtbot, window, a_record,
                                                                           gui_thread_guard) -> None:
    link, record_id, title = a_record
    page = window.records_view.page
    with qtbot.waitSignal(page.sig_content_loaded, timeout=10_000) as loaded:
        window.open_link(link)  # before the engine answered: it waits for the inventory
        window.connect_engine()
    assert loaded.args == [record_id]
    assert window.current_view() is window.records_view and page.record["id"] == record_id
    assert window.agent_picker.currentText() == "main" and not window.messages.error


def test_a_link_to_a_store_no_agent_uses_is_said_and_changes_nothing(qtbot, window, gui_thread_guard) -> None:
    with qtbot.waitSignal(window.agents_view.sig_inventory_changed, timeout=10_000):
        window.connect_engine()
    before = window.current_view()
    window.open_link(record_link(new_id("st"), new_id("pg")))
    assert window.messages.error and "which no agent of" in window.messages.label.text()
    assert window.current_view() is before and window.records_view.page.record is None


def test_the_agent_shown_is_one_of_the_links_store_owners_first() -> None:
    store = new_id("st")
    inventory = {"agents": [
        {"name": "helper", "owner": False, "store": {"status": "ok", "storeId": store}},
        {"name": "lead", "owner": True, "store": {"status": "ok", "storeId": store}},
        {"name": "other", "owner": True, "store": {"status": "ok", "storeId": new_id("st")}},
        {"name": "gone", "owner": True, "store": {"status": "unavailable", "storeId": store}}]}
    assert agent_for_store(inventory, store) == "lead"
    assert agent_for_store(inventory, store, prefer="helper") == "helper"
    assert agent_for_store(inventory, store, prefer="other") == "lead"
    assert agent_for_store(inventory, new_id("st")) is None


def test_a_second_open_brings_the_running_window_forward_at_the_record(qtbot, window, served, a_record) -> None:
    link, record_id, _ = a_record
    instance = InstanceServer(served)
    assert instance.listen()
    instance.sig_open_requested.connect(window.open_link)
    try:
        with qtbot.waitSignal(window.agents_view.sig_inventory_changed, timeout=10_000):
            window.connect_engine()
        page = window.records_view.page
        env = {**os.environ, "PYTHONPATH": str(ROOT), "QT_QPA_PLATFORM": "offscreen"}
        with qtbot.waitSignal(page.sig_content_loaded, timeout=60_000) as loaded:
            # `knowledge open URL` as the desktop entry runs it: a process of its own, which must find this window.
            process = subprocess.Popen([sys.executable, "-m", "engine.cli", "--state-dir", str(served.root),
                                        "open", link], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        qtbot.waitUntil(lambda: process.poll() is not None, timeout=60_000)
        assert process.returncode == 0, process.stdout.read()
        assert loaded.args == [record_id] and window.records_view.page.record["id"] == record_id

        # No link: the window only comes forward (a second `knowledge desktop`).
        asked: list[Any] = []
        instance.sig_open_requested.connect(asked.append)
        worker, answered = in_thread(lambda: send(instance, b'{"open": null}\n'))
        qtbot.waitUntil(lambda: not worker.is_alive(), timeout=20_000)
        assert asked == [None] and answered == [b"ok\n"]
    finally:
        instance.close()


def test_the_local_socket_checks_what_it_is_sent(qtbot, served) -> None:
    instance = InstanceServer(served)
    assert instance.listen()
    requested: list[Any] = []
    instance.sig_open_requested.connect(requested.append)

    try:
        for raw in (json.dumps({"open": "https://example.com/"}).encode() + b"\n", b"not json\n"):
            worker, replies = in_thread(lambda raw=raw: send(instance, raw))
            qtbot.waitUntil(lambda: not worker.is_alive(), timeout=10_000)
            assert replies[0].startswith(b"error: ")
        assert requested == []
    finally:
        instance.close()
    assert send_to_running(served, None) is False  # nobody listens any more


def test_a_stale_socket_left_by_a_crashed_window_is_taken_over(qtbot, served) -> None:
    probe = InstanceServer(served)
    assert probe.listen()
    path = probe.server.fullServerName()
    probe.close()
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(path)  # what a window that crashed leaves: the socket file, and nobody listening on it
    stale.close()
    assert os.path.exists(path) and send_to_running(served, None) is False
    taking_over = InstanceServer(served)
    try:
        assert taking_over.listen() and taking_over.server.fullServerName() == path
    finally:
        taking_over.close()


def test_a_record_link_in_a_records_text_opens_that_record(qtbot, window, served_engine, gui_thread_guard) -> None:
    gui_thread_guard.active = False
    hits = served_engine.search(OperatorCaller("main"), {"query": "Northwind"})["hits"]
    store_id = served_engine.resolver.agent_view("main")["storeId"]
    gui_thread_guard.active = True
    first, second = hits[0]["id"], hits[1]["id"]
    with qtbot.waitSignal(window.agents_view.sig_inventory_changed, timeout=10_000):
        window.connect_engine()
    page = window.records_view.page
    with qtbot.waitSignal(page.sig_content_loaded, timeout=10_000):
        window.open_record(first)
    browser = page.findChildren(SafeTextBrowser)[0]
    with qtbot.waitSignal(page.sig_content_loaded, timeout=10_000) as loaded:
        browser.sig_link_activated.emit(QUrl(record_link(store_id, second)))  # as a click on the anchor does
    assert loaded.args == [second] and page.record["id"] == second


def test_the_socket_lives_in_the_private_runtime_directory_when_there_is_one(tmp_path, monkeypatch, served) -> None:
    runtime = Path(tempfile.mkdtemp(prefix="kd-run-"))  # short, as /run/user/UID is; mode 0700
    try:
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
        name = instance_name(served)
        assert os.path.dirname(name) == str(runtime)
        assert instance_name(StateDir(served.root)) == name  # the same state directory, the same window
        assert instance_name(StateDir(tmp_path / "other")) != name
        instance = InstanceServer(served)
        assert instance.listen() and instance.server.fullServerName() == name
        instance.close()
        runtime.chmod(0o755)  # a directory other accounts may enter: the name goes to Qt's temporary directory
        assert instance_name(served) == os.path.basename(name)
        long = tmp_path / ("r" * 80)
        long.mkdir(mode=0o700)
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(long))  # too long for a socket's path
        assert instance_name(served) == os.path.basename(name)
        monkeypatch.delenv("XDG_RUNTIME_DIR")
        assert instance_name(served) == os.path.basename(name)
    finally:
        shutil.rmtree(runtime)


def test_open_without_a_running_window_starts_one_that_later_runs_find(qtbot, served, a_record) -> None:
    link, _, _ = a_record
    env = {**os.environ, "PYTHONPATH": str(ROOT), "QT_QPA_PLATFORM": "offscreen"}
    command = [sys.executable, "-m", "engine.cli", "--state-dir", str(served.root)]
    window = subprocess.Popen([*command, "open", link], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        qtbot.waitUntil(lambda: window.poll() is not None or send_to_running(served, None), timeout=60_000)
        assert window.poll() is None  # the window it opened is up, and answers
        again = subprocess.run([*command, "desktop"], env=env, capture_output=True, text=True, timeout=60)
        assert again.returncode == 0 and "already open" in again.stdout and "brought it forward" in again.stdout
        assert window.poll() is None  # still the one window
    finally:
        window.terminate()
        window.wait(30)


def test_the_owner_copies_the_link_of_the_record_shown(qtbot, window, a_record, gui_thread_guard) -> None:
    link, record_id, _ = a_record
    with qtbot.waitSignal(window.agents_view.sig_inventory_changed, timeout=10_000):
        window.connect_engine()
    window.copy_link_action.trigger()  # no record shown yet
    assert "Open a record in Records first" in window.messages.label.text()
    with qtbot.waitSignal(window.records_view.page.sig_content_loaded, timeout=10_000):
        window.open_record(record_id)
    assert window.copy_link_action.shortcut().toString() == "Ctrl+Shift+L"
    window.copy_link_action.trigger()
    assert QGuiApplication.clipboard().text() == link and link in window.messages.label.text()
