"""The registrar: people's job items become schedulable (or invalid with reasons); its own writes,
replayed and reordered stream records are harmless; malformed items never make it raise."""

from __future__ import annotations

from typing import Any

from harness import MINUTE, T0, Env, job, register_raw
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jobsched.core.clock import ManualClock
from jobsched.core.config import SchedulerConfig
from jobsched.core.writes import JOBS, Put, Update
from jobsched.services.registrar import Registrar, Registration
from jobsched_tools.fakes.memory_store import MemoryStore
from jobsched_tools.fakes.memory_telemetry import MemoryTelemetry

HOUR = 60 * MINUTE


def person_updates(env: Env, job_id: str, **fields: Any) -> None:
    env.store.update(Update(JOBS, {"job_id": job_id}, condition=(), label="person edits", set=fields))


def test_valid_item_is_scheduled(env: Env) -> None:
    register_raw(env, job("j1", "rate(1 hour)").to_item())
    state = env.job("j1")
    assert state["status"] == "active" and state["next_run_at"] == T0 + HOUR
    assert state["def_hash"] == job("j1", "rate(1 hour)").definition_hash()
    assert 0 <= state["sched_shard"] < env.cfg.shard_count and state["version"] == 1


def test_invalid_item_is_marked_with_reasons(env: Env) -> None:
    register_raw(env, {"job_id": "bad", "schedule": "cron(0 25 * * ? *)", "target": "log", "colour": "red"})
    state = env.job("bad")
    assert state["status"] == "invalid" and "next_run_at" not in state
    reasons = state["invalid_reasons"]
    assert any(r.startswith("colour") and "unknown field" in r for r in reasons)
    # Fixing it makes it schedulable; the reasons go.
    env.store.write([Put(JOBS, job("bad").to_item() | {"version": state["version"]}, (), "fix")])
    assert env.registrar().apply("bad") is Registration.SCHEDULED
    assert "invalid_reasons" not in env.job("bad")


def test_wrapped_ranges_are_scheduled_and_a_wrapped_year_is_invalid(env: Env) -> None:
    # The registrar validates with the one schedule parser: a weekend range that wraps
    # (SAT-SUN) with night hours that wrap (22-2) is a schedule. T0 is Tuesday 2026-12-01
    # 00:00Z, so the first run is Saturday the 5th at 00:00.
    register_raw(env, job("weekend-nights", "cron(0 22-2 ? * SAT-SUN *)").to_item())
    state = env.job("weekend-nights")
    assert state["status"] == "active" and state["next_run_at"] == T0 + 4 * 24 * HOUR
    register_raw(env, {"job_id": "years", "schedule": "cron(0 0 * * ? 2030-2026)", "target": "log"})
    state = env.job("years")
    assert state["status"] == "invalid"
    assert any(
        r.startswith("schedule") and "year range 2030-2026 is reversed" in r for r in state["invalid_reasons"]
    )


def test_paused_and_resumed(env: Env) -> None:
    register_raw(env, job("p", enabled=False).to_item())
    assert env.job("p")["status"] == "paused" and "next_run_at" not in env.job("p")
    person_updates(env, "p", enabled=True)
    assert env.registrar().apply("p") is Registration.SCHEDULED
    assert env.job("p")["next_run_at"] == T0 + MINUTE


def test_ended_schedule_is_finished(env: Env) -> None:
    register_raw(env, job("once", "at(2026-11-30T00:00:00)").to_item())
    state = env.job("once")
    assert state["status"] == "finished" and "next_run_at" not in state


def test_own_write_is_unchanged_no_loop(env: Env) -> None:
    register_raw(env, job("j1").to_item())
    registrar = env.registrar()
    image = env.job("j1")
    before = env.store.get(JOBS, {"job_id": "j1"})
    assert registrar.on_stream_record("MODIFY", "j1", image) is Registration.UNCHANGED
    assert env.store.get(JOBS, {"job_id": "j1"}) == before  # no write, so no new stream record


