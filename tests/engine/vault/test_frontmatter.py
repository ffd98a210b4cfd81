"""Frontmatter documents: the safe YAML subset, limits and exact rendering."""

from __future__ import annotations

import json
from typing import Any
from unittest import mock

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.bench.corpus import generate_records, render_record
from engine.core.errors import KnowledgeError, LimitExceeded
from engine.vault import frontmatter
from engine.vault.frontmatter import (
    INT_MAX,
    INT_MIN,
    MAX_NESTING,
    RECORD_MAX_BYTES,
    DocumentSyntaxError,
    dump_yaml,
    load_yaml,
    parse_document,
    render_and_read,
    render_document,
    split_document,
)
from tests.helpers import yaml_loader

EXAMPLE = (
    b"---\n"
    b"format: knowledge-record-v1\n"
    b"id: cl_01JD8Q4W6T2M9Z7K3B5N1X0VYA\n"
    b"revision: 1\n"
    b"recorded_at: 2026-11-29T10:14:03Z\n"
    b"attribution: {agent: main, instance: laptop-main}\n"
    b"evidence:\n"
    b"  - source: src_01JD8Q4W6R8H2V5D1J9P3L7C0B\n"
    b'    quote: "please send me the status notes every Friday"\n'
    b"---\n"
    b"Dana asked for the weekly status notes.\n"
)


def document(yaml_text: str, body: str = "") -> bytes:
    return f"---\n{yaml_text}---\n{body}".encode("utf-8")


def nested_lists(depth: int) -> str:
    return "[" * depth + "]" * depth


# --- parsing and rendering ------------------------------------------------------


def test_parse_reads_frontmatter_and_body() -> None:
    frontmatter, body = parse_document(EXAMPLE)
    assert frontmatter["id"] == "cl_01JD8Q4W6T2M9Z7K3B5N1X0VYA"
    assert frontmatter["revision"] == 1
    assert frontmatter["attribution"] == {"agent": "main", "instance": "laptop-main"}
    assert frontmatter["evidence"][0]["quote"] == "please send me the status notes every Friday"
    assert body == "Dana asked for the weekly status notes.\n"


def test_render_then_parse_round_trips() -> None:
    frontmatter, body = parse_document(EXAMPLE)
    rendered = render_document(frontmatter, body)
    assert rendered.startswith(b"---\n")
    assert parse_document(rendered) == (frontmatter, body)


def test_render_is_byte_stable_on_a_second_pass() -> None:
    once = render_document(*parse_document(EXAMPLE))
    assert render_document(*parse_document(once)) == once


def test_unknown_keys_survive_in_their_order() -> None:
    frontmatter = {"zeta": 1, "id": "pg_1", "custom": {"b": 2, "a": 1}, "alpha": "x"}
    parsed, _ = parse_document(render_document(frontmatter, "body\n"))
    assert list(parsed) == ["zeta", "id", "custom", "alpha"]
    assert list(parsed["custom"]) == ["b", "a"]


@pytest.mark.parametrize("value", ["2026-11-29T10:14:03Z", "2026-01-01", "2026-11-29 10:14:03+02:00"])
def test_timestamps_stay_strings(value: str) -> None:
    parsed, _ = parse_document(document(f"at: {value}\n"))
    assert parsed["at"] == value
    assert parse_document(render_document(parsed, ""))[0]["at"] == value


@pytest.mark.parametrize("value", ["123", "true", "null", "yes", "0x10", "1_000", "~", "- item", "a: b", "#x", "---"])
def test_strings_that_look_like_other_scalars_round_trip_as_strings(value: str) -> None:
    assert parse_document(render_document({"k": value}, ""))[0] == {"k": value}


def test_body_gets_a_final_newline_and_may_hold_delimiters() -> None:
    rendered = render_document({"a": 1}, "first\n---\nafter")
    assert rendered.endswith(b"after\n")
    assert parse_document(rendered)[1] == "first\n---\nafter\n"


