"""Two readings of the successor chaos checker that reported ``run_not_due`` the product did not
cause (chaos with ``stream_late`` and operator faults; the product's writes were checked against
docs/proposals/successor-claim-build.md HC5 and docs/design.md, "A change is dated when it was
made"):

- seed 2: a settle that misses a ``max_runs`` life's would-be last head puts a **closure marker**
  at the end key and the life goes on (``max_runs`` counts runs, not occurrences: HC5, the
  model's ``close_end_key``). The ledger took any new item at an end key for the end marker and
  ended the job's stretch there, so the life's next occurrences read as not due. Only an end
  marker (``status = end``) ends the life (sim/ledger.py ``_note_instants``).
- seeds 3 and 6: a late stream record dates its change (an invalid item) before the write that
  applied it; runs claimed in between, while the state still read ``active``, run as claimed.
  The checker allowed only a lookahead past the change's date; it now also allows an occurrence
  whose live record was made before the change landed (sim/successor.py
  ``_claimed_before_landing``), and still holds a record made after it to the date.
"""

from __future__ import annotations

import functools
from collections import Counter

import jobsched_tools.sim.ledger as ledger_module
import pytest
from jobsched.core.writes import RUNS, Put
from jobsched_tools.sim import ChaosConfig, ChaosReport, FaultRates, run_chaos
from jobsched_tools.sim.invariants import segments
from jobsched_tools.sim.ledger import StateMark
from jobsched_tools.sim.successor import SuccessorChecker
from jobsched_tools.sim.world import World

JOB = "job-a"
T1 = 1_780_000_020_000  # 2026-05-28T20:27:00Z
MINUTE = 60_000
RATE = (("schedule", "rate(1 minute)"),)
FAULTS = FaultRates(stream_late=0.5, operator_pause=0.4, operator_delete=0.2, operator_malformed=0.2)


def _world() -> World:
    return World(ChaosConfig(seed=1, jobs=4, hours=0.25, successor=True, faults=FaultRates.none()))


def test_a_closure_marker_at_an_end_key_leaves_the_life_going() -> None:
    """The settle's ``settle closes end key`` (status ``closed``) at ``<job>@end:<N>#1`` does not
    finish the stretch; the end marker the life's last run puts later does, at its instant."""
    world = _world()
    store = world.store
    store.ledger.states[JOB] = [StateMark(T1 - MINUTE, "active", RATE, None, None, T1)]
    closed = {"job_id": JOB, "run_id": f"{JOB}@end:2026-05-28T20:27:00Z#1", "status": "closed", "epoch": 1}
    store.write([Put(RUNS, closed, condition=(), label="settle closes end key")])
    assert [mark.status for mark in store.ledger.states[JOB]] == ["active"]
    end = {"job_id": JOB, "run_id": f"{JOB}@end:2026-05-28T20:29:00Z#1", "status": "end", "epoch": 1}
    store.write([Put(RUNS, end, condition=(), label="settle end marker")])
    last = store.ledger.states[JOB][-1]
    assert (last.status, last.last_scheduled_at) == ("finished", T1 + 2 * MINUTE)


def _run(at: int, epoch: int = 1) -> dict[str, object]:
    stamp = f"2026-05-28T20:{27 + (at - T1) // MINUTE}:00Z"
    return {"job_id": JOB, "run_id": f"{JOB}@{stamp}#{epoch}", "status": "succeeded", "scheduled_at": at}


def test_a_run_claimed_before_a_late_dated_change_landed_runs_as_claimed() -> None:
    """A change dated T1+10 s (its late record's time) lands at T1+5 min. The record at T1+3 min,
    live from T1+2 min (the state still read active), ran as claimed; the one at T1+4 min, made
    after the change landed, is held to the change's date."""
    world = _world()
    changed_at, landed = T1 + 10_000, T1 + 5 * MINUTE
    marks = [
        StateMark(T1 - MINUTE, "active", RATE, None, None, T1, landed=T1 - MINUTE),
        StateMark(changed_at, "invalid", RATE, None, None, None, landed=landed),
    ]
    (span,) = segments(marks, T1 + 60 * MINUTE)
    assert (span.end, span.landed) == (changed_at, landed)
    claimed, late = _run(T1 + 3 * MINUTE), _run(T1 + 4 * MINUTE)
    runs = {str(run["run_id"]): run for run in (claimed, late)}
    since = world.store.ledger.live_since
    since[str(claimed["run_id"])], since[str(late["run_id"])] = T1 + 2 * MINUTE, landed + 1
    checker = SuccessorChecker(world, ChaosReport(1, 4, 0.25, "memory"), runs=runs, states={}, effects=[])
    assert checker._claimed_before_landing(JOB, span, ahead=0) == {T1 + 3 * MINUTE}
    # A finished life ends at its last occurrence, whenever the finish write landed.
    finished = StateMark(landed, "finished", RATE, None, T1, None, landed=landed)
    (life,) = segments([marks[0], finished], T1 + 60 * MINUTE)
    assert (life.end, life.landed) == (T1, None)


def late_records(seed: int) -> ChaosConfig:
    """The reports' ad-hoc config: tests/sim/test_chaos_successor_redate.py's, other seeds."""
    return ChaosConfig(seed=seed, jobs=15, hours=1, faults=FAULTS, successor=True)


@functools.cache
def late_records_report(seed: int) -> ChaosReport:
    return run_chaos(late_records(seed))


@pytest.mark.parametrize("seed", (1, 2, 3, 4, 6, 7))
@pytest.mark.timeout(300)
def test_late_records_and_operator_faults_hold_every_invariant(seed: int) -> None:
    report = late_records_report(seed)
    assert report.faults_injected.get("stream_late", 0) > 0
    assert report.invariant_violations == [], report.invariant_violations[:5]


def _kinds(report: ChaosReport) -> Counter[str]:
    return Counter(v.split(" ", 1)[0] for v in report.invariant_violations)


@pytest.mark.timeout(300)
def test_each_reading_is_needed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The checks fail as reported without their readings: any item at an end key taken for the
    end marker (seed 2: job-0014's 08:10, 08:12, 08:14), and only a lookahead past a late-dated
    change (seeds 3 and 6: the runs claimed before the invalid item's write landed)."""
    with monkeypatch.context() as patched:
        patched.setattr(ledger_module, "is_end_marker", lambda _item: True)
        assert _kinds(run_chaos(late_records(2)))["run_not_due"] == 3
    monkeypatch.setattr(SuccessorChecker, "_claimed_before_landing", lambda *_args: set())
    for seed in (3, 6):
        assert _kinds(run_chaos(late_records(seed)))["run_not_due"] > 0, seed
