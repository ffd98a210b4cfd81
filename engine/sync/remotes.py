"""The remotes a store syncs with, as the owner chose them: add, list and remove (docs/sync.md).

Where they live: ``<state>/stores/<store id>/sync/remotes.json`` (mode 0600), beside the vault and outside
it.  They are this machine's settings of that store: never in the vault (which is what syncs), never in
the vault's ``.git/config`` (a later round fetches and pushes by URL), never in ``config.json`` (which lists
only named stores, and only their membership).  The file::

    {"schemaVersion": 1, "remotes": [{"name": "nas", "url": "ssh://nas.local/srv/notes.git",
                                      "addedAt": "2026-12-03T22:50:00Z"}]}

What a remote may be (``check_remote_url``): any address git speaks without a helper program: ssh
(``user@host:path``, ``ssh://``, ``git+ssh://``), ``https://``, ``http://``, ``git://``, ``file://`` and an
absolute path; and ``gcrypt::`` followed by such an address where git-remote-gcrypt is installed (the remote's
copy encrypted with the owner's GPG keys).  Credentials stay with git (an ssh key in ssh-agent, a credential helper): a URL carrying a
password, a token (as its user name, anywhere in it) or a query string is refused with ``invalid_params``
saying so, and the refused URL is never echoed, written or logged.  Any other remote helper (``ext::``,
``fd::``...) is refused: ``ext::`` runs any command.  An address that begins with ``-``, or whose host
or user does, is refused (git would hand it to ssh as an option).  A path inside the state directory is
refused: a store syncs with another machine or a repository of its own, never with a store's files.

A remote's name (``check_remote_name``) is a strict subset of git's remote names, so git always takes it:
1-64 ASCII letters, digits, ``.``, ``_`` and ``-``, beginning with a letter or digit, without ``..``, not
ending in ``.`` or ``.lock``; names are unique in a store regardless of case.  A store holds at most
``REMOTES_MAX`` remotes.

    method                     params                         changes
    operator/syncRemotes       -                              -
    operator/addSyncRemote     name, url, agent? | store?     the store's sync/remotes.json
    operator/removeSyncRemote  name, agent? | store?          the store's sync/remotes.json

Neither agent nor store names the default agent's store (``main``), as ``knowledge export`` does.  Adding
a name the store has, or removing one it has not, is an error that changes nothing.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import unquote, urlsplit

from ..access.stores import StoreResolver
from ..core.answers import TypedDict
from ..core.changes import ChangeFeed
from ..core.errors import Conflict, InvalidParams, KnowledgeError, LimitExceeded, NotFound
from ..core.files import atomic_write
from ..core.ids import format_timestamp, utc_now
from ..core.methods import Method
from ..core.params import NO_PARAMS, AgentName, Params, String, Value
from ..state.registry import StoreRecord
from ..state.statedir import StateDir
from ..store.credentials import find_secret

SCHEMA_VERSION = 1
SYNC_DIR = "sync"
REMOTES_FILE = "remotes.json"
REMOTES_MAX = 32
REMOTES_FILE_MAX_BYTES = 256 * 1024
URL_MAX_CHARS = 2048
NAME_MAX_CHARS = 64
DEFAULT_AGENT = "main"  # the agent whose store a command naming neither store nor agent means
SCHEMES = ("ssh", "git+ssh", "ssh+git", "https", "http", "git", "file")
# The one remote helper taken: git-remote-gcrypt keeps the remote's copy encrypted with the owner's GPG keys.
GCRYPT_PREFIX = "gcrypt::"
GCRYPT_HELPER = "git-remote-gcrypt"

CREDENTIALS_STAY_WITH_GIT = (
    "git keeps credentials itself: use an ssh URL with your key in ssh-agent, or an https URL without them "
    "and a credential helper (git config --global credential.helper ...); the URL was not kept")
NAME_RULE = (f"1-{NAME_MAX_CHARS} letters, digits, '.', '_' or '-', beginning with a letter or digit, without "
             "'..' and not ending in '.' or '.lock' (a git remote name)")

_NAME = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._-]{{0,{NAME_MAX_CHARS - 1}}}")
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")
_HELPER = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*::")
# scp-like ssh ([user@]host:path): git's rule is a ':' before any '/'; an IPv6 host is bracketed.
_SCP = re.compile(r"(?:(?P<user>[^@/:\[\]]*)@)?(?P<host>\[[^\]/]+\]|[^@/:\[\]]+):(?P<path>.*)", re.DOTALL)
_SCP_PASSWORD = re.compile(r"[^@/:\[]+:[^@/]*@[^/]*:")  # user:secret@host:path
_REFUSED_CHARS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
_WINDOWS_DRIVE = re.compile(r"[A-Za-z]:[\\/]")

_EDITS = threading.Lock()  # one edit of a remotes file at a time in this process (the engine's workers)


class SyncRemote(TypedDict):
    """One remote of a store: its name, its URL (never one carrying a credential) and when it was added."""

    name: str
    url: str
    addedAt: str


class StoreRemotes(TypedDict):
    """A store's remotes; ``name`` is a named store's, ``owner`` an isolated store's agent, ``agents`` the
    store's members; ``problem`` says why its remotes file could not be read (its remotes are then empty)."""

    storeId: str
    kind: str
    name: str | None
    owner: str | None
    agents: list[str]
    remotes: list[SyncRemote]
    problem: str | None


