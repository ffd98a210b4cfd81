"""A small class around one SQLite connection.

``atomic()`` nests with savepoints, so a function that needs a transaction
can open one whether or not its caller already has.  Schema changes are
named migrations recorded in a ``migrations`` table and applied once, in
order.  Connections are opened in WAL mode with ``synchronous=FULL``: a
committed transaction is what the engine acknowledges, so it must survive
power loss.
"""

from __future__ import annotations

import itertools
import sqlite3
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Sequence

from .errors import StoreUnavailable
from .tags import tag_within

Migration = tuple[str, str]  # (name, SQL script)
READERS_KEPT = 4  # idle snapshot connections kept open for the next reads
LARGE_CACHE_KIB = 64 * 1024
# Functions of ours every connection's SQL may call: (name, how many arguments, function).
SQL_FUNCTIONS = (("tag_within", 2, tag_within),)


class Database:
    def __init__(self, connection: sqlite3.Connection, path: Path | None) -> None:
        self.connection = connection
        self.path = path
        self._savepoints = itertools.count()
        self._depth = 0
        self._lock = threading.RLock()
        self._readers: list[Database] = []  # idle snapshot connections (``snapshot``)
        self._readers_lock = threading.Lock()  # not ``_lock``: a read never waits for a writer's transaction
        self._closed = False
        self._probe: sqlite3.Connection | None = None  # asks ``data_version`` (``change_stamp``)
        self._probe_lock = threading.Lock()

    @classmethod
    def open(cls, path: Path | None, *, create: bool, migrations: Sequence[Migration] = ()) -> "Database":
        """Open (or with ``create`` make) a database and bring its schema up to date.

        Without ``create`` a missing file is an error: a store that lost its
        database is never given an empty new one behind the owner's back.
        """
        if path is None:
            connection = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        else:
            mode = "rwc" if create else "rw"
            try:
                connection = sqlite3.connect(
                    f"{path.resolve().as_uri()}?mode={mode}", uri=True,
                    isolation_level=None, check_same_thread=False, timeout=30,
                )
            except sqlite3.OperationalError as exc:
                raise StoreUnavailable(f"cannot open database {path.name}: {exc}", path=str(path)) from exc
        _prepare(connection)
        connection.execute("PRAGMA foreign_keys = ON")
        if path is not None:
            connection.execute("PRAGMA journal_mode = WAL")
            connection.execute("PRAGMA synchronous = FULL")
        database = cls(connection, path)
        database.migrate(migrations)
        return database

    def close(self) -> None:
        with self._readers_lock:
            readers, self._readers, self._closed = self._readers, [], True
        for reader in readers:
            reader.connection.close()
        with self._probe_lock:
            if self._probe is not None:
                self._probe.close()
                self._probe = None
        self.connection.close()

    def change_stamp(self) -> tuple[int, int]:
        """A value that differs after every commit to the database, by any connection of any process, for
        memos of what was read (compare it before reading, never after).

        A file database asks a connection of its own for SQLite's ``data_version``, which moves with every
        other connection's commit (this class's connection included) and never waits for this connection's
        transactions; an in-memory database has no other connection, and its count of changed rows serves.
        Changes not yet committed are seen only inside their own transaction: readers there must not memoise.
        """
        changed = self.connection.total_changes
        if self.path is None:
            return (0, changed)
        probe = self._probe
        if probe is None or self._closed:
            with self._probe_lock:
                if self._closed:
                    raise StoreUnavailable(f"database {self.path.name} is closed", path=str(self.path))
                if self._probe is None:
                    self._probe = self._open_reader().connection
                probe = self._probe
        # Asked without a lock of ours (SQLite serialises the connection's use, sqlite3.threadsafety 3): held
        # across the statement, which waits for the interpreter lock after it, a lock of ours made every
        # caller queue behind the others' waits (an import's 64 writing threads authorising, the lane with them).
        try:
            return (probe.execute("PRAGMA data_version").fetchone()[0], changed)
        except sqlite3.ProgrammingError as exc:  # closed meanwhile
            raise StoreUnavailable(f"database {self.path.name} is closed", path=str(self.path)) from exc

    @contextmanager
    def snapshot(self) -> Iterator["Database"]:
        """The last committed state, read on a connection of its own: one consistent view for the whole
        ``with`` block that never waits for this connection's transactions (SQLite WAL readers), and
        refuses to write.  An in-memory database has no second connection; it yields itself."""
        if self.path is None:
            yield self
            return
        with self._readers_lock:
            reader = self._readers.pop() if self._readers else None
        if reader is None:
            reader = self._open_reader()
        reader.connection.execute("BEGIN")
        kept = False
        try:
            yield reader
            reader.connection.execute("ROLLBACK")
            kept = True
        finally:
            with self._readers_lock:
                if kept and not self._closed and len(self._readers) < READERS_KEPT:
                    self._readers.append(reader)
                    reader = None
            if reader is not None:
                reader.connection.close()

    def _open_reader(self) -> "Database":
        assert self.path is not None
        try:
            connection = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=rw", uri=True, isolation_level=None,
                                         check_same_thread=False, timeout=30)
        except sqlite3.OperationalError as exc:
            raise StoreUnavailable(f"cannot open database {self.path.name}: {exc}", path=str(self.path)) from exc
        _prepare(connection)
        connection.execute("PRAGMA query_only = ON")
        return Database(connection, self.path)

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """A transaction, or a savepoint inside the caller's transaction."""
        with self._lock:
            if self._depth == 0:
                self.connection.execute("BEGIN IMMEDIATE")
                self._depth += 1
                try:
                    yield
                except BaseException:
                    self._depth -= 1
                    self.connection.execute("ROLLBACK")
                    raise
                self._depth -= 1
                try:
                    self.connection.execute("COMMIT")
                except sqlite3.Error:
                    # A failed COMMIT (a full disk) may leave the transaction open; roll it back so the
                    # connection takes the next one instead of refusing every BEGIN from now on.
                    if self.connection.in_transaction:
                        self.connection.execute("ROLLBACK")
                    raise
                return
            name = f"sp{next(self._savepoints)}"
            self.connection.execute(f"SAVEPOINT {name}")
            self._depth += 1
            try:
                yield
            except BaseException:
                self._depth -= 1
                self.connection.execute(f"ROLLBACK TO {name}")
                self.connection.execute(f"RELEASE {name}")
                raise
            self._depth -= 1
            self.connection.execute(f"RELEASE {name}")

    @contextmanager
    def large_cache(self, kib: int = LARGE_CACHE_KIB) -> Iterator[None]:
        """Give the connection a page cache of ``kib`` KiB for one large piece of work, then its own again.

        SQLite's default (2 MiB) holds a few thousand records' index pages; a scan that catalogues
        100,000 files in one transaction would otherwise re-read index pages and spill dirty ones to the WAL.
        """
        with self._lock:
            previous = self.connection.execute("PRAGMA cache_size").fetchone()[0]
            self.connection.execute(f"PRAGMA cache_size = {-int(kib)}")
            try:
                yield
            finally:
                self.connection.execute(f"PRAGMA cache_size = {int(previous)}")

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> sqlite3.Cursor:
        with self._lock:
            return self.connection.execute(sql, params)

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> sqlite3.Cursor:
        with self._lock:
            return self.connection.executemany(sql, rows)

    def one(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> sqlite3.Row | None:
        with self._lock:
            return self.connection.execute(sql, params).fetchone()

    def all(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self.connection.execute(sql, params).fetchall()

    def iterate(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> Iterator[sqlite3.Row]:
        """Rows one at a time (for large scans), holding the connection while iterating."""
        with self._lock:
            yield from self.connection.execute(sql, params)

    def tuples(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[tuple[Any, ...]]:
        """Like ``all``, as plain tuples: cheaper where each row becomes an object of its own right away."""
        with self._lock:
            cursor = self.connection.cursor()
            cursor.row_factory = None
            return cursor.execute(sql, params).fetchall()

    def iterate_tuples(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> Iterator[tuple[Any, ...]]:
        """Like ``iterate``, as plain tuples."""
        with self._lock:
            cursor = self.connection.cursor()
            cursor.row_factory = None
            yield from cursor.execute(sql, params)

    def migrate(self, migrations: Sequence[Migration]) -> None:
        with self._lock:
            self.connection.execute(
                "CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
            )
            applied = {row[0] for row in self.connection.execute("SELECT name FROM migrations")}
            for name, script in migrations:
                if name in applied:
                    continue
                with self.atomic():
                    for statement in _statements(script):
                        self.connection.execute(statement)
                    self.connection.execute(
                        "INSERT INTO migrations (name, applied_at) VALUES (?, datetime('now'))", (name,)
                    )


def _statements(script: str) -> list[str]:
    """Split a migration script into statements (no semicolons inside our literals).

    A trigger's body holds statements of its own: pieces are joined until SQLite calls the text complete.
    """
    statements, pending = [], ""
    for piece in script.split(";"):
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            if pending.strip(" \n;"):
                statements.append(pending.strip())
            pending = ""
    if pending.strip(" \n;"):
        statements.append(pending.strip())
    return statements


def like_prefix(prefix: str) -> str:
    """A LIKE pattern, with ``ESCAPE '\\'``, matching the strings that start with ``prefix``."""
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def sqlite_errno(exc: sqlite3.Error) -> str:
    """The errno name a disk refusal reported by SQLite stands for (its messages carry no errno)."""
    text = str(exc)
    return "ENOSPC" if "full" in text else "EROFS" if "readonly" in text else "EIO"


def _prepare(connection: sqlite3.Connection) -> None:
    """Rows by column name, and ``SQL_FUNCTIONS`` callable from the connection's SQL."""
    connection.row_factory = sqlite3.Row
    for name, arguments, function in SQL_FUNCTIONS:
        connection.create_function(name, arguments, function, deterministic=True)
