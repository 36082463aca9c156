"""The operations API: register, list, show, runs, pause, resume, trigger, backfill, delete."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from harness import MINUTE, T0, Counter, Env, job
from jobsched.core.clock import ms_to_dt
from jobsched.core.run import manual_run_id, run_id_for
from jobsched.core.state import Registration
from jobsched.core.writes import JOBS
from jobsched.services.operations import JobNotFound

HOUR = 60 * MINUTE


def test_register_list_show_and_replace(env: Env) -> None:
    ops = env.ops()
    assert ops.register(job("b")) is Registration.SCHEDULED
    assert ops.register(job("a", "rate(1 hour)", description="hourly")) is Registration.SCHEDULED
    assert [item["job_id"] for item in ops.list_jobs()] == ["a", "b"]
    shown = ops.get("a")
    assert shown["description"] == "hourly" and shown["status"] == "active"
    # Replacing the definition keeps the state and drops fields no longer given.
    assert ops.register(job("a", "rate(2 hours)")) is Registration.SCHEDULED
    replaced = ops.get("a")
    assert replaced["schedule"] == "rate(2 hours)" and "description" not in replaced
    assert replaced["def_hash"] != shown["def_hash"] and replaced["next_run_at"] == T0 + 2 * HOUR
    assert ops.register(job("a", "rate(2 hours)")) is Registration.UNCHANGED
    with pytest.raises(JobNotFound):
        ops.get("nope")


def test_pause_and_resume(env: Env) -> None:
    ops = env.ops()
    ops.register(job("j1"))
    assert ops.set_enabled("j1", False) is Registration.PAUSED
    assert env.trigger().tick("t").claimed == 0
    env.clock.advance(10 * MINUTE)
    assert ops.set_enabled("j1", True) is Registration.SCHEDULED
    assert env.job("j1")["next_run_at"] == T0 + 11 * MINUTE  # from now on, no catch-up of the pause
    assert env.detector().run("d").missed_recorded == 0
    with pytest.raises(JobNotFound):
        ops.set_enabled("ghost", False)


def test_trigger_with_the_same_request_id_runs_once(env: Env) -> None:
    counter = Counter()
    env.registry.add("t", counter)
    ops = env.ops()
    ops.register(job("j1", "rate(1 hour)"))
    first = ops.trigger("j1", "req-1")
    assert [o.value for o in env.drain(env.worker())] == ["succeeded"]  # sent by the first request
    second = ops.trigger("j1", "req-1")
    assert first == second == manual_run_id("j1", "req-1")
    assert env.drain(env.worker()) == []  # the repeated request sends nothing
    assert counter.calls == [first]
    run = ops.get_run(first)
    assert run is not None and run["kind"] == "manual" and run["status"] == "succeeded"
    other = ops.trigger("j1")  # a new request id: a new run
    assert other != first and ops.get_run(other) is not None


def test_runs_lists_newest_first(env: Env) -> None:
    ops = env.ops()
    ops.register(job("j1", "rate(10 seconds)"))
    env.trigger().tick("t")
    runs = ops.runs("j1", limit=5)
    assert len(runs) == 5
    assert [r["scheduled_at"] for r in runs] == sorted((r["scheduled_at"] for r in runs), reverse=True)
    assert runs[0]["scheduled_at"] == T0 + 90_000


def test_runs_orders_a_manual_run_by_its_instant_not_its_id(env: Env) -> None:
    """A job's runs are its partition of the runs table, sorted there by run id, and a manual
    run's id (``j1@manual:...``) sorts after every scheduled one: the list orders by instant."""
    ops = env.ops()
    ops.register(job("j1", "rate(10 seconds)"))
    env.trigger().tick("t")
    manual = ops.trigger("j1", request_id="now")
    runs = ops.runs("j1")
    assert [r["scheduled_at"] for r in runs] == sorted((r["scheduled_at"] for r in runs), reverse=True)
    assert manual in [r["run_id"] for r in runs] and runs[0]["run_id"] != manual


def test_backfill_runs_each_occurrence_once(env: Env) -> None:
    counter = Counter()
    env.registry.add("t", counter)
    ops = env.ops()
    ops.register(job("j1", "rate(1 hour)", overlap="allow"))
    start, end = ms_to_dt(T0 - 5 * 60 * MINUTE), ms_to_dt(T0)
    result = ops.backfill("j1", start, end)
    expected = [run_id_for("j1", T0 - h * 60 * MINUTE) for h in range(4, -1, -1)]
    assert result.created == expected and result.already_existed == []
    again = ops.backfill("j1", start - timedelta(hours=1), end)
    assert again.created == [run_id_for("j1", T0 - 5 * 60 * MINUTE)]
    assert again.already_existed == expected
    outcomes = env.drain(env.worker())
    assert [o.value for o in outcomes] == ["succeeded"] * 6
    assert sorted(counter.calls) == sorted([*expected, run_id_for("j1", T0 - 5 * 60 * MINUTE)])
    assert all(r["kind"] == "backfill" for r in ops.runs("j1"))
    # The schedule is left alone.
    assert env.job("j1")["next_run_at"] == T0 + 60 * MINUTE


def test_delete_stops_the_job_and_keeps_history(env: Env) -> None:
    ops = env.ops()
    ops.register(job("j1"))
    env.trigger().tick("t")
    ops.delete("j1")
    assert ops.list_jobs() == []
    assert len(ops.runs("j1")) == 1
    with pytest.raises(JobNotFound):
        ops.delete("j1")
    with pytest.raises(JobNotFound):
        ops.trigger("j1")


def test_a_new_job_is_never_unchanged_when_the_registrar_function_got_there_first(env: Env) -> None:
    """The registrar function's stream record for the write can be applied before the API's own
    registrar step (issue 36, item 7): the API then finds nothing left to change, but the job is
    new, so it reports what the registration is, never ``unchanged``."""
    ops = env.ops()
    stream_registrar = env.registrar()
    write = env.store.update

    def write_then_stream(op: Any) -> Any:
        result = write(op)
        if op.table == JOBS:
            stream_registrar.apply(op.key["job_id"])  # the registrar function, first
        return result

    env.store.update = write_then_stream  # type: ignore[method-assign]
    assert ops.register(job("new")) is Registration.SCHEDULED
    assert ops.register(job("new", enabled=False)) is Registration.PAUSED  # a change, also first
    assert ops.register(job("new", enabled=False)) is Registration.UNCHANGED  # nothing written
