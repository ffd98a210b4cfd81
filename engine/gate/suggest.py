"""Thresholds from the owner's own shadow log: the settings a precision asks for, and where the gate would fire.

``suggest_thresholds`` reads the scored turns of the gate log (``gate_turns``,
the Decision model in force only: another model's scores are on another
scale) and answers, for the precision the owner asks for (``precision``,
default 0.8):

- ``highThreshold``: the lowest threshold whose precision on the labelled
  pages is at least the asked one, found by scanning down from the best
  score and stopping at the first drop below it once ``MIN_PAGES`` pages are
  above (so a lucky bounce further down is never taken), with the
  precision and recall the labels show there, Wilson's lower bound
  (``precisionLow``, one standard error) and how many turns and pages it
  rests on.  Below ``MIN_LABELLED_TURNS`` labelled turns or
  ``MIN_NEEDED_PAGES`` needed pages with a score, or when no threshold
  reaches the precision on at least ``MIN_PAGES`` pages, none is proposed
  and ``reason`` says why;
- ``mediumThreshold``: where pointer lines help: the same scan below
  ``highThreshold`` at ``pointerPrecision`` (default 0.5: a pointer costs one
  line), when a needed page scored below ``highThreshold``;
- ``skipHintBelow``: the same scan up from the quietest labelled turn, at
  most the lowest tier: the hint goes to turns whose best page is below it,
  and at the asked precision they needed no page;
- ``distribution``: with or without labels, the quantiles of the logged
  turns' scores and how often the gate would fire at candidate thresholds.

Why this rule (docs/recall-gate.md, "Thresholds from labels"): in the seeded
simulation (engine/bench/gate_thresholds.py) the lowest threshold whose
observed precision reaches the target is often one where the labels
happened to be kind, and Wilson lower bounds at 0.5-1.6 standard errors
overshoot the asked precision by 0.03-0.1 on 50 turns; the top-down scan's
precision on the next turns is centred on the asked one.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from ..core.answers import NotRequired, TypedDict
from ..core.words import counted, for_count

DEFAULT_PRECISION = 0.8
DEFAULT_POINTER_PRECISION = 0.5
PRECISION_RANGE = (0.05, 0.99)   # the precisions an owner may ask for (and pointerPrecision), wherever asked
Z = 1.0                       # the lower bound's standard errors (one-sided 84 %)
CONFIDENCE = round(100 * NormalDist().cdf(Z))   # 84: how sure the lower bound is, as the owner reads it
MIN_LABELLED_TURNS = 20
MIN_NEEDED_PAGES = 10
MIN_PAGES = 10                # labelled pages at or above a proposed cutoff
FIRING_SHARES = (0.5, 0.25, 0.1, 0.05, 0.01)   # candidate thresholds: the gate fires on this share of turns
QUANTILES = (0.5, 0.75, 0.9, 0.95, 0.99)
DIGITS = 4


# --- answers ---------------------------------------------------------------------------------------


class HighProposal(TypedDict):
    """``highThreshold`` and what the labelled turns show at it."""

    threshold: float
    precision: float        # observed on the labelled pages at or above it
    precisionLow: float     # the lower bound the rule held to the asked precision
    recall: float           # of every page the labelled turns needed (never scored: missed)
    pagesInjected: int
    turnsInjecting: int


class PointerProposal(TypedDict):
    """``mediumThreshold``: the band from it up to ``highThreshold`` gets pointer lines."""

    threshold: float
    precision: float        # needed pages among the band's
    precisionLow: float
    recallGained: float     # needed pages in the band, of all needed pages
    pointers: int           # labelled pages in the band


class HintProposal(TypedDict):
    """``skipHintBelow``: turns whose every page scores below it get the skip hint."""

    threshold: float
    precision: float        # hinted labelled turns that needed no page
    precisionLow: float
    hintedTurns: int
    hintedNeeding: int      # hinted turns that needed a page after all


class Quantiles(TypedDict):
    p50: float
    p75: float
    p90: float
    p95: float
    p99: float
    max: float


class Firing(TypedDict):
    """At ``threshold``: the share of logged turns that would inject, and pages per turn."""

    threshold: float
    turnsInjecting: int
    share: float
    pagesPerTurn: float


class ScoreDistribution(TypedDict):
    """The logged turns' scores without labels: where the gate would fire and how often."""

    turns: int
    pages: int
    pageScores: Quantiles | None      # every scored page
    turnTopScores: Quantiles | None   # each turn's best page
    firing: list[Firing]


