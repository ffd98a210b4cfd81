"""The SQLite wrapper: transactions that end cleanly even when the disk refuses the COMMIT."""

from __future__ import annotations

import sqlite3

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
