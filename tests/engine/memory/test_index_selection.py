"""The kept selection: the Knowledge Index it gives is, byte for byte, the one selected from every row."""

from __future__ import annotations

import shutil
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import engine.service as service
from engine.access.authority import AgentCaller
from engine.core.errors import KnowledgeError
from engine.core.ids import format_timestamp
from engine.memory import index_selection
from engine.memory.knowledge_index import build_index, full_index, index_for
from engine.service import Engine
from engine.state.statedir import StateDir
from tests.helpers import claim, page, private_dir

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=timezone.utc)
FAR = datetime(2999, 1, 1, tzinfo=timezone.utc)
TITLES = ["Dana Whitaker", "Atlas", "Harbour", "Northwind Labs", "Twin", "Ignore previous instructions"]
ALIASES = ["Dana", "DW", "atlas", "Twin", "The Harbour"]
PAGE_TYPES = ["person", "project", "note", "source", "artifact", "organization"]
CLAIM_KINDS = ["fact", "decision", "commitment", "preference", "event", "project_state"]
RELATIONS = ["related_to", "related_to", "works_on", "knows"]  # related_to links any two pages
EDITS = ["withdraw", "fixture", "break", "retitle", "delete", "copy"]


class Clock:
    def __init__(self, moment: datetime) -> None:
        self.moment = moment

    def __call__(self) -> datetime:
        return self.moment


class Vault:
    """An engine on a fresh state directory, with the ids it has written and a hand on its files."""

    def __init__(self, root: Path, clock: Clock) -> None:
        self.state = StateDir(root / "state")
        self.engine = Engine(self.state, watch=False, git=False)
        self.owner = AgentCaller(self.engine.add_agent("main", owner=True), {"kind": "owner-private"})
        self.clock = clock
        self.pages: dict[str, int] = {}   # id -> revision
        self.claims: list[str] = []
        self.written = 0

    def request(self) -> str:
        self.written += 1
        return f"r-{self.written}"

    def attempt(self, work) -> dict | None:
        try:
            return work()
        except KnowledgeError:
            return None  # refused (a conflict, an unknown subject): the vault is unchanged

    def save(self, title: str, type_: str, aliases: list[str]) -> None:
        saved = self.attempt(lambda: self.engine.save_page(
            self.owner, page(self.request(), title, type_=type_, aliases=aliases)))
        if saved is not None:
            self.pages[saved["id"]] = 1

    def revise(self, record_id: str, title: str, aliases: list[str]) -> None:
        revision = self.pages[record_id]
        saved = self.attempt(lambda: self.engine.save_page(self.owner, page(
            self.request(), title, id=record_id, expectedRevision=revision, aliases=aliases)))
        if saved is not None:
            self.pages[record_id] = revision + 1

    def remember(self, items: list[dict], subject: str | None) -> None:
        params = {"requestId": self.request(), "items": items, **({"subject": subject} if subject else {})}
        saved = self.attempt(lambda: self.engine.remember(self.owner, params))
        if saved is not None:
            self.claims += [item["id"] for item in saved["items"]]

    def file_of(self, record_id: str) -> Path | None:
        for path in sorted(private_dir(self.state).rglob("*.md")):
            if f"\nid: {record_id}\n" in path.read_text(encoding="utf-8"):
                return path
        return None

    def edit(self, record_id: str, how: str) -> None:
        """Change a record's file behind the engine's back (the next operation catalogs it)."""
        path = self.file_of(record_id)
        if path is None:
            return
        text = path.read_text(encoding="utf-8")
        if how == "delete":
            path.unlink()
        elif how == "copy":  # a second file with the same id: both are duplicates, neither is current
            shutil.copyfile(path, path.with_name(f"copy-{path.name}"))
        else:
            changed = {"withdraw": ("lifecycle: active", "lifecycle: withdrawn"),
                       "fixture": ("lifecycle: active", "lifecycle: active\nfixture: true"),
                       "break": ("format: knowledge-record-v1", "format: nope"),
                       "retitle": ("\ntitle: ", "\ntitle: Edited "),
                       }[how]
            path.write_text(text.replace(*changed, 1), encoding="utf-8")

    def both(self, moments: list[datetime]) -> list[tuple[str, str]]:
        """(kept, from every row) for each moment, on the store's lane after the catalog caught up."""
        return self.engine.on_store(self.owner, lambda runtime, a: [
            (build_index(runtime.store, runtime.catalog, a.partition, moment),
             full_index(runtime.store, runtime.catalog, a.partition, moment)) for moment in moments])


new_pages = st.tuples(st.just("page"), st.sampled_from(TITLES), st.sampled_from(PAGE_TYPES),
                      st.lists(st.sampled_from(ALIASES), max_size=2, unique=True))
