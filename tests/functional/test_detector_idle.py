"""Issue 27, item 7: a detector invocation with nothing to watch returns after its first sweep,
instead of sweeping every 10 s until its deadline (~57 s of a 512 MB Lambda a minute, ~$16 a month
for a stack with no jobs). It keeps sweeping while any lease is held, or while a job is due before
its deadline plus the lookahead (the trigger may create a lease before the next invocation)."""

from __future__ import annotations

from collections.abc import Callable

from harness import T0, Env, job, seed_active
from jobsched.core.run import run_id_for
from jobsched.services.messages import parse_run_message
from jobsched.services.worker import Started

INVOCATION_MS = 60_000
EVERY_MS = 10_000


def sleeper(env: Env, slept: list[int], then: Callable[[], None] | None = None) -> Callable[[int], None]:
    def sleep(ms: int) -> None:
        slept.append(ms)
        env.clock.advance(ms)
        if then is not None and len(slept) == 1:
            then()

    return sleep


def test_an_empty_stack_s_detector_returns_after_one_sweep(env: Env) -> None:
    slept: list[int] = []
    now = env.clock.now_ms()
    result = env.detector().sweep("idle", now + INVOCATION_MS, EVERY_MS, sleeper(env, slept))
    assert slept == [] and result.sweeps == 1
    assert env.clock.now_ms() == now  # no time spent waiting


def test_with_idle_return_off_an_empty_stack_s_detector_sweeps_to_its_deadline(env: Env) -> None:
    """``DetectorIdleReturn`` false (the local stack's setting): the detector keeps sweeping, so a
    lease created after its first sweep (a new job's first claim by the registrar) is recovered
    within the invocation, at the price of the idle cost."""
    from jobsched.services.detector import MissDetector

    cfg = env.cfg.model_copy(update={"detector_idle_return": False})
    detector = MissDetector(env.store, env.queue, env.telemetry, env.clock, cfg, False)
    slept: list[int] = []
    result = detector.sweep("always", env.clock.now_ms() + INVOCATION_MS, EVERY_MS, sleeper(env, slept))
    assert slept and result.sweeps > 1


def test_a_job_due_after_the_next_invocation_leaves_the_detector_idle(env: Env) -> None:
    horizon = env.clock.now_ms() + INVOCATION_MS + env.cfg.lookahead_seconds * 1000
    seed_active(env, job("nightly", "rate(1 day)"), horizon + 1)
    slept: list[int] = []
    result = env.detector().sweep("idle", env.clock.now_ms() + INVOCATION_MS, EVERY_MS, sleeper(env, slept))
    assert slept == [] and result.sweeps == 1


def test_a_job_due_before_the_next_invocation_keeps_it_sweeping(env: Env) -> None:
    """The trigger may claim it (a dispatch lease) while this invocation runs: the detector keeps
    its sweeps, and recovers a worker that dies holding that lease within the invocation."""
    due = env.clock.now_ms() + INVOCATION_MS + env.cfg.lookahead_seconds * 1000
    seed_active(env, job("soon", "rate(1 hour)", overlap="allow"), due)
    slept: list[int] = []
    result = env.detector().sweep("busy", env.clock.now_ms() + INVOCATION_MS, EVERY_MS, sleeper(env, slept))
    assert slept and result.sweeps > 1


def test_a_held_lease_keeps_the_detector_sweeping_and_it_is_recovered_on_time(env: Env) -> None:
    seed_active(env, job("j1", "rate(1 hour)", overlap="allow"), T0)
    assert env.trigger().tick("t").claimed == 1
    [body] = env.receive_all()
    started = env.worker("dies").begin(parse_run_message(body), env.clock.now_ms() + 900_000)
    assert isinstance(started, Started)  # and the worker dies holding its lease
    run_id = run_id_for("j1", T0)
    lapse = env.run(run_id)["lease_expires_at"] + env.cfg.clock_skew_allowance_ms
    slept: list[int] = []
    result = env.detector().sweep("watch", env.clock.now_ms() + INVOCATION_MS, EVERY_MS, sleeper(env, slept))
    assert result.leases_recovered == 1
    assert env.run(run_id)["recovered_at"] == lapse + 1  # the guarantee is unchanged
