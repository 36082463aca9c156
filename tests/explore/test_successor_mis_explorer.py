"""The successor model's misfire / ``max_runs`` / backfill sets on the product's explorer
(explore/sets_successor_mis.py), and the condition parts of core/transitions/head_*.py they
guard: each part switched off is caught by its set (``CATCHERS``), or caught with its partners
(``PAIRS``), or has a reason no set can catch it alone (``UNCAUGHT``), shown here: the explored
outcomes are the same without it, or it is never built. And each check the extension adds to the
successor world (``runs_beyond_max`` at every write; ``runs_short``, ``not_finished`` and
``policy_fate`` after the drive) is shown able to fail."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

import pytest
from jobsched.core import head_invariants
from jobsched.core.head import HeadJob, head_check_delay_ms, head_item
from jobsched.core.job import JobDefinition
from jobsched.core.run import end_run_id, run_id_for
from jobsched.core.transitions import head_finish, head_settle
from jobsched.core.transitions.head_settle import settle_head_ops
from jobsched.core.writes import JOBS, RUNS, STATE, Put
from jobsched_tools.explore import successor
from jobsched_tools.explore.model import CFG, JOB_ID, MINUTE, T0, ActorSet, job_item
from jobsched_tools.explore.search import Result
from jobsched_tools.explore.sets_successor_mis import (
    CATCHERS,
    MUTANTS_MIS,
    PAIRS,
    SAME_OUTCOMES,
    SETS_MIS,
    UNCAUGHT,
    explore,
    small_chunks,
)
from jobsched_tools.explore.world import Budget, World
from jobsched_tools.sim.mutants import SUCCESSOR_SWITCHABLE, switched_off

# The bound per set (preemptions): k=1 for each but the three whose k=1 takes over 10 s on a
# loaded 2-core machine (outage-change, max-runs-chain, backfill-tick), at k=0.
HEAVY = ("outage-change", "max-runs-chain", "backfill-tick")
BOUNDS: dict[str, int] = {name: 1 for name in SETS_MIS} | dict.fromkeys(HEAVY, 0)
# This extension's block of ``SUCCESSOR_SWITCHABLE`` (sim/mutants.py).
MIS_PARTS = frozenset(
    {
        "finish_life_ops:_state_as_read",
        "finish_life_ops:_end_marker_written",
        "backfill_with_head_ops:_backfill_record_absent",
        "adhoc_run_with_head_ops:_adhoc_run_absent",
        "settle_head_ops:_settle_successor_absent",
        "settle_head_ops:_missed_absent",
        "settle_head_ops:_next_head_absent",
        "_closed_end_key:_settle_successor_absent",
        "_decide_head:_head_scheduled",
        "_decide_head:_head_version",
    }
)


def _firsts(result: Result) -> dict[str, str]:
    return {check: finding.headline() for check, finding in result.first.items()}


def test_the_model_s_sets_are_ported_by_name() -> None:
    from jobsched_tools.successor.sets_mis import SETS_MIS as MODEL_SETS

    assert set(MODEL_SETS) <= set(SETS_MIS)
    assert sorted(set(SETS_MIS) - set(MODEL_SETS)) == ["finish-raise", "manual-retry-lost-response"]


@pytest.mark.parametrize("name", sorted(SETS_MIS))
def test_a_mis_set_holds(name: str) -> None:
    result = explore(name, BOUNDS[name])
    assert result.schedules > 0
    assert dict(result.counts) == {}, _firsts(result)


def test_every_part_of_the_extension_has_a_catcher_or_a_reason() -> None:
    assert set(SUCCESSOR_SWITCHABLE) >= MIS_PARTS
    assert not set(CATCHERS) & set(UNCAUGHT)
    assert set(CATCHERS) | set(UNCAUGHT) == MIS_PARTS
    redundant = {name for name, reason in UNCAUGHT.items() if reason.startswith("redundant")}
    assert redundant == {name for parts in PAIRS for name in parts if name in UNCAUGHT}
    assert set(SAME_OUTCOMES) == {
        name for name, reason in UNCAUGHT.items() if reason.startswith("never fails")
    }


@pytest.mark.parametrize("part", sorted(CATCHERS))
def test_a_part_switched_off_is_caught(part: str) -> None:
    """The set holds with the part (``test_a_mis_set_holds``); without it, it reports."""
    name, k, expected = CATCHERS[part]
    with successor.own_setups(), switched_off(part):
        result = explore(name, k, stop_on_first=True)
    assert expected in result.counts, (part, name, dict(result.counts))


@pytest.mark.parametrize("parts", sorted(PAIRS), ids="+".join)
def test_a_redundant_part_is_caught_with_its_partners(parts: tuple[str, ...]) -> None:
    name, k, expected = PAIRS[parts]
    with successor.own_setups(), switched_off(*parts, successor=True):
        result = explore(name, k, stop_on_first=True)
    assert expected in result.counts, (parts, name, dict(result.counts))


def _outcomes(name: str, k: int, chunk: int | None, parts: tuple[str, ...]) -> set[str]:
    """Every final state (the job's runs and state after the drive) the set reaches at ``k``,
    with ``parts`` switched off."""
    found: set[str] = set()

    def record(world: World) -> None:
        runs = sorted(world.inner.tables[RUNS].values(), key=lambda run: str(run["run_id"]))
        state = world.inner.get(STATE, {"job_id": JOB_ID})
        found.add(json.dumps([runs, state], default=repr, sort_keys=True))

    actor_set = dataclasses.replace(SETS_MIS[name], check=record)
    with successor.own_setups(), switched_off(*parts), small_chunks(chunk) if chunk else nullcontext():
        result = successor.explore(actor_set, k)
    assert dict(result.counts) == {}, _firsts(result)
    return found


@contextmanager
def _counted(part: str) -> Iterator[list[int]]:
    """How many times ``part``'s condition is built (its helper, in its write function's module)."""
    function, helper = part.split(":")
    module = head_finish if function == "finish_life_ops" else head_settle
    original, built = getattr(module, helper), [0]

    def counting(*args: Any) -> Any:
        built[0] += 1
        return original(*args)

    setattr(module, helper, counting)
    try:
        yield built
    finally:
        setattr(module, helper, original)


REACHED = [(part, *reach) for part, sets in sorted(SAME_OUTCOMES.items()) for reach in sets]


@pytest.mark.parametrize(("part", "name", "k", "chunk"), REACHED)
def test_a_part_that_never_fails_changes_no_explored_outcome(
    part: str, name: str, k: int, chunk: int | None
) -> None:
    """``UNCAUGHT``'s "never fails": in a set whose schedules build the part (the settle's later
    records and next head in an outage raced by a late claim; the finish write against a raise,
    a settle, a late claim), every final state with the part switched off is one reached with it."""
    with _counted(part) as built:
        with_part = _outcomes(name, k, chunk, ())
    assert built[0] > 0, f"{name} never builds {part}"
    assert len(with_part) > 1  # the set's schedules end in more than one way
    assert _outcomes(name, k, chunk, (part,)) == with_part


def _last_head(policy: str = "skip") -> dict[str, Any]:
    definition = JobDefinition(
        job_id=JOB_ID,
        schedule="rate(5 minutes)",
        target="t",
        max_runs=1,
        misfire={"policy": policy, "grace_seconds": 60, "max_catchup": 1},
    )
    head = head_item(
        HeadJob.of_definition(definition),
        T0 + 5 * MINUTE,
        1,
        through=T0,
        shard_count=1,
        check_delay_ms=head_check_delay_ms(CFG),
    )
    assert head["next_key"] == end_run_id(JOB_ID, T0 + 5 * MINUTE, 1)  # its run would end the life
    return head


def test_the_closed_end_key_s_own_part_is_never_built() -> None:
    """``UNCAUGHT``'s "not reached": a missed last head's settle closes its end key with
    settle_head_ops' own successor part; ``_closed_end_key``'s fallback part is never built, so
    switching it off changes no condition, and switching the caller's off does."""
    head, now = _last_head(), T0 + 6 * MINUTE + 10_000

    def closure_whys() -> list[str]:
        ops = settle_head_ops(head, now, CFG).ops
        closes = [op for op in ops if op.label == "settle closes end key"]
        assert len(closes) == 1 and isinstance(closes[0], Put)
        return [cond.why for op in ops for cond in op.condition]

    whys = closure_whys()
    assert any(why.startswith("settle.successor_absent") for why in whys)
    with switched_off("_closed_end_key:_settle_successor_absent"):
        assert closure_whys() == whys
    with switched_off("settle_head_ops:_settle_successor_absent"):
        assert any("switched off" in why for why in closure_whys())