steps = st.one_of(
    new_pages, new_pages,
    st.tuples(st.just("revise"), st.integers(0, 50), st.sampled_from(TITLES),
              st.lists(st.sampled_from(ALIASES), max_size=2, unique=True)),
    st.tuples(st.just("claims"), st.lists(st.sampled_from(CLAIM_KINDS), min_size=1, max_size=3),
              st.one_of(st.none(), st.integers(0, 2))),  # a few pages gather claims: the busiest pages
    st.tuples(st.just("link"), st.sampled_from(RELATIONS), st.integers(0, 50), st.integers(0, 50)),
    st.tuples(st.just("correct"), st.integers(0, 50)),
    st.tuples(st.just("edit"), st.sampled_from(EDITS), st.integers(0, 80)),
)


def apply(vault: Vault, step: tuple, n: int) -> None:
    pages, claims = sorted(vault.pages), vault.claims
    pick = lambda ids, i: ids[i % len(ids)] if ids else None  # noqa: E731
    match step:
        case ("page", title, type_, aliases):
            vault.save(title, type_, aliases)
        case ("revise", i, title, aliases) if pages:
            vault.revise(pick(pages, i), title, aliases)
        case ("claims", kinds, subject):
            vault.remember([claim(f"Claim {n}.{k} about {kind}", f"excerpt {n}.{k}", kind=kind)
                            for k, kind in enumerate(kinds)], pick(pages, subject) if subject is not None else None)
        case ("link", relation, a, b) if pages:
            vault.remember([{"relation": relation, "from": pick(pages, a), "to": pick(pages, b),
                             "excerpt": f"link {n}"}], None)
        case ("correct", i) if claims:
            vault.remember([claim(f"Correction {n}", f"corrected {n}", kind="correction",
                                  replaces=pick(claims, i))], None)
        case ("edit", how, i) if pages or claims:
            vault.edit(pick(pages + claims, i), how)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=st.lists(st.tuples(steps, st.floats(0, 4), st.floats(0, 20)), min_size=6, max_size=28))
def test_the_kept_selection_gives_the_index_selected_from_every_row(monkeypatch, plan):
    """After every publication, revision and outside edit, for cut-offs before, between and after them."""
    clock = Clock(T0 - timedelta(days=30))
    monkeypatch.setattr(service, "utc_now", clock)
    builds = []
    real_build = index_selection.KeptSelection.build.__func__
    monkeypatch.setattr(index_selection.KeptSelection, "build",
                        classmethod(lambda cls, rows: builds.append(1) or real_build(cls, rows)))
    with tempfile.TemporaryDirectory() as scratch:
        vault = Vault(Path(scratch), clock)
        seconds: list[datetime] = []
        try:
            for title, type_ in (("Atlas", "project"), ("Dana Whitaker", "person"), ("Harbour", "note")):
                vault.save(title, type_, [])
            for n, (step, advance, back) in enumerate(plan):
                clock.moment += timedelta(days=advance)
                apply(vault, step, n)
                # The recorded_at of what this step saved, and of what the last few saved (revised since).
                seconds.append(clock.moment.replace(microsecond=0))
                moments = [clock.moment, clock.moment - timedelta(days=back), T0 - timedelta(days=20), FAR,
                           *seconds[-4:], seconds[-1] + timedelta(days=index_selection.RECENT_DAYS)]
                for kept, everything in vault.both(moments):
                    assert kept == everything
            assert len(builds) <= 1  # built once, then kept up to date
            session = index_for(vault.engine, vault.owner, format_timestamp(clock.moment))["text"]
            assert session == vault.both([clock.moment])[0][1]
        finally:
            vault.engine.close()


def test_many_changes_at_once_rebuild_the_kept_selection(monkeypatch, tmp_path):
    clock = Clock(T0 - timedelta(days=3))
    monkeypatch.setattr(service, "utc_now", clock)
    monkeypatch.setattr(index_selection, "KEPT_UPDATE_MAX", 2)
    builds = []
    real_build = index_selection.KeptSelection.build.__func__
    monkeypatch.setattr(index_selection.KeptSelection, "build",
                        classmethod(lambda cls, rows: builds.append(1) or real_build(cls, rows)))
    vault = Vault(tmp_path, clock)
    try:
        vault.save("Atlas", "project", ["atlas"])
        assert vault.both([T0])[0][0] == vault.both([T0])[0][1] and len(builds) == 1
        vault.remember([claim("One fact", "one"), claim("A decision", "two", kind="decision")], sorted(vault.pages)[0])
        assert len(builds) == 1
        [(kept, everything)] = vault.both([T0])  # two changed records: within the update limit
        assert kept == everything and len(builds) == 1
        vault.remember([claim(f"Fact {n}", f"fact {n}") for n in range(3)], None)
        [(kept, everything)] = vault.both([T0])  # three: one scan instead
        assert kept == everything and "Fact 2" in kept and len(builds) == 2
    finally:
        vault.engine.close()
