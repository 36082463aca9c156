"""The chaos ledger's ``run_not_due`` (sim/invariants.py ``nothing_lost``) on today's claim: a run
claimed before a late-dated change landed runs as claimed (docs/design.md, "A change is dated when
it was made": "unless a claim took them before the change landed: a claimed run runs as claimed").

Seed 9 of the heavy operator world with late records (stream_late 0.9, pause, delete, malformed
0.4) reported ``run_not_due`` x5 that the product did not cause. A person broke two jobs' items (an
unknown target) and their stream records came late. The trigger's inline registrar (job-0001) or
the reconcile pass (job-0007), which ship without the handlers, registered the broken item as an
edit: the job kept its place and the trigger went on claiming. Minutes later the registrar
function, which knows the handlers, made the job invalid, dated at the earlier registration's read
of the item (core/state.py ``change_time``: never before ``registered_at``). The records the
trigger made between that date and the landing (job-0001 at 00:34-00:37, job-0007 at 00:35) were
claims under the store's old state, not occurrences the change withdrew. The successor checker
already allowed them (sim/successor.py); today's allowed none beyond the lookahead.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jobsched.services.registrar as registrar
import pytest
from jobsched.core.run import run_id_for
from jobsched.core.transitions.register import RedateWindow
from jobsched.core.writes import RUNS, STATE, Put, Update
from jobsched_tools.sim import ChaosConfig, FaultRates, run_chaos
from jobsched_tools.sim.invariants import Checker, all_items
from jobsched_tools.sim.report import ChaosReport
from jobsched_tools.sim.scenario import HEAVY_OPERATOR_LATE_RECORDS
from jobsched_tools.sim.world import World

MINUTE = 60_000
TIMING = {"schedule": "rate(1 minute)", "timezone": "UTC"}


def _world() -> tuple[World, str, int]:
    """A quiet world with one job's state active under ``TIMING`` from its start's next minute."""
    world = World(ChaosConfig(seed=1, jobs=2, hours=0.5, faults=FaultRates.none()))
    job_id = world.jobs[0].definition.job_id
    first = (world.start_ms // MINUTE + 1) * MINUTE
    world.clock.set(world.start_ms)
    state = {"job_id": job_id, "status": "active", "timing": TIMING, "next_run_at": first, "version": 1}
    world.store.write([Put(STATE, state, (), "register job")])
    return world, job_id, first


def _run(job_id: str, at: int, status: str) -> dict[str, Any]:
    run_id = run_id_for(job_id, at)
    return {"job_id": job_id, "run_id": run_id, "scheduled_at": at, "status": status, "version": 1}


def _record(world: World, job_id: str, at: int, when: int) -> None:
    world.clock.set(when)
    world.store.write([Put(RUNS, _run(job_id, at, "pending"), (), "claim")])


def _not_due(world: World) -> list[str]:
    inner = world.store.inner
    checker = Checker(
        world,
        ChaosReport(1, 2, 0.5, "memory"),
        runs={str(r["run_id"]): r for r in all_items(inner, RUNS)},
        states={str(s["job_id"]): s for s in all_items(inner, STATE)},
        effects=[],
    )
    checker.nothing_lost()
    return sorted(key for kind, key, _ in checker.violations if kind == "run_not_due")


def test_a_record_made_before_a_late_dated_change_landed_runs_as_claimed() -> None:
    """The job made invalid dated ``changed`` (5 min in), landing 5 min later: the records the
    trigger made meanwhile, a minute ahead each, are claims; one made after the landing, of an
    instant within a lookahead of it, and one beyond that, are still reported."""
    world, job_id, first = _world()
    changed, landed = first + 5 * MINUTE + 500, first + 10 * MINUTE + 44_000
    claimed = [first + n * MINUTE for n in range(6, 11)]  # 6..10 min: each claimed a minute ahead
    for at in claimed:
        _record(world, job_id, at, at - MINUTE + 100)
    world.clock.set(landed)
    stop = Update(STATE, {"job_id": job_id}, (), "register job", {"status": "invalid", "changed_at": changed})
    world.store.write([stop])
    late, beyond = first + 11 * MINUTE, first + 14 * MINUTE
    _record(world, job_id, late, landed + 1_000)  # within a lookahead of the landing, made after it
    _record(world, job_id, beyond, landed + 2_000)
    assert _not_due(world) == [run_id_for(job_id, late), run_id_for(job_id, beyond)]


def test_a_record_made_by_the_landing_write_is_held_to_the_changes_date() -> None:
    """A settle or a redate that lands with the change is no claim made before it: a record of an
    instant after the change's date, written in the same transaction, is reported."""
    world, job_id, first = _world()
    changed, landed = first + 5 * MINUTE + 500, first + 8 * MINUTE
    at = first + 7 * MINUTE
    world.clock.set(landed)
    stop = Update(STATE, {"job_id": job_id}, (), "register job", {"status": "paused", "changed_at": changed})
    world.store.write([stop, Put(RUNS, _run(job_id, at, "missed"), (), "settle")])
    assert _not_due(world) == [run_id_for(job_id, at)]


# The world that reported it (legacy stack, the successor switch off): test_chaos_deleted_watch.py's
# AT_JOB_LATE_FIX at seed 9.
BROKEN_ITEM_LATE = ChaosConfig(
    seed=9,
    jobs=15,
    hours=1,
    faults=HEAVY_OPERATOR_LATE_RECORDS,
)
JOB = "job-0001-rate1"


@pytest.mark.timeout(300)
@pytest.mark.parametrize("successor", (False, True), ids=("legacy", "successor"))
def test_the_world_that_reported_it_holds_every_invariant(successor: bool) -> None:
    assert run_chaos(dataclasses.replace(BROKEN_ITEM_LATE, successor=successor)).invariant_violations == []


@pytest.mark.timeout(300)
def test_the_world_reaches_a_claim_before_a_late_dated_change_landed() -> None:
    """Not vacuous: job-0001's invalid change is dated minutes before it landed, and the trigger's
    records of 00:34-00:37 were made in between."""
    world = World(BROKEN_ITEM_LATE)
    assert world.run().invariant_violations == []
    marks = world.store.ledger.states[JOB]
    stop = next(m for m in marks if m.status == "invalid")
    assert stop.landed is not None and stop.landed - stop.at > 4 * MINUTE
    made = world.store.ledger.created_at  # run id -> when its record was created
    ours = {run_id: at for run_id, at in made.items() if run_id.startswith(f"{JOB}@")}
    between = [run_id for run_id, at in ours.items() if stop.at + 90_000 < at < stop.landed]
    assert len(between) >= 3, between


@pytest.mark.timeout(300)
def test_a_late_record_dating_the_broken_items_instants_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The mutant: a late record of the person's fix dates its window five minutes before the
    write (``redate_window``'s start moved back): the registrar records occurrences of the time
    the job was invalid, after the invalid change landed. They are ``run_not_due``."""
    real = registrar.redate_window

    def too_early(*args: Any, **kwargs: Any) -> RedateWindow | None:
        window = real(*args, **kwargs)
        return None if window is None else dataclasses.replace(window, at=window.at - 5 * MINUTE)

    monkeypatch.setattr(registrar, "redate_window", too_early)
    violations = run_chaos(BROKEN_ITEM_LATE).invariant_violations
    found = [v for v in violations if v.startswith(f"run_not_due {JOB}@")]
    assert len(found) >= 2, found