def test_the_outages_settle_in_two_chunks() -> None:
    """The model's outage: 00:05 to 00:20 due at 20:50, two occurrences a chunk."""
    actor_set = SETS_MIS["outage-skip"]
    only_detector = dataclasses.replace(actor_set, actors=actor_set.actors[:1])
    with small_chunks():
        world = successor.play(only_detector, [])
    settles = [line for line in world.trace if "write settle head" in line]
    assert len(settles) == 2, settles
    assert [f.check for f in world.ledger.findings] == []


# --- the extension's checks, each able to fail ---------------------------------------------------------


@pytest.mark.parametrize("name", sorted(MUTANTS_MIS))
def test_the_model_s_misfire_mutants_are_caught(name: str) -> None:
    """Each rule of the chunked settle undone (the model's ``MUTANTS_MIS``) breaks the policy in
    the set the model catches it with; the set holds with the rule (``test_a_mis_set_holds``)."""
    _switch, mutant, catcher, expected = MUTANTS_MIS[name]
    with successor.own_setups(), mutant():
        result = explore(catcher, 0, stop_on_first=True)
    assert expected in result.counts, dict(result.counts)


def _probe(job: tuple[tuple[str, Any], ...]) -> successor.SuccessorWorld:
    world = successor.build(ActorSet("probe", (), budget=Budget(), job=job), ())
    world.inner.tables[RUNS].clear()
    return world


