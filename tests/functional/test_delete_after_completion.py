"""Issue 29 item 3: ``action_after_completion: delete``. A complete job (no more runs: an ``at()``
that ran, an ``end`` passed, ``max_runs`` reached; and every run it made ended) loses its job
item on the miss detector's reconcile pass (services/completion.py), through one transaction:
the item conditional on its definition as read, the state checked as read. Level-triggered: the
pass alone is enough, and passing again changes nothing. Time is the manual clock's."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from harness import KINDS, MINUTE, T0, Counter, Env, build, job, register_raw
from jobsched.core.clock import iso_z
from jobsched.core.errors import TransientStoreError
from jobsched.core.job import RetryPolicy
from jobsched.core.run import RunStatus, run_key
from jobsched.core.writes import JOBS, RUNS, Update, WriteOp
from jobsched.services.detector import DetectResult
from jobsched.services.messages import parse_run_message
from jobsched.services.worker import Outcome, Started

AT = T0 + 5 * MINUTE  # the one-time job's instant: past the registrar's lookahead at T0


def at(ms: int) -> str:
    return f"at({datetime.fromtimestamp(ms / 1000, UTC).strftime('%Y-%m-%dT%H:%M:%S')})"


@pytest.fixture(params=KINDS)
def env(request: pytest.FixtureRequest) -> Iterator[Env]:
    with build(request.param) as env:
        env.registry.add("t", Counter())
        yield env


@pytest.fixture
def mem() -> Iterator[Env]:
    with build("memory") as env:
        env.registry.add("t", Counter())
        yield env


def calls(env: Env) -> list[str]:
    handler = env.registry.get("t")
    assert isinstance(handler, Counter)
    return handler.calls


def reconcile(env: Env) -> DetectResult:
    """One miss detector sweep with its reconcile pass (a handful of jobs: one whole pass)."""
    return env.detector().run("pass")


def run_due(env: Env, until: int) -> None:
    """Tick every minute up to ``until``, and let the worker run what came due."""
    now = env.clock.now_ms()
    while now <= until:
        env.clock.set(now)
        env.trigger().tick(f"tick {now}")
        env.drain(env.worker())
        now += MINUTE


def test_a_one_time_job_runs_once_then_its_item_is_deleted(env: Env) -> None:
    env.ops().register(job("once", at(AT), action_after_completion="delete"))
    env.clock.set(AT - 60_000)
    env.trigger().tick("claims it")
    assert env.state("once")["status"] == "finished"  # no more runs: claimed, the state ended
    assert reconcile(env).jobs_deleted_after_completion == 0  # its run has not ended
    assert env.job_item("once") is not None
    env.clock.set(AT)
    assert env.drain(env.worker()) == [Outcome.SUCCEEDED]
    result = reconcile(env)
    assert result.jobs_deleted_after_completion == 1 and result.job_errors == 0
    assert env.job_item("once") is None
    assert env.state("once")["status"] == "deleted"  # the registrar, applied at once
    runs = env.runs_of("once")
    assert [(r["run_id"], r["status"]) for r in runs] == [(f"once@{iso_z(AT)}", "succeeded")]  # history
    assert calls(env) == [f"once@{iso_z(AT)}"]  # exactly once
    [event] = env.telemetry.named("job.deleted_after_completion")
    assert event.correlation_id == "once" and event.fields["runs"] == 1
    assert event.fields["statuses"] == {"succeeded": 1}
    # Level-triggered and idempotent: more passes (and ticks) change nothing.
    for minute in range(1, 4):
        env.clock.set(AT + minute * MINUTE)
        env.trigger().tick("later")
        assert reconcile(env).jobs_deleted_after_completion == 0
    assert env.job_item("once") is None and len(env.runs_of("once")) == 1
    assert len(env.telemetry.named("job.deleted_after_completion")) == 1


def test_max_runs_with_delete_waits_for_its_last_run(mem: Env) -> None:
    mem.ops().register(job("few", "rate(1 minute)", max_runs=2, action_after_completion="delete"))
    mem.clock.set(T0 + MINUTE)
    mem.trigger().tick("claims both")  # the lookahead reaches both occurrences
    assert mem.state("few")["status"] == "finished" and mem.state("few")["runs_claimed"] == 2
    mem.drain(mem.worker())  # the first is due: it runs; the second waits for its instant
    assert [r["status"] for r in mem.runs_of("few")] == ["pending", "succeeded"]
    assert reconcile(mem).jobs_deleted_after_completion == 0
    assert mem.job_item("few") is not None
    mem.clock.set(T0 + 2 * MINUTE)
    mem.drain(mem.worker())
    assert reconcile(mem).jobs_deleted_after_completion == 1
    assert mem.job_item("few") is None and len(calls(mem)) == 2


def test_a_job_whose_end_passed_is_deleted_after_its_last_run(mem: Env) -> None:
    end = datetime.fromtimestamp((T0 + 3 * MINUTE) / 1000, UTC)
    mem.ops().register(job("ends", "rate(1 minute)", end=end, action_after_completion="delete"))
    run_due(mem, T0 + 2 * MINUTE)
    assert mem.state("ends")["status"] == "finished"  # the claim of the occurrence at the end
    assert reconcile(mem).jobs_deleted_after_completion == 0  # the last run is not due yet
    run_due(mem, T0 + 3 * MINUTE)
    assert reconcile(mem).jobs_deleted_after_completion == 1
    assert mem.job_item("ends") is None
    assert [r["status"] for r in mem.runs_of("ends")] == ["succeeded"] * 3


@pytest.mark.parametrize("status", [RunStatus.PENDING, RunStatus.RUNNING, RunStatus.BUFFERED])
def test_not_deleted_while_a_run_has_not_ended(mem: Env, status: RunStatus) -> None:
    """Any unfinished run of the job holds the delete, also one earlier than the chain's end
    (under ``allow`` a later run's end says nothing of it)."""
    mem.ops().register(
        job("slow", "rate(1 minute)", max_runs=2, overlap="allow", action_after_completion="delete")
    )
    run_due(mem, T0 + 2 * MINUTE)
    first, last = sorted(r["run_id"] for r in mem.runs_of("slow"))
    assert mem.state("slow")["latest_run_id"] == last
    mem.store.update(Update(RUNS, run_key(first), (), "world", set={"status": status.value}))
    result = reconcile(mem)
    assert result.jobs_deleted_after_completion == 0 and result.job_errors == 0
    assert mem.job_item("slow") is not None
    mem.store.update(Update(RUNS, run_key(first), (), "world", set={"status": "succeeded"}))
    assert reconcile(mem).jobs_deleted_after_completion == 1


def test_not_deleted_while_its_run_retries(mem: Env) -> None:
    attempts: list[str] = []

    def flaky(ctx: Any) -> None:
        attempts.append(ctx.run_id)
        if len(attempts) == 1:
            raise RuntimeError("first attempt fails")

    mem.registry.add("flaky", flaky)
    retry = RetryPolicy(max_attempts=2, backoff_seconds=1, jitter=False)
    mem.ops().register(job("retries", at(AT), target="flaky", retry=retry, action_after_completion="delete"))
    mem.clock.set(AT)
    mem.trigger().tick("claims")
    assert mem.drain(mem.worker()) == [Outcome.RETRY_SCHEDULED]
    assert reconcile(mem).jobs_deleted_after_completion == 0  # pending again, its retry due
    mem.clock.advance(2_000)
    assert mem.drain(mem.worker()) == [Outcome.SUCCEEDED]
    assert reconcile(mem).jobs_deleted_after_completion == 1
    assert len(attempts) == 2


def test_a_running_run_holds_the_delete(env: Env) -> None:
    env.ops().register(job("long", at(AT), action_after_completion="delete"))
    env.clock.set(AT)
    env.trigger().tick("claims")
    [body] = env.receive_all()
    worker = env.worker()
    started = worker.begin(parse_run_message(body), AT + 900_000)
    assert isinstance(started, Started)
    assert reconcile(env).jobs_deleted_after_completion == 0
    assert env.job_item("long") is not None
    assert worker.finish(started, worker.execute(started)) is Outcome.SUCCEEDED
    assert reconcile(env).jobs_deleted_after_completion == 1


class Interleaved:
    """The environment's store, through which ``before`` lands just before the delete's
    transaction: a person (or an operator's manual run) between the pass's reads and its write."""

    def __init__(self, env: Env, before: Callable[[], None]) -> None:
        self.env = env
        self.before: Callable[[], None] | None = before

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env.store, name)

    def write(self, ops: Sequence[WriteOp]) -> None:
        if self.before is not None and any(op.label == "delete after completion" for op in ops):
            before, self.before = self.before, None
            before()
        self.env.store.write(ops)