def test_replayed_and_reordered_records_are_harmless(env: Env) -> None:
    first = job("j1", "rate(1 hour)").to_item()
    register_raw(env, first)
    person_updates(env, "j1", schedule="rate(2 hours)")
    second_image = env.job("j1")
    registrar = env.registrar()
    assert registrar.on_stream_record("MODIFY", "j1", second_image) is Registration.SCHEDULED
    settled = env.job("j1")
    # The old INSERT replayed after the change, then the MODIFY again: both act on the item as it is.
    assert registrar.on_stream_record("INSERT", "j1", first) is Registration.UNCHANGED
    assert registrar.on_stream_record("MODIFY", "j1", second_image) is Registration.UNCHANGED
    assert env.job("j1") == settled
    assert settled["next_run_at"] == T0 + 2 * HOUR


def test_schedule_change_takes_effect_from_the_next_occurrence(env: Env) -> None:
    register_raw(env, job("j1", "rate(1 hour)").to_item())
    env.clock.set(T0 + HOUR - 30_000)
    assert env.trigger().tick("t").claimed == 1  # T0+1h claimed
    person_updates(env, "j1", schedule="rate(1 minute)")
    assert env.registrar().apply("j1") is Registration.SCHEDULED
    assert env.job("j1")["next_run_at"] == T0 + HOUR + MINUTE  # after the last claimed one
    assert env.trigger().tick("t3").claimed == 1
    runs = env.runs_of("j1")
    assert sorted(r["scheduled_at"] for r in runs) == [T0 + HOUR, T0 + HOUR + MINUTE]


def test_deleting_the_job_leaves_its_runs(env: Env) -> None:
    register_raw(env, job("j1").to_item())
    env.trigger().tick("t")
    ops = env.ops()
    assert ops.delete("j1") is Registration.DELETED
    # The stream's REMOVE record finds the deletion applied already.
    assert env.registrar().on_stream_record("REMOVE", "j1", None) is Registration.UNCHANGED
    assert env.registrar().apply("j1") is Registration.UNCHANGED
    assert env.job_item("j1") is None and env.state("j1")["status"] == "deleted"
    assert "next_run_at" not in env.state("j1")
    assert len(env.runs_of("j1")) == 1 and env.trigger().tick("t2").claimed == 0


garbage = st.one_of(
    st.text(max_size=30),
    st.integers(-(10**12), 10**12),
    st.booleans(),
    st.lists(st.integers(0, 9), max_size=3),
    st.dictionaries(st.text(max_size=5), st.one_of(st.text(max_size=5), st.integers()), max_size=3),
)
FIELDS = ["timezone", "start", "end", "target", "payload", "retry", "timeout_seconds", "misfire", "overlap"]


@st.composite
def malformed_items(draw: st.DrawFn) -> dict[str, Any]:
    item: dict[str, Any] = {"job_id": draw(st.text(min_size=1, max_size=20))}
    for name in draw(st.lists(st.sampled_from([*FIELDS, "enabled", "description", "junk"]), unique=True)):
        item[name] = draw(garbage)
    # The schedule is missing, the wrong type, or garbage: the item can never be valid.
    choice = draw(st.integers(0, 2))
    if choice == 1:
        item["schedule"] = draw(st.one_of(st.integers(), st.booleans(), st.lists(st.text(max_size=3))))
    elif choice == 2:
        item["schedule"] = draw(st.text(max_size=30).filter(lambda t: "(" not in t))
    return item


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(malformed_items())
def test_malformed_items_never_raise_and_become_invalid(item: dict[str, Any]) -> None:
    store = MemoryStore()
    store.write([Put(JOBS, item, condition=(), label="garbage")])
    registrar = Registrar(store, MemoryTelemetry(), ManualClock(T0), SchedulerConfig())
    assert registrar.apply(item["job_id"]) is Registration.INVALID
    state = store.get(JOBS, {"job_id": item["job_id"]})
    assert state is not None and state["status"] == "invalid"
    assert state["invalid_reasons"] and all(isinstance(r, str) and r for r in state["invalid_reasons"])
    assert "next_run_at" not in state
    # Its own write's stream record changes nothing (no loop), even for garbage.
    assert registrar.on_stream_record("MODIFY", item["job_id"], state) is Registration.UNCHANGED
