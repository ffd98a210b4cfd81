"""The recall gate's operator methods: settings, gate log, shadow journal, labels, what-if and replay.

The desktop's gate view calls these over the socket as the operator
(registered by engine/operator/methods.py).  Settings are the only change to
configuration; labels and clearing the journal change only the store's gate
state, never knowledge.  Everything is read from the agent's private
partition, like every other operator method.

    method                       params                                         changes
    operator/gateSettings        -                                              -
    operator/checkGateSettings   recallGate                                     -
    operator/setGateSettings     recallGate (object, or null to remove it)      config.json recallGate
    operator/gateLog             agent, offset?, limit?                         -
    operator/gateJournal         agent, offset?, limit?, labelled?              -
    operator/labelGateTurn       agent, turn, needed (record ids, or null)      the turn's label
    operator/clearGateJournal    agent                                          drops kept message texts
    operator/gateWhatIf          agent, thresholds?, threshold?                 -
    operator/gateReplay          agent, turns?, recallGate?, decisionModel?     -
    operator/startGateReplay     as gateReplay                                  a job (operator/job polls it)
    operator/suggestGateThresholds  agent? | store?, precision?, pointerPrecision?  -
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable, Mapping, Protocol, TypeVar, cast

from models.installed import ModelStore

from ..access.authority import Entry, OperatorCaller
from ..core.answers import JsonObject, JsonValue, NotRequired, TypedDict
from ..core.jobs import JobAnswer
from ..decision.runtime import DecisionStatusAnswer
from ..state.config import parse_settings
from ..decision.runtime import DecisionRuntime
from ..core.errors import InvalidParams, KnowledgeError
from ..gate.turn import GateEngine, GateStop, authority_check, evaluate, in_force
from ..gate.journal import LIST_MAX, THRESHOLD_GRID, GateTurn, WhatIf, clear_journal, journal_turns, label_turn
from ..gate.journal import list_turns, scored_turns, what_if
from ..gate.suggest import (
    DEFAULT_POINTER_PRECISION, DEFAULT_PRECISION, PRECISION_RANGE, GateSuggestion, suggest_thresholds,
)
from ..core.methods import Method
from ..core.methods import handlers as method_handlers
from ..state.gate_settings import KEYS, GateConfig, GateSettings, check_tiers, parse_gate_settings
from ..core.params import AGENT, NO_PARAMS, Flag, Integer, Number, Params, String, Value
from ..core.jobs import Jobs
from ..index.searchable import SearchableStore
from ..index.similarity import DECISION_LOADERS
from ..state.statedir import StateDir
from ..access.stores import StoreResolver
from ..state.registry import StoreRecord
from ..sync.remotes import CHOOSE_STORE, DEFAULT_AGENT
from ..vault.records import PRIVATE_SCOPE
from .partitions import StoreLane

REPLAY_MAX_TURNS = 50
REPLAY_DEFAULT_TURNS = 20
MODEL_LOAD_TIMEOUT_S = 300.0
ReplayProgress = Callable[[int, int, str], None]   # (turns done, turns, message); raises to stop
T = TypeVar("T")


# --- answers ---------------------------------------------------------------------------------------
# A gate turn and the what-if table are the gate journal's (engine/gate/journal.py), passed on as it
# answers them: here they are JSON objects.


class GateSettingsView(TypedDict):
    """The ``recallGate`` block as config.json holds it, the settings in force (null: no gate), the keys a
    block may hold, config.json's problem, and the Decision model with its status."""

    recallGate: JsonValue
    effective: GateConfig | None
    keys: list[str]
    problem: str | None
    decisionModel: str | None
    decision: DecisionStatusAnswer


class GateCheck(TypedDict):
    valid: bool
    message: NotRequired[str]
    field: NotRequired[JsonValue]
    effective: NotRequired[GateConfig | None]


class GateTurns(TypedDict):
    turns: list[JsonObject]
    total: int
    offset: int
    nextOffset: NotRequired[int]


class JournalCleared(TypedDict):
    cleared: int


class ReplayedTurn(TypedDict):
    """One journal turn run again: the decisions now beside the ``original`` ones, or the stage that stopped
    it and why."""

    id: str
    message: str
    needed: list[str] | None
    original: JsonValue
    decisions: list[JsonObject]
    wouldInject: str
    inject: list[str]
    stage: NotRequired[str]
    reason: NotRequired[str]
    latencyMs: float


class Replay(TypedDict):
    settings: GateConfig
    model: str | None
    turns: list[ReplayedTurn]
    whatIf: JsonObject


