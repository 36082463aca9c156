"""Two triggers and three workers, as separate processes on one moto server, SIGKILLed at seeded
random moments and restarted: the invariants must hold from the run records alone."""

from __future__ import annotations

import pytest
from jobsched_tools.local.kills import invariant_report, run_faults


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_random_sigkills_of_triggers_and_workers_keep_exactly_once() -> None:
    report, plan = run_faults(35, seed=7, workers=3, triggers=2, every_s=(2.5, 5.0))
    lines = invariant_report(report)
    assert len(plan.log) >= 4, plan.log  # the faults really happened
    assert report.occurrences_due > 15
    detail = "\n".join([*lines, *report.violations, *plan.log, str(report.per_job)])
    assert all(line.startswith("ok") for line in lines), detail
    assert report.duplicate_runs == 0
    assert report.lost_occurrences == 0
    assert report.ledger_rows == report.ledger_runs_succeeded > 0
    assert report.runs_leased == 0
