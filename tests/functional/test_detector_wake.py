"""Issue 34 item 10: recovery at the defaults with ``DetectorIdleReturn`` true. An idle detector
invocation returns after its first sweep; a lease made after that by anything but a tick (the
registrar's first claim of a new job, ``jobsched trigger``) wakes the detector
(services/waking.py), so a worker that dies holding it is recovered a lease plus the skew
allowance after its last heartbeat, as any other. Time is the manual clock's; a detector
invocation is a blocking ``sweep`` whose naps move the clock, and the worker starts (and dies)
during the woken invocation's first nap."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from harness import T0, Env, build, job
from jobsched.core.config import SchedulerConfig
from jobsched.core.run import RunMessage
from jobsched.services.detector import DetectResult
from jobsched.services.messages import parse_run_message
from jobsched.services.operations import Operations
from jobsched.services.waking import WAKE_EVERY_MS, DetectorWake, awake_until
from jobsched.services.worker import Started

INVOCATION_MS = 60_000  # the detector's timeout and its schedule's period (rate(1 minute))
DEFAULTS = SchedulerConfig(shard_count=2)  # the template's defaults, idle return included


@pytest.fixture
def env() -> Iterator[Env]:
    with build("memory", cfg=DEFAULTS) as built:
        yield built


class Lambda:
    """The detector function as Lambda runs it: an asynchronous invocation's event, recorded."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def invoke(self, event: dict[str, Any]) -> None:
        self.events.append(event)


def _sweep(env: Env, event: dict[str, Any], after_each_nap: Callable[[], None]) -> DetectResult:
    """One detector invocation from now, as its handler runs it."""

    def sleep(ms: int) -> None:
        env.clock.advance(ms)
        after_each_nap()

    deadline = env.clock.now_ms() + INVOCATION_MS
    return env.detector().sweep(
        "invocation",
        deadline,
        env.cfg.detector_sweep_seconds * 1000,
        sleep,
        int(event.get("awake_until_ms", 0)),
    )


def _idle_invocation(env: Env) -> None:
    started = env.clock.now_ms()
    result = _sweep(env, {}, lambda: None)
    assert result.sweeps == 1 and env.clock.now_ms() == started  # returned at once: idle


def _dies_holding(env: Env, run_id: str) -> Callable[[], None]:
    """Once the run's message is delivered, a worker starts it and dies holding its lease."""
    started: list[Started] = []

    def start_and_die() -> None:
        if started:
            return
        body = next((b for b in env.receive_all() if b["run_id"] == run_id), None)
        if body is None:
            return  # not delivered yet (its start is later)
        message: RunMessage = parse_run_message(body)
        begun = env.worker("dies").begin(message, env.clock.now_ms() + 900_000)
        assert isinstance(begun, Started)  # and its worker dies: no heartbeat, no commit
        started.append(begun)

    return start_and_die


def _recovered_within_lease_plus_skew(env: Env, run_id: str, lambda_: Lambda) -> None:
    """The world after the lease was made: the woken invocation (if any) from now, else the next
    scheduled one, a minute after the idle one."""
    die = _dies_holding(env, run_id)
    if lambda_.events:
        (event,) = lambda_.events
        _sweep(env, event, die)
    else:  # nothing woke it: the worker dies, and the next scheduled invocation comes
        env.clock.advance(10_000)
        die()
        env.clock.set(T0 + INVOCATION_MS)
        _sweep(env, {}, lambda: None)
    run = env.run(run_id)
    assert "recovered_at" in run, run
    lapse = int(run["lease_expired_at"]) + env.cfg.clock_skew_allowance_ms
    assert run["recovered_at"] == lapse + 1  # a lease plus the skew allowance, at the defaults
    assert run["lease_expired_at"] == run["started_at"] + env.cfg.lease_seconds * 1000


def test_the_registrars_first_claim_of_a_new_job_wakes_the_idle_detector(env: Env) -> None:
    _idle_invocation(env)  # the scheduled invocation at T0: an empty stack, it returns
    lambda_ = Lambda()
    registrar = env.claiming_registrar(
        detector_wake=DetectorWake(lambda_.invoke, env.telemetry, env.clock, env.cfg)
    )
    env.clock.set(T0 + 5_000)
    # A new job registered after the idle invocation returned; its first occurrence comes before
    # the next tick, so the registrar claims it at once: a lease no tick foresaw.
    from jobsched.core.writes import JOBS, Put

    first = "at(2026-12-01T00:00:10)"  # T0 + 10 s
    env.store.write([Put(JOBS, job("new", first).to_item(), (), "person")])
    registrar.apply("new")
    (run_id,) = [r["run_id"] for r in env.runs_of("new")]
    assert [e["awake_until_ms"] for e in lambda_.events] == [awake_until(T0 + 5_000, env.cfg)]
    _recovered_within_lease_plus_skew(env, run_id, lambda_)


