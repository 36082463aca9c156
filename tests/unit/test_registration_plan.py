"""The registrar's rule (core/state.plan_registration): what each kind of change a person makes
does to a job's place in its schedule, and which old occurrences it settles first."""

from __future__ import annotations

from typing import Any

from jobsched.core.clock import dt_to_ms, ms_to_dt
from jobsched.core.job import JobDefinition
from jobsched.core.state import Registration, plan_registration, registered_state

NOW = 1_796_083_200_000  # 2026-12-01T00:00:00Z
MINUTE = 60_000
SHARDS = 8


def definition(**changes: Any) -> JobDefinition:
    fields: dict[str, Any] = {"job_id": "j", "schedule": "rate(1 minute)", "target": "t"}
    fields.update(changes)
    return JobDefinition(**fields)


def state_of(d: JobDefinition, next_run_at: int | None, **changes: Any) -> dict[str, Any]:
    state = registered_state(d, next_run_at, SHARDS, NOW - 10 * MINUTE, version=7)
    state.update(changes)
    return state


def plan(state: dict[str, Any] | None, d: JobDefinition | None, digest: str | None = "set", **kw: Any) -> Any:
    digest = d.definition_hash() if d is not None and digest == "set" else digest
    return plan_registration(state, d, digest, NOW, SHARDS, **kw)


def test_a_new_job_starts_at_its_next_occurrence_after_now() -> None:
    d = definition()
    result = plan(None, d)
    assert result.outcome is Registration.SCHEDULED and result.settle is None
    assert result.set["next_run_at"] == NOW + MINUTE and result.set["status"] == "active"
    assert (
        result.set["def_hash"] == d.definition_hash() and result.set["timing"]["schedule"] == "rate(1 minute)"
    )


def test_an_edit_that_leaves_the_timing_alone_keeps_the_place_even_when_behind() -> None:
    old = definition()
    behind = state_of(old, NOW - 10 * MINUTE)
    result = plan(behind, definition(description="now with a description"))
    assert result.outcome is Registration.SCHEDULED
    assert "next_run_at" not in result.set and result.settle is None  # the detector settles it
    assert result.set["def_hash"] != old.definition_hash()


def test_re_putting_the_same_definition_changes_nothing() -> None:
    d = definition()
    state = state_of(d, NOW - 3 * MINUTE)
    assert not plan(state, d).changes(state)


def test_a_timing_change_while_behind_settles_the_old_schedule_first() -> None:
    old = definition(schedule="rate(5 minutes)")
    behind = state_of(old, NOW - 10 * MINUTE, last_scheduled_at=NOW - 15 * MINUTE)
    result = plan(behind, definition(schedule="cron(4,34 * * * ? *)"))
    assert result.settle is not None and result.settle.reason is None  # the misfire policy decides
    assert result.settle.until == NOW
    assert result.set["next_run_at"] == NOW + 4 * MINUTE and "catchups" in result.remove


def test_a_timing_change_never_goes_back_before_an_occurrence_already_claimed() -> None:
    old = definition()
    ahead = state_of(old, NOW + 2 * MINUTE, last_scheduled_at=NOW + MINUTE)
    result = plan(ahead, definition(schedule="rate(30 seconds)"))
    assert result.settle is None
    assert result.set["next_run_at"] == NOW + MINUTE + 30_000


def test_pausing_a_job_that_is_behind_records_what_came_due() -> None:
    behind = state_of(definition(), NOW - 2 * MINUTE)
    result = plan(behind, definition(enabled=False))
    assert result.outcome is Registration.PAUSED
    assert result.settle is not None and "paused" in (result.settle.reason or "")
    assert {"next_run_at", "sched_shard"} <= set(result.remove)


def test_resuming_starts_from_now_not_from_where_it_was_paused() -> None:
    paused = state_of(definition(enabled=False), None, status="paused", last_scheduled_at=NOW - 30 * MINUTE)
    result = plan(paused, definition())
    assert result.settle is None and result.set["next_run_at"] == NOW + MINUTE


def test_an_invalid_or_deleted_job_leaves_the_index_and_records_its_due_occurrences() -> None:
    behind = state_of(definition(), NOW - MINUTE)
    invalid = plan(behind, None, digest="invalid-abc", invalid_reason="schedule: bad")
    assert invalid.outcome is Registration.INVALID and invalid.set["def_hash"] == "invalid-abc"
    assert invalid.settle is not None and "schedule: bad" in (invalid.settle.reason or "")
    deleted = plan(behind, None, digest=None)
    assert deleted.outcome is Registration.DELETED and deleted.set == {"status": "deleted"}
    assert deleted.settle is not None and "deleted" in (deleted.settle.reason or "")
    assert plan(None, None, digest=None).outcome is Registration.ABSENT


def test_a_schedule_with_nothing_left_finishes() -> None:
    past = definition(schedule="at(2020-01-01T00:00:00)")
    result = plan(None, past)
    assert result.outcome is Registration.FINISHED and "next_run_at" in result.remove


def test_deleted_and_recreated_with_the_same_timing_resumes_after_the_last_occurrence() -> None:
    d = definition()
    gone = state_of(d, None, status="deleted", last_scheduled_at=NOW + 30_000)
    result = plan(gone, d)
    expected = d.compiled_schedule().next_after(ms_to_dt(NOW + 30_000))
    assert expected is not None and result.set["next_run_at"] == dt_to_ms(expected)