def _run(at: int, epoch: int, status: str, next_key: str, **more: Any) -> dict[str, Any]:
    return {
        "job_id": JOB_ID,
        "run_id": run_id_for(JOB_ID, at, epoch),
        "kind": "scheduled",
        "status": status,
        "version": 2,
        "scheduled_at": at,
        "epoch": epoch,
        "next_key": next_key,
        **more,
    }


def _end(at: int, epoch: int) -> dict[str, Any]:
    return {
        "job_id": JOB_ID,
        "run_id": end_run_id(JOB_ID, at, epoch),
        "status": "end",
        "version": 1,
        "epoch": epoch,
        "last_run_at": at,
    }


def _put(world: World, *items: dict[str, Any]) -> None:
    for item in items:
        world.inner.write([Put(RUNS, item, (), f"put {item['run_id']}")])


def _found(world: World) -> set[str]:
    return {finding.check for finding in world.ledger.findings}


def test_more_runs_than_max_runs_break_the_life_at_the_write() -> None:
    """``runs_beyond_max`` (core/head_invariants.py) is checked with the job's limit: two claimed
    runs of a ``max_runs`` 1 job."""
    world = _probe((("max_runs", 1),))
    at5, at10, at15 = (T0 + n * MINUTE for n in (5, 10, 15))
    _put(world, _run(at5, 1, "succeeded", run_id_for(JOB_ID, at10, 1)))
    world.check_invariants()
    assert head_invariants.BEYOND_MAX_RUNS not in _found(world)
    _put(world, _run(at10, 1, "scheduled", run_id_for(JOB_ID, at15, 1)))
    _put(world, _run(at15, 1, "scheduled", run_id_for(JOB_ID, at15 + 5 * MINUTE, 1)))  # 00:10 claimed
    world.check_invariants()
    assert head_invariants.BEYOND_MAX_RUNS in _found(world)


def test_a_life_that_ended_short_or_unfinished_is_reported() -> None:
    """``runs_short``: a ``max_runs`` 2 life whose end marker came after one run; ``not_finished``:
    its state still active after the drive. With two runs and the state finished, neither."""
    world = _probe((("max_runs", 2),))
    at5, at10 = T0 + 5 * MINUTE, T0 + 10 * MINUTE
    state = world.inner.tables[STATE][JOB_ID]
    world.inner.tables[STATE][JOB_ID] = {**state, "epoch": 1, "status": "active"}
    _put(world, _run(at5, 1, "succeeded", end_run_id(JOB_ID, at5, 1)), _end(at5, 1))
    successor.life_checks(world, world.runs_by_id())
    assert {successor.RUNS_SHORT, successor.NOT_FINISHED} <= _found(world)
    world.ledger.findings.clear()
    world.ledger.seen.clear()
    world.inner.tables[RUNS].clear()
    _put(
        world,
        _run(at5, 1, "succeeded", run_id_for(JOB_ID, at10, 1)),
        _run(at10, 1, "succeeded", end_run_id(JOB_ID, at10, 1)),
        _end(at10, 1),
    )
    world.inner.tables[STATE][JOB_ID]["status"] = "finished"
    successor.life_checks(world, world.runs_by_id())
    assert _found(world) == set()


def test_a_finite_job_without_its_end_marker_is_not_finished() -> None:
    """A ``max_runs`` 1 job no person changed, its one occurrence due in the window, and no end
    marker after the drive: ``not_finished``."""
    world = _probe((("max_runs", 1),))
    world.inner.tables[JOBS][JOB_ID] = job_item(job=(("max_runs", 1),))
    world.inner.tables[STATE][JOB_ID] = {**world.inner.tables[STATE][JOB_ID], "status": "active"}
    successor.life_checks(world, world.runs_by_id())
    assert successor.NOT_FINISHED in _found(world)
