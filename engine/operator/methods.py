"""Operator access on the socket: the owner's desktop window, authenticated by a token file.

The serving engine keeps ``<state>/operator.token`` (created on start when
missing, mode 0600).  A connection whose ``initialize`` carries it in
``params._meta.knowledge.operatorToken`` is an operator session: it may call
``operator/*`` methods (and ``ping``) and nothing else, and agent sessions
may never call ``operator/*``.  The file is re-read at every ``initialize``,
and refused when another account could read or replace it.

Knowledge stays read-only for the operator: browsing goes through
``OperatorCaller`` (an agent's private partition, never a write), and the
only things an operator changes are owner administration: agents, store
membership, conversation grants, ``writesEnabled`` and
``knowledgeRuntimeEnabled``, the recall gate's settings and the models
(downloads, and which installed model the engine uses); ``reindex`` rebuilds
only what is derived from the vaults.  Each of those answers with the fresh
inventory, so a window refreshes from what the engine now holds.

    method                   params                                              changes
    operator/inventory       -                                                   -
    operator/addAgent        name, owner?, scopes?                               registry (token shown once)
    operator/removeAgent     name                                                registry, its token file
    operator/shareStore      agent, name, label?, others?                        config.json stores
    operator/useSharedStore  agent, name                                         config.json stores
    operator/useOwnStore     agent                                               config.json stores
    operator/setSettings     writesEnabled?, knowledgeRuntimeEnabled?,           config.json
                             workspaceRoots?
    operator/connections     -           the agents and instances seen connected recently (core/connections.py)
    operator/agentConfig     agent, client?, instance?, sessionKey?  a client configuration (client_config.py)
    operator/doctor          -                                                   -
    operator/reindex         -                                                   the derived search indexes
    operator/records         agent, kind?, kinds?, type?, tag?, status?, order?, offset?, limit?
    operator/types           agent
    operator/search          agent, query, limit?, minScore?, kind?, kinds?, type?, cursor?, mode?
    operator/record          agent, id, revision?
    operator/links           agent, id
    operator/history         agent, id
    operator/diff            agent, id, from, to, fromSha256?, toSha256?
    operator/source          agent, source
    operator/approvals       agent, offset?, limit?
    operator/prompt          agent, audience?, projectKey?
    operator/index           agent, audience?, firstMessageAt?
    operator/ontology        agent, and knowledge_ontology's parameters
    operator/health          agent
    operator/gate*           the recall gate's settings, log, journal, labels, what-if, replay (gate_operator.py)
    operator/gateStats       agent, bins?, limit?  the gate log's outcomes, latency and scores (gate_stats.py)
    operator/models, pullModel, benchmarkModel, setModelSettings     the models view (model_operator.py)
    operator/job, jobs, cancelJob    long work run as jobs: downloads, benchmarks, replays (operator_jobs.py)
    operator/partitions, grants, setGrant, removeGrant   each store's partitions (figures only) and grants (partitions.py)
    operator/syncRemotes, addSyncRemote, removeSyncRemote   each store's sync remotes (sync/remotes.py)
    operator/syncNow, syncStatus, syncClone, startSyncClone   a round, the status, a clone (a job too) (sync/service.py)
    operator/dismissSyncConflict              the owner has seen a sync conflict (sync/conflicts.py)
    operator/subscribe       topics?    change notifications on this connection (wire/protocol.py, core/changes.py)
"""

from __future__ import annotations

import dataclasses
import json
import hmac
import logging
import os
import re
from typing import TYPE_CHECKING, Any, Callable, Protocol