def _complete_at_job(env: Env, job_id: str, **fields: Any) -> None:
    env.ops().register(job(job_id, at(AT), action_after_completion="delete", **fields))
    env.clock.set(AT)
    env.trigger().tick("claims")
    env.drain(env.worker())
    assert env.state(job_id)["status"] == "finished"


@pytest.mark.parametrize(
    "edit",
    [
        {"description": "a person's note"},
        {"retry": {"max_attempts": 5, "backoff_seconds": 10, "max_backoff_seconds": 300, "jitter": True}},
        {"max_runs": 3},
        {"action_after_completion": "none"},
    ],
    ids=["scalar", "map", "added", "asked-to-keep"],
)
def test_an_edit_in_between_wins_and_the_delete_is_counted_lost(env: Env, edit: dict[str, Any]) -> None:
    _complete_at_job(env, "edited")

    def person_edits() -> None:
        env.store.update(Update(JOBS, {"job_id": "edited"}, (), "person edits", set=edit))

    detector = env.detector()
    detector._store = detector._reconciler._store = Interleaved(env, person_edits)  # type: ignore[assignment]
    detector._reconciler._completer._store = detector._store  # type: ignore[assignment]
    result = detector.run("pass")
    assert result.jobs_deleted_after_completion == 0 and result.job_errors == 0
    item = env.job_item("edited")
    assert item is not None and all(item[name] == value for name, value in edit.items())  # it stands
    [lost] = env.telemetry.named("job.delete_after_completion_lost")
    assert lost.fields["lost"] == "delete after completion"
    assert set(lost.fields["attributes"]) == set(edit)
    # The edit reaches the registrar (its stream record): the job is still finished under the new
    # definition, and a later pass deletes it unless the edit asked to keep it.
    env.registrar().apply("edited")
    reconcile(env)
    assert (env.job_item("edited") is None) is (edit.get("action_after_completion") != "none")