def test_empty_body_renders_nothing_after_the_block() -> None:
    assert render_document({"a": 1}, "").endswith(b"---\n")
    assert parse_document(render_document({"a": 1}, ""))[1] == ""


def test_leading_byte_order_mark_and_crlf_delimiters_are_accepted() -> None:
    frontmatter, body = parse_document("\ufeff---\r\na: 1\r\n---\r\nbody".encode("utf-8"))
    assert frontmatter == {"a": 1}
    assert body == "body"


def test_split_document_returns_the_yaml_and_the_body() -> None:
    assert split_document("---\na: 1\n---\nbody\n") == ("a: 1\n", "body\n")


# --- malformed input: each a clear error, naming the line ------------------------


def raises_syntax(data: bytes) -> DocumentSyntaxError:
    with pytest.raises(DocumentSyntaxError) as caught:
        parse_document(data)
    return caught.value


def test_malformed_yaml_names_the_file_line() -> None:
    error = raises_syntax(document("a: 1\nb: [unclosed\nc: 2\n"))
    assert "not valid YAML" in error.message
    assert error.details["line"] == 4  # where the parser gave up: "c: 2"
    assert error.reason == "invalid_params"


def test_duplicate_key_names_its_line() -> None:
    error = raises_syntax(document("a: 1\nb: 2\na: 3\n"))
    assert "duplicate key 'a'" in error.message
    assert error.details["line"] == 4


def test_duplicate_key_in_a_nested_mapping_is_rejected() -> None:
    error = raises_syntax(document("outer:\n  x: 1\n  x: 2\n"))
    assert "duplicate key" in error.message
    assert error.details["line"] == 4


@pytest.mark.parametrize("key", ["1", "true", "null", "[a, b]", "{a: 1}"])
def test_non_string_keys_are_rejected(key: str) -> None:
    error = raises_syntax(document(f"ok: 1\n? {key}\n: value\n"))
    assert "non-string key" in error.message
    assert error.details["line"] == 3


def test_anchors_and_aliases_are_rejected() -> None:
    error = raises_syntax(document("a: &x 1\nb: *x\n"))
    assert "anchors and aliases" in error.message
    assert error.details["line"] == 2


def test_billion_laughs_is_rejected_before_expansion() -> None:
    lines = ['l0: &l0 "lol"']
    for level in range(1, 10):
        previous = f"*l{level - 1}"
        lines.append(f"l{level}: &l{level} [{', '.join([previous] * 10)}]")
    error = raises_syntax(document("\n".join(lines) + "\n"))
    assert "anchors and aliases" in error.message


def test_an_alias_alone_is_rejected() -> None:
    assert "anchors and aliases" in raises_syntax(document("a: 1\nb: *missing\n")).message


def test_nesting_of_exactly_the_limit_is_fine() -> None:
    # The mapping itself is level 1, so MAX_NESTING - 1 lists reach the limit.
    frontmatter, _ = parse_document(document(f"a: {nested_lists(MAX_NESTING - 1)}\n"))
    lists, value = 0, frontmatter["a"]
    while isinstance(value, list):
        lists, value = lists + 1, value[0] if value else None
    assert lists + 1 == MAX_NESTING


def test_nesting_deeper_than_the_limit_is_refused_with_its_line() -> None:
    with pytest.raises(LimitExceeded) as caught:
        parse_document(document(f"ok: 1\na: {nested_lists(MAX_NESTING)}\n"))
    assert caught.value.details["limit"] == MAX_NESTING
    assert caught.value.details["line"] == 3


def test_nesting_limit_holds_for_block_style_mappings() -> None:
    text = "".join("  " * level + f"k{level}:\n" for level in range(MAX_NESTING)) + "  " * MAX_NESTING + "v: 1\n"
    with pytest.raises(LimitExceeded):
        parse_document(document(text))


def test_very_deep_nesting_is_a_limit_not_a_crash() -> None:
    with pytest.raises(LimitExceeded):
        parse_document(document(f"a: {nested_lists(100_000)}\n"))


