"""One detector invocation sweeps every DETECTOR_SWEEP_SECONDS until its deadline, and wakes early
for the next lease due to lapse, so a worker that dies is recovered a skew allowance after its
lease, not a sweep period (or the next once-a-minute schedule) later."""

from __future__ import annotations

from collections.abc import Callable

from harness import T0, Env, job, seed_active
from jobsched.core.run import run_id_for
from jobsched.services.detector import LEASE_WAKE_BUDGET_MS, MIN_WAKE_GAP_MS, DetectResult
from jobsched.services.messages import parse_run_message
from jobsched.services.worker import Started, Worker

INVOCATION_MS = 60_000
EVERY_MS = 10_000


def sleeper(env: Env, slept: list[int]) -> Callable[[int], None]:
    def sleep(ms: int) -> None:
        slept.append(ms)
        env.clock.advance(ms)

    return sleep


def start_and_abandon(env: Env, job_id: str = "j1") -> tuple[str, Worker, Started]:
    """Claim one run and start it; the caller decides whether the worker dies holding its lease."""
    seed_active(env, job(job_id, "rate(1 hour)", overlap="allow"), T0)
    assert env.trigger().tick("t").claimed == 1
    [body] = env.receive_all()
    worker = env.worker(f"worker-{job_id}")
    started = worker.begin(parse_run_message(body), env.clock.now_ms() + 900_000)
    assert isinstance(started, Started)
    return run_id_for(job_id, T0), worker, started


def crash_a_worker(env: Env, job_id: str = "j1") -> str:
    return start_and_abandon(env, job_id)[0]


def test_a_lease_lapsing_mid_invocation_is_recovered_the_moment_it_lapses(env: Env) -> None:
    run_id = crash_a_worker(env)
    lease_expires_at = env.run(run_id)["lease_expires_at"]
    slept: list[int] = []
    invoked_at = env.clock.now_ms()
    result = env.detector().sweep("inv", invoked_at + INVOCATION_MS, EVERY_MS, sleeper(env, slept))
    recovered = env.run(run_id)
    assert result.leases_recovered == 1 and recovered["status"] == "pending" and recovered["attempt"] == 2
    # Recovered 1 ms after the lease plus skew allowance lapsed, not at the next 10 s sweep.
    lapse = lease_expires_at + env.cfg.clock_skew_allowance_ms
    assert recovered["recovered_at"] == lapse + 1
    # Full sweeps every 10 s while a whole one still fits before the deadline margin, and one
    # early wake for the lease in between that does not move the rhythm.
    early = lapse + 1 - (invoked_at + 3 * EVERY_MS)
    assert 0 < early < EVERY_MS
    assert slept == [EVERY_MS, EVERY_MS, EVERY_MS, early, EVERY_MS - early, EVERY_MS]
    assert result.sweeps == 7
    # The early wake recovered leases only: overdue jobs were read by the six full sweeps alone.
    metrics = [name for name, _, _ in env.telemetry.metrics]
    assert metrics.count("LeasesRecovered") == 7 and metrics.count("DetectorBacklog") == 6
    starts = [event.fields["leases_only"] for event in env.telemetry.named("detector.started")]
    assert starts == [False] * 4 + [True] + [False] * 2


def test_a_lease_lapsing_after_the_last_full_sweep_is_still_recovered_by_this_invocation(env: Env) -> None:
    run_id = crash_a_worker(env)
    lapse = env.run(run_id)["lease_expires_at"] + env.cfg.clock_skew_allowance_ms
    invoked_at = env.clock.now_ms()
    # Full sweeps at 0, 10, 20 and 30 s; one at 40 s would not fit before this deadline's margin.
    deadline = lapse + EVERY_MS // 2 + env.cfg.deadline_margin_ms + 1_000
    result = env.detector().sweep("inv", deadline, EVERY_MS, sleeper(env, []))
    assert result.leases_recovered == 1 and env.run(run_id)["recovered_at"] == lapse + 1
    assert result.sweeps == 5 and lapse - invoked_at > 3 * EVERY_MS


def test_early_wakes_go_on_until_the_last_second_before_the_deadline_margin(env: Env) -> None:
    run_id = crash_a_worker(env)
    lapse = env.run(run_id)["lease_expires_at"] + env.cfg.clock_skew_allowance_ms
    # The lease becomes recoverable 2 s before the deadline margin: too late for a full sweep
    # (half a period), not for a wake that recovers leases only (LEASE_WAKE_BUDGET_MS).
    deadline = lapse + 2_000 + env.cfg.deadline_margin_ms
    assert LEASE_WAKE_BUDGET_MS < 2_000 < EVERY_MS // 2
    result = env.detector().sweep("inv", deadline, EVERY_MS, sleeper(env, []))
    assert result.leases_recovered == 1 and env.run(run_id)["recovered_at"] == lapse + 1


