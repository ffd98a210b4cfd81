"""KNOWLEDGE_FAULT's parsing (engine/core/faults.py): the crash harnesses' kill points."""

from __future__ import annotations

import pytest

from engine.core.faults import SYNC_POINTS, Faults


@pytest.mark.parametrize("point", SYNC_POINTS)
def test_a_sync_point_is_a_kill_point_counted_like_the_others(point):
    faults = Faults(f"{point}:2")
    assert (faults.point, faults.remaining, faults.action) == (point, 2, "kill")
    faults.attempt(point)  # kill points raise nothing as a step starts
    assert faults.remaining == 2


@pytest.mark.parametrize("spec", ["sync_pushed:1:enospc", "sync_installed:1:erofs", "sync_merged:1"])
def test_a_sync_point_takes_no_disk_error_and_an_unknown_point_is_refused(spec):
    with pytest.raises(ValueError, match="KNOWLEDGE_FAULT names no fault"):
        Faults(spec)
