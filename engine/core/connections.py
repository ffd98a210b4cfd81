"""The agents and instances seen connected recently, for the owner's "Connect an agent" window.

Kept in memory only (an engine restart forgets them) and bounded: one entry
per agent, instance id, audience kind and client name, at most
``RECENT_MAX``; when a new one arrives past that, the one seen longest ago
is dropped.  Recording costs a lock and a dictionary update, so the socket
does it on every request of an agent connection (``last seen``).  Nothing
here is secret or content: the names an agent's connection presented, never
a token, a session key or a message.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Callable

from .answers import TypedDict
from .ids import format_timestamp, utc_now


class SeenConnection(TypedDict):
    """An agent instance seen connected: counts since it was first seen, and how many are open now."""

    agent: str
    instance: str | None
    audience: str
    client: str | None
    firstSeen: str
    lastSeen: str
    connections: int
    open: int

RECENT_MAX = 100

ConnectionKey = tuple[str, str | None, str, str | None]  # agent, instance, audience kind, client name


@dataclass
class _Seen:
    first: datetime
    last: datetime
    connections: int  # initializes seen (one per connection)
    open: int  # connections open now


class RecentConnections:
    """Who connected, bounded and in memory; thread-safe (the socket's workers record into it)."""

    def __init__(self, limit: int = RECENT_MAX, clock: Callable[[], datetime] = utc_now) -> None:
        self.limit = limit
        self._clock = clock
        self._lock = threading.Lock()
        self._seen: dict[ConnectionKey, _Seen] = {}

    def opened(self, agent: str, instance: str | None, audience: str, client: str | None) -> ConnectionKey:
        """An agent connection initialized; returns the key its later requests are recorded under."""
        key: ConnectionKey = (agent, instance, audience, client)
        now = self._clock()
        with self._lock:
            seen = self._seen.get(key)
            if seen is None:
                if len(self._seen) >= self.limit:
                    oldest = min(self._seen, key=lambda k: self._seen[k].last)
                    del self._seen[oldest]
                self._seen[key] = _Seen(now, now, 1, 1)
            else:
                seen.last, seen.connections, seen.open = now, seen.connections + 1, seen.open + 1
        return key

    def touched(self, key: ConnectionKey) -> None:
        """A request arrived on that connection."""
        now = self._clock()
        with self._lock:
            seen = self._seen.get(key)
            if seen is not None:
                seen.last = now

    def closed(self, key: ConnectionKey) -> None:
        now = self._clock()
        with self._lock:
            seen = self._seen.get(key)
            if seen is not None:
                seen.last, seen.open = now, max(0, seen.open - 1)

    def listed(self) -> list[SeenConnection]:
        """Every entry, the most recently seen first."""
        with self._lock:
            rows = sorted(self._seen.items(), key=lambda item: (item[1].last, item[0][0]), reverse=True)
            return [{"agent": agent, "instance": instance, "audience": audience, "client": client,
                     "firstSeen": format_timestamp(seen.first), "lastSeen": format_timestamp(seen.last),
                     "connections": seen.connections, "open": seen.open}
                    for (agent, instance, audience, client), seen in rows]
