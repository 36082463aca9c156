"""Parallel claimers inside one tick: different jobs concurrently, each job's occurrences in order,
every occurrence claimed once, and the claim cap honoured across the claimers."""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterator
from typing import Any

import pytest
from harness import MINUTE, T0, Env, build, job, seed_active
from jobsched.core.writes import RUNS
from jobsched.services.paging import scan_all
from jobsched.services.trigger import Trigger
from jobsched_tools.emulator.local_moto import LocalMoto

SECOND = 1000


# In-process moto is not thread-safe; parallel claimers need the server, which (like DynamoDB)
# applies each request atomically.
@pytest.fixture(params=["memory", "server"])
def env(request: pytest.FixtureRequest, moto_server: LocalMoto) -> Iterator[Env]:
    with build(request.param, moto=moto_server) as built:
        yield built


def runs(env: Env) -> list[dict[str, Any]]:
    return list(scan_all(env.store, RUNS))


def parallel_trigger(env: Env, claimers: int) -> Trigger:
    return Trigger(env.store, env.queue, env.telemetry, env.clock, env.cfg, claim_concurrency=claimers)


def test_parallel_claimers_claim_every_occurrence_once(env: Env) -> None:
    for index in range(24):
        seed_active(env, job(f"m{index}"), T0 + MINUTE)
    # A fast job has several occurrences inside the lookahead: claimed in order by one claimer.
    seed_active(env, job("fast", "rate(10 seconds)", overlap="allow"), T0 + 10 * SECOND)
    first = parallel_trigger(env, 8).tick("t1")
    second = parallel_trigger(env, 8).tick("t2")
    claimed = runs(env)
    per_occurrence = Tally(run["run_id"] for run in claimed)
    fast = sorted(run["scheduled_at"] for run in claimed if run["job_id"] == "fast")
    window_end = T0 + env.cfg.lookahead_seconds * SECOND
    assert max(per_occurrence.values()) == 1
    assert first.claimed == len(claimed) and second.claimed == 0
    assert fast == list(range(T0 + 10 * SECOND, window_end + 1, 10 * SECOND))
    assert env.job("fast")["next_run_at"] == fast[-1] + 10 * SECOND
    assert first.dispatched == first.claimed


def test_claim_cap_is_shared_by_the_claimers(env: Env) -> None:
    env.cfg = env.cfg.model_copy(update={"max_claims_per_tick": 5})
    for index in range(12):
        seed_active(env, job(f"c{index}"), T0 + MINUTE)
    result = parallel_trigger(env, 4).tick("t")
    assert result.claimed == 5 == len(runs(env))
    assert result.stopped_early and result.backlog >= 7 - 4  # claimers already in flight stop on the cap
