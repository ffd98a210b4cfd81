"""A small, realistic demo store: people, a company, a project, claims with evidence.

Seeding goes through the ordinary engine API as the owner's ``main`` agent,
with fixed request ids, so running it twice changes nothing: every retry
returns its original receipt.
"""

from __future__ import annotations

from typing import Any

from models.catalogue import DEFAULT_EMBEDDING_MODEL
from models.errors import ModelError
from models.installed import ModelStore

from ..access.authority import AgentCaller
from ..memory.recall import set_recall
from ..service import Engine
from ..state.config import parse_settings
from .answers import DemoSeeded

DEMO_AGENT = "main"
# The recall gate a new owner gets with the demo: shadow mode (nothing injected, every turn logged and journaled
# for tuning) on the embedding model, the Decision model that installs from PyPI.
DEMO_DECISION_MODEL = f"embedding/{DEFAULT_EMBEDDING_MODEL}"
# No highThreshold: the Decision model's documented one is in force (docs/recall-gate.md, "The default threshold").
DEMO_RECALL_GATE = {"mode": "shadow", "journal": True}

PAGES: list[dict[str, Any]] = [
    {"requestId": "demo-page-dana", "type": "person", "title": "Dana Whitaker", "aliases": ["Dana"],
     "fields": {"role": "Head of Operations", "location": "Lisbon"},
     "body": "Dana runs operations at Northwind Labs and sponsors the Atlas migration.\n\n"
             "She reads status notes closely and prefers short written updates to meetings."},
    {"requestId": "demo-page-ravi", "type": "person", "title": "Ravi Menon", "aliases": ["Ravi"],
     "fields": {"role": "Staff engineer", "location": "Toronto"},
     "body": "Ravi leads the backend work on Atlas: the order-events schema and the cut-over tooling."},
    {"requestId": "demo-page-northwind", "type": "organization", "title": "Northwind Labs",
     "aliases": ["Northwind"], "fields": {"industry": "Logistics software", "website": "https://northwind.example"},
     "body": "Northwind Labs builds order-tracking software for mid-sized freight companies."},
    {"requestId": "demo-page-atlas", "type": "project", "title": "Atlas Migration", "aliases": ["atlas"],
     "fields": {"status": "active", "started": "2026-09-01", "due": "2027-01-31"},
     "body": "Atlas moves order tracking off the legacy monolith onto event-driven services.\n\n"
             "Inventory and billing have moved; order history and notifications remain."},
    {"requestId": "demo-page-repo", "type": "repository", "title": "northwind/atlas",
     "fields": {"url": "https://git.example/northwind/atlas", "language": "Go", "default_branch": "main"},
     "body": "The services and migration tooling for Atlas."},
    {"requestId": "demo-page-bluegreen", "type": "concept", "title": "Blue-green deployment",
     "body": "Run the old and new systems side by side and switch traffic at once, keeping the old one "
             "ready to switch back."},
]

CLAIMS: list[dict[str, Any]] = [
    {"requestId": "demo-claims-dana", "subject": "Dana", "items": [
        {"text": "Dana prefers the Atlas status notes weekly, on Fridays.", "claimKind": "preference",
         "excerpt": "Can you send me the Atlas status notes every Friday? Mondays are far too busy."},
    ]},
    {"requestId": "demo-claims-atlas", "subject": "atlas", "items": [
        {"text": "Atlas will cut over with a blue-green deployment.", "claimKind": "decision",
         "excerpt": "We agreed: blue-green for the cut-over, so we can flip back if order history lags."},
        {"text": "The Atlas cut-over is planned for January 15.", "claimKind": "project_state",
         "excerpt": "Cut-over is pencilled in for the 15th of January."},
    ]},
    {"requestId": "demo-claims-ravi", "subject": "Ravi", "items": [
        {"text": "Ravi will finish the order-events schema by December 12.", "claimKind": "commitment",
         "excerpt": "I'll have the order-events schema done by the 12th of December."},
    ]},
    {"requestId": "demo-claims-northwind", "subject": "Northwind", "items": [
        {"text": "Northwind Labs has offices in Lisbon and Toronto.", "claimKind": "fact",
         "excerpt": "Our Lisbon and Toronto offices will both join the launch call."},
    ]},
]

