"""One detector invocation sweeps every DETECTOR_SWEEP_SECONDS until its deadline, so a worker
that dies just after a sweep is recovered within a lease plus a sweep period, not a lease plus
the next once-a-minute schedule."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from harness import T0, Env, build, job, seed_active
from jobsched.core.run import run_id_for
from jobsched.services.messages import parse_run_message
from jobsched.services.worker import Started

INVOCATION_MS = 60_000
EVERY_MS = 10_000


@pytest.fixture
def env() -> Iterator[Env]:
    with build("memory") as built:
        yield built


def crash_a_worker(env: Env) -> str:
    """Claim one run, start it, and let the worker die holding its lease."""
    seed_active(env, job("j1", "rate(1 hour)", overlap="allow"), T0)
    assert env.trigger().tick("t").claimed == 1
    [body] = env.receive_all()
    started = env.worker("dies").begin(parse_run_message(body), env.clock.now_ms() + 900_000)
    assert isinstance(started, Started)
    return run_id_for("j1", T0)


def test_a_lease_lapsing_mid_invocation_is_recovered_by_a_later_sweep(env: Env) -> None:
    run_id = crash_a_worker(env)
    lease_expires_at = env.run(run_id)["lease_expires_at"]
    slept: list[int] = []

    def sleep(ms: int) -> None:
        slept.append(ms)
        env.clock.advance(ms)

    invoked_at = env.clock.now_ms()
    result = env.detector().sweep("inv", invoked_at + INVOCATION_MS, EVERY_MS, sleep)
    recovered = env.run(run_id)
    assert result.leases_recovered == 1 and recovered["status"] == "pending" and recovered["attempt"] == 2
    # Recovered by the first sweep after the lease (plus skew allowance) lapsed: within one period.
    lapse = lease_expires_at + env.cfg.clock_skew_allowance_ms
    assert lapse < recovered["recovered_at"] <= lapse + EVERY_MS
    # Sweeps every 10 s while a whole sweep still fits before the deadline margin.
    assert slept == [EVERY_MS] * 5 and result.sweeps == 6


def test_sweep_zero_is_one_run_per_invocation(env: Env) -> None:
    crash_a_worker(env)
    result = env.detector().sweep("inv", env.clock.now_ms() + INVOCATION_MS, 0, lambda ms: None)
    assert result.sweeps == 1 and result.leases_recovered == 0


def test_an_overloaded_sweep_leaves_the_rest_to_the_next_invocation(env: Env) -> None:
    env.cfg = env.cfg.model_copy(update={"detector_max_items": 1})
    for index in range(3):
        seed_active(env, job(f"late{index}", "rate(1 minute)", overlap="allow"), T0 - 3_600_000)
    slept: list[int] = []
    result = env.detector().sweep("inv", env.clock.now_ms() + INVOCATION_MS, EVERY_MS, slept.append)
    assert result.stopped_early and result.backlog > 0
    assert slept == [] and result.sweeps == 1