def test_unclosed_block_is_rejected() -> None:
    error = raises_syntax(b"---\na: 1\nbody without a closing delimiter\n")
    assert "not closed" in error.message
    assert error.details["line"] == 1


@pytest.mark.parametrize("data", [b"a: 1\n---\nbody\n", b"", b"body only\n", b" ---\na: 1\n---\n", b"----\na: 1\n---\n"])
def test_missing_opening_delimiter_is_rejected(data: bytes) -> None:
    error = raises_syntax(data)
    assert "does not start with a '---'" in error.message
    assert error.details["line"] == 1


@pytest.mark.parametrize("yaml_text", ["", "- a\n- b\n", "just a string\n", "42\n"])
def test_frontmatter_must_be_a_mapping(yaml_text: str) -> None:
    error = raises_syntax(document(yaml_text))
    assert "must be a mapping" in error.message


def test_invalid_utf8_names_the_byte() -> None:
    error = raises_syntax(b"---\na: \xff\n---\n")
    assert "not valid UTF-8" in error.message
    assert "byte 7" in error.message


def test_nul_character_is_rejected() -> None:
    assert "NUL" in raises_syntax(b"---\na: 1\n---\nbody\x00\n").message


def test_control_characters_in_yaml_are_rejected() -> None:
    assert "not valid YAML" in raises_syntax(document("a: \x01\n")).message


def test_multiple_yaml_documents_in_the_block_are_rejected() -> None:
    error = raises_syntax(document("a: 1\n...\n--- \nb: 2\n"))
    assert "another document" in error.message
    assert error.details["line"] == 4


@pytest.mark.parametrize(
    "tagged",
    ["!!binary aGVsbG8=", "!!set {a, b}", "!!timestamp 2026-01-01", "!!omap [a: 1]", "!!python/name:os.system"],
)
def test_explicit_tags_cannot_produce_non_json_values(tagged: str) -> None:
    # The module promises JSON-compatible values and string timestamps only.
    with pytest.raises(DocumentSyntaxError):
        parse_document(document(f"a: {tagged}\n"))


# --- size limit ------------------------------------------------------------------


def test_parse_accepts_a_record_of_exactly_the_limit() -> None:
    head = b"---\na: 1\n---\n"
    frontmatter, body = parse_document(head + b"x" * (RECORD_MAX_BYTES - len(head)))
    assert frontmatter == {"a": 1}
    assert len(body) == RECORD_MAX_BYTES - len(head)


def test_parse_refuses_a_record_over_the_limit() -> None:
    with pytest.raises(LimitExceeded) as caught:
        parse_document(b"---\na: 1\n---\n" + b"x" * RECORD_MAX_BYTES)
    assert caught.value.details["limit"] == RECORD_MAX_BYTES
    assert caught.value.details["size"] > RECORD_MAX_BYTES


def test_render_refuses_a_record_over_the_limit_counting_utf8_bytes() -> None:
    # 2,000,000 two-byte characters are 4,000,000 bytes: fine; 2,500,000 are not.
    assert len(render_document({"a": 1}, "é" * 2_000_000)) < RECORD_MAX_BYTES
    with pytest.raises(LimitExceeded) as caught:
        render_document({"a": 1}, "é" * 2_500_000)
    assert caught.value.details["size"] > RECORD_MAX_BYTES


# --- load_yaml (shared with the ontology and descriptors) -------------------------


def test_load_yaml_uses_the_caller_name_and_offset() -> None:
    with pytest.raises(DocumentSyntaxError) as caught:
        load_yaml("a: 1\na: 2\n", what="ontology", line_offset=10)
    assert caught.value.message.startswith("ontology has")
    assert caught.value.details["line"] == 12


def test_load_yaml_respects_a_custom_nesting_limit() -> None:
    assert load_yaml("a: [[1]]\n", max_nesting=3) == {"a": [[1]]}
    with pytest.raises(LimitExceeded):
        load_yaml("a: [[[1]]]\n", max_nesting=3)


# --- properties ------------------------------------------------------------------