RELATIONSHIPS: list[tuple[str, str, str, str]] = [
    ("works_at", "Dana", "Northwind", "Dana introduced herself as Northwind's head of operations."),
    ("works_at", "Ravi", "Northwind", "Ravi is on the Northwind platform team."),
    ("works_on", "Dana", "atlas", "Dana is the sponsor of Atlas."),
    ("works_on", "Ravi", "atlas", "Ravi leads the backend work on Atlas."),
    ("implements", "northwind/atlas", "atlas", "The Atlas services live in the northwind/atlas repository."),
    ("depends_on", "atlas", "Blue-green deployment", "The cut-over plan depends on blue-green deployment."),
]


def seed_demo(engine: Engine) -> DemoSeeded:
    """Seed the demo into ``main``'s store (registering ``main`` as an owner agent if needed).

    Returns the agent, whether it was created (with its token, once), and how
    many records the demo publications hold.
    """
    created_token = None
    if engine.registry.agent(DEMO_AGENT) is None or not engine.registry.agent(DEMO_AGENT).active:
        created_token = engine.add_agent(DEMO_AGENT, owner=True)
    token = engine.registry.add_credential(DEMO_AGENT)
    caller = AgentCaller(token, {"kind": "owner-private"}, instance="knowledge-demo")
    try:
        receipts = [engine.save_page(caller, page) for page in PAGES]
        receipts += [engine.remember(caller, claims) for claims in CLAIMS]
        receipts.append(engine.remember(caller, {
            "requestId": "demo-relationships",
            "items": [{"relation": relation, "from": source, "to": target, "excerpt": excerpt}
                      for relation, source, target, excerpt in RELATIONSHIPS],
        }))
        cutover = receipts[len(PAGES) + 1]["items"][1]["id"]
        receipts.append(engine.remember(caller, {
            "requestId": "demo-correction-cutover", "subject": "atlas",
            "items": [{"text": "The Atlas cut-over moved to January 22.", "claimKind": "correction",
                       "replaces": cutover,
                       "excerpt": "Heads up: the cut-over slips a week, to January 22, for the billing audit."}],
        }))
        preference = receipts[len(PAGES)]["items"][0]["id"]
        receipts.append(set_recall(engine, caller, {
            "id": preference, "requestId": "demo-recall-dana",
            "recall": {"summary": "Dana wants the Atlas status notes weekly, on Fridays.",
                       "triggers": ["status notes", "Dana"], "importance": 7, "projects": ["atlas"]},
        }))
    finally:
        engine.registry.revoke_credential(token)
    return {
        "agent": DEMO_AGENT,
        "token": created_token,
        "records": sum(len(receipt["records"]) for receipt in receipts),
        "gate": demo_gate(engine),
    }


def demo_gate(engine: Engine) -> str | None:
    """Turn the recall gate on in shadow mode with the embedding model, when that model is installed and the
    owner has chosen neither a Decision model nor gate settings; answers the decisionModel in force."""
    settings = engine.settings.current()
    if settings.decision_model is not None or settings.recall_gate is not None:
        return settings.decision_model
    try:
        installed = DEFAULT_EMBEDDING_MODEL in ModelStore(engine.state.models).installed()
    except ModelError:
        installed = False
    if not installed:
        return None
    raw = dict(settings.raw)
    raw.update(decisionModel=DEMO_DECISION_MODEL, recallGate=dict(DEMO_RECALL_GATE))
    engine.settings.save(parse_settings(raw))
    return DEMO_DECISION_MODEL
