"""One bad file is that file's finding, never the partition's failure (issue 13, item 4).

Property tests drive the three readers of vault YAML (record frontmatter, source descriptors, the private
ontology extensions) with hostile values: huge integers and floats, lone surrogates, deep nesting, odd tags
and types.  Each reader returns a value every later consumer can hold (SQLite, tantivy, JSON replies) or a
finding naming the file, and raises nothing else.  End-to-end tests put such files into a real vault and
check that the rest of the partition is served, indexed, reopened and diagnosed.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.vault import frontmatter
from engine.access.authority import AgentCaller
from engine.cli.commands import main
from engine.core.errors import NotFound, StoreUnavailable
from engine.vault.evidence import parse_descriptor
from engine.core.findings import MAX_FINDING_CHARS
from engine.vault.frontmatter import INT_MAX, INT_MIN, MAX_NESTING
from engine.vault.ontology import Ontology
from engine.operator.token_file import ensure_operator_token, read_operator_token
from engine.wire.protocol import Dispatcher, Session
from engine.vault.records import check_record, check_scope, parse_record
from engine.service import Engine
from engine.state.statedir import StateDir
from tests.helpers import claim, only_store, page, private_dir, tool_answer, wait_for, yaml_loader

HUGE = "1" * 5000
NOW = "2026-01-05T09:00:00Z"
RECORD_PATH = "pages/people/hostile.md"
DESCRIPTOR_PATH = "sources/src_hostile.source.yaml"
ONTOLOGY_PATH = "vault/ontology.yaml"
SHIPPED = Ontology.shipped()

# Values a YAML file can hold that no later consumer can: each must be refused where it is read.
REFUSED = [
    pytest.param(HUGE, id="5000-digit-int"),
    pytest.param("0x" + "f" * 5000, id="huge-hex-int"),
    pytest.param("0b" + "1" * 200, id="huge-binary-int"),
    pytest.param("0" + "7" * 200, id="huge-octal-int"),
    pytest.param("1" + ":59" * 40, id="huge-sexagesimal-int"),
    pytest.param("9223372036854775808", id="int-past-64-bits"),
    pytest.param("-9223372036854775809", id="int-below-64-bits"),
    pytest.param("1" + ":59" * 400 + ".5", id="overflowing-sexagesimal-float"),
    pytest.param("1.0e+400", id="float-overflowing-to-inf"),
    pytest.param("!!float 1e400", id="tagged-float-inf"),
    pytest.param(".nan", id="nan"),
    pytest.param("-.inf", id="minus-inf"),
    pytest.param("!!float " + "9" * 400, id="400-digit-float"),
    pytest.param('"\\ud800"', id="lone-high-surrogate"),
    pytest.param('"a\\udfffb"', id="lone-low-surrogate"),
    pytest.param("[" * (MAX_NESTING + 5) + "]" * (MAX_NESTING + 5), id="deep-nesting"),
    pytest.param("!!python/object:os.system echo", id="python-object-tag"),
    pytest.param("!!python/name:os.system", id="python-name-tag"),
    pytest.param("!!binary aGVsbG8=", id="binary-tag"),
    pytest.param("!!timestamp 2001-12-14", id="timestamp-tag"),
    pytest.param("!!set {a}", id="set-tag"),
    pytest.param("!!omap [a: 1]", id="omap-tag"),
    pytest.param("!!int abc", id="int-tag-on-text"),
    pytest.param("!!float abc", id="float-tag-on-text"),
    pytest.param("!!bool maybe", id="bool-tag-on-text"),
    pytest.param("!!str [1]", id="str-tag-on-a-list"),
    pytest.param("!custom x", id="local-tag"),
    pytest.param("{1: a}", id="int-key"),
    pytest.param("{[a]: b}", id="list-key"),
    pytest.param("{null: x}", id="null-key"),
    pytest.param("{<<: {b: 1}}", id="merge-key"),
    pytest.param("&a [1]", id="anchor"),
]
# Odd but harmless: read as plain values (dates stay strings) and judged by the envelope checks.
ODD = ["2001-12-14", "2001-12-14T21:59:43.10-05:00", "~", "yes", "'\\ud800'", '"\\0"', '"\\ud83d"x', "{}", "[]",
       "-9223372036854775808", "0x7fffffffffffffff", "1.0e+308", "[[[[1]]]]", '"\\U0001F600"', "{a: [{b: {c: 1}}]}",
       "'" + "x" * 2000 + "'", "!!null x", "!!str 12", "1:30", "190:20:30.15", "0o17"]


# --- the value contract -------------------------------------------------------------------------


def assert_plain(value: Any, depth: int = 0) -> None:
    """What every reader hands on: JSON values that SQLite, tantivy and a UTF-8 reply can all hold."""
    assert depth <= MAX_NESTING
    if isinstance(value, dict):
        for key, item in value.items():
            assert isinstance(key, str)
            assert_plain(key, depth)
            assert_plain(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            assert_plain(item, depth + 1)
    elif isinstance(value, str):
        value.encode("utf-8")  # a lone surrogate cannot be encoded
    elif isinstance(value, bool) or value is None:
        pass
    elif isinstance(value, int):
        assert INT_MIN <= value <= INT_MAX
    else:
        assert isinstance(value, float) and math.isfinite(value)


def wire(value: Any) -> bytes:
    """A reply as the socket writes it; raises where a reply could not be sent."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8")


