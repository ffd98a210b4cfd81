"""Fault injection for crash-consistency tests.

Honoured only when ``KNOWLEDGE_FAULT`` is set in the environment, which
nothing but a test harness does: ``KNOWLEDGE_FAULT=installed:3`` kills the
process with SIGKILL the third time a publication reaches the ``installed``
step.  Points: ``journaled``, ``installed`` (after each file),
``checkpointed``, ``acknowledged``.
"""

from __future__ import annotations

import os
import signal

FAULT_ENV = "KNOWLEDGE_FAULT"
POINTS = ("journaled", "installed", "checkpointed", "acknowledged")


class Faults:
    def __init__(self, spec: str | None = None) -> None:
        spec = os.environ.get(FAULT_ENV) if spec is None else spec
        self.point: str | None = None
        self.remaining = 0
        if spec:
            point, _, count = spec.partition(":")
            if point not in POINTS:
                raise ValueError(f"{FAULT_ENV} names no fault point: {point!r}")
            self.point, self.remaining = point, int(count or 1)

    def reach(self, point: str) -> None:
        if point != self.point:
            return
        self.remaining -= 1
        if self.remaining <= 0:
            os.kill(os.getpid(), getattr(signal, "SIGKILL", signal.SIGTERM))
