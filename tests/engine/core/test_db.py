"""The SQLite wrapper: transactions that end cleanly even when the disk refuses the COMMIT."""

from __future__ import annotations

import sqlite3
import threading

import pytest

from engine.core.db import Database


class RefusingCommit:
    """A connection whose next COMMIT fails as a full disk makes it fail, leaving the transaction open."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self.connection = connection
        self.refuse = True

    def execute(self, sql: str, *args):
        if sql == "COMMIT" and self.refuse:
            self.refuse = False
            raise sqlite3.OperationalError("database or disk is full")
        return self.connection.execute(sql, *args)

    def __getattr__(self, name: str):
        return getattr(self.connection, name)


def test_a_refused_commit_rolls_back_and_the_next_transaction_works(tmp_path):
    """Found by the disk-full harness: SQLite may keep a transaction open after a failed COMMIT."""
    database = Database.open(tmp_path / "state.sqlite", create=True,
                             migrations=[("0001", "CREATE TABLE t (n INTEGER)")])
    real = database.connection
    database.connection = RefusingCommit(real)  # type: ignore[assignment]
    with pytest.raises(sqlite3.OperationalError):
        with database.atomic():
            database.execute("INSERT INTO t (n) VALUES (1)")
    assert not real.in_transaction
    with database.atomic():
        database.execute("INSERT INTO t (n) VALUES (2)")
    assert [row["n"] for row in database.all("SELECT n FROM t")] == [2]
    database.connection = real
    database.close()


def test_a_snapshot_reads_the_last_commit_beside_an_open_transaction_and_never_writes(tmp_path):
    database = Database.open(tmp_path / "state.sqlite", create=True,
                             migrations=[("0001", "CREATE TABLE t (n INTEGER)")])
    database.execute("INSERT INTO t (n) VALUES (1)")
    with database.atomic():
        database.execute("INSERT INTO t (n) VALUES (2)")
        with database.snapshot() as reader:  # the writer's transaction is open and holds its lock
            assert [row["n"] for row in reader.all("SELECT n FROM t")] == [1]
            with pytest.raises(sqlite3.OperationalError, match="readonly"):
                reader.execute("INSERT INTO t (n) VALUES (3)")
    with database.snapshot() as reader:
        first = reader.all("SELECT n FROM t")
        database.execute("INSERT INTO t (n) VALUES (4)")  # committed while the snapshot is open
        assert reader.all("SELECT n FROM t") == first  # one view for the whole block
    with database.snapshot() as reader:
        assert [row["n"] for row in reader.all("SELECT n FROM t ORDER BY n")] == [1, 2, 4]
    database.close()


def test_a_migration_may_create_a_trigger_whose_body_holds_statements(tmp_path):
    database = Database.open(tmp_path / "state.sqlite", create=True, migrations=[("0001", """
        CREATE TABLE t (n INTEGER);
        CREATE TABLE seen (n INTEGER);
        CREATE TRIGGER t_seen AFTER INSERT ON t BEGIN
            INSERT INTO seen (n) VALUES (NEW.n);
            INSERT INTO seen (n) VALUES (NEW.n + 1);
        END;
        CREATE INDEX seen_n ON seen (n)
    """)])
    database.execute("INSERT INTO t (n) VALUES (1)")
    assert [row[0] for row in database.tuples("SELECT n FROM seen ORDER BY n")] == [1, 2]
    assert database.one("SELECT name FROM sqlite_master WHERE name = 'seen_n'") is not None


def test_a_large_cache_lasts_for_its_work_only(tmp_path):
    db = Database.open(tmp_path / "state.sqlite", create=True)
    default = db.one("PRAGMA cache_size")[0]
    with db.large_cache(4096):
        assert db.one("PRAGMA cache_size")[0] == -4096
    assert db.one("PRAGMA cache_size")[0] == default
    with pytest.raises(RuntimeError), db.large_cache(4096), db.atomic():
        raise RuntimeError("the work failed")
    assert db.one("PRAGMA cache_size")[0] == default
    db.close()


def test_a_change_stamp_moves_with_every_commit_of_any_connection(tmp_path):
    path = tmp_path / "state.sqlite"
    database = Database.open(path, create=True, migrations=[("0001", "CREATE TABLE t (n INTEGER)")])
    first = database.change_stamp()
    assert database.change_stamp() == first
    database.execute("INSERT INTO t (n) VALUES (1)")
    second = database.change_stamp()
    assert second != first
    other = sqlite3.connect(path)
    with other:
        other.execute("INSERT INTO t (n) VALUES (2)")
    other.close()
    assert database.change_stamp() not in (first, second)
    database.close()


def test_a_change_stamp_is_answered_while_another_caller_is_asking(tmp_path):
    """Callers do not queue behind one another's questions (an import's writing threads authorising each
    write): one asking is stood for by the probe's lock held, and another caller is answered meanwhile."""
    database = Database.open(tmp_path / "state.sqlite", create=True,
                             migrations=[("0001", "CREATE TABLE t (n INTEGER)")])
    expected = database.change_stamp()  # the probe is open
    answers: list[tuple[int, int]] = []
    with database._probe_lock:
        asking = threading.Thread(target=lambda: answers.append(database.change_stamp()))
        asking.start()
        asking.join(30)
        assert not asking.is_alive()
    assert answers == [expected]
    database.close()
