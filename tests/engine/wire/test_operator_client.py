"""The owner's connection to a serving engine (engine/wire/operator_client.py): an engine that goes away while it
answers (killed, or stopped mid-round) is said to the owner as a broken connection, never as a bare socket error
or a half line of JSON."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path
from typing import Iterator

import pytest

from engine.cli.commands import main
from engine.operator.token_file import ensure_operator_token
from engine.state.statedir import StateDir
from engine.wire.operator_client import UNREACHABLE, OperatorConnection, OperatorError


class DyingEngine:
    """A loopback port where an engine was: each connection's first request is read, ``said`` is written back,
    and the connection is closed, as by an engine killed while it answered."""

    def __init__(self, said: bytes) -> None:
        self.said = said
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.connections = 0
        self._thread = threading.Thread(target=self._serve, name="test-dying-engine", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return  # the listener was closed: the test is over
            self.connections += 1
            with connection, connection.makefile("rb") as requests:
                requests.readline()
                connection.sendall(self.said)
                connection.shutdown(socket.SHUT_RDWR)

    def stop(self) -> None:
        self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accept (closing alone does not, on Linux)
        self.listener.close()
        self._thread.join(timeout=60)


@pytest.fixture(params=[b"", b'{"jsonrpc": "2.0", "id": 1, "res'], ids=["closed", "cut mid-reply"])
def dying_engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[StateDir, DyingEngine]]:
    state = StateDir(tmp_path / "state")
    state.root.mkdir(mode=0o700)
    ensure_operator_token(state)
    engine = DyingEngine(request.param)
    state.write_engine_info({"pid": os.getpid(), "port": engine.port})  # a live pid: the engine looks alive
    try:
        yield state, engine
    finally:
        engine.stop()


def test_an_engine_that_goes_away_while_it_answers_is_a_broken_connection(dying_engine) -> None:
    state, engine = dying_engine
    connection = OperatorConnection(state, client_name="test")
    with pytest.raises(OperatorError) as broken:
        connection.call("operator/syncNow", {})
    assert broken.value.reason == UNREACHABLE
    assert broken.value.message.startswith("The connection to the Knowledge engine broke")
    assert engine.connections == 2  # tried once more, as a dropped connection is, then said
    connection.close()


def test_the_command_line_says_a_broken_connection_in_sentences(dying_engine, capsys) -> None:
    state, _ = dying_engine
    assert main(["--state-dir", str(state.root), "sync", "status"]) == 1
    said = capsys.readouterr().err
    assert said.startswith("knowledge: The connection to the Knowledge engine broke: the engine closed the "
                           "connection"), said
    assert ". If it has stopped, run the command again;" in said
