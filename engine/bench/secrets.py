"""``python -m engine.bench.secrets``: what the credential scan refuses, what it lets through, what it costs.

Three measurements, written to ``docs/benchmarks/secrets.md``, each side by side in one run: the
scan as written only (``find_secret(..., undisguise=False)``, what it was before it decoded) and the
scan as it runs (decoded too, fields read on from one to the next, attachments opened):

- false positives: every text of the LoCoMo conversations (when ``--locomo PATH`` names the
  file: turns, captions, session summaries, observations, event summaries, questions and
  answers), every paragraph of this project's docs and code (technical prose with URLs, ids,
  hashes and code), the demo store's texts, fresh record ids, sha256 digests and UUIDs (bare, quoted
  and in JSON), Knowledge references and URLs without passwords.  detect-secrets' two
  high-entropy string plugins, which the scan leaves out, are measured on the same texts for
  comparison (detect-secrets' default limits, 4.5 and 3.0 bits per character).  Beside them the
  same LoCoMo texts in the disguises the scan now decodes, as an export or a page would hold them:
  JSON with ASCII escapes, HTML-escaped, base64; consecutive LoCoMo texts as one write's title and
  body; and this project's docs as attachments in UTF-16 (with and without byte-order mark), gzip
  and zip;
- detection: one synthetic credential of each kind (``fake_credentials``: random values in the
  real formats, never real keys) must be found and named;
- cost: the best of 15 scans (as written and as it runs taken in turns) of 100 KB of prose, 100 KB
  of technical text (this project's docs and code), 1 MB of prose as an export's JSON holds it (one
  line, escapes), a 4 MB body, 1 MB of random bytes as an attachment, 1 MB of text attached
  gzipped, and a 100-item remember's texts.

The LoCoMo file is read where it lies and never copied.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import hashlib
import html
import io
import json
import random
import re
import string
import sys
import time
import uuid
import zipfile
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

from ..importers import demo
from ..core.answers import NotRequired, TypedDict
from ..core.errors import SecretDetected
from ..core.ids import CLAIM_PREFIX, PAGE_PREFIX, RELATIONSHIP_PREFIX, SOURCE_PREFIX, is_generated_id, new_id
from ..store.credentials import decoded_for_scan, find_secret, refuse_secrets
from .socket import machine
from .report_file import write_report


class CorpusRow(TypedDict):
    """One corpus: texts refused as written (``before``) and as the scan runs (``hits``, by kind); for an
    undisguised corpus, the hits of detect-secrets' entropy plugins, which the scan leaves out."""
    corpus: str
    texts: int
    before: int
    hits: int
    kinds: dict[str, int]
    entropy: NotRequired[dict[str, int]]


class SecretsReport(TypedDict):
    """False positives per corpus, each synthetic credential detected or not, the disguised ones counted
    (credentials, found as written, found as it runs), scan costs (label, characters, ms before, ms after)."""
    rows: list[CorpusRow]
    detected: dict[str, bool]
    disguised: dict[str, tuple[int, int, int]]
    costs: list[tuple[str, int, float, float]]
    locomo: bool

REPEATS = 15
ROOT = Path(__file__).resolve().parents[2]


