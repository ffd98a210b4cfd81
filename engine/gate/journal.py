"""The gate log and the shadow journal, kept in the store's ``state.sqlite`` (table ``gate_turns``).

Every gate turn in the private partition leaves one row: mode, outcome,
latency, counts and each decision's record id, score and tier (what the log
line says, and nothing more).  With ``recallGate.journal: true``, a
``shadow`` turn of an owner-private session also keeps the message text and
its candidates (title and the scored document), so the owner can later:

- **label** a turn with the pages it actually needed (``label_turn``);
- see **what each threshold would inject** over the kept turns, with
  precision and recall on the labelled ones and a suggested threshold
  (``what_if``);
- **replay** kept turns against another setting or model (engine/operator/gate_operator.py).

The journal is owner-private state: it is written only for owner-private
sessions (never a granted conversation's), read only through the operator,
and never logged.  ``clear_journal`` drops every kept message text.  Rows
beyond ``KEEP_TURNS`` per partition are pruned, oldest first; labelled
turns are kept.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Sequence

from ..core.answers import JsonObject, NotRequired, TypedDict
from ..core.errors import InvalidParams, NotFound
from ..core.ids import format_timestamp, is_record_id, new_id, utc_now
from ..core.params import check_count
from ..store.store import Store

TURN_PREFIX = "gt"
KEEP_TURNS = 5_000
PRUNE_EVERY = 100
NEEDED_MAX = 50
LIST_MAX = 200
THRESHOLD_GRID = tuple(round(step / 20, 2) for step in range(1, 20))   # 0.05 ... 0.95
MIN_LABELLED_FOR_SUGGESTION = 5
SCORE_BINS = 20


@dataclass(frozen=True)
class GateTurnRecord:
    agent: str
    audience: str
    mode: str
    source: str
    model: str | None
    outcome: str
    would: str | None
    stage: str | None
    reason: str | None
    latency_ms: float
    offered: int
    shortlisted: int
    decisions: list[dict[str, Any]]
    settings: dict[str, Any]
    message: str | None = None                    # journal only
    candidates: list[dict[str, Any]] | None = None  # journal only


def record_turn(store: Store, partition: str, turn: GateTurnRecord) -> str:
    """Keep one turn (on the lane); returns its id."""
    turn_id = new_id(TURN_PREFIX)
    with store.db.atomic():
        cursor = store.db.execute(
            "INSERT INTO gate_turns (id, partition, agent, audience, at, mode, source, model, outcome, would, stage, "
            "reason, latency_ms, offered, shortlisted, decisions, settings, message, candidates) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (turn_id, partition, turn.agent, turn.audience, format_timestamp(utc_now()), turn.mode, turn.source,
             turn.model, turn.outcome, turn.would, turn.stage, turn.reason, round(turn.latency_ms, 1),
             turn.offered, turn.shortlisted, json.dumps(turn.decisions), json.dumps(turn.settings),
             turn.message, None if turn.candidates is None else json.dumps(turn.candidates, ensure_ascii=False)))
        if cursor.lastrowid and cursor.lastrowid % PRUNE_EVERY == 0:
            store.db.execute(
                "DELETE FROM gate_turns WHERE partition = ? AND needed IS NULL AND seq <= "
                "(SELECT seq FROM gate_turns WHERE partition = ? ORDER BY seq DESC LIMIT 1 OFFSET ?)",
                (partition, partition, KEEP_TURNS))
    return turn_id


class GateTurn(TypedDict):
    """One kept gate turn; a journal turn also carries its ``message`` and the ``pages`` it was shown."""

    id: str
    at: str
    agent: str
    audience: str | None
    mode: str
    candidates: str | None  # the candidate source: keyword or hybrid
    model: str | None
    outcome: str
    latencyMs: float
    offered: int
    shortlisted: int
    decisions: list[JsonObject]  # each as memory/gate answered it (gate/scoring.py DecisionEntry)
    settings: JsonObject  # the gate settings of the turn, as the owner set them
    journaled: bool
    needed: list[str] | None
    labelledAt: str | None
    wouldInject: NotRequired[str]
    stage: NotRequired[str]
    reason: NotRequired[str]
    message: NotRequired[str]
    pages: NotRequired[list[JsonObject]]


class GateTurns(TypedDict):
    turns: list[GateTurn]
    total: int
    offset: int
    nextOffset: NotRequired[int]


class ThresholdRow(TypedDict):
    threshold: float
    turnsInjecting: int
    pagesInjected: int
    pagesPerTurn: float
    skipHintTurns: int
    skipHintMisses: int
    precision: float | None
    recall: float | None
    f1: float | None


class Suggestion(TypedDict):
    """The threshold with the best F1 over the labelled turns, or None with the ``reason``."""

    threshold: float | None
    reason: NotRequired[str]
    f1: NotRequired[float | None]
    precision: NotRequired[float | None]
    recall: NotRequired[float | None]


# "from" is a keyword: the functional form declares it.
LabelBin = TypedDict("LabelBin", {"from": float, "to": float, "needed": int, "notNeeded": int, "unlabelled": int})


class TurnInjection(TypedDict):
    id: str
    inject: list[str]
    needed: list[str] | None


class ThresholdDetail(TypedDict):
    threshold: float
    turns: list[TurnInjection]


class WhatIf(TypedDict):
    turns: int
    labelled: int
    thresholds: list[ThresholdRow]
    suggested: Suggestion
    scores: list[LabelBin]
    detail: NotRequired[ThresholdDetail]


def _turn(row: Any, *, text: bool) -> GateTurn:
    data: GateTurn = {"id": row["id"], "at": row["at"], "agent": row["agent"], "audience": row["audience"],
            "mode": row["mode"], "candidates": row["source"], "model": row["model"], "outcome": row["outcome"],
            "latencyMs": row["latency_ms"], "offered": row["offered"], "shortlisted": row["shortlisted"],
            "decisions": json.loads(row["decisions"]), "settings": json.loads(row["settings"]),
            "journaled": row["message"] is not None,
            "needed": None if row["needed"] is None else json.loads(row["needed"]),
            "labelledAt": row["labelled_at"]}
    for key in ("would", "stage", "reason"):
        if row[key] is not None:
            data["wouldInject" if key == "would" else key] = row[key]
    if text and row["message"] is not None:
        data["message"] = row["message"]
        data["pages"] = json.loads(row["candidates"]) if row["candidates"] else []
    return data


def list_turns(store: Store, partition: str, *, journal: bool, offset: int = 0, limit: int = 50,
               labelled: bool | None = None) -> GateTurns:
    """Newest first.  ``journal``: only turns with their message text, and that text included."""
    where = ["partition = ?"]
    params: list[Any] = [partition]
    if journal:
        where.append("message IS NOT NULL")
    if labelled is not None:
        where.append("needed IS NOT NULL" if labelled else "needed IS NULL")
    clause = " AND ".join(where)
    total = store.db.one(f"SELECT COUNT(*) AS n FROM gate_turns WHERE {clause}", params)["n"]
    rows = store.db.all(f"SELECT * FROM gate_turns WHERE {clause} ORDER BY seq DESC LIMIT ? OFFSET ?",
                        (*params, limit, offset))
    result: GateTurns = {"turns": [_turn(row, text=journal) for row in rows], "total": total, "offset": offset}
    if offset + len(rows) < total:
        result["nextOffset"] = offset + len(rows)
    return result


def journal_turns(store: Store, partition: str, ids: Sequence[str] | None = None,
                  limit: int = LIST_MAX) -> list[GateTurn]:
    """Journal turns with their text: the given ids (in that order), else the newest ``limit``."""
    if ids:
        rows = {row["id"]: row for row in store.db.all(
            f"SELECT * FROM gate_turns WHERE partition = ? AND message IS NOT NULL AND id IN "
            f"({', '.join('?' * len(ids))})", (partition, *ids))}
        missing = [turn_id for turn_id in ids if turn_id not in rows]
        if missing:
            raise NotFound("no journal turn with that id", turn=missing[0])
        return [_turn(rows[turn_id], text=True) for turn_id in ids]
    rows = store.db.all("SELECT * FROM gate_turns WHERE partition = ? AND message IS NOT NULL "
                        "ORDER BY seq DESC LIMIT ?", (partition, limit))
    return [_turn(row, text=True) for row in rows]


def scored_turns(store: Store, partition: str, limit: int = KEEP_TURNS) -> list[dict[str, Any]]:
    """The newest ``limit`` turns that reached scoring (no ``stage`` stopped them), journal or not: id, model,
    decisions and label (``needed``), the least a threshold proposal reads (engine/gate/suggest.py)."""
    rows = store.db.all("SELECT id, model, decisions, needed FROM gate_turns WHERE partition = ? AND stage IS NULL "
                        "ORDER BY seq DESC LIMIT ?", (partition, limit))
    return [{"id": row["id"], "model": row["model"], "decisions": json.loads(row["decisions"]),
             "needed": None if row["needed"] is None else json.loads(row["needed"])} for row in rows]


def label_turn(store: Store, partition: str, turn_id: str, needed: list[str] | None) -> GateTurn:
    """Record which pages a journal turn actually needed (``[]``: none; ``None`` clears the label)."""
    if needed is not None:
        if not isinstance(needed, list) or not all(is_record_id(value) for value in needed):
            raise InvalidParams(f"needed must be a list of at most {NEEDED_MAX} record ids, or null", field="needed")
        check_count(needed, "needed", NEEDED_MAX, "record ids")
        needed = list(dict.fromkeys(needed))
    with store.db.atomic():
        row = store.db.one("SELECT * FROM gate_turns WHERE partition = ? AND id = ? AND message IS NOT NULL",
                           (partition, turn_id))
        if row is None:
            raise NotFound("no journal turn with that id", turn=turn_id)
        store.db.execute("UPDATE gate_turns SET needed = ?, labelled_at = ? WHERE seq = ?",
                         (None if needed is None else json.dumps(needed),
                          None if needed is None else format_timestamp(utc_now()), row["seq"]))
    return _turn(store.db.one("SELECT * FROM gate_turns WHERE seq = ?", (row["seq"],)), text=True)


def clear_journal(store: Store, partition: str) -> int:
    """Forget every kept message text and candidate text (scores, ids and labels stay); returns how many."""
    with store.db.atomic():
        cursor = store.db.execute(
            "UPDATE gate_turns SET message = NULL, candidates = NULL WHERE partition = ? AND message IS NOT NULL",
            (partition,))
    return cursor.rowcount


# --- what each threshold would inject ------------------------------------------------------------------


def what_if(turns: Sequence[dict[str, Any]], thresholds: Sequence[float] = THRESHOLD_GRID,
            detail: float | None = None) -> WhatIf:
    """Per threshold: what would have been injected over ``turns``, and precision/recall on the labelled ones.

    Precision and recall count pages: a needed page the gate never scored
    (not a candidate, or unscored) is missed at every threshold.  The
    suggestion is the threshold with the best F1 over the labelled turns
    (ties: the higher threshold, which injects less); none with fewer than
    ``MIN_LABELLED_FOR_SUGGESTION`` labelled turns.
    """
    scored = [turn for turn in turns if turn.get("stage") is None]
    labelled = [turn for turn in scored if turn.get("needed") is not None]
    every, marked = [_TurnScores.of(turn) for turn in scored], [_TurnScores.of(turn) for turn in labelled]
    rows = []
    for threshold in sorted(set(thresholds)):
        rows.append(_threshold_row(every, marked, len(scored), threshold))
    suggestion: Suggestion = {"threshold": None}
    candidates = [row for row in rows if row["f1"] is not None]
    if len(labelled) < MIN_LABELLED_FOR_SUGGESTION:
        suggestion["reason"] = (f"label at least {MIN_LABELLED_FOR_SUGGESTION} journal turns "
                                f"({len(labelled)} labelled so far)")
    elif not candidates:
        suggestion["reason"] = "no labelled turn needed a page the gate scored"
    else:
        best = max(candidates, key=lambda row: (row["f1"], row["threshold"]))
        suggestion = {"threshold": best["threshold"], "f1": best["f1"], "precision": best["precision"],
                      "recall": best["recall"]}
    result: WhatIf = {"turns": len(scored), "labelled": len(labelled), "thresholds": rows,
                              "suggested": suggestion, "scores": score_bins(scored)}
    if detail is not None:
        result["detail"] = {"threshold": detail, "turns": [
            {"id": turn["id"], "inject": _injected(turn, detail), "needed": turn.get("needed")} for turn in scored]}
    return result


def score_bins(scored: Sequence[dict[str, Any]], bins: int = SCORE_BINS) -> list[LabelBin]:
    """The journal's scores in ``bins`` equal-width bins over 0..1, split by what the owner's labels say.

    ``needed``: scores of pages a labelled turn needed; ``notNeeded``: of the
    other pages of labelled turns; ``unlabelled``: of pages of turns not
    labelled yet.  A page without a score (unscored at the deadline, or an
    answer without a probability) is in no bin.
    """
    histogram: list[LabelBin] = [{"from": round(n / bins, 4), "to": round((n + 1) / bins, 4), "needed": 0,
                                  "notNeeded": 0, "unlabelled": 0} for n in range(bins)]
    for turn in scored:
        needed = None if turn.get("needed") is None else set(turn["needed"])
        for decision in turn["decisions"]:
            score = decision.get("score")
            if score is None:
                continue
            slot = histogram[min(bins - 1, max(0, int(float(score) * bins)))]
            slot["unlabelled" if needed is None else "needed" if decision.get("id") in needed else "notNeeded"] += 1
    return histogram


def _injected(turn: dict[str, Any], threshold: float) -> list[str]:
    return [d["id"] for d in turn["decisions"] if d.get("score") is not None and d["score"] >= threshold]


@dataclass(frozen=True)
class _TurnScores:
    """What a threshold row needs of one turn, read once for every threshold of a table."""
    scores: tuple[tuple[str, float], ...]   # (record id, score) of the pages that have a score, in order
    quiet_below: float | None                # every page has a score and all are below this: the highest
    needed: frozenset[str] | None

    @classmethod
    def of(cls, turn: dict[str, Any]) -> "_TurnScores":
        decisions = turn["decisions"]
        scores = tuple((d["id"], d["score"]) for d in decisions if d.get("score") is not None)
        every_scored = len(scores) == len(decisions)
        return cls(scores, max((score for _, score in scores), default=float("-inf")) if every_scored else None,
                   None if turn.get("needed") is None else frozenset(turn["needed"]))

    def injected(self, threshold: float) -> list[str]:
        return [page for page, score in self.scores if score >= threshold]

    def quiet(self, threshold: float) -> bool:
        """Every page scored below ``threshold`` (a turn that scored no page at all is quiet too)."""
        return self.quiet_below is not None and self.quiet_below < threshold


def _threshold_row(scored: Sequence[_TurnScores], labelled: Sequence[_TurnScores], turns: int,
                   threshold: float) -> ThresholdRow:
    injecting = pages = quiet = 0
    for turn in scored:
        chosen = turn.injected(threshold)
        injecting += bool(chosen)
        pages += len(chosen)
        quiet += turn.quiet(threshold)
    hits = false_hits = misses = missed_when_quiet = 0
    for turn in labelled:
        chosen, needed = set(turn.injected(threshold)), turn.needed or frozenset()
        hits += len(chosen & needed)
        false_hits += len(chosen - needed)
        misses += len(needed - chosen)
        if needed and turn.quiet(threshold):
            missed_when_quiet += 1
    precision = hits / (hits + false_hits) if hits + false_hits else None
    recall = hits / (hits + misses) if hits + misses else None
    f1 = (2 * precision * recall / (precision + recall) if precision and recall else
          (0.0 if precision is not None and recall is not None else None))
    return {"threshold": threshold, "turnsInjecting": injecting, "pagesInjected": pages,
            "pagesPerTurn": round(pages / turns, 3) if turns else 0.0,
            # As a skipHintBelow cutoff: turns that would get the hint, and labelled ones that needed a page.
            "skipHintTurns": quiet, "skipHintMisses": missed_when_quiet,
            "precision": _round(precision), "recall": _round(recall), "f1": _round(f1)}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)