LOADERS = ["libyaml", "python"]


# --- documents with hostile values -------------------------------------------------------------


RECORD_KEYS = {
    "format": "knowledge-record-v1", "id": "pg_hostile", "revision": "1", "kind": "page", "title": "Hostile page",
    "type": "person", "recorded_at": NOW, "updated_at": NOW, "scope": "private", "lifecycle": "active",
}
DESCRIPTOR_KEYS = {
    "format": "knowledge-source-v1", "id": "src_hostile", "retained_path": "sources/src_hostile.txt",
    "sha256": "0" * 64, "size": "3", "media_type": "text/plain", "filename": "a.txt", "origin": "{agent: main}",
    "recorded_at": NOW,
}
# Where a value (@) can sit: the key itself, in a list, a mapping, a citation, a recall block, an attribution.
WRAPPERS = ["@", "[@]", "{x: @}", "[{source: @, lines: @}]", "{summary: @, importance: @}",
            "{agent: @, instance: @}", "[a, @]"]


def _hostile_scalars() -> st.SearchStrategy[str]:
    plain = st.one_of(
        st.integers().map(str), st.floats().map(repr), st.text(max_size=20).map(json.dumps),
        st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00\r\n"), max_size=20),
    )
    refused = [param.values[0] for param in REFUSED]
    return st.one_of(st.sampled_from(refused), st.sampled_from(ODD), plain)


def _placed(keys: list[str]) -> st.SearchStrategy[list[tuple[str, str]]]:
    placement = st.tuples(st.sampled_from(keys), st.sampled_from(WRAPPERS), _hostile_scalars()).map(
        lambda parts: (parts[0], parts[1].replace("@", parts[2])))
    return st.lists(placement, min_size=1, max_size=3, unique_by=lambda item: item[0])


def _document(base: dict[str, str], changes: list[tuple[str, str]]) -> str:
    fields = dict(base)
    fields.update(changes)
    return "".join(f"{key}: {value}\n" for key, value in fields.items())


record_documents = _placed(list(RECORD_KEYS) + ["claim_kind", "relation", "from", "fields", "evidence", "aliases",
                                                 "tags", "recall", "attribution", "fixture", "unknown"]).map(
    lambda changes: ("---\n" + _document(RECORD_KEYS, changes) + "---\nBody text.\n").encode("utf-8"))
descriptor_documents = _placed(list(DESCRIPTOR_KEYS) + ["unknown"]).map(
    lambda changes: _document(DESCRIPTOR_KEYS, changes).encode("utf-8"))
ONTOLOGY_SLOTS = ["label", "description", "filing", "aliases", "fields", "cuisine", "from", "claim", "format",
                  "default_page_type"]


def _ontology_text(slot: str, value: str) -> str:
    """An extension adding a page type, a relationship type and a claim kind, with ``value`` in one slot."""
    parts = {"label": "Recipe", "description": "A dish", "filing": "[pages/recipes/]", "aliases": "[dish]",
             "cuisine": "{type: string}", "from": "[recipe]", "claim": "A taste"}
    fields = f"{{cuisine: {value if slot == 'cuisine' else parts['cuisine']}}}"
    parts[slot] = value
    return (f"format: {value if slot == 'format' else 'knowledge-ontology-v1'}\n"
            + (f"default_page_type: {value}\n" if slot == "default_page_type" else "")
            + "page_types:\n  recipe:\n"
            + "".join(f"    {key}: {parts[key]}\n" for key in ("label", "description", "filing", "aliases"))
            + f"    fields: {value if slot == 'fields' else fields}\n"
            + f"relationship_types:\n  cooks:\n    from: {parts['from']}\n    to: ['*']\n"
            + f"claim_kinds:\n  taste: {parts['claim']}\n")