_scalars = st.one_of(st.none(), st.booleans(), st.integers(INT_MIN, INT_MAX), st.text(max_size=40))
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)),
    max_leaves=25,
)
_bodies = st.text(max_size=80).map(lambda text: text.replace("\x00", "")).map(
    lambda text: text if not text or text.endswith("\n") else text + "\n"
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=12), _values, max_size=8), _bodies)
def test_any_json_like_frontmatter_round_trips(frontmatter: dict, body: str) -> None:
    rendered = render_document(frontmatter, body)
    parsed, parsed_body = parse_document(rendered)
    assert parsed == frontmatter
    assert json.loads(json.dumps(parsed)) == parsed  # nothing non-JSON sneaks in
    assert parsed_body == body


def test_what_rendering_reads_back_keeps_delimiter_lines_in_values_and_body_apart() -> None:
    value = "a\n---\nb"
    data, read = render_and_read({"title": value, "aliases": [value, "---"], "fields": {"x": "---"}},
                                 "---\nbody\n---")
    assert read == parse_document(data) == ({"title": value, "aliases": [value, "---"], "fields": {"x": "---"}},
                                            "---\nbody\n---\n")


def pyyaml_dump(document: dict) -> str:
    """``dump_yaml``'s text as PyYAML alone writes it."""
    return yaml.dump(document, Dumper=frontmatter._Dumper, sort_keys=False, allow_unicode=True,
                     default_flow_style=None, width=100)


_tricky_words = st.sampled_from([
    "yes", "No", "on", "OFF", "null", "Null", "~", "true", "1.5", "1_000", "0x1f", "0o7", "017", "1:30", "1e5",
    ".5", "-", "-1", "+1", "2026-01-05T09:00:00Z", "2026-01-05", "=", "<<", "a: b", "a #b", "a:b", "a:", "it's",
    "x,y", "q?", "", " a", "a ", "a  b", "\u00e9t\u00e9", "---", "...", "a\nb", "'q'", "[a]", "{a}", "!x", "&a", "*a",
])
_flat_texts = st.one_of(_tricky_words, st.text(alphabet="ab1_ .,'()/!?&+-:#~\u00e9", max_size=30),
                        st.text(alphabet="a1 [],:#-?'\"{}*&!|>%@`\t", max_size=20),
                        st.text(alphabet="ab :", min_size=55, max_size=110))
_flat_scalars = st.one_of(_flat_texts, st.integers(), st.booleans(), st.none(), st.floats(allow_nan=False))
_flat_values = st.one_of(
    _flat_scalars, st.lists(_flat_scalars, max_size=6),
    st.dictionaries(st.one_of(_flat_texts, st.sampled_from(["agent", "on", "null", "k_1"])), _flat_scalars, max_size=4),
    st.lists(st.lists(_flat_scalars, max_size=2), max_size=2),
    st.lists(st.dictionaries(st.sampled_from(["source", "lines", "quote", "on"]),
                             st.one_of(_flat_scalars, st.lists(_flat_scalars, max_size=2),
                                       st.lists(st.dictionaries(st.just("a"), _flat_scalars), max_size=1)),
                             max_size=3), max_size=3),
)
_flat_keys = st.one_of(st.sampled_from(["format", "id", "title", "yes", "on", "null", "_x", "a1", "Key", "x" * 70]),
                       st.text(alphabet="ab_1: ", min_size=1, max_size=8))


# Mostly what the short way takes, so that it is taken often: plain words, numbers and words the resolvers claim.
_usual_texts = st.one_of(st.from_regex(r"[a-z0-9][a-z0-9_.:']{0,6}( [a-z0-9.]{1,5}){0,3}", fullmatch=True),
                         st.sampled_from(["yes", "null", "1.5", "1:30", "2026-01-05T09:00:00Z", "it's", "a:b"]))
