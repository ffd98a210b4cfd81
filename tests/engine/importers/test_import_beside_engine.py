"""Imports while an engine serves: ``operator/import`` runs the import as a job, and ``knowledge import FORMAT PATH``
beside the engine goes through it and prints what it prints without one."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from engine.cli import desk as desk_module
from engine.cli.commands import main
from engine.importers import methods as import_methods
from engine.operator.token_file import ensure_operator_token, read_operator_token
from engine.service import Engine
from engine.state.statedir import StateDir
from engine.wire.protocol import Dispatcher, Session
from tests.engine.cli.test_beside_engine import run, serving
from tests.engine.importers.helpers import records, store_snapshot
from tests.helpers import only_store
from tests.engine.importers.test_chatgpt import export
from tests.engine.store.test_secrets import SECRET

WAIT_S = 30
IMPORT_KIND = import_methods.IMPORT_JOB


@pytest.fixture
def export_file(tmp_path: Path) -> Path:
    path = tmp_path / "input" / "conversations.json"
    path.parent.mkdir()
    path.write_text(json.dumps(export()), encoding="utf-8")
    return path


@pytest.fixture
def operator(engine: Engine) -> tuple[Dispatcher, Session]:
    return operator_session(engine)


def operator_session(engine: Engine) -> tuple[Dispatcher, Session]:
    """An operator session on a dispatcher with this layer's methods, as `knowledge serve` registers them."""
    dispatcher = Dispatcher(engine)
    import_methods.register(dispatcher, engine)
    ensure_operator_token(engine.state)
    session = Session()
    reply = dispatcher.handle(session, _message("initialize", {"protocolVersion": "2025-11-25", "_meta": {
        "knowledge": {"operatorToken": read_operator_token(engine.state)}}}))
    assert reply["result"]["operator"] is True
    return dispatcher, session


def no_store(state: StateDir) -> bool:
    return not state.stores.is_dir() or not any(state.stores.iterdir())


