"""Importing LoCoMo conversations as an agent would have saved them.

LoCoMo (github.com/snap-research/LoCoMo) holds long two-person conversations
split into dated sessions, with per-session summaries, observations that
cite dialog turns (``D3:7``) and questions whose evidence is dialog turns.
The import goes through the public engine API only:

- one ``person`` page per speaker per sample, titled with the speaker's name,
  or ``Name (sample-id)`` when several samples share that name;
- one ``event`` page per session (body: the session summary) whose evidence
  retains the whole transcript, one line per turn: ``D3:7 Name: text``
  (a shared image's caption is appended as ``[image: caption]``), so line k
  of that source is the session's k-th turn;
- one ``remember`` call per session holding its observations as ``fact``
  claims from the ``source``, about the speaker's page, each citing the
  transcript lines of its turns with the turn's text as quote (a session
  with more observations than one call takes continues in further calls).

Every request id is derived from the sample and session, so importing again
returns the original receipts and changes nothing.  The whole file is
validated before anything is written: a malformed file imports nothing.
If the engine refuses a write midway (a full disk, revoked authority), the
sessions already published stay, and running the import again completes it.
Turn text is whitespace-normalised (LoCoMo has turns with line breaks), so a
claim's quote is exactly the text on its cited line.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from ..access.authority import Caller
from ..core.answers import JsonObject
from ..core.errors import InvalidParams
from ..store.inputs import EXCERPT_MAX_CHARS, ITEMS_MAX, LIST_MAX, TEXT_MAX_CHARS
from ..service import Engine
from .answers import LocomoImport, LocomoQuestion
from .common import DEFAULT_AGENT, owner_caller
from .json_shapes import Kind

# owner_caller and DEFAULT_AGENT are every importer's (common.py); the CLI and tests take them from here too.
__all__ = ["DEFAULT_AGENT", "evidence_records", "import_locomo", "load_locomo", "owner_caller"]

_SAMPLE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_SESSION_KEY = re.compile(r"session_([1-9][0-9]{0,3})")
_DIA_ID = re.compile(r"D([0-9]+):([0-9]+)")
_DIA_SPLIT = re.compile(r"[,;\s]+")
_QUESTION_DIA_ID = re.compile(r"D:?([0-9]+):([0-9]+)")
_DATE = re.compile(r"\b([0-9]{1,2}) ([A-Za-z]+),? ([0-9]{4})\b")
NAME_MAX_CHARS = 100
_KIND_NAMES = {dict: "an object", list: "a list", str: "a string"}


@dataclass(frozen=True)
class _Observation:
    speaker: str
    text: str
    dia_ids: tuple[str, ...]


@dataclass(frozen=True)
class _Session:
    number: int
    date_time: str
    summary: str
    turns: tuple[tuple[str, str, str, str | None], ...]  # dia id, speaker, text, image caption
    observations: tuple[_Observation, ...]

    @property
    def transcript(self) -> str:
        """One line per turn, so line k is the k-th turn."""
        return "\n".join(f"{dia_id} {speaker}: {text}" + (f" [image: {caption}]" if caption else "")
                         for dia_id, speaker, text, caption in self.turns)

    def line_of(self, dia_id: str) -> int:
        return 1 + [turn[0] for turn in self.turns].index(dia_id)


@dataclass(frozen=True)
class _Sample:
    sample_id: str
    speakers: tuple[str, str]
    sessions: tuple[_Session, ...]


# --- public API -------------------------------------------------------------------------


def load_locomo(path: str | Path) -> list[JsonObject]:
    """The parsed JSON of a LoCoMo file, checked to be importable (else InvalidParams)."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except OSError as exc:
        raise InvalidParams(f"cannot read {path}: {exc.strerror or exc}", field="file") from exc
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidParams(f"{path} is not a UTF-8 JSON file: {exc}", field="file") from exc
    _parse(data)
    return data


