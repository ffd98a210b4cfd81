"""A store's sync remotes (engine/sync/remotes.py): the URL and name rules, the file beside the vault, and the
operator methods; a refused URL leaves nothing behind anywhere."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
from pathlib import Path

import pytest

from engine.access.authority import AgentCaller
from engine.core.errors import Conflict, InvalidParams, KnowledgeError, LimitExceeded, NotFound
from engine.operator.token_file import ensure_operator_token, read_operator_token
from engine.service import Engine
from engine.sync import remotes
from engine.sync.remotes import REMOTES_MAX, RemoteBook, check_remote_name, check_remote_url, remotes_file
from engine.wire.protocol import Dispatcher, Session
from tests.helpers import page

ACCEPTED = [
    "git@github.com:me/notes.git", "nas.local:srv/notes.git", "git@[::1]:notes.git",
    "ssh://git@nas.local:2222/srv/notes.git", "ssh://nas.local/~/notes.git", "git+ssh://nas/notes.git",
    "ssh+git://nas/notes.git", "https://github.com/me/notes.git", "https://alice@gitea.local/me/notes.git",
    "http://192.168.1.20:3000/me/notes.git", "git://nas.local/notes.git", "file:///srv/git/notes.git",
    "file://localhost/srv/git/notes.git", "/srv/git/notes.git", "/mnt/My Drive/notes.git",
    # words a credential check could take for one, in ordinary repository names
    "/srv/git/password-store.git", "https://github.com/me/secret-notes.git", "git@github.com:me/api-key-tools.git",
    "ssh://git@ssh.dev.azure.com/v3/org/project/notes",
]
SECRET = "hunter2-sekrit"
GITHUB_TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
# Every form a credential takes in a URL; each is refused as invalid_params and never echoed.
CREDENTIAL_URLS = {
    "https password": f"https://alice:{SECRET}@github.com/me/notes.git",
    "http password": f"http://alice:{SECRET}@nas.local/notes.git",
    "ssh:// password": f"ssh://git:{SECRET}@nas.local/srv/notes.git",
    "scp-like password": f"git:{SECRET}@nas.local:srv/notes.git",
    "percent-encoded password": f"https://alice%3A{SECRET}@github.com/me/notes.git",
    "empty user, password": f"https://:{SECRET}@github.com/me/notes.git",
    "token as the user": f"https://{GITHUB_TOKEN}@github.com/me/notes.git",
    "oauth2 token": "https://oauth2:glpat-" + "abcdefghij1234567890@gitlab.com/me/notes.git",
    "token in the path": f"https://github.com/{GITHUB_TOKEN}/notes.git",
    "token in the query": f"https://gitlab.com/me/notes.git?private_token={SECRET}",
    "access_token query": f"https://github.com/me/notes.git?access_token={SECRET}",
    "token in a fragment": f"https://github.com/me/notes.git#{SECRET}",
}
REFUSED = {
    "ext helper": "ext::ssh -i key nas.local %S notes", "fd helper": "fd::7",
    "unknown scheme": "ftp://nas.local/notes.git", "option": "--upload-pack=touch /tmp/x",
    "option host": "ssh://-oProxyCommand=touch/notes.git", "option user": "ssh://-oProxyCommand=x@nas/notes.git",
    "scp option host": "-oProxyCommand=x:notes", "relative path": "notes.git", "dot path": "./notes.git",
    "file with a host": "file://nas/srv/notes.git", "no host": "https:///notes.git", "bad port": "https://h:99999/x",
    "scp without path": "nas.local:", "newline": "/srv/notes.git\n[core]", "leading space": " /srv/notes.git",
    "control char": "/srv/notes\x07.git", "empty": "",
}
NAMES_OK = ["origin", "nas", "home-server", "laptop_2", "Backup.v2", "a", "x" * 64]
NAMES_REFUSED = ["", "..", "a..b", "-x", ".hidden", "x.lock", "x.", "a/b", "a b", "a:b", "a~b", "a^b", "a?b",
                 "a*b", "a[b", "a\\b", "a@{b", "@", "ni\u00f1o", "x" * 65, "a\nb"]


@pytest.mark.parametrize("url", ACCEPTED)
def test_every_address_git_speaks_is_kept_as_given(url: str) -> None:
    assert check_remote_url(url) == url


@pytest.mark.parametrize("form", list(CREDENTIAL_URLS))
def test_a_url_carrying_a_credential_is_refused_saying_what_to_use_and_never_echoing_it(form: str) -> None:
    url = CREDENTIAL_URLS[form]
    with pytest.raises(InvalidParams) as refused:
        check_remote_url(url)
    text = json.dumps(refused.value.to_dict())
    assert refused.value.details["field"] == "url"
    assert "ssh-agent" in refused.value.message and "credential helper" in refused.value.message, form
    assert SECRET not in text and GITHUB_TOKEN not in text and "glpat" not in text and url not in text


@pytest.mark.parametrize("form", list(REFUSED))
def test_what_git_would_run_or_misread_is_refused(form: str) -> None:
    with pytest.raises(InvalidParams) as refused:
        check_remote_url(REFUSED[form])
    assert refused.value.details["field"] == "url"


def test_an_overlong_url_is_limit_exceeded() -> None:
    with pytest.raises(LimitExceeded):
        check_remote_url("https://nas.local/" + "n" * 2048)


@pytest.mark.parametrize("name", NAMES_OK)
def test_a_name_kept_is_one_git_takes(name: str, tmp_path: Path) -> None:
    assert check_remote_name(name) == name
    if shutil.which("git") is None:
        pytest.skip("git is not installed: the rule is checked against git where it is")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "remote", "add", name, "/srv/notes.git"], check=True)


@pytest.mark.parametrize("name", NAMES_REFUSED)
def test_names_git_refuses_or_misreads_are_refused(name: str) -> None:
    with pytest.raises(InvalidParams):
        check_remote_name(name)


# --- the owner's edits -----------------------------------------------------------------------------


@pytest.fixture
def book(engine: Engine) -> RemoteBook:
    token = engine.add_agent("main", owner=True)
    engine.save_page(AgentCaller(token, {"kind": "owner-private"}), page("p-1", "Dana Whitfield"))
    return RemoteBook(engine.state, engine.resolver)


def _files(engine: Engine) -> dict[str, bytes]:
    """Every file of the state directory, by path; a file gone between the listing and its reading (a temp file
    of the search index, which commits in the background) is left out, as it would have been a moment later."""
    files = {}
    for path in sorted(engine.state.root.rglob("*")):
        try:
            if path.is_file():
                files[str(path.relative_to(engine.state.root))] = path.read_bytes()
        except FileNotFoundError:
            continue
    return files


def _snapshot(engine: Engine) -> dict[str, bytes]:
    """What an owner's edit of remotes could change: config.json, and each store's vault (its files, not the git
    repository that commits in the background), manifest and sync folder.  Every file of the state directory,
    databases, indexes and git objects included, is searched whole for the secret besides."""
    return {path: data for path, data in _files(engine).items()
            if path == "config.json" or (path.startswith("stores/") and "/.git/" not in path
                                         and path.split("/")[2] in ("vault", "vault.json", "sync"))}


def test_added_remotes_are_listed_kept_beside_the_vault_and_never_in_its_git_config(engine: Engine,
                                                                                    book: RemoteBook) -> None:
    store_id = engine.resolver.effective("main", create=False).store_id
    added = book.add("nas", "git@nas.local:srv/notes.git")
    book.add("github", "https://github.com/me/notes.git", agent="main")
    book.add("disk", "/media/backup/notes.git", store=store_id)

    assert added["storeId"] == store_id and added["remote"]["name"] == "nas"
    listed = book.listing()["stores"]
    assert [(s["storeId"], s["owner"], s["problem"]) for s in listed] == [(store_id, "main", None)]
    assert [(r["name"], r["url"]) for r in listed[0]["remotes"]] == [
        ("nas", "git@nas.local:srv/notes.git"), ("github", "https://github.com/me/notes.git"),
        ("disk", "/media/backup/notes.git")]
    record = engine.registry.store(store_id)
    path = remotes_file(record)
    assert path.parent.parent == record.path and not path.is_relative_to(record.path / "vault")
    assert path.stat().st_mode & 0o077 == 0
    git_config = record.path / "vault" / ".git" / "config"
    assert not git_config.exists() or "remote" not in git_config.read_text(encoding="utf-8")
    assert not engine.state.config.exists() or "nas.local" not in engine.state.config.read_text(encoding="utf-8")

    removed = book.remove("github", agent="main")
    assert removed["remote"]["url"] == "https://github.com/me/notes.git"
    assert [r["name"] for r in book.listing()["stores"][0]["remotes"]] == ["nas", "disk"]


@pytest.mark.parametrize("form", list(CREDENTIAL_URLS))
def test_a_refused_credential_url_writes_nothing_anywhere_nor_logs_it(
        engine: Engine, book: RemoteBook, form: str, caplog: pytest.LogCaptureFixture) -> None:
    book.add("nas", "git@nas.local:srv/notes.git")
    before = _snapshot(engine)
    assert any(path.endswith("/sync/remotes.json") for path in before) and any("/vault/" in path for path in before)
    caplog.set_level(logging.DEBUG)
    with pytest.raises(InvalidParams):
        book.add("github", CREDENTIAL_URLS[form])
    engine.runtime(engine.resolver.effective("main", create=False)).checkpoint()
    assert _snapshot(engine) == before
    assert not [path for path, data in _files(engine).items()
                if SECRET.encode() in data or GITHUB_TOKEN.encode() in data or b"glpat" in data]
    assert SECRET not in caplog.text and GITHUB_TOKEN not in caplog.text


def test_adding_a_name_the_store_has_or_removing_one_it_has_not_changes_nothing(engine: Engine,
                                                                               book: RemoteBook) -> None:
    book.add("nas", "git@nas.local:srv/notes.git")
    path = remotes_file(engine.resolver.effective("main", create=False))
    before = path.read_bytes()
    for attempt in (lambda: book.add("nas", "/srv/other.git"), lambda: book.add("NAS", "/srv/other.git")):
        with pytest.raises(Conflict, match="already has a remote named 'nas'"):
            attempt()
    with pytest.raises(NotFound, match="no remote named 'laptop'"):
        book.remove("laptop")
    with pytest.raises(NotFound):
        book.remove("NAS")  # removal names the remote exactly
    assert path.read_bytes() == before


def test_the_store_is_named_by_one_of_agent_or_store_and_must_exist(engine: Engine, book: RemoteBook) -> None:
    store_id = engine.resolver.effective("main", create=False).store_id
    with pytest.raises(InvalidParams, match="not both"):
        book.add("nas", "/srv/notes.git", store=store_id, agent="main")
    with pytest.raises(NotFound, match="no store 'team'"):
        book.add("nas", "/srv/notes.git", store="team")
    with pytest.raises(NotFound, match="agent 'helper' has no store"):
        book.add("nas", "/srv/notes.git", agent="helper")
    assert not remotes_file(engine.registry.store(store_id)).exists()


def test_a_path_inside_the_state_directory_is_refused(engine: Engine, book: RemoteBook) -> None:
    record = engine.resolver.effective("main", create=False)
    for url in (str(record.path / "vault"), f"file://{engine.state.root}/stores", str(engine.state.root)):
        with pytest.raises(InvalidParams, match="inside the state directory"):
            book.add("self", url)
    assert not remotes_file(record).exists()


def test_a_store_keeps_at_most_its_limit_of_remotes(engine: Engine, book: RemoteBook) -> None:
    for number in range(REMOTES_MAX):
        book.add(f"r{number}", f"/srv/notes-{number}.git")
    with pytest.raises(LimitExceeded):
        book.add("one-more", "/srv/one-more.git")
    assert len(book.listing()["stores"][0]["remotes"]) == REMOTES_MAX


@pytest.mark.parametrize("content", [b"{not json", b'{"schemaVersion": 2, "remotes": []}',
                                     b'{"schemaVersion": 1, "remotes": [{"name": "x", "url": "https://a:'
                                     + SECRET.encode() + b'@h/x", "addedAt": "t"}]}',
                                     b'{"schemaVersion": 1, "remotes": [{"name": "..", "url": "/x", "addedAt": "t"}]}',
                                     b'{"schemaVersion": 1, "remotes": [{"name": "a", "url": "/x", "addedAt": "t"},'
                                     b' {"name": "A", "url": "/y", "addedAt": "t"}]}'])
def test_a_remotes_file_that_breaks_the_rules_is_reported_and_left_as_it_is(engine: Engine, book: RemoteBook,
                                                                            content: bytes) -> None:
    path = remotes_file(engine.resolver.effective("main", create=False))
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(content)
    listed = book.listing()["stores"][0]
    assert listed["remotes"] == [] and "cannot be used" in listed["problem"] and SECRET not in listed["problem"]
    with pytest.raises(Conflict, match="correct or remove it"):
        book.add("nas", "/srv/notes.git")
    with pytest.raises(Conflict):
        book.remove("x")
    assert path.read_bytes() == content


# --- the operator methods --------------------------------------------------------------------------


def _ask(dispatcher: Dispatcher, session: Session, method: str, params: dict | None = None) -> dict:
    line = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}).encode() + b"\n"
    return dispatcher.handle(session, line)


def test_the_operator_methods_add_list_and_remove_and_refuse_as_the_book_does(
        engine: Engine, book: RemoteBook, caplog: pytest.LogCaptureFixture) -> None:
    dispatcher = Dispatcher(engine)
    ensure_operator_token(engine.state)
    operator = Session()
    _ask(dispatcher, operator, "initialize", {"_meta": {"knowledge": {"operatorToken": read_operator_token(engine.state)}}})
    assert operator.operator

    added = _ask(dispatcher, operator, "operator/addSyncRemote", {"name": "nas", "url": "ssh://nas.local/notes.git"})
    assert added["result"]["remote"]["name"] == "nas", added
    listed = _ask(dispatcher, operator, "operator/syncRemotes")["result"]["stores"]
    assert [r["url"] for r in listed[0]["remotes"]] == ["ssh://nas.local/notes.git"]

    caplog.set_level(logging.DEBUG)
    for url in CREDENTIAL_URLS.values():
        refused = _ask(dispatcher, operator, "operator/addSyncRemote", {"name": "gh", "url": url})
        assert refused["error"]["data"]["reason"] == "invalid_params" and refused["error"]["data"]["field"] == "url"
        assert SECRET not in json.dumps(refused) and GITHUB_TOKEN not in json.dumps(refused)
    assert SECRET not in caplog.text and GITHUB_TOKEN not in caplog.text
    for params, why in (({"name": "nas", "url": "/srv/x.git"}, "conflict"),
                        ({"name": "-x", "url": "/srv/x.git"}, "invalid_params"),
                        ({"name": "x", "url": "/srv/x.git", "extra": 1}, "invalid_params"),
                        ({"name": "x", "url": "/srv/x.git", "store": "nope"}, "not_found")):
        assert _ask(dispatcher, operator, "operator/addSyncRemote", params)["error"]["data"]["reason"] == why
    assert _ask(dispatcher, operator, "operator/removeSyncRemote", {"name": "x"})["error"]["data"]["reason"] == \
        "not_found"
    removed = _ask(dispatcher, operator, "operator/removeSyncRemote", {"name": "nas", "agent": "main"})["result"]
    assert removed["remotes"] == []
    assert _ask(dispatcher, operator, "operator/syncRemotes")["result"]["stores"][0]["remotes"] == []


def test_no_agent_may_list_add_or_remove_remotes(engine: Engine, book: RemoteBook) -> None:
    dispatcher = Dispatcher(engine)
    token = engine.registry.add_agent("helper", owner=True)
    agent = Session()
    reply = _ask(dispatcher, agent, "initialize", {"protocolVersion": "2025-11-25", "_meta": {"knowledge": {
        "token": token, "audience": {"kind": "owner-private"}}}})
    assert "result" in reply, reply
    for method, params in (("operator/syncRemotes", {}), ("operator/addSyncRemote", {"name": "a", "url": "/srv/a"}),
                           ("operator/removeSyncRemote", {"name": "a"})):
        assert _ask(dispatcher, agent, method, params)["error"]["data"]["reason"] == "denied", method
    assert book.listing()["stores"][0]["remotes"] == []


def test_every_refusal_is_a_knowledge_error_the_wire_names() -> None:
    """The rules raise only the engine's errors (no ValueError escapes to the dispatcher as an internal one)."""
    for url in [*CREDENTIAL_URLS.values(), *REFUSED.values(), "https://[::1", "ssh://h:x/y", None, 7]:
        with pytest.raises(KnowledgeError):
            remotes.check_remote_url(url)