def _message(method: str, params: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode() + b"\n"


def call(operator: tuple[Dispatcher, Session], method: str, params: dict[str, Any]) -> dict[str, Any]:
    dispatcher, session = operator
    return dispatcher.handle(session, _message(method, params))


def start(operator: tuple[Dispatcher, Session], params: dict[str, Any]) -> dict[str, Any]:
    reply = call(operator, "operator/import", params)
    assert "result" in reply, reply
    return reply["result"]


def command_waits(monkeypatch: pytest.MonkeyPatch, sleep: Callable[[float], None]) -> None:
    """Make the command's waits between polls call ``sleep``. Only the command's: ``time.sleep`` itself is left
    alone, for the serving engine's own threads (its index thread waits with it) must not take the command's turns."""
    monkeypatch.setattr(desk_module, "time", SimpleNamespace(sleep=sleep))


class Held:
    """Holds the engine's page saves at the gate until released, so that a test can act while an import runs."""

    def __init__(self, engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
        self.entered, self.release = threading.Event(), threading.Event()
        real = engine.save_page

        def save_page(caller: Any, params: dict[str, Any]) -> dict[str, Any]:
            self.entered.set()
            assert self.release.wait(WAIT_S), "the test never released the import"
            return real(caller, params)

        monkeypatch.setattr(engine, "save_page", save_page)


def test_an_import_job_reports_progress_and_answers_what_the_command_prints(
        engine: Engine, operator: tuple[Dispatcher, Session], export_file: Path, state_dir: StateDir) -> None:
    job = start(operator, {"format": "chatgpt", "path": str(export_file)})
    assert job["kind"] == "import" and job["state"] == "running" and job["progress"]["unit"] == "conversations"

    finished = engine.jobs.wait(job["id"], WAIT_S)

    assert finished["state"] == "done", finished
    # Its last phase indexes what it wrote, and cannot be cancelled; the count stays that of what was written.
    assert finished["progress"]["done"] == finished["progress"]["total"] == 2
    assert finished["progress"]["phase"] == "indexing" and finished["progress"]["cancellable"] is False
    result = finished["result"]
    assert result["agent"] == "main" and result["imported"]["pages"] == 2 and Path(result["tokenFile"]).is_file()
    assert len(records(state_dir, "pages/")) == 2
    polled = call(operator, "operator/job", {"job": job["id"]})["result"]
    assert polled["result"] == result

    before = store_snapshot(state_dir)
    again = engine.jobs.wait(start(operator, {"format": "chatgpt", "path": str(export_file)})["id"], WAIT_S)
    assert again["result"]["pages"] == result["pages"] and "tokenFile" not in again["result"]
    assert store_snapshot(state_dir) == before  # idempotent through the engine as well


def test_a_dry_run_job_counts_and_writes_nothing(
        engine: Engine, operator: tuple[Dispatcher, Session], export_file: Path, state_dir: StateDir) -> None:
    job = engine.jobs.wait(start(operator, {"format": "chatgpt", "path": str(export_file), "dryRun": True})["id"],
                           WAIT_S)

    assert job["state"] == "done" and job["result"]["wouldCreate"]["pages"] == 2 and job["result"]["dryRun"]
    assert engine.registry.agent("main") is None and no_store(state_dir)


def test_a_bad_input_fails_the_job_naming_the_file_and_place_and_writes_nothing(
        engine: Engine, operator: tuple[Dispatcher, Session], tmp_path: Path, state_dir: StateDir) -> None:
    bad = export()
    bad[1]["mapping"]["u"]["message"]["content"]["parts"] = "not a list"
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(bad), encoding="utf-8")

    job = engine.jobs.wait(start(operator, {"format": "chatgpt", "path": str(path)})["id"], WAIT_S)

    assert job["state"] == "failed"
    assert job["error"]["reason"] == "invalid_params"
    assert job["error"]["file"] == "conversations.json" and job["error"]["place"] == "[1].mapping.u.message.content.parts"
    assert engine.registry.agent("main") is None and no_store(state_dir)


@pytest.mark.parametrize("params, field", [
    ({"format": "chatgpt", "path": "relative/conversations.json"}, "path"),
    ({"format": "word", "path": "/tmp/x.docx"}, "format"),
    ({"format": "chatgpt"}, "path"),
    ({"format": "chatgpt", "path": "/tmp/x", "dryRun": "yes"}, "dryRun"),
    ({"format": "chatgpt", "path": "/tmp/x", "agent": "Bad Name"}, "agent"),
    ({"format": "markdown", "path": "/tmp/x", "replaceEdits": "yes"}, "replaceEdits"),
    ({"format": "chatgpt", "path": "/tmp/x", "replaceEdits": True}, "replaceEdits"),  # a format without edits
])
def test_bad_parameters_are_refused_before_any_job_starts(
        engine: Engine, operator: tuple[Dispatcher, Session], params: dict[str, Any], field: str) -> None:
    reply = call(operator, "operator/import", params)

    assert reply["error"]["data"]["reason"] == "invalid_params" and reply["error"]["data"]["field"] == field
    assert engine.jobs.list() == []


def test_a_cancelled_import_keeps_what_it_published_and_is_finished_by_starting_it_again(
        engine: Engine, operator: tuple[Dispatcher, Session], export_file: Path, state_dir: StateDir,
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    held = Held(engine, monkeypatch)
    job = start(operator, {"format": "chatgpt", "path": str(export_file)})
    assert held.entered.wait(WAIT_S)

    assert call(operator, "operator/cancelJob", {"job": job["id"]})["result"]["state"] == "cancelling"
    held.release.set()
    cancelled = engine.jobs.wait(job["id"], WAIT_S)

    assert cancelled["state"] == "cancelled"
    # Stopped between items; those already started finished (engine/importers/bulk.py) and are counted.
    assert cancelled["progress"]["total"] == 2
    assert cancelled["progress"]["done"] == len(records(state_dir, "pages/")) >= 1
    monkeypatch.undo()
    resumed = engine.jobs.wait(start(operator, {"format": "chatgpt", "path": str(export_file)})["id"], WAIT_S)
    assert resumed["state"] == "done" and len(records(state_dir, "pages/")) == 2

    whole = StateDir(tmp_path / "whole")  # the same import, never cancelled, makes as many files
    assert main(["--state-dir", str(whole.root), "import", "chatgpt", str(export_file)]) == 0
    assert len(store_snapshot(whole)) == len(store_snapshot(state_dir))


# --- the command line beside the engine ---------------------------------------------------------------------


def test_the_command_beside_the_engine_imports_through_it_and_prints_the_same(
        tmp_path: Path, export_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    here, served = StateDir(tmp_path / "here" / "state"), StateDir(tmp_path / "served" / "state")
    argv = ["import", "chatgpt", str(export_file)]
    local = [run(capsys, here, argv), run(capsys, here, argv), run(capsys, here, [*argv, "--dry-run"])]

    with serving(served) as engine:
        beside = [run(capsys, served, argv), run(capsys, served, argv), run(capsys, served, [*argv, "--dry-run"])]
        assert engine.registry.agent("main") is not None  # the serving engine did the work
        assert {job["kind"] for job in engine.jobs.list()} == {"import"}

    for (code, out, err), (local_code, local_out, local_err) in zip(beside, local):
        assert (code, out) == (local_code, local_out) and code == 0
        # Progress: at most a line a second on both; beside the engine the lines it polled, ending the same.
        assert set(err.splitlines()) <= set(local_err.splitlines())
        assert err.splitlines()[-1:] == local_err.splitlines()[-1:]
    assert "Registered owner agent main; its token is in <dir>/state/tokens/main.token." in local[0][1]
    assert local[0][2].endswith("knowledge import chatgpt: 2/2 conversations\n")
    assert local[2][2] == "" and "nothing was written" in local[2][1]
    assert len(records(here, "pages/")) == len(records(served, "pages/")) == 2


def test_the_command_beside_the_engine_never_says_written_after_linked(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    for name, text in (("Inbox", "See [[Garden]].\n"), ("Garden", "Tulips; see [[Inbox]].\n"), ("Tram", "Fix it.\n")):
        (notes / f"{name}.md").write_text(text, encoding="utf-8")
    here, served = StateDir(tmp_path / "here" / "state"), StateDir(tmp_path / "served" / "state")
    argv = ["import", "markdown", str(notes)]
    local = run(capsys, here, argv)
    with serving(served) as engine:
        reached, release = threading.Event(), threading.Event()
        real = engine.remember

        def remember(caller: Any, params: dict[str, Any]) -> dict[str, Any]:  # the links wait: pages all written
            reached.set()
            assert release.wait(WAIT_S), "the test never released the links"
            return real(caller, params)

        polled_while_linking = []

        def sleep(seconds: float) -> None:  # the links go on once the command has polled the job while linking
            if reached.is_set():
                if polled_while_linking:
                    release.set()
                polled_while_linking.append(True)
            threading.Event().wait(seconds)

        monkeypatch.setattr(engine, "remember", remember)
        command_waits(monkeypatch, sleep)
        beside = run(capsys, served, argv)

    assert local[0] == beside[0] == 0 and local[1] == beside[1]
    lines = beside[2].splitlines()
    assert len(polled_while_linking) >= 2, "the command polled the job while it was linking"
    assert lines[-1] == local[2].splitlines()[-1] == "knowledge import markdown: 3/3 notes linked", lines
    first_linked = next(number for number, line in enumerate(lines) if line.endswith(" linked"))
    assert all(line.endswith(" linked") for line in lines[first_linked:]), lines


def test_a_dry_run_of_a_changed_folder_says_what_it_would_revise_here_and_beside_the_engine(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "Inbox.md").write_text("Call the tram museum.\n", encoding="utf-8")
    (notes / "Garden.md").write_text("Tulips in October.\n", encoding="utf-8")
    here, served = StateDir(tmp_path / "here" / "state"), StateDir(tmp_path / "served" / "state")
    argv = ["import", "markdown", str(notes)]
    assert run(capsys, here, argv)[0] == run(capsys, served, argv)[0] == 0
    (notes / "Inbox.md").write_text("Call the tram museum on Monday.\n", encoding="utf-8")
    before = store_snapshot(here), store_snapshot(served)

    local = run(capsys, here, [*argv, "--dry-run"])
    with serving(served) as engine:
        beside = run(capsys, served, [*argv, "--dry-run"])
        assert {job["kind"] for job in engine.jobs.list()} == {"import"}

    assert local == beside and local[0] == 0
    assert local[1] == ("Dry run of the markdown import: it would create 1 source, 1 page, and reuse 1 source, "
                        "1 page (made by an earlier run of this input); nothing was written.\n"
                        "1 note changed since an earlier import: it would get a new revision of its page.\n")
    assert (store_snapshot(here), store_snapshot(served)) == before


def test_edits_made_in_the_store_are_kept_or_replaced_the_same_here_and_beside_the_engine(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "Inbox.md").write_text("Call the tram museum.\n", encoding="utf-8")
    here, served = StateDir(tmp_path / "here" / "state"), StateDir(tmp_path / "served" / "state")
    argv = ["import", "markdown", str(notes)]
    assert run(capsys, here, argv)[0] == run(capsys, served, argv)[0] == 0
    for state in (here, served):  # the owner edits the page in the store's vault
        [page] = records(state, "pages/")
        path = only_store(state) / "vault" / page
        path.write_bytes(path.read_bytes() + b"Ask for the Sunday hours.\n")
    (notes / "Inbox.md").write_text("Call the tram museum on Monday.\n", encoding="utf-8")
    before = store_snapshot(here), store_snapshot(served)

    local = run(capsys, here, argv)
    with serving(served) as engine:
        beside = run(capsys, served, argv)
        assert (store_snapshot(here), store_snapshot(served)) == before  # kept: nothing written
        replaced = run(capsys, here, [*argv, "--replace-edits"]), run(capsys, served, [*argv, "--replace-edits"])
        assert {job["title"] for job in engine.jobs.list()} >= {
            "Import markdown notes into main's store, replacing edits made in the store"}

    assert local[:2] == beside[:2] and local[0] == 0  # the code and the summary (progress as the job was polled)
    assert local[1].splitlines()[1].startswith("Kept your edits: 1 note changed since an earlier import, but its "
                                               "page has been revised in the store since")
    assert replaced[0][:2] == replaced[1][:2] and replaced[0][0] == 0
    assert "1 note changed since an earlier import: it got a new revision of its page." in replaced[0][1]
    assert "Kept your edits" not in replaced[0][1]
    with pytest.raises(SystemExit) as refused:  # a format without edits to keep has no such option
        run(capsys, here, ["import", "chatgpt", str(notes), "--replace-edits"])
    assert refused.value.code == 2 and "--replace-edits" in capsys.readouterr().err


def test_bad_input_beside_the_engine_is_refused_as_here_and_nothing_is_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    notes = tmp_path / "notes"
    (notes / "People").mkdir(parents=True)
    (notes / "People" / "Bruno.md").write_text(f"---\ntitle: Bruno\n---\nBruno's key {SECRET}\n", encoding="utf-8")
    here, served = StateDir(tmp_path / "here" / "state"), StateDir(tmp_path / "served" / "state")
    argv = ["import", "markdown", str(notes)]
    local = run(capsys, here, argv)

    with serving(served) as engine:
        before = {} if no_store(served) else store_snapshot(served)
        beside = run(capsys, served, argv)
        assert engine.registry.agent("main") is None

    assert beside == local and local[0] == 2
    assert local[2].startswith("knowledge: People/Bruno.md: line 4 holds what looks like") and SECRET not in local[2]
    assert no_store(here) and no_store(served) and before == {}


def test_ctrl_c_beside_the_engine_cancels_the_import_which_running_again_finishes(
        tmp_path: Path, export_file: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    state = StateDir(tmp_path / "state")
    with serving(state) as engine:
        held = Held(engine, monkeypatch)
        sleeps = []

        def sleep(seconds: float) -> None:  # the first wait is where Ctrl+C lands; the next one lets the engine go on
            sleeps.append(seconds)
            if len(sleeps) == 1:
                assert held.entered.wait(WAIT_S)
                raise KeyboardInterrupt
            held.release.set()
            threading.Event().wait(seconds)

        command_waits(monkeypatch, sleep)
        code, out, err = run(capsys, state, ["import", "chatgpt", str(export_file)])

        assert code == 130 and out == ""
        # Those already started when it stopped finished (engine/importers/bulk.py) and are counted.
        written = len(records(state, "pages/"))
        assert written >= 1
        assert (f"knowledge import chatgpt: stopped by Ctrl+C: the engine cancelled it after {written}/2 "
                "conversations. What was imported stays; running the command again finishes it") in err
        monkeypatch.undo()
        code, out, err = run(capsys, state, ["import", "chatgpt", str(export_file)])
        assert code == 0 and len(records(state, "pages/")) == 2
        # What the run stopped had written is reused; the rest (when it had not finished both) is new.
        assert out.startswith("Imported chatgpt into main's store: " if written < 2 else "Nothing new: all ")


def test_import_archive_is_refused_beside_an_engine_serving_its_target(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    archive = tmp_path / "store.zip"
    archive.write_bytes(b"not looked at")
    state = StateDir(tmp_path / "state")
    with serving(state):
        code, out, err = run(capsys, state, ["import", "archive", str(archive)])
    assert code == 3 and out == ""
    assert "an archive is restored into a state directory no engine serves" in err and "--state-dir" in err
    assert "Nothing was written" in err and no_store(state)


def test_an_export_job_answers_what_operator_export_answers(
        engine: Engine, operator: tuple[Dispatcher, Session], export_file: Path, tmp_path: Path) -> None:
    engine.jobs.wait(start(operator, {"format": "chatgpt", "path": str(export_file)})["id"], WAIT_S)
    refused = call(operator, "operator/startExport", {"out": "relative.zip"})
    assert refused["error"]["data"]["field"] == "out" and len(engine.jobs.list()) == 1

    job = call(operator, "operator/startExport", {"out": str(tmp_path / "a.zip")})["result"]
    done = engine.jobs.wait(job["id"], WAIT_S)
    direct = call(operator, "operator/export", {"out": str(tmp_path / "b.zip")})["result"]

    assert done["state"] == "done" and done["kind"] == "export"
    assert {**done["result"], "archive": None} == {**direct, "archive": None}
    again = engine.jobs.wait(call(operator, "operator/startExport", {"out": str(tmp_path / "a.zip")})["result"]["id"],
                             WAIT_S)
    assert again["state"] == "failed" and again["error"]["reason"] == "conflict"


def test_an_import_cancelled_in_the_window_ends_the_command_saying_so(
        tmp_path: Path, export_file: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    state = StateDir(tmp_path / "state")
    with serving(state) as engine:
        held = Held(engine, monkeypatch)

        def sleep(seconds: float) -> None:  # while the command waits, the owner cancels the job elsewhere
            if held.entered.wait(WAIT_S) and not held.release.is_set():
                engine.jobs.cancel(engine.jobs.list(IMPORT_KIND)[0]["id"])
                held.release.set()
            threading.Event().wait(seconds)

        command_waits(monkeypatch, sleep)
        code, out, err = run(capsys, state, ["import", "chatgpt", str(export_file)])

    assert code == 1 and out == ""
    written = len(records(state, "pages/"))  # those already started finished, and are counted
    assert written >= 1
    assert f"knowledge import chatgpt: cancelled in the engine after {written}/2 conversations." in err


def test_an_import_into_a_store_writes_as_an_owner_agent_of_it(
        engine: Engine, operator: tuple[Dispatcher, Session], export_file: Path) -> None:
    engine.add_agent("main", owner=True)
    engine.add_agent("other", owner=True)
    engine.add_agent("helper")
    engine.resolver.effective("main", create=True)
    engine.resolver.share_store("main", "family", others=("helper",))
    other_store = engine.resolver.effective("other", create=True).store_id

    into_family = engine.jobs.wait(start(operator, {"format": "chatgpt", "path": str(export_file),
                                                    "store": "family"})["id"], WAIT_S)
    into_other = engine.jobs.wait(start(operator, {"format": "chatgpt", "path": str(export_file),
                                                   "store": other_store})["id"], WAIT_S)

    assert into_family["state"] == "done" and into_family["result"]["agent"] == "main"
    assert into_other["state"] == "done" and into_other["result"]["agent"] == "other"
    family = engine.registry.store_named("family")
    assert len(list((Path(family.path) / "vault" / "private" / "pages").rglob("*.md"))) == 2
    for params, reason, field in (({"store": "nowhere"}, "not_found", None),
                                  ({"store": "family", "agent": "other"}, "invalid_params", "agent")):
        reply = call(operator, "operator/import", {"format": "chatgpt", "path": str(export_file), **params})
        assert reply["error"]["data"]["reason"] == reason and reply["error"]["data"].get("field") == field


def test_a_store_the_command_names_is_looked_up_the_same_here_and_beside_the_engine(
        tmp_path: Path, export_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    here, served = StateDir(tmp_path / "here" / "state"), StateDir(tmp_path / "served" / "state")
    for state in (here, served):
        assert main(["--state-dir", str(state.root), "import", "chatgpt", str(export_file)]) == 0
    capsys.readouterr()
    script = [["import", "chatgpt", str(export_file), "--store", "nowhere"],
              ["import", "chatgpt", str(export_file), "--store", "nowhere", "--dry-run"]]
    local = [run(capsys, here, argv) for argv in script]
    with serving(served):
        beside = [run(capsys, served, argv) for argv in script]

    assert beside == local
    assert all(code == 2 and "no store 'nowhere'" in err for code, _, err in local)
