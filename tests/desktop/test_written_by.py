"""The record history names the agent and the stable instance id it declared."""

from datetime import datetime, timezone

from desktop.records.history import history_columns, written_by


def test_the_history_shows_the_agent_with_its_instance_id():
    columns = history_columns(lambda: datetime(2026, 12, 4, 12, 0, tzinfo=timezone.utc))
    column = next(column for column in columns if column.title == "Written by")
    assert column.value({"attribution": {"agent": "main", "instance": "laptop-main"}}) == "main (laptop-main)"
    assert column.value({"attribution": {"agent": "main"}}) == "main"
    assert written_by(None) is None and written_by({"instance": "x"}) is None
