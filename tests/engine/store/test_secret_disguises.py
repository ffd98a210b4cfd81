"""A credential disguised by an encoding is refused as if written plainly: the check reads what will be
stored as it decodes (escapes, entities, NFKC, invisible characters, look-alike letters, base64, a key
split between two fields, UTF-16, gzip and zip attachments), and what is stored is never changed."""

from __future__ import annotations

import base64
import gzip
import io
import json
import sys
import unicodedata
import zipfile
from typing import Any

import pytest

from engine.access.authority import AgentCaller
from engine.core.errors import SecretDetected
from engine.service import Engine
from engine.store import attached_text, disguises
from engine.store.attachments import attach
from engine.store.credentials import CHUNK_CHARS, decoded_for_scan, find_secret, refuse_secrets, texts_of
from tests.engine.store.test_secrets import CREDENTIALS, ORDINARY, SECRET, SECRET_KIND, publications, state_bytes
from tests.helpers import only_store, vault_snapshot

KEY = SECRET  # an AWS access key id: AKIA and sixteen capitals and digits


def fullwidth(text: str) -> str:
    return "".join(chr(ord(ch) + 0xFEE0) if ch.isalnum() else ch for ch in text)


def json_escaped(text: str) -> str:
    return "".join(f"\\u{ord(ch):04x}" for ch in text)


def refused_write(engine: Engine, owner: AgentCaller, params: dict[str, Any]) -> SecretDetected:
    """Save a page with ``params``; it must be refused and leave the store as it was."""
    before, count = vault_snapshot(only_store(engine.state) / "vault"), publications(engine, owner)
    with pytest.raises(SecretDetected) as raised:
        engine.save_page(owner, {"requestId": "leak", "type": "note", "title": "Atlas notes", "body": "Plain.",
                                 **params})
    assert vault_snapshot(only_store(engine.state) / "vault") == before
    assert publications(engine, owner) == count
    error = raised.value
    assert error.reason == "secret_detected" and KEY not in json.dumps(error.to_dict())
    return error


@pytest.fixture
def ready(engine: Engine, owner: AgentCaller) -> AgentCaller:
    engine.save_page(owner, {"requestId": "first", "type": "note", "title": "First", "body": "A store exists."})
    return owner


# --- one test per disguise ------------------------------------------------------------------------------


def test_json_escapes_are_decoded(engine, ready):
    assert find_secret("the id is " + json_escaped(KEY[:4]) + KEY[4:], undisguise=False) is None
    error = refused_write(engine, ready, {"body": "Line one.\nthe id is \\u0041" + KEY[1:]})
    assert (error.details["field"], error.details["kind"], error.details["line"]) == ("body", SECRET_KIND, 2)
    assert find_secret(json.dumps({"k": KEY}, ensure_ascii=True).replace(KEY, json_escaped(KEY))) is not None
    assert find_secret("double: " + json_escaped(KEY).replace("\\", "\\\\")) is not None  # JSON inside JSON


def test_the_line_of_a_disguised_secret_is_reported_even_past_the_first_piece():
    filler = "Ordinary line about the Atlas migration.\n" * (CHUNK_CHARS // 40 + 100)
    text = filler + "second line\nthe id is \\u0041" + KEY[1:] + "\n"
    assert find_secret(text) == (SECRET_KIND, filler.count("\n") + 2)


def test_html_entities_are_decoded(engine, ready):
    error = refused_write(engine, ready, {"body": "<p>the id is &#65;" + KEY[1:] + "</p>"})
    assert error.details["kind"] == SECRET_KIND
    assert find_secret(KEY[:2] + "&#x49;" + KEY[3:]) is not None
    assert find_secret("".join(f"&#{ord(ch)};" for ch in KEY)) is not None


def test_fullwidth_letters_are_read_as_nfkc_turns_them(engine, ready):
    error = refused_write(engine, ready, {"title": "Keys " + fullwidth(KEY)})
    assert (error.details["field"], error.details["kind"]) == ("title", SECRET_KIND)


@pytest.mark.parametrize("invisible", ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u180e",
                                       "\u034f", "\U000e0041"])
def test_an_invisible_character_inside_a_key_is_removed_for_the_check(engine, ready, invisible):
    text = "the id is " + KEY[:4] + invisible + KEY[4:12] + invisible + KEY[12:]
    assert find_secret(text, undisguise=False) is None
    error = refused_write(engine, ready, {"aliases": ["atlas", text]})
    assert (error.details["field"], error.details["kind"]) == ("aliases[1]", SECRET_KIND)