ontology_documents = st.tuples(st.sampled_from(ONTOLOGY_SLOTS), _hostile_scalars()).map(
    lambda parts: _ontology_text(*parts))


# --- readers: a value or a finding, never anything else -------------------------------------------


def _read_record(data: bytes) -> None:
    record, findings = parse_record(data, RECORD_PATH)
    if record is None:
        [finding] = findings
        assert finding.path == RECORD_PATH and finding.code in ("syntax", "too_large")
        wire(finding.to_dict())
        return
    assert findings == []
    assert_plain(record.frontmatter)
    checked = [check_scope(record, "private")] + check_record(record, SHIPPED, RECORD_PATH)
    wire([finding.to_dict() for finding in checked if finding is not None])
    wire(record.frontmatter)


@pytest.mark.parametrize("loader", LOADERS)
@settings(max_examples=300, deadline=None)
@given(data=record_documents)
def test_record_reader_returns_a_record_or_a_finding(loader: str, data: bytes) -> None:
    with yaml_loader(loader):
        _read_record(data)


def _read_descriptor(data: bytes) -> None:
    descriptor, findings = parse_descriptor(data, DESCRIPTOR_PATH)
    if descriptor is None:
        [finding] = findings
        assert (finding.path, finding.code) == (DESCRIPTOR_PATH, "source_invalid")
        wire(finding.to_dict())
        return
    assert findings == []
    assert_plain(descriptor.to_dict())


@pytest.mark.parametrize("loader", LOADERS)
@settings(max_examples=300, deadline=None)
@given(data=descriptor_documents)
def test_descriptor_reader_returns_a_descriptor_or_a_finding(loader: str, data: bytes) -> None:
    with yaml_loader(loader):
        _read_descriptor(data)


def _read_ontology(text: str) -> Ontology:
    extended = SHIPPED.extended(text, ONTOLOGY_PATH)
    assert set(SHIPPED.page_types) <= set(extended.page_types)
    assert all(finding.path == ONTOLOGY_PATH for finding in extended.findings)
    wire([finding.to_dict() for finding in extended.findings])
    for page_type in extended.page_types.values():
        assert_plain({name: spec.to_dict() for name, spec in page_type.fields.items()})
        assert all(isinstance(prefix, str) for prefix in page_type.filing)
    assert_plain(extended.claim_kinds)
    return extended


@pytest.mark.parametrize("loader", LOADERS)
@settings(max_examples=300, deadline=None)
@given(text=ontology_documents)
def test_ontology_reader_returns_an_ontology_with_findings(loader: str, text: str) -> None:
    with yaml_loader(loader):
        _read_ontology(text)


@pytest.mark.parametrize("loader", LOADERS)
@pytest.mark.parametrize("value", REFUSED)
def test_each_refused_value_is_a_finding_naming_the_file_and_line(loader: str, value: str) -> None:
    with yaml_loader(loader):
        record = ("---\n" + _document(RECORD_KEYS, [("unknown", value)]) + "---\nBody.\n").encode("utf-8")
        assert parse_record(record, RECORD_PATH)[0] is None
        [finding] = parse_record(record, RECORD_PATH)[1]
        assert (finding.path, finding.line) == (RECORD_PATH, len(RECORD_KEYS) + 2)

        descriptor = _document(DESCRIPTOR_KEYS, [("size", value)]).encode("utf-8")
        assert parse_descriptor(descriptor, DESCRIPTOR_PATH)[0] is None
        [finding] = parse_descriptor(descriptor, DESCRIPTOR_PATH)[1]
        assert (finding.path, finding.line) == (DESCRIPTOR_PATH, list(DESCRIPTOR_KEYS).index("size") + 1)

        extended = SHIPPED.extended(_ontology_text("label", value), ONTOLOGY_PATH)
        assert "recipe" not in extended.page_types  # an unreadable extension applies nothing
        [finding] = extended.findings
        assert (finding.path, finding.code, finding.line) == (ONTOLOGY_PATH, "ontology_invalid", 4)