from . import browse, client_config, gate_operator, model_operator, partitions
from .browse import Approvals, RecordLinks, RecordPage, RecordTypes, RetainedSource, RevisionDiff
from .revisions import OperatorHistory, record_history
from .client_config import AgentSetup
from .doctor import DoctorReport, OntologySources, doctor_report
from ..gate import stats as gate_stats
from ..sync import remotes as sync_remotes
from ..sync import conflicts as sync_conflicts
from ..sync import service as sync_service
from ..memory import ontology_views
from ..core import jobs as operator_jobs
from ..access.authority import INSTANCE_MAX, OWNER_PRIVATE, SESSION_KEY_MAX, OperatorCaller, PreviewCaller
from ..access.stores import AgentEntry, AgentStore, StoreEntry
from ..core.answers import JsonObject, NotRequired, TypedDict
from ..core.connections import SeenConnection
from ..core.errors import Denied, ErrorAnswer, InvalidParams, KnowledgeError, NotFound
from ..core.findings import FindingAnswer
from ..core.ids import format_timestamp, is_agent_name, utc_now
from ..memory.knowledge_index import MAX_CHARS as INDEX_MAX_CHARS
from ..memory.knowledge_index import index_for
from ..memory.memory_prompt import prompt_for
from ..core.params import AGENT, NO_PARAMS, AgentName, Choice, Flag, Integer, Name, Params, RecordId, String, Value
from ..core.params import check_count
from ..core.methods import Method, operator_handler
from ..core.methods import handlers as method_handlers
from ..search.keyword import OPERATOR_SEARCH_PARAMS, OwnerSearchAnswer
from ..state.registry import SCOPES
from ..store.answers import RecordRead
from ..store.reads import HISTORY_PARAMS, RECORD_PARAMS
from ..state.config import WORKSPACE_ROOTS_MAX, Settings
from .token_file import read_operator_token

if TYPE_CHECKING:  # the engine calls in here; this module only needs its type
    from ..service import Engine

log = logging.getLogger(__name__)


class MethodTable(Protocol):
    """Where the operator methods may be registered (the socket's dispatcher gathers them itself)."""

    def register(self, method: str, handler: Callable[[Any, dict[str, Any]], Any]) -> None: ...


PREFIX = "operator/"
LABEL_MAX_CHARS = 200
OTHERS_MAX = 100


def authenticate_operator(engine: "Engine", presented: Any) -> None:
    """Accept ``presented`` only if it equals the token in the owner's 0600 file."""
    if not isinstance(presented, str) or not presented:
        raise Denied("operatorToken must be the contents of the state directory's operator.token")
    expected = read_operator_token(engine.state)
    if not hmac.compare_digest(presented.strip().encode("utf-8"), expected.encode("utf-8")):
        raise Denied("wrong operator token")


# --- parameters --------------------------------------------------------------------------------


def _rest(params: JsonObject) -> JsonObject:
    """The request without ``agent``: what a browsing method hands the reader of its own parameters."""
    return {key: value for key, value in params.items() if key != "agent"}


