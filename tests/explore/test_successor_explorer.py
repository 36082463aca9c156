"""The product's explorer on a successor-shaped stack (issue 37; docs/explore.md, "On a
successor-shaped stack"): the successor model's 23 base sets, run on the real services with the
migration switch on and the ``due`` index, with the successor invariants at every write; the
model's four mutants and three repairs as product mutants; and the world's own parts (positions
from heads, the ``due`` index's stale reads), each shown able to fail.

Until the services' successor paths are all merged (``successor.landed``: the registrar writes
a head, the trigger claims it, the detector settles it), a set that needs one fails: those tests
are strict xfails, so that merging the services turns them into the proof the build plan asks
for (§5, row S4-S7).
"""

from __future__ import annotations

import pytest
from jobsched.core import head_invariants
from jobsched.core.head import HeadJob, head_check_delay_ms, head_item
from jobsched.core.head_change import EPOCH, HEAD_AT
from jobsched.core.job import JobDefinition
from jobsched.core.run import run_id_for
from jobsched.core.transitions import head_recover
from jobsched.core.transitions.head_claim import claim_head_op
from jobsched.core.writes import RUNS, STATE, Put, Update
from jobsched.ports import DUE_INDEX
from jobsched_tools.explore import successor
from jobsched_tools.explore.model import CFG, JOB_ID, MINUTE, T0, ActorSet
from jobsched_tools.explore.sets_successor import (
    MUTANTS,
    REDISPATCH_FENCE,
    REPAIRS,
    SETS,
    _marker_is_claim,
    _switch,
    patched,
)
from jobsched_tools.explore.world import Budget
from jobsched_tools.sim.mutants import SUCCESSOR_SWITCHABLE, successor_parts, switched_off

LANDED = successor.landed()
ALL_LANDED = all(LANDED.values())
WAITING = ", ".join(name for name, done in LANDED.items() if not done)
NOT_LANDED = (
    f"the successor path of: {WAITING} is not merged on this branch (h/w2trigger, h/w2detector): "
    "the head is never claimed or settled (lost_occurrence), and today's lease sweep meets every "
    "head, whose lease_shard and check_at put it in the lease index too (job_error: KeyError "
    "'lease_expires_at', services/detector.py _recover_leases)"
)
# The bound per set (preemptions): each runs in a few seconds on a loaded 2-core machine.
HEAVY = (
    "settle-change",
    "delete-tick-manual",
    "pause-resume-same-instant",
    "pause-resume-marker",
    "worker-recover",
)
BOUNDS: dict[str, int] = {name: 1 for name in SETS} | dict.fromkeys(HEAVY, 0)


def test_the_model_s_23_base_sets_are_ported_by_name() -> None:
    from jobsched_tools.successor.sets import SETS as MODEL_SETS

    assert sorted(SETS) == sorted(MODEL_SETS)
    assert len(SETS) == 23


@pytest.mark.parametrize("name", sorted(SETS))
def test_successor_set_holds(name: str, request: pytest.FixtureRequest) -> None:
    ready = ALL_LANDED
    if not ready:
        request.applymarker(pytest.mark.xfail(strict=True, reason=NOT_LANDED))
    result = successor.explore(SETS[name], BOUNDS[name] if ready else 0, stop_on_first=not ready)
    assert result.schedules > 0
    firsts = {check: finding.headline() for check, finding in result.first.items()}
    assert dict(result.counts) == {}, firsts


# The marker mutant's catcher runs settle-change at k=1 (with its baseline, about 25 s): slow.
MUTANT_PARAMS = [
    pytest.param(name, marks=pytest.mark.slow)
    if MUTANTS.get(name, None) and name.startswith("detector")
    else name
    for name in sorted(MUTANTS) + sorted(REPAIRS)
]


@pytest.mark.parametrize("name", MUTANT_PARAMS)
def test_the_model_s_mutants_are_caught(name: str, request: pytest.FixtureRequest) -> None:
    """Each mutant (a repair undone) breaks something in the set the model catches it with; the
    set holds without it (``test_successor_set_holds``)."""
    if not ALL_LANDED:
        request.applymarker(pytest.mark.xfail(strict=True, reason=NOT_LANDED))
    mutant = MUTANTS.get(name) or REPAIRS[name]
    k = 1 if ALL_LANDED else 0
    baseline = successor.explore(SETS[mutant.catcher], k, stop_on_first=True)
    assert dict(baseline.counts) == {}, "the catcher fails without the mutant"
    with successor.own_setups(), mutant.apply():  # the set-up too is made by the mutant
        result = successor.explore(SETS[mutant.catcher], k, stop_on_first=True)
    assert successor.NOT_SUCCESSOR not in result.counts
    assert mutant.expected in result.counts, f"{name} not caught by {mutant.catcher}: {dict(result.counts)}"


# --- the world's parts, each able to fail --------------------------------------------------------


def _world(budget: Budget | None = None) -> successor.SuccessorWorld:
    return successor.build(ActorSet("probe", (), budget=budget or Budget()), ())


def _head(at: int, epoch: int, **more: object) -> dict[str, object]:
    run_id = run_id_for(JOB_ID, at, epoch)
    return {
        "job_id": JOB_ID,
        "run_id": run_id,
        "status": "scheduled",
        "kind": "scheduled",
        "version": 1,
        "head_version": 1,
        "scheduled_at": at,
        "epoch": epoch,
        "next_key": run_id_for(JOB_ID, at + 5 * MINUTE, epoch),
        "through": T0,
        "lease_shard": 0,
        "check_at": at + 30_000,
        **more,
    }


def _successor_state(world: successor.SuccessorWorld, head_at: int) -> None:
    state = {"job_id": JOB_ID, "status": "active", "version": 2, EPOCH: 2, HEAD_AT: head_at}
    world.inner.tables[STATE][JOB_ID] = state


