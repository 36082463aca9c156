"""The successor model's reads / heartbeats / detectors / adoption extension on the product's
explorer (issue 37; tools/jobsched_tools/explore/sets_successor_reads.py): each set holds on the
real services of a successor-shaped stack; the model's adoption mutant is caught; and each of the
head's condition parts this extension covers is caught switched off (alone, ``CATCHERS``, or with
the part that makes it redundant, ``PAIRS``), or reaches its race and breaks nothing alone
(``UNCAUGHT``, ``ALONE``; tests/unit/test_head_reads_parts.py shows why on the store)."""

from __future__ import annotations

import pytest
from jobsched.core import head_invariants
from jobsched.core.writes import RUNS, Put, Update
from jobsched_tools.explore import successor
from jobsched_tools.explore.model import JOB_ID, ActorSet
from jobsched_tools.explore.search import Step, play_script
from jobsched_tools.explore.sets_successor import SETS as BASE_SETS
from jobsched_tools.explore.sets_successor_reads import (
    ALONE,
    BOUNDS,
    CATCHERS,
    MODEL_SETS,
    MUTANTS,
    PAIRS,
    RECOVERY_LATE,
    SETS,
    SHORT_LEASE_SETS,
    UNCAUGHT,
)
from jobsched_tools.explore.world import LAG, Budget
from jobsched_tools.sim.mutants import SUCCESSOR_SWITCHABLE, successor_parts, switched_off

EVERY = {**BASE_SETS, **SETS}
# The head's parts this extension accounts for (the brief of issue 37's wave 3, w3reads).
PARTS = (
    "recheck_claimed_op:_run_token",
    "recheck_claimed_op:_run_status",
    "redispatch_head_op:_lease_as_read",
    "redispatch_head_op:_not_asked_to_stop",
    "relink_head_ops:_head_scheduled",
    "relink_head_ops:_head_version",
)


def _found(name: str, k: int, *parts: str) -> dict[str, int]:
    with successor.own_setups(), switched_off(*parts):
        result = successor.explore(EVERY[name], k, stop_on_first=True)
    assert result.schedules > 0
    return dict(result.counts)


def test_the_model_s_reads_sets_are_ported_by_name_but_one() -> None:
    from jobsched_tools.successor.sets_reads import READS_SETS

    # stale-entry-committed: a detector whose GetItem lags (the product's detector reads strongly);
    # adopt-recovered is adopt-retry (the product's pending run that waits out a backoff is a retry).
    ported = (set(READS_SETS) - {"stale-entry-committed", "adopt-recovered"}) | {"adopt-retry"}
    assert sorted(MODEL_SETS) == sorted(ported)


@pytest.mark.parametrize("name", sorted(SETS))
def test_a_reads_set_holds(name: str) -> None:
    result = successor.explore(SETS[name], BOUNDS[name])
    assert result.schedules > 0
    firsts = {check: finding.headline() for check, finding in result.first.items()}
    assert dict(result.counts) == {}, firsts


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_the_model_s_adoption_mutant_is_caught(name: str) -> None:
    mutant = MUTANTS[name]
    with successor.own_setups(), mutant.apply():
        result = successor.explore(EVERY[mutant.catcher], 1, stop_on_first=True)
    assert successor.NOT_SUCCESSOR not in result.counts
    assert mutant.expected in result.counts, dict(result.counts)


def test_every_part_of_the_extension_is_switchable_and_accounted_for() -> None:
    assert set(PARTS) <= set(SUCCESSOR_SWITCHABLE)
    assert set(PARTS) <= set(successor_parts())
    paired = {part for pair in PAIRS for part in pair}
    for part in PARTS:
        assert part in CATCHERS or part in UNCAUGHT, part
    for part, reason in UNCAUGHT.items():
        assert part in ALONE, f"{part}: no set shown to reach its race"
        if "redundant" in reason:
            assert part in paired, f"{part}: a redundancy without its pair"


@pytest.mark.parametrize("part", sorted(CATCHERS))
def test_a_part_switched_off_alone_is_caught(part: str) -> None:
    name, k, expected = CATCHERS[part]
    assert _found(name, k) == {}, "the catcher fails with the part on"
    assert expected in _found(name, k, part)


@pytest.mark.parametrize("pair", sorted(PAIRS), ids=" + ".join)
def test_redundant_parts_switched_off_together_are_caught(pair: tuple[str, ...]) -> None:
    name, k, expected = PAIRS[pair]
    assert expected in _found(name, k, *pair)


