"""The worker: fenced start, heartbeat, commit; the crash case end to end; duplicates and races;
retries; staged effects exactly once; overlap policies; leases bounded by the deadline."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from harness import MINUTE, T0, Env, build, job, seed_active
from jobsched.core.clock import ManualWaiter
from jobsched.core.job import OverlapPolicy, RetryPolicy
from jobsched.core.run import RunMessage, run_id_for
from jobsched.core.writes import not_exists
from jobsched.services.messages import parse_run_message
from jobsched.services.worker import HandlerResult, Outcome, Started
from jobsched.targets.registry import RunContext
from jobsched_tools.emulator.local_moto import LocalMoto

DEADLINE = 900_000


class Ledger:
    """A handler with a real effect: one row per occurrence in the effects table, staged so that it
    commits with the run; ``fail_attempts`` makes the first attempts raise."""

    def __init__(self, fail_attempts: int = 0) -> None:
        self.calls: list[tuple[str, int]] = []
        self.fail_attempts = fail_attempts
        self._lock = threading.Lock()

    def __call__(self, ctx: RunContext) -> dict[str, Any]:
        with self._lock:
            self.calls.append((ctx.run_id, ctx.attempt))
        if ctx.attempt <= self.fail_attempts:
            raise RuntimeError(f"flaky attempt {ctx.attempt}")
        ctx.stage_put(
            "effects",
            {"pk": ctx.idempotency_key, "token": ctx.fencing_token},
            condition=(not_exists("pk", "one row per occurrence"),),
        )
        return {"ok": True}


def one_run(env: Env, definition: Any, ledger: Ledger | None = None) -> RunMessage:
    """Seed a job due at T0, tick, and return the message the trigger sent for T0."""
    if ledger is not None:
        env.registry.add(definition.target, ledger)
    seed_active(env, definition, T0)
    assert env.trigger().tick("t").claimed >= 1
    run_id = run_id_for(definition.job_id, T0)
    bodies = [b for b in env.receive_all() if b["run_id"] == run_id]
    assert len(bodies) == 1
    return parse_run_message(bodies[0])


def hourly(job_id: str = "j1", **fields: Any) -> Any:
    fields.setdefault("retry", RetryPolicy(max_attempts=3, backoff_seconds=5, jitter=False))
    return job(job_id, "rate(1 hour)", target="ledger", **fields)


def test_the_crash_case_end_to_end(env: Env) -> None:
    ledger = Ledger()
    message = one_run(env, hourly(), ledger)
    dead = env.worker("dead")
    began_at = env.clock.now_ms()
    started = dead.begin(message, began_at + DEADLINE)
    assert isinstance(started, Started) and started.token == 2
    run = env.run(message.run_id)
    assert (run["status"], run["owner"], run["version"]) == ("running", started.owner, 2)
    assert run["lease_expires_at"] == began_at + env.cfg.lease_seconds * 1000
    # The worker dies: no heartbeat, no commit. Its lease lapses within lease_seconds (+ skew).
    env.clock.set(run["lease_expires_at"] + env.cfg.clock_skew_allowance_ms - 1)
    assert env.detector().run("too-early").leases_recovered == 0
    env.clock.advance(2)
    result = env.detector().run("d")
    assert result.leases_recovered == 1
    assert result.recovery_latency_ms == [env.cfg.clock_skew_allowance_ms + 1]
    recovered = env.run(message.run_id)
    assert (recovered["status"], recovered["attempt"], recovered["version"]) == ("pending", 2, 3)
    assert "owner" not in recovered and "stopped heartbeating" in recovered["last_error"]
    assert env.detector().run("again").leases_recovered == 0  # recovered once
    # The redelivered message runs and commits once.
    bodies = env.receive_all()
    assert [(b["run_id"], b["version"], b["attempt"]) for b in bodies] == [(message.run_id, 3, 2)]
    assert env.worker("alive").process(parse_run_message(bodies[0]), env.clock.now_ms() + DEADLINE) is (
        Outcome.SUCCEEDED
    )
    done = env.run(message.run_id)
    assert (done["status"], done["version"]) == ("succeeded", 5)
    # The dead worker comes back, runs its handler and tries to commit: fenced out, no change.
    zombie_result = dead.execute(started)
    assert dead.finish(started, zombie_result) is Outcome.FENCED_OUT
    assert not dead.heartbeat(started)
    assert env.run(message.run_id) == done
    assert len(ledger.calls) == 2  # the handler ran twice (at least once) ...
    assert [e["pk"] for e in env.effects()] == [message.run_id]  # ... its effect landed once
    assert env.effects()[0]["token"] == 4
    assert "active_run_id" not in env.job("j1")


def test_lease_never_reaches_past_the_deadline(env: Env) -> None:
    message = one_run(env, hourly(), Ledger())
    now = env.clock.now_ms()
    started = env.worker().begin(message, now + 5_000)
    assert isinstance(started, Started)
    assert env.run(message.run_id)["lease_expires_at"] == now + 5_000 + 2_000
    env.clock.advance(3_000)
    assert env.worker().heartbeat(started)  # a renewal never extends past the deadline either
    assert env.run(message.run_id)["lease_expires_at"] <= now + 5_000 + 2_000


def test_duplicate_delivery_and_redelivery_after_success(env: Env) -> None:
    ledger = Ledger()
    message = one_run(env, hourly(), ledger)
    worker = env.worker()
    assert worker.process(message, env.clock.now_ms() + DEADLINE) is Outcome.SUCCEEDED
    assert worker.process(message, env.clock.now_ms() + DEADLINE) is Outcome.DUPLICATE
    assert env.worker("other").process(message, env.clock.now_ms() + DEADLINE) is Outcome.DUPLICATE
    assert len(ledger.calls) == 1 and len(env.effects()) == 1
    assert env.telemetry.named("run.duplicate_dropped")[0].fields["current_status"] == "succeeded"


@pytest.mark.parametrize("kind", ["memory", "server"])
def test_concurrent_delivery_runs_the_handler_once(kind: str, moto_server: LocalMoto) -> None:
    with build(kind, moto=moto_server) as env:
        ledger = Ledger()
        message = one_run(env, hourly(), ledger)
        barrier = threading.Barrier(2)
        outcomes: list[Outcome] = []

        def deliver(name: str) -> None:
            worker = env.worker(name)
            barrier.wait()
            outcomes.append(worker.process(message, env.clock.now_ms() + DEADLINE))

        threads = [threading.Thread(target=deliver, args=(f"w{i}",)) for i in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(o.value for o in outcomes) == ["duplicate_dropped", "succeeded"]
        assert len(ledger.calls) == 1 and len(env.effects()) == 1
        assert env.run(message.run_id)["status"] == "succeeded"


def test_heartbeat_losing_the_race_with_recovery_is_fenced_out(env: Env) -> None:
    ledger = Ledger()
    message = one_run(env, hourly(), ledger)
    worker = env.worker()
    started = worker.begin(message, env.clock.now_ms() + DEADLINE)
    assert isinstance(started, Started)
    assert worker.heartbeat(started) is True  # alive and renewing
    env.clock.advance(env.cfg.lease_seconds * 1000 + env.cfg.clock_skew_allowance_ms + 1)  # a long GC pause
    assert env.detector().run("d").leases_recovered == 1
    assert worker.heartbeat(started) is False
    assert started.context.cancelled.is_set()
    before = env.run(message.run_id)
    assert worker.finish(started, HandlerResult(True)) is Outcome.FENCED_OUT
    assert env.run(message.run_id) == before and env.effects() == []


def test_heartbeat_keeps_the_detector_away(env: Env) -> None:
    message = one_run(env, hourly(), Ledger())
    worker = env.worker()
    started = worker.begin(message, env.clock.now_ms() + DEADLINE)
    assert isinstance(started, Started)
    for _ in range(6):  # three lease lengths, renewed every heartbeat
        env.clock.advance(env.cfg.heartbeat_seconds * 1000 * 5)
        assert worker.heartbeat(started)
        assert env.detector().run("d").leases_recovered == 0
    assert worker.finish(started, worker.execute(started)) is Outcome.SUCCEEDED


def drive(env: Env, rounds: int = 6) -> list[Outcome]:
    outcomes: list[Outcome] = []
    for _ in range(rounds):
        outcomes += env.drain(env.worker())
        env.clock.advance(10 * MINUTE)
    return outcomes


def test_retry_until_success(env: Env) -> None:
    ledger = Ledger(fail_attempts=2)
    message = one_run(env, hourly(), ledger)
    outcomes = [env.worker().process(message, env.clock.now_ms() + DEADLINE), *drive(env)]
    assert [o.value for o in outcomes] == ["retry_scheduled", "retry_scheduled", "succeeded"]
    run = env.run(message.run_id)
    assert (run["status"], run["attempt"]) == ("succeeded", 3)
    assert [a for _, a in ledger.calls] == [1, 2, 3]
    assert len(env.effects()) == 1  # failed attempts staged nothing
    delays = [m.delay_seconds for m in env.queue.sent if m.body["attempt"] > 1]
    assert delays == [5, 10]  # backoff 5 s, doubled, no jitter


def test_retry_until_terminal_failure(env: Env) -> None:
    ledger = Ledger(fail_attempts=99)
    definition = hourly(retry=RetryPolicy(max_attempts=2, backoff_seconds=1, jitter=False))
    message = one_run(env, definition, ledger)
    outcomes = [env.worker().process(message, env.clock.now_ms() + DEADLINE), *drive(env)]
    assert [o.value for o in outcomes] == ["retry_scheduled", "failed"]
    run = env.run(message.run_id)
    assert (run["status"], run["attempt"]) == ("failed", 2)
    assert "flaky attempt 2" in run["last_error"]
    assert "lease_expires_at" not in run and run["expires_at"] > 0
    history = env.ops().runs("j1")
    assert [r["run_id"] for r in history] == [message.run_id]
    assert env.effects() == [] and "active_run_id" not in env.job("j1")


def test_job_timeout_fails_the_attempt_and_retries(env: Env) -> None:
    def slow(_ctx: RunContext) -> None:
        env.clock.advance(11_000)  # longer than the job's 10 s timeout

    env.registry.add("slow", slow)
    definition = job(
        "slow",
        "rate(1 hour)",
        target="slow",
        timeout_seconds=10,
        retry=RetryPolicy(max_attempts=2, jitter=False),
    )
    message = one_run(env, definition)
    assert env.worker().process(message, env.clock.now_ms() + DEADLINE) is Outcome.RETRY_SCHEDULED
    run = env.run(message.run_id)
    assert run["attempt"] == 2 and "timed out after 10 s" in run["last_error"]
    assert [o.value for o in drive(env, 2)] == ["failed"]


def test_missing_handler_is_a_readable_failure(env: Env) -> None:
    definition = job("nohandler", "rate(1 hour)", target="nobody", retry=RetryPolicy(max_attempts=1))
    message = one_run(env, definition)
    assert env.worker().process(message, env.clock.now_ms() + DEADLINE) is Outcome.FAILED
    assert "no handler named 'nobody'" in env.run(message.run_id)["last_error"]


def test_staged_effect_condition_failing_makes_the_attempt_fail(env: Env) -> None:
    ledger = Ledger()
    message = one_run(env, hourly(retry=RetryPolicy(max_attempts=1)), ledger)
    from jobsched.core.writes import Put

    env.store.write([Put("effects", {"pk": message.run_id, "token": 0}, condition=(), label="pre")])
    assert env.worker().process(message, env.clock.now_ms() + DEADLINE) is Outcome.FAILED
    run = env.run(message.run_id)
    assert "staged write" in run["last_error"]
    assert env.effects() == [{"pk": message.run_id, "token": 0}]


# --- overlap policies --------------------------------------------------------------------------


def occurrences(env: Env, definition: Any, count: int) -> list[RunMessage]:
    """Seed a 30-second job due at T0 and claim ``count`` occurrences (the messages sent)."""
    seed_active(env, definition, T0)
    env.trigger().tick("t")
    env.receive_all()
    sent = {m.body["run_id"]: m.body for m in env.queue.sent}
    runs = sorted(env.ops().runs(definition.job_id), key=lambda r: r["scheduled_at"])
    return [RunMessage.model_validate(sent[r["run_id"]]) for r in runs[:count]]


def every_30s(job_id: str, overlap: OverlapPolicy) -> Any:
    return job(job_id, "rate(30 seconds)", target="ledger", overlap=overlap, timeout_seconds=300)


def test_overlap_skip(env: Env) -> None:
    env.registry.add("ledger", Ledger())
    first, second, third = occurrences(env, every_30s("s", OverlapPolicy.SKIP), 3)
    # The claim linked each run to the one before it: the chain the start walks.
    assert (second.after_run_id, third.after_run_id) == (first.run_id, second.run_id)
    worker = env.worker()
    started = worker.begin(first, env.clock.now_ms() + DEADLINE)
    assert isinstance(started, Started)
    env.clock.advance(30_000)
    assert worker.process(second, env.clock.now_ms() + DEADLINE) is Outcome.SKIPPED
    skipped = env.run(second.run_id)
    assert skipped["status"] == "skipped" and first.run_id in skipped["reason"]
    assert skipped["blocked_by"] == first.run_id
    assert "lease_expires_at" not in skipped
    assert worker.finish(started, worker.execute(started)) is Outcome.SUCCEEDED
    # The walk passes the skipped run to the one it was skipped for, which has finished.
    env.clock.advance(30_000)
    assert worker.process(third, env.clock.now_ms() + DEADLINE) is Outcome.SUCCEEDED


def test_overlap_skip_waits_for_a_predecessor_not_started_yet(env: Env) -> None:
    """Delivered out of order: the later run must not run while the earlier one could still
    start (the earlier one would not know about it), so the later one is skipped."""
    env.registry.add("ledger", Ledger())
    first, second = occurrences(env, every_30s("o", OverlapPolicy.SKIP), 2)
    worker = env.worker()
    env.clock.advance(30_000)
    assert worker.process(second, env.clock.now_ms() + DEADLINE) is Outcome.SKIPPED
    assert worker.process(first, env.clock.now_ms() + DEADLINE) is Outcome.SUCCEEDED


def test_overlap_allow(env: Env) -> None:
    env.registry.add("ledger", Ledger())
    first, second = occurrences(env, every_30s("a", OverlapPolicy.ALLOW), 2)
    worker = env.worker()
    one = worker.begin(first, env.clock.now_ms() + DEADLINE)
    env.clock.advance(30_000)
    two = worker.begin(second, env.clock.now_ms() + DEADLINE)
    assert isinstance(one, Started) and isinstance(two, Started)
    assert worker.finish(two, worker.execute(two)) is Outcome.SUCCEEDED
    assert worker.finish(one, worker.execute(one)) is Outcome.SUCCEEDED
    assert len(env.effects()) == 2


def test_overlap_buffer_one_promotes_when_the_holder_ends(env: Env) -> None:
    ledger = Ledger()
    env.registry.add("ledger", ledger)
    first, second, third = occurrences(env, every_30s("b", OverlapPolicy.BUFFER_ONE), 3)
    worker = env.worker()
    started = worker.begin(first, env.clock.now_ms() + DEADLINE)
    assert isinstance(started, Started)
    env.clock.set(T0 + 60_000)
    assert worker.process(second, env.clock.now_ms() + DEADLINE) is Outcome.BUFFERED
    assert worker.process(third, env.clock.now_ms() + DEADLINE) is Outcome.SKIPPED  # one waits at most
    buffered = env.run(second.run_id)
    # It waits with a lease of its own, so the miss detector would see it if it waited in vain.
    assert buffered["status"] == "buffered" and "lease_expires_at" in buffered
    assert env.run(first.run_id)["buffered_next"] == second.run_id  # named on its holder
    assert worker.process(second, env.clock.now_ms() + DEADLINE) is Outcome.DUPLICATE  # redelivered
    env.clock.advance(45_000)
    assert worker.finish(started, worker.execute(started)) is Outcome.SUCCEEDED
    promoted = env.run(second.run_id)
    assert promoted["status"] == "pending" and promoted["version"] == second.version + 2
    assert promoted["blocked_by"] == first.run_id
    bodies = [
        b for b in env.receive_all() if b["run_id"] == second.run_id and b["version"] == promoted["version"]
    ]
    assert len(bodies) == 1
    assert worker.process(parse_run_message(bodies[0]), env.clock.now_ms() + DEADLINE) is Outcome.SUCCEEDED
    assert sorted(e["pk"] for e in env.effects()) == sorted([first.run_id, second.run_id])
    assert [r for r, _ in ledger.calls] == [first.run_id, second.run_id]


def test_buffered_run_is_promoted_when_the_holder_is_recovered_and_fails(env: Env) -> None:
    env.registry.add("ledger", Ledger())
    definition = job(
        "bf",
        "rate(30 seconds)",
        target="ledger",
        overlap=OverlapPolicy.BUFFER_ONE,
        retry=RetryPolicy(max_attempts=1),
    )
    first, second = occurrences(env, definition, 2)
    worker = env.worker()
    started = worker.begin(first, env.clock.now_ms() + DEADLINE)
    assert isinstance(started, Started)
    env.clock.set(T0 + 30_000)
    assert worker.process(second, env.clock.now_ms() + DEADLINE) is Outcome.BUFFERED
    env.clock.advance(env.cfg.lease_seconds * 1000 + env.cfg.clock_skew_allowance_ms + 1)
    result = env.detector().run("d")
    assert result.runs_failed >= 1
    assert env.run(first.run_id)["status"] == "failed"
    assert env.run(second.run_id)["status"] == "pending"


# --- heartbeats on the manual clock (the waiter is injected, as the clock is) -------------------


def blocking_handler(env: Env) -> threading.Event:
    """A handler that runs until the test releases it."""
    release = threading.Event()

    def handler(_ctx: Any) -> dict[str, Any]:
        release.wait(timeout=30)
        return {"ok": True}

    env.registry.add("ledger", handler)  # every_30s's target
    return release


def test_heartbeats_follow_the_manual_clock(env: Env) -> None:
    release = blocking_handler(env)
    message = occurrences(env, every_30s("h", OverlapPolicy.ALLOW), 1)[0]
    waiter = ManualWaiter(env.clock, on_wait=lambda: waiter.waits >= 3 and release.set())
    worker = env.worker(waiter=waiter)
    started = worker.begin(message, env.clock.now_ms() + DEADLINE)
    assert isinstance(started, Started)
    result = worker.execute(started)
    assert result.ok and waiter.waits >= 3
    beats = [e for e in env.telemetry.named("run.heartbeat") if e.correlation_id == message.run_id]
    period = env.cfg.heartbeat_seconds * 1000
    assert len(beats) >= 2  # one per wait that the handler outlasted, at manual instants
    run = env.run(message.run_id)
    assert run["heartbeat_at"] >= started.started_at + 2 * period
    assert run["lease_expires_at"] == run["heartbeat_at"] + env.cfg.lease_seconds * 1000
    assert worker.finish(started, result) is Outcome.SUCCEEDED


def test_a_handler_past_its_timeout_is_cancelled_and_its_timeout_recorded_once_it_stops(env: Env) -> None:
    """Issue 26 case 11: the timeout is recorded (and the retry scheduled) only once the handler
    has stopped: while it runs on after its cancellation the worker keeps its lease, so no retry
    and no later occurrence can start beside it."""
    stopped = threading.Event()

    def cooperative(ctx: RunContext) -> None:
        ctx.cancelled.wait(timeout=30)  # stops when asked, two heartbeat periods after its timeout
        stopped.set()

    env.registry.add("ledger", cooperative)
    slow = job("slow", "rate(30 seconds)", target="ledger", overlap=OverlapPolicy.ALLOW, timeout_seconds=10)
    message = occurrences(env, slow, 1)[0]
    waiter = ManualWaiter(env.clock)
    worker = env.worker(waiter=waiter)
    started = worker.begin(message, env.clock.now_ms() + DEADLINE)
    assert isinstance(started, Started)
    result = worker.execute(started)  # no real minute passes: the waiter moves the clock
    timeout = started.definition.timeout_seconds
    assert not result.ok and result.error == f"timed out after {timeout} s" and not result.abandoned
    assert started.context.cancelled.is_set() and stopped.is_set()
    assert env.clock.now_ms() - started.started_at >= timeout * 1000
    assert env.run(message.run_id)["status"] == "running"  # nothing recorded while it ran


def test_a_handler_that_ignores_its_cancellation_is_abandoned_with_its_sandbox(env: Env) -> None:
    """A handler that ignores ``ctx.cancelled`` runs on until the invocation's last moment: the
    worker records nothing (its lease, at most to the Lambda deadline, keeps the job's turn) and
    flags the sandbox to end (the worker function then exits its process). The lease lapses
    after the deadline, when the process and the thread are gone, and the detector recovers the
    run as it would a crashed worker's."""
    from jobsched.services import worker as worker_module

    release = blocking_handler(env)
    slow = job("slow", "rate(30 seconds)", target="ledger", overlap=OverlapPolicy.ALLOW, timeout_seconds=10)
    message = occurrences(env, slow, 1)[0]
    worker = env.worker(waiter=ManualWaiter(env.clock))
    deadline = env.clock.now_ms() + 60_000
    started = worker.begin(message, deadline)
    assert isinstance(started, Started)
    try:
        result = worker.execute(started)
        assert result.abandoned and worker_module.SANDBOX_MUST_END.is_set()
        assert worker.finish(started, result) is Outcome.ABANDONED
        run = env.run(message.run_id)
        assert run["status"] == "running" and run["lease_expires_at"] <= deadline + 2_000
        env.clock.set(run["lease_expires_at"] + env.cfg.clock_skew_allowance_ms + 1)
        assert env.detector().run("d").leases_recovered >= 1
        recovered = env.run(message.run_id)
        assert recovered["status"] == "pending" and recovered["attempt"] == 2  # the next attempt
    finally:
        release.set()
        worker_module.SANDBOX_MUST_END.clear()


class _AllowNothing:
    allowed_queue_arns: list[str] = []
    allowed_event_bus_arns: list[str] = []
    allowed_function_arns: list[str] = []
    allowed_state_machine_arns: list[str] = []
    allowed_task_definition_arns: list[str] = []
    allowed_task_role_arns: list[str] = []


def test_a_destination_the_stack_does_not_allow_fails_the_run_at_once(env: Env) -> None:
    """``NotAllowed`` is permanent (issue 36, item 2): no attempt can pass the allow-list, so the
    run fails on its first attempt, with the parameter and the value to add, and no retry."""
    from jobsched.targets.builtin import register_builtins

    register_builtins(env.registry, _AllowNothing(), clients=lambda _service: None)
    url = "https://sqs.eu-central-1.amazonaws.com/123456789012/reports"
    definition = job(
        "to-queue",
        "rate(1 hour)",
        target="sqs_send",
        payload={"queue_url": url, "message": {}},
        retry=RetryPolicy(max_attempts=5),
    )
    message = one_run(env, definition)
    assert env.worker().process(message, env.clock.now_ms() + DEADLINE) is Outcome.FAILED
    run = env.run(message.run_id)
    assert run["status"] == "failed" and run["attempt"] == 1
    assert run["last_error"].startswith(
        "NotAllowed: queue arn:aws:sqs:eu-central-1:123456789012:reports is not allowed: add it to "
        "the stack's AllowedTargetQueueArns parameter"
    )
