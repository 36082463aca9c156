"""A backfill made before a change dated before it, on a successor stack (issue 37; core/
head_change.py ``recorded_through``). The heavy operator world with late records
(tests/sim/test_chaos_deleted_watch.py ``AT_JOB_LATE_FIX``) on the successor claim:

- seed 13: job-0006-cron deleted (epoch 3); the person re-creates it at 22:29:26; at 22:30:12 an
  operator backfills 22:12-22:30 (records in epoch 3, joining the state's chain); at 22:31:31 the
  reconcile pass applies the re-creation, dated provisionally when it first saw it (22:29:26):
  the new head (epoch 11) sat at 22:30, beside the backfill's record, and the detector recorded
  it ``missed`` there (``I1prime_one_live_record``, ``record_created_twice``);
- seed 18: job-0001-rate1's backfilled 03:37-03:39 (epoch 4), then a resume dated before them put
  epoch 24's head at 03:37.

The change now starts its timing after the newest instant holding a live record of any epoch among
the job's items it read (HC12), as today's never starts before the last occurrence with a record.
"""

from __future__ import annotations

from dataclasses import replace

import jobsched.services.head_registrar as head_registrar
import pytest
from jobsched_tools.sim import ChaosConfig, run_chaos
from jobsched_tools.sim.scenario import HEAVY_OPERATOR_LATE_RECORDS

HEAVY_LATE = ChaosConfig(
    seed=13,
    jobs=15,
    hours=1,
    faults=HEAVY_OPERATOR_LATE_RECORDS,
    successor=True,
)
REPORTED = {13: "job-0006-cron@", 18: "job-0001-rate1@"}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("seed", sorted(REPORTED))
def test_the_worlds_that_reported_it_hold_every_invariant(seed: int) -> None:
    report = run_chaos(replace(HEAVY_LATE, seed=seed))
    assert report.invariant_violations == [], report.invariant_violations[:5]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("seed", sorted(REPORTED))
def test_without_the_floor_the_new_head_lands_on_a_backfilled_instant(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The catcher: the registrar plans the change without the items' floor (as before the fix)."""
    monkeypatch.setattr(head_registrar, "recorded_through", lambda *_args: None)
    found = run_chaos(replace(HEAVY_LATE, seed=seed)).invariant_violations
    job = REPORTED[seed]
    assert any(v.startswith(f"I1prime_one_live_record {job}") for v in found), found[:5]
    assert any(v.startswith(f"record_created_twice {job}") for v in found), found[:5]