class GateOperatorEngine(GateEngine, Protocol):
    """What gate tuning needs of the engine: the gate's needs, plus the jobs a replay runs as and the
    state directory's models (a replay may load another Decision model)."""

    @property
    def jobs(self) -> Jobs: ...

    @property
    def state(self) -> StateDir: ...

    @property
    def resolver(self) -> StoreResolver: ...

    def maintain(self, record: StoreRecord, work: Callable[[StoreLane], T]) -> T: ...


def methods(engine: GateOperatorEngine) -> tuple[Method, ...]:
    """The gate view's ``operator/*`` methods (engine/core/methods.py)."""
    gate = GateOperator(engine)
    return (
        Method("gateSettings", NO_PARAMS, GateSettingsView, gate.settings),
        Method("checkGateSettings", GATE_BLOCK, GateCheck, gate.check_settings),
        Method("setGateSettings", NEW_GATE_BLOCK, GateSettingsView, gate.set_settings),
        Method("gateLog", LOG, GateTurns, gate.log),
        Method("gateJournal", JOURNAL, GateTurns, gate.journal),
        Method("labelGateTurn", LABEL, GateTurn, gate.label),  # the journal's turn, as it answers it
        Method("clearGateJournal", AGENT, JournalCleared, gate.clear),
        Method("gateWhatIf", WHAT_IF, WhatIf, gate.what_if),  # the journal's table, as it answers it
        Method("gateReplay", REPLAY, Replay, gate.replay),
        Method("startGateReplay", REPLAY, JobAnswer, gate.start_replay),
        Method("suggestGateThresholds", SUGGEST, GateSuggestion, gate.suggest),
    )


def handlers(engine: GateOperatorEngine) -> dict[str, Callable[[dict[str, Any]], Any]]:
    """``operator/<name>`` handlers taking the request's params."""
    return method_handlers(methods(engine))


def _thresholds(value: Any, field: str) -> list[float]:
    if not isinstance(value, list) or not 1 <= len(value) <= 101:
        raise InvalidParams(f"{field} must be a list of 1-101 numbers from 0 to 1", field=field)
    return [THRESHOLD.check(item, field) for item in value]


def _turn_ids(value: Any, field: str) -> list[str]:
    if (not isinstance(value, list) or not 1 <= len(value) <= REPLAY_MAX_TURNS
            or not all(isinstance(turn, str) and turn for turn in value)):
        raise InvalidParams(f"{field} must be a list of 1-{REPLAY_MAX_TURNS} journal turn ids", field=field)
    return value


THRESHOLD = Number("threshold", 0, 1)
WINDOW = Params(Integer("offset", 0, 10**9, default=0), Integer("limit", 1, LIST_MAX, default=50))
# parse_gate_settings reads the block itself; to save one, it must be given (null removes it).
GATE_BLOCK = Params(Value("recallGate"))
NEW_GATE_BLOCK = Params(Value("recallGate", required=True))
LOG = AGENT + WINDOW
JOURNAL = LOG + Params(Flag("labelled"))
LABEL = AGENT + Params(String("turn", required=True, min_chars=1, what="a journal turn id"),
                       Value("needed", required=True))  # label_turn reads the ids
WHAT_IF = AGENT + Params(Value("thresholds", _thresholds, default=list(THRESHOLD_GRID)), THRESHOLD)
SUGGEST = CHOOSE_STORE + Params(
    Number("precision", *PRECISION_RANGE, default=DEFAULT_PRECISION, description="the precision the owner asks for"),
    Number("pointerPrecision", *PRECISION_RANGE,
           description=f"the share of pointer lines that should point at a needed page; below precision (default "
                       f"{DEFAULT_POINTER_PRECISION:g} where precision is above it, else no pointer tier)"))
REPLAY = AGENT + Params(Value("turns", _turn_ids), Value("recallGate"), Value("decisionModel"))