class SyncRemotes(TypedDict):
    """Every store this state directory holds, with its remotes."""

    stores: list[StoreRemotes]


class SyncRemoteChanged(TypedDict):
    """The remote added or removed, and the store's remotes now."""

    storeId: str
    remote: SyncRemote
    remotes: list[SyncRemote]


# --- the rules ------------------------------------------------------------------------------------


def check_remote_name(value: Any, field: str = "name") -> str:
    """``value`` when it is a remote name this release keeps (``NAME_RULE``), else ``InvalidParams``."""
    if (not isinstance(value, str) or _NAME.fullmatch(value) is None or ".." in value
            or value.endswith((".", ".lock"))):
        raise InvalidParams(f"{field} must be {NAME_RULE}", field=field)
    return value


def check_remote_url(value: Any, field: str = "url") -> str:
    """``value``, unchanged, when it is an address git speaks without a helper and carries no credential;
    else ``InvalidParams`` (``LimitExceeded`` past ``URL_MAX_CHARS``) saying why, never echoing it."""
    if not isinstance(value, str) or not value:
        raise InvalidParams(f"{field} must be a git URL or an absolute path", field=field)
    if len(value) > URL_MAX_CHARS:
        raise LimitExceeded(f"{field} is longer than {URL_MAX_CHARS} characters", field=field, limit=URL_MAX_CHARS)
    if _REFUSED_CHARS.search(value) or value != value.strip():
        raise InvalidParams(f"{field} must be one line without control characters or surrounding spaces",
                            field=field)
    if value.startswith("-"):
        raise InvalidParams(f"{field} must not begin with '-' (git would read it as an option)", field=field)
    found = find_secret(value)
    if found is not None:
        raise InvalidParams(f"{field} carries a credential ({found[0]}); {CREDENTIALS_STAY_WITH_GIT}",
                            field=field, kind=found[0])
    if value.startswith(GCRYPT_PREFIX):
        return _check_gcrypt(value, field)
    if _HELPER.match(value):
        raise InvalidParams(f"{field} names a remote helper (NAME::ADDRESS), which this release does not run; use "
                            "ssh://, https://, http://, git://, file://, user@host:path or an absolute path",
                            field=field)
    scheme = _SCHEME.match(value)
    if scheme is not None:
        return _check_url(value, scheme.group(1).lower(), field)
    colon, slash = value.find(":"), value.find("/")
    if colon > 0 and (slash < 0 or colon < slash) and not _WINDOWS_DRIVE.match(value):
        return _check_scp(value, field)
    if not os.path.isabs(value):
        raise InvalidParams(f"{field} is a relative path; give the absolute path of the repository (the engine's "
                            "working directory is not yours)", field=field)
    return value