def test_a_manual_run_made_in_between_holds_the_delete_until_it_ended(mem: Env) -> None:
    """The state's check: a run that joins the job after the pass read its runs moves the
    state's version, so the transaction fails whole; the run runs, and a later pass deletes."""
    _complete_at_job(mem, "manual")
    detector = mem.detector()
    store = Interleaved(mem, lambda: mem.ops().trigger("manual", "req-1"))
    detector._reconciler._completer._store = store  # type: ignore[assignment]
    result = detector.run("pass")
    assert result.jobs_deleted_after_completion == 0 and result.job_errors == 0
    [lost] = mem.telemetry.named("job.delete_after_completion_lost")
    assert lost.fields["lost"] == "job complete as read"
    assert mem.job_item("manual") is not None
    assert reconcile(mem).jobs_deleted_after_completion == 0  # the manual run is pending
    mem.drain(mem.worker())
    assert reconcile(mem).jobs_deleted_after_completion == 1
    assert sorted(calls(mem)) == [f"manual@{iso_z(AT)}", "manual@manual:req-1"]


def test_by_default_the_finished_job_item_stays(env: Env) -> None:
    env.ops().register(job("kept", at(AT)))
    env.clock.set(AT)
    env.trigger().tick("claims")
    env.drain(env.worker())
    for _ in range(3):
        assert reconcile(env).jobs_deleted_after_completion == 0
        env.clock.advance(MINUTE)
    assert env.job_item("kept") is not None and env.state("kept")["status"] == "finished"


