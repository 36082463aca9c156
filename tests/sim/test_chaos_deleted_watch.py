"""The chaos ledger's ``ran_after_deletion`` (sim/ledger.py ``_watch_deleted``): after a job's item
was deleted after its completion, no run of it is made or starts while it stays deleted. Two
heavy operator-fault worlds reported records that were no runs of the deleted life:

- seed 5 (stream_late 0.9, pause, delete, malformed 0.4): an ``at`` job the reconcile pass
  registered as finished (it dated the person's fix after the instant, provisionally), deleted
  after completion; the fix's late stream record then dated it before the instant and recorded the
  occurrence ``missed``, "job deleted before it ran" (core/transitions/register.py
  ``redate_window``): an occurrence due by the delete, recorded and not run, as ``nothing_lost``
  asks.
- seed 6 (with retime and re-put): the item was re-created (a new life, registered), deleted
  again by a person, and the new life's backlog recorded ``missed``: the ledger never saw the
  re-creation (a person writes to the table unwatched), so its watch of the first life went on.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jobsched.services.registrar as registrar
import pytest
from jobsched.core.transitions.register import RedateWindow
from jobsched.core.writes import JOBS, RUNS, STATE, Delete, Put
from jobsched_tools.sim import ChaosConfig, FaultRates, run_chaos
from jobsched_tools.sim.scenario import HEAVY_OPERATOR_EDITS, HEAVY_OPERATOR_LATE_RECORDS
from jobsched_tools.sim.world import World

JOB = "job-0007-at"
DELETED_AT = 1_793_500_831_774  # 2026-11-01T02:40:31.774Z
INSTANT = 1_793_500_697_000  # 2026-11-01T02:38:17Z: due while the job was active
LATER = 1_793_501_040_000  # 2026-11-01T02:44:00Z: after the delete


def _deleted_world() -> World:
    """A world whose ledger saw ``JOB``'s item deleted after its completion, at ``DELETED_AT``."""
    world = World(ChaosConfig(seed=1, jobs=2, hours=0.25, faults=FaultRates.none()))
    store = world.store
    world.clock.set(DELETED_AT)
    job = {"job_id": JOB, "schedule": "at(2026-11-01T02:38:17)"}
    store.inner.write([Put(JOBS, job, (), "person puts job")])
    state = {"job_id": JOB, "status": "finished", "version": 3}  # life 1
    store.inner.write([Put(STATE, state, (), "register job")])
    store.write([Delete(JOBS, {"job_id": JOB}, (), "delete after completion")])
    assert store.ledger.deleted_after_completion == {JOB: DELETED_AT}
    return world


def _record(world: World, at: int, status: str) -> list[tuple[str, str, str]]:
    run = {"job_id": JOB, "run_id": f"{JOB}@{at}", "scheduled_at": at, "status": status, "version": 1}
    world.store.write([Put(RUNS, run, (), f"record {run['run_id']}")])
    return [seen for seen in world.store.ledger.seen if seen[0] == "ran_after_deletion"]


def test_a_missed_record_of_an_occurrence_due_before_the_delete_is_no_run() -> None:
    assert _record(_deleted_world(), INSTANT, "missed") == []


def test_a_run_made_after_the_delete_is_still_caught() -> None:
    """The real violation: a run to start (``pending``) of the deleted life, even of an occurrence
    due before the delete, and a record of an occurrence the deleted job was never due."""
    assert len(_record(_deleted_world(), INSTANT, "pending")) == 1
    assert len(_record(_deleted_world(), LATER, "missed")) == 1


def test_a_later_life_on_the_state_ends_the_watch() -> None:
    """Re-created, registered (life 2) and deleted again by a person since: its runs are its own."""
    world = _deleted_world()
    again = {"job_id": JOB, "status": "deleted", "version": 6, "life": 2}
    world.store.inner.write([Put(STATE, again, (), "register job")])
    assert _record(world, LATER, "missed") == []
    assert JOB not in world.store.ledger.deleted_after_completion


# The two worlds that reported it (legacy stack, the successor switch off).
AT_JOB_LATE_FIX = ChaosConfig(
    seed=5,
    jobs=15,
    hours=1,
    faults=HEAVY_OPERATOR_LATE_RECORDS,
)
RECREATED_AND_DELETED = ChaosConfig(
    seed=6,
    jobs=15,
    hours=1,
    faults=HEAVY_OPERATOR_EDITS,
)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("cfg", (AT_JOB_LATE_FIX, RECREATED_AND_DELETED), ids=("seed5", "seed6"))
def test_the_worlds_that_reported_it_hold_every_invariant(cfg: ChaosConfig) -> None:
    report = run_chaos(cfg)
    assert report.deleted_after_completion > 0
    assert report.invariant_violations == []


@pytest.mark.timeout(300)
def test_a_late_record_that_runs_a_deleted_jobs_occurrence_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The mutant: the late record of a job stopped since dates its occurrences as if it still
    ran (no "deleted before it ran" reason): the at job's occurrence is made a run and started
    after its item was deleted after completion."""
    real = registrar.redate_window

    def as_if_active(*args: Any, **kwargs: Any) -> RedateWindow | None:
        window = real(*args, **kwargs)
        return None if window is None else dataclasses.replace(window, reason=None)

    monkeypatch.setattr(registrar, "redate_window", as_if_active)
    report = run_chaos(AT_JOB_LATE_FIX)
    found = [v for v in report.invariant_violations if v.startswith("ran_after_deletion job-0007-at@")]
    assert any("made by registrar's record" in v for v in found)
    assert any("start run" in v for v in found)
