"""Each transition's condition parts, evaluated against items: the races they stop, one by one."""

from __future__ import annotations

from typing import Any

from jobsched.core.config import SchedulerConfig
from jobsched.core.job import OverlapPolicy
from jobsched.core.run import RunKind, RunStatus
from jobsched.core.transitions import (
    advance_only_ops,
    buffer_at_start_ops,
    claim_ops,
    finish_ops,
    heartbeat_op,
    misfire_ops,
    new_run_item,
    recover_op,
    retry_op,
    skip_at_start_ops,
    slot_release_ops,
    start_ops,
)
from jobsched.core.writes import JOBS, RUNS, Put, Update, WriteOp, conditions_hold, failing_parts

CFG = SchedulerConfig()
NOW = 1_796_083_200_000


def holds(op: WriteOp, item: dict[str, Any] | None) -> bool:
    return conditions_hold(op.condition, item)


def job(**changes: Any) -> dict[str, Any]:
    item: dict[str, Any] = {"job_id": "j", "version": 4, "status": "active", "next_run_at": NOW}
    item.update(changes)
    return item


def run(**changes: Any) -> dict[str, Any]:
    item: dict[str, Any] = {
        "run_id": "j@x",
        "job_id": "j",
        "status": "running",
        "version": 2,
        "attempt": 1,
        "owner": "w/1",
        "lease_expires_at": NOW,
        "definition": {},
    }
    item.update(changes)
    return item


def test_claim_needs_unchanged_active_job_and_new_run() -> None:
    current = job()
    ops, created = claim_ops(current, {}, "j@x", NOW, NOW + 60_000, NOW, CFG)
    advance, put = ops
    assert isinstance(advance, Update) and isinstance(put, Put)
    assert holds(advance, current)
    assert not holds(advance, job(version=5))  # a racer advanced it
    assert not holds(advance, job(next_run_at=NOW + 60_000))
    assert not holds(advance, job(status="paused"))
    assert holds(put, None)
    assert not holds(put, created)  # the occurrence exists: the deterministic id wins once
    assert advance.set["next_run_at"] == NOW + 60_000 and advance.set["version"] == 5
    assert created["status"] == "pending" and created["lease_expires_at"] == NOW + 60_000
    assert created["lease_shard"] < CFG.shard_count


def test_claim_of_the_last_occurrence_finishes_the_job() -> None:
    ops, _ = claim_ops(job(), {}, "j@x", NOW, None, NOW, CFG)
    advance = ops[0]
    assert isinstance(advance, Update)
    assert advance.set["status"] == "finished"
    assert {"next_run_at", "sched_shard"} <= set(advance.remove)
    assert advance_only_ops(job(), NOW, None, NOW, CFG)[0].condition == advance.condition


def test_failing_parts_name_the_race() -> None:
    ops, _ = claim_ops(job(), {}, "j@x", NOW, NOW + 1, NOW, CFG)
    failing = failing_parts(ops[0].condition, job(version=9, status="paused"))
    assert [part.attr for part in failing] == ["version", "status"]
    assert all(part.why for part in failing)


def test_start_fails_on_wrong_version_status_or_missing_run() -> None:
    ops = start_ops("j@x", "j", 1, OverlapPolicy.SKIP, "w/1", NOW + 30_000, NOW)
    start, slot = ops
    pending = run(status="pending", version=1)
    assert holds(start, pending)
    assert not holds(start, run(status="pending", version=2))  # a duplicate or stale message
    assert not holds(start, run(status="running", version=1))
    assert not holds(start, run(status="succeeded", version=1))
    assert not holds(start, None)
    assert start.set["version"] == 2 and start.set_if_missing == {"first_started_at": NOW}
    assert holds(slot, job())
    assert holds(slot, job(active_run_id="j@x"))
    assert not holds(slot, job(active_run_id="j@other"))
    assert not holds(slot, None)  # a deleted job: the worker starts without the slot


def test_start_under_allow_takes_no_slot() -> None:
    assert len(start_ops("j@x", "j", 1, OverlapPolicy.ALLOW, "w", NOW, NOW)) == 1
    assert len(start_ops("j@x", "j", 1, OverlapPolicy.SKIP, "w", NOW, NOW, use_slot=False)) == 1


def test_heartbeat_only_by_the_holder() -> None:
    op = heartbeat_op("j@x", 2, "w/1", NOW + 30_000, NOW)
    assert holds(op, run())
    assert not holds(op, run(version=3))  # recovered meanwhile
    assert not holds(op, run(owner="w/2"))
    assert not holds(op, run(status="pending"))


def test_commit_is_fenced() -> None:
    op = finish_ops("j@x", 2, RunStatus.RUNNING, RunStatus.SUCCEEDED, NOW, CFG)
    assert holds(op, run())
    assert not holds(op, run(version=3))
    assert not holds(op, run(status="pending"))
    assert op.set["status"] == "succeeded" and op.set["expires_at"] == NOW // 1000 + 30 * 86_400
    assert "lease_expires_at" in op.remove


