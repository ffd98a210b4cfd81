"""The record history names the agent and the stable instance id it declared."""

from desktop.records.page import HISTORY_COLUMNS, written_by


def test_the_history_shows_the_agent_with_its_instance_id():
    column = next(column for column in HISTORY_COLUMNS if column.title == "Written by")
    assert column.value({"attribution": {"agent": "main", "instance": "laptop-main"}}) == "main (laptop-main)"
    assert column.value({"attribution": {"agent": "main"}}) == "main"
    assert written_by(None) is None and written_by({"instance": "x"}) is None