def _agents(value: Any, field: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(is_agent_name(other) for other in value):
        raise InvalidParams(f"{field} must be a list of agent names", field=field)
    check_count(value, field, OTHERS_MAX, "agents")
    return tuple(value)


def _audience(value: Any, field: str) -> JsonObject:
    if not isinstance(value, dict):
        raise InvalidParams(f"{field} must be an object", field=field)
    return value


def check_workspace_roots(value: Any, field: str = "workspaceRoots") -> tuple[str, ...]:
    """Absolute paths of existing directories, checked as config.json's ``attachments.workspaceRoots``
    (and here, where the owner edits them, that each is a directory now); the command line checks the same."""
    if not isinstance(value, list) or not all(isinstance(root, str) for root in value):
        raise InvalidParams(f"{field} must be a list of absolute directory paths", field=field)
    check_count(value, field, WORKSPACE_ROOTS_MAX, "paths")
    try:
        roots = Settings().with_workspace_roots(tuple(value)).workspace_roots
    except InvalidParams as exc:  # names attachments.workspaceRoots[i]; here the parameter is the field
        index = str(exc.details.get("field", "")).rpartition("[")[2].rstrip("]")
        raise InvalidParams(exc.message + (f" ({value[int(index)]!r})" if index.isdigit() else ""),
                            field=field, **({"index": int(index)} if index.isdigit() else {})) from None
    for index, root in enumerate(roots):
        if not os.path.isdir(root):  # an owner's edit: a typo is refused now, not found at the first attach
            raise InvalidParams(f"{root!r} is not a directory", field=field, index=index)
    return roots


def _scopes(value: Any, field: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(scope, str) for scope in value):
        raise InvalidParams(f"{field} must be a list of scopes ({', '.join(SCOPES)})", field=field)
    return tuple(value)  # the registry checks each one


STORE_NAME = String("name", required=True, min_chars=1, what="the name of a store")
AUDIENCE = Value("audience", _audience, default={"kind": OWNER_PRIVATE})
# What each method takes; the browsing ones take the agent whose private partition they read.
ADD_AGENT = Params(Value("name"), Flag("owner", default=False), Value("scopes", _scopes, default=SCOPES))
REMOVE_AGENT = Params(AgentName("name", required=True))
SHARE_STORE = AGENT + Params(STORE_NAME, Name("label", LABEL_MAX_CHARS), Value("others", _agents, default=()))
USE_SHARED_STORE = AGENT + Params(STORE_NAME)
SET_SETTINGS = Params(Flag("writesEnabled"), Flag("knowledgeRuntimeEnabled"),
                      Value("workspaceRoots", lambda value, field: check_workspace_roots(value, field)))
AGENT_CONFIG = AGENT + Params(Choice("client", choices=client_config.CLIENTS, default="generic"),
                              Name("instance", INSTANCE_MAX), Name("sessionKey", SESSION_KEY_MAX))
RECORDS = AGENT + browse.LIST_PARAMS
SEARCH = AGENT + OPERATOR_SEARCH_PARAMS
RECORD = AGENT + RECORD_PARAMS
ONE_RECORD = AGENT + HISTORY_PARAMS
# A version by its number and, where an edit outside the engine kept that number, its sha256 (from the history).
SHA256 = re.compile(r"[0-9a-f]{64}")
DIFF = ONE_RECORD + Params(
    Integer("from", 1, required=True), Integer("to", 1, required=True),
    String("fromSha256", 64, pattern=SHA256, what="a sha256 (64 lowercase hex digits) from the record's history"),
    String("toSha256", 64, pattern=SHA256, what="a sha256 (64 lowercase hex digits) from the record's history"))
SOURCE = AGENT + Params(RecordId("source", required=True))
APPROVALS = AGENT + browse.APPROVALS_PARAMS
PROMPT = AGENT + Params(AUDIENCE, Value("projectKey"))
INDEX = AGENT + Params(AUDIENCE, Value("firstMessageAt"))
ONTOLOGY = AGENT + ontology_views.ONTOLOGY_PARAMS


# --- answers --------------------------------------------------------------------------------------
# ``search``, ``record`` and ``ontology`` answer exactly what the agent tools answer (Engine.search,
# Engine.get_record, ontology_views.ontology_view): JSON objects here, declared where they are built.


class OperatorSettings(TypedDict):
    """The settings an operator edits, and config.json's problem when it could not be read."""

    writesEnabled: bool
    knowledgeRuntimeEnabled: bool
    workspaceRoots: list[str]
    problem: str | None


class Inventory(TypedDict):
    """Every agent with its effective store, every known store, and the settings: what each owner
    administration method answers, so a window refreshes from what the engine now holds."""

    agents: list[AgentEntry]
    stores: list[StoreEntry]
    settings: OperatorSettings


class AgentAdded(Inventory):
    """A new agent, its token (shown this once), the client configuration for it, and the inventory."""

    agent: str
    owner: bool
    token: str
    tokenFile: str
    mcpConfig: JsonObject       # the configuration a client pastes, as JSON
    audience: dict[str, str]


class Connections(TypedDict):
    connections: list[SeenConnection]
    limit: int


class Vectors(TypedDict):
    indexed: int
    embedded: int
    cached: int
    removed: int
    pending: int


class Reindexed(TypedDict):
    storeId: str
    partition: str
    records: int
    vectors: NotRequired[Vectors]


class Rebuilt(TypedDict):
    rebuilt: list[Reindexed]


class Health(TypedDict):
    """The agent's store; when it is ``ok``, the partition's validation (counts, findings, files, ontology
    sources, git checkpoint, pending publications) or the ``problem`` that kept it from being read."""

    agent: str
    store: AgentStore
    problem: NotRequired[ErrorAnswer]
    ok: NotRequired[bool]
    errors: NotRequired[int]
    warnings: NotRequired[int]
    findings: NotRequired[list[FindingAnswer]]
    total: NotRequired[int]
    truncated: NotRequired[bool]
    files: NotRequired[dict[str, int]]
    ontology: NotRequired[OntologySources]
    pendingPublications: NotRequired[int]
    git: NotRequired[JsonObject]


class PromptPreview(TypedDict):
    """The memory prompt the agent gets, or why it gets none (``reason``, ``message``); its length in
    characters (a prompt has no bound of its own: ``maxChars`` is null)."""

    text: str | None
    reason: NotRequired[str]
    message: NotRequired[str]
    chars: int
    maxChars: None


class IndexPreview(TypedDict):
    """The Knowledge Index the agent gets for a session starting at ``firstMessageAt``, or why it gets none
    (``reason``); its length and the most it may hold."""

    text: str | None
    reason: NotRequired[str]
    firstMessageAt: str
    chars: int
    maxChars: int


# --- the methods ------------------------------------------------------------------------------


class OperatorMethods:
    """The ``operator/*`` handlers, registered into the socket's dispatcher."""

    def __init__(self, engine: "Engine") -> None:
        self.engine = engine

    def register(self, table: MethodTable) -> None:
        """Register every ``operator/*`` method (``operator_methods``) into ``table``."""
        for method in operator_methods(self.engine):
            table.register(PREFIX + method.name, operator_handler(method))

    def handlers(self) -> dict[str, Callable[[dict[str, Any]], Any]]:
        """Every ``operator/*`` handler by its name without the prefix, each declaring its answer."""
        return method_handlers(operator_methods(self.engine))

    def methods(self) -> tuple[Method, ...]:
        """This module's methods (engine/core/methods.py); ``search``, ``record`` and ``ontology`` answer as the
        agent tools do."""
        return (
            Method("inventory", NO_PARAMS, Inventory, self.inventory),
            Method("addAgent", ADD_AGENT, AgentAdded, self.add_agent),
            Method("removeAgent", REMOVE_AGENT, Inventory, self.remove_agent),
            Method("doctor", NO_PARAMS, DoctorReport, self.doctor),
            Method("reindex", NO_PARAMS, Rebuilt, self.reindex),
            Method("shareStore", SHARE_STORE, Inventory, self.share_store),
            Method("useSharedStore", USE_SHARED_STORE, Inventory, self.use_shared_store),
            Method("useOwnStore", AGENT, Inventory, self.use_own_store),
            Method("setSettings", SET_SETTINGS, Inventory, self.set_settings),
            Method("connections", NO_PARAMS, Connections, self.connections),
            Method("agentConfig", AGENT_CONFIG, AgentSetup, self.agent_config),
            Method("records", RECORDS, RecordPage, self.records),
            Method("types", AGENT, RecordTypes, self.types),
            Method("search", SEARCH, OwnerSearchAnswer, self.search),
            Method("record", RECORD, RecordRead, self.record),
            Method("links", ONE_RECORD, RecordLinks, self.links),
            Method("history", ONE_RECORD, OperatorHistory, self.history),
            Method("diff", DIFF, RevisionDiff, self.diff),
            Method("source", SOURCE, RetainedSource, self.source),
            Method("approvals", APPROVALS, Approvals, self.approvals),
            Method("prompt", PROMPT, PromptPreview, self.prompt),
            Method("index", INDEX, IndexPreview, self.index),
            Method("ontology", ONTOLOGY, ontology_views.OntologyAnswer, self.ontology),
            Method("health", AGENT, Health, self.health),
        )

    # --- owner administration: the only writes ---------------------------------------------

    def inventory(self, params: dict[str, Any]) -> Inventory:
        """Every agent with its effective store, every known store, and the settings an operator edits."""
        NO_PARAMS.read(params)
        settings = self.engine.settings
        current = settings.current()
        return {"agents": self.engine.agents(), "stores": self.engine.stores(),
                "settings": {"writesEnabled": current.writes_enabled,
                             "knowledgeRuntimeEnabled": current.knowledge_runtime_enabled,
                             "workspaceRoots": list(current.workspace_roots), "problem": settings.problem}}

    def add_agent(self, params: dict[str, Any]) -> AgentAdded:
        """Register an agent; its token is returned this once (and kept in ``tokens/<name>.token``)."""
        values = ADD_AGENT.read(params)
        name, owner = values["name"], values["owner"]
        token = self.engine.add_agent(name, owner=owner, scopes=values["scopes"])
        token_file = self.engine.state.write_agent_token(name, token)
        setup = client_config.agent_setup(self.engine.state, {"name": name, "owner": owner}, "generic")
        return {"agent": name, "owner": owner, "token": token, "tokenFile": str(token_file),
                "mcpConfig": json.loads(setup["config"]), "audience": setup["audience"],
                **self.inventory({})}

    def remove_agent(self, params: dict[str, Any]) -> Inventory:
        """Revoke an agent's credentials and drop its grants and token file; its store is kept."""
        name = REMOVE_AGENT.read(params)["name"]
        self.engine.remove_agent(name)
        self.engine.state.remove_agent_token(name)
        return self.inventory({})


    def share_store(self, params: dict[str, Any]) -> Inventory:
        values = SHARE_STORE.read(params)
        self.engine.resolver.share_store(values["agent"], values["name"], label=values["label"],
                                         others=values["others"])
        return self.inventory({})

    def use_shared_store(self, params: dict[str, Any]) -> Inventory:
        values = USE_SHARED_STORE.read(params)
        self.engine.resolver.use_shared_store(values["agent"], values["name"])
        return self.inventory({})

    def use_own_store(self, params: dict[str, Any]) -> Inventory:
        self.engine.resolver.use_own_store(AGENT.read(params)["agent"])
        return self.inventory({})

    def set_settings(self, params: dict[str, Any]) -> Inventory:
        """Turn Knowledge writes or the search_knowledge runtime on or off (at least one of them)."""
        values = SET_SETTINGS.read(params)  # every value is checked before anything is written
        if all(values[key] is None for key in ("writesEnabled", "knowledgeRuntimeEnabled", "workspaceRoots")):
            raise InvalidParams("name a setting: writesEnabled, knowledgeRuntimeEnabled or workspaceRoots",
                                field="writesEnabled")
        settings = self.engine.settings
        changed = settings.current()
        if values["writesEnabled"] is not None:
            changed = dataclasses.replace(changed, writes_enabled=values["writesEnabled"])
        if values["knowledgeRuntimeEnabled"] is not None:
            changed = changed.with_knowledge_runtime(values["knowledgeRuntimeEnabled"])
        if values["workspaceRoots"] is not None:
            changed = changed.with_workspace_roots(values["workspaceRoots"])
        settings.save(changed)
        return self.inventory({})

    def agent_config(self, params: dict[str, Any]) -> AgentSetup:
        """What ``knowledge agents config`` prints for an agent as registered (the window's "Connect an agent")."""
        values = AGENT_CONFIG.read(params)
        agent = self.engine.registry.agent(values["agent"])
        if agent is None or not agent.active:
            raise NotFound(f"no agent named {values['agent']!r}", agent=values["agent"])
        return client_config.agent_setup(self.engine.state, {"name": agent.name, "owner": agent.owner},
                                         values["client"], values["instance"], values["sessionKey"])

    def connections(self, params: dict[str, Any]) -> Connections:
        """The agents and instances seen connected recently (kept in memory, bounded; core/connections.py)."""
        NO_PARAMS.read(params)
        recent = self.engine.connections
        return {"connections": recent.listed(), "limit": recent.limit}

    # --- maintenance --------------------------------------------------------------------------

    def doctor(self, params: dict[str, Any]) -> DoctorReport:
        """``knowledge doctor``'s report, from the serving engine (see doctor.py)."""
        NO_PARAMS.read(params)
        return doctor_report(self.engine)

    def reindex(self, params: dict[str, Any]) -> Rebuilt:
        """Rebuild every search index (and vectors) from the catalogs, each store on its own lane."""
        NO_PARAMS.read(params)
        return {"rebuilt": self.engine.reindex()}

    # --- browsing one agent's private partition, read-only ------------------------------------
    # A method that hands its parameters on (records, search, approvals, ontology) reads them all here,
    # the callee's declaration included, and the callee reads its own again from the rest.

    def records(self, params: dict[str, Any]) -> RecordPage:
        values = RECORDS.read(params)
        return browse.list_records(self.engine, OperatorCaller(values["agent"]), _rest(params))

    def types(self, params: dict[str, Any]) -> RecordTypes:
        return browse.record_types(self.engine, OperatorCaller(AGENT.read(params)["agent"]))

    def search(self, params: dict[str, Any]) -> JsonObject:
        values = SEARCH.read(params)
        return self.engine.owner_search(OperatorCaller(values["agent"]), _rest(params))

    def record(self, params: dict[str, Any]) -> JsonObject:
        values = RECORD.read(params)
        return self.engine.get_record(OperatorCaller(values["agent"]), values["id"], values["revision"], values["asOf"])

    def links(self, params: dict[str, Any]) -> RecordLinks:
        values = ONE_RECORD.read(params)
        return browse.record_links(self.engine, OperatorCaller(values["agent"]), values["id"])

    def history(self, params: dict[str, Any]) -> OperatorHistory:
        values = ONE_RECORD.read(params)
        caller = OperatorCaller(values["agent"])
        return record_history(self.engine, caller, values["id"], self.engine.history(caller, values["id"]))

    def diff(self, params: dict[str, Any]) -> RevisionDiff:
        values = DIFF.read(params)
        return browse.revision_diff(self.engine, OperatorCaller(values["agent"]), values["id"],
                                    (values["from"], values["fromSha256"]), (values["to"], values["toSha256"]))

    def source(self, params: dict[str, Any]) -> RetainedSource:
        values = SOURCE.read(params)
        return browse.read_source(self.engine, OperatorCaller(values["agent"]), values["source"])

    def approvals(self, params: dict[str, Any]) -> Approvals:
        values = APPROVALS.read(params)
        return browse.approvals(self.engine, OperatorCaller(values["agent"]), _rest(params))

    def ontology(self, params: dict[str, Any]) -> JsonObject:
        values = ONTOLOGY.read(params)
        return ontology_views.ontology_view(self.engine, OperatorCaller(values["agent"]), _rest(params))

    def health(self, params: dict[str, Any]) -> Health:
        """Validation findings, git checkpoint state and pending publications, with the store's status."""
        agent = AGENT.read(params)["agent"]
        known = self.engine.registry.agent(agent)
        if known is None or not known.active:
            raise NotFound(f"no agent named {agent!r}", agent=agent)
        result: Health = {"agent": agent, "store": self.engine.resolver.agent_view(agent)}
        if result["store"]["status"] != "ok":
            return result
        try:
            result.update(self.engine.health(OperatorCaller(agent)))
        except KnowledgeError as exc:
            result["problem"] = exc.to_dict()
        return result

    # --- what an agent sees ------------------------------------------------------------------

    def prompt(self, params: dict[str, Any]) -> PromptPreview:
        """The memory prompt exactly as the agent gets it in that audience (``memory/prompt``)."""
        values = PROMPT.read(params)
        caller = PreviewCaller(values["agent"], values["audience"])
        try:
            result = prompt_for(self.engine, caller, values["projectKey"])
        except Denied as exc:
            return {"text": None, "reason": "denied", "message": exc.message, "chars": 0, "maxChars": None}
        return {**result, "chars": len(result["text"]), "maxChars": None}

    def index(self, params: dict[str, Any]) -> IndexPreview:
        """The Knowledge Index exactly as the agent gets it for a session starting then (``memory/index``)."""
        values = INDEX.read(params)
        first = values["firstMessageAt"] or format_timestamp(utc_now())
        result = index_for(self.engine, PreviewCaller(values["agent"], values["audience"]), first)
        return {**result, "firstMessageAt": first, "chars": len(result["text"] or ""),
                "maxChars": INDEX_MAX_CHARS}


def operator_methods(engine: "Engine") -> tuple[Method, ...]:
    """Every ``operator/*`` method but the wire's own ``operator/subscribe``, as its feature declares it:
    this module's, then the recall gate view's (gate_operator.py) and its charts' (gate/stats.py), the models
    view's (model_operator.py), the jobs' (core/jobs.py), the partitions view's (partitions.py) and the sync
    remotes' and rounds' (sync/remotes.py, sync/service.py)."""
    return (*OperatorMethods(engine).methods(), *gate_operator.methods(engine), *gate_stats.methods(engine),
            *model_operator.methods(engine), *operator_jobs.methods(engine.jobs), *partitions.methods(engine),
            *sync_remotes.methods(engine), *sync_service.methods(engine), *sync_conflicts.methods(engine))