def _check_url(value: str, scheme: str, field: str) -> str:
    if scheme not in SCHEMES:
        raise InvalidParams(f"{field} uses {scheme}://, which git speaks only through a helper this release does "
                            "not run; use ssh://, https://, http://, git://, file:// or an absolute path",
                            field=field)
    try:
        parts = urlsplit(value)
        parts.port  # a malformed port raises here  # noqa: B018
    except ValueError:
        raise InvalidParams(f"{field} is not a valid {scheme}:// URL (its host or port)", field=field) from None
    if parts.password is not None or ":" in unquote(parts.username or ""):
        raise InvalidParams(f"{field} carries a password (user:password@host); {CREDENTIALS_STAY_WITH_GIT}",
                            field=field, kind="password")
    if parts.query or parts.fragment or "?" in value or "#" in value:
        raise InvalidParams(f"{field} carries a query string or fragment, where tokens travel (?access_token=...) "
                            f"and which a git remote never needs; {CREDENTIALS_STAY_WITH_GIT}", field=field)
    if scheme == "file":
        if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
            raise InvalidParams(f"{field} must be file:///absolute/path (a file:// URL names no host)", field=field)
        return value
    if not parts.hostname:
        raise InvalidParams(f"{field} names no host", field=field)
    if parts.netloc.startswith("-") or parts.hostname.startswith("-") or (parts.username or "").startswith("-"):
        raise InvalidParams(f"{field} has a host or user beginning with '-' (ssh would read it as an option)",
                            field=field)
    return value


def _check_gcrypt(value: str, field: str) -> str:
    """``gcrypt::`` and an address these rules accept, when git-remote-gcrypt is installed (docs/sync.md)."""
    if shutil.which(GCRYPT_HELPER) is None:
        raise InvalidParams(f"{field} asks for an encrypted remote (gcrypt::), which needs {GCRYPT_HELPER}; it is not "
                            "installed on this machine (apt install git-remote-gcrypt, or your system's package), "
                            "and gpg with your key", field=field)
    inner = value[len(GCRYPT_PREFIX):]
    if _HELPER.match(inner):
        raise InvalidParams(f"{field} must be gcrypt:: followed by an ssh, https, http, git or file address or an "
                            "absolute path, never another remote helper", field=field)
    check_remote_url(inner, field)
    return value


def _check_scp(value: str, field: str) -> str:
    if _SCP_PASSWORD.match(value):
        raise InvalidParams(f"{field} carries a password (user:password@host:path); {CREDENTIALS_STAY_WITH_GIT}",
                            field=field, kind="password")
    parts = _SCP.fullmatch(value)
    if parts is None or not parts["path"]:
        raise InvalidParams(f"{field} must be [user@]host:path (ssh), a URL such as ssh://host/path, or an "
                            "absolute path", field=field)
    if parts["host"].startswith("-") or (parts["user"] or "").startswith("-"):
        raise InvalidParams(f"{field} has a host or user beginning with '-' (ssh would read it as an option)",
                            field=field)
    return value


def is_plain_path(url: str) -> bool:
    """Whether git reads ``url`` as a path on this machine (no scheme, no ``host:`` before a '/'): the command
    line makes such a path absolute before the engine, whose working directory differs, sees it."""
    colon, slash = url.find(":"), url.find("/")
    scp = colon > 0 and (slash < 0 or colon < slash) and not _WINDOWS_DRIVE.match(url)
    return not (url.startswith("-") or _SCHEME.match(url) or _HELPER.match(url) or scp)


def local_path(url: str) -> Path | None:
    """The path on this machine a plain-path or ``file://`` remote names (behind ``gcrypt::`` too), else None."""
    if url.startswith(GCRYPT_PREFIX):
        return local_path(url[len(GCRYPT_PREFIX):])
    if _SCHEME.match(url):
        parts = urlsplit(url)
        return Path(unquote(parts.path)) if parts.scheme.lower() == "file" else None
    return Path(url) if is_plain_path(url) else None


# --- the file -------------------------------------------------------------------------------------


def remotes_file(record: StoreRecord) -> Path:
    return record.path / SYNC_DIR / REMOTES_FILE