def import_locomo(engine: Engine, caller: Caller, data: Any) -> LocomoImport:
    """Import every sample of a parsed LoCoMo file into the caller's store.

    Returns counts (``samples``, ``people``, ``sessions``, ``claims``) and
    ``dialogClaims``: ``{sample id: {dialog id: [claim ids citing that turn]}}``.
    Raises InvalidParams naming the first problem when the file is malformed,
    before anything is written.
    """
    samples = _parse(data)
    shared = _shared_names(samples)
    result: LocomoImport = {"samples": len(samples), "people": 0, "sessions": 0, "claims": 0,
                              "dialogClaims": {}}
    for sample in samples:
        people = {}
        for letter, name in zip("ab", sample.speakers, strict=True):
            other = sample.speakers[1] if letter == "a" else sample.speakers[0]
            receipt = engine.save_page(caller, {
                "requestId": f"locomo-{sample.sample_id}-person-{letter}", "type": "person",
                "title": f"{name} ({sample.sample_id})" if name.casefold() in shared else name,
                "body": f"{name} talks with {other} in the LoCoMo conversation {sample.sample_id}.",
            })
            people[name] = receipt["id"]
        dialog_claims: dict[str, list[str]] = {}
        for session in sample.sessions:
            _import_session(engine, caller, sample, session, people, dialog_claims)
        result["people"] += len(people)
        result["sessions"] += len(sample.sessions)
        result["claims"] += sum(len(s.observations) for s in sample.sessions)
        result["dialogClaims"][sample.sample_id] = dialog_claims
    return result


def evidence_records(engine: Engine, caller: Caller, data: Any) -> list[LocomoQuestion]:
    """For each LoCoMo question, the ids of the claims that cite one of its evidence turns.

    Re-runs the deterministic import to learn the claim ids (an imported
    store is left byte-identical; a store without the import gets it).
    Returns, in file order, ``{sample, question, category, evidence,
    record_ids}`` with the evidence dialog ids as parsed (odd spellings such
    as ``D30:05`` or ``"D8:6; D9:17"`` are read leniently) and ``record_ids``
    sorted; a question whose turns no observation cites has none.
    """
    questions = _questions(data)  # checked before the import writes anything
    dialog_claims = import_locomo(engine, caller, data)["dialogClaims"]
    for question in questions:
        cited = dialog_claims[question["sample"]]
        question["record_ids"] = sorted({claim for dia_id in question["evidence"] for claim in cited.get(dia_id, ())})
    return questions


def _questions(data: Any) -> list[LocomoQuestion]:
    samples = _parse(data)
    questions = []
    for sample, raw in zip(samples, data, strict=True):
        for number, question in enumerate(_require(raw, "qa", list, f"sample {sample.sample_id}")):
            where = f"sample {sample.sample_id} qa[{number}]"
            if not isinstance(question, dict):
                raise InvalidParams(f"{where} must be an object", field=where)
            dia_ids = []
            for item in _require(question, "evidence", list, where):
                if not isinstance(item, str):
                    raise InvalidParams(f"{where}.evidence must hold dialog id strings", field=f"{where}.evidence")
                dia_ids += [f"D{int(a)}:{int(b)}" for a, b in _QUESTION_DIA_ID.findall(item)]
            questions.append({"sample": sample.sample_id, "question": _require(question, "question", str, where),
                              "category": question.get("category"), "evidence": dia_ids})
    return questions


# --- importing one session ----------------------------------------------------------------


def _import_session(engine: Engine, caller: Caller, sample: _Sample, session: _Session,
                    people: dict[str, str], dialog_claims: dict[str, list[str]]) -> None:
    prefix = f"locomo-{sample.sample_id}-s{session.number}"
    date = _iso_date(session.date_time)
    shown = _display_date(date) if date else session.date_time
    page = engine.save_page(caller, {
        "requestId": f"{prefix}-page", "type": "event",
        "title": f"{sample.speakers[0]} and {sample.speakers[1]}, session {session.number} ({shown})",
        "body": session.summary, **({"fields": {"date": date}} if date else {}),
        "evidence": [{"excerpt": session.transcript}],
    })
    source = engine.get_record(caller, page["id"])["frontmatter"]["evidence"][0]["source"]
    texts = {turn[0]: turn[2] for turn in session.turns}
    items = [{
        "text": observation.text, "claimKind": "fact", "assertionOrigin": "source",
        "subject": people[observation.speaker],
        "evidence": [{"source": source, "lines": [session.line_of(dia_id)] * 2, "quote": texts[dia_id]}
                     for dia_id in observation.dia_ids],
    } for observation in session.observations]
    for chunk, start in enumerate(range(0, len(items), ITEMS_MAX)):
        suffix = f"-{chunk + 1}" if chunk else ""
        receipt = engine.remember(caller, {"requestId": f"{prefix}-claims{suffix}",
                                           "items": items[start:start + ITEMS_MAX]})
        chunk_observations = session.observations[start:start + ITEMS_MAX]
        for observation, claim in zip(chunk_observations, receipt["items"], strict=True):
            for dia_id in observation.dia_ids:
                dialog_claims.setdefault(dia_id, []).append(claim["id"])


