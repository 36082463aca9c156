"""The head item of the successor claim (core/head.py): its fields, its successor, and what an item
at an occurrence key is, on the product's real timings (cron, rate, at, end, max_runs)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from jobsched.core.clock import dt_to_ms
from jobsched.core.config import SchedulerConfig
from jobsched.core.head import (
    MAX_HEAD_CHECK_DELAY_MS,
    HeadJob,
    counts_runs,
    ends_life,
    epoch_of,
    head_check_at,
    head_check_delay_ms,
    head_item,
    is_cancelled_head,
    is_claimed_run,
    is_closure_marker,
    is_end_marker,
    is_head,
    is_head_entry,
    is_marker,
    is_record,
    is_unstarted_occurrence,
    next_key,
)
from jobsched.core.job import JobDefinition
from jobsched.core.run import RunStatus, end_run_id, parse_run_id, run_id_for, shard_of

SHARDS = 8
DELAY = head_check_delay_ms(SchedulerConfig())
T0 = dt_to_ms(datetime(2026, 12, 5, 0, 0, tzinfo=UTC))
MINUTE = 60_000


def definition(**changes: Any) -> JobDefinition:
    fields: dict[str, Any] = {"job_id": "j", "schedule": "rate(5 minutes)", "target": "noop"}
    fields.update(changes)
    return JobDefinition.model_validate(fields)


def job(**changes: Any) -> HeadJob:
    return HeadJob.of_definition(definition(**changes))


def test_a_head_carries_what_its_claim_needs() -> None:
    head = head_item(
        job(),
        T0,
        3,
        through=T0 - 5 * MINUTE,
        shard_count=SHARDS,
        check_delay_ms=DELAY,
        after_run_id="j@prev#3",
    )
    assert head["run_id"] == run_id_for("j", T0, 3)
    assert head["status"] == RunStatus.SCHEDULED.value and head["kind"] == "scheduled"
    assert head["version"] == head["head_version"] == 1
    assert head["scheduled_at"] == T0 and head["epoch"] == 3
    assert head["next_at"] == T0 + 5 * MINUTE
    assert head["next_key"] == run_id_for("j", T0 + 5 * MINUTE, 3) == next_key(head)
    assert head["through"] == T0 - 5 * MINUTE and head["runs_before"] == 0
    assert head["after_run_id"] == "j@prev#3"
    assert head["timing"] == {"schedule": "rate(5 minutes)", "timezone": "UTC"}
    assert head["misfire"]["policy"] == "run_once"
    assert head["def_hash"] == definition().definition_hash()
    assert head["overlap"] == "skip" and head["max_attempts"] == 3
    # Its due entry: the shard of its run id, and its instant plus the check delay (HC7).
    assert head["lease_shard"] == shard_of(head["run_id"], SHARDS)
    assert head["check_at"] == T0 + DELAY == T0 + 30_000
    # Absent values are left out (DynamoDB drops a null attribute), and a head is not history.
    for absent in ("catchups", "claimed_by", "claimed_at", "max_runs", "expires_at", "lease_expires_at"):
        assert absent not in head
    assert not ends_life(head)


@pytest.mark.parametrize("lease_s", [5, 30, 900])
def test_the_check_delay_is_the_dispatch_lease(lease_s: int) -> None:
    # HC7: a head keeps its entry through its claim and start, so the detector first meets a
    # claimed run whose message was lost, or whose worker died at its start, at this delay: it
    # must be the dispatch lease, as today's claim leases a run from its start.
    cfg = SchedulerConfig(dispatch_lease_seconds=lease_s, lease_seconds=max(lease_s, 20))
    assert head_check_delay_ms(cfg) == lease_s * 1000
    assert head_check_at(T0, cfg) == T0 + lease_s * 1000
    head = head_item(
        job(), T0, 1, through=T0 - 1, shard_count=SHARDS, check_delay_ms=head_check_delay_ms(cfg)
    )
    assert head["check_at"] == head_check_at(T0, cfg)


def test_a_head_entry_is_told_by_its_instant_whatever_delay_it_was_written_with() -> None:
    # A head written under an older DispatchLeaseSeconds keeps its check_at: the trigger's filter
    # must not assume the stack's delay now, or the head is never claimed.
    for delay in (5_000, DELAY, MAX_HEAD_CHECK_DELAY_MS):
        entry = head_item(job(), T0, 1, through=T0 - 1, shard_count=SHARDS, check_delay_ms=delay)
        assert is_head_entry(entry)
    far = {**head_item(job(), T0, 1, through=T0 - 1, shard_count=SHARDS, check_delay_ms=DELAY)}
    far["check_at"] = T0 + MAX_HEAD_CHECK_DELAY_MS + 1000  # beyond any dispatch lease: the detector's
    assert not is_head_entry(far)
    # A check_at a recheck or a redispatch moved (a lease end from a clock in ms): not a head's.
    assert not is_head_entry({**far, "check_at": T0 + 37_123})
    legacy = {**far, "check_at": T0 + DELAY, "run_id": str(far["run_id"]).split("#")[0]}
    legacy.pop("epoch")
    assert not is_head_entry(legacy)  # epoch 0: a legacy run's lease


def test_a_head_without_a_chain_end_or_made_by_a_claim() -> None:
    first = head_item(job(), T0, 1, through=T0 - 1, shard_count=SHARDS, check_delay_ms=DELAY)
    assert "after_run_id" not in first
    claimed = head_item(
        job(),
        T0,
        1,
        through=T0 - 1,
        shard_count=SHARDS,
        check_delay_ms=DELAY,
        claimed_by="t/1",
        claimed_at=T0 - 9,
        catchups=2,
    )
    assert claimed["claimed_by"] == "t/1" and claimed["claimed_at"] == T0 - 9 and claimed["catchups"] == 2


def test_a_cron_heads_successor_follows_the_products_schedule() -> None:
    # Weekdays at 09:00 in New York: Friday's successor is Monday's, across the zone's offset.
    cron = job(schedule="cron(0 9 ? * MON-FRI *)", timezone="America/New_York")
    friday = dt_to_ms(datetime(2026, 12, 4, 14, 0, tzinfo=UTC))  # 09:00 EST
    head = head_item(cron, friday, 2, through=friday - 1, shard_count=SHARDS, check_delay_ms=DELAY)
    monday = dt_to_ms(datetime(2026, 12, 7, 14, 0, tzinfo=UTC))
    assert head["next_at"] == monday and head["next_key"] == run_id_for("j", monday, 2)
    assert head["timing"]["timezone"] == "America/New_York"


def test_a_one_time_jobs_head_has_the_end_marker_as_its_successor() -> None:
    once = job(schedule="at(2026-12-05T00:00:00)")
    head = head_item(once, T0, 1, through=T0 - 1, shard_count=SHARDS, check_delay_ms=DELAY)
    assert "next_at" not in head
    assert head["next_key"] == end_run_id("j", T0, 1)
    assert ends_life(head) and parse_run_id(head["next_key"]).kind == "end"


def test_an_end_makes_the_last_occurrences_successor_the_end_marker() -> None:
    ending = job(end=datetime(2026, 12, 5, 0, 7, tzinfo=UTC))
    assert not ends_life(head_item(ending, T0, 1, through=T0 - 1, shard_count=SHARDS, check_delay_ms=DELAY))
    last = head_item(ending, T0 + 5 * MINUTE, 1, through=T0, shard_count=SHARDS, check_delay_ms=DELAY)
    assert ends_life(last) and last["next_key"] == end_run_id("j", T0 + 5 * MINUTE, 1)


def test_max_runs_reached_by_this_run_ends_the_life() -> None:
    limited = job(max_runs=3)
    assert counts_runs(limited) and not counts_runs(job())
    second = head_item(
        limited, T0, 1, through=T0 - 1, shard_count=SHARDS, check_delay_ms=DELAY, runs_before=1
    )
    assert not ends_life(second) and second["max_runs"] == 3 and counts_runs(second)
    third = head_item(limited, T0, 1, through=T0 - 1, shard_count=SHARDS, check_delay_ms=DELAY, runs_before=2)
    # The timing goes on, but the life does not: no next occurrence named, the end marker's key.
    assert ends_life(third) and "next_at" not in third
    assert third["next_key"] == end_run_id("j", T0, 1)


def test_head_job_round_trips_through_a_head() -> None:
    original = job(max_runs=7, overlap="buffer_one", retry={"max_attempts": 5})
    head = head_item(original, T0, 4, through=T0 - 1, shard_count=SHARDS, check_delay_ms=DELAY)
    again = HeadJob.of_head(head)
    assert again == original
    assert head_item(again, T0, 4, through=T0 - 1, shard_count=SHARDS, check_delay_ms=DELAY) == head


def item_at(status: RunStatus, epoch: int | None, **extra: Any) -> dict[str, Any]:
    item: dict[str, Any] = {"job_id": "j", "run_id": run_id_for("j", T0, epoch), "status": status.value}
    item.update(extra)
    return item


def test_what_an_item_at_an_occurrence_key_is() -> None:
    head = head_item(job(), T0, 2, through=T0 - 1, shard_count=SHARDS, check_delay_ms=DELAY)
    successor = head_item(job(), head["next_at"], 2, through=T0, shard_count=SHARDS, check_delay_ms=DELAY)
    closure = {"job_id": "j", "run_id": head["next_key"], "status": "closed", "closes_epoch": 2}
    end = {"job_id": "j", "run_id": end_run_id("j", T0, 2), "status": "end", "kind": "end"}
    assert is_unstarted_occurrence(head) and is_head(head, None) and not is_claimed_run(head, None)
    assert is_claimed_run(head, successor) and not is_head(head, successor)
    assert is_claimed_run(head, end)
    assert not is_claimed_run(head, closure) and not is_head(head, closure)  # closed by a change
    assert is_marker(closure) and is_closure_marker(closure) and not is_end_marker(closure)
    assert is_marker(end) and is_end_marker(end)
    assert not is_record(closure) and not is_record(end) and is_record(head)
    # A cancelled item: a cancelled head from epoch 1 on, legacy history at epoch 0.
    cancelled_head = {**head, "status": "cancelled"}
    legacy = item_at(RunStatus.CANCELLED, None)
    assert is_cancelled_head(cancelled_head) and not is_record(cancelled_head)
    assert epoch_of(legacy) == 0 and not is_cancelled_head(legacy) and is_record(legacy)
    assert epoch_of(item_at(RunStatus.CANCELLED, 5)) == 5  # no epoch attribute: the id's
    # A pending run, a started one, a manual one are not heads.
    assert not is_unstarted_occurrence({**head, "status": "pending"})
    assert not is_unstarted_occurrence({**head, "status": "running"})
    manual = {"job_id": "j", "run_id": "j@manual:r", "status": "scheduled", "kind": "manual"}
    assert not is_unstarted_occurrence(manual)


@pytest.mark.parametrize("runs_before", [0, 4])
def test_runs_before_is_carried_as_given(runs_before: int) -> None:
    head = head_item(
        job(), T0, 1, through=T0 - 1, shard_count=SHARDS, check_delay_ms=DELAY, runs_before=runs_before
    )
    assert head["runs_before"] == runs_before
