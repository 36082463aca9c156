"""Registration is level-triggered (issue 26 item 1): a change whose stream record is lost for
good (retries exhausted, sent to the failure queue) is found by the miss detector's reconcile
pass, which compares every job item with its state, and applied. A change whose record is merely
on its way is left to the registrar function."""

from __future__ import annotations

from typing import Any

import pytest
from harness import MINUTE, T0, Env, build, default_cfg, job
from jobsched.core.run import run_id_for
from jobsched.core.state import Registration
from jobsched.core.transitions import BOOKKEEPING_KEY, bookkeeping_op
from jobsched.core.writes import JOBS, STATE, Put
from jobsched.services.detector import MissDetector
from jobsched.services.reconciler import RECONCILE_JOBS_PER_RUN, SUSPECT_AFTER_MS, Reconciler
from jobsched_tools.fakes.memory_queue import MemoryWorkQueue
from jobsched_tools.fakes.memory_telemetry import MemoryTelemetry
from jobsched_tools.fakes.metering import MeteringStore

HOUR = 60 * MINUTE


def lost_put(env: Env, item: dict[str, Any]) -> None:
    """A person's put-item whose stream record never reaches the registrar."""
    env.store.write([Put(JOBS, item, condition=(), label="person puts job (record lost)")])


def reconcile_until_applied(env: Env) -> None:
    """Detector invocations a minute apart: the first sees the difference, a later one applies it."""
    env.detector().run("d1")
    env.clock.advance(SUSPECT_AFTER_MS)
    env.detector().run("d2")


def _new(env: Env) -> None:
    lost_put(env, job("x", "rate(1 hour)").to_item())


def _resume(env: Env) -> None:
    env.store.write([Put(JOBS, job("x", "rate(1 hour)", enabled=False).to_item(), (), "put")])
    env.registrar().apply("x")
    assert env.state("x")["status"] == "paused"
    lost_put(env, job("x", "rate(1 hour)").to_item())


def _fix(env: Env) -> None:
    env.store.write([Put(JOBS, {**job("x", "rate(1 hour)").to_item(), "colour": "red"}, (), "put")])
    env.registrar().apply("x")
    assert env.state("x")["status"] == "invalid"
    lost_put(env, job("x", "rate(1 hour)").to_item())


def _retime_finished(env: Env) -> None:
    env.store.write([Put(JOBS, job("x", "at(2026-11-30T00:00:00)").to_item(), (), "put")])
    env.registrar().apply("x")
    assert env.state("x")["status"] == "finished"
    lost_put(env, job("x", "rate(1 hour)").to_item())


@pytest.mark.parametrize("change", [_new, _resume, _fix, _retime_finished], ids=lambda f: f.__name__[1:])
def test_a_change_whose_stream_record_is_lost_is_applied_by_the_reconcile_pass(env: Env, change: Any) -> None:
    change(env)
    before = env.store.get(STATE, {"job_id": "x"})
    first = env.detector().run("d1")
    # Seen, not applied yet: a record on its way is the registrar function's.
    assert env.store.get(STATE, {"job_id": "x"}) == before and first.jobs_reconciled == 0
    env.clock.advance(SUSPECT_AFTER_MS)
    second = env.detector().run("d2")
    assert second.jobs_reconciled == 1
    state = env.state("x")
    assert state["status"] == "active" and state["def_hash"] == job("x", "rate(1 hour)").definition_hash()
    # Dated when the difference was first seen (T0): the first occurrence after it is T0 + 1 h.
    assert state["next_run_at"] == T0 + HOUR
    assert env.ops().get("x")["status"] == "active"  # what `jobsched show` reports
    (event,) = env.telemetry.named("job.reconciled")
    assert event.correlation_id == "x" and event.fields["differed"] and event.fields["changed_at"] == T0
    assert env.telemetry.metric_sum("JobsReconciled") == 1
    env.detector().run("d3")
    assert len(env.telemetry.named("job.reconciled")) == 1  # applied once: the items agree now


def test_a_change_the_registrar_applies_meanwhile_is_not_applied_again(env: Env) -> None:
    lost_put(env, job("x", "rate(1 hour)").to_item())
    env.detector().run("d1")  # seen
    env.registrar().apply("x")  # the stream record arrives after all
    env.clock.advance(SUSPECT_AFTER_MS)
    assert env.detector().run("d2").jobs_reconciled == 0
    assert not env.telemetry.named("job.reconciled")