class InForce(TypedDict):
    """What the labelled turns show at the ``highThreshold`` in force, to weigh the proposal against."""

    threshold: float
    precision: float | None  # None: no labelled page scored at or above it
    recall: float | None     # None: the labelled turns needed no page
    pagesInjected: int
    turnsInjecting: int


class GateSuggestion(TypedDict):
    """``operator/suggestGateThresholds``: the proposal for the asked precision, or why there is none."""

    precision: float
    pointerPrecision: float | None  # None: none given and the precision asked is at or below the default one
    model: str | None               # the Decision model whose turns were read
    turns: int                      # scored turns of that model
    otherModelTurns: int            # left out: scored by another model
    labelled: int
    neededPages: int
    neededScored: int
    highThreshold: HighProposal | None
    mediumThreshold: PointerProposal | None
    skipHintBelow: HintProposal | None
    apply: dict[str, float | None]  # the recallGate keys applying the proposal writes ({} without one)
    notes: list[str]                # why a tier was not proposed
    inForce: InForce | None         # the same labels at the highThreshold in force (None: no label, or none known)
    distribution: ScoreDistribution
    reason: NotRequired[str]        # why no highThreshold


def suggest_thresholds(turns: Sequence[dict[str, Any]], model: str | None, precision: float = DEFAULT_PRECISION,
                       pointer_precision: float | None = DEFAULT_POINTER_PRECISION,
                       current: dict[str, Any] | None = None) -> GateSuggestion:
    """The proposal for ``precision`` from the gate log's scored ``turns`` (journal.scored_turns) of ``model``.

    ``current``: the ``recallGate`` settings in force (their ``highThreshold``
    is one of the distribution's candidate thresholds).  ``pointer_precision``
    None: no ``mediumThreshold`` is proposed (``notes`` says why).
    """
    mine = [turn for turn in turns if turn.get("model") == model]
    proposal = propose(mine, precision, pointer_precision, current)
    extra = [current["highThreshold"]] if current and current.get("highThreshold") is not None else []
    if proposal["highThreshold"] is not None:
        extra.append(proposal["highThreshold"]["threshold"])
    answer: GateSuggestion = {
        "precision": precision, "pointerPrecision": pointer_precision, "model": model, "turns": len(mine),
        "otherModelTurns": len(turns) - len(mine), "labelled": proposal["labelled"],
        "neededPages": proposal["neededPages"], "neededScored": proposal["neededScored"],
        "highThreshold": proposal["highThreshold"], "mediumThreshold": proposal["mediumThreshold"],
        "skipHintBelow": proposal["skipHintBelow"], "apply": proposal["apply"], "notes": proposal["notes"],
        "inForce": at_threshold(mine, float(current["highThreshold"]))
        if current and current.get("highThreshold") is not None else None,
        "distribution": distribution(mine, extra)}
    if "reason" in proposal:
        answer["reason"] = proposal["reason"]
    return answer


def at_threshold(turns: Sequence[dict[str, Any]], threshold: float) -> InForce | None:
    """Precision and recall the labelled ones of ``turns`` show at ``threshold`` (None without a labelled turn)."""
    labelled = [_labelled(turn) for turn in turns if turn.get("needed") is not None and turn.get("stage") is None]
    if not labelled:
        return None
    pages = [page for turn in labelled for page in turn.pages if page[0] >= threshold]
    good = sum(needed for _, needed in pages)
    needed_total = sum(sum(needed for _, needed in turn.pages) + turn.unscored_needed for turn in labelled)
    return {"threshold": threshold, "precision": _round(good / len(pages)) if pages else None,
            "recall": _round(good / needed_total) if needed_total else None, "pagesInjected": len(pages),
            "turnsInjecting": sum(any(score >= threshold for score, _ in turn.pages) for turn in labelled)}


def in_force_phrase(answer: GateSuggestion | dict[str, Any], names: dict[str, str] | None = None) -> str | None:
    """What the same labels show at the ``highThreshold`` in force, in a phrase (None: nothing to compare)."""
    now = answer.get("inForce")
    if now is None:
        return None
    name = (names or {}).get("highThreshold", "highThreshold")
    precision = "-" if now["precision"] is None else f"{now['precision']:.2f}"
    recall = "-" if now["recall"] is None else f"{now['recall']:.2f}"
    return (f"{name} {now['threshold']:g} (in force now): precision {precision}, recall {recall}, on "
            f"{counted(now['pagesInjected'], 'page')} of {counted(now['turnsInjecting'], 'turn')}")