_usual_scalars = st.one_of(_usual_texts, st.integers(), st.booleans(), st.none())
_usual_values = st.one_of(
    _usual_scalars, st.lists(_usual_scalars, max_size=4),
    st.dictionaries(st.sampled_from(["agent", "audience", "on"]), _usual_scalars, max_size=3),
    st.lists(st.dictionaries(st.sampled_from(["source", "lines", "quote"]),
                             st.one_of(_usual_scalars, st.lists(_usual_scalars, max_size=2)), max_size=3), max_size=2),
)
_usual_documents = st.dictionaries(st.sampled_from(["format", "id", "title", "tags", "on", "evidence", "a1"]),
                                   _usual_values, max_size=7)


@settings(max_examples=400)
@given(st.one_of(st.dictionaries(_flat_keys, _flat_values, max_size=8), _usual_documents))
def test_flat_frontmatter_is_written_byte_for_byte_as_pyyaml_writes_it(document: dict) -> None:
    written = frontmatter._flat_yaml(document)
    assert written is None or written == pyyaml_dump(document)


def test_the_frontmatter_the_engine_writes_is_written_without_pyyaml() -> None:
    """Generated notes, a page with every flat kind of value and a source descriptor take the short way."""
    documents = [parse_document(render_record(record))[0] for record in generate_records(50)]
    documents.append({"format": "knowledge-record-v1", "id": "pg_1", "revision": 3, "kind": "page",
                      "title": "Q3 plan (draft), v2.1:final, it's done/ish", "recorded_at": "2026-12-04T19:56:31Z",
                      "aliases": ["Q3", "yes", "1.5"], "tags": [], "fixture": False, "none": None,
                      "attribution": {"agent": "main", "audience": "owner-private"}, "fields": {}})
    documents.append({"format": "knowledge-record-v1", "id": "cl_1", "kind": "claim", "title": "The review moved.",
                      "attribution": {"agent": "main"}, "evidence": [
                          {"source": "src_1", "lines": [1, 1], "quote": "review moved to week 5"},
                          {"source": "src_2"}]})
    documents.append({"format": "knowledge-record-v1", "id": "rl_1", "kind": "relationship", "title": "A related to B",
                      "attribution": {"agent": "main"}, "evidence": [
                          {"source": "src_1", "lines": [5, 5], "quote": "[[Note 12]]"},
                          {"source": "src_1", "lines": [7, 7], "quote": "See [[B|the b]], [[C#Part]]: done #tag"}]})
    with mock.patch.object(yaml, "dump", side_effect=AssertionError("written by PyYAML")):
        written = [dump_yaml(document) for document in documents]
    assert written == [pyyaml_dump(document) for document in documents]


def typed(value: Any) -> Any:
    """``value`` with every scalar's type beside it: True == 1 in Python, not in a record."""
    if isinstance(value, dict):
        return {key: typed(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [typed(item) for item in value]
    return (type(value).__name__, value)


@settings(max_examples=300)
@given(st.one_of(st.dictionaries(st.text(max_size=12), _values, max_size=8), _usual_documents), _bodies)
def test_what_rendering_reads_back_is_what_parsing_its_bytes_gives(frontmatter: dict, body: str) -> None:
    """A publication catalogues the read it kept from rendering instead of parsing the bytes again."""
    try:
        data, read = render_and_read(frontmatter, body)
    except KnowledgeError:
        with pytest.raises(KnowledgeError):
            render_document(frontmatter, body)
        return
    assert data == render_document(frontmatter, body)
    assert typed(read) == typed(parse_document(data))


_yamlish = st.lists(
    st.sampled_from(list("ab:-[]{}&*!?|>'\"#%@`, \n\t\\019.~<") + ["---", "...", "!!binary ", "!!set ", "\x85", "\ufeff"]),
    max_size=60,
).map(lambda parts: ("---\n" + "".join(parts) + "\n---\n").encode("utf-8"))


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=300), _yamlish))
def test_arbitrary_bytes_raise_only_engine_errors(data: bytes) -> None:
    try:
        frontmatter, body = parse_document(data)
    except KnowledgeError:
        return
    assert isinstance(frontmatter, dict)
    assert all(isinstance(key, str) for key in frontmatter)
    assert isinstance(body, str)