def read_remotes(record: StoreRecord) -> list[SyncRemote]:
    """The store's remotes as its file holds them (none when it has no file); ``Conflict`` naming what is wrong
    when the file cannot be read or breaks a rule (a URL in it is never echoed)."""
    path = remotes_file(record)
    try:
        with open(path, "rb") as handle:
            data = handle.read(REMOTES_FILE_MAX_BYTES + 1)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise _unreadable(record, exc.strerror or str(exc)) from None
    try:
        if len(data) > REMOTES_FILE_MAX_BYTES:
            raise ValueError(f"it is larger than {REMOTES_FILE_MAX_BYTES} bytes")
        document = json.loads(data)
        if not isinstance(document, dict) or document.get("schemaVersion") != SCHEMA_VERSION:
            raise ValueError(f"it is no schema version {SCHEMA_VERSION} remotes file")
        entries = document.get("remotes")
        if not isinstance(entries, list) or len(entries) > REMOTES_MAX:
            raise ValueError(f"its remotes are no list of at most {REMOTES_MAX}")
        remotes = [_entry(entry, index) for index, entry in enumerate(entries)]
    except (ValueError, KnowledgeError) as exc:
        raise _unreadable(record, getattr(exc, "message", None) or str(exc)) from None
    if len({remote["name"].lower() for remote in remotes}) != len(remotes):
        raise _unreadable(record, "it names a remote twice")
    return remotes


def _entry(entry: Any, index: int) -> SyncRemote:
    where = f"remotes[{index}]"
    if not isinstance(entry, dict) or set(entry) != {"name", "url", "addedAt"} or not isinstance(
            entry["addedAt"], str):
        raise ValueError(f"{where} is not an object of name, url and addedAt")
    return {"name": check_remote_name(entry["name"], f"{where}.name"),
            "url": check_remote_url(entry["url"], f"{where}.url"), "addedAt": entry["addedAt"]}


def _unreadable(record: StoreRecord, why: str) -> Conflict:
    path = remotes_file(record)
    return Conflict(f"the remotes file of store {record.store_id} ({path}) cannot be used: {why}; correct or remove "
                    "it (nothing was changed)", store=record.store_id, file=str(path))


