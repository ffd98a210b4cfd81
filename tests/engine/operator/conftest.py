"""Every answer the operator tests produce is checked against the answer its function declares."""

from __future__ import annotations

import inspect

import pytest

from engine.core import jobs
from engine.operator import browse, client_config, doctor, gate_operator, methods, model_benchmark, model_operator
from engine.operator import partitions
from tests.engine.operator.declared import checked, declared_answer

CLASSES = (methods.OperatorMethods, gate_operator.GateOperator, model_operator.ModelOperator, jobs.Jobs)
MODULES = (browse, client_config, doctor, methods, model_benchmark, model_operator, partitions)


@pytest.fixture(autouse=True)
def operator_answers_hold_to_their_declarations(monkeypatch: pytest.MonkeyPatch) -> None:
    """Wrap each operator method and each function building an operator answer (where its callers look it up)
    so that whatever a test makes it answer is validated; partitions' and jobs' handlers call these."""
    for cls in CLASSES:
        for name, member in vars(cls).items():
            shape = declared_answer(member) if inspect.isfunction(member) else None
            if shape is not None:
                monkeypatch.setattr(cls, name, checked(member, shape))
    for module in MODULES:
        for name, member in vars(module).items():
            shape = declared_answer(member) if inspect.isfunction(member) else None
            if shape is not None and member.__module__.startswith("engine."):
                monkeypatch.setattr(module, name, checked(member, shape))