# --- the one-pass readers read what the full loader reads ------------------------------------------
#
# ``load_yaml`` reads flat frontmatter without libyaml and other documents in one pass over its events; the
# full loader (every event checked, then ``yaml.load``) is what it falls back to.  Whatever the text, the
# outcome must be the full loader's: the same value, of the same types, or the same error.

# Scalars whose type, or whose reading at all, turns on YAML's rules: resolvers, indicators, comments,
# quotes, line breaks libyaml knows and Python does not, limits.
TRICKY = [
    "yes", "No", "on", "OFF", "~", "null", "Null", "0x1F", "0o17", "017", "1_000", "1:30", "190:20:30", "1.5",
    ".inf", ".NaN", "-1", "+1", "1e3", "1.0e+3", "<<", "=", "true", "True", "y", "n", "2026-01-05",
    "2026-01-05T09:00:00Z", "12:30:45.5", "9" * 30, "0b101", "_1", "1__0", "a", "abc def", "0", "00", "-", "--",
    "---", "...", "a:b", "a: b", "a:", "a #b", "a#b", "'q'", "'it''s'", "'a' b", '"dq"', "'", "''", "a'b", "[a]",
    "{a: b}", "[]", "{}", "&x a", "*x", "!x a", "!!str 1", "|", ">", "%", "@", "`", "?", "? a", "a?b", "a,b",
    "a, b", "a]", "a}", "é", "中文", "\xa0x", "x\xa0", "a\u2028b", "a\x85b", "\ufeffa", "a\tb", "a\x7fb", "a\x01b",
    "\\", "a  b", "a ", " a", "1 2", "0.", "-.5", "+.5e1", "685.230_15e+03", "0xFFFFFFFFFFFFFFFFFF",
    "9223372036854775807", "9223372036854775808", "7", "-7", "+7", "07", "123456789012345678", "1234567890123456789", "-9223372036854775809", "1e400", ":", "::", "a::b", "a:b:",
    "http://x.y/z?q=1", "C#", "a!", "a&b", "a*b", "a|b", "-a", "?a", ":a", "\U0001F600", "x" * 1030,
]
SHAPES = ["k: {}", "k: [{}]", "k: [a, {}]", "k: {{x: {}}}", "{}: v", "k: '{}'", "a: 1\nk: {}\nb: [c]",
          "k: {}\nk: again"]


def outcome(text: str) -> tuple[Any, ...]:
    try:
        return ("value", typed(load_yaml(text, line_offset=1)))
    except (DocumentSyntaxError, LimitExceeded) as exc:
        return ("error", type(exc).__name__, exc.message, exc.details)


def typed(value: Any) -> Any:
    """``value`` with every scalar's type beside it (True == 1 == 1.0 in Python)."""
    if isinstance(value, dict):
        return [(typed(key), typed(item)) for key, item in value.items()]
    if isinstance(value, list):
        return [typed(item) for item in value]
    return (type(value).__name__, value)


def full_loader_outcome(text: str) -> tuple[Any, ...]:
    with mock.patch.object(frontmatter._FlatReader, "read", side_effect=frontmatter._Unusual), \
            mock.patch.object(frontmatter, "_read_once", side_effect=frontmatter._Unusual):
        return outcome(text)


@pytest.mark.parametrize("loader", ["libyaml", "python"])
@pytest.mark.parametrize("shape", SHAPES)
def test_tricky_scalars_read_as_the_full_loader_reads_them(loader: str, shape: str) -> None:
    with yaml_loader(loader):
        for scalar in TRICKY:
            text = shape.format(scalar) + "\n"
            assert outcome(text) == full_loader_outcome(text), text


_pieces = st.lists(st.sampled_from(
    ["k", "a", "on", "1", "x y", ": ", ":", ", ", ",", "[", "]", "{", "}", "'", "''", "#", " ", "-", "?", "&a",
     "*a", "!!str ", "\n", "\n", "\n  ", "é", "\u2028", "\t", "~", "null", "0x1", "1:2", "2026-01-05T09:00:00Z"]),
    max_size=30).map("".join)