def test_a_paused_or_lagging_job_is_not_deleted(mem: Env) -> None:
    _complete_at_job(mem, "paused")
    mem.store.update(Update(JOBS, {"job_id": "paused"}, (), "person pauses", set={"enabled": False}))
    # Its state lags its item (the pause is not applied yet): not finished as written.
    assert reconcile(mem).jobs_deleted_after_completion == 0
    mem.registrar().apply("paused")
    assert mem.state("paused")["status"] == "paused"
    assert reconcile(mem).jobs_deleted_after_completion == 0
    assert mem.job_item("paused") is not None


@pytest.mark.parametrize(
    ("failure", "event"),
    [
        (
            TransientStoreError("injected: the delete's request failed"),
            "job.delete_after_completion_deferred",
        ),
        (RuntimeError("injected: a bug"), "job.error"),
    ],
)
def test_a_failure_is_isolated_and_the_next_pass_repairs_it(mem: Env, failure: Exception, event: str) -> None:
    """A store error defers the job to the next pass; anything else is a job error (logged and
    counted). Either way the other job is deleted, and the next pass deletes the first."""
    _complete_at_job(mem, "a")
    _complete_at_job(mem, "b")

    def fails() -> None:
        raise failure

    detector = mem.detector()
    detector._reconciler._completer._store = Interleaved(mem, fails)  # type: ignore[assignment]
    result = detector.run("pass")
    assert result.jobs_deleted_after_completion == 1  # the other one
    assert result.job_errors == (1 if event == "job.error" else 0)
    [logged] = mem.telemetry.named(event)
    assert logged.fields["error"].startswith(type(failure).__name__)
    assert reconcile(mem).jobs_deleted_after_completion == 1
    assert mem.job_item("a") is None and mem.job_item("b") is None


def test_a_bad_value_is_invalid_with_a_reason(mem: Env) -> None:
    item = {**job("bad", at(AT)).to_item(), "action_after_completion": "DELETE"}
    register_raw(mem, item)
    reported = mem.job_item("bad")
    assert reported is not None and reported["status"] == "invalid"
    [reason] = reported["invalid_reasons"]
    assert reason.startswith('action_after_completion: must be "none" (keep the job item) or "delete"')
    assert "write it in lowercase" in reason


def test_a_max_runs_job_registered_again_after_its_delete_runs_again(mem: Env) -> None:
    """Issue 34 item 2: after ``action_after_completion: delete``, registering the job again
    starts a new life: its runs count from 0, it runs ``max_runs`` times again and is deleted
    again, and the log says this life's count; the first life's runs stay as history."""
    definition = job("few", "rate(1 minute)", max_runs=2, action_after_completion="delete")
    for life in (1, 2):
        mem.ops().register(definition)
        state = mem.state("few")
        assert state["status"] == "active" and "runs_claimed" not in state
        run_due(mem, state["next_run_at"] + MINUTE)
        assert reconcile(mem).jobs_deleted_after_completion == 1
        assert mem.job_item("few") is None and mem.state("few")["status"] == "deleted"
        assert len(calls(mem)) == 2 * life
        event = mem.telemetry.named("job.deleted_after_completion")[-1]
        assert event.fields["runs_claimed"] == 2 and event.fields["life"] == life
        mem.clock.set(mem.clock.now_ms() + 5 * MINUTE)
    assert len(mem.runs_of("few")) == 4 and {r["status"] for r in mem.runs_of("few")} == {"succeeded"}
