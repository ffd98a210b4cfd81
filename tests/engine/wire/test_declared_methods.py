"""One way to add a method: every tool, host method, operator method and importer method is a ``Method``
(engine/core/methods.py) declared by its feature package, with the ``Params`` it reads and the answer it
returns, and the wire serves exactly what is declared."""

from __future__ import annotations

import types
import typing
from typing import Any

from engine.core.answers import output_schema
from engine.core.methods import Method
from engine.core.params import Params
from engine.importers import methods as importer_methods
from engine.operator.methods import PREFIX, operator_methods
from engine.wire.host_methods import HOST_METHODS
from engine.wire.protocol import SUBSCRIBE, Dispatcher
from engine.wire.tools import CORE_TOOLS
from tests.engine.operator.declared import check_answer, declared_answer
from tests.engine.operator.test_declared_answers import journaled_desk


def declared(engine) -> dict[str, tuple[Method, ...]]:
    return {"tool": tuple(CORE_TOOLS), "host": HOST_METHODS, "operator": operator_methods(engine),
            "importer": importer_methods.methods(engine)}


def _typed_dicts(answer: Any) -> list[Any]:
    """The TypedDicts an answer declaration names: itself, or each member of its Union."""
    members = typing.get_args(answer) if typing.get_origin(answer) in (typing.Union, types.UnionType) else ()
    return list(members or (answer,))


def test_every_declared_method_has_params_and_a_declared_answer(engine) -> None:
    kinds = declared(engine)
    assert (len(kinds["tool"]), len(kinds["host"]), len(kinds["importer"])) == (11, 9, 5)
    assert len(kinds["operator"]) > 40
    for kind, methods in kinds.items():
        names = [method.name for method in methods]
        assert len(names) == len(set(names)), kind
        for method in methods:
            where = f"{kind} {method.name}"
            assert isinstance(method, Method) and isinstance(method.params, Params), where
            assert callable(method.handler), where
            for shape in _typed_dicts(method.answer):
                assert hasattr(shape, "__required_keys__"), f"{where}: {shape!r} is no TypedDict"
            schema = output_schema(method.answer)
            assert schema.get("type") == "object" or "anyOf" in schema, where
            assert method.params.schema()["type"] == "object", where
            if kind != "tool":  # what tools/list shows is a tool's alone
                assert (method.title, method.description, method.writes) == ("", "", False), where
            else:
                assert method.title and method.description, where


def test_an_operator_handler_that_declares_its_answer_declares_the_same_one(engine) -> None:
    """The declaration and the handler's own return annotation never disagree (one declaration): only the
    handlers passing on another package's answer (annotated as JSON objects) name none of their own."""
    passed_on = set()
    for method in operator_methods(engine):
        own = declared_answer(method.handler)
        if own is None:
            passed_on.add(method.name)
        else:
            assert own is method.answer, method.name
    assert passed_on == {"search", "record", "ontology", "labelGateTurn", "gateWhatIf", "gateStats"}


def test_the_dispatcher_serves_exactly_the_declared_methods(engine) -> None:
    dispatcher = Dispatcher(engine)
    importer_methods.register(dispatcher, engine)
    kinds = declared(engine)
    served = {name for name in dispatcher.methods if name.startswith(("memory/", PREFIX))}
    assert served == ({method.name for method in kinds["host"]} | {SUBSCRIBE}
                      | {PREFIX + method.name for method in kinds["operator"] + kinds["importer"]})
    assert [tool["name"] for tool in dispatcher.tools.listed(writes=True)] == [tool.name for tool in kinds["tool"]]


def test_the_operator_methods_passing_on_an_answer_answer_as_declared(tmp_path) -> None:
    """search, record, ontology, labelGateTurn and gateWhatIf answer what another package builds: each answer
    fits the declaration its Method names (tests/engine/operator/conftest.py checks the others)."""
    with journaled_desk(tmp_path) as (engine, desk, ids):
        answers = {method.name: method.answer for method in operator_methods(engine)}
        turn = desk.rpc("operator/gateJournal", {"agent": "main"})["turns"][0]
        calls = {"search": {"agent": "main", "query": "Alice"},
                 "record": {"agent": "main", "id": ids["Alice Martin"]},
                 "ontology": {"agent": "main"},
                 "labelGateTurn": {"agent": "main", "turn": turn["id"], "needed": [ids["Alice Martin"]]},
                 "gateWhatIf": {"agent": "main", "threshold": 0.5}}
        for name, params in calls.items():
            answer = desk.rpc(PREFIX + name, params)
            check_answer(answer, answers[name])
        assert desk.rpc(PREFIX + "search", calls["search"])["hits"]
