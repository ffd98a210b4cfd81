"""The ``knowledge`` command line: agents, grants, stores, demo, doctor, serve."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import stat
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

import engine as engine_package
from engine.access.authority import AgentCaller
from engine.cli.commands import _hit_lines, main
from engine.state.registry import hash_token
from engine.service import Engine
from engine.state.statedir import StateDir
from tests.helpers import only_store, page, private_dir, vault_snapshot, wait_for

REPO_ROOT = Path(__file__).resolve().parents[3]


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> object:
    capsys.readouterr()
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def demo_record_count(output: str) -> int:
    match = re.search(r"Demo store ready: (\d+) records", output)
    assert match, output
    return int(match.group(1))


# --- agents -------------------------------------------------------------------------------


def test_agents_add_prints_the_token_once_and_keeps_only_its_hash(
        state_dir: StateDir, capsys: pytest.CaptureFixture[str]) -> None:
    added = run_json(capsys, "--state-dir", str(state_dir.root), "agents", "add", "scout", "--json")

    assert set(added) == {"agent", "token", "tokenFile"} and added["agent"] == "scout"
    token_file = Path(added["tokenFile"])
    assert token_file.parent == state_dir.tokens
    assert token_file.read_text(encoding="utf-8") == added["token"] + "\n"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(state_dir.tokens.stat().st_mode) & 0o077 == 0
    secret = added["token"].encode("utf-8")
    for path in state_dir.root.glob("registry.sqlite*"):
        assert secret not in path.read_bytes(), path
    with sqlite3.connect(state_dir.registry) as db:
        hashes = [row[0] for row in db.execute("SELECT token_hash FROM credentials WHERE agent = 'scout'")]
    assert hashes == [hash_token(added["token"])]


def test_adding_an_agent_twice_fails_clearly_and_keeps_the_first_token(
        state_dir: StateDir, capsys: pytest.CaptureFixture[str]) -> None:
    first = run_json(capsys, "--state-dir", str(state_dir.root), "agents", "add", "scout", "--json")

    code = main(["--state-dir", str(state_dir.root), "agents", "add", "scout", "--json"])

    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    assert "agent 'scout' already exists" in captured.err
    assert Path(first["tokenFile"]).read_text(encoding="utf-8") == first["token"] + "\n"


def test_agents_list_shows_a_store_only_after_first_use(
        state_dir: StateDir, capsys: pytest.CaptureFixture[str]) -> None:
    root = str(state_dir.root)
    added = run_json(capsys, "--state-dir", root, "agents", "add", "scout", "--owner", "--json")
    before = run_json(capsys, "--state-dir", root, "agents", "list", "--json")
    assert [(a["name"], a["owner"], a["store"]["status"]) for a in before] == [("scout", True, "not created")]
    assert not state_dir.stores.exists() or not any(state_dir.stores.iterdir())

    with Engine(state_dir, watch=False, git=False) as engine:
        engine.save_page(AgentCaller(added["token"], {"kind": "owner-private"}), page("cli-1", "Dana Whitaker"))
    after = run_json(capsys, "--state-dir", root, "agents", "list", "--json")

    assert after[0]["store"]["status"] == "ok"
    assert after[0]["store"]["storeId"] == only_store(state_dir).name


def test_agents_remove_revokes_the_agent_and_keeps_its_store(
        state_dir: StateDir, capsys: pytest.CaptureFixture[str]) -> None:
    root = str(state_dir.root)
    added = run_json(capsys, "--state-dir", root, "agents", "add", "scout", "--owner", "--json")
    with Engine(state_dir, watch=False, git=False) as engine:
        engine.save_page(AgentCaller(added["token"], {"kind": "owner-private"}), page("cli-1", "Dana Whitaker"))
    kept = vault_snapshot(private_dir(state_dir))

    capsys.readouterr()
    assert main(["--state-dir", root, "agents", "remove", "scout"]) == 0
    assert "its store is kept" in capsys.readouterr().out

    assert run_json(capsys, "--state-dir", root, "agents", "list", "--json") == []
    stores = run_json(capsys, "--state-dir", root, "stores", "list", "--json")
    assert [(s["storeId"], s["status"]) for s in stores] == [(only_store(state_dir).name, "ok")]
    # Kept, but unused: a removed agent is no longer one of its members.
    assert stores[0]["agents"] == []
    assert vault_snapshot(private_dir(state_dir)) == kept
    assert not Path(added["tokenFile"]).exists()
    assert main(["--state-dir", root, "agents", "remove", "scout"]) == 2


# --- stores, demo, doctor -----------------------------------------------------------------


def test_stores_list_before_and_after_the_demo(state_dir: StateDir, capsys: pytest.CaptureFixture[str]) -> None:
    root = str(state_dir.root)
    assert run_json(capsys, "--state-dir", root, "stores", "list", "--json") == []

    assert main(["--state-dir", root, "demo"]) == 0
    stores = run_json(capsys, "--state-dir", root, "stores", "list", "--json")

    assert len(stores) == 1
    assert stores[0]["status"] == "ok" and stores[0]["owner"] == "main" and stores[0]["agents"] == ["main"]
    assert stores[0]["storeId"] == only_store(state_dir).name


def test_the_demo_is_idempotent(state_dir: StateDir, capsys: pytest.CaptureFixture[str]) -> None:
    root = str(state_dir.root)
    assert main(["--state-dir", root, "demo"]) == 0
    first_output = capsys.readouterr().out
    first = vault_snapshot(only_store(state_dir) / "vault")

    assert main(["--state-dir", root, "demo"]) == 0
    second_output = capsys.readouterr().out

    assert "Registered owner agent main" in first_output
    assert "Registered owner agent main" not in second_output
    assert demo_record_count(first_output) == demo_record_count(second_output) > 0
    assert vault_snapshot(only_store(state_dir) / "vault") == first
    records = [path for path in first if path.endswith(".md")]
    assert any(path.startswith("private/pages/") for path in records)
    assert any(path.startswith("private/claims/") for path in records)
    assert any(path.startswith("private/relationships/") for path in records)


def test_doctor_passes_the_demo_and_names_an_invalid_record_file(
        state_dir: StateDir, capsys: pytest.CaptureFixture[str]) -> None:
    root = str(state_dir.root)
    assert main(["--state-dir", root, "demo"]) == 0
    capsys.readouterr()
    assert main(["--state-dir", root, "doctor"]) == 0
    assert "main: git committed" in capsys.readouterr().out

    (private_dir(state_dir) / "pages" / "broken-note.md").write_text("no frontmatter here\n", encoding="utf-8")
    code = main(["--state-dir", root, "doctor"])
    text = capsys.readouterr().out
    json_code = main(["--state-dir", root, "doctor", "--json"])
    report = json.loads(capsys.readouterr().out)

    assert code == 1 and json_code == 1
    assert "pages/broken-note.md" in text and "error" in text
    findings = report["agents"][0]["diagnostics"]["findings"]
    assert [f["path"] for f in findings if f["severity"] == "error"] == ["pages/broken-note.md"]


# --- where the state lives ----------------------------------------------------------------


@pytest.mark.parametrize("placement", ["before", "after-group", "after-action"])
def test_state_dir_option_works_before_or_after_the_subcommand(
        tmp_path: Path, placement: str, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "elsewhere"
    option = ["--state-dir", str(root)]
    argv = {
        "before": [*option, "agents", "add", "scout", "--json"],
        "after-group": ["agents", *option, "add", "scout", "--json"],
        "after-action": ["agents", "add", "scout", "--json", *option],
    }[placement]

    added = run_json(capsys, *argv)

    assert Path(added["tokenFile"]).parent == root / "tokens"
    with sqlite3.connect(root / "registry.sqlite") as db:
        assert db.execute("SELECT name FROM agents").fetchall() == [("scout",)]


def test_the_state_dir_comes_from_the_environment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "from-env"
    monkeypatch.setenv("KNOWLEDGE_STATE_DIR", str(root))

    added = run_json(capsys, "agents", "add", "scout", "--json")
    listed = run_json(capsys, "agents", "list", "--json")

    assert Path(added["tokenFile"]) == root / "tokens" / "scout.token"
    assert [agent["name"] for agent in listed] == ["scout"]
    assert run_json(capsys, "--state-dir", str(tmp_path / "other"), "agents", "list", "--json") == []


# --- grants -------------------------------------------------------------------------------


def test_grants_add_list_and_remove(state_dir: StateDir, capsys: pytest.CaptureFixture[str]) -> None:
    root = str(state_dir.root)
    run_json(capsys, "--state-dir", root, "agents", "add", "scout", "--json")
    run_json(capsys, "--state-dir", root, "agents", "add", "helper", "--json")

    assert main(["--state-dir", root, "grants", "add", "scout", "chat:1"]) == 0
    assert main(["--state-dir", root, "grants", "add", "scout", "chat:2", "--access", "read-and-save"]) == 0
    assert main(["--state-dir", root, "grants", "add", "helper", "chat:1"]) == 0
    assert "chat:2" in capsys.readouterr().out
    everyone = run_json(capsys, "--state-dir", root, "grants", "list", "--json")
    scouts = run_json(capsys, "--state-dir", root, "grants", "list", "scout", "--json")

    assert [(g["agent"], g["sessionKey"], g["access"]) for g in everyone] == [
        ("helper", "chat:1", "read"), ("scout", "chat:1", "read"), ("scout", "chat:2", "read-and-save")]
    assert [g["sessionKey"] for g in scouts] == ["chat:1", "chat:2"]

    assert main(["--state-dir", root, "grants", "remove", "scout", "chat:1"]) == 0
    assert [g["sessionKey"] for g in run_json(capsys, "--state-dir", root, "grants", "list", "scout", "--json")] \
        == ["chat:2"]
    assert main(["--state-dir", root, "grants", "remove", "scout", "chat:1"]) == 2
    assert main(["--state-dir", root, "grants", "add", "nobody", "chat:1"]) == 2
    assert "no agent named 'nobody'" in capsys.readouterr().err


# --- one engine per state directory -------------------------------------------------------


def test_a_second_engine_on_the_same_state_dir_exits_3(
        engine: Engine, state_dir: StateDir, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--state-dir", str(state_dir.root), "doctor"])

    err = capsys.readouterr().err
    assert code == 3
    assert "another Knowledge engine" in err and str(state_dir.root) in err
    # Registry-only commands still work beside the running engine.
    assert main(["--state-dir", str(state_dir.root), "agents", "list", "--json"]) == 0


def _start_serve(tmp_path: Path, state: StateDir, *extra: str) -> tuple[subprocess.Popen[bytes], Path]:
    env = {key: value for key, value in os.environ.items() if key != "KNOWLEDGE_STATE_DIR"}
    env["KNOWLEDGE_STATE_DIR"] = str(state.root)
    log = tmp_path / "serve.log"
    with log.open("wb") as sink:
        # A free port: the suite runs beside an engine the owner has serving on the default one.
        process = subprocess.Popen([sys.executable, "-m", "engine.cli", "serve", "--port", "0", *extra],
                                   cwd=REPO_ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT)
    return process, log


def _wait_until_serving(process: subprocess.Popen[bytes], state: StateDir, log: Path) -> dict:
    def ready() -> dict | None:
        if process.poll() is not None:
            raise AssertionError(f"serve exited with {process.returncode}: {log.read_text(encoding='utf-8')}")
        return state.read_engine_info()

    return wait_for(ready, timeout=60)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.kill()
    process.wait(timeout=30)


def test_serve_writes_engine_json_and_stops_cleanly_on_sigterm(
        tmp_path: Path, state_dir: StateDir, capsys: pytest.CaptureFixture[str]) -> None:
    process, log = _start_serve(tmp_path, state_dir)
    try:
        info = _wait_until_serving(process, state_dir, log)
        assert info["pid"] == process.pid
        assert info["started_at"]
        assert stat.S_IMODE(state_dir.engine_info.stat().st_mode) & 0o077 == 0
        capsys.readouterr()
        assert main(["--state-dir", str(state_dir.root), "doctor"]) == 0  # answered by the serving engine
        assert capsys.readouterr().out == "No problems found.\n"
        assert main(["--state-dir", str(state_dir.root), "demo"]) == 3  # needs the state dir to itself
        err = capsys.readouterr().err
        assert f"pid {process.pid}" in err and f"kill {process.pid}" in err and "--state-dir" in err

        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0, log.read_text(encoding="utf-8")
    finally:
        _stop(process)
    assert not state_dir.engine_info.exists()
    assert main(["--state-dir", str(state_dir.root), "doctor"]) == 0


def test_serve_demo_seeds_the_demo_store(
        tmp_path: Path, state_dir: StateDir, capsys: pytest.CaptureFixture[str]) -> None:
    process, log = _start_serve(tmp_path, state_dir, "--demo")
    try:
        _wait_until_serving(process, state_dir, log)
        stores = run_json(capsys, "--state-dir", str(state_dir.root), "stores", "list", "--json")
        assert [(s["owner"], s["status"]) for s in stores] == [("main", "ok")]
        assert (private_dir(state_dir) / "pages" / "people" / "dana-whitaker.md").is_file()
        assert (state_dir.tokens / "main.token").is_file()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0, log.read_text(encoding="utf-8")
    finally:
        _stop(process)
    assert "Demo store ready" in log.read_text(encoding="utf-8")


def test_version_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])

    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"knowledge-desk {engine_package.__version__}"
    assert engine_package.__version__ == version("knowledge-desk")


# --- a state directory the disk will not let the engine use ------------------------------------------------


def _serve_once(state: StateDir, *, drop_root_override: bool = False) -> subprocess.CompletedProcess[str]:
    """``knowledge serve --port 0`` run to its end; as root, without the capability that ignores file modes."""
    env = {key: value for key, value in os.environ.items() if key != "KNOWLEDGE_STATE_DIR"}
    command = [sys.executable, "-m", "engine.cli", "--state-dir", str(state.root), "serve", "--port", "0"]
    if drop_root_override and os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root needs setpriv to drop CAP_DAC_OVERRIDE")
        command = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--inh-caps", "-all", *command]
    return subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60)


def _one_clear_line(completed: subprocess.CompletedProcess[str]) -> str:
    assert completed.returncode == 1, (completed.returncode, completed.stderr)
    lines = completed.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in completed.stderr, completed.stderr
    return lines[0]


def test_serve_on_a_port_another_program_holds_exits_4_saying_what_to_pass(state_dir: StateDir) -> None:
    env = {key: value for key, value in os.environ.items() if key != "KNOWLEDGE_STATE_DIR"}
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        completed = subprocess.run(
            [sys.executable, "-m", "engine.cli", "--state-dir", str(state_dir.root), "serve", "--port", str(port)],
            cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60)

    assert completed.returncode == 4 and "Traceback" not in completed.stderr, completed.stderr
    [line] = completed.stderr.strip().splitlines()
    assert line.startswith(f"knowledge: cannot listen on 127.0.0.1:{port}: ") and "--port 0" in line
    assert not state_dir.engine_info.exists()


def test_serve_on_a_read_only_state_dir_exits_1_with_one_clear_line(state_dir: StateDir,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--state-dir", str(state_dir.root), "agents", "add", "main", "--owner"]) == 0
    paths = [state_dir.root, *state_dir.root.rglob("*")]
    for path in paths:
        path.chmod(path.stat().st_mode & ~0o222)
    try:
        line = _one_clear_line(_serve_once(state_dir, drop_root_override=True))
    finally:
        for path in paths:
            path.chmod(path.stat().st_mode | 0o200)
    assert line.startswith(f"knowledge: cannot use the state directory {state_dir.root}:")
    assert "make it writable" in line


def test_serve_on_a_full_state_dir_exits_1_with_one_clear_line(tmp_path: Path) -> None:
    """A real full disk: a 1 MiB tmpfs, filled (root and mount needed, as CI has)."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a real full disk needs root and mount; the message itself is tested below")
    mountpoint = tmp_path / "small"
    mountpoint.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mountpoint)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"mount refused: {mounted.stderr.strip()}")
    try:
        filler = os.open(mountpoint / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            while os.write(filler, b"\0" * 4096):
                pass
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
        finally:
            os.close(filler)
        line = _one_clear_line(_serve_once(StateDir(mountpoint / "state")))
    finally:
        subprocess.run(["umount", "-l", str(mountpoint)], capture_output=True)
    assert "No space left on device (ENOSPC)" in line and "free some space" in line


@pytest.mark.parametrize("failure, expected", [
    (OSError(errno.ENOSPC, "No space left on device", "/state/registry.sqlite"), "(ENOSPC) at /state/registry"),
    (OSError(errno.EROFS, "Read-only file system"), "(EROFS); make it writable"),
    (sqlite3.OperationalError("database or disk is full"), "its database refused: database or disk is full; free"),
    (sqlite3.OperationalError("attempt to write a readonly database"), "readonly database; make it writable"),
])
def test_an_unusable_state_dir_is_named_with_its_cause_and_what_to_do(state_dir, failure, expected):
    from engine.cli.commands import unusable_state_dir

    line = unusable_state_dir(state_dir, failure)
    assert line.startswith(f"cannot use the state directory {state_dir.root}: ") and expected in line
    assert "\n" not in line


@pytest.mark.parametrize("failure, blamed", [
    (OSError(errno.ENOSPC, "No space left on device", "STATE/registry.sqlite"), True),
    (OSError(errno.EROFS, "Read-only file system"), True),
    (sqlite3.OperationalError("database or disk is full"), True),
    (TimeoutError("timed out"), False),
    (ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"), False),
    (FileNotFoundError(errno.ENOENT, "No such file or directory", "/elsewhere/model"), False),
])
def test_only_a_failure_of_the_state_dir_is_said_to_be_the_state_dirs(state_dir, failure, blamed, monkeypatch,
                                                                      capsys):
    from engine.cli import commands

    if getattr(failure, "filename", None) == "STATE/registry.sqlite":
        failure.filename = str(state_dir.root / "registry.sqlite")

    def fail(args, state):
        raise failure

    monkeypatch.setattr(commands, "build_parser", lambda: _FailingParser(state_dir, fail))
    assert commands.main(["--state-dir", str(state_dir.root), "agents", "list"]) == 1
    line = capsys.readouterr().err.strip()
    assert ("cannot use the state directory" in line) == blamed, line
    assert line.startswith("knowledge: ") and "\n" not in line


class _FailingParser:
    """A command line whose command fails with the given error."""

    def __init__(self, state_dir, handler) -> None:
        self.state_dir, self.handler = state_dir, handler

    def parse_args(self, argv):
        import argparse

        return argparse.Namespace(state_dir=str(self.state_dir.root), handler=self.handler)


def test_the_command_line_loads_a_benchmark_only_for_its_bench_command() -> None:
    probe = ("import sys\nfrom engine.cli.commands import build_parser, main\n"
             "build_parser().parse_args(['bench', 'search'])\n"
             "print('loaded', *sorted(m for m in sys.modules if m.startswith('engine.bench')))\n"
             "main(['bench', 'gate', '--output', '-'])\n"
             "print('loaded', *sorted(m for m in sys.modules if m.startswith('engine.bench')))\n")
    completed = subprocess.run([sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True,
                               timeout=60)

    assert completed.returncode == 0, completed.stderr
    at_start, after_gate = (set(line.split()[1:]) for line in completed.stdout.splitlines()
                            if line.startswith("loaded "))
    assert at_start == {"engine.bench", "engine.bench.defaults"}
    assert "engine.bench.gate" in after_gate and "engine.bench.search" not in after_gate


def test_the_bench_commands_default_to_what_the_benchmarks_do() -> None:
    from engine.bench import gate, search, throughput
    from engine.cli.commands import build_parser

    parser = build_parser()
    searching = parser.parse_args(["bench", "search"])
    gating = parser.parse_args(["bench", "gate"])

    assert (searching.data, searching.output) == (str(search.Options().data), str(search.Options().output))
    assert (gating.data, gating.output) == (str(gate.DEFAULT_DATA), str(gate.DEFAULT_OUTPUT))
    assert tuple(parser.parse_args(["bench", "throughput"]).records) == throughput.SIZES
    assert parser.parse_args(["bench", "import"]).output == "docs/benchmarks/imports.md"
    assert parser.parse_args(["bench", "git"]).output == "docs/benchmarks/git-history.md"
    syncing = parser.parse_args(["bench", "sync"])
    assert (syncing.records, syncing.clone_records, syncing.repeats, syncing.out) == (
        1000, 10_000, 3, "docs/benchmarks/sync.md")  # issue 28's sizes, as docs/benchmarks/sync.md quotes them


def test_search_prints_a_line_for_each_hit_and_its_snippet_on_one_indented_line(
        state_dir: StateDir, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--state-dir", str(state_dir.root), "demo"]) == 0
    capsys.readouterr()

    assert main(["--state-dir", str(state_dir.root), "search", "Dana", "--links"]) == 0
    mode, *lines = capsys.readouterr().out.splitlines()

    # No embedding model is installed here: the first line says the search is keyword's, and why.
    assert mode == ("keyword search (the embedding model all-minilm-l6-v2-int8 is not installed: knowledge models "
                    "pull all-minilm-l6-v2-int8)")
    hits = [line for line in lines if re.match(r"\d\.\d{3}  ", line)]
    snippets = [line for line in lines if line.startswith("       ")]
    assert hits and len(hits) + len(snippets) == len(lines)  # nothing else: no line a snippet broke off
    assert all(line.strip() for line in snippets)  # a hit without a snippet (a relationship) has no empty line
    assert any(" relationship " in line for line in hits) and len(snippets) < len(hits)


def test_search_lists_pages_and_claims_as_the_window_does_and_links_when_asked(
        state_dir: StateDir, capsys: pytest.CaptureFixture[str]) -> None:
    """The demo's links name Dana ("Dana Whitaker works on Atlas Migration"): the owner's search lists her page
    and claims, not the links between notes, unless --links asks for them too."""
    assert main(["--state-dir", str(state_dir.root), "demo"]) == 0
    capsys.readouterr()

    def kinds(*extra: str) -> list[str]:
        assert main(["--state-dir", str(state_dir.root), "search", "Dana", "--json", *extra]) == 0
        return [hit["kind"] for hit in json.loads(capsys.readouterr().out)["hits"]]

    assert "page" in kinds() and set(kinds()) <= {"page", "claim"}
    assert "relationship" in kinds("--links") and set(kinds()) < set(kinds("--links"))


def test_search_lists_nothing_for_a_question_whose_meaningful_words_match_nothing(
        state_dir: StateDir, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--state-dir", str(state_dir.root), "demo"]) == 0
    capsys.readouterr()

    assert main(["--state-dir", str(state_dir.root), "search", "how do I get to the zeppelin", "--mode", "keyword"]) == 0
    assert capsys.readouterr().out.splitlines() == ["keyword search", "No matches."]


def test_search_marks_the_query_words_in_bold_on_a_terminal() -> None:
    hit = {"score": 1.0, "kind": "page", "title": "Sync", "snippet": "\u2026sync the vault to a phone.",
           "highlights": [[1, 5], [21, 26]]}

    assert _hit_lines(hit).splitlines()[1].strip() == "\u2026sync the vault to a phone."
    assert _hit_lines(hit, bold=True).splitlines()[1].strip() == (
        "\u2026\033[1msync\033[0m the vault to a \033[1mphone\033[0m.")


def test_search_json_says_the_mode_asked_for_and_the_snippets_marks(
        state_dir: StateDir, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--state-dir", str(state_dir.root), "demo"]) == 0
    capsys.readouterr()

    assert main(["--state-dir", str(state_dir.root), "search", "Dana", "--mode", "hybrid", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)

    assert answer["mode"] == "keyword" and answer["embedding"] == "not_installed"
    assert "is not installed" in answer["hybridUnavailable"]
    marked = [hit["snippet"][start:end] for hit in answer["hits"] for start, end in hit["highlights"]]
    assert marked and {word.lower() for word in marked} == {"dana"}


def test_ctrl_c_in_an_import_run_here_is_one_line_and_exit_130_and_a_rerun_finishes_it(
        state_dir: StateDir, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Ctrl+C in a command whose engine runs in this process: the engine closes, the owner reads one line
    saying what stays (no traceback), the exit status is 130, and running the import again finishes it."""
    from engine.cli import import_commands
    from tests.engine.importers.helpers import interrupt_after

    notes = tmp_path / "notes"
    notes.mkdir()
    for number in range(4):
        (notes / f"note {number}.md").write_text(f"# Note {number}\n\nThe harbour at {number}.\n", encoding="utf-8")
    monkeypatch.setattr(import_commands, "terminal_progress", lambda *_: interrupt_after(1))

    assert main(["--state-dir", str(state_dir.root), "import", "markdown", str(notes)]) == 130
    err = capsys.readouterr().err
    assert err.splitlines() == ["knowledge import: stopped by Ctrl+C. What was written before stays. Running the "
                                "command again finishes the import (nothing is imported twice)."]

    monkeypatch.undo()
    assert main(["--state-dir", str(state_dir.root), "import", "markdown", str(notes)]) == 0
    assert len(list((private_dir(state_dir) / "pages").rglob("*.md"))) == 4
    assert main(["--state-dir", str(state_dir.root), "doctor"]) == 0


def test_a_hybrid_search_run_here_with_notes_left_to_embed_says_reindex_embeds_them(
        state_dir: StateDir, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Run here (no engine serves the state directory), the engine's embedding stops when the command ends:
    the notes left are not "still being embedded", and the line says what embeds them."""
    from engine.cli.desk import LocalDesk

    assert main(["--state-dir", str(state_dir.root), "demo"]) == 0
    capsys.readouterr()
    keyword_search = LocalDesk.search
    monkeypatch.setattr(LocalDesk, "search", lambda desk, *asked: {
        **keyword_search(desk, *asked), "mode": "hybrid", "vectors": "building"})  # the engine's answer midway

    assert main(["--state-dir", str(state_dir.root), "search", "Dana"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == (
        "hybrid search (keyword + embedding model; some notes are not embedded yet and are found by their words "
        "only: knowledge reindex embeds them)")


def test_an_import_run_here_says_how_many_records_wait_for_a_vector_and_reindex_embeds_all_hybrid_reads(
        state_dir: StateDir, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Run here, an import's engine stops embedding when the command ends: with an embedding model chosen, the
    import says how many records have no vector and what embeds them; ``knowledge reindex`` then embeds what
    the owner's hybrid search reads, so the search no longer says notes wait for a reindex."""
    from models.fixtures import TINY_EMBEDDER
    from models.installed import ModelStore
    from models.local import add_local

    add_local(ModelStore(state_dir.models), TINY_EMBEDDER)
    # The Knowledge Base runtime and the gate off: the import's engine embeds nothing while it runs.
    state_dir.config.write_text(json.dumps({"embeddingModel": "onnx/tiny-embedder"}), encoding="utf-8")
    notes = tmp_path / "notes"
    notes.mkdir()
    for number in range(3):
        (notes / f"note {number}.md").write_text(f"# Harbour {number}\n\n" + "The boats come in at dawn. " * 60
                                                 + "\n", encoding="utf-8")

    assert main(["--state-dir", str(state_dir.root), "import", "markdown", str(notes)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == (
        "3 of the 3 records in main's store have no vector yet: the embedding model works only while an engine "
        "runs. `knowledge reindex` embeds them now; an engine serving this state directory embeds them from its "
        "first hybrid search (`knowledge search`). Until then hybrid search finds them by their words only.")
    assert run_json(capsys, "--state-dir", str(state_dir.root), "search", "boats", "--json")["vectors"] == "building"

    assert main(["--state-dir", str(state_dir.root), "reindex"]) == 0
    capsys.readouterr()
    assert run_json(capsys, "--state-dir", str(state_dir.root), "search", "boats", "--json")["vectors"] == "ready"

    (notes / "note 3.md").write_text("# Harbour 3\n\nThe ferry leaves at noon.\n", encoding="utf-8")
    assert main(["--state-dir", str(state_dir.root), "import", "markdown", str(notes)]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("1 of the 4 records in main's store have no vector")


def test_an_import_run_here_without_an_embedding_model_says_nothing_of_vectors(
        state_dir: StateDir, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "note.md").write_text("# Harbour\n\nThe boats come in at dawn.\n", encoding="utf-8")
    assert main(["--state-dir", str(state_dir.root), "import", "markdown", str(notes)]) == 0
    assert "vector" not in capsys.readouterr().out
