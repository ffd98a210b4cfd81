"""``registry.sqlite``: who the agents are and where their stores live.

The registry is the authority for store identities, agent bindings (which
isolated store is an agent's own), store paths, credentials (token hashes
only), conversation grants and recovery state.  Membership of named stores
is not here: that is the owner's ``config.json``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, TypeVar

from ..core.answers import TypedDict
from ..core.db import Database
from ..core.errors import Conflict, InvalidParams, NotFound
from ..core.ids import format_timestamp, is_agent_name, utc_now

T = TypeVar("T")

SCOPES = ("memory:read", "memory:write", "knowledge:read")
GRANT_ACCESS = ("read", "read-and-save")
TOKEN_PREFIX = "kd_"
MEMO_MAX = 1024  # answers remembered until the registry next changes (unknown tokens cannot grow it further)

MIGRATIONS = [
    ("0001_registry", """
        CREATE TABLE agents (
            name TEXT PRIMARY KEY,
            owner INTEGER NOT NULL,
            scopes TEXT NOT NULL,
            created_at TEXT NOT NULL,
            removed_at TEXT
        );
        CREATE TABLE credentials (
            token_hash TEXT PRIMARY KEY,
            agent TEXT NOT NULL REFERENCES agents(name),
            created_at TEXT NOT NULL,
            revoked_at TEXT
        );
        CREATE TABLE stores (
            store_id TEXT PRIMARY KEY,
            kind TEXT NOT NULL CHECK (kind IN ('isolated', 'named')),
            name TEXT UNIQUE,
            path TEXT NOT NULL,
            created_at TEXT NOT NULL,
            created_for TEXT
        );
        CREATE TABLE bindings (
            agent TEXT PRIMARY KEY,
            store_id TEXT NOT NULL REFERENCES stores(store_id)
        );
        CREATE TABLE grants (
            agent TEXT NOT NULL,
            session_key TEXT NOT NULL,
            access TEXT NOT NULL CHECK (access IN ('read', 'read-and-save')),
            created_at TEXT NOT NULL,
            PRIMARY KEY (agent, session_key)
        );
        CREATE TABLE recovery (
            store_id TEXT PRIMARY KEY,
            state TEXT NOT NULL,
            detail TEXT,
            updated_at TEXT NOT NULL
        )
    """),
    ("0002_secrets", """
        CREATE TABLE secrets (name TEXT PRIMARY KEY, value BLOB NOT NULL)
    """),
    # A conversation partition belongs to the agent and session key that first used it (docs/protocol.md).
    ("0003_conversations", """
        CREATE TABLE conversations (
            store_id TEXT NOT NULL,
            session_id TEXT NOT NULL,
            agent TEXT NOT NULL,
            session_key_hash TEXT NOT NULL,
            created_at TEXT NOT NULL,
            PRIMARY KEY (store_id, session_id)
        )
    """),
]


@dataclass(frozen=True)
class Agent:
    name: str
    owner: bool
    scopes: tuple[str, ...]
    created_at: str
    removed_at: str | None = None

    @property
    def active(self) -> bool:
        return self.removed_at is None


@dataclass(frozen=True)
class StoreRecord:
    store_id: str
    kind: str  # "isolated" or "named"
    name: str | None
    path: Path
    created_at: str
    created_for: str | None


class RegisteredGrant(TypedDict):
    """A grant as answers carry it."""

    agent: str
    sessionKey: str
    access: str
    createdAt: str


@dataclass(frozen=True)
class Grant:
    agent: str
    session_key: str
    access: str
    created_at: str

    def to_dict(self) -> RegisteredGrant:
        return {"agent": self.agent, "sessionKey": self.session_key, "access": self.access,
                "createdAt": self.created_at}


@dataclass(frozen=True)
class Conversation:
    """Who owns a conversation partition: only the hash of its session key is kept."""

    session_id: str
    agent: str
    session_key_hash: str
    created_at: str

    def is_under(self, session_key: str) -> bool:
        """Whether ``session_key`` is the key this conversation was bound under."""
        return hmac.compare_digest(self.session_key_hash, hash_token(session_key))


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def check_new_agent(name: str, scopes: tuple[str, ...]) -> None:
    """Refuse an agent name or scopes ``Registry.add_agent`` would refuse, before anything is opened or created."""
    if not is_agent_name(name):
        raise InvalidParams("agent names are 1-64 lowercase letters, digits, '-' or '_'", field="name")
    unknown = [scope for scope in scopes if scope not in SCOPES]
    if unknown or not scopes:
        raise InvalidParams(f"scopes must be a non-empty subset of {list(SCOPES)}", field="scopes")


class Registry:
    """The registry's tables.  What the authority checks read (credentials, agents, stores, grants) is
    remembered until the database next changes, by this process or another (``Database.change_stamp``):
    every request is authorized several times, and a revocation still refuses the very next check."""

    def __init__(self, database: Database, state_root: Path) -> None:
        self.db = database
        self.state_root = state_root
        self._memo: dict[tuple[str, str, str], object] = {}
        self._memo_stamp: tuple[int, int] | None = None
        self._memo_lock = threading.Lock()
        self._reading = threading.local()  # ``one_reading``'s stamp, per thread
        database.change_stamp()  # its connection opened now, by whoever opens the registry, not by a first check

    @classmethod
    def open(cls, path: Path, state_root: Path) -> "Registry":
        return cls(Database.open(path, create=True, migrations=MIGRATIONS), state_root)

    def close(self) -> None:
        self.db.close()

    # --- agents and credentials -------------------------------------------

    def add_agent(self, name: str, *, owner: bool = False, scopes: tuple[str, ...] = SCOPES) -> str:
        """Register an agent (or bring back a removed one) and return its new token, once."""
        check_new_agent(name, scopes)
        now = format_timestamp(utc_now())
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        with self.db.atomic():
            existing = self.agent(name)
            if existing is not None and existing.active:
                raise Conflict(f"agent {name!r} already exists", agent=name)
            self.db.execute(
                "INSERT INTO agents (name, owner, scopes, created_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(name) DO UPDATE SET owner = excluded.owner, scopes = excluded.scopes, "
                "created_at = excluded.created_at, removed_at = NULL",
                (name, int(owner), json.dumps(list(scopes)), now),
            )
            self.db.execute(
                "INSERT INTO credentials (token_hash, agent, created_at) VALUES (?, ?, ?)",
                (hash_token(token), name, now),
            )
        return token

    def add_credential(self, name: str) -> str:
        """Issue one more token for an active agent (the old ones keep working)."""
        agent = self.agent(name)
        if agent is None or not agent.active:
            raise NotFound(f"no agent named {name!r}", agent=name)
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        self.db.execute(
            "INSERT INTO credentials (token_hash, agent, created_at) VALUES (?, ?, ?)",
            (hash_token(token), name, format_timestamp(utc_now())),
        )
        return token

    def revoke_credential(self, token: str) -> None:
        self.db.execute(
            "UPDATE credentials SET revoked_at = ? WHERE token_hash = ? AND revoked_at IS NULL",
            (format_timestamp(utc_now()), hash_token(token)),
        )

    def remove_agent(self, name: str) -> None:
        """Remove an agent: its credentials stop working; its store is kept."""
        now = format_timestamp(utc_now())
        with self.db.atomic():
            agent = self.agent(name)
            if agent is None or not agent.active:
                raise NotFound(f"no agent named {name!r}", agent=name)
            self.db.execute("UPDATE agents SET removed_at = ? WHERE name = ?", (now, name))
            self.db.execute(
                "UPDATE credentials SET revoked_at = ? WHERE agent = ? AND revoked_at IS NULL", (now, name)
            )
            self.db.execute("DELETE FROM grants WHERE agent = ?", (name,))

    def agent(self, name: str) -> Agent | None:
        return self._remembered(("agent", name, ""), lambda: self._read_agent(name))

    def _read_agent(self, name: str) -> Agent | None:
        row = self.db.one("SELECT * FROM agents WHERE name = ?", (name,))
        return _agent(row) if row is not None else None

    def agents(self, *, include_removed: bool = False) -> list[Agent]:
        rows = self.db.all("SELECT * FROM agents ORDER BY name")
        agents = [_agent(row) for row in rows]
        return agents if include_removed else [agent for agent in agents if agent.active]

    def authenticate(self, token: object) -> Agent | None:
        """The active agent a token belongs to, or None (no timing oracle on the hash)."""
        if not isinstance(token, str) or not token.startswith(TOKEN_PREFIX) or len(token) > 256:
            return None
        digest = hash_token(token)
        return self._remembered(("token", digest, ""), lambda: self._read_credential(digest))

    def _read_credential(self, digest: str) -> Agent | None:
        row = self.db.one(
            "SELECT token_hash, agent FROM credentials WHERE token_hash = ? AND revoked_at IS NULL", (digest,)
        )
        if row is None or not hmac.compare_digest(row["token_hash"], digest):
            return None
        agent = self._read_agent(row["agent"])
        return agent if agent is not None and agent.active else None

    @contextmanager
    def one_reading(self) -> Iterator[tuple[int, int]]:
        """The checks made in the block (one authorization's token, agent, grant and store) share one change
        stamp, taken as the block begins: each answer is still filed under a state no newer than the one it was
        read in, and a change committed before the block is seen by every check in it.  A change committed
        through this registry meanwhile (a store created by a concurrent first use) moves the connection's
        count of changes, and the checks after it take a stamp of their own.  Yields the stamp, under which a
        caller may file what it concludes from those checks alone (``Authorizer``)."""
        held = getattr(self._reading, "stamp", None)
        if held is not None:  # nested: the outer block's stamp serves
            yield held
            return
        self._reading.stamp = stamp = self.db.change_stamp()
        try:
            yield stamp
        finally:
            self._reading.stamp = None

    @property
    def in_transaction(self) -> bool:
        """Whether the registry's connection is inside a transaction, whose reads may not be committed: nothing
        read then may be remembered."""
        return self.db.connection.in_transaction

    def _remembered(self, key: tuple[str, str, str], read: Callable[[], T]) -> T:
        """``read()``, or what it returned last while the registry has not changed since.

        The stamp is taken before reading, so an answer is only ever filed under a state at least as old as
        the one it was read in.  Inside a transaction of the registry's connection nothing is remembered:
        what it reads there may not be committed.
        """
        if self.db.connection.in_transaction:
            return read()
        held = getattr(self._reading, "stamp", None)
        stamp = held if held is not None and held[1] == self.db.connection.total_changes else self.db.change_stamp()
        with self._memo_lock:
            if stamp != self._memo_stamp:
                self._memo.clear()
                self._memo_stamp = stamp
            elif key in self._memo:
                return self._memo[key]  # type: ignore[return-value]
        value = read()
        with self._memo_lock:
            if stamp == self._memo_stamp and len(self._memo) < MEMO_MAX:
                self._memo[key] = value
        return value

    # --- stores and bindings ----------------------------------------------

    def store(self, store_id: str) -> StoreRecord | None:
        row = self.db.one("SELECT * FROM stores WHERE store_id = ?", (store_id,))
        return self._store(row) if row is not None else None

    def store_named(self, name: str) -> StoreRecord | None:
        return self._remembered(("named", name, ""), lambda: self._read_store_named(name))

    def _read_store_named(self, name: str) -> StoreRecord | None:
        row = self.db.one("SELECT * FROM stores WHERE name = ?", (name,))
        return self._store(row) if row is not None else None

    def stores(self) -> list[StoreRecord]:
        return [self._store(row) for row in self.db.all("SELECT * FROM stores ORDER BY created_at, store_id")]

    def own_store_of(self, agent: str) -> StoreRecord | None:
        return self._remembered(("own", agent, ""), lambda: self._read_own_store(agent))

    def _read_own_store(self, agent: str) -> StoreRecord | None:
        row = self.db.one(
            "SELECT stores.* FROM bindings JOIN stores USING (store_id) WHERE bindings.agent = ?", (agent,)
        )
        return self._store(row) if row is not None else None

    def bound_agent(self, store_id: str) -> str | None:
        row = self.db.one("SELECT agent FROM bindings WHERE store_id = ?", (store_id,))
        return row["agent"] if row is not None else None

    def new_store(self, *, store_id: str, kind: str, name: str | None, created_for: str | None) -> StoreRecord:
        """Record the identity of a store whose directory the caller just created."""
        relative = f"stores/{store_id}"
        now = format_timestamp(utc_now())
        with self.db.atomic():
            self.db.execute(
                "INSERT INTO stores (store_id, kind, name, path, created_at, created_for) VALUES (?, ?, ?, ?, ?, ?)",
                (store_id, kind, name, relative, now, created_for),
            )
            if kind == "isolated" and created_for is not None:
                self.db.execute(
                    "INSERT INTO bindings (agent, store_id) VALUES (?, ?) "
                    "ON CONFLICT(agent) DO UPDATE SET store_id = excluded.store_id",
                    (created_for, store_id),
                )
        record = self.store(store_id)
        assert record is not None
        return record

    def rename_to_named(self, store_id: str, name: str) -> None:
        """An isolated store becomes a named store: renamed, not copied."""
        with self.db.atomic():
            if self.store_named(name) is not None:
                raise Conflict(f"a store named {name!r} already exists", store=name)
            self.db.execute("UPDATE stores SET kind = 'named', name = ? WHERE store_id = ?", (name, store_id))
            self.db.execute("DELETE FROM bindings WHERE store_id = ?", (store_id,))

    def unbind(self, agent: str) -> None:
        self.db.execute("DELETE FROM bindings WHERE agent = ?", (agent,))

    def _store(self, row) -> StoreRecord:
        return StoreRecord(
            store_id=row["store_id"], kind=row["kind"], name=row["name"],
            path=self.state_root / row["path"], created_at=row["created_at"], created_for=row["created_for"],
        )

    # --- grants -------------------------------------------------------------

    def set_grant(self, agent: str, session_key: str, access: str) -> Grant:
        if access not in GRANT_ACCESS:
            raise InvalidParams(f"access must be one of {list(GRANT_ACCESS)}", field="access")
        if not isinstance(session_key, str) or not session_key.strip() or len(session_key) > 256:
            raise InvalidParams("sessionKey must be a non-empty string of at most 256 characters", field="sessionKey")
        if self.agent(agent) is None:
            raise NotFound(f"no agent named {agent!r}", agent=agent)
        now = format_timestamp(utc_now())
        self.db.execute(
            "INSERT INTO grants (agent, session_key, access, created_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(agent, session_key) DO UPDATE SET access = excluded.access, created_at = excluded.created_at",
            (agent, session_key, access, now),
        )
        return Grant(agent, session_key, access, now)

    def remove_grant(self, agent: str, session_key: str) -> None:
        cursor = self.db.execute("DELETE FROM grants WHERE agent = ? AND session_key = ?", (agent, session_key))
        if cursor.rowcount == 0:
            raise NotFound("no such grant", agent=agent, sessionKey=session_key)

    def grant(self, agent: str, session_key: str) -> Grant | None:
        return self._remembered(("grant", agent, session_key), lambda: self._read_grant(agent, session_key))

    def _read_grant(self, agent: str, session_key: str) -> Grant | None:
        row = self.db.one("SELECT * FROM grants WHERE agent = ? AND session_key = ?", (agent, session_key))
        return Grant(row["agent"], row["session_key"], row["access"], row["created_at"]) if row else None

    def grants(self, agent: str | None = None) -> list[Grant]:
        rows = self.db.all(
            "SELECT * FROM grants WHERE (? IS NULL OR agent = ?) ORDER BY agent, session_key", (agent, agent)
        )
        return [Grant(row["agent"], row["session_key"], row["access"], row["created_at"]) for row in rows]

    # --- conversation owners ------------------------------------------------------

    def claim_conversation(self, store_id: str, session_id: str, agent: str, session_key: str, *,
                           create: bool = True) -> bool:
        """Whether ``agent`` under ``session_key`` owns the conversation ``session_id`` of the store.

        The first authorized use binds an unclaimed conversation to its caller (when ``create``); after that
        only the same agent presenting the same session key owns it.  Session ids are not secret (they
        appear in attribution), so the id alone never reaches a conversation.
        """
        key_hash = hash_token(session_key)
        if create:
            self.db.execute(
                "INSERT OR IGNORE INTO conversations (store_id, session_id, agent, session_key_hash, created_at) "
                "VALUES (?, ?, ?, ?, ?)", (store_id, session_id, agent, key_hash, format_timestamp(utc_now())),
            )
        row = self.db.one("SELECT agent, session_key_hash FROM conversations WHERE store_id = ? AND session_id = ?",
                          (store_id, session_id))
        if row is None:
            return True  # unclaimed and not claimed now: nothing of anyone's is in it yet
        return row["agent"] == agent and hmac.compare_digest(row["session_key_hash"], key_hash)

    def conversations(self, store_id: str) -> list[Conversation]:
        """Every conversation bound in the store: session id, owner agent, key hash and when it was bound."""
        rows = self.db.all("SELECT session_id, agent, session_key_hash, created_at FROM conversations "
                           "WHERE store_id = ? ORDER BY created_at, session_id", (store_id,))
        return [Conversation(row["session_id"], row["agent"], row["session_key_hash"], row["created_at"])
                for row in rows]

    def restore_conversation_owners(self, store_id: str, owners: list[Conversation]) -> None:
        """Give a restored store's conversations back to their owners (a conversation claimed already keeps
        its owner)."""
        self.db.executemany(
            "INSERT OR IGNORE INTO conversations (store_id, session_id, agent, session_key_hash, created_at) "
            "VALUES (?, ?, ?, ?, ?)",
            [(store_id, owner.session_id, owner.agent, owner.session_key_hash, owner.created_at) for owner in owners])

    # --- secrets ----------------------------------------------------------------

    def secret(self, name: str) -> bytes:
        """A 256-bit key kept in the registry, made on first use (signs cursors)."""
        with self.db.atomic():
            row = self.db.one("SELECT value FROM secrets WHERE name = ?", (name,))
            if row is not None:
                return bytes(row["value"])
            value = secrets.token_bytes(32)
            self.db.execute("INSERT INTO secrets (name, value) VALUES (?, ?)", (name, value))
            return value

    # --- recovery state -----------------------------------------------------

    def set_recovery(self, store_id: str, state: str, detail: str | None) -> None:
        self.db.execute(
            "INSERT INTO recovery (store_id, state, detail, updated_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(store_id) DO UPDATE SET state = excluded.state, detail = excluded.detail, "
            "updated_at = excluded.updated_at",
            (store_id, state, detail, format_timestamp(utc_now())),
        )

    def recovery(self, store_id: str) -> tuple[str, str | None] | None:
        row = self.db.one("SELECT state, detail FROM recovery WHERE store_id = ?", (store_id,))
        return (row["state"], row["detail"]) if row is not None else None


def _agent(row) -> Agent:
    return Agent(
        name=row["name"], owner=bool(row["owner"]), scopes=tuple(json.loads(row["scopes"])),
        created_at=row["created_at"], removed_at=row["removed_at"],
    )
