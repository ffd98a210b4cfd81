"""Fault injection for crash-consistency and disk-fault tests.

Honoured only when ``KNOWLEDGE_FAULT`` is set in the environment, which
nothing but a test harness does (tests in the same process may pass a
``Faults`` to the engine instead): ``<point>:<n>[:<action>]``.

Points, in publication order: ``journaled`` (the journal transaction),
``installed`` (each file), ``checkpointed`` (the manifest), ``catalogued``
(inside the acknowledging transaction: the group's catalog rows written, the
transaction not yet committed; only ``kill`` applies), ``acknowledged`` (the
acknowledging transaction).  Each is counted per publication, so in a group
(``Publisher.publish_together``, an import's bulk writes) ``<point>:<n>`` stops
inside the group, after the step of its nth publication.  ``chained``: inside a group's acknowledging
transaction, the next group (the writes queued meanwhile, ``Publisher.publish_chained``) journalled in it,
not yet committed; counted per publication of that next group; only ``kill`` applies.  In a sync round (engine/sync/round.py), in
order: ``sync_fetched`` (the remote's branches delivered, nothing merged),
``sync_installed`` (each publication of a merge or fast-forward installed, not
committed), ``sync_committed`` (the merge committed or the branch moved, the
outbox not yet told), ``sync_pushed`` (the head pushed, status.json not yet
written); only ``kill`` applies to them.  Actions:

    kill     (default) SIGKILL the process the nth time a publication has done the step
    enospc   the nth attempt at the step fails as a full disk does: OSError ENOSPC for a file,
             SQLite's "database or disk is full" for a transaction
    erofs    the same, as a read-only file system does

``KNOWLEDGE_FAULT=installed:3`` kills at the third file installed;
``KNOWLEDGE_FAULT=acknowledged:2:enospc`` makes the second acknowledgement fail.
"""

from __future__ import annotations

import errno
import os
import signal
import sqlite3

FAULT_ENV = "KNOWLEDGE_FAULT"
PUBLICATION_POINTS = ("journaled", "installed", "checkpointed", "catalogued", "acknowledged")
SYNC_POINTS = ("sync_fetched", "sync_installed", "sync_committed", "sync_pushed")
CHAINED = "chained"  # not among PUBLICATION_POINTS: only writes queued beside a group reach it
POINTS = PUBLICATION_POINTS + (CHAINED,) + SYNC_POINTS
KILL_ONLY = SYNC_POINTS + ("catalogued", CHAINED)  # points no disk error is injected at
ACTIONS = ("kill", "enospc", "erofs")
_TRANSACTIONS = ("journaled", "acknowledged")
_SQLITE_MESSAGES = {"enospc": "database or disk is full", "erofs": "attempt to write a readonly database"}


class Faults:
    def __init__(self, spec: str | None = None) -> None:
        spec = os.environ.get(FAULT_ENV) if spec is None else spec
        self.point: str | None = None
        self.action = "kill"
        self.remaining = 0
        if spec:
            point, _, rest = spec.partition(":")
            count, _, action = rest.partition(":")
            if point not in POINTS:
                raise ValueError(f"{FAULT_ENV} names no fault point: {point!r}")
            if (action or "kill") not in ACTIONS or (point in KILL_ONLY and (action or "kill") != "kill"):
                raise ValueError(f"{FAULT_ENV} names no fault action: {action!r}")
            self.point, self.remaining, self.action = point, int(count or 1), action or "kill"

    def attempt(self, point: str) -> None:
        """Called as a step starts: raises the disk error of an ``enospc`` or ``erofs`` fault."""
        if point != self.point or self.action == "kill":
            return
        self.remaining -= 1
        if self.remaining != 0:
            return
        if point in _TRANSACTIONS:
            raise sqlite3.OperationalError(_SQLITE_MESSAGES[self.action])
        code = errno.ENOSPC if self.action == "enospc" else errno.EROFS
        raise OSError(code, os.strerror(code))

    def reach(self, point: str) -> None:
        """Called once a step is done: a ``kill`` fault ends the process here."""
        if point != self.point or self.action != "kill":
            return
        self.remaining -= 1
        if self.remaining <= 0:
            os.kill(os.getpid(), getattr(signal, "SIGKILL", signal.SIGTERM))
