"""A page retaining a file with it: the file's ``content`` in its evidence, retained in the page's own publication."""

from __future__ import annotations

import base64
import hashlib
from dataclasses import asdict
from typing import Any

import pytest

from engine.access.authority import AgentCaller
from engine.bench.secrets import fake_credentials
from engine.core.errors import Conflict, InvalidParams, LimitExceeded, SecretDetected
from engine.service import Engine
from engine.store.attachments import ATTACH_MAX_BYTES, attach
from engine.store.inputs import parse_page_input
from engine.vault.evidence import parse_descriptor
from tests.helpers import only_store, private_dir, vault_snapshot

NOTE = b"# Tram clock\n\nAsked Lotte about the escapement.\n"
SECRET_TEXT, _ = fake_credentials()["AWS access key id"]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def page(request_id: str = "page-1", data: bytes = NOTE, **file: Any) -> dict[str, Any]:
    return {"requestId": request_id, "type": "note", "title": "Tram clock", "body": "Asked Lotte.",
            "evidence": [{"content": b64(data), "filename": "vault › Tram clock.md", "mediaType": "text/markdown",
                          **file}]}


def publications(engine: Engine, caller: AgentCaller) -> list[tuple[str, str]]:
    return engine.on_store(caller, lambda rt, a: [(row["operation"], row["state"]) for row in rt.store.db.all(
        "SELECT operation, state FROM publications ORDER BY seq")])


def state_of(engine: Engine, caller: AgentCaller) -> tuple[dict[str, str], list[tuple[str, str]]]:
    return vault_snapshot(only_store(engine.state) / "vault"), publications(engine, caller)


@pytest.fixture
def baseline(engine: Engine, owner: AgentCaller) -> dict[str, Any]:
    """The owner's store, created and holding one attachment, so refusals have something to leave alone."""
    return attach(engine, owner, {"requestId": "baseline", "content": b64(b"baseline\n")})


def test_a_page_retains_a_file_in_its_own_publication(engine, owner, baseline):
    receipt = engine.save_page(owner, page(sha256=hashlib.sha256(NOTE).hexdigest()))

    [source] = receipt["sources"]
    assert (source["sha256"], source["size"]) == (hashlib.sha256(NOTE).hexdigest(), len(NOTE))
    assert (source["mediaType"], source["filename"]) == ("text/markdown", "vault › Tram clock.md")
    assert publications(engine, owner) == [("attach", "applied"), ("save_page", "applied")]  # one, not two
    assert (private_dir(engine.state) / source["retainedPath"]).read_bytes() == NOTE
    relpath = f"sources/{source['id']}.source.yaml"
    descriptor, findings = parse_descriptor((private_dir(engine.state) / relpath).read_bytes(), relpath)
    assert findings == [] and descriptor.retained_path == source["retainedPath"]
    assert (descriptor.filename, descriptor.origin) == ("vault › Tram clock.md",
                                                        {"agent": "main", "audience": "owner-private"})
    record = engine.get_record(owner, receipt["id"])
    assert record["frontmatter"]["evidence"] == [{"source": source["id"]}]
    findings = engine.diagnostics(owner)["findings"]
    assert [f for f in findings if f.get("severity", "error") == "error"] == []
    # The source is an ordinary retained source: a claim cites it by line, as one attached alone.
    claim = engine.remember(owner, {"requestId": "claim-1", "items": [{
        "text": "Lotte knows escapements", "claimKind": "fact",
        "evidence": [{"source": source["id"], "lines": [3, 3], "quote": "escapement"}]}]})
    assert claim["items"][0]["revision"] == 1


def test_a_file_and_a_source_are_cited_in_the_order_given(engine, owner, baseline):
    cited = {**page(), "evidence": [{"source": baseline["source"]["id"]}, *page()["evidence"]]}
    receipt = engine.save_page(owner, cited)

    evidence = engine.get_record(owner, receipt["id"])["frontmatter"]["evidence"]
    assert evidence == [{"source": baseline["source"]["id"]}, {"source": receipt["sources"][0]["id"]}]