@pytest.mark.parametrize("key", ["claim_kind", "relation", "lifecycle", "kind", "type", "scope", "subject"])
@pytest.mark.parametrize("value", ["[a]", "{a: 1}", "[[1]]", "1.5", "true"])
def test_odd_types_at_known_keys_are_envelope_findings(key: str, value: str) -> None:
    """Found by the property test: ``claim_kind: [a]`` raised TypeError (unhashable) in the checks."""
    kind = {"claim_kind": "claim", "subject": "claim", "relation": "relationship"}.get(key, "page")
    base = dict(RECORD_KEYS, kind=kind)
    data = ("---\n" + _document(base, [(key, value)]) + "---\nBody.\n").encode("utf-8")
    record, _ = parse_record(data, RECORD_PATH)
    assert record is not None
    findings = [check_scope(record, "private")] + check_record(record, SHIPPED, RECORD_PATH)
    assert any(finding is not None and finding.severity == "error" for finding in findings)


def test_a_finding_quoting_a_huge_value_stays_small() -> None:
    data = ("---\n" + _document(RECORD_KEYS, [("scope", "x" * 1_000_000)]) + "---\nBody.\n").encode("utf-8")
    record, _ = parse_record(data, RECORD_PATH)
    finding = check_scope(record, "private")
    assert finding is not None and finding.code == "scope_invalid"
    assert len(finding.message) == MAX_FINDING_CHARS


def test_rendering_refuses_what_reading_would_refuse() -> None:
    """A record the engine writes always reads back (the reader's own rules run on the rendered head)."""
    for value in (2**63, -(2**63) - 1, "\ud800"):
        with pytest.raises(frontmatter.DocumentSyntaxError):
            frontmatter.render_document({"id": "pg_x", "odd": value}, "Body.\n")
    assert frontmatter.parse_document(frontmatter.render_document({"n": INT_MAX, "m": INT_MIN}, ""))[0] == {
        "n": INT_MAX, "m": INT_MIN}


# --- a real vault ---------------------------------------------------------------------------------


def record_text(record_id: str, title: str, body: str = "Written by hand.\n", **extra: str) -> str:
    fields = {**RECORD_KEYS, "id": record_id, "title": title, **extra}
    return "---\n" + "".join(f"{key}: {value}\n" for key, value in fields.items()) + "---\n" + body


def titles(engine: Engine, caller: AgentCaller, query: str) -> set[str]:
    return {hit["title"] for hit in engine.search(caller, {"query": query})["hits"]}


def findings_for(engine: Engine, caller: AgentCaller, path: str) -> list[dict[str, Any]]:
    report = engine.health(caller)
    wire(report)
    return [finding for finding in report["findings"] if finding.get("path") == path]


def seed(engine: Engine) -> tuple[AgentCaller, Path]:
    """An owner with a page and a claim (so pages/people/ and sources/ exist); returns the page's directory."""
    owner = AgentCaller(engine.add_agent("main", owner=True), {"kind": "owner-private"})
    receipt = engine.save_page(owner, page("dana", "Dana Whitaker"))
    engine.remember(owner, {"requestId": "tea", "items": [claim("Dana drinks green tea.", "green tea")]})
    saved = private_dir(engine.state) / engine.get_record(owner, receipt["id"])["path"]
    return owner, saved.parent


# Each bad file, as the issue found them: a 5,000-digit integer in a record, the ontology, a descriptor.
BAD_FILES = {
    "record": (RECORD_PATH, record_text("pg_bad", "Bad page", revision=HUGE), "syntax"),
    "ontology": (ONTOLOGY_PATH, f"format: knowledge-ontology-v1\npage_types:\n  recipe:\n    label: {HUGE}\n",
                 "ontology_invalid"),
    "descriptor": (DESCRIPTOR_PATH, _document(DESCRIPTOR_KEYS, [("size", HUGE)]), "source_invalid"),
}