class GateOperator:
    def __init__(self, engine: GateOperatorEngine) -> None:
        self.engine = engine

    # --- settings ---------------------------------------------------------------------------------

    def settings(self, params: dict[str, Any]) -> GateSettingsView:
        """The ``recallGate`` block as written, the settings in force with defaults, and the model's status."""
        NO_PARAMS.read(params)
        source = self.engine.settings
        current = source.current()
        gate = current.recall_gate
        # effective: highThreshold as the turn uses it (the Decision model's documented one when the block has none)
        return {"recallGate": current.raw.get("recallGate"),
                "effective": in_force(gate, self.engine.decision).to_config() if gate else None,
                "keys": list(KEYS), "problem": source.problem, "decisionModel": current.decision_model,
                "decision": self.engine.decision.status().to_dict()}

    def check_settings(self, params: dict[str, Any]) -> GateCheck:
        """Validate a proposed block without saving it."""
        block = GATE_BLOCK.read(params)["recallGate"]
        try:
            effective = self._checked_in_force(block)
        except InvalidParams as exc:
            return {"valid": False, "message": exc.message, "field": exc.details.get("field")}
        return {"valid": True, "effective": effective.to_config() if effective else None}

    def set_settings(self, params: dict[str, Any]) -> GateSettingsView:
        """Write the block to config.json (``null`` removes it: the gate stops running)."""
        block = NEW_GATE_BLOCK.read(params)["recallGate"]
        self._checked_in_force(block)
        source = self.engine.settings
        raw = dict(source.current().raw)
        if block is None:
            raw.pop("recallGate", None)
        else:
            raw["recallGate"] = block
        source.save(parse_settings(json.loads(json.dumps(raw))))
        return self.settings({})

    def _checked_in_force(self, block: Any) -> GateSettings | None:
        """A ``recallGate`` block's settings as a turn would use them, checked (its tiers again once the Decision
        model's threshold fills in); None for no block."""
        gate = parse_gate_settings(block)
        return check_tiers(in_force(gate, self.engine.decision)) if gate is not None else None

    # --- the gate log and the journal -------------------------------------------------------------

    def _on_private(self, agent: str, work: Callable[[Any, str], T]) -> T:
        return self.engine.on_store(OperatorCaller(agent), lambda runtime, a: work(runtime.store, a.partition))

    def log(self, params: dict[str, Any]) -> GateTurns:
        """Recent gate turns (ids, scores, tiers, outcomes, latency), newest first; never message text.  Each
        decision names its page's ``title`` too, where the page is still in the partition."""
        values = LOG.read(params)

        def work(runtime: Any, authority: Any) -> GateTurns:
            turns = list_turns(runtime.store, authority.partition, journal=False, offset=values["offset"],
                               limit=values["limit"])
            decisions = [decision for turn in turns["turns"] for decision in turn["decisions"]]
            ids = sorted({str(decision["id"]) for decision in decisions if isinstance(decision.get("id"), str)})
            titles = {row.record_id: row.title for row in runtime.catalog.label_rows(authority.partition, ids)
                      if row.title}
            for decision in decisions:
                if decision.get("id") in titles:
                    decision["title"] = titles[str(decision["id"])]
            return turns

        return self.engine.on_store(OperatorCaller(values["agent"]), work)

    def journal(self, params: dict[str, Any]) -> GateTurns:
        """Journal turns with their message text and candidates, newest first."""
        values = JOURNAL.read(params)
        return self._on_private(values["agent"], lambda store, partition: list_turns(
            store, partition, journal=True, offset=values["offset"], limit=values["limit"],
            labelled=values["labelled"]))

    def label(self, params: dict[str, Any]) -> JsonObject:
        values = LABEL.read(params)  # needed: the record ids the turn needed ([] for none), or null to clear
        return self._on_private(values["agent"], lambda store, partition: label_turn(
            store, partition, values["turn"], values["needed"]))

    def clear(self, params: dict[str, Any]) -> JournalCleared:
        return {"cleared": self._on_private(AGENT.read(params)["agent"], clear_journal)}

    def what_if(self, params: dict[str, Any]) -> JsonObject:
        """What each threshold would have injected over the journal turns; precision/recall where labelled."""
        values = WHAT_IF.read(params)
        grid, detail = list(values["thresholds"]), values["threshold"]
        current = self.engine.settings.current().recall_gate
        if current is not None:
            grid.append(in_force(current, self.engine.decision).high_threshold)
        turns = self._on_private(values["agent"], lambda store, partition: journal_turns(store, partition,
                                                                                          limit=5_000))
        return what_if(turns, grid, detail)

    def suggest(self, params: dict[str, Any]) -> GateSuggestion:
        """``highThreshold`` (and where they help ``mediumThreshold`` and ``skipHintBelow``) for the asked precision,
        from the labelled turns of the chosen store's gate log, and where the gate would fire without labels.

        Only the turns of the Decision model in force count (another model's scores are on another scale).
        """
        values = SUGGEST.read(params)
        precision, pointer = values["precision"], values["pointerPrecision"]
        if pointer is None:   # pointers are held to less than pages: none below a precision asked this low
            pointer = DEFAULT_POINTER_PRECISION if precision > DEFAULT_POINTER_PRECISION else None
        elif pointer >= precision:
            raise InvalidParams(f"pointerPrecision must be below precision ({precision:g})", field="pointerPrecision")
        record = self.engine.resolver.select(store=values["store"], agent=values["agent"], default_agent=DEFAULT_AGENT)
        self.engine.resolver.check(record)
        turns = self.engine.maintain(record, lambda runtime: scored_turns(runtime.store, PRIVATE_SCOPE))
        current = self.engine.settings.current()
        gate = current.recall_gate
        return suggest_thresholds(turns, current.decision_model, precision, pointer,
                                  dict(in_force(gate, self.engine.decision).to_config()) if gate else None)

    # --- replay -----------------------------------------------------------------------------------

    def replay(self, params: dict[str, Any]) -> Replay:
        """Run kept journal turns again, against the vault as it is now, with other settings or another model.

        Nothing is injected, logged as a turn or journaled.  ``recallGate``
        keys override the settings in force; ``decisionModel`` loads that
        model for this call only (the engine's own model is untouched).
        """
        return self.plan_replay(params)(None)

    def start_replay(self, params: dict[str, Any]) -> JobAnswer:
        """``gateReplay`` as a job (engine/core/jobs.py): progress per turn, cancellable between turns."""
        run = self.plan_replay(params)
        agent = params["agent"]
        return self.engine.jobs.start("replay", f"replay:{agent}", f"Replay of {agent}'s journal turns",
                                      lambda job: run(lambda done, total, message: job.progress(
                                          done, total, unit="turns", message=message)), unit="turns")

    def plan_replay(self, params: dict[str, Any]) -> Callable[[ReplayProgress | None], Replay]:
        """Check the request and read the kept turns now; the function returned does the slow part."""
        values = REPLAY.read(params)
        agent, turn_ids = values["agent"], values["turns"]
        current = self.engine.settings.current()
        overrides = values["recallGate"] or {}
        if not isinstance(overrides, dict):
            raise InvalidParams("recallGate must be an object of settings to override", field="recallGate")
        base: Mapping[str, object] = current.recall_gate.to_config() if current.recall_gate else {}
        gate = parse_gate_settings({**base, **overrides})
        assert gate is not None
        turns = self._on_private(agent, lambda store, partition: journal_turns(
            store, partition, turn_ids, limit=REPLAY_DEFAULT_TURNS))
        model = values["decisionModel"]
        settings = parse_settings({**current.raw, "decisionModel": model}) \
            if model is not None and model != current.decision_model else None

        def run(progress: ReplayProgress | None) -> Replay:
            report = progress or (lambda done, total, message: None)
            runtime, owned = self.engine.decision, settings is not None
            if settings is not None:
                runtime = DecisionRuntime(lambda: settings, ModelStore(self.engine.state.models),
                                          loaders=DECISION_LOADERS)
            try:
                loading_until = time.monotonic() + MODEL_LOAD_TIMEOUT_S
                while runtime.wait_ready(0.25).state == "loading" and time.monotonic() < loading_until:
                    report(0, len(turns), f"Loading {model}")
                ran = in_force(gate, runtime)   # the replayed model's documented highThreshold if none is set
                caller = OperatorCaller(agent)
                entry = self.engine.enter(caller, create=False)
                recheck = authority_check(entry)
                results: list[ReplayedTurn] = []
                for number, turn in enumerate(turns):
                    report(number, len(turns), f"Replaying turn {number + 1} of {len(turns)}")
                    results.append(self._replay_one(entry, recheck, runtime, ran, turn))
                report(len(turns), len(turns), "Done")
            finally:
                if owned:
                    runtime.close()
            replayed = [{"id": r["id"], "decisions": r["decisions"], "needed": r["needed"],
                         "stage": r.get("stage")} for r in results]
            return {"settings": ran.to_config(), "model": model or current.decision_model, "turns": results,
                    "whatIf": what_if(replayed, [ran.high_threshold])["thresholds"][0]}

        return run

    def _replay_one(self, entry: Entry[SearchableStore], recheck: Callable[[], None], runtime: DecisionRuntime,
                    gate: GateSettings, turn: dict[str, Any]) -> ReplayedTurn:
        started = runtime.now()   # deadlines are on the Decision runtime's clock
        result: dict[str, Any] = {"id": turn["id"], "message": turn["message"], "needed": turn.get("needed"),
                                  "original": turn["decisions"]}
        try:
            evaluation = evaluate(self.engine, runtime, entry, turn["message"], gate,
                                  started + gate.timeout_ms / 1000, recheck)
            result.update(decisions=[d.to_dict() for d in evaluation.decisions], wouldInject=evaluation.would,
                          inject=[d.id for d in evaluation.decisions if d.tier == "high"])
        except GateStop as exc:
            result.update(decisions=[], stage=exc.stage, reason=exc.reason, wouldInject="none", inject=[])
        except KnowledgeError as exc:
            result.update(decisions=[], stage="gate", reason=exc.reason, wouldInject="none", inject=[])
        result["latencyMs"] = round((runtime.now() - started) * 1000, 1)
        return cast(ReplayedTurn, result)