def test_a_manual_run_wakes_the_idle_detector(env: Env) -> None:
    from harness import seed_active

    seed_active(env, job("j", "rate(1 day)"), T0 + 86_400_000)  # nothing due for a day
    _idle_invocation(env)
    lambda_ = Lambda()
    ops = Operations(env.store, env.queue, env.telemetry, env.clock, env.cfg, wake_detector=lambda_.invoke)
    env.clock.set(T0 + 5_000)
    run_id = ops.trigger("j", "now")  # `jobsched trigger j`
    assert len(lambda_.events) == 1
    _recovered_within_lease_plus_skew(env, run_id, lambda_)


def test_a_woken_detector_stays_awake_even_if_its_first_read_missed_the_lease(env: Env) -> None:
    """The lease index is eventually consistent: the woken invocation's first sweep may not see
    the lease that woke it. It sweeps until ``awake_until_ms`` anyway, so it sees it later."""
    until = awake_until(env.clock.now_ms(), env.cfg)
    naps: list[int] = []

    def sleep(ms: int) -> None:
        naps.append(ms)
        env.clock.advance(ms)

    result = env.detector().sweep("woken", T0 + INVOCATION_MS, 10_000, sleep, until)
    # Never idle: a full sweep every 10 s while a full one fits before the deadline's margin.
    assert result.sweeps == 6 and naps == [10_000] * 5
    assert until - T0 == WAKE_EVERY_MS + 30_000 + 2_000 + 1_000  # within the 60 s invocation
    assert until < T0 + INVOCATION_MS - env.cfg.deadline_margin_ms


def test_one_wake_per_process_per_interval(env: Env) -> None:
    """Thousands of registrations or manual runs in a burst send one invocation per 20 s."""
    sent: list[dict[str, Any]] = []
    wake = DetectorWake(sent.append, env.telemetry, env.clock, env.cfg)
    for step in range(50):
        env.clock.set(T0 + step * 1_000)
        wake.lease_made(f"r{step}")
    assert len(sent) == 3  # at 0, 20 and 40 s
    failing = DetectorWake(_refuse, env.telemetry, env.clock, env.cfg)
    failing.lease_made("r")  # best effort: logged, never raised
    assert env.telemetry.named("detector.wake_failed")


def _refuse(_event: dict[str, Any]) -> None:
    raise RuntimeError("throttled")


def test_the_cli_wakes_the_stacks_detector_alias(monkeypatch: pytest.MonkeyPatch) -> None:
    """``jobsched trigger`` against a stack: the stack's ``MissDetectorFunctionName`` output
    names the function, and its ``live`` alias is invoked asynchronously with the wake's event."""
    import boto3
    from jobsched.adapters.lambda_invoker import LambdaDetectorWaker
    from jobsched_tools.api import operations_for
    from jobsched_tools.deployment import Target
    from jobsched_tools.emulator.provision import provision
    from moto import mock_aws

    sent: list[tuple[str, str | None, dict[str, Any]]] = []

    def record(waker: LambdaDetectorWaker, event: dict[str, Any]) -> None:
        sent.append((waker.function, waker.qualifier, event))

    monkeypatch.setattr(LambdaDetectorWaker, "__call__", record)
    with mock_aws():
        resources = provision(
            boto3.client("dynamodb", region_name="us-east-1"),
            boto3.client("sqs", region_name="us-east-1"),
            "wake",
            parameters={"ClaimShape": "legacy"},
        )
        target = Target(
            resources.jobs_table,
            resources.state_table,
            resources.runs_table,
            resources.work_queue_url,
            shard_count=2,
            region="us-east-1",
            credentials=("testing", "testing"),
            detector_function="stack-MissDetectorFunction-x",
        )
        ops = operations_for(target)
        ops.register(job("j", "rate(1 day)", target="log"))
        run_id = ops.trigger("j", "now")
    [(function, qualifier, event)] = sent
    assert (function, qualifier, event["woken_by"]) == ("stack-MissDetectorFunction-x", "live", run_id)