def test_a_lease_renewed_by_a_heartbeat_costs_one_idle_wake_and_is_left_alone(env: Env) -> None:
    run_id, worker, started = start_and_abandon(env)
    first_expiry = env.run(run_id)["lease_expires_at"]
    slept: list[int] = []
    sleep = sleeper(env, slept)

    def sleep_and_heartbeat(ms: int) -> None:
        if ms < EVERY_MS:  # woken early for this lease: the worker renews it just in time
            assert worker.heartbeat(started)
        sleep(ms)

    result = env.detector().sweep("inv", env.clock.now_ms() + INVOCATION_MS, EVERY_MS, sleep_and_heartbeat)
    run = env.run(run_id)
    assert result.leases_recovered == 0 and run["status"] == "running" and run["attempt"] == 1
    assert run["lease_expires_at"] > first_expiry
    metrics = [name for name, _, _ in env.telemetry.metrics]
    early_wakes = metrics.count("LeasesRecovered") - metrics.count("DetectorBacklog")
    assert early_wakes == 1  # one idle early wake, then none: the renewed lease is not yet due


def test_a_lease_lapsing_while_a_sweep_works_is_recovered_at_the_next_short_wake(env: Env) -> None:
    run_id = crash_a_worker(env)
    # The recovery's new dispatch lease longer than the invocation: the recovered run (never
    # started here) is not recovered a second time within it.
    env.cfg = env.cfg.model_copy(update={"dispatch_lease_seconds": 120})
    lapse = env.run(run_id)["lease_expires_at"] + env.cfg.clock_skew_allowance_ms
    env.clock.advance(lapse - 100 - env.clock.now_ms())  # the first sweep starts 100 ms too early
    detector = env.detector()
    run = detector.run

    def slow_run(
        invocation_id: str, deadline_ms: int | None = None, leases_only: bool = False, reconcile: bool = True
    ) -> DetectResult:
        result = run(invocation_id, deadline_ms, leases_only, reconcile)
        env.clock.advance(300)  # ... and takes 300 ms: the lease lapses while it works
        return result

    detector.run = slow_run  # type: ignore[method-assign]
    slept: list[int] = []
    result = detector.sweep("inv", env.clock.now_ms() + INVOCATION_MS, EVERY_MS, sleeper(env, slept))
    assert result.leases_recovered == 1
    # Not a whole period later: the lapse query starts where the last sweep stopped reading.
    assert slept[0] == MIN_WAKE_GAP_MS
    assert env.run(run_id)["recovered_at"] == lapse + 200 + MIN_WAKE_GAP_MS


def test_leases_lapsing_in_quick_succession_wake_the_detector_at_most_every_min_gap(env: Env) -> None:
    run_ids = []
    for index in range(5):
        run_ids.append(crash_a_worker(env, f"j{index}"))
        env.clock.advance(10)  # five leases lapsing 10 ms apart
    slept: list[int] = []
    result = env.detector().sweep("inv", env.clock.now_ms() + INVOCATION_MS, EVERY_MS, sleeper(env, slept))
    assert result.leases_recovered == 5
    assert all(env.run(run_id)["attempt"] == 2 for run_id in run_ids)
    assert min(slept) == MIN_WAKE_GAP_MS  # the later four waited for the gap, not 10 ms each


def test_sweep_zero_is_one_run_per_invocation(env: Env) -> None:
    crash_a_worker(env)
    result = env.detector().sweep("inv", env.clock.now_ms() + INVOCATION_MS, 0, lambda _ms: None)
    assert result.sweeps == 1 and result.leases_recovered == 0


def test_an_overloaded_sweep_leaves_the_rest_to_the_next_invocation(env: Env) -> None:
    env.cfg = env.cfg.model_copy(update={"detector_max_items": 1})
    for index in range(3):
        seed_active(env, job(f"late{index}", "rate(1 minute)", overlap="allow"), T0 - 3_600_000)
    slept: list[int] = []
    result = env.detector().sweep("inv", env.clock.now_ms() + INVOCATION_MS, EVERY_MS, slept.append)
    assert result.stopped_early and result.backlog > 0
    assert slept == [] and result.sweeps == 1