def test_a_control_character_inside_a_key_in_an_attachment_is_removed_for_the_check():
    # a write's fields refuse control characters (InvalidParams) before any scan; an attached file keeps them
    assert find_secret(decoded_for_scan(f"id {KEY[:8]}\x07{KEY[8:]}\n".encode())) == (SECRET_KIND, 1)


def test_every_format_character_counts_as_invisible():
    format_characters = [chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Cf"]
    assert [hex(ord(ch)) for ch in format_characters if not disguises.INVISIBLE.fullmatch(ch)] == []


def test_look_alike_letters_of_other_scripts_are_folded(engine, ready):
    cyrillic = KEY.replace("A", "\u0410").replace("K", "\u041a")  # CYRILLIC CAPITAL A and KA
    assert cyrillic != KEY and find_secret(cyrillic, undisguise=False) is None
    error = refused_write(engine, ready, {"body": f"the id is {cyrillic}"})
    assert error.details["kind"] == SECRET_KIND
    greek = "the id is \u0391\u039a\u0399\u0391" + KEY[4:]  # GREEK CAPITAL ALPHA, KAPPA, IOTA, ALPHA
    assert find_secret(greek) == (SECRET_KIND, 1)
    token, kind = CREDENTIALS["GitHub classic token"]
    assert find_secret(token.replace("ghp_", "gh\u0440_"))[0] == kind  # CYRILLIC SMALL ER for p


def test_a_key_split_between_two_fields_of_one_write_is_refused(engine, ready):
    error = refused_write(engine, ready, {"title": f"Atlas {KEY[:9]}", "body": f"{KEY[9:]} opens the bucket."})
    assert (error.details["field"], error.details["kind"]) == ("title", SECRET_KIND)
    assert "title and body" in error.message
    # title and body read one after the other wherever the body is in the parameters
    with pytest.raises(SecretDetected):
        refuse_secrets([("title", KEY[:9]), ("type", "note"), ("tags[0]", "atlas"), ("body", KEY[9:])], allowed=False)
    with pytest.raises(SecretDetected) as raised:  # two tags one after the other
        refuse_secrets(texts_of({"tags": [KEY[:12], KEY[12:]]}), allowed=False)
    assert raised.value.details["field"] == "tags[0]"


def test_fields_read_on_refuse_nothing_ordinary():
    refuse_secrets([("title", "Notes on Bearer"), ("body", "Ab3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY")], allowed=False)
    refuse_secrets([(f"items[{n}].text", text) for n, text in enumerate(ORDINARY)], allowed=False)
    refuse_secrets([("title", "Atlas key rotation"), ("body", KEY[4:] + " is not a key without its prefix")],
                   allowed=False)


def test_base64_of_a_key_is_decoded(engine, ready):
    encoded = base64.b64encode(f"aws id {KEY}".encode()).decode()
    assert find_secret(encoded, undisguise=False) is None
    error = refused_write(engine, ready, {"body": f"config blob: {encoded}"})
    assert error.details["kind"] == SECRET_KIND
    assert find_secret(base64.urlsafe_b64encode(KEY.encode()).decode().rstrip("=")) is not None
    twice = base64.b64encode(base64.b64encode(KEY.encode())).decode()
    assert find_secret(twice) is not None


def test_base64_of_binary_data_ids_and_digests_is_not_text():
    assert disguises.base64_text(base64.b64encode(bytes(range(256))).decode()) is None
    assert disguises.base64_text("pg_01ACCA0123456789ABCDEFGHJK") is None
    assert disguises.base64_text("3f2c1a9e8b7d6c5f4e3d2c1b0a9f8e7d6c5b4a39") is None


def _attach(engine: Engine, caller: AgentCaller, data: bytes, name: str = "notes.bin") -> dict[str, Any]:
    return attach(engine, caller, {"requestId": f"a-{len(data)}-{name}", "filename": name,
                                   "content": base64.b64encode(data).decode()})


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be"])
def test_utf16_attachments_are_read_with_or_without_a_byte_order_mark(engine, ready, encoding):
    data = f"Config for Atlas\nthe id is {KEY}\n".encode(encoding)
    before = vault_snapshot(only_store(engine.state) / "vault")
    with pytest.raises(SecretDetected) as raised:
        _attach(engine, ready, data, "notes.txt")
    assert (raised.value.details["field"], raised.value.details["kind"]) == ("content", SECRET_KIND)
    assert vault_snapshot(only_store(engine.state) / "vault") == before
    mixed = ("\u6771\u4eac\u306e\u30e1\u30e2 " * 200 + f"id {KEY}").encode("utf-16-le")  # CJK text around it
    assert find_secret(decoded_for_scan(mixed)) is not None


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be"])
def test_utf16_without_a_byte_order_mark_is_decoded_as_utf16_not_read_by_its_ascii(encoding):
    # Cyrillic in UTF-16 is zero-free bytes that UTF-8 also accepts: only decoding it as UTF-16 finds the key
    data = ("Ключ от хранилища: " + KEY.replace("A", "\u0410") + "\n").encode(encoding)
    assert attached_text.utf16_order(data) == encoding
    assert find_secret(decoded_for_scan(data)) == (SECRET_KIND, 1)


def test_utf16_attachments_of_ordinary_text_pass(engine, ready):
    for encoding in ("utf-16", "utf-16-le", "utf-16-be"):
        _attach(engine, ready, "\n".join(ORDINARY).encode(encoding), f"ordinary-{encoding}.txt")


def _zipped(members: dict[str, bytes]) -> bytes:
    packed = io.BytesIO()
    with zipfile.ZipFile(packed, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return packed.getvalue()


def test_gzip_and_zip_attachments_are_looked_inside(engine, ready):
    text = f"deploy notes\nthe id is {KEY}\n".encode()
    for data in (gzip.compress(text), _zipped({"a.txt": b"nothing here", "notes/b.txt": text}),
                 _zipped({"inner.gz": gzip.compress(text)}), gzip.compress(text.decode().encode("utf-16"))):
        assert find_secret(decoded_for_scan(data), undisguise=False) is not None
        with pytest.raises(SecretDetected) as raised:
            _attach(engine, ready, data)
        assert raised.value.details["kind"] == SECRET_KIND
    assert SECRET.encode() not in state_bytes(engine)
    _attach(engine, ready, gzip.compress("\n".join(ORDINARY).encode()), "ordinary.gz")


def test_past_the_bounds_an_archive_is_not_looked_inside_and_that_is_no_error(monkeypatch):
    text = f"the id is {KEY}\n".encode()
    monkeypatch.setattr(attached_text, "MEMBERS_MAX", 3)
    late = _zipped({**{f"{n}.txt": b"plain" for n in range(3)}, "late.txt": text})
    assert find_secret(decoded_for_scan(late)) is None
    assert find_secret(decoded_for_scan(_zipped({"early.txt": text, "x.txt": b"plain"}))) is not None
    monkeypatch.setattr(attached_text, "DECOMPRESSED_MAX_BYTES", 1000)
    padded = gzip.compress(b"x" * 2000 + b"\n" + text)
    assert find_secret(decoded_for_scan(padded)) is None
    nested = gzip.compress(gzip.compress(gzip.compress(text)))  # three deep: past NESTING_MAX
    assert find_secret(decoded_for_scan(nested)) is None
    assert decoded_for_scan(b"PK\x03\x04 damaged") is not None and decoded_for_scan(b"\x1f\x8b bad") is not None


# --- what is left alone ---------------------------------------------------------------------------------

OTHER_SCRIPTS = [
    "Встреча с командой Atlas перенесена на пятницу, ключ хранится в 1Password.",
    "Η συνάντηση για το Atlas είναι την Παρασκευή· ΑΚΙΑ είναι μόνο το πρόθεμα.",
    "東京のメモ：Atlas の移行は金曜日です。鍵は保管庫にあります。",
    "Café déjà vu — naïve façade, ﬁne ligatures, ½ cup, x² and the ™ sign.",
    "Family \U0001f468\u200d\U0001f469\u200d\U0001f467 and flags \U0001f1e7\U0001f1ea, שלום and مرحبا.",
]


@pytest.mark.parametrize("text", ORDINARY + OTHER_SCRIPTS)
def test_ordinary_text_decoded_is_still_ordinary(text):
    assert find_secret(text) is None
    assert find_secret(json.dumps(text)) is None
    assert find_secret("".join(f"&#{ord(ch)};" for ch in text)) is None
    assert find_secret(base64.b64encode(text.encode()).decode()) is None


def test_what_is_stored_is_what_was_written(engine, ready):
    body = "Caf\u00e9 \u200bnotes &amp; \\u0041 \uff21\u0410"
    page = engine.save_page(ready, {"requestId": "kept", "type": "note", "title": "Kept as written", "body": body})
    assert engine.get_record(ready, page["id"])["body"].rstrip("\n") == body