def test_retry_releases_lease_and_bumps_attempt() -> None:
    op = retry_op("j@x", 2, 1, 5_000, "boom", NOW, CFG)
    assert holds(op, run()) and not holds(op, run(version=1))
    assert op.set["attempt"] == 2 and op.set["status"] == "pending" and op.set["version"] == 3
    assert op.set["lease_expires_at"] == NOW + 5_000 + 60_000
    assert op.remove == ("owner",)


def test_skip_and_buffer_at_start() -> None:
    skip = skip_at_start_ops("j@x", 1, "busy", NOW, CFG)[0]
    assert holds(skip, run(status="pending", version=1))
    assert not holds(skip, run(status="pending", version=2))
    held = job(active_run_id="j@a")
    park, mark = buffer_at_start_ops("j@x", 1, held, NOW)
    assert holds(park, run(status="pending", version=1))
    assert holds(mark, held)
    assert not holds(mark, job(active_run_id="j@a", buffered_run_id="j@b"))  # one waits at most
    assert not holds(mark, job())  # the holder finished since we read: don't wait for nothing


def test_recover_fails_if_a_heartbeat_renewed_the_lease() -> None:
    expired = run()
    op, after = recover_op(expired, NOW + 40_000, CFG, max_attempts=3)
    assert holds(op, expired)
    assert not holds(op, run(lease_expires_at=NOW + 30_000))  # the worker is alive
    assert not holds(op, run(version=3))
    assert not holds(op, run(status="succeeded"))
    assert after["attempt"] == 2 and after["version"] == 3 and after["status"] == "pending"
    assert op.set["recoveries"] == 1 and op.remove == ("owner",)


def test_recover_pending_keeps_attempt_and_last_attempt_fails() -> None:
    _, after = recover_op(run(status="pending", version=1), NOW, CFG, max_attempts=1)
    assert after["attempt"] == 1 and after["status"] == "pending"
    op, after = recover_op(run(attempt=3), NOW, CFG, max_attempts=3)
    assert after["status"] == "failed"
    assert op.set["status"] == "failed" and "lease expired" in op.set["last_error"]
    assert any(part.attr == "lease_expires_at" for part in op.condition)
    _, after = recover_op(run(status="pending", version=1, recoveries=10), NOW, CFG, max_attempts=3)
    assert after["status"] == "failed"  # redispatched too often: give up, visibly


def test_slot_release_conditions() -> None:
    holder = job(active_run_id="j@x")
    ops, promoted = slot_release_ops(holder, "j@x", None, NOW, CFG)
    (release,) = ops
    assert promoted is None
    assert holds(release, holder)
    assert not holds(release, job(active_run_id="j@y"))  # not ours to release
    assert not holds(release, job(active_run_id="j@x", buffered_run_id="j@z"))  # would strand it
    assert release.remove == ("active_run_id",)
    assert slot_release_ops(job(active_run_id="j@y"), "j@x", None, NOW, CFG) == ([], None)


def test_slot_release_promotes_the_buffered_run() -> None:
    holder = job(active_run_id="j@x", buffered_run_id="j@z")
    waiting = run(run_id="j@z", status="buffered", version=2)
    (release, promote), promoted = slot_release_ops(holder, "j@x", waiting, NOW, CFG)
    assert holds(release, holder)
    assert not holds(release, job(active_run_id="j@x", buffered_run_id="j@other"))
    assert release.set["active_run_id"] == "j@z"
    assert holds(promote, waiting) and not holds(promote, run(run_id="j@z", status="pending", version=2))
    assert promoted is not None and promoted["status"] == "pending" and promoted["version"] == 3
    # The buffered run is gone (or no longer waiting): free the slot and forget it.
    (release,), promoted = slot_release_ops(holder, "j@x", None, NOW, CFG)
    assert promoted is None and set(release.remove) == {"active_run_id", "buffered_run_id"}


def test_slot_release_without_a_read_assumes_the_common_case() -> None:
    (release,), _ = slot_release_ops(None, "j@x", None, NOW, CFG)
    assert isinstance(release, Update) and release.key == {"job_id": "j"}
    assert holds(release, job(active_run_id="j@x"))
    assert not holds(release, job(active_run_id="j@x", buffered_run_id="j@z"))


def test_misfire_chunk_starts_at_the_next_occurrence() -> None:
    current = job(next_run_at=NOW)
    records = [
        (
            new_run_item("j", f"j@{t}", t, {}, RunKind.CATCHUP, NOW, CFG, RunStatus.MISSED, "x"),
            RunStatus.MISSED,
        )
        for t in (NOW, NOW + 60_000)
    ]
    advance, *puts = misfire_ops(current, records, NOW + 120_000, 0, NOW)
    assert holds(advance, current)
    assert not holds(advance, job(next_run_at=NOW + 60_000))  # another detector wrote this chunk
    assert not holds(advance, job(version=5))
    assert all(holds(put, None) for put in puts) and len(puts) == 2
    assert all(p.table == RUNS for p in puts) and advance.table == JOBS
    missed = records[0][0]
    assert missed["status"] == "missed" and "lease_expires_at" not in missed and missed["reason"] == "x"