def test_a_lost_change_dated_when_first_seen_runs_what_came_due_since(env: Env) -> None:
    # A new per-minute job whose record is lost: its occurrences after the first sighting are
    # due when the reconciler applies it, and the trigger claims the one within grace.
    lost_put(env, job("x", "rate(1 minute)").to_item())
    env.detector().run("d1")
    env.clock.advance(SUSPECT_AFTER_MS + 10_000)
    env.detector().run("d2")
    assert env.state("x")["next_run_at"] == T0 + MINUTE
    env.trigger().tick("t")
    assert env.run(run_id_for("x", T0 + MINUTE))["status"] == "pending"


def test_a_full_pass_covers_every_job_a_slice_per_invocation() -> None:
    """Many jobs: each invocation compares RECONCILE_JOBS_PER_RUN of them and the cursor goes
    round; every lost change is applied within two passes."""
    jobs = RECONCILE_JOBS_PER_RUN + 300
    with build("memory") as env:
        for i in range(jobs):
            lost_put(env, job(f"j{i:04d}", "rate(1 hour)").to_item())
        runs = 0
        while len(env.telemetry.named("job.reconciled")) < jobs:
            checked = env.detector().run(f"d{runs}").jobs_checked
            assert checked <= RECONCILE_JOBS_PER_RUN
            env.clock.advance(MINUTE)
            runs += 1
            assert runs <= 4  # two passes of two invocations
        assert all(env.store.get(STATE, {"job_id": f"j{i:04d}"}) for i in range(jobs))
        bookkeeping = env.store.get(STATE, BOOKKEEPING_KEY)
        assert bookkeeping is not None and bookkeeping["passes"] >= 2 and not bookkeeping["suspects"]
        assert env.ops().list_jobs(limit=5)[0]["job_id"] == "j0000"  # the bookkeeping is no job


def test_what_a_pass_reads_per_job() -> None:
    """The cost figure in docs/design.md: read units per job of a pass (Scan of the job items,
    eventually consistent BatchGetItem of their states), measured on the metering store."""
    from jobsched.core.clock import ManualClock

    clock = ManualClock(T0)
    cfg = default_cfg()
    store = MeteringStore()
    telemetry = MemoryTelemetry()
    detector = MissDetector(store, MemoryWorkQueue(clock), telemetry, clock, cfg, parallel_queries=False)
    jobs = RECONCILE_JOBS_PER_RUN
    for i in range(jobs):
        definition = job(f"j{i:04d}", "rate(1 hour)", payload={"text": "x" * 600})
        store.write([Put(JOBS, definition.to_item(), (), "put")])
    for i in range(jobs):
        detector._registrar.apply(f"j{i:04d}")  # registered, in agreement
    store.reset_meters()
    reconciler = Reconciler(store, telemetry, clock, cfg, detector._registrar)
    done = reconciler.run(lambda: True)
    assert done.checked == jobs and done.reconciled == 0
    per_job = store.read_units / jobs
    # ~1 KB job items: an eighth of a unit each in the Scan, half a unit each in BatchGetItem.
    assert 0.55 <= per_job <= 0.7, per_job


def test_two_overlapping_invocations_move_the_cursor_once(env: Env) -> None:
    for i in range(3):
        env.store.write([Put(JOBS, job(f"j{i}").to_item(), (), "put")])
        env.registrar().apply(f"j{i}")
    env.detector().run("d1")
    read = env.store.get(STATE, BOOKKEEPING_KEY)
    env.detector().run("d2")  # moves it on
    from jobsched.core.errors import ConditionFailed

    with pytest.raises(ConditionFailed):
        env.store.update(bookkeeping_op(read, {"cursor": None}, (), env.clock.now_ms()))


def test_a_job_item_keyed_with_no_job_id_is_left_alone(env: Env) -> None:
    # Keyed like the detector's own bookkeeping: not a job id, so never compared or applied.
    lost_put(env, {"job_id": "#detector", "schedule": "rate(1 hour)", "target": "t"})
    reconcile_until_applied(env)
    assert not env.telemetry.named("job.reconciled")
    bookkeeping = env.store.get(STATE, BOOKKEEPING_KEY)
    assert bookkeeping is not None and "status" not in bookkeeping


def test_the_registrar_function_applies_a_change_it_receives_without_the_reconciler(env: Env) -> None:
    env.store.write([Put(JOBS, job("x", "rate(1 hour)").to_item(), (), "put")])
    assert env.registrar().apply("x") is Registration.SCHEDULED
    reconcile_until_applied(env)
    assert not env.telemetry.named("job.reconciled")
