"""Retry backoff, overlap decisions and misfire plans: pure rules, checked as tables."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jobsched.core.job import MisfirePolicy, OverlapPolicy, RetryPolicy
from jobsched.core.policies import (
    OverlapDecision,
    attempts_left,
    chain_step,
    decide_overlap,
    not_yet_due,
    plan_misfire,
    retry_delay_ms,
    waits_for_walker,
)
from jobsched.core.run import RunStatus

PENDING, MISSED = RunStatus.PENDING, RunStatus.MISSED


@given(
    base=st.integers(1, 900),
    extra=st.integers(0, 900),
    attempt=st.integers(1, 30),
    seed=st.integers(0, 2**32),
)
def test_backoff_within_bounds(base: int, extra: int, attempt: int, seed: int) -> None:
    cap = min(900, base + extra)
    ceiling = min(cap, base * 2 ** (attempt - 1)) * 1000
    jittered = RetryPolicy(backoff_seconds=base, max_backoff_seconds=cap, jitter=True)
    delay = retry_delay_ms(jittered, attempt, random.Random(seed))
    assert 1000 <= delay <= max(1000, ceiling)
    plain = RetryPolicy(backoff_seconds=base, max_backoff_seconds=cap, jitter=False)
    assert retry_delay_ms(plain, attempt, random.Random(seed)) == ceiling


def test_backoff_doubles_until_the_cap() -> None:
    policy = RetryPolicy(backoff_seconds=10, max_backoff_seconds=60, jitter=False)
    rng = random.Random(1)
    assert [retry_delay_ms(policy, a, rng) for a in range(1, 6)] == [10_000, 20_000, 40_000, 60_000, 60_000]


def test_full_jitter_spreads_over_the_whole_range() -> None:
    policy = RetryPolicy(backoff_seconds=100, max_backoff_seconds=100, jitter=True)
    rng = random.Random(42)
    delays = [retry_delay_ms(policy, 1, rng) for _ in range(2000)]
    assert min(delays) >= 1000 and max(delays) <= 100_000
    assert min(delays) < 10_000 and max(delays) > 90_000  # full jitter, not "base plus a little"
    assert len(set(delays)) > 1000


def test_attempts_left() -> None:
    policy = RetryPolicy(max_attempts=3)
    assert [attempts_left(policy, a) for a in (1, 2, 3, 4)] == [True, True, False, False]


RUNNING = {"run_id": "other", "status": "running"}


@pytest.mark.parametrize(
    ("policy", "holder", "expected"),
    [
        (OverlapPolicy.ALLOW, RUNNING, OverlapDecision.RUN),
        (OverlapPolicy.SKIP, None, OverlapDecision.RUN),
        (OverlapPolicy.SKIP, {"run_id": "me", "status": "pending"}, OverlapDecision.RUN),
        (OverlapPolicy.SKIP, RUNNING, OverlapDecision.SKIP),
        (OverlapPolicy.SKIP, {"run_id": "other", "status": "pending"}, OverlapDecision.SKIP),
        (OverlapPolicy.BUFFER_ONE, None, OverlapDecision.RUN),
        (OverlapPolicy.BUFFER_ONE, RUNNING, OverlapDecision.BUFFER),
        (OverlapPolicy.BUFFER_ONE, {**RUNNING, "buffered_next": "me"}, OverlapDecision.BUFFER),
        (OverlapPolicy.BUFFER_ONE, {**RUNNING, "buffered_next": "third"}, OverlapDecision.SKIP),
        (OverlapPolicy.BUFFER_ONE, {"run_id": "other", "status": "buffered"}, OverlapDecision.SKIP),
        # W15/W16: a claimed run not started (``scheduled``) is waited behind as a pending one is.
        (OverlapPolicy.SKIP, {"run_id": "other", "status": "scheduled"}, OverlapDecision.SKIP),
        (OverlapPolicy.CANCEL_OTHER, {"run_id": "other", "status": "scheduled"}, OverlapDecision.BUFFER),
    ],
)
def test_decide_overlap(
    policy: OverlapPolicy, holder: dict[str, str] | None, expected: OverlapDecision
) -> None:
    assert decide_overlap(policy, "me", holder) is expected


@pytest.mark.parametrize(
    ("run", "expected"),
    [
        (None, (False, None)),  # expired or never there: the turn is free
        ({"status": "pending"}, (True, None)),  # not started yet: it would not know about us
        ({"status": "scheduled"}, (True, None)),  # W5: the successor claim's claimed run, the same
        ({"status": "running"}, (True, None)),
        ({"status": "buffered"}, (True, None)),
        ({"status": "succeeded"}, (False, None)),
        ({"status": "failed"}, (False, None)),
        ({"status": "missed"}, (False, None)),
        ({"status": "skipped", "blocked_by": "j@1"}, (False, "j@1")),  # ask the run it waited for
        ({"status": "skipped"}, (False, None)),
    ],
)
def test_chain_step(run: dict[str, str] | None, expected: tuple[bool, str | None]) -> None:
    assert chain_step(run) == expected


NOW = 1_796_083_200_000


@pytest.mark.parametrize("status", ["pending", "scheduled"])
def test_a_claimed_run_not_yet_due_is_passed_over(status: str) -> None:
    """W3: a claimed run that never ran and is not due holds no turn for a run starting before
    it; under the successor claim such a run is ``scheduled`` (build plan §2)."""
    claimed = {"status": status, "attempt": 1, "scheduled_at": NOW + 1}
    assert not_yet_due(claimed, NOW)
    assert not not_yet_due(claimed, NOW + 1)  # due: it holds the turn
    assert not not_yet_due({**claimed, "first_started_at": NOW - 5}, NOW)  # it ran once
    assert not not_yet_due({**claimed, "status": "running"}, NOW)


@pytest.mark.parametrize("status", ["pending", "scheduled", "buffered"])
def test_a_run_overtaken_and_not_started_since_waits_for_its_overtaker(status: str) -> None:
    """W4: the walk of the run that overtook it passes over it (either status of a claimed run)."""
    overtaken = {"status": status, "overtaken_by": "j@manual:1"}
    assert waits_for_walker(overtaken, "j@manual:1")
    assert not waits_for_walker(overtaken, "j@manual:2")
    assert not waits_for_walker({**overtaken, "status": "running"}, "j@manual:1")


MISSED_TIMES = [60_000 * i for i in range(1, 8)]


def statuses(fates: list[object]) -> list[RunStatus]:
    return [f.status for f in fates]  # type: ignore[attr-defined]


def test_plan_misfire_empty() -> None:
    for policy in MisfirePolicy:
        assert plan_misfire(policy, [], 10, 0, False) == []


def test_plan_misfire_run_once_runs_latest_only() -> None:
    fates = plan_misfire(MisfirePolicy.RUN_ONCE, MISSED_TIMES, 10, 0, False)
    assert [f.scheduled_at for f in fates] == MISSED_TIMES
    assert statuses(fates) == [MISSED] * 6 + [PENDING]
    assert all("run_once" in f.reason for f in fates)


def test_plan_misfire_run_once_defers_when_more_follow() -> None:
    fates = plan_misfire(MisfirePolicy.RUN_ONCE, MISSED_TIMES, 10, 0, False, more_follow=True)
    assert statuses(fates) == [MISSED] * 7


def test_plan_misfire_run_all_caps_at_max_catchup() -> None:
    fates = plan_misfire(MisfirePolicy.RUN_ALL, MISSED_TIMES, 3, 0, False)
    assert statuses(fates) == [PENDING] * 3 + [MISSED] * 4  # the oldest run
    assert "max_catchup 3" in fates[-1].reason


def test_plan_misfire_run_all_counts_earlier_catchups() -> None:
    fates = plan_misfire(MisfirePolicy.RUN_ALL, MISSED_TIMES, 3, 2, False)
    assert statuses(fates) == [PENDING] + [MISSED] * 6
    assert statuses(plan_misfire(MisfirePolicy.RUN_ALL, MISSED_TIMES, 3, 5, False)) == [MISSED] * 7


def test_plan_misfire_run_all_degraded_coalesces_and_says_so() -> None:
    fates = plan_misfire(MisfirePolicy.RUN_ALL, MISSED_TIMES, 10, 0, True)
    assert statuses(fates) == [MISSED] * 6 + [PENDING]
    assert all("degraded" in f.reason for f in fates)


def test_plan_misfire_skip_records_all() -> None:
    for degraded in (False, True):
        fates = plan_misfire(MisfirePolicy.SKIP, MISSED_TIMES, 10, 0, degraded)
        assert statuses(fates) == [MISSED] * 7
        assert all("skip" in f.reason for f in fates)