def _iso_date(date_time: str) -> str | None:
    """``1:56 pm on 8 May, 2023`` as ``2023-05-08``; None when no date can be read."""
    match = _DATE.search(date_time)
    if match is None:
        return None
    for month_format in ("%B", "%b"):
        try:
            return datetime.strptime(" ".join(match.groups()), f"%d {month_format} %Y").date().isoformat()
        except ValueError:
            continue
    return None


def _display_date(iso: str) -> str:
    day = datetime.strptime(iso, "%Y-%m-%d")
    return f"{day.day} {day:%B %Y}"


def _shared_names(samples: list[_Sample]) -> set[str]:
    """Case-folded speaker names that appear in more than one sample."""
    seen: dict[str, set[str]] = {}
    for sample in samples:
        for name in sample.speakers:
            seen.setdefault(name.casefold(), set()).add(sample.sample_id)
    return {name for name, ids in seen.items() if len(ids) > 1}


# --- validation ------------------------------------------------------------------------------


def _require(mapping: dict[str, Any], key: str, kind: type[Kind], where: str) -> Kind:
    if key not in mapping:
        raise InvalidParams(f"{where} has no {key!r}", field=f"{where}.{key}")
    value = mapping[key]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise InvalidParams(f"{where}.{key} must be {_KIND_NAMES[kind]}", field=f"{where}.{key}")
    return value