def tier_phrases(answer: GateSuggestion | dict[str, Any], names: dict[str, str] | None = None) -> list[str]:
    """Each proposed tier in a phrase, as the command line and the window show them; ``names``: the words for
    each setting's key (the window's labels), else the key as config.json spells it."""
    def name(key: str) -> str:
        return (names or {}).get(key, key)

    phrases = []
    high, medium, hint = answer.get("highThreshold"), answer.get("mediumThreshold"), answer.get("skipHintBelow")
    if high is not None:
        phrases.append(f"{name('highThreshold')} {high['threshold']:g}: precision {high['precision']:.2f} (at least "
                       f"{high['precisionLow']:.2f} with {CONFIDENCE} % confidence), recall {high['recall']:.2f}, on "
                       f"{high['pagesInjected']:,} pages of {high['turnsInjecting']:,} turns")
    if medium is not None:
        phrases.append(f"{name('mediumThreshold')} {medium['threshold']:g}: pointer lines for {medium['pointers']:,} "
                       f"pages, {medium['precision']:.2f} of them needed, recall +{medium['recallGained']:.2f}")
    if hint is not None:
        phrases.append(f"{name('skipHintBelow')} {hint['threshold']:g}: {hint['hintedTurns']:,} turns hinted, "
                       f"{hint['hintedNeeding']:,} of them needed a page (precision {hint['precision']:.2f})")
    return phrases


# --- the rule --------------------------------------------------------------------------------------


def wilson_low(successes: int, trials: int, z: float = Z) -> float:
    """The lower end of Wilson's score interval for ``successes`` of ``trials`` (0 without trials)."""
    if trials <= 0:
        return 0.0
    share = successes / trials
    z2 = z * z
    centre = share + z2 / (2 * trials)
    spread = z * math.sqrt(share * (1 - share) / trials + z2 / (4 * trials * trials))
    return max(0.0, (centre - spread) / (1 + z2 / trials))


@dataclass(frozen=True)
class _Labelled:
    """One labelled turn as the rule reads it: its scored pages, whether each was needed, and its misses."""

    pages: tuple[tuple[float, bool], ...]   # (score, needed) of the pages with a score
    unscored_needed: int                     # needed pages never scored (not a candidate, or unscored)
    top: float | None                        # every page scored: the best score (-inf: no page); else None

    @property
    def needing(self) -> bool:
        return self.unscored_needed > 0 or any(needed for _, needed in self.pages)


def _labelled(turn: dict[str, Any]) -> _Labelled:
    needed = set(turn["needed"])
    decisions = turn["decisions"]
    pages = tuple((float(d["score"]), d.get("id") in needed) for d in decisions if d.get("score") is not None)
    scored_ids = {d.get("id") for d in decisions if d.get("score") is not None}
    every_scored = len(pages) == len(decisions)
    top = max((score for score, _ in pages), default=float("-inf")) if every_scored else None
    return _Labelled(pages, len(needed - scored_ids), top)


def _cut_between(upper: float, lower: float | None) -> float:
    """A threshold that keeps ``upper`` and leaves ``lower`` out: their midpoint, to ``DIGITS`` decimals."""
    cut = _floor(upper) if lower is None else round((upper + lower) / 2, DIGITS)
    if lower is not None and not lower < cut <= upper:
        cut = _floor(upper)
    return cut


def _floor(value: float) -> float:
    return math.floor(value * 10**DIGITS) / 10**DIGITS


@dataclass(frozen=True)
class _Reach:
    """How far a scan held the target: the last value it reached, the next one, and the counts up to it."""

    value: float
    following: float | None
    good: int
    count: int

    @property
    def bound(self) -> float:
        return wilson_low(self.good, self.count)