def fake_credentials(seed: int = 13) -> dict[str, tuple[str, str]]:
    """One synthetic credential of each kind, in a sentence: name -> (text, the kind a refusal names).

    Random values in the published formats, assembled at run time so no key-shaped literal sits
    in the source.
    """
    rng = random.Random(seed)
    letters_digits = string.ascii_letters + string.digits
    url_safe = letters_digits + "-_"

    def rand(count: int, alphabet: str = letters_digits) -> str:
        return "".join(rng.choice(alphabet) for _ in range(count))

    def b64_json(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    dashes = "-" * 5
    jwt = ".".join([b64_json({"alg": "HS256", "typ": "JWT"}), b64_json({"sub": "1234567890"}), rand(43, url_safe)])
    return {
        "OpenAI project key": (f"the bot uses sk-proj-{rand(20)}{rand(60, url_safe)}{rand(4)} for now",
                               "OpenAI API key"),
        "OpenAI legacy key": (f"OPENAI_API_KEY=sk-{rand(20)}T3Blbk" + f"FJ{rand(20)}", "OpenAI API key"),
        "OpenAI plain key": (f"key: sk-{rand(48, string.ascii_lowercase + string.digits)}", "OpenAI API key"),
        "Anthropic key": (f"call it with sk-ant-api03-{rand(90, url_safe)}{rand(3)}AA", "Anthropic API key"),
        "GitHub classic token": (f"pushed with ghp_{rand(36)}", "GitHub token"),
        "GitHub fine-grained token": (f"github_pat_{rand(22)}_{rand(59)}", "GitHub token"),
        "GitLab token": (f"CI uses glpat-{rand(20)}", "GitLab token"),
        "Slack bot token": (f"xoxb-{rand(11, string.digits)}-{rand(12, string.digits)}-"
                            f"{rand(24, string.ascii_lowercase + string.digits)}", "Slack token"),
        "Slack app token": (f"xapp-1-A{rand(10, string.ascii_uppercase + string.digits)}-{rand(13, string.digits)}-"
                            f"{rand(64, '0123456789abcdef')}", "Slack token"),
        "Stripe live key": (f"charge with sk_live_{rand(24)}", "Stripe secret key"),
        "Stripe test key": (f"sk_test_{rand(40)}", "Stripe secret key"),
        "Stripe webhook secret": (f"whsec_{rand(32)}", "Stripe webhook secret"),
        "AWS access key id": (f"the id is AKIA{rand(16, string.ascii_uppercase + string.digits)}", "AWS access key"),
        "AWS secret access key": (f"aws_secret_access_key = {rand(40, letters_digits + '/+')}",
                                  "AWS secret access key"),
        "Google API key": (f"maps key AIza{rand(35, url_safe)}", "Google API key"),
        "Google OAuth token": (f"ya29.{rand(60, url_safe)}", "Google OAuth token"),
        "Azure storage key": (f"DefaultEndpointsProtocol=https;AccountName=atlas;AccountKey="
                              f"{rand(86, letters_digits + '+/')}==", "Azure storage account key"),
        "Azure shared access key": (f"Endpoint=sb://atlas.servicebus.windows.net/;SharedAccessKeyName=x;"
                                    f"SharedAccessKey={rand(43, letters_digits + '+/')}=", "Azure shared access key"),
        "RSA private key": (f"{dashes}BEGIN RSA PRIVATE KEY{dashes}\nMIIEow{rand(58, letters_digits + '+/')}\n",
                            "private key"),
        "OpenSSH private key": (f"{dashes}BEGIN OPENSSH PRIVATE KEY{dashes}\nb3BlbnNzaC1r{rand(50)}", "private key"),
        "encrypted PKCS#8 key": (f"{dashes}BEGIN ENCRYPTED PRIVATE KEY{dashes}", "private key"),
        "bearer header": (f"curl -H 'Authorization: Bearer {rand(40, url_safe)}' https://api.example.com/v1",
                          "bearer token"),
        "basic header": (f"Authorization: Basic {base64.b64encode(rand(20).encode()).decode()}",
                         "HTTP Basic credentials"),
        "JSON Web Token": (f"the session cookie is {jwt}", "JSON Web Token"),
        "password in a URL": (f"connect to postgres://atlas:{rand(12)}@db.internal:5432/orders", "password in a URL"),
        "password assignment": (f'password: "{rand(14)}"', "password or secret assignment"),
        "Hugging Face token": (f"hf_{rand(34, string.ascii_letters)}", "Hugging Face token"),
        "npm token": (f"npm_{rand(36)}", "npm token"),
        "PyPI token": (f"pypi-AgEIcHlwaS5vcmc{rand(70, url_safe)}", "PyPI token"),
        "SendGrid key": (f"SG.{rand(22, url_safe)}.{rand(43, url_safe)}", "SendGrid API key"),
        "Twilio key": (f"SK{rand(32, string.ascii_lowercase + string.digits)}", "Twilio API key"),
        "Discord bot token": (f"M{rand(23, url_safe)}.{rand(6, url_safe)}.{rand(27, url_safe)}", "Discord bot token"),
        "Telegram bot token": (f"{rand(9, string.digits)}:{rand(35, url_safe)}", "Telegram bot token"),
        "Mailchimp key": (f"{rand(32, '0123456789abcdef')}-us12", "Mailchimp API key"),
        "DigitalOcean token": (f"dop_v1_{rand(64, '0123456789abcdef')}", "DigitalOcean token"),
    }


# --- the texts ---------------------------------------------------------------------------------------


def _strings(value: Any) -> Iterator[str]:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)


