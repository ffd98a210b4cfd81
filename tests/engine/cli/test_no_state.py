"""A command given bad input, or run where there is no state, says so and changes nothing: run against a
``--state-dir`` that does not exist, it leaves that path absent.

Exempt from "leaves the path absent" when their input is good, because making state is their job:
``serve`` and ``desktop`` (they run the engine, which opens a new state directory), ``demo``, ``import``
(it imports into the store it creates), ``agents add``, ``sync clone``, ``settings writes`` /
``search-knowledge`` / ``workspace-roots`` (they write config.json), ``models pull`` / ``add-local`` (they
write under models/), and ``bench`` (it writes its figures).  Their bad input is refused here all the same.
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

import pytest

from engine.cli import main
from engine.cli.commands import build_parser

MISSING = "/nonexistent/knowledge-desk-test"

# Commands that work on existing state: with none, each says there is none and creates none.
NEEDS_STATE = [
    ["doctor"], ["doctor", "--json"], ["reindex"], ["search", "hello"], ["search", "hello", "--limit", "-1"],
    ["agents", "remove", "nope"], ["agents", "config", "nope"],
    ["grants", "add", "nope", "chat:1"], ["grants", "remove", "nope", "chat:1"],
    ["sync", "remote", "add", "origin", f"{MISSING}/remote"],
    ["sync", "remote", "remove", "origin"], ["sync", "now"], ["sync", "dismiss", "sc_1"], ["gate", "suggest"],
    ["export", "out.zip"],
]

# Bad input, each with what its error says.
BAD_INPUT = [
    (["agents", "add", "Bad Name"], "agent names are"),
    (["agents", "add", "helper", "--scopes", "bogus"], "scopes must be"),
    (["agents", "add", "helper", "--scopes", ""], "scopes must be"),  # never read as every scope
    (["grants", "add", "main", "chat:1", "--access", "bogus"], "invalid choice"),
    (["serve", "--port", "-5"], "is not a port"),
    (["serve", "--http", "web"], "is not a port"),
    (["serve", "--host", "0.0.0.0"], "pass --http PORT too"),
    (["demo", "--bogus"], "unrecognized arguments"),
    (["import", "locomo", f"{MISSING}/locomo.json"], "cannot read"),
    (["import", "archive", f"{MISSING}/a.zip"], "no such archive"),
    (["import", "markdown", f"{MISSING}/notes"], MISSING),
    (["settings", "writes", "maybe"], "invalid choice"),
    (["settings", "search-knowledge", "maybe"], "invalid choice"),
    (["settings", "workspace-roots", f"{MISSING}/dir"], "is not a directory"),
    (["models", "pull", "no-such-model"], "is not in the catalogue"),
    (["models", "pull", "gte-reranker-modernbert-base", "--variant", "bogus"], "has no variant"),
    (["models", "add-local", f"{MISSING}/model"], "is not a folder"),
    (["sync", "clone", f"{MISSING}/remote", "--agent", "Bad Name"], "agent must name an agent"),
    (["sync", "clone", f"{MISSING}/remote", "--agent", "main"], "could not be reached"),
    (["sync", "clone", "https://me:secret@example.invalid/vault.git", "--agent", "main"], "url carries a password"),
    (["mcp", "--agent", "main"], "no token for agent"),
    (["mcp", "--agent", "main", "--token-file", f"{MISSING}/token"], "cannot read the token file"),
    (["open", "not-a-link"], "not a Knowledge record link"),
    (["bench", "vault", "--vault", MISSING, "--embedding-model", MISSING], "is not the vault"),
    (["desktop", "--bogus"], "unrecognized arguments"),
    (["frobnicate"], "invalid choice"),
]

# Listings: with no state they answer what a new state directory holds, and create none.
ANSWER_WITHOUT_STATE = [["agents", "list"], ["grants", "list"], ["stores", "list"], ["sync", "remote", "list"],
                        ["sync", "status"], ["settings", "show"], ["models", "list"]]


def run(state: Path, argv: list[str], monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"")))  # `knowledge mcp`: a client that hung up
    try:
        return main(["--state-dir", str(state), *argv])
    except SystemExit as exc:  # argparse's refusal
        return int(exc.code or 0)


@pytest.mark.parametrize("argv", NEEDS_STATE, ids=" ".join)
def test_a_command_that_needs_state_says_there_is_none_and_creates_none(
        argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    state = tmp_path / "absent" / "state"
    assert run(state, argv, monkeypatch) == 2
    err = capsys.readouterr().err
    assert f"no state directory at {state}" in err, err
    assert not (tmp_path / "absent").exists() and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv", NEEDS_STATE, ids=" ".join)
def test_a_command_that_needs_state_leaves_an_empty_folder_empty(
        argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty folder (made by hand for the state, or a mistyped path that happens to exist) holds no state
    either: the command says so and writes nothing into it."""
    state = tmp_path / "empty"
    state.mkdir()
    monkeypatch.chdir(tmp_path)
    assert run(state, argv, monkeypatch) == 2
    err = capsys.readouterr().err
    assert f"{state} is empty; nothing was read or written" in err, err
    assert list(state.iterdir()) == [] and sorted(path.name for path in tmp_path.iterdir()) == ["empty"]


@pytest.mark.parametrize(("argv", "said"), BAD_INPUT, ids=[" ".join(argv) for argv, _ in BAD_INPUT])
def test_bad_input_is_refused_with_what_was_wrong_and_creates_nothing(
        argv: list[str], said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    state = tmp_path / "absent" / "state"
    assert run(state, argv, monkeypatch) == 2
    assert said in capsys.readouterr().err
    assert not (tmp_path / "absent").exists() and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv", ANSWER_WITHOUT_STATE, ids=" ".join)
def test_a_reading_command_answers_without_state_and_creates_none(
        argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    state = tmp_path / "absent" / "state"
    assert run(state, argv, monkeypatch) == 0 and capsys.readouterr().out
    assert not (tmp_path / "absent").exists()


# Every command is in one of the lists above or among those whose job is to make state.
MAKES_STATE = {"serve", "desktop", "demo", "import", "agents add", "sync clone", "settings writes",
               "settings search-knowledge", "settings workspace-roots", "models pull", "models add-local", "bench"}


def _leaves(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> list[str]:
    subparsers = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    if not subparsers:
        return [" ".join(prefix)]
    return [leaf for name, child in subparsers[0].choices.items() for leaf in _leaves(child, (*prefix, name))]


def test_every_command_is_checked_here() -> None:
    leaves = _leaves(build_parser())
    checked = {leaf for argv in NEEDS_STATE + [argv for argv, _ in BAD_INPUT] + ANSWER_WITHOUT_STATE
               for leaf in leaves if argv[:len(leaf.split())] == leaf.split()}
    unchecked = [leaf for leaf in leaves if leaf not in checked | MAKES_STATE
                 and not any(leaf.startswith(made + " ") for made in MAKES_STATE)]
    assert unchecked == [], f"say in {__name__} how these commands meet missing state and bad input: {unchecked}"