def _scan(ordered: Sequence[tuple[float, bool]], target: float) -> _Reach | str:
    """How far down ``ordered`` (values in scan order, each good or not) the good share stays at ``target``.

    Items are counted a value at a time; the scan stops at the first value
    where the share falls below ``target`` once ``MIN_PAGES`` items are
    counted (before that, one or two items decide the share).  The answer is
    the last value where the share was at ``target``, or why there is none.
    """
    best: _Reach | None = None
    good = count = position = 0
    while position < len(ordered):
        value = ordered[position][0]
        while position < len(ordered) and ordered[position][0] == value:
            good += ordered[position][1]
            count += 1
            position += 1
        if good >= target * count - 1e-9:
            best = _Reach(value, ordered[position][0] if position < len(ordered) else None, good, count)
        elif count >= MIN_PAGES:
            break
    if best is None:
        return "not even at the end where the scores are clearest"
    if best.count < MIN_PAGES:
        return (f"only {counted(best.count, 'labelled item')} {for_count(best.count, 'reaches', 'reach')} it, and a "
                f"cutoff needs at least {MIN_PAGES} to rest on")
    return best


def _lowest_cut(pages: Sequence[tuple[float, bool]], target: float) -> tuple[float, _Reach] | str:
    """The lowest cutoff whose pages at or above it are needed at ``target``, scanning down from the best
    score; the cutoff falls between the last score kept and the next one."""
    reach = _scan(sorted(pages, key=lambda page: -page[0]), target)
    return reach if isinstance(reach, str) else (_cut_between(reach.value, reach.following), reach)


def propose(turns: Sequence[dict[str, Any]], precision: float = DEFAULT_PRECISION,
            pointer_precision: float | None = DEFAULT_POINTER_PRECISION,
            current: dict[str, Any] | None = None) -> dict[str, Any]:
    """The tiers for ``precision`` from the labelled ones of ``turns`` (each as the gate log keeps it).

    Returns the proposal keys of ``GateSuggestion``: labelled, neededPages,
    neededScored, highThreshold, mediumThreshold, skipHintBelow, apply, notes
    and reason.  ``current``: the settings in force (``apply`` turns a
    ``mediumThreshold`` off when it would no longer be below the new
    ``highThreshold``).
    """
    labelled = [_labelled(turn) for turn in turns if turn.get("needed") is not None and turn.get("stage") is None]
    pages = [page for turn in labelled for page in turn.pages]
    needed_scored = sum(needed for _, needed in pages)
    needed_total = needed_scored + sum(turn.unscored_needed for turn in labelled)
    answer: dict[str, Any] = {"labelled": len(labelled), "neededPages": needed_total, "neededScored": needed_scored,
                              "highThreshold": None, "mediumThreshold": None, "skipHintBelow": None, "apply": {},
                              "notes": []}
    if len(labelled) < MIN_LABELLED_TURNS:
        answer["reason"] = (f"label at least {MIN_LABELLED_TURNS} journal turns for a proposal "
                            f"({len(labelled)} labelled so far)")
        return answer
    if needed_scored < MIN_NEEDED_PAGES:
        answer["reason"] = (f"the labelled turns needed {counted(needed_scored, 'page')} the gate scored; a proposal "
                            f"needs at least {MIN_NEEDED_PAGES} (label turns that needed a page)")
        return answer
    high = _lowest_cut(pages, precision)
    if isinstance(high, str):
        answer["reason"] = (f"no highThreshold reaches precision {precision:g} on these labels: {high}; ask for a "
                            "lower precision or label more turns")
        return answer
    cut, reach = high
    answer["highThreshold"] = {
        "threshold": cut, "precision": _round(reach.good / reach.count), "precisionLow": _round(reach.bound),
        "recall": _round(reach.good / needed_total), "pagesInjected": reach.count,
        "turnsInjecting": sum(any(score >= cut for score, _ in turn.pages) for turn in labelled)}
    apply: dict[str, float | None] = {"highThreshold": cut}

    medium = _pointer_band(pages, cut, needed_total, pointer_precision) if pointer_precision is not None else (
        f"mediumThreshold: not proposed for precision {precision:g}, at or below pointer lines' own "
        f"{DEFAULT_POINTER_PRECISION:g} (ask with a pointerPrecision below it for one)")
    if isinstance(medium, str):
        answer["notes"].append(medium)
    else:
        answer["mediumThreshold"] = medium
        apply["mediumThreshold"] = medium["threshold"]
    if "mediumThreshold" not in apply and current and current.get("mediumThreshold") is not None \
            and current["mediumThreshold"] >= cut:
        apply["mediumThreshold"] = None   # no longer below highThreshold: the pointer tier goes off
        answer["notes"].append(f"mediumThreshold {current['mediumThreshold']:g} would not be below the proposed "
                               f"highThreshold; applying turns pointer lines off")
    lowest_tier = apply.get("mediumThreshold") or cut
    hint = _skip_hint(labelled, lowest_tier, precision)
    if isinstance(hint, str):
        answer["notes"].append(hint)
    else:
        answer["skipHintBelow"] = hint
        apply["skipHintBelow"] = hint["threshold"]
    answer["apply"] = apply
    return answer