@pytest.mark.parametrize("part", sorted(ALONE))
def test_an_uncaught_part_alone_breaks_nothing_where_its_race_is_reached(part: str) -> None:
    assert _found(ALONE[part], 1, part) == {}


def test_an_eventually_consistent_get_may_answer_one_write_behind() -> None:
    """``Budget.lag``: the trigger's eventually consistent GetItem of a successor (services/
    head_trigger.py) may miss the item's last write (absent, if that write created it); a strongly
    consistent one never does, and the budget bounds how many lag."""
    world = successor.build(ActorSet("probe", (), budget=Budget(crashes=0, lag=1)), ())
    key = {"job_id": JOB_ID, "run_id": "j@manual:x"}
    answers: list[object] = []

    def reader() -> None:
        world.store.write([Put(RUNS, {**key, "status": "pending", "version": 1}, (), "put")])
        answers.append(world.store.get(RUNS, key, consistent=False))
        world.store.update(Update(RUNS, key, (), "bump", set={"version": 2}))
        answers.append(world.store.get(RUNS, key, consistent=True))
        answers.append(world.store.get(RUNS, key, consistent=False))
        answers.append(world.store.get(RUNS, key, consistent=False))

    world.sched.add("reader", reader)
    script: list[Step] = [
        ("reader", "through", "get runs", LAG),
        ("reader", "through", "get runs"),
        ("reader", "through", "get runs", LAG),
    ]
    play_script(world, script)
    versions = [None if a is None else a["version"] for a in answers]  # type: ignore[index]
    assert versions == [None, 2, 1, 2]


def test_a_detector_that_leaves_a_lapsed_lease_is_late(monkeypatch: pytest.MonkeyPatch) -> None:
    """``recovery_late`` (the ``sweeper``'s check) fails when the sweep does not recover the dead
    worker's run: its lease ended at 00:05:30, swept at 00:05:40."""
    from jobsched.services.detector import MissDetector

    monkeypatch.setattr(MissDetector, "_recover", lambda *_args: None)
    result = successor.explore(SETS["two-detectors"], 0, stop_on_first=True)
    assert RECOVERY_LATE in result.counts, dict(result.counts)


def test_the_checks_ported_from_the_model_can_fail() -> None:
    """``finished_in_due`` and ``retry_before_backoff`` (core/head_invariants.py)."""
    ended = {"job_id": JOB_ID, "run_id": "j@manual:x", "status": "succeeded", "check_at": 5}
    assert [v.invariant for v in head_invariants.due_entries_left({"x": ended})] == [head_invariants.DUE_LEFT]
    owed = {**ended, "status": "failed", "dead_letter": "pending"}
    assert head_invariants.due_entries_left({"x": owed}) == []
    retry = {"status": "pending", "retry_at": 60_000}
    assert head_invariants.retried_early("x", retry, 57_000, 2_000)
    assert head_invariants.retried_early("x", retry, 58_000, 2_000) == []
    running = {"status": "running", "lease_expires_at": 30_000, "check_at": 20_000}
    assert head_invariants.hidden_lease("x", running, {**running, "check_at": 30_000}) == []
    assert head_invariants.hidden_lease("x", running, {**running, "check_at": 30_001})
    # A start keeps the claim's check_at (written on another clock): not judged.
    assert (
        head_invariants.hidden_lease("x", {**running, "check_at": 40_000}, {**running, "check_at": 40_000})
        == []
    )


@pytest.mark.parametrize("name", sorted(SHORT_LEASE_SETS))
def test_a_fixed_30_s_check_delay_is_late_with_short_leases(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """HC7: with leases of 5 s, a head's check delay fixed at 30 s (the constant it was) lets the
    detector meet a run whose worker died at its start, or whose message was lost, only 30 s after
    its instant: ``recovery_late`` (the ``sweeper``'s check) reports the sweep at 00:05:08."""
    import sys

    from jobsched.core import head

    following = head.head_check_delay_ms
    for module in list(sys.modules.values()):
        named = getattr(module, "__name__", "")
        if named.startswith("jobsched.") and vars(module).get("head_check_delay_ms") is following:
            monkeypatch.setattr(module, "head_check_delay_ms", lambda _cfg: 30_000)
    with successor.own_setups():  # the set-up's heads written with the fixed delay too
        result = successor.explore(SETS[name], BOUNDS[name], stop_on_first=True)
    assert RECOVERY_LATE in result.counts, dict(result.counts)
