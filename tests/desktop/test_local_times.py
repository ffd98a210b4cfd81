"""Times in the window's tables as the owner reads them: local, the exact moment on hover."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from desktop.approvals.view import APPROVAL_COLUMNS
from desktop.common.models import RowsModel
from desktop.common.times import clock_time, exact_time, local_now
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
