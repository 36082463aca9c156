"""Issue 29 part 2: ``pause_on_failure``. A run that fails for good pauses its job through a
conditional write on the job item (never over a person's newer edit); the registrar applies the
pause as it applies a person's; ``jobsched resume`` clears it."""

from __future__ import annotations

from typing import Any

import pytest
from harness import T0, Env, build, job, register_raw
from jobsched.core.errors import ConditionFailed
from jobsched.core.job import RetryPolicy, definition_digest
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


# Issue 34 item 1: edits of the attributes the pause used not to compare (maps, lists, a map
# payload). Each lands between the pauser's read of the job item and its pause.
EDITS: dict[str, Any] = {
    "retry": {"max_attempts": 5, "backoff_base_seconds": 2, "backoff_max_seconds": 60},
    "misfire": {"policy": "skip", "grace_seconds": 30, "max_catchup": 10},
    "tags": {"team": "fixed-it"},
    "payload": {"url": "https://example.com/fixed", "nested": {"n": 2}},
}


@pytest.mark.parametrize("name", sorted(EDITS))
def test_an_edit_between_the_read_and_the_pause_stands(env: Env, name: str) -> None:
    payload = {"url": "https://example.com/broken", "nested": {"n": 1}}
    _register(
        env, pause_on_failure=True, retry=RetryPolicy(max_attempts=1), tags={"team": "a"}, payload=payload
    )
    # The payload stored as a map (the item format takes a map or JSON text): the same definition.
    digest = env.state("j")["def_hash"]
    env.store.update(Update(JOBS, {"job_id": "j"}, (), "person writes a map", set={"payload": payload}))
    assert definition_digest(env.job_item("j") or {}) == digest
    message = _first_message(env)
    store_update = env.store.update

    def person_edits_first(op: Update) -> Any:
        if op.label == "pause on failure":  # the pauser read the item already
            store_update(Update(JOBS, {"job_id": "j"}, (), "person edits", set={name: EDITS[name]}))
        return store_update(op)

    env.store.update = person_edits_first  # type: ignore[method-assign]
    assert env.worker().process(message, env.clock.now_ms() + DEADLINE) is Outcome.FAILED
    item = env.job_item("j")
    assert item is not None and item["enabled"] is True and "paused_reason" not in item
    assert item[name] == EDITS[name]
    assert [e.fields["reason"] for e in env.telemetry.named("job.pause_skipped")] == ["edited meanwhile"]
