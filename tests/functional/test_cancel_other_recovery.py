"""Issue 34 item 3: ``cancel_other`` with a dead holder. A run a newer one asked to stop
(``cancel_requested``) whose worker died is recovered as cancelled: it ends ``failed`` with the
cancellation as its error, is not retried and does not pause its job, and the run waiting behind
it starts. Its handler never runs again. Time is the manual clock's."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from harness import T0, Counter, Env, build, job, seed_active
from jobsched.core.errors import ConditionFailed
from jobsched.core.job import OverlapPolicy, RetryPolicy
from jobsched.core.run import RunMessage
from jobsched.core.transitions import recover_op
from jobsched.core.writes import WriteOp
from jobsched.services.messages import parse_run_message
from jobsched.services.worker import Outcome, Started

DEADLINE = 60_000


@pytest.fixture
def env() -> Iterator[Env]:
    with build("memory") as env:
        env.registry.add("t", Counter())
        yield env


def _two_runs(env: Env) -> tuple[RunMessage, RunMessage]:
    definition = job(
        "j",
        "rate(1 day)",
        overlap=OverlapPolicy.CANCEL_OTHER,
        pause_on_failure=True,
        retry=RetryPolicy(max_attempts=3),
    )
    seed_active(env, definition, T0 + 86_400_000)
    first, second = (env.ops().trigger("j", name) for name in ("a", "b"))
    by_id = {m.body["run_id"]: parse_run_message(m.body) for m in env.queue.sent}
    return by_id[first], by_id[second]


def _after_the_lease(env: Env) -> None:
    env.clock.set(env.clock.now_ms() + DEADLINE + env.cfg.clock_skew_allowance_ms + 5_000)


def _sent_for(env: Env, run_id: str) -> int:
    return sum(1 for m in env.queue.sent if m.body["run_id"] == run_id)


def _ends_as_cancelled(env: Env, a: RunMessage, b: RunMessage) -> None:
    holder = env.run(a.run_id)
    assert holder["status"] == "failed" and holder["attempt"] == 1  # not retried
    assert holder["last_error"].startswith(f"cancelled: {b.run_id} replaces it")
    (event,) = env.telemetry.named("run.cancelled")
    assert event.correlation_id == a.run_id and event.fields["replaced_by"] == b.run_id
    assert env.telemetry.metric_sum("Failures") == 0 and not env.telemetry.named("run.failed")
    item = env.job_item("j")
    assert item is not None and item["enabled"] is True  # no pause on failure
    assert env.run(b.run_id)["status"] == "pending"  # promoted, and sent
    assert _sent_for(env, a.run_id) == 1  # the holder's first message only: never sent again
    env.drain(env.worker())
    assert env.run(b.run_id)["status"] == "succeeded"
    handler = env.registry.get("t")
    assert isinstance(handler, Counter) and handler.calls == [b.run_id]


def test_a_dead_holder_asked_to_stop_ends_cancelled_and_the_waiting_run_starts(env: Env) -> None:
    a, b = _two_runs(env)
    started = env.worker("wa").begin(a, env.clock.now_ms() + DEADLINE)
    assert isinstance(started, Started)  # then its worker dies, handler and all
    assert env.worker("wb").begin(b, env.clock.now_ms() + DEADLINE) is Outcome.BUFFERED
    assert env.run(a.run_id)["cancel_requested"] == b.run_id
    _after_the_lease(env)
    result = env.detector().run("sweep")
    assert result.runs_cancelled == 1 and result.runs_failed == 0 and result.leases_recovered == 0
    _ends_as_cancelled(env, a, b)


def test_a_request_landing_after_the_detectors_read_fails_the_redispatch(env: Env) -> None:
    """The detector read the holder before the newer run's buffer write marked it: the
    redispatch is conditional on no request, so it fails, and the next sweep ends it cancelled."""
    a, b = _two_runs(env)
    assert isinstance(env.worker("wa").begin(a, env.clock.now_ms() + DEADLINE), Started)  # dies
    _after_the_lease(env)
    read = env.run(a.run_id)
    store_write = env.store.write
    marked: list[Outcome] = []

    def buffer_lands_first(ops: list[WriteOp]) -> Any:
        if not marked and any(op.label == "recover run" for op in ops):
            # b comes due now: its walk finds a running (its lease lapsed, not yet recovered).
            marked.append(env.worker("wb").begin(b, env.clock.now_ms() + DEADLINE))  # type: ignore[arg-type]
        return store_write(ops)

    env.store.write = buffer_lands_first  # type: ignore[method-assign]
    first = env.detector().run("sweep")
    assert marked == [Outcome.BUFFERED] and first.recovery_conflicts == 1
    assert env.run(a.run_id)["status"] == "running"  # not redispatched
    with pytest.raises(ConditionFailed):  # the condition itself, on the run as read
        store_write([recover_op(read, env.clock.now_ms(), env.cfg, 3)[0]])
    second = env.detector().run("sweep")
    assert second.runs_cancelled == 1
    _ends_as_cancelled(env, a, b)


def test_a_pending_holder_asked_to_stop_is_not_redispatched(env: Env) -> None:
    """A holder waiting for its retry (pending) whose message was lost, asked to stop by the run
    behind it: its lapsed dispatch lease ends it cancelled rather than sending it again."""
    a, b = _two_runs(env)
    worker = env.worker("wa")
    started = worker.begin(a, env.clock.now_ms() + DEADLINE)
    assert isinstance(started, Started)
    from jobsched.services.worker import HandlerResult

    assert worker.finish(started, HandlerResult(False, "boom")) is Outcome.RETRY_SCHEDULED
    # Its retry message is lost: no worker receives anything from here on.
    assert env.worker("wb").begin(b, env.clock.now_ms() + DEADLINE) is Outcome.BUFFERED
    env.clock.set(env.clock.now_ms() + 20 * 60_000)  # past the retry's delay and its dispatch lease
    assert env.detector().run("sweep").runs_cancelled == 1
    holder = env.run(a.run_id)
    assert holder["status"] == "failed" and holder["last_error"].startswith("cancelled: ")
    assert env.run(b.run_id)["status"] == "pending"
