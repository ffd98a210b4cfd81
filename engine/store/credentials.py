"""Refusing credentials at the door: no write stores an API key, token, private key or password.

Every text an agent writes (titles, bodies, aliases, tags, page fields at any depth, claim and
relationship texts, excerpts and quotes, recall summaries, triggers and projects, attached files)
is scanned before anything is journalled.  A hit is ``SecretDetected`` (``secret_detected``)
naming the field and the kind of secret; the secret itself is never echoed, logged or stored.
The owner can allow secrets for a vault that must hold them (config.json ``"allowSecrets": true``).

The detector is Yelp's detect-secrets: its token-format plugins, called directly on the text
(``analyze_string``), so no baseline, settings registry, filesystem scan or network verification
is involved.  Its high-entropy string plugins are left out, because they flag every quoted sha256
digest and UUID and some record ids (measured in docs/secrets.md).  Beside it sits a small named
pattern set for what detect-secrets has no plugin for: current OpenAI and Anthropic keys, bearer
and basic authorization headers, fine-grained GitHub tokens, the GitLab tokens its plugin misses, Google,
Hugging Face, npm,
DigitalOcean and newer Stripe and Slack tokens, unquoted AWS secret keys, Azure shared access keys
and encrypted PEM private keys.  A value documentation writes in a credential's place (`"value"`,
`YOUR_API_KEY`, `sk-...`) is none (``placeholders``).

What is read is what will be stored, decoded: each text as written, then the lines of it that
hold an escape, an entity, an invisible or non-ASCII character or a base64 run as they decode
(``disguises``), and two fields of one write read on from one to the next (``read_on``); an
attached file is read as ``attached_text`` decodes it (UTF-16, gzip, zip members).

Cost: each detector runs only on the lines that hold one of its literal hints (found with
``bytes.find`` over an ASCII-folded copy of the text), so most of a long prose body is never
handed to a regular expression; see docs/secrets.md for the figures.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable, Iterable, Iterator

from detect_secrets.filters import heuristic
from detect_secrets.plugins.artifactory import ArtifactoryDetector
from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.base import BasePlugin
from detect_secrets.plugins.basic_auth import BasicAuthDetector
from detect_secrets.plugins.cloudant import CloudantDetector
from detect_secrets.plugins.discord import DiscordBotTokenDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.ibm_cloud_iam import IbmCloudIamDetector
from detect_secrets.plugins.ibm_cos_hmac import IbmCosHmacDetector
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.keyword import QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.npm import NpmDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.private_key import PrivateKeyDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.softlayer import SoftlayerDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector
from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
from detect_secrets.plugins.twilio import TwilioKeyDetector

from ..core.errors import SecretDetected
from ..core.ids import is_generated_id
from .attached_text import decoded_for_scan
from .disguises import undisguised_lines
from .placeholders import is_placeholder

__all__ = ["KINDS", "CleanContents", "decoded_for_scan", "find_secret", "refuse_secrets", "texts_of"]

# Long texts are scanned in pieces cut at a newline, so the ASCII-folded copy stays small.
CHUNK_CHARS = 1 << 20


@dataclass(frozen=True)
class _Detector:
    """One kind of secret: a finder over one line, and the literal hints one of which its lines hold.

    ``hints`` are lowercase ASCII, looked for case-insensitively; ``exact_hints`` case-sensitively.
    A detector with no hints reads the whole text (the right choice for a pattern led by a
    character on most lines, such as ``.`` or ``:``; a pattern led by a rarer literal has that
    literal as its hint, so a text without it costs one ``bytes.find``, not a call of the finder).
    Every hint set is a superset: any text the finder matches holds one of the hints on the same
    line.  ``line_filter``, when given, is a
    cheaper superset of the finder, tried on each hinted line first.  The hinted lines are handed
    to the finder joined, in one call, unless ``per_line`` (a finder whose match could run on past
    the end of a line).
    """

    kind: str
    find: Callable[[str], Iterable[str]]
    hints: tuple[str, ...] = ()
    exact_hints: tuple[str, ...] = ()
    line_filter: Callable[[str], bool] | None = None
    per_line: bool = False
    # A keyword assignment (`password: "..."`): a value with whitespace in it is a phrase, and a value
    # assigned to an id name or read from elsewhere (`secret = vault.get(...)`) is no credential.
    assignment: bool = False

    def hinted(self) -> bool:
        return bool(self.hints or self.exact_hints)

    @cached_property
    def hint_keys(self) -> frozenset[tuple[bool, str]]:
        """The hints as ``_Lines`` keys them: (exact, hint)."""
        return frozenset([(False, hint) for hint in self.hints] + [(True, hint) for hint in self.exact_hints])


def _plugin(plugin: BasePlugin) -> Callable[[str], Iterable[str]]:
    return plugin.analyze_string


def _pattern(regex: str, *, flags: int = 0, group: int = 0, word_start: bool = False,
             keep: Callable[[str], bool] | None = None) -> Callable[[str], Iterator[str]]:
    """A finder for one regular expression.  ``word_start``: the match must not continue a word or a
    hyphenated name (checked here rather than by a look-behind, which would stop ``re`` from
    searching for the pattern's literal prefix)."""
    compiled = re.compile(regex, flags)

    def find(text: str) -> Iterator[str]:
        for match in compiled.finditer(text):
            if word_start and match.start() > 0 and (text[match.start() - 1].isalnum()
                                                      or text[match.start() - 1] in "_-"):
                continue
            value = match.group(group)
            if keep is None or keep(value):
                yield value

    return find


def _anchored(plugin: BasePlugin, anchor: str, before: int) -> Callable[[str], Iterator[str]]:
    """A plugin whose pattern opens with a character class (slow to search for) but holds a literal
    further in: the literal-led ``anchor`` is searched for, and the plugin reads only the window
    from ``before`` characters ahead of each anchor to its end."""
    compiled = re.compile(anchor)

    def find(text: str) -> Iterator[str]:
        match = compiled.search(text)
        while match is not None:
            yield from plugin.analyze_string(text[max(0, match.start() - before):match.end()])
            match = compiled.search(text, match.start() + 1)

    return find


def _random_looking(token: str) -> bool:
    """A key-shaped token rather than a word or a slug: digits and letters, and mixed case or one long run.

    ``sk-learn-pipeline-notes`` (a slug) fails; ``sk-Ab3...`` and ``sk-0123abcd...`` (32+ in a run) pass.
    """
    has_digit = any(ch.isdigit() for ch in token)
    has_lower = any("a" <= ch <= "z" for ch in token)
    has_upper = any("A" <= ch <= "Z" for ch in token)
    longest_run = max((len(run) for run in re.split(r"[^A-Za-z0-9]", token)), default=0)
    return has_digit and (has_lower or has_upper) and ((has_lower and has_upper) or longest_run >= 32)


def _token_looking(token: str) -> bool:
    """An opaque credential after ``Bearer``: a digit in it, or long and mixed-case (not a word)."""
    has_mixed = any("a" <= ch <= "z" for ch in token) and any("A" <= ch <= "Z" for ch in token)
    return any(ch.isdigit() for ch in token) or (len(token) >= 32 and has_mixed)


# The keyword-and-assignment plugins (IBM, Cloudant, SoftLayer) all want a run of 24+ key characters.
_LONG_RUN = re.compile(r"[A-Za-z0-9_-]{24}").search
# One hint set for the four of them, so their lines are found once.
_ASSIGNED_KEY = ("key", "pw", "pass", "token", "secret", "cloudant", "softlayer")
# A superset of detect-secrets' quotes-required keyword rules: the keyword followed by an assignment or a
# call, or a comparison, or a statement ending in ';'.
_KEYWORD_ASSIGNMENT = re.compile(r"(?:key|pass|pwd|secret|contrase)\w*(?:[\]'\"`]{0,2}\s*[:=!\[]|(?:\.assign)?\()"
                                 r"|==|!=|;", re.IGNORECASE)


def _every_assignment(line: str) -> Iterator[str]:
    """Every value detect-secrets' keyword rule for text of unknown type finds in ``line``.  Its own
    ``KeywordDetector`` reports one assignment a line (each rule's first match), so a placeholder first
    on a line (`"AccessKeyId": "value", "SecretAccessKey": "..."`) would hide the key after it."""
    for regex, group in QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP.items():
        for match in regex.finditer(line):
            yield match.group(group)


def _keyword_line(line: str) -> bool:
    """Every one of those rules wants a quoted value; the regular expression runs only where one can be."""
    return ('"' in line or "'" in line or "`" in line) and _KEYWORD_ASSIGNMENT.search(line) is not None

# detect-secrets plugins; order decides which kind a text with two secrets is refused for.
_DETECT_SECRETS: tuple[_Detector, ...] = (
    _Detector("private key", _plugin(PrivateKeyDetector()), hints=("private key", "putty-user-key-file")),
    _Detector("AWS access key", _plugin(AWSKeyDetector()), hints=("a3t", "abia", "acca", "akia", "asia", "aws")),
    _Detector("Azure storage account key", _plugin(AzureStorageKeyDetector()), hints=("accountkey=",)),
    _Detector("GitHub token", _plugin(GitHubTokenDetector()), exact_hints=("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
    _Detector("GitLab token", _plugin(GitLabTokenDetector()), exact_hints=(
        "glpat-", "gldt-", "glft-", "glsoat-", "glrt-", "GR1348941", "glcbt-", "glimt-", "glptt-", "glagent-",
        "gloas-")),
    _Detector("Slack token", _plugin(SlackDetector()), hints=("xox", "hooks.slack.com")),
    _Detector("Stripe secret key", _plugin(StripeDetector()), exact_hints=("k_live_",)),
    _Detector("OpenAI API key", _plugin(OpenAIDetector()), exact_hints=("T3BlbkFJ",)),
    _Detector("JSON Web Token", _plugin(JwtTokenDetector()), exact_hints=("eyJ",)),
    _Detector("password in a URL", _plugin(BasicAuthDetector()), exact_hints=("://",)),
    _Detector("PyPI token", _plugin(PypiTokenDetector()), exact_hints=("pypi-AgE",)),
    _Detector("npm token", _plugin(NpmDetector()), exact_hints=("_",)),
    _Detector("SendGrid API key", _plugin(SendGridDetector()), exact_hints=("SG.",)),
    _Detector("Square OAuth secret", _plugin(SquareOAuthDetector()), exact_hints=("sq0csp-",)),
    _Detector("Twilio API key", _plugin(TwilioKeyDetector()), exact_hints=("AC", "SK")),
    _Detector("Mailchimp API key", _plugin(MailchimpDetector()), hints=("-us",)),
    _Detector("Artifactory credential", _plugin(ArtifactoryDetector()), exact_hints=("AKC", "AP")),
    # [MNO] + 23-25 + '.' + 6 + '.' + 27, and 8-10 digits + ':' + 35.
    _Detector("Discord bot token", _anchored(DiscordBotTokenDetector(), r"\.[a-zA-Z\d_-]{6}\.[a-zA-Z\d_-]{27}", 26)),
    _Detector("Telegram bot token", _anchored(TelegramBotTokenDetector(), r":[0-9A-Za-z_-]{35}", 10)),
    _Detector("IBM Cloud IAM key", _plugin(IbmCloudIamDetector()), hints=_ASSIGNED_KEY, line_filter=_LONG_RUN),
    _Detector("IBM COS HMAC credential", _plugin(IbmCosHmacDetector()), hints=_ASSIGNED_KEY, line_filter=_LONG_RUN),
    _Detector("IBM Cloudant credential", _plugin(CloudantDetector()), hints=_ASSIGNED_KEY, line_filter=_LONG_RUN),
    _Detector("SoftLayer credential", _plugin(SoftlayerDetector()), hints=_ASSIGNED_KEY, line_filter=_LONG_RUN),
    # `password: "..."`, `api_key = '...'` and the like, quotes required (detect-secrets' rule for
    # text of unknown type).
    _Detector("password or secret assignment", _every_assignment,
              hints=("key", "pass", "pw", "secret", "contrase"), line_filter=_keyword_line, per_line=True,
              assignment=True),
)

# What detect-secrets has no plugin for (checked first: more specific than its OpenAI and keyword rules).
_PATTERNS: tuple[_Detector, ...] = (
    _Detector("Anthropic API key", _pattern(r"sk-ant-[A-Za-z0-9_-]{20,}", word_start=True, keep=_random_looking),
              exact_hints=("sk-",)),  # the OpenAI key's hint: one scan for both
    _Detector("OpenAI API key", _pattern(r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}", word_start=True,
                                         keep=_random_looking), exact_hints=("sk-",)),
    _Detector("private key", _pattern(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"),
              exact_hints=("-----BEGIN ",)),
    _Detector("bearer token", _pattern(r"\bbearer[ \t]+([A-Za-z0-9._~+/-]{16,}=*)", flags=re.IGNORECASE, group=1,
                                       keep=_token_looking), hints=("bearer",)),
    _Detector("HTTP Basic credentials", _pattern(r"\bauthorization\b[\"']?[ \t]*[:=][ \t]*[\"']?basic[ \t]+"
                                                 r"[A-Za-z0-9+/]{8,}={0,2}", flags=re.IGNORECASE),
              hints=("authorization",)),
    _Detector("GitHub token", _pattern(r"github_pat_[A-Za-z0-9_]{22,}"), exact_hints=("github_pat_",)),
    # GitLab's prefixes detect-secrets misses: its CI/CD job token pattern reports only the partition id it
    # captures (`64_`, then dropped as too plain to be a key; a JWT job token not at all), and it predates the
    # feature-flag client, workspace and registered-runner tokens (GitLab's table of token prefixes).
    _Detector("GitLab token", _pattern(r"(?:glcbt|glffct|glrtr|glwt)-[A-Za-z0-9_-]{20,}", word_start=True),
              exact_hints=("glcbt-", "glffct-", "glrtr-", "glwt-")),
    _Detector("Google API key", _pattern(r"AIza[0-9A-Za-z_-]{35}"), exact_hints=("AIza",)),
    _Detector("Google OAuth token", _pattern(r"ya29\.[0-9A-Za-z_-]{20,}", word_start=True), exact_hints=("ya29.",)),
    _Detector("Hugging Face token", _pattern(r"hf_[A-Za-z]{34}(?![A-Za-z0-9])", word_start=True),
              exact_hints=("hf_",)),
    _Detector("npm token", _pattern(r"npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])", word_start=True), exact_hints=("npm_",)),
    _Detector("DigitalOcean token", _pattern(r"do[opr]_v1_[a-f0-9]{64}"), exact_hints=("_v1_",)),
    _Detector("Stripe secret key", _pattern(r"[sr]k_test_[0-9a-zA-Z]{24,}", word_start=True),
              exact_hints=("k_test_",)),
    _Detector("Stripe webhook secret", _pattern(r"whsec_[A-Za-z0-9]{32,}", word_start=True), exact_hints=("whsec_",)),
    _Detector("Slack token", _pattern(r"xapp-\d-[A-Z0-9]+-\d+-[a-z0-9]+", flags=re.IGNORECASE),
              hints=("xapp-",)),
    _Detector("AWS secret access key", _pattern(r"aws_?secret_?(?:access_?)?key[\"']?[ \t]*[:=][ \t]*[\"']?"
                                                r"[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+])", flags=re.IGNORECASE),
              hints=("aws",)),
    _Detector("Azure shared access key", _pattern(r"SharedAccessKey=[A-Za-z0-9+/]{42,}={0,2}",
                                                  flags=re.IGNORECASE), hints=("sharedaccesskey=",)),
)

DETECTORS: tuple[_Detector, ...] = _PATTERNS + _DETECT_SECRETS
KINDS: tuple[str, ...] = tuple(dict.fromkeys(detector.kind for detector in DETECTORS))
# Every detector's hints, each once, with the bytes looked for.
_HINT_NEEDLES: tuple[tuple[tuple[bool, str], bytes], ...] = tuple(
    (key, key[1].encode("ascii")) for key in sorted(frozenset().union(*(d.hint_keys for d in DETECTORS))))
# Hints that share their first two characters, three or more of them (GitHub's ghp_, gho_ ...; GitLab's glpat-,
# gldt- ...), are looked for only in a text that holds those two: one scan of a long text instead of one each.
GATED_MIN = 3


def _needle_groups(exact: bool) -> tuple[tuple[bytes | None, tuple[tuple[tuple[bool, str], bytes], ...]], ...]:
    """The hints looked for in the text as written (``exact``) or in its folded copy, as (gate, hints): a gate
    of None is a group of hints looked for one by one."""
    needles = [(key, needle) for key, needle in _HINT_NEEDLES if key[0] == exact]
    by_gate: dict[bytes, list[tuple[tuple[bool, str], bytes]]] = {}
    for key, needle in needles:
        by_gate.setdefault(needle[:2], []).append((key, needle))
    gated = tuple((gate, tuple(group)) for gate, group in by_gate.items() if len(group) >= GATED_MIN)
    alone = tuple(pair for group in by_gate.values() if len(group) < GATED_MIN for pair in group)
    return ((None, alone),) + gated


_EXACT_GROUPS = _needle_groups(exact=True)
_FOLDED_GROUPS = _needle_groups(exact=False)


def _false_positive(value: str, line: str, detector: _Detector) -> bool:
    """detect-secrets' own heuristics for what is shaped like a secret but is not one, and placeholders
    (``placeholders``: `"value"`, `YOUR_API_KEY`, `sk-...`)."""
    if not value or heuristic.is_not_alphanumeric_string(value) or heuristic.is_templated_secret(value):
        return True
    if is_placeholder(value):
        return True
    if heuristic.is_prefixed_with_dollar_sign(value) or heuristic.is_sequential_string(value):
        return True
    if heuristic.is_potential_uuid(value):
        return True
    if detector.assignment:
        if any(ch.isspace() for ch in value.strip()):
            return True
        if heuristic.is_likely_id_string(value, line) or heuristic.is_indirect_reference(line):
            return True
    return False


class _Lines:
    """The lines of one piece of text that hold a hint, found once per hint and shared by the detectors."""

    def __init__(self, text: str) -> None:
        self.text = text
        # One byte per code point (anything outside ASCII becomes '?'), so offsets in these copies are
        # offsets in the text; no hint contains '?'.
        self.raw = text.encode("ascii", "replace")
        self.folded = self.raw.lower()
        self._spans: dict[tuple[bool, str], set[tuple[int, int]]] = {}
        self._lines: dict[tuple[Any, ...], list[str]] = {}
        self._joined: dict[tuple[Any, ...], list[str]] = {}

    def _spans_of(self, hint: str, exact: bool) -> set[tuple[int, int]]:
        key = (exact, hint)
        if key not in self._spans:
            haystack, needle, spans = self.raw if exact else self.folded, hint.encode("ascii"), set()
            position = haystack.find(needle)
            while position != -1:
                start = haystack.rfind(b"\n", 0, position) + 1
                end = haystack.find(b"\n", position)
                end = len(haystack) if end == -1 else end
                spans.add((start, end))
                position = haystack.find(needle, end)
            self._spans[key] = spans
        return self._spans[key]

    def hints_present(self) -> set[tuple[bool, str]]:
        """Which of every detector's hints the text holds, each looked for once."""
        present: set[tuple[bool, str]] = set()
        for haystack, groups in ((self.raw, _EXACT_GROUPS), (self.folded, _FOLDED_GROUPS)):
            for gate, group in groups:
                if gate is None or gate in haystack:
                    present.update([key for key, needle in group if needle in haystack])
        return present

    def for_detector(self, detector: _Detector) -> list[str]:
        """What the detector reads: the lines holding one of its hints, each once, in order, as a list
        (``per_line``) or joined into one text; the whole text if it has no hints."""
        if not detector.hinted():
            return [self.text]
        key = (detector.hints, detector.exact_hints, detector.line_filter)
        if key not in self._lines:
            spans: set[tuple[int, int]] = set()
            for hint in detector.hints:
                spans |= self._spans_of(hint, False)
            for hint in detector.exact_hints:
                spans |= self._spans_of(hint, True)
            lines = (self.text[start:end] for start, end in sorted(spans))
            self._lines[key] = [line for line in lines if detector.line_filter is None or detector.line_filter(line)]
            self._joined[key] = ["\n".join(self._lines[key])] if self._lines[key] else []
        return self._lines[key] if detector.per_line else self._joined[key]


def _scan_chunk(text: str) -> tuple[str, str] | None:
    lines = _Lines(text)
    present = lines.hints_present()
    for detector in DETECTORS:
        if detector.hint_keys and detector.hint_keys.isdisjoint(present):
            continue  # most detectors, for most texts: no line holds one of its hints
        for line in lines.for_detector(detector):
            for value in detector.find(line):
                if not _false_positive(value, line, detector):
                    return detector.kind, value
    return None


def _chunks(text: str) -> Iterator[tuple[int, str]]:
    """``text`` in pieces of about ``CHUNK_CHARS``, cut after a newline; with each piece's offset."""
    start = 0
    while start < len(text):
        end = len(text) if len(text) - start <= CHUNK_CHARS else text.find("\n", start + CHUNK_CHARS)
        end = len(text) if end == -1 else end + 1
        yield start, text[start:end]
        start = end


def find_secret(text: str, *, undisguise: bool = True) -> tuple[str, int] | None:
    """The kind of the first credential in ``text`` and its 1-based line, or None.

    The text is read as written and then, for its lines that hold an escape, an entity, an invisible
    or a non-ASCII character or a base64 run, as they decode (``disguises``); ``undisguise=False``
    reads it as written only.  The secret's value is not returned: callers have nothing to leak.
    """
    for offset, chunk in _chunks(text):
        found = _scan_chunk(chunk)
        if found is not None:
            kind, value = found
            position = chunk.find(value)
            return kind, text.count("\n", 0, offset + max(position, 0)) + 1
    return _find_disguised(text) if undisguise else None


def _find_disguised(text: str) -> tuple[str, int] | None:
    """The first credential in the lines of ``text`` as they decode, with the line of the text it is on;
    read in the same pieces as the text, so no copy of a long text is made whole."""
    for offset, chunk in _chunks(text):
        views = undisguised_lines(chunk)
        found = _scan_chunk("\n".join(view for _, view in views)) if views else None
        if found is not None:
            kind, value = found
            line = next((line for line, view in views if value in view), views[0][0])
            return kind, text.count("\n", 0, offset) + line
    return None


def texts_of(params: Any, *, skip: frozenset[str] = frozenset()) -> Iterator[tuple[str, str]]:
    """Every string in a write's parameters, keys included, with the field path that names it.

    Paths read like the parameters: ``items[0].text``, ``evidence[1].excerpt``, ``fields.url``,
    ``aliases[2]``; a key that is itself a string to check is ``fields.<key 0>``.  The walk
    uses its own stack, so no nesting depth can exhaust the interpreter's.  ``skip`` names
    top-level keys whose values are not text (``content`` of knowledge_attach is base64).
    """
    stack: list[tuple[str, Any]] = []
    if isinstance(params, dict):
        stack.extend((key, value) for key, value in reversed(list(params.items()))
                     if key not in skip and key != "_meta")
    else:
        stack.append(("", params))
    while stack:
        path, value = stack.pop()
        if isinstance(value, str):
            yield path, value
        elif isinstance(value, dict):
            entries = list(value.items())
            for index, (key, item) in reversed(list(enumerate(entries))):
                stack.append((f"{path}.{key}" if isinstance(key, str) else path, item))
                if isinstance(key, str):
                    stack.append((f"{path}.<key {index}>", key))
        elif isinstance(value, list):
            stack.extend((f"{path}[{index}]", item) for index, item in reversed(list(enumerate(value))))


class CleanContents:
    """The sha256 of the files this process found free of credentials, and of the parts each is retained in
    (``part_bytes`` each, as ``Writer.retain`` cuts an original), so the same bytes are not scanned twice:
    an import checks its originals whole before it writes anything, then retains them as attachments.
    A part is what its whole was found to be: the parts, joined, are the very bytes that were scanned."""

    def __init__(self, part_bytes: int, capacity: int = 65_536) -> None:
        self.part_bytes, self.capacity = part_bytes, capacity
        self._digests: OrderedDict[bytes, None] = OrderedDict()
        self._lock = threading.Lock()

    def __contains__(self, digest: bytes) -> bool:
        with self._lock:
            return digest in self._digests

    def add(self, data: bytes, digest: bytes) -> None:
        parts = range(0, len(data), self.part_bytes) if len(data) > self.part_bytes else ()
        digests = [digest] + [hashlib.sha256(data[start:start + self.part_bytes]).digest() for start in parts]
        with self._lock:
            for each in digests:
                self._digests[each] = None
                self._digests.move_to_end(each)
            while len(self._digests) > self.capacity:
                self._digests.popitem(last=False)


def refuse_secrets(texts: Iterable[tuple[str, str | bytes]], *, allowed: bool,
                   clean: CleanContents | None = None) -> None:
    """Raise ``SecretDetected`` for the first field whose text holds a credential (unless ``allowed``),
    or for a credential split between two fields read one after the other (``read_on``).

    A field in bytes is a file's content (an attachment, an import's original), read as a file is
    (``decoded_for_scan``); with ``clean``, content found clean before is not scanned again, and what
    this call finds clean is remembered.

    The texts are scanned together first, one per line group, so a write of many short fields costs
    one pass; only when that finds something is each field scanned alone to name it.  No pattern
    reaches across a newline, so joining them finds nothing that no single field holds.
    """
    if allowed:
        return
    files: list[tuple[bytes, bytes]] = []
    decoded: list[tuple[str, str]] = []
    for field, value in texts:
        if isinstance(value, bytes):
            digest = hashlib.sha256(value).digest()
            if clean is not None and digest in clean:
                continue
            files.append((value, digest))
            value = decoded_for_scan(value)
        decoded.append((field, value))
    _refuse(decoded)
    if clean is not None:
        for data, digest in files:
            clean.add(data, digest)


def _refuse(texts: list[tuple[str, str]]) -> None:
    # A field that is exactly an engine id names a record or source: its random letters can spell what
    # a detector takes for a key ("AKIA" and sixteen more), and a revision naming its page must not be refused.
    texts = [(field, text) for field, text in texts if not is_generated_id(text)]
    if not texts:
        return
    if find_secret("\n".join(text for _, text in texts)) is not None:
        for field, text in texts:
            found = find_secret(text)
            if found is not None:
                kind, line = found
                raise SecretDetected(
                    f"{field} holds what looks like {_article(kind)} {kind}; Knowledge does not store credentials. "
                    "Remove it (describe the credential without its value, e.g. where it is kept) and save again",
                    field=field, kind=kind, line=line,
                )
    _refuse_split(texts)


# How much of a field's end and of the next one's start is read joined: more than any key the scan knows
# but a long JSON Web Token.
SPLIT_CHARS = 512
# Where two fields meet in a shorter run without a space, no key is split there: the shortest the scan
# knows whole (an AWS access key id) has 20 characters, and a run of 16 leaves room for one cut in a
# prefix; this keeps ordinary fields (a sentence's last word, the next one's first) from being read twice.
SPLIT_RUN_MIN = 16


def read_on(texts: list[tuple[str, str]]) -> Iterator[tuple[str, str, str]]:
    """(first field, second field, the end of the first joined to the start of the second) for each two
    fields a reader reads one after the other: each field and the next in the write, and a record's
    title and its body wherever they are.  Only each field's last and first line, stripped, are joined
    (no pattern reaches across a newline), and only where they meet in a run of ``SPLIT_RUN_MIN``
    characters or more without a space."""
    pairs = list(zip(range(len(texts)), range(1, len(texts))))
    position = {field: index for index, (field, _) in enumerate(texts)}
    for field, index in position.items():
        if field == "title" or field.endswith(".title"):
            body = position.get(field[:-len("title")] + "body")
            if body is not None and body != index + 1:
                pairs.append((index, body))
    edges = [_edges(text) for _, text in texts]
    for first, second in pairs:
        _, _, end, last_run = edges[first]
        start, first_run, _, _ = edges[second]
        if last_run + first_run >= SPLIT_RUN_MIN:
            yield texts[first][0], texts[second][0], end + start


def _edges(text: str) -> tuple[str, int, str, int]:
    """A field's first line and the length of its first run without a space, and the same of its last
    line (each within ``SPLIT_CHARS`` of the field's start or end, stripped)."""
    head = text[:SPLIT_CHARS].lstrip().split("\n", 1)[0]
    tail = text[-SPLIT_CHARS:].rstrip().rsplit("\n", 1)[-1]
    first, last = head.split(None, 1), tail.rsplit(None, 1)
    return head, len(first[0]) if first else 0, tail, len(last[-1]) if last else 0


def _refuse_split(texts: list[tuple[str, str]]) -> None:
    """The fields of one write read on from one to the next, scanned in one pass; on a find, each pair
    alone, to name the first of the two."""
    joined = list(read_on(texts))
    if not joined or find_secret("\n".join(text for _, _, text in joined)) is None:
        return
    lines = dict(texts)
    for first, second, text in joined:
        found = find_secret(text)
        if found is not None:
            kind = found[0]
            raise SecretDetected(
                f"{first} and {second}, read one after the other, hold what looks like {_article(kind)} {kind}; "
                "Knowledge does not store credentials. Remove it (describe the credential without its value, "
                "e.g. where it is kept) and save again",
                field=first, kind=kind, line=lines[first].rstrip().count("\n") + 1,
            )


def _article(kind: str) -> str:
    return "an" if kind[0].lower() in "aeiou" or kind.startswith(("HTTP", "IBM", "npm")) else "a"
