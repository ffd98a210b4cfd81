"""Times as the owner reads them: in local time, relative where it helps, the exact moment on demand.

The engine writes UTC ISO timestamps; the window shows ``3 minutes ago``, ``yesterday 14:02`` or
``2026-11-20 09:15`` in the zone of ``now`` (the views take a ``Clock``, so what is said is tested without
the wall clock), and ``exact_time`` for a tooltip.
"""

from __future__ import annotations

import calendar
import time
from datetime import datetime, timedelta, tzinfo
from typing import Any, Callable

from PySide6.QtCore import QObject, QTimer

from engine.core.ids import parse_timestamp
from engine.core.words import counted

from .models import Column

Clock = Callable[[], datetime]
CLOCK_MS = 60_000  # how often an open view counts its relative times ("3 minutes ago") again


class MachineZone(tzinfo):
    """The machine's zone with its rules for each date: a May moment read in December is said in summer
    time, where ``datetime.astimezone()``'s fixed offset (December's) would say it an hour off."""

    def utcoffset(self, dt: datetime | None) -> timedelta:
        return timedelta(seconds=self._local(dt).tm_gmtoff)

    def dst(self, dt: datetime | None) -> timedelta:
        return timedelta(hours=1) if self._local(dt).tm_isdst > 0 else timedelta(0)

    def tzname(self, dt: datetime | None) -> str:
        return self._local(dt).tm_zone

    def fromutc(self, dt: datetime) -> datetime:
        offset = time.localtime(calendar.timegm(dt.replace(tzinfo=None).timetuple())).tm_gmtoff
        return (dt.replace(tzinfo=None) + timedelta(seconds=offset)).replace(tzinfo=self)

    @staticmethod
    def _local(dt: datetime | None) -> time.struct_time:
        """The machine's reading of the local wall time ``dt`` (now, when None)."""
        if dt is None:
            return time.localtime()
        return time.localtime(time.mktime((dt.year, dt.month, dt.day, dt.hour, dt.minute, dt.second, 0, 0, -1)))


MACHINE_ZONE = MachineZone()


def local_now() -> datetime:
    """The wall clock, aware, in the machine's zone (its rules for each date): the default ``Clock``."""
    return datetime.now(MACHINE_ZONE)


def window_clock(parent: QObject, on_tick: Callable[[], None]) -> QTimer:
    """A view's clock, started: ``on_tick`` once a minute while the view lives, to say its relative times again
    ("just now" becomes "3 minutes ago").  Tests move the view's ``now`` and fire ``timeout`` themselves."""
    clock = QTimer(parent)
    clock.setInterval(CLOCK_MS)
    clock.timeout.connect(on_tick)
    clock.start()
    return clock


def moment(value: Any, now: datetime) -> datetime | None:
    """An engine timestamp in ``now``'s zone (None when it is none or unreadable)."""
    parsed = parse_timestamp(value)
    return parsed.astimezone(now.tzinfo) if parsed is not None else None


def clock_time(value: Any, now: datetime) -> str:
    """``10:02`` today, ``yesterday 10:02``, else ``2026-12-01 10:02``, in ``now``'s zone."""
    at = moment(value, now)
    if at is None:
        return "an unknown time"
    days = (now.date() - at.date()).days
    if days == 0:
        return at.strftime("%H:%M")
    if days == 1:
        return f"yesterday {at.strftime('%H:%M')}"
    return at.strftime("%Y-%m-%d %H:%M")


def local_stamp(value: Any, now: datetime) -> str | None:
    """``2026-05-28 22:26`` in ``now``'s zone, the same text whenever it is read (None when not a time)."""
    at = moment(value, now)
    return at.strftime("%Y-%m-%d %H:%M") if at is not None else None


def ago(value: Any, now: datetime) -> str:
    """How long before ``now``: ``just now``, ``3 minutes ago``, ``2 hours ago``, then a clock time."""
    at = moment(value, now)
    if at is None:
        return "at an unknown time"
    minutes = int((now.timestamp() - at.timestamp()) // 60)  # across a change to or from summer time too
    if minutes < 1:
        return "just now"
    if minutes < 60:
        return f"{counted(minutes, 'minute')} ago"
    if minutes < 24 * 60:
        hours = minutes // 60
        return f"{counted(hours, 'hour')} ago"
    said = clock_time(value, now)
    return said if said.startswith("yesterday") else f"on {said}"


def brief_ago(value: Any, now: datetime) -> str:
    """``ago`` for a narrow column: ``just now``, ``42 min ago``, ``3 h ago``, ``yesterday``, then the date
    (the exact moment is the cell's tooltip)."""
    at = moment(value, now)
    if at is None:
        return "unknown"
    minutes = int((now.timestamp() - at.timestamp()) // 60)
    if minutes < 1:
        return "just now"
    if minutes < 60:
        return f"{minutes} min ago"
    if minutes < 24 * 60:
        return f"{minutes // 60} h ago"
    days = (now.date() - at.date()).days
    return "yesterday" if days == 1 else at.strftime("%Y-%m-%d")


def exact_time(value: Any, now: datetime) -> str:
    """The exact moment in ``now``'s zone, its offset and the engine's own UTC text:
    ``Friday 4 December 2026, 14:02:11 (UTC+01:00; stored as 2026-12-04T13:02:11Z)``."""
    at = moment(value, now)
    if at is None:
        return f"not a time: {value}" if value else "no time recorded"
    offset = at.strftime("%z")
    zone = f"UTC{offset[:3]}:{offset[3:]}" if offset else "local time"
    return f"{at.strftime('%A')} {at.day} {at.strftime('%B %Y, %H:%M:%S')} ({zone}; stored as {value})"


def time_column(title: str, field: str, *, missing: str = "") -> Column:
    """A table's column of the engine timestamp ``field``: ``clock_time`` in the machine's zone, ``exact_time``
    on hover, ``missing`` where the row has none (never the stored UTC text)."""
    return Column(title, lambda row: clock_time(row[field], local_now()) if row.get(field) else missing,
                  tooltip=lambda row: exact_time(row[field], local_now()) if row.get(field) else None)