def locomo_texts(path: Path) -> list[str]:
    """Every text of the LoCoMo samples a LoCoMo import or an agent could write."""
    data = json.loads(path.read_text(encoding="utf-8"))
    texts: list[str] = []
    for sample in data:
        for value in sample.get("conversation", {}).values():
            if isinstance(value, list):
                for turn in value:
                    texts.extend(turn.get(key) for key in ("text", "blip_caption", "query") if turn.get(key))
        texts.extend(sample.get("session_summary", {}).values())
        texts.extend(_strings(sample.get("observation", {})))
        texts.extend(_strings(sample.get("event_summary", {})))
        for qa in sample.get("qa", []):
            texts.extend(str(qa[key]) for key in ("question", "answer", "adversarial_answer") if key in qa)
    return [text for text in texts if isinstance(text, str)]


def corpora(locomo: Path | None, count: int = 2000) -> dict[str, list[str]]:
    rng = random.Random(7)
    ids = [new_id(prefix) for prefix in (PAGE_PREFIX, CLAIM_PREFIX, RELATIONSHIP_PREFIX, SOURCE_PREFIX)
           for _ in range(count // 4)]
    digests = [hashlib.sha256(str(n).encode()).hexdigest() for n in range(count)]
    uuids = [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(count)]
    paragraphs = [paragraph for path in sorted([*(ROOT / "docs").rglob("*.md"), ROOT / "README.md",
                                                *(ROOT / "engine").rglob("*.py"), *(ROOT / "desktop").rglob("*.py")])
                  if path != Path(__file__).resolve()  # this file assembles the synthetic credentials
                  for paragraph in path.read_text(encoding="utf-8").split("\n\n")]
    found = {
        "this project's docs and code, per paragraph": paragraphs,
        "demo store": [text for name in dir(demo) if name.isupper() for text in _strings(getattr(demo, name))],
        "record ids (bare and quoted)": ids + [f'see "{value}"' for value in ids],
        "sha256 hex (bare, quoted, JSON)": digests + [f'the file "{value}" was kept' for value in digests]
        + [json.dumps({"sha256": value, "id": ids[n % len(ids)]}) for n, value in enumerate(digests)],
        "UUIDs (canonical, hex, both quoted)": uuids + [value.replace("-", "") for value in uuids]
        + [f"session '{value}'" for value in uuids] + [f"run '{value.replace('-', '')}'" for value in uuids],
        "references": [f"knowledge://{new_id('st')}/{ids[n]}@3#sha256:{digests[n]}" for n in range(count)],
        "URLs without passwords": [
            "https://git.example/northwind/atlas", "https://example.com/a?b=c&d=e#top",
            "postgres://db.internal:5432/orders", "ssh://git@github.com/northwind/atlas.git",
            "https://dana@example.com/calendar", "http://localhost:8080/api/v1/items?page=2",
            "mailto:dana.whitaker@northwind.example", "file:///home/dana/notes/atlas.md",
        ],
    }
    if locomo is not None:
        found = {"LoCoMo (10 conversations)": locomo_texts(locomo), **found}
    return found


def disguised_corpora(texts: dict[str, list[str]]) -> dict[str, list[str]]:
    """The prose in the forms the scan decodes: what it must still let through once decoded."""
    prose = texts.get("LoCoMo (10 conversations)") or texts["demo store"]
    return {
        "LoCoMo as JSON with ASCII escapes": [json.dumps(text) for text in prose],
        "LoCoMo HTML-escaped, and with every character an entity": [html.escape(text) for text in prose[::2]]
        + ["".join(f"&#{ord(ch)};" for ch in text) for text in prose[1::2]],
        "LoCoMo in base64": [base64.b64encode(text.encode()).decode() for text in prose],
    }


def attachments() -> list[bytes]:
    """This project's docs as attachments in the forms the scan opens."""
    docs = [path.read_bytes() for path in sorted((ROOT / "docs").rglob("*.md"))]
    out = []
    for data in docs:
        text = data.decode("utf-8")
        packed = io.BytesIO()
        with zipfile.ZipFile(packed, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.writestr("notes.md", data)
        out += [text.encode("utf-16"), text.encode("utf-16-le"), gzip.compress(data), packed.getvalue()]
    return out


def split_pairs(texts: list[str]) -> list[tuple[str, str]]:
    """Consecutive texts as one write's title and body: what reading on from a field to the next must let through."""
    return list(zip(texts, texts[1:]))


def false_positives(texts: list[str], *, undisguise: bool = True) -> tuple[int, Counter[str]]:
    kinds: Counter[str] = Counter()
    for text in texts:
        found = find_secret(text, undisguise=undisguise)
        if found is not None:
            kinds[found[0]] += 1
    return sum(kinds.values()), kinds


def split_false_positives(pairs: list[tuple[str, str]]) -> tuple[int, int]:
    """Pairs refused as written only (each field alone), and by the write's check as it runs."""
    before = sum(1 for pair in pairs if any(find_secret(text, undisguise=False) for text in pair))
    after = 0
    for title, body in pairs:
        try:
            refuse_secrets([("title", title), ("body", body)], allowed=False)
        except SecretDetected:
            after += 1
    return before, after


def high_entropy_hits(texts: list[str]) -> dict[str, int]:
    """How often detect-secrets' high-entropy plugins (left out of the scan) would fire on the same texts."""
    from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString, HexHighEntropyString
    from detect_secrets.settings import transient_settings

    plugins = {"base64 (4.5)": Base64HighEntropyString(), "hex (3.0)": HexHighEntropyString()}
    config = {"plugins_used": [{"name": "Base64HighEntropyString", "limit": 4.5},
                               {"name": "HexHighEntropyString", "limit": 3.0}], "filters_used": []}
    with transient_settings(config):
        return {name: sum(1 for text in texts if plugin.analyze_line(filename="text", line=text))
                for name, plugin in plugins.items()}


# --- cost -----------------------------------------------------------------------------------------


def _best_ms(before: Callable[[], Any], after: Callable[[], Any]) -> tuple[float, float]:
    """The best of ``REPEATS`` runs of each, taken in turns, so that a busy machine weighs on both alike."""
    best = [float("inf"), float("inf")]
    for _ in range(REPEATS):
        for side, work in enumerate((before, after)):
            started = time.perf_counter()
            work()
            best[side] = min(best[side], time.perf_counter() - started)
    return best[0] * 1000, best[1] * 1000


def _sized(texts: list[str], chars: int) -> str:
    out, total = [], 0
    while total < chars:
        for text in texts:
            out.append(text)
            total += len(text) + 1
            if total >= chars:
                break
    return "\n".join(out)[:chars]


def _printable_runs(data: bytes) -> str:
    """How a binary attachment was read before compressed ones were opened: its printable ASCII runs."""
    return "\n".join(run.decode("ascii") for run in re.findall(rb"[\x20-\x7e\t]{8,}", data))


def _as_before(texts: list[tuple[str, str]]) -> None:
    """The write's check as it was: ids left out, the fields joined, scanned as written only."""
    find_secret("\n".join(text for _, text in texts if not is_generated_id(text)), undisguise=False)


def costs(prose: list[str]) -> list[tuple[str, int, float, float]]:
    """(what, characters, ms as written only, ms as the scan runs) for each measured text."""
    technical = [path.read_text(encoding="utf-8") for path in sorted((ROOT / "docs").glob("*.md"))]
    technical += [path.read_text(encoding="utf-8") for path in sorted((ROOT / "engine").glob("*.py"))]
    random_bytes = random.Random(3).randbytes(1_000_000)
    gzipped = gzip.compress(_sized(technical, 1_000_000).encode())
    items = [("items[%d].text" % n, f"Claim number {n} about the Atlas migration.") for n in range(100)]
    items += [("items[%d].excerpt" % n, f"We agreed on item {n} in the Friday call.") for n in range(100)]
    rows = [
        ("100 KB of prose", _sized(prose, 100_000)),
        ("100 KB of technical text (docs and code)", _sized(technical, 100_000)),
        ("1 MB of prose as an export's JSON holds it (one line, ASCII escapes)",
         json.dumps([{"role": "user", "text": text} for text in prose])[:1_000_000]),
        ("4 MB body (prose)", _sized(prose, 4_000_000)),
    ]
    measured = [(label, len(text), *_best_ms(lambda text=text: find_secret(text, undisguise=False),
                                             lambda text=text: find_secret(text))) for label, text in rows]
    measured.append(("1 MB of random bytes, attached", len(random_bytes),
                     *_best_ms(lambda: find_secret(_printable_runs(random_bytes), undisguise=False),
                               lambda: find_secret(decoded_for_scan(random_bytes)))))
    measured.append(("1 MB of technical text attached gzipped (before: its bytes' printable runs)", len(gzipped),
                     *_best_ms(lambda: find_secret(_printable_runs(gzipped), undisguise=False),
                               lambda: find_secret(decoded_for_scan(gzipped)))))
    measured.append(("a 100-item remember (200 short texts)", sum(len(t) for _, t in items),
                     *_best_ms(lambda: _as_before(items), lambda: refuse_secrets(items, allowed=False))))
    title = "Dana prefers Friday status notes"
    measured.append(("one title", len(title), *_best_ms(lambda: find_secret(title, undisguise=False),
                                                        lambda: find_secret(title))))
    return measured


# --- the report -------------------------------------------------------------------------------------


def disguises(text: str) -> dict[str, tuple[str, bytes | None]]:
    """A credential's sentence in each disguise the scan undoes: (text of a write, or None) or attachment bytes."""
    key = max(text.split(), key=len)  # the key itself, or the longest part of it
    at = text.index(key) + len(key) // 2
    homoglyphs = str.maketrans({"A": "\u0410", "E": "\u0415", "K": "\u041a", "o": "\u043e", "a": "\u0430"})
    packed = io.BytesIO()
    with zipfile.ZipFile(packed, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("notes/keys.txt", text)
    return {
        "JSON escapes": ("".join(f"\\u{ord(ch):04x}" for ch in text), None),
        "HTML entities": ("".join(f"&#{ord(ch)};" for ch in text), None),
        "fullwidth letters (NFKC)": ("".join(chr(ord(ch) + 0xFEE0) if ch.isalnum() else ch for ch in text), None),
        "zero-width space inside": (text[:at] + "\u200b" + text[at:], None),
        "look-alike letters (Cyrillic A, E, K, a, o)": (text.translate(homoglyphs), None),
        "base64": (base64.b64encode(text.encode()).decode(), None),
        "split between title and body": (text[:at] + "\x00" + text[at:], None),
        "UTF-16 without byte-order mark, attached": ("", text.encode("utf-16-le")),
        "gzip, attached": ("", gzip.compress(text.encode())),
        "zip member, attached": ("", packed.getvalue()),
    }


def disguised_detection() -> dict[str, tuple[int, int, int]]:
    """For each disguise: (credentials, found as written only, found by the scan as it runs)."""
    found: dict[str, list[int]] = {}
    for text, kind in fake_credentials().values():
        for name, (written, data) in disguises(text).items():
            counts = found.setdefault(name, [0, 0, 0])
            counts[0] += 1
            if data is not None:
                counts[1] += (find_secret(_printable_runs(data), undisguise=False) or ("",))[0] == kind
                counts[2] += (find_secret(decoded_for_scan(data)) or ("",))[0] == kind
            elif "\x00" in written:  # two fields of one write
                title, body = written.split("\x00")
                counts[1] += any((find_secret(t, undisguise=False) or ("",))[0] == kind for t in (title, body))
                try:
                    refuse_secrets([("title", title), ("body", body)], allowed=False)
                except SecretDetected as exc:
                    counts[2] += exc.details["kind"] == kind
            else:
                counts[1] += (find_secret(written, undisguise=False) or ("",))[0] == kind
                counts[2] += (find_secret(written) or ("",))[0] == kind
    return {name: (total, before, after) for name, (total, before, after) in found.items()}


def run(locomo: Path | None) -> SecretsReport:
    texts = corpora(locomo)
    rows: list[CorpusRow] = []
    for name, items in texts.items():
        before, _ = false_positives(items, undisguise=False)
        hits, kinds = false_positives(items)
        rows.append({"corpus": name, "texts": len(items), "before": before, "hits": hits, "kinds": dict(kinds),
                     "entropy": high_entropy_hits(items)})
    for name, items in disguised_corpora(texts).items():
        before, _ = false_positives(items, undisguise=False)
        hits, kinds = false_positives(items)
        rows.append({"corpus": name, "texts": len(items), "before": before, "hits": hits, "kinds": dict(kinds)})
    prose = texts.get("LoCoMo (10 conversations)") or texts["demo store"]
    pairs = split_pairs(prose)
    before, hits = split_false_positives(pairs)
    rows.append({"corpus": "consecutive LoCoMo texts as one write's title and body", "texts": len(pairs),
                 "before": before, "hits": hits, "kinds": {}})
    files = attachments()
    rows.append({"corpus": "this project's docs attached as UTF-16 (with and without BOM), gzip, zip",
                 "texts": len(files), "before": sum(1 for data in files if find_secret(_printable_runs(data),
                                                                                      undisguise=False)),
                 "hits": sum(1 for data in files if find_secret(decoded_for_scan(data))), "kinds": {}})
    detected = {name: (find_secret(text) or ("nothing", 0))[0] == kind
                for name, (text, kind) in fake_credentials().items()}
    return {"rows": rows, "detected": detected, "disguised": disguised_detection(), "costs": costs(prose),
            "locomo": locomo is not None}


def report(result: SecretsReport, command: str) -> str:
    lines = [
        "# Credential scan: false positives, detection, cost", "",
        f"- Date: {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- Machine: {machine()}",
        f"- Command: `{command}`",
        "- What runs: `engine/store/credentials.py` (detect-secrets 1.5.0 token plugins and the named pattern set "
        "beside them) and what it undoes before it reads (`engine/store/disguises.py`, "
        "`engine/store/attached_text.py`); see docs/secrets.md.",
        "- Side by side, in this one run: *as written* is the scan before it decoded anything "
        "(`find_secret(text, undisguise=False)`; an attachment read by its printable runs; each field alone); "
        "*as it runs* is the scan every write now gets.", "",
        "## False positives on ordinary text", "",
        "| texts | count | refused as written | refused as it runs | detect-secrets base64 entropy (left out) "
        "| hex entropy (left out) |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in result["rows"]:
        kinds = ", ".join(f"{kind} {count}" for kind, count in sorted(row["kinds"].items()))
        refused = f"{row['hits']}" + (f" ({kinds})" if kinds else "")
        entropy = row.get("entropy") or {}
        lines.append(f"| {row['corpus']} | {row['texts']} | {row['before']} | {refused} | "
                     f"{entropy.get('base64 (4.5)', '')} | {entropy.get('hex (3.0)', '')} |")
    total = sum(row["texts"] for row in result["rows"])
    before = sum(row["before"] for row in result["rows"])
    hits = sum(row["hits"] for row in result["rows"])
    lines += ["", f"Refused as written: {before} of {total} texts ({100 * before / total:.3f}%); as it runs: "
              f"{hits} of {total} ({100 * hits / total:.3f}%).", ""]
    if not result["locomo"]:
        lines += ["(LoCoMo not measured: run with `--locomo PATH`.)", ""]
    found = sum(result["detected"].values())
    lines += ["## Detection", "", f"{found} of {len(result['detected'])} synthetic credentials found and named "
              "with their kind.", ""]
    missed = [name for name, ok in result["detected"].items() if not ok]
    if missed:
        lines += [f"Missed: {', '.join(missed)}.", ""]
    lines += ["The same credentials disguised, found and named with their kind:", "",
              "| disguise | credentials | found as written | found as it runs |", "| --- | ---: | ---: | ---: |"]
    lines += [f"| {name} | {total} | {before} | {after} |"
              for name, (total, before, after) in result["disguised"].items()]
    lines += ["", "## Cost per scan (best of %d)" % REPEATS, "",
              "| text | characters (bytes attached) | ms as written | ms as it runs |", "| --- | ---: | ---: | ---: |"]
    lines += [f"| {label} | {chars:,} | {before:.2f} | {after:.2f} |"
              for label, chars, before, after in result["costs"]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.bench.secrets", description=__doc__.splitlines()[0])
    parser.add_argument("--locomo", type=Path, help="locomo10.json, read where it lies (never copied)")
    parser.add_argument("--output", type=Path, default=ROOT / "docs" / "benchmarks" / "secrets.md")
    args = parser.parse_args(argv)
    command = "python -m engine.bench.secrets" + (" --locomo locomo10.json" if args.locomo else "")
    text = report(run(args.locomo), command)
    write_report(args.output, text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
