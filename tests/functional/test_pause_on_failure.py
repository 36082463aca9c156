"""Issue 29 part 2: ``pause_on_failure``. A run that fails for good pauses its job through a
conditional write on the job item (never over a person's newer edit); the registrar applies the
pause as it applies a person's; ``jobsched resume`` clears it."""

from __future__ import annotations

from typing import Any

import pytest
from harness import T0, Env, build, job, register_raw
from jobsched.core.errors import ConditionFailed
from jobsched.core.job import RetryPolicy
from jobsched.core.transitions import pause_on_failure_op
from jobsched.core.writes import JOBS, Update
from jobsched.services.messages import parse_run_message
from jobsched.services.worker import Outcome

DEADLINE = 900_000


def _fail(_ctx: Any) -> None:
    raise RuntimeError("boom")


@pytest.fixture
def env() -> Any:
    with build("memory") as env:
        env.registry.add("t", _fail)
        yield env


def _first_message(env: Env) -> Any:
    env.clock.set(T0 + 50_000)
    env.trigger().tick("tick")
    body = env.queue.sent[0].body  # the first occurrence (its chain is empty before it)
    env.clock.set(int(body["scheduled_at"]))
    return parse_run_message(body)


def _register(env: Env, **fields: Any) -> None:
    env.clock.set(T0)
    register_raw(env, job("j", "rate(1 minute)", **fields).to_item())


def test_a_final_failure_pauses_the_job_with_a_reason(env: Env) -> None:
    _register(env, pause_on_failure=True, retry=RetryPolicy(max_attempts=1))
    message = _first_message(env)
    assert env.worker().process(message, env.clock.now_ms() + DEADLINE) is Outcome.FAILED
    item = env.job_item("j")
    assert item is not None and item["enabled"] is False
    assert item["paused_reason"].startswith(f"run {message.run_id} failed: RuntimeError: boom")
    (event,) = env.telemetry.named("job.paused_on_failure")
    assert event.correlation_id == "j"
    env.registrar().apply("j")  # the stream delivers the pause to the registrar
    assert env.state("j")["status"] == "paused"
    # Resuming clears the reason; the job is active again from its next occurrence.
    env.ops().set_enabled("j", True)
    item = env.job_item("j")
    assert item is not None and "paused_reason" not in item and item["enabled"] is True
    assert env.state("j")["status"] == "active"


def test_a_failure_with_attempts_left_or_without_the_flag_does_not_pause(env: Env) -> None:
    _register(env, pause_on_failure=True, retry=RetryPolicy(max_attempts=2))
    message = _first_message(env)
    assert env.worker().process(message, env.clock.now_ms() + DEADLINE) is Outcome.RETRY_SCHEDULED
    assert env.job_item("j")["enabled"] is True  # type: ignore[index]
    with build("memory") as other:
        other.registry.add("t", _fail)
        _register(other, retry=RetryPolicy(max_attempts=1))
        assert other.worker().process(_first_message(other), T0 + DEADLINE * 2) is Outcome.FAILED
        assert other.job_item("j")["enabled"] is True  # type: ignore[index]


def test_a_persons_newer_edit_is_never_overwritten(env: Env) -> None:
    _register(env, pause_on_failure=True, retry=RetryPolicy(max_attempts=1))
    message = _first_message(env)
    # A person edits the job after the run was claimed: the failure of a run of the old
    # definition does not pause the new one.
    env.store.update(Update(JOBS, {"job_id": "j"}, (), "person edits", set={"description": "fixed"}))
    assert env.worker().process(message, env.clock.now_ms() + DEADLINE) is Outcome.FAILED
    assert env.job_item("j")["enabled"] is True  # type: ignore[index]
    assert [e.fields["reason"] for e in env.telemetry.named("job.pause_skipped")] == [
        "the job was edited since the run"
    ]


def test_the_pause_is_conditional_on_the_item_as_read(env: Env) -> None:
    _register(env, pause_on_failure=True)
    read = env.job_item("j")
    assert read is not None
    env.store.update(Update(JOBS, {"job_id": "j"}, (), "person edits", set={"schedule": "rate(2 minutes)"}))
    with pytest.raises(ConditionFailed):
        env.store.update(pause_on_failure_op(read, "run failed", T0))
    env.store.delete(JOBS, {"job_id": "j"})
    with pytest.raises(ConditionFailed):  # a deleted job is not re-created by its pause
        env.store.update(pause_on_failure_op(read, "run failed", T0))


def test_the_detector_exhausting_a_run_pauses_the_job(env: Env) -> None:
    _register(env, pause_on_failure=True, retry=RetryPolicy(max_attempts=1))
    message = _first_message(env)
    worker = env.worker()
    started = worker.begin(message, env.clock.now_ms() + 60_000)  # then the worker dies
    assert not isinstance(started, Outcome)
    env.clock.set(env.clock.now_ms() + 5 * 60_000)
    env.detector().run("sweep")
    assert env.run(message.run_id)["status"] == "failed"
    item = env.job_item("j")
    assert item is not None and item["enabled"] is False and "lease expired" in item["paused_reason"]