def place_bad_file(state: StateDir, which: str) -> str:
    relpath, text, _ = BAD_FILES[which]
    root = only_store(state) / "vault" if relpath == ONTOLOGY_PATH else private_dir(state)
    target = root / relpath.removeprefix("vault/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    return relpath


@pytest.mark.parametrize("which", list(BAD_FILES))
def test_a_bad_file_is_its_finding_and_the_partition_is_served(
        state_dir: StateDir, which: str, capsys: pytest.CaptureFixture[str]) -> None:
    with Engine(state_dir, watch=False) as engine:
        owner, people = seed(engine)
        relpath = place_bad_file(state_dir, which)
        code = BAD_FILES[which][2]

        assert titles(engine, owner, "Dana") == {"Dana Whitaker", "Dana drinks green tea."}
        [finding] = findings_for(engine, owner, relpath)
        assert finding["code"] == code and "integer longer than 100 digits" in finding["message"]
        assert engine.health(owner)["ok"] is False

        engine.save_page(owner, page("harbour", "Harbour Master"))
        (people / "outside.md").write_text(record_text("pg_outside", "Lighthouse Keeper"), encoding="utf-8")
        assert titles(engine, owner, "Harbour") == {"Harbour Master"}
        assert titles(engine, owner, "Lighthouse") == {"Lighthouse Keeper"}
        assert engine.get_record(owner, "pg_outside")["status"] == "current"

    with Engine(state_dir, watch=False) as reopened:  # a restart with the bad file still on disk
        assert reopened.stores()[0]["status"] == "ok"
        assert titles(reopened, owner, "Lighthouse") == {"Lighthouse Keeper"}
        assert titles(reopened, owner, "Dana") == {"Dana Whitaker", "Dana drinks green tea."}
        assert [f["code"] for f in findings_for(reopened, owner, relpath)] == [code]

    capsys.readouterr()
    assert main(["--state-dir", str(state_dir.root), "doctor"]) == 1
    out, err = capsys.readouterr()
    assert f"main: error: {relpath}" in out and "integer longer than 100 digits" in out
    assert "Traceback" not in out + err
    assert main(["--state-dir", str(state_dir.root), "doctor", "--json"]) == 1
    out, err = capsys.readouterr()
    report = json.loads(out)
    main_entry = next(entry for entry in report["agents"] if entry["agent"] == "main")
    assert relpath in {finding.get("path") for finding in main_entry["diagnostics"]["findings"]}
    assert "Traceback" not in err


def test_with_the_watcher_a_valid_file_beside_a_bad_one_is_found(state_dir: StateDir) -> None:
    """The issue's second symptom: after the first failure, files the watcher reported were dropped."""
    with Engine(state_dir, watch=True) as engine:
        owner, people = seed(engine)
        place_bad_file(state_dir, "record")
        wait_for(lambda: findings_for(engine, owner, RECORD_PATH))
        (people / "outside.md").write_text(record_text("pg_outside", "Lighthouse Keeper"), encoding="utf-8")
        assert wait_for(lambda: titles(engine, owner, "Lighthouse")) == {"Lighthouse Keeper"}
        assert titles(engine, owner, "Dana") == {"Dana Whitaker", "Dana drinks green tea."}


def test_a_sync_that_fails_keeps_what_the_watcher_reported(state_dir: StateDir, monkeypatch) -> None:
    """Whatever makes a sync fail (a full disk, a bug), the files it did not read are read by the next one."""
    with Engine(state_dir, watch=True) as engine:
        owner, people = seed(engine)
        runtime = engine.runtime(engine.registry.own_store_of("main"))
        assert runtime.watching
        real_sync, failures = runtime.catalog.sync, []

        def failing_once(partition, paths=None, **options):
            if not failures:  # the first sync after the edit: the watcher's report of it
                failures.append(paths)
                raise StoreUnavailable("the disk is full")
            return real_sync(partition, paths, **options)

        monkeypatch.setattr(runtime.catalog, "sync", failing_once)
        (people / "outside.md").write_text(record_text("pg_outside", "Lighthouse Keeper"), encoding="utf-8")

        def searched() -> set[str]:
            try:
                return titles(engine, owner, "Lighthouse")
            except StoreUnavailable:
                return set()
        assert wait_for(searched) == {"Lighthouse Keeper"}
        assert failures


def test_a_name_that_is_not_utf8_is_its_finding_and_git_still_commits(state_dir: StateDir) -> None:
    """Such names reach Python as lone surrogates, which SQLite, tantivy, JSON and git's stream refuse."""
    with Engine(state_dir, watch=False, git=False) as engine:  # no history yet: the first commit comes later
        owner, people = seed(engine)
    folder = os.fsencode(people)
    with open(folder + b"/bad\xff.md", "wb") as handle:
        handle.write(record_text("pg_badname", "Badly named").encode("utf-8"))
    os.mkdir(folder + b"/dir\xfe")
    with open(folder + b"/dir\xfe/inside.md", "wb") as handle:
        handle.write(record_text("pg_inside", "Inside a bad directory").encode("utf-8"))

    with Engine(state_dir, watch=False) as engine:
        assert titles(engine, owner, "Dana") == {"Dana Whitaker", "Dana drinks green tea."}
        assert titles(engine, owner, "Badly") == titles(engine, owner, "Inside") == set()
        assert [f["code"] for f in findings_for(engine, owner, "pages/people/bad\\xff.md")] == ["unreadable_name"]
        assert [f["code"] for f in findings_for(engine, owner, "pages/people/dir\\xfe")] == ["unreadable_name"]
        engine.save_page(owner, page("harbour", "Harbour Master"))
        # The first commit takes in what the vault held; the undecodable names stay out of it.
        assert engine.resume(owner)["state"] == "committed"
        assert titles(engine, owner, "Harbour") == {"Harbour Master"}


@pytest.mark.parametrize("content", ["[" * 100_000, '{"checkpoint": ' + HUGE + "}"], ids=["deep", "huge-int"])
def test_an_unreadable_manifest_is_a_clear_store_unavailable(
        state_dir: StateDir, content: str, capsys: pytest.CaptureFixture[str]) -> None:
    """vault.json binds the store's identity: unreadable, the store fails closed, clearly (never `internal`)."""
    with Engine(state_dir, watch=False) as engine:
        owner, _ = seed(engine)
    (only_store(state_dir) / "vault.json").write_text(content[:60_000], encoding="utf-8")
    with Engine(state_dir, watch=False) as engine:
        with pytest.raises(StoreUnavailable, match="vault.json"):
            engine.search(owner, {"query": "Dana"})
    capsys.readouterr()
    assert main(["--state-dir", str(state_dir.root), "doctor"]) == 1
    out, err = capsys.readouterr()
    assert "vault.json" in out and "Traceback" not in out + err


def test_an_unreadable_partition_marker_is_a_clear_store_unavailable(state_dir: StateDir) -> None:
    with Engine(state_dir, watch=False) as engine:
        owner, _ = seed(engine)
    (private_dir(state_dir) / ".partition.json").write_text("[" * 100_000, encoding="utf-8")
    with Engine(state_dir, watch=False) as engine:
        with pytest.raises(StoreUnavailable, match="does not belong to this store"):
            engine.search(owner, {"query": "Dana"})


def test_a_partition_marker_changed_under_a_running_engine_is_seen_even_with_its_mtime_restored(
        state_dir: StateDir) -> None:
    with Engine(state_dir, watch=False) as engine:
        owner, _ = seed(engine)
        engine.search(owner, {"query": "Dana"})  # the marker has been read (and kept) once
        marker = private_dir(state_dir) / ".partition.json"
        before = marker.stat()
        text = marker.read_text(encoding="utf-8")
        foreign = text.replace('"identity": "', '"identity": "X', 1)[:len(text)]
        assert foreign != text
        marker.write_text(foreign, encoding="utf-8")
        os.utime(marker, ns=(before.st_atime_ns, before.st_mtime_ns))  # same size, same mtime: only ctime moves
        with pytest.raises(StoreUnavailable, match="does not belong to this store"):
            engine.search(owner, {"query": "Dana"})


def test_doctor_reports_an_unexpected_failure_without_a_traceback(
        state_dir: StateDir, monkeypatch, capsys: pytest.CaptureFixture[str]) -> None:
    with Engine(state_dir, watch=False) as engine:
        seed(engine)

    def broken(self, caller):
        raise TypeError("a checker bug")

    monkeypatch.setattr(Engine, "diagnostics", broken)
    assert main(["--state-dir", str(state_dir.root), "doctor"]) == 1
    out, err = capsys.readouterr()
    assert "main: diagnostics failed: TypeError: a checker bug" in out
    assert "Traceback" not in out + err


# --- a real vault, driven by the property strategies ----------------------------------------------


@pytest.fixture(scope="module")
def vault(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One engine with a page and a claim, shared by the examples below (each rewrites one hostile file),
    with an agent and an operator connection of the socket's dispatcher."""
    state = StateDir(tmp_path_factory.mktemp("bad-files") / "state")
    engine = Engine(state, watch=False)
    owner, _ = seed(engine)
    dispatcher, agent, operator = Dispatcher(engine), Session(), Session()
    ensure_operator_token(state)
    for session, knowledge in ((agent, {"token": owner.token, "audience": {"kind": "owner-private"}}),
                               (operator, {"operatorToken": read_operator_token(state)})):
        reply = dispatcher.handle(session, _message("initialize", {"_meta": {"knowledge": knowledge}}))
        assert "result" in reply, reply
    yield {"engine": engine, "owner": owner, "state": state, "dispatcher": dispatcher, "agent": agent,
           "operator": operator}
    engine.close()


def _message(method: str, params: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()


# Every read an agent or the operator can make of the partition (and of the hostile record, pg_hostile).
AGENT_READS = [("memory/search", {"query": "Hostile page"}), ("memory/health", {}), ("memory/status", {}),
               ("memory/prompt", {}), ("memory/index", {}), ("memory/recallCandidates", {}),
               ("memory/gate", {"message": "What about the hostile page?"})] + [
    ("tools/call", {"name": name, "arguments": arguments}) for name, arguments in [
        ("knowledge_grep", {"query": "Hostile page"}), ("knowledge_lookup", {"name": "Hostile page"}),
        ("knowledge_record", {"id": "pg_hostile"}), ("knowledge_record", {"id": "pg_hostile", "view": "history"}),
        ("knowledge_ontology", {}), ("knowledge_ontology", {"view": "definitions", "name": "recipe"}),
        ("knowledge_ontology", {"view": "diagnostics"}), ("knowledge_ontology", {"view": "sources"}),
        ("knowledge_ontology", {"view": "definitions", "name": "person", "includeRecords": True}),
        ("search_knowledge", {"query": "Hostile page"}), ("search_knowledge", {"knowledge_item_id": "pg_hostile"}),
    ]]
OPERATOR_READS = [(f"operator/{name}", {"agent": "main", **params}) for name, params in [
    ("records", {}), ("types", {}), ("search", {"query": "Hostile page"}), ("record", {"id": "pg_hostile"}),
    ("links", {"id": "pg_hostile"}), ("history", {"id": "pg_hostile"}), ("approvals", {}), ("prompt", {}),
    ("index", {}), ("ontology", {}), ("health", {}), ("source", {"source": "src_hostile"}),
]]


def _still_served(vault: dict[str, Any], relpath: str) -> None:
    """Search finds the seeded page, and every read answers (an error of its own, never ``internal``)."""
    engine, owner = vault["engine"], vault["owner"]
    assert "Dana Whitaker" in titles(engine, owner, "Dana")
    assert engine.lookup(owner, "Dana Whitaker")["matches"]
    report = engine.health(owner)
    assert all(finding.get("severity") in ("error", "warning") for finding in report["findings"])
    hits = engine.search(owner, {"query": "Hostile page"})["hits"]
    reads = AGENT_READS + [("memory/read", {"ref": hit["ref"]}) for hit in hits]
    for session, requests in ((vault["agent"], reads), (vault["operator"], OPERATOR_READS)):
        for method, params in requests:
            reply = vault["dispatcher"].handle(session, _message(method, params))
            wire(reply)
            if "error" in reply:
                assert reply["error"]["data"]["reason"] != "internal", (method, params, reply)
            elif isinstance(reply["result"], dict) and reply["result"].get("isError"):
                assert tool_answer(reply["result"]).get("reason") != "internal", (method, params, reply)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=record_documents)
def test_any_hostile_record_file_leaves_the_partition_served(vault: dict[str, Any], data: bytes) -> None:
    (private_dir(vault["state"]) / RECORD_PATH).write_bytes(data)
    _still_served(vault, RECORD_PATH)
    try:
        wire(vault["engine"].get_record(vault["owner"], "pg_hostile"))
    except NotFound:
        pass


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=descriptor_documents)
def test_any_hostile_descriptor_leaves_the_partition_served(vault: dict[str, Any], data: bytes) -> None:
    (private_dir(vault["state"]) / DESCRIPTOR_PATH).write_bytes(data)
    _still_served(vault, DESCRIPTOR_PATH)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=ontology_documents)
def test_any_hostile_ontology_leaves_the_partition_served(vault: dict[str, Any], text: str) -> None:
    (only_store(vault["state"]) / "vault" / "ontology.yaml").write_text(text, encoding="utf-8")
    _still_served(vault, ONTOLOGY_PATH)
    wire(vault["engine"].diagnostics(vault["owner"])["ontology"])