def _write_remotes(record: StoreRecord, remotes: list[SyncRemote]) -> None:
    path = remotes_file(record)
    path.parent.mkdir(mode=0o700, exist_ok=True)
    document = {"schemaVersion": SCHEMA_VERSION, "remotes": remotes}
    atomic_write(path, (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode("utf-8"), mode=0o600)


# --- the owner's edits ----------------------------------------------------------------------------


class RemoteBook:
    """The remotes of every store of one state directory, as the owner lists, adds and removes them."""

    def __init__(self, state: StateDir, resolver: StoreResolver) -> None:
        self.state = state
        self.resolver = resolver

    def listing(self) -> SyncRemotes:
        """Every existing store with its remotes; a store whose file cannot be read says so in ``problem``."""
        stores: list[StoreRemotes] = []
        for entry in self.resolver.inventory():
            store_id = entry.get("storeId")
            record = self.resolver.registry.store(store_id) if store_id else None
            if record is None:
                continue  # a named store configured but not created yet has no remotes to hold
            remotes: list[SyncRemote] = []
            problem = None
            try:
                remotes = read_remotes(record)
            except KnowledgeError as exc:
                problem = exc.message
            stores.append({"storeId": record.store_id, "kind": record.kind, "name": entry.get("name"),
                           "owner": entry.get("owner"), "agents": list(entry.get("agents") or []),
                           "remotes": remotes, "problem": problem})
        return {"stores": stores}

    def add(self, name: str, url: str, *, store: str | None = None, agent: str | None = None) -> SyncRemoteChanged:
        """Add remote ``name`` at ``url`` to the chosen store; a name it has already is a ``Conflict``."""
        name, url = check_remote_name(name), check_remote_url(url)
        record = self._chosen(store, agent)
        self.refuse_state_path(url)
        with _EDITS:
            remotes = read_remotes(record)
            same = next((remote for remote in remotes if remote["name"].lower() == name.lower()), None)
            if same is not None:
                raise Conflict(f"store {record.store_id} already has a remote named {same['name']!r}; remove it "
                               "first to change its URL", store=record.store_id, name=same["name"])
            if len(remotes) >= REMOTES_MAX:
                raise LimitExceeded(f"store {record.store_id} has {REMOTES_MAX} remotes, the most it keeps",
                                    store=record.store_id, limit=REMOTES_MAX)
            added: SyncRemote = {"name": name, "url": url, "addedAt": format_timestamp(utc_now())}
            remotes = [*remotes, added]
            _write_remotes(record, remotes)
        return {"storeId": record.store_id, "remote": added, "remotes": remotes}

    def remove(self, name: str, *, store: str | None = None, agent: str | None = None) -> SyncRemoteChanged:
        """Remove the chosen store's remote ``name``; a name it does not have is ``NotFound``."""
        name = check_remote_name(name)
        record = self._chosen(store, agent)
        with _EDITS:
            remotes = read_remotes(record)
            gone = next((remote for remote in remotes if remote["name"] == name), None)
            if gone is None:
                raise NotFound(f"store {record.store_id} has no remote named {name!r} (`knowledge sync remote "
                               "list` shows them)", store=record.store_id, name=name)
            remotes = [remote for remote in remotes if remote is not gone]
            _write_remotes(record, remotes)
        return {"storeId": record.store_id, "remote": gone, "remotes": remotes}

    def _chosen(self, store: str | None, agent: str | None) -> StoreRecord:
        record = self.resolver.select(store=store, agent=agent, default_agent=DEFAULT_AGENT)
        self.resolver.check(record)
        return record

    def refuse_state_path(self, url: str) -> None:
        """Refuse a remote on this disk inside the state directory (adding one, or cloning from one)."""
        path = local_path(url)
        root = self.state.root.resolve()
        if path is not None and (path.resolve() == root or path.resolve().is_relative_to(root)):
            raise InvalidParams(f"url is inside the state directory {self.state.root}; a store syncs with a "
                                "repository of its own, never with a store's files", field="url")


# --- the operator methods -------------------------------------------------------------------------


class RemotesEngine(Protocol):
    """What the remotes methods need of the engine."""

    @property
    def state(self) -> StateDir: ...

    @property
    def resolver(self) -> StoreResolver: ...

    @property
    def changes(self) -> ChangeFeed: ...


CHOOSE_STORE = Params(AgentName("agent", description="the agent whose store it is (default: main)"),
                      String("store", 64, min_chars=1, what="a named store's name or a store id"))
REMOTE_NAME = Value("name", check_remote_name, required=True,
                    json={"type": "string", "maxLength": NAME_MAX_CHARS, "pattern": f"^{_NAME.pattern}$"})
ADD_SYNC_REMOTE = Params(REMOTE_NAME, Value("url", check_remote_url, required=True,
                                            json={"type": "string", "maxLength": URL_MAX_CHARS})) + CHOOSE_STORE
REMOVE_SYNC_REMOTE = Params(REMOTE_NAME) + CHOOSE_STORE


def methods(engine: RemotesEngine) -> tuple[Method, ...]:
    """The remotes' ``operator/*`` methods (engine/core/methods.py)."""
    def book() -> RemoteBook:
        return RemoteBook(engine.state, engine.resolver)

    def sync_remotes(params: dict[str, Any]) -> SyncRemotes:
        NO_PARAMS.read(params)
        return book().listing()

    def add_sync_remote(params: dict[str, Any]) -> SyncRemoteChanged:
        values = ADD_SYNC_REMOTE.read(params)
        changed = book().add(values["name"], values["url"], store=values["store"], agent=values["agent"])
        engine.changes.publish("sync", storeId=changed["storeId"])  # the window, and automatic sync
        return changed

    def remove_sync_remote(params: dict[str, Any]) -> SyncRemoteChanged:
        values = REMOVE_SYNC_REMOTE.read(params)
        changed = book().remove(values["name"], store=values["store"], agent=values["agent"])
        engine.changes.publish("sync", storeId=changed["storeId"])
        return changed

    return (Method("syncRemotes", NO_PARAMS, SyncRemotes, sync_remotes),
            Method("addSyncRemote", ADD_SYNC_REMOTE, SyncRemoteChanged, add_sync_remote),
            Method("removeSyncRemote", REMOVE_SYNC_REMOTE, SyncRemoteChanged, remove_sync_remote))