_flatish = st.lists(st.tuples(st.sampled_from(["k", "id", "on", "a_b", "k"]), _pieces), max_size=5).map(
    lambda pairs: "".join(f"{key}: {value}\n" for key, value in pairs))


@settings(max_examples=400, deadline=None)
@given(st.one_of(_pieces, _flatish))
def test_any_text_reads_as_the_full_loader_reads_it(text: str) -> None:
    assert outcome(text) == full_loader_outcome(text)


def test_frontmatter_the_engine_writes_is_read_without_libyaml() -> None:
    """Generated notes and a page with every flat kind of value: none needs the event reader."""
    fields = {"format": "knowledge-record-v1", "id": "pg_1", "revision": 3, "title": "It's: a title, really",
              "aliases": ["Ça va", "x, y", "50%"], "tags": [], "fixture": False, "score": 1.5, "none": None,
              "attribution": {"agent": "main", "audience": "owner-private"}, "empty": {}}
    texts = [split_document(render_record(record).decode())[0] for record in generate_records(50)]
    texts.append(split_document(render_document(fields, "").decode())[0])
    with mock.patch.object(frontmatter, "_read_once", side_effect=AssertionError("read by libyaml")):
        loaded = [load_yaml(text, line_offset=1) for text in texts]
    assert loaded[-1] == fields
    assert [typed(value) for value in loaded] == [typed(yaml.load(text, Loader=frontmatter._Loader)) for text in texts]


# Documents around the flat reader's edge: each either is read as the full loader reads it, or left to it.
EDGES = [
    "k: 'it''s: # not a comment'\n", "k: ''\n", "k: a: b\n", "k: a:b\n", "k: http://x.y/z?q=1\n", "k: a::b\n",
    "k: a#b\n", "k: a #b\n", "k: C#\n", "k: \"dq\"\n", "k: 1.5\n", "k: 0x1F\n", "k: 2026-01-05\n", "k: yes\n",
    "k: ~\n", "k: Null\n", "k: 007\n", "k: 12:30\n", "k: [1, 007, 'a, b', yes, x y]\n", "k: {a: 1, b: null}\n",
    "k: {a: 1, on: b}\n",
    "k: |\n  one\n  two\n", "k: >\n  one\n  two\n", "k: one\n  two\n", "k: 'one\n  two'\n", "k: &a x\nj: *a\n",
    "k: !!str 1\n", "k:\tv\n", "k: a\tb\n", "\ufeffk: v\n", "k: v\r\nj: w\r\n", "# note\nk: v\n", "k: v # note\n",
    " k: v\n", "k: v\n\nj: w\n", "k: v", "k: v\nk: w\n", "k:\n", "k:\n  j: v\n", "k:\n- a\n- b\n",
    "evidence:\n- {source: src_1, lines: [1, 2]}\n", "evidence:\n- source: src_1\n  lines: [1, 2]\n",
    "k: v\n---\nj: w\n", "k: v\n...\n", "on: v\n", "y: v\n", "k: a  b\n", "k: é ü\n", "k: a\u2028b\n", "k: a\xa0b\n",
]
# What the flat reader must leave: line breaks, indentation, comments, tags, anchors, tabs, a BOM or CR, more
# than one document, a key a resolver claims, a key given twice.
LEFT = [
    "k: |\n  one\n  two\n", "k: >\n  one\n  two\n", "k: one\n  two\n", "k: 'one\n  two'\n", "k: &a x\nj: *a\n",
    "k: !!str 1\n", "k:\tv\n", "k: a\tb\n", "\ufeffk: v\n", "k: v\r\nj: w\r\n", "# note\nk: v\n", "k: v # note\n",
    " k: v\n", "k: v\n\nj: w\n", "k: v", "k: v\nk: w\n", "k:\n", "k:\n  j: v\n", "k:\n- a\n- b\n",
    "k: v\n---\nj: w\n", "k: v\n...\n", "on: v\n", "k: a\u2028b\n",
]


