"""Issue 29 part 3: ``max_runs``. The count lives on the state item and moves in the claim's (or
the settle's) own state update: no write is added; the last run finishes the job."""

from __future__ import annotations

from typing import Any

import pytest
from harness import T0, Env, build, job, register_raw, seed_active
from jobsched.core.job import Misfire, MisfirePolicy
from jobsched.core.transitions import claim_ops
from jobsched.core.writes import JOBS, Update

MINUTE = 60_000


@pytest.fixture
def env() -> Any:
    with build("memory") as env:
        env.registry.add("t", lambda _ctx: None)
        yield env


def _scheduled(env: Env, job_id: str) -> list[dict[str, Any]]:
    return [
        r for r in env.runs_of(job_id) if r["kind"] in ("scheduled", "catchup") and r["status"] == "pending"
    ]


def test_after_max_runs_claims_the_job_is_finished(env: Env) -> None:
    seed_active(env, job("j", "rate(1 minute)", max_runs=3), T0)
    for minute in range(6):
        env.clock.set(T0 + minute * MINUTE - 30_000)
        env.trigger().tick(f"t{minute}")
    assert len(_scheduled(env, "j")) == 3
    state = env.state("j")
    assert state["status"] == "finished" and "next_run_at" not in state
    assert state["runs_claimed"] == 3


def test_one_tick_claiming_several_stops_at_the_limit(env: Env) -> None:
    seed_active(env, job("j", "rate(20 seconds)", max_runs=2), T0)
    env.clock.set(T0 - 10_000)
    result = env.trigger().tick("t")
    assert result.claimed == 2
    assert env.state("j")["status"] == "finished"


def test_the_detectors_settle_counts_and_finishes(env: Env) -> None:
    misfire = Misfire(policy=MisfirePolicy.RUN_ALL, grace_seconds=30)
    seed_active(env, job("j", "rate(1 minute)", max_runs=2, misfire=misfire), T0)
    env.clock.set(T0 + 5 * MINUTE + 1_000)  # five occurrences overdue (an outage)
    env.detector().run("sweep")
    runs = env.runs_of("j")
    assert len([r for r in runs if r["status"] == "pending"]) == 2
    assert len(runs) == 2  # the occurrences after the limit get no record: the job ended first
    state = env.state("j")
    assert state["status"] == "finished" and state["runs_claimed"] == 2


def test_an_edit_does_not_revive_a_finished_job_raising_the_limit_does(env: Env) -> None:
    register_raw(env, {**job("j", "rate(1 minute)", max_runs=1).to_item()})
    env.clock.set(env.clock.now_ms() + 50_000)
    env.trigger().tick("t")
    assert env.state("j")["status"] == "finished"
    env.store.update(Update(JOBS, {"job_id": "j"}, (), "person edits", set={"description": "x"}))
    env.registrar().apply("j")
    assert env.state("j")["status"] == "finished"
    env.store.update(Update(JOBS, {"job_id": "j"}, (), "person edits", set={"max_runs": 2}))
    env.registrar().apply("j")
    assert env.state("j")["status"] == "active"


def test_the_count_is_an_attribute_of_the_claims_own_update() -> None:
    state = {"job_id": "j", "version": 3, "next_run_at": T0, "runs_claimed": 4}
    run = {"run_id": "j@x", "scheduled_at": T0}
    ops = claim_ops(state, run, None, T0, count=True)
    assert len(ops) == 2  # the run's put and the state's update, as without max_runs
    assert ops[1].set["runs_claimed"] == 5 and ops[1].set["status"] == "finished"
    assert "runs_claimed" not in claim_ops(state, run, T0 + 1, T0)[1].set


def test_the_count_is_read_from_the_state_item_not_the_index_page(env: Env) -> None:
    """The next-run index does not project ``runs_claimed``: a job with a limit reads its state
    item before it is claimed or settled, so the count never restarts from an index page."""
    misfire = Misfire(policy=MisfirePolicy.RUN_ALL, grace_seconds=30)
    seed_active(env, job("j", "rate(1 minute)", max_runs=3, misfire=misfire), T0, runs_claimed=2)
    env.clock.set(T0 + 5 * MINUTE + 1_000)
    env.detector().run("sweep")
    assert len([r for r in env.runs_of("j") if r["status"] == "pending"]) == 1
    assert env.state("j")["runs_claimed"] == 3


def test_a_job_deleted_and_registered_again_starts_a_new_life(env: Env) -> None:
    """Issue 34 item 2: ``jobsched delete`` then ``register`` again: the count starts at 0 (the
    register write that re-creates the job starts its next life), the history stays."""
    ops = env.ops()
    definition = job("j", "rate(1 minute)", max_runs=1)
    env.clock.set(T0)
    ops.register(definition)
    env.clock.set(T0 + 50_000)
    env.trigger().tick("t1")
    env.clock.set(T0 + MINUTE)
    env.drain(env.worker())
    (first,) = env.runs_of("j")
    assert first["status"] == "succeeded" and env.state("j")["status"] == "finished"
    ops.delete("j")
    assert env.state("j")["status"] == "deleted"
    env.clock.set(T0 + 10 * MINUTE)
    ops.register(definition)
    state = env.state("j")
    assert state["status"] == "active" and state["life"] == 2 and "runs_claimed" not in state
    env.clock.set(state["next_run_at"] - 10_000)
    env.trigger().tick("t2")
    env.clock.set(state["next_run_at"])
    env.drain(env.worker())
    runs = env.runs_of("j")
    assert [r["status"] for r in runs] == ["succeeded", "succeeded"]  # the history stays
    assert runs[1]["run_id"] == first["run_id"]
    state = env.state("j")
    assert state["status"] == "finished" and state["runs_claimed"] == 1 and state["life"] == 2
    env.registrar().apply("j")  # a replayed record: the life goes on, nothing changes
    assert env.state("j")["version"] == state["version"]
