"""Shared fixtures: an isolated environment, a state directory and an engine."""

from __future__ import annotations

import functools
import json
import threading
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

import jsonschema
import pytest

from engine.access.authority import AgentCaller
from engine.core.answers import output_schema
from engine.wire import tools
from engine.service import Engine
from engine.state.statedir import StateDir


ENGINE_THREADS = ("lane-", "git-", "vectors-")


@pytest.fixture(autouse=True)
def isolated_environment(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No test sees the developer's state directory, HOME or fault settings, or leaves engine threads behind."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    for name in ("KNOWLEDGE_STATE_DIR", "KNOWLEDGE_FAULT", "KNOWLEDGE_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    before = set(threading.enumerate())
    yield
    dangling = [t.name for t in threading.enumerate()
                if t not in before and t.is_alive() and t.name.startswith(ENGINE_THREADS)]
    assert not dangling, f"the test left engine threads running (an Engine was not closed): {dangling}"


@pytest.fixture
def state_dir(tmp_path: Path) -> StateDir:
    return StateDir(tmp_path / "state")


@pytest.fixture
def engine(state_dir: StateDir) -> Iterator[Engine]:
    """An engine without a filesystem watcher: every operation rescans, so tests are deterministic."""
    with Engine(state_dir, watch=False) as opened:
        yield opened


@pytest.fixture
def owner(engine: Engine) -> AgentCaller:
    """The owner's main agent, speaking in its owner-private audience."""
    return AgentCaller(engine.add_agent("main", owner=True), {"kind": "owner-private"})


# --- every tool result the suite produces, checked against what tools/list publishes ------------------

_results_lock = threading.Lock()
_problems: list[str] = []  # of the running test
_checked: Counter[str] = Counter()  # tool name (", error" for failed calls): results validated, whole session


def _checked_call(tool: tools.Tool, engine: Any, caller: Any, arguments: dict[str, Any]) -> tools.ToolResult:
    result = _original_call(tool, engine, caller, arguments)
    error = result["isError"]
    value = json.loads(result["content"][0]["text"]) if error else result["structuredContent"]
    problems = [f"{tool.name}{' (error)' if error else ''}: {exc.message} at {list(exc.absolute_path)}"
                for exc in _validator(tools.ToolError if error else tool.answer).iter_errors(value)][:1]
    if error and "structuredContent" in result:
        problems.append(f"{tool.name}: an error result carries structured content, which is not its outputSchema")
    if result["content"] != [{"type": "text", "text": tools.pretty_json(value)}]:
        problems.append(f"{tool.name}: the text is not the structured answer as JSON.stringify(value, null, 2)")
    with _results_lock:
        _problems.extend(problems)
        _checked[tool.name + (", error" if error else "")] += 1
    return result


@functools.cache
def _validator(answer: Any) -> jsonschema.Draft202012Validator:
    """One per declared answer, its schema checked once: a call's own time barely changes under the check."""
    schema = output_schema(answer)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


_original_call = tools.Tool.call
tools.Tool.call = _checked_call  # type: ignore[method-assign]  # the one place every tools/call result is made
for _answer in [tools.ToolError, *(tool.answer for tool in tools.CORE_TOOLS)]:
    _validator(_answer)  # built before any test: checking a result costs a call next to no time


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """Fail the test whose tool call answered outside the tool's ``outputSchema`` (or, for an ``isError``
    result, outside ``ToolError``), or with a text that is not its mirror: a check of every answer, not a
    sample (docs/protocol-tools.md)."""
    with _results_lock:
        _problems.clear()
    result = yield
    with _results_lock:
        found, _problems[:] = list(_problems), []
    if found:
        raise AssertionError("tool results outside their declared answers:\n" + "\n".join(found[:20]))
    return result


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _checked:
        counts = ", ".join(f"{name} {count}" for name, count in sorted(_checked.items()))
        terminalreporter.write_line(f"tool results validated against their schemas: {counts}")