def flat_outcome(text: str) -> tuple[Any, ...] | None:
    """What the flat reader reads from ``text`` (as ``outcome`` gives it), or None where it leaves the text."""
    try:
        return ("value", typed(frontmatter._FlatReader().read(text)))
    except frontmatter._Unusual:
        return None


@pytest.mark.parametrize("loader", ["libyaml", "python"])
def test_the_flat_reader_reads_as_the_full_loader_or_leaves_the_text_to_it(loader: str) -> None:
    texts = [shape.format(scalar) + "\n" for shape in SHAPES for scalar in TRICKY] + EDGES
    with yaml_loader(loader):
        read = {text: flat_outcome(text) for text in texts}
        for text, value in read.items():
            assert value is None or value == full_loader_outcome(text), text
    assert [text for text in LEFT if read[text] is not None] == []
    assert read["k: 'it''s: # not a comment'\n"] == ("value", [(("str", "k"), ("str", "it's: # not a comment"))])
    assert read["k: [1, 007, 'a, b', yes, x y]\n"] == (
        "value", [(("str", "k"), [("int", 1), ("int", 7), ("str", "a, b"), ("bool", True), ("str", "x y")])])
    assert None not in (read["k: a:b\n"], read["k: 2026-01-05\n"], read["k: {a: 1, b: null}\n"], read["k: é ü\n"])


@settings(max_examples=400, deadline=None)
@given(st.one_of(_pieces, _flatish))
def test_any_text_the_flat_reader_reads_it_reads_as_the_full_loader(text: str) -> None:
    value = flat_outcome(text)
    assert value is None or value == full_loader_outcome(text)


def test_the_flat_reader_reads_every_frontmatter_the_engine_writes_flat() -> None:
    fields = {"format": "knowledge-record-v1", "id": "pg_1", "revision": 3, "title": "It's: a title, really",
              "aliases": ["Ça va", "x, y", "50%"], "tags": [], "fixture": False, "score": 1.5, "none": None,
              "attribution": {"agent": "main", "audience": "owner-private"}, "empty": {}, "link": "[[Note 12]]"}
    texts = [split_document(render_record(record).decode())[0] for record in generate_records(50)]
    texts.append(dump_yaml(fields))
    assert [flat_outcome(text) for text in texts] == [full_loader_outcome(text) for text in texts]


@pytest.mark.parametrize("loader", ["libyaml", "python"])
def test_a_first_characters_claim_matches_what_its_resolvers_match(loader: str) -> None:
    words = TRICKY + ["yes", "Yes", "YES", "no", "NO", "n", "Y", "true", "FALSE", "on", "On", "off", "OFF", "null",
                      "NULL", "~", "", "<<", "=", "!", "&", "*", "1_0", "+.inf", "-.Inf", ".nan", "1:2:3.5"]
    with yaml_loader(loader):
        resolvers, claims = frontmatter._Loader.yaml_implicit_resolvers, frontmatter._Loader.claims
        for word in words:
            first = word[:1]
            claimed = first in claims and claims[first].match(word) is not None
            assert claimed == any(regexp.match(word) for _, regexp in resolvers.get(first, ())), word


def reference_split(text: str) -> tuple[str, str]:
    """``split_document`` as it was first written: every line looked at."""
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.split("\n")
    if lines[0].rstrip("\r") != "---":
        raise DocumentSyntaxError("document does not start with a '---' frontmatter block", line=1)
    for index in range(1, len(lines)):
        if lines[index].rstrip("\r") == "---":
            return "\n".join(lines[1:index]) + "\n", "\n".join(lines[index + 1:])
    raise DocumentSyntaxError("frontmatter block is not closed with '---'", line=1)


def split_outcome(split: Any, text: str) -> Any:
    try:
        return split(text)
    except DocumentSyntaxError as exc:
        return exc.message


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(["---", "--", "-", "\n", "\r", "\ufeff", " ", "a", "x: 1", "----"]), max_size=14))
def test_split_document_splits_as_a_line_by_line_split(pieces: list[str]) -> None:
    text = "".join(pieces)
    assert split_outcome(split_document, text) == split_outcome(reference_split, text)
