"""Record links in the window: ``knowledge open URL``, one window per state directory, and opening at a record.

``knowledge://record/<store id>/<record id>`` (``engine/core/links.py``) is
what agents cite.  Clicking one runs ``knowledge open URL`` (the desktop
entry registers the scheme).  A window that already runs for the state
directory is asked to open it, over a local socket (``QLocalServer``)
named after the account and the state directory, and comes forward;
only when none answers does a new window start, at the record.

The window finds the record as the operator: the link names a store, and
the window shows it through an agent that uses that store (the one in view
when it does), exactly as if the owner had picked that agent and opened
the record.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Signal
from PySide6.QtNetwork import QLocalServer, QLocalSocket

from engine.core.errors import InvalidParams
from engine.core.links import RecordLink, parse_record_link
from engine.state.statedir import StateDir

from .common.widgets import bring_forward

if TYPE_CHECKING:
    from .main_window import MainWindow

CONNECT_TIMEOUT_MS = 1000
REPLY_TIMEOUT_MS = 5000
REQUEST_MAX_BYTES = 4096
OK = b"ok\n"
SOCKET_PATH_MAX = 100  # a Unix socket's path holds at most 107 bytes


def instance_name(state: StateDir) -> str:
    """The local socket: one per account and state directory.

    In ``$XDG_RUNTIME_DIR`` when the session has one (a directory only this account can enter, so no
    other account can take the name first); else a name Qt places in the temporary directory.
    """
    where = os.path.realpath(state.root).encode("utf-8", "surrogateescape")
    account = os.geteuid() if hasattr(os, "geteuid") else os.getlogin()
    name = f"knowledge-desk-{account}-{hashlib.sha256(where).hexdigest()[:20]}"
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and hasattr(os, "geteuid") and os.path.isabs(runtime) and _private_directory(runtime):
        path = os.path.join(runtime, name)
        if len(path.encode("utf-8", "surrogateescape")) <= SOCKET_PATH_MAX:
            return path
    return name


def _private_directory(path: str) -> bool:
    try:
        info = os.stat(path)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid() and not info.st_mode & 0o077


def send_to_running(state: StateDir, url: str | None) -> bool:
    """Ask the window running for ``state`` to come forward (at ``url``); False when none answers.

    Blocking, with short timeouts: it runs before this process has a window (a Qt socket waiting holds
    the interpreter, so the window that answers must be another process's).
    """
    socket = QLocalSocket()
    socket.connectToServer(instance_name(state))
    if not socket.waitForConnected(CONNECT_TIMEOUT_MS):
        return False
    try:
        socket.write(json.dumps({"open": url}).encode("utf-8") + b"\n")
        if not socket.waitForBytesWritten(REPLY_TIMEOUT_MS):
            return False
        return read_reply(socket) == OK
    finally:
        socket.disconnectFromServer()


def read_reply(socket: QLocalSocket) -> bytes:
    """One reply line (blocking); what arrived also when the window closed the connection right after it."""
    reply = b""
    while not reply.endswith(b"\n") and len(reply) <= REQUEST_MAX_BYTES:
        if not socket.bytesAvailable() and not socket.waitForReadyRead(REPLY_TIMEOUT_MS):
            reply += bytes(socket.readAll().data())
            break
        reply += bytes(socket.readAll().data())
    return reply


class InstanceServer(QObject):
    """Listens for later ``knowledge open`` and ``knowledge desktop`` runs of the same state directory."""

    sig_open_requested = Signal(object)
    """Another run asked this window to come forward: the record link (checked), or None for the window only."""

    def __init__(self, state: StateDir, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.name = instance_name(state)
        self.server = QLocalServer(self)
        self.server.setSocketOptions(QLocalServer.SocketOption.UserAccessOption)  # this account only
        self.server.newConnection.connect(self._on_new_connection)

    def listen(self) -> bool:
        """Start listening; a socket left by a window that crashed is removed first (nobody answered it)."""
        if self.server.listen(self.name):
            return True
        QLocalServer.removeServer(self.name)
        return self.server.listen(self.name)

    def close(self) -> None:
        self.server.close()

    def _on_new_connection(self) -> None:
        while self.server.hasPendingConnections():
            connection = self.server.nextPendingConnection()
            buffer = bytearray()
            connection.readyRead.connect(lambda c=connection, b=buffer: self._on_ready_read(c, b))
            connection.disconnected.connect(connection.deleteLater)

    def _on_ready_read(self, connection: QLocalSocket, buffer: bytearray) -> None:
        buffer += bytes(connection.readAll().data())
        if len(buffer) > REQUEST_MAX_BYTES:
            connection.abort()
            return
        if not buffer.endswith(b"\n"):
            return
        try:
            request = json.loads(buffer.decode("utf-8"))
            url = request.get("open") if isinstance(request, dict) else None
            if url is not None:
                parse_record_link(url)  # what reaches the window is a link, checked again here
        except (ValueError, InvalidParams) as exc:
            connection.write(f"error: {getattr(exc, 'message', exc)}\n".encode("utf-8"))
            connection.disconnectFromServer()
            return
        connection.write(OK)
        connection.disconnectFromServer()
        self.sig_open_requested.emit(url)


class LinkOpener(QObject):
    """Opens record links in the window: picks an agent of the link's store and shows the record.

    A link that arrives before the inventory waits for it; a store no agent uses is said in the
    message bar, and nothing else changes.
    """

    sig_link_opened = Signal(str, str)
    """A link was opened: the agent it was shown through, and the record id."""

    def __init__(self, window: "MainWindow") -> None:
        super().__init__(window)
        self.window = window
        self._pending: RecordLink | None = None
        self._inventory_seen = False
        window.agents_view.sig_inventory_changed.connect(self._on_inventory)

    def open(self, url: str) -> None:
        try:
            link = parse_record_link(url)
        except InvalidParams as exc:
            self.window.messages.show_error(exc.message)
            return
        self.bring_forward()
        self._pending = link
        if self._inventory_seen:
            self._open_pending()

    def bring_forward(self) -> None:
        bring_forward(self.window)

    def _on_inventory(self, inventory: dict[str, Any]) -> None:
        self._inventory_seen = True
        if self._pending is not None:
            self._open_pending()

    def _open_pending(self) -> None:
        link, self._pending = self._pending, None
        if link is None:
            return
        agent = agent_for_store(self.window.inventory, link.store_id, prefer=self.window.agent)
        if agent is None:
            self.window.messages.show_error(
                f"The link names store {link.store_id}, which no agent of {self.window.state.root} uses: "
                "it belongs to another state directory, or its agents were removed.")
            return
        if agent != self.window.agent:
            self.window.agent_picker.setCurrentText(agent)  # the views follow the agent, as a pick would
        self.window.open_record(link.record_id)
        self.sig_link_opened.emit(agent, link.record_id)


def agent_for_store(inventory: dict[str, Any], store_id: str, prefer: str | None = None) -> str | None:
    """An agent whose store is ``store_id`` (``prefer`` when it is one), owners first, else None."""
    members = [agent for agent in inventory.get("agents", [])
               if (agent.get("store") or {}).get("storeId") == store_id
               and (agent.get("store") or {}).get("status") == "ok"]
    names = [agent["name"] for agent in members]
    if prefer in names:
        return prefer
    owners = [agent["name"] for agent in members if agent.get("owner")]
    return (owners or names or [None])[0]
