"""Times in the window's tables as the owner reads them: local, the exact moment on hover."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from PySide6.QtCore import Qt

from desktop.approvals.view import APPROVAL_COLUMNS
from desktop.common.models import RowsModel
from desktop.common.times import MACHINE_ZONE, ago, clock_time, exact_time, local_now, local_stamp
from desktop.gate.journal_panel import JOURNAL_COLUMNS
from desktop.gate.log_panel import LOG_COLUMNS
from desktop.partitions.view import GRANT_COLUMNS, PARTITION_COLUMNS



@pytest.mark.parametrize("columns, field, title", [
    (PARTITION_COLUMNS, "createdAt", "Created"), (PARTITION_COLUMNS, "lastPublicationAt", "Last publication"),
    (GRANT_COLUMNS, "createdAt", "Granted"), (APPROVAL_COLUMNS, "approvedAt", "Approved at"),
    (LOG_COLUMNS, "at", "At"), (JOURNAL_COLUMNS, "at", "At")])
def test_every_table_shows_times_in_the_owners_local_time_with_the_exact_moment_on_hover(
        qapp, columns, field, title) -> None:
    stored = "2026-12-02T01:36:27Z"
    model = RowsModel(columns)
    model.set_rows([{field: stored, "kind": "private", "needed": None}])
    index = model.index(0, [column.title for column in columns].index(title))

    assert model.data(index) == clock_time(stored, local_now())  # "01:36", "yesterday 01:36", a date and time
    assert model.data(index, Qt.ItemDataRole.ToolTipRole) == exact_time(stored, local_now())
    assert stored not in model.data(index)


def test_a_summer_moment_read_in_winter_is_said_in_summer_time(brussels) -> None:
    """The machine's zone keeps its rules for each date: a conversation of 28 May read on 6 December is said
    at 22:26 (UTC+2 then), where the zone's December offset said 21:26."""
    december = datetime(2026, 12, 6, 12, 0, tzinfo=MACHINE_ZONE)

    assert local_stamp("2026-05-28T20:26:40Z", december) == "2026-05-28 22:26"
    assert exact_time("2026-05-28T20:26:40Z", december).endswith(
        "22:26:40 (UTC+02:00; stored as 2026-05-28T20:26:40Z)")
    assert clock_time("2026-12-06T10:00:00Z", december) == "11:00"
    assert local_stamp("2026-03-29T01:30:00Z", december) == "2026-03-29 03:30"  # the hour summer time skips
    assert ago("2026-12-06T10:30:00Z", december) == "30 minutes ago"
    assert local_now().utcoffset() in (timedelta(hours=1), timedelta(hours=2))