def test_a_files_name_with_folders_keeps_its_last_part_and_the_receipt_says_so(engine, owner, baseline):
    cited = {**page(filename="../Tram clock.md"), "evidence": [{"source": baseline["source"]["id"]},
                                                               *page(filename="../Tram clock.md")["evidence"]]}
    receipt = engine.save_page(owner, cited)

    assert receipt["sources"][0]["filename"] == "Tram clock.md"
    assert receipt["note"] == ("evidence[1].filename was kept as 'Tram clock.md', a file's own name: a display name "
                               "holds no folder and no surrounding spaces")
    assert "note" not in engine.save_page(owner, page("page-2"))


def test_an_identical_retry_returns_the_first_receipt_and_writes_nothing(engine, owner):
    first = engine.save_page(owner, page())
    before = state_of(engine, owner)

    again = engine.save_page(owner, page(sha256=hashlib.sha256(NOTE).hexdigest()))  # verifying is not asking

    assert again["publicationId"] == first["publicationId"] and again["sources"] == first["sources"]
    assert state_of(engine, owner) == before


@pytest.mark.parametrize("change", [{"data": b"other bytes\n"}, {"filename": "other.md"},
                                    {"mediaType": "text/plain"}])
def test_the_same_request_id_with_another_file_is_a_conflict(engine, owner, change):
    engine.save_page(owner, page())
    before = state_of(engine, owner)
    with pytest.raises(Conflict):
        engine.save_page(owner, page(**change))
    assert state_of(engine, owner) == before


def test_the_digest_of_a_page_without_files_is_what_it_was(engine, owner):
    """A page retaining no file digests as before files could be sent, so a retry of one published then is
    still answered with its receipt, not refused as another request."""
    params = {"requestId": "plain", "type": "note", "title": "Plain", "body": "x",
              "evidence": [{"excerpt": "supporting text"}]}
    parsed = parse_page_input(params)
    # expectedSha256 came later still: a page that does not give it digests without the key
    assert parsed.digest_params() == {key: value for key, value in asdict(parsed).items() if key != "expected_sha256"}
    with_file = parse_page_input(page())
    assert with_file.digest_params()["evidence"][0]["content"] == len(NOTE)


@pytest.mark.parametrize(("citation", "field"), [
    ({"content": b64(NOTE), "source": "src_01"}, "evidence[0].source"),
    ({"content": b64(NOTE), "excerpt": "text"}, "evidence[0].excerpt"),
    ({"content": b64(NOTE), "lines": [1, 1]}, "evidence[0].lines"),
    ({"filename": "a.md", "source": "src_01"}, "evidence[0].filename"),
    ({"mediaType": "text/plain", "excerpt": "text"}, "evidence[0].mediaType"),
    ({"content": "not base64!"}, "evidence[0].content"),
    ({"content": ""}, "evidence[0].content"),
    ({"content": b64(NOTE), "sha256": hashlib.sha256(b"other").hexdigest()}, "evidence[0].sha256"),
    ({"content": b64(NOTE), "filename": "../"}, "evidence[0].filename"),
    ({"content": b64(NOTE), "mediaType": "plain"}, "evidence[0].mediaType"),
    ({"content": b64(NOTE), "requestId": "x"}, "evidence[0].requestId"),
])
def test_a_bad_file_citation_is_refused_and_changes_nothing(engine, owner, baseline, citation, field):
    before = state_of(engine, owner)
    with pytest.raises(InvalidParams) as caught:
        engine.save_page(owner, {**page(), "evidence": [citation]})
    assert caught.value.details.get("field") == field
    assert state_of(engine, owner) == before


def test_files_over_one_attachments_size_in_all_are_refused(engine, owner, baseline):
    half = b"x" * (ATTACH_MAX_BYTES // 2 + 1)
    before = state_of(engine, owner)
    with pytest.raises(LimitExceeded) as caught:
        engine.save_page(owner, {**page(), "evidence": [{"content": b64(half)}, {"content": b64(half)}]})
    assert (caught.value.details["field"], caught.value.details["limit"]) == ("evidence", ATTACH_MAX_BYTES)
    assert state_of(engine, owner) == before


def test_a_credential_in_the_file_is_refused_naming_it_and_changes_nothing(engine, owner, baseline):
    before = state_of(engine, owner)
    with pytest.raises(SecretDetected) as caught:
        engine.save_page(owner, page(data=NOTE + SECRET_TEXT.encode("utf-8") + b"\n"))
    assert caught.value.details["field"] == "evidence[0].content"
    assert state_of(engine, owner) == before
