"""A stream record dates only the write it was made of (services/registrar.py
``_record_of_the_item``; docs/design.md, "A change is dated when it was made").

Seed 16 of the heavy operator world with late records (stream_late 0.9, pause, delete, malformed
0.4), legacy stack, reported ``lost_after_write`` job-0010-cron@22:36: a person fixed the job at
22:24:01 and re-put it at 22:32:10 (its record late), then paused it at 22:37:42. The re-put's
record arrived at 22:39:22, found the paused item and dated the pause by its own time: 22:36,
due before the pause, was withdrawn. The registrar now dates a change a record finds, of a later
write than its own, when it applies it (tests/functional/test_change_time.py has the race).
"""

from __future__ import annotations

import dataclasses

import pytest
from jobsched_tools.sim import ChaosConfig, run_chaos
from jobsched_tools.sim.scenario import HEAVY_OPERATOR_LATE_RECORDS

STALE_RECORD = ChaosConfig(
    seed=16,
    jobs=15,
    hours=1,
    faults=HEAVY_OPERATOR_LATE_RECORDS,
)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("successor", (False, True), ids=("legacy", "successor"))
def test_the_world_that_reported_it_holds_every_invariant(successor: bool) -> None:
    report = run_chaos(dataclasses.replace(STALE_RECORD, successor=successor))
    assert report.faults_injected.get("operator_pause", 0) > 0
    assert report.invariant_violations == []