def _pointer_band(pages: Sequence[tuple[float, bool]], high: float, needed_total: int,
                  target: float) -> PointerProposal | str:
    below = [page for page in pages if page[0] < high]
    if not any(needed for _, needed in below):
        return "mediumThreshold: no needed page scored below the proposed highThreshold, so pointers would not help"
    band = _lowest_cut(below, target)
    if isinstance(band, str):
        return (f"mediumThreshold: no band below the proposed highThreshold holds needed pages at precision "
                f"{target:g} ({band}), so pointer lines would mostly point at pages not needed")
    cut, reach = band
    return {"threshold": cut, "precision": _round(reach.good / reach.count), "precisionLow": _round(reach.bound),
            "recallGained": _round(reach.good / needed_total), "pointers": reach.count}


def _skip_hint(labelled: Sequence[_Labelled], ceiling: float, target: float) -> HintProposal | str:
    """The highest cutoff (at most ``ceiling``) whose hinted turns needed no page at ``target``, scanning up from
    the quietest turn; the cutoff falls between the last best score kept and the next one."""
    tops = sorted((turn.top, not turn.needing) for turn in labelled
                  if turn.top is not None and turn.top != float("-inf") and turn.top < ceiling)
    reach = _scan(tops, target)
    if isinstance(reach, str):
        return (f"skipHintBelow: no cutoff below the lowest tier hints turns that needed no page at precision "
                f"{target:g} ({reach}), so the hint would mislead")
    upper = ceiling if reach.following is None else reach.following
    cut = min(ceiling, round((reach.value + upper) / 2, DIGITS))
    if cut <= reach.value:
        cut = upper
    return {"threshold": cut, "precision": _round(reach.good / reach.count), "precisionLow": _round(reach.bound),
            "hintedTurns": reach.count, "hintedNeeding": reach.count - reach.good}


# --- without labels --------------------------------------------------------------------------------


def distribution(turns: Sequence[dict[str, Any]], extra: Iterable[float] = ()) -> ScoreDistribution:
    """Where the gate would fire over the logged ``turns``: score quantiles, and the share of turns that would
    inject at the thresholds where it fires on ``FIRING_SHARES`` of them (and at ``extra`` ones)."""
    scored = [turn for turn in turns if turn.get("stage") is None]
    per_turn = [[float(d["score"]) for d in turn["decisions"] if d.get("score") is not None] for turn in scored]
    every = sorted(score for scores in per_turn for score in scores)
    tops = sorted(max(scores) for scores in per_turn if scores)
    # Rounded down: a threshold rounded up could leave out the very page it was read from.
    thresholds = {_floor(_quantile(tops, 1 - share)) for share in FIRING_SHARES if tops}
    thresholds.update(_floor(float(value)) for value in extra)
    firing: list[Firing] = []
    for threshold in sorted(thresholds):
        injecting = sum(any(score >= threshold for score in scores) for scores in per_turn)
        pages = sum(score >= threshold for scores in per_turn for score in scores)
        firing.append({"threshold": threshold, "turnsInjecting": injecting,
                       "share": _round(injecting / len(scored)) if scored else 0.0,
                       "pagesPerTurn": _round(pages / len(scored)) if scored else 0.0})
    return {"turns": len(scored), "pages": len(every), "pageScores": _quantiles(every),
            "turnTopScores": _quantiles(tops), "firing": firing}


def _quantile(ordered: Sequence[float], share: float) -> float:
    """The nearest-rank quantile of a sorted, non-empty sequence."""
    return ordered[min(len(ordered) - 1, max(0, math.ceil(share * len(ordered)) - 1))]


def _quantiles(ordered: Sequence[float]) -> Quantiles | None:
    if not ordered:
        return None
    values = {f"p{round(share * 100)}": _round(_quantile(ordered, share)) for share in QUANTILES}
    return {**values, "max": _round(ordered[-1])}  # type: ignore[typeddict-item]


def _round(value: float) -> float:
    return round(value, DIGITS)