def _text(value: Any, where: str, *, max_chars: int = TEXT_MAX_CHARS) -> str:
    """A non-empty string, whitespace runs (line breaks included) collapsed to one space."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidParams(f"{where} must be a non-empty string", field=where)
    if "\x00" in value:
        raise InvalidParams(f"{where} contains a NUL character", field=where)
    text = " ".join(value.split())
    if len(text) > max_chars:
        raise InvalidParams(f"{where} is longer than {max_chars} characters", field=where)
    return text


def _parse(data: Any) -> list[_Sample]:
    if not isinstance(data, list) or not data:
        raise InvalidParams("a LoCoMo file holds a non-empty list of samples", field="file")
    samples, seen = [], set()
    for index, raw in enumerate(data):
        where = f"[{index}]"
        if not isinstance(raw, dict):
            raise InvalidParams(f"sample {where} must be an object", field=where)
        sample_id = _require(raw, "sample_id", str, where)
        if not _SAMPLE_ID.fullmatch(sample_id):
            raise InvalidParams(f"{where}.sample_id must be 1-64 letters, digits, '_', '.' or '-'",
                                field=f"{where}.sample_id")
        if sample_id in seen:
            raise InvalidParams(f"sample_id {sample_id!r} appears twice", field=f"{where}.sample_id")
        seen.add(sample_id)
        samples.append(_parse_sample(raw, sample_id, f"sample {sample_id}"))
    return samples


def _parse_sample(raw: dict[str, Any], sample_id: str, where: str) -> _Sample:
    conversation = _require(raw, "conversation", dict, where)
    observations = _require(raw, "observation", dict, where)
    summaries = _require(raw, "session_summary", dict, where)
    speakers = tuple(_text(_require(conversation, key, str, f"{where} conversation"),
                           f"{where} conversation.{key}", max_chars=NAME_MAX_CHARS)
                     for key in ("speaker_a", "speaker_b"))
    if speakers[0].casefold() == speakers[1].casefold():
        raise InvalidParams(f"{where}: both speakers are named {speakers[0]!r}", field=f"{where}.speaker_b")
    numbers = sorted(int(m.group(1)) for m in map(_SESSION_KEY.fullmatch, conversation) if m)
    if not numbers:
        raise InvalidParams(f"{where} conversation has no session_N transcripts", field=f"{where}.conversation")
    for key in observations:
        match = re.fullmatch(r"(session_[0-9]+)_observation", key)
        if match is None or match.group(1) not in conversation:
            raise InvalidParams(f"{where} observation.{key} names no session of the conversation",
                                field=f"{where}.observation.{key}")
    sessions = tuple(
        _parse_session(n, conversation, observations, summaries, speakers, f"{where} session_{n}")
        for n in numbers
    )
    return _Sample(sample_id, speakers, sessions)


def _parse_session(number: int, conversation: dict[str, Any], observations: dict[str, Any],
                   summaries: dict[str, Any], speakers: tuple[str, ...], where: str) -> _Session:
    key = f"session_{number}"
    date_time = _text(_require(conversation, f"{key}_date_time", str, where), f"{where}_date_time",
                      max_chars=NAME_MAX_CHARS)
    summary = _require(summaries, f"{key}_summary", str, where).strip()
    if "\x00" in summary or len(summary) > EXCERPT_MAX_CHARS:
        raise InvalidParams(f"{where}_summary holds a NUL character or more than {EXCERPT_MAX_CHARS} characters",
                            field=f"{where}_summary")
    raw_turns = _require(conversation, key, list, where)
    if not raw_turns:
        raise InvalidParams(f"{where} has no dialog turns", field=where)
    turns: list[tuple[str, str, str, str | None]] = []
    for position, turn in enumerate(raw_turns):
        at = f"{where}[{position}]"
        if not isinstance(turn, dict):
            raise InvalidParams(f"{at} must be an object", field=at)
        dia_id = _dia_id(_require(turn, "dia_id", str, at), f"{at}.dia_id")
        if dia_id in {seen[0] for seen in turns}:
            raise InvalidParams(f"{at}: dialog id {dia_id} appears twice in the session", field=f"{at}.dia_id")
        speaker = _text(_require(turn, "speaker", str, at), f"{at}.speaker")
        if speaker not in speakers:
            raise InvalidParams(f"{at}: speaker {speaker!r} is neither speaker_a nor speaker_b",
                                field=f"{at}.speaker")
        caption = turn.get("blip_caption")
        caption = _text(caption, f"{at}.blip_caption") if isinstance(caption, str) and caption.strip() else None
        turns.append((dia_id, speaker, _text(_require(turn, "text", str, at), f"{at}.text"), caption))
    by_speaker = _require(observations, f"{key}_observation", dict, where)
    facts = []
    for raw_speaker, entries in by_speaker.items():
        at = f"{where}_observation.{raw_speaker}"
        speaker = _text(raw_speaker, at)
        if speaker not in speakers:
            raise InvalidParams(f"{at}: {speaker!r} is neither speaker_a nor speaker_b", field=at)
        if not isinstance(entries, list):
            raise InvalidParams(f"{at} must be a list of [fact, dialog id] pairs", field=at)
        for position, entry in enumerate(entries):
            if not isinstance(entry, list) or len(entry) != 2:
                raise InvalidParams(f"{at}[{position}] must be a [fact, dialog id] pair", field=f"{at}[{position}]")
            dia_ids = _dia_refs(entry[1], {turn[0] for turn in turns}, f"{at}[{position}]", key)
            facts.append(_Observation(speaker, _text(entry[0], f"{at}[{position}] fact"), dia_ids))
    session = _Session(number, date_time, summary, tuple(turns), tuple(facts))
    if len(session.transcript) > EXCERPT_MAX_CHARS:
        raise InvalidParams(f"{where}: the transcript is longer than {EXCERPT_MAX_CHARS} characters", field=where)
    return session


def _dia_id(value: str, where: str) -> str:
    match = _DIA_ID.fullmatch(value.strip())
    if match is None:
        raise InvalidParams(f"{where}: {value!r} is not a dialog id like D3:7", field=where)
    return f"D{int(match.group(1))}:{int(match.group(2))}"


def _dia_refs(value: Any, turns: set[str], where: str, session: str) -> tuple[str, ...]:
    """An observation's cited turns: one id, a list of ids or a comma-separated string of them."""
    parts = value if isinstance(value, list) else [value]
    if not parts or not all(isinstance(part, str) for part in parts):
        raise InvalidParams(f"{where}: the dialog id must be a string or a list of strings", field=where)
    cited = []
    for piece in (p for part in parts for p in _DIA_SPLIT.split(part) if p):
        dia_id = _dia_id(piece, where)
        if dia_id not in turns:
            raise InvalidParams(f"{where}: dialog id {piece!r} is not a turn of {session}", field=where)
        cited.append(dia_id)
    if not cited or len(set(cited)) > LIST_MAX:
        raise InvalidParams(f"{where}: give 1 to {LIST_MAX} dialog ids", field=where)
    return tuple(dict.fromkeys(cited))