def test_two_heads_break_one_head_at_the_write() -> None:
    """H1 runs at every write, on a successor state (one with an epoch)."""
    world = _world()
    world.inner.tables[RUNS].clear()
    _successor_state(world, T0 + 5 * MINUTE)
    world.store.write([Put(RUNS, _head(T0 + 5 * MINUTE, 2), (), "put head")])
    assert not [f for f in world.ledger.findings if f.check == head_invariants.ONE_HEAD]
    world.store.write([Put(RUNS, _head(T0 + 5 * MINUTE, 3), (), "put a head of another epoch")])
    assert head_invariants.ONE_HEAD in {f.check for f in world.ledger.findings}


def test_the_claim_s_condition_part_is_switchable() -> None:
    """``sim/mutants.py`` lifts its ``head_*`` skip for the parts these sets catch: switched off,
    the claim's only condition (the successor key is empty) always holds."""
    definition = JobDefinition(job_id=JOB_ID, schedule="rate(5 minutes)", target="t")
    job = HeadJob.of_definition(definition)
    head = head_item(
        job, T0 + 5 * MINUTE, 1, through=T0, shard_count=1, check_delay_ms=head_check_delay_ms(CFG)
    )
    (condition,) = claim_head_op(head, T0 + 4 * MINUTE, "tick", CFG).condition
    assert "successor_absent" in condition.why
    with switched_off("claim_head_op:_successor_absent"):
        (off,) = claim_head_op(head, T0 + 4 * MINUTE, "tick", CFG).condition
    assert "switched off" in off.why
    assert set(SUCCESSOR_SWITCHABLE) <= set(successor_parts())


def test_marks_read_the_head_a_change_made() -> None:
    """The nothing-lost check dates a stretch from the state's ``head_at`` (no ``next_run_at``
    on a successor state): without it the mark has no position and no occurrence is due."""
    world = _world()
    world.ledger.marks.clear()
    state = {"job_id": JOB_ID, "status": "active", "timing": {"schedule": "rate(5 minutes)"}, HEAD_AT: 42}
    world._mark(state)
    assert world.ledger.marks[-1].next_run_at == 42


def test_the_drive_finds_the_head_overdue() -> None:
    """The drive wakes when the job's head (not ``next_run_at``) is overdue its misfire grace."""
    world = _world()
    world.inner.tables[RUNS].clear()
    _successor_state(world, T0 + 5 * MINUTE)
    world.inner.write([Put(RUNS, _head(T0 + 5 * MINUTE, 2), (), "put head")])
    grace = min(60, CFG.trigger_lookback_seconds) * 1000
    assert T0 + 5 * MINUTE + grace + 1 in world.overdue_times(T0 + 60 * MINUTE)


def test_a_stale_due_page_sees_each_item_one_write_behind() -> None:
    """The stale-index emulation serves the ``due`` index: a page as the index held it before
    the last write of each item (the legacy emulation built a store without ``due``)."""
    world = _world(Budget(stale=1))
    world.inner.tables[RUNS].clear()
    head = _head(T0 + 5 * MINUTE, 1)
    world.store.write([Put(RUNS, head, (), "put head")])
    key = {"job_id": JOB_ID, "run_id": head["run_id"]}
    world.store.update(Update(RUNS, key, (), "move check_at", set={"check_at": T0 + 9 * MINUTE}))
    fresh = world.inner.query(DUE_INDEX, 0, None, None, 10, None, False).items
    stale = world.store._stale(RUNS).query(DUE_INDEX, 0, None, None, 10, None).items
    assert [item["check_at"] for item in fresh] == [T0 + 9 * MINUTE]
    assert [item["check_at"] for item in stale] == [T0 + 5 * MINUTE + 30_000]


def test_today_s_state_is_not_successor_shaped() -> None:
    """The check that tells a set ran today's protocol on the switched-on stack."""
    world = _world()
    world.inner.tables[STATE][JOB_ID] = {"job_id": JOB_ID, "status": "active", "next_run_at": T0}
    successor.final_checks(world, 0)
    assert successor.NOT_SUCCESSOR in {f.check for f in world.ledger.findings}
    world.ledger.findings.clear()
    world.ledger.seen.clear()
    _successor_state(world, T0 + 5 * MINUTE)
    successor.final_checks(world, 0)
    assert successor.NOT_SUCCESSOR not in {f.check for f in world.ledger.findings}


def test_the_switch_is_on_and_the_store_has_due() -> None:
    world = _world()
    assert "due" in world.inner.extra_indexes
    from jobsched.core.claim_shape import ClaimShape, stack_shape
    from jobsched.core.transitions.bookkeeping import BOOKKEEPING_KEY

    assert stack_shape(world.inner.get(STATE, dict(BOOKKEEPING_KEY))) == ClaimShape.SUCCESSOR


@pytest.mark.slow
def test_the_marker_mutant_alone_is_stopped_by_the_redispatch_fence(request: pytest.FixtureRequest) -> None:
    """As in the model: a detector that takes a closure marker for a claim is equivalent alone
    (the run it would dispatch is already closed, and the redispatch's own parts stop its write),
    and so are those parts alone; together they are caught (``MUTANTS``)."""
    if not ALL_LANDED:
        request.applymarker(pytest.mark.xfail(strict=True, reason=NOT_LANDED))
    marker = patched(head_recover, "is_closure_marker", _marker_is_claim)
    for alone in (marker, _switch(*REDISPATCH_FENCE)):
        with successor.own_setups(), alone():
            result = successor.explore(SETS["settle-change"], 1, stop_on_first=True)
        assert dict(result.counts) == {}
