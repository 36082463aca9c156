"""Each transition's condition parts, evaluated against items: the races they stop, one by one."""

from __future__ import annotations

from typing import Any

import pytest
from jobsched.core.config import SchedulerConfig
from jobsched.core.run import RunKind, RunStatus
from jobsched.core.transitions import (
    adhoc_run_ops,
    advance_op,
    buffer_at_start_ops,
    claim_ops,
    finish_ops,
    heartbeat_op,
    link_runs,
    new_run_item,
    overtake_op,
    promote_op,
    recheck_buffered_ops,
    recheck_op,
    recover_op,
    register_ops,
    report_op,
    rerun_missed_ops,
    retry_op,
    settle_ops,
    skip_at_start_ops,
    start_op,
)
from jobsched.core.writes import JOBS, RUNS, STATE, Put, Update, WriteOp, conditions_hold, failing_parts

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


def pending_run(scheduled_at: int = NOW, **changes: Any) -> dict[str, Any]:
    item = new_run_item("j", "j@x", scheduled_at, {}, "h1", RunKind.SCHEDULED, NOW, CFG, claimed_by="t/1")
    item.update(changes)
    return item


def test_claim_needs_unchanged_active_job_and_new_run() -> None:
    current = job(latest_run_id="j@prev")
    created = pending_run(after_run_id="j@prev")
    put, advance = claim_ops(current, created, NOW + 60_000, NOW)  # one transaction
    assert isinstance(advance, Update) and isinstance(put, Put)
    # The run joins the chain in the write that moves the job: its link is the end as read.
    assert advance.set["latest_run_id"] == "j@x" and created["after_run_id"] == "j@prev"
    assert holds(advance, current)
    assert not holds(advance, job(version=5))  # a racer advanced it
    assert not holds(advance, job(next_run_at=NOW + 60_000))
    assert not holds(advance, job(status="paused"))
    assert holds(put, None)
    assert not holds(put, created)  # the occurrence exists: the deterministic id wins once
    assert advance.table == STATE and put.table == RUNS
    assert advance.set["next_run_at"] == NOW + 60_000 and advance.set["version"] == 5
    # The dispatch lease, checked by the detector at check_at (the lease index's sort key).
    assert created["status"] == "pending" and created["lease_expires_at"] == NOW + 30_000
    assert created["check_at"] == created["lease_expires_at"]
    assert created["lease_shard"] < CFG.shard_count
    assert created["def_hash"] == "h1" and created["claimed_by"] == "t/1"


def test_claim_of_the_last_occurrence_finishes_the_job() -> None:
    advance = advance_op(job(), NOW, None, NOW)
    assert advance.set["status"] == "finished"
    assert {"next_run_at", "sched_shard"} <= set(advance.remove)


def test_failing_parts_name_the_race() -> None:
    failing = failing_parts(advance_op(job(), NOW, NOW + 1, NOW).condition, job(version=9, status="paused"))
    assert [part.attr for part in failing] == ["version", "status"]
    assert all(part.why for part in failing)


def test_start_fails_on_wrong_version_status_or_missing_run() -> None:
    start = start_op("j@x", 1, "w/1", NOW + 30_000, NOW)
    pending = run(status="pending", version=1)
    assert holds(start, pending)
    assert not holds(start, run(status="pending", version=2))  # a duplicate or stale message
    assert not holds(start, run(status="running", version=1))
    assert not holds(start, run(status="succeeded", version=1))
    assert not holds(start, None)
    assert start.set["version"] == 2 and start.set_if_missing == {"first_started_at": NOW}


def test_a_start_and_a_heartbeat_renew_the_lease_without_moving_the_lease_index() -> None:
    start = start_op("j@x", 1, "w/1", NOW + 30_000, NOW)
    beat = heartbeat_op("j@x", 2, "w/1", NOW + 40_000, NOW)
    for op in (start, beat):
        assert "check_at" not in op.set and "lease_shard" not in op.set  # one write unit each


def test_the_detector_moves_check_at_to_a_renewed_lease_without_a_new_token() -> None:
    alive = run(lease_expires_at=NOW + 25_000, check_at=NOW)
    op = recheck_op(alive)
    assert op.set == {"check_at": NOW + 25_000}
    assert holds(op, alive) and not holds(op, run(version=3)) and not holds(op, run(status="succeeded"))


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
    assert {"lease_expires_at", "check_at", "lease_shard"} <= set(op.remove)  # leaves the lease index


def test_retry_releases_lease_and_bumps_attempt() -> None:
    op = retry_op("j@x", 2, 1, 5_000, "boom", NOW, CFG)
    assert holds(op, run()) and not holds(op, run(version=1))
    assert op.set["attempt"] == 2 and op.set["status"] == "pending" and op.set["version"] == 3
    assert op.set["lease_expires_at"] == op.set["check_at"] == NOW + 5_000 + 30_000
    assert op.remove == ("owner",)


def test_skip_and_buffer_at_start() -> None:
    skip = skip_at_start_ops("j@x", 1, "busy", "j@a", NOW, CFG)[0]
    assert holds(skip, run(status="pending", version=1))
    assert not holds(skip, run(status="pending", version=2))
    assert skip.set["blocked_by"] == "j@a"  # a later run's walk goes straight to the holder
    holder = run(run_id="j@a", status="running")
    park, mark = buffer_at_start_ops("j@x", 1, holder, NOW, CFG)
    assert holds(park, run(status="pending", version=1))
    # A buffered run keeps a lease: the miss detector sees it if it ever waits in vain.
    assert park.set["lease_expires_at"] == park.set["check_at"] == NOW + 30_000 and "lease_shard" in park.set
    assert park.set["blocked_by"] == "j@a" and mark.key == {"job_id": "j", "run_id": "j@a"}
    assert holds(mark, holder) and holds(mark, {**holder, "status": "pending"})
    assert holds(mark, {**holder, "buffered_next": "j@x"})  # a retried write
    assert not holds(mark, {**holder, "buffered_next": "j@b"})  # one waits at most
    assert not holds(mark, {**holder, "status": "succeeded"})  # ended since we read: don't wait


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
    _, after = recover_op(run(status="pending", version=1, recoveries=20), NOW, CFG, max_attempts=3)
    assert after["status"] == "failed"  # redispatched too often: give up, visibly


def test_promotion_happens_once_and_only_behind_its_holder() -> None:
    waiting = run(run_id="j@z", status="buffered", version=2, blocked_by="j@x")
    promote, promoted = promote_op(waiting, "j@x", NOW, CFG)
    assert holds(promote, waiting)
    assert not holds(promote, {**waiting, "status": "pending", "version": 3})  # promoted already
    assert not holds(promote, {**waiting, "blocked_by": "j@y"})  # waits behind another run
    assert promoted["status"] == "pending" and promoted["version"] == 3
    assert promote.set["lease_expires_at"] == promote.set["check_at"] == NOW + 30_000


def test_link_runs_chains_the_runs_that_will_run() -> None:
    pending = [run(run_id=f"j@{i}", status="pending") for i in range(3)]
    missed = missed_record(NOW)
    records = [pending[0], missed, pending[1], pending[2]]
    for record in records:
        record.pop("after_run_id", None)
    assert link_runs("j@before", records) == "j@2"
    assert [r.get("after_run_id") for r in records] == ["j@before", None, "j@0", "j@1"]
    assert link_runs(None, [missed]) is None


def test_an_ad_hoc_run_joins_the_chain_in_one_transaction() -> None:
    state = job(latest_run_id="j@a")
    manual = run(run_id="j@manual:1", status="pending", version=1, after_run_id="j@a", claimed_at=NOW)
    create, join = adhoc_run_ops(manual, state)
    assert holds(create, None) and not holds(create, manual)
    assert holds(join, state) and not holds(join, job(version=state["version"] + 1))
    assert join.set["latest_run_id"] == "j@manual:1" and join.set["version"] == state["version"] + 1
    assert adhoc_run_ops(manual, None) == [create]  # no state item: no chain


def missed_record(t: int) -> dict[str, Any]:
    return new_run_item("j", f"j@{t}", t, None, "h1", RunKind.CATCHUP, NOW, CFG, RunStatus.MISSED, "x")


def test_settle_chunk_starts_at_the_next_occurrence() -> None:
    current = job(next_run_at=NOW)
    records = [missed_record(t) for t in (NOW, NOW + 60_000)]
    advance, *puts = settle_ops(current, records, NOW, NOW + 60_000, NOW + 120_000, 0, NOW)
    assert holds(advance, current)
    assert not holds(advance, job(next_run_at=NOW + 60_000))  # another detector wrote this chunk
    assert not holds(advance, job(version=5))
    assert not holds(advance, job(status="paused"))
    assert all(holds(put, None) for put in puts) and len(puts) == 2
    assert all(p.table == RUNS for p in puts) and advance.table == STATE
    assert advance.set["next_run_at"] == NOW + 120_000 and advance.set["last_scheduled_at"] == NOW + 60_000
    missed = records[0]
    assert missed["status"] == "missed" and "lease_expires_at" not in missed and missed["reason"] == "x"
    # A record carries the definition's digest, not its copy: an outage's chunk stays small.
    assert "definition" not in missed and missed["def_hash"] == "h1"


def test_settle_with_a_switch_writes_the_registration_in_the_same_transaction() -> None:
    current = job(next_run_at=NOW, catchups=2)
    switch = ({"status": "paused", "def_hash": "h2"}, ("next_run_at", "sched_shard", "catchups"))
    advance, _ = settle_ops(current, [missed_record(NOW)], NOW, NOW, NOW + 60_000, 0, NOW, switch)
    assert advance.set["status"] == "paused" and advance.set["def_hash"] == "h2"
    assert "next_run_at" not in advance.set and "catchups" not in advance.set
    assert {"next_run_at", "sched_shard", "catchups"} <= set(advance.remove)
    # The old timing ended inside the chunk, but the registrar's new timing goes on.
    resume = ({"status": "active", "next_run_at": NOW + 5}, ("catchups",))
    advance, _ = settle_ops(current, [missed_record(NOW)], NOW, NOW, None, 0, NOW, resume)
    assert advance.set["status"] == "active" and advance.set["next_run_at"] == NOW + 5
    assert "next_run_at" not in advance.remove


def test_a_settle_chunk_may_have_no_record_left() -> None:
    (advance,) = settle_ops(job(next_run_at=NOW), [], NOW, NOW, NOW + 60_000, 0, NOW)
    assert advance.set["next_run_at"] == NOW + 60_000


def test_registration_is_conditional_on_the_state_as_read() -> None:
    fresh = register_ops(None, "j", {"status": "active"}, ("next_run_at",), NOW)
    assert holds(fresh, None) and not holds(fresh, job())  # two first registrations: one wins
    assert fresh.set["version"] == 1 and fresh.remove == ()
    again = register_ops(job(), "j", {"status": "paused"}, ("next_run_at",), NOW)
    assert holds(again, job()) and not holds(again, job(version=5))
    assert again.set["version"] == 5 and again.remove == ("next_run_at",)
    assert "latest_run_id" not in again.set


def test_the_report_never_recreates_a_deleted_job_item() -> None:
    op = report_op("j", "invalid", ["schedule: bad"], "invalid-1", NOW)
    assert op.table == JOBS and holds(op, {"job_id": "j"}) and not holds(op, None)
    assert op.set["invalid_reasons"] == ["schedule: bad"]
    assert "invalid_reasons" in report_op("j", "active", None, "h", NOW).remove


def test_rerunning_a_missed_occurrence_happens_once() -> None:
    missed = missed_record(NOW)
    op, join = rerun_missed_ops(missed, {"job_id": "j"}, "h2", NOW + 1, CFG, job(latest_run_id="j@a"))
    assert holds(op, missed)
    assert not holds(op, {**missed, "status": "pending", "version": 2})  # a concurrent backfill won
    assert op.set["status"] == "pending" and op.set["version"] == 2 and op.set["kind"] == "backfill"
    assert "lease_expires_at" in op.set and "expires_at" in op.remove
    assert op.set["after_run_id"] == "j@a" and join.set["latest_run_id"] == missed["run_id"]


def test_a_buffered_run_waiting_for_a_live_holder_renews_its_lease() -> None:
    waiting = run(run_id="j@z", status="buffered", version=2, blocked_by="j@x")
    renew, promoted = recheck_buffered_ops(waiting, run(buffered_next="j@z"), NOW, CFG)
    assert promoted is None and renew.set["lease_expires_at"] == renew.set["check_at"] == NOW + 30_000
    assert holds(renew, waiting)
    assert not holds(renew, {**waiting, "version": 3})  # promoted meanwhile


def test_a_stranded_buffered_run_is_promoted() -> None:
    waiting = run(run_id="j@z", status="buffered", version=2, blocked_by="j@x")
    for holder in (run(status="succeeded", buffered_next="j@z"), run(), None):
        promote, promoted = recheck_buffered_ops(waiting, holder, NOW, CFG)
        assert promoted is not None and promoted["status"] == "pending"
        assert holds(promote, waiting) and promote.table == RUNS
        assert not holds(promote, {**waiting, "lease_expires_at": NOW + 99_000})  # renewed meanwhile


def test_an_advance_past_a_record_someone_else_made_leaves_the_chains_end() -> None:
    advance = advance_op(job(latest_run_id="j@b"), NOW, NOW + 60_000, NOW)  # a backfill's record
    assert "latest_run_id" not in advance.set and holds(advance, job()) and not holds(advance, job(version=5))


def test_a_settled_chunk_links_its_runs_and_moves_the_chains_end() -> None:
    late = new_run_item("j", "j@1", NOW, {"job_id": "j"}, "h1", RunKind.CATCHUP, NOW, CFG)
    ops = settle_ops(job(latest_run_id="j@0"), [missed_record(NOW - 1), late], NOW - 1, NOW, None, 1, NOW)
    assert late["after_run_id"] == "j@0" and ops[0].set["latest_run_id"] == "j@1"


# --- The successor claim's claimed run, ``scheduled`` until it starts (build plan S2) -------------
# No write makes one yet: a head of the successor claim (docs/proposals/successor-claim-build.md
# §0) carries no ``lease_expires_at`` (its ``check_at`` is its instant's, HC7), so these runs have
# none. Each test fails with its condition as it was (``pending`` alone).


def scheduled_run(**changes: Any) -> dict[str, Any]:
    item = run(status="scheduled", version=1, scheduled_at=NOW + 60_000)
    for name in ("owner", "lease_expires_at"):
        item.pop(name)
    item.update(changes)
    return item


def test_a_scheduled_run_starts_as_a_pending_one_does() -> None:
    """§1 "start": the model's ``start.status_scheduled`` (status ``scheduled``, or ``pending``)."""
    start = start_op("j@x", 1, "w/1", NOW + 30_000, NOW)
    assert holds(start, scheduled_run()) and holds(start, run(status="pending", version=1))
    assert not holds(start, scheduled_run(version=2))  # a stale message: a relink, a redispatch
    for status in ("running", "closed", "end", "cancelled", "missed"):  # started, or not a run
        assert not holds(start, scheduled_run(status=status))
    assert start.set["status"] == "running" and start.set["version"] == 2


def test_a_scheduled_run_not_yet_due_is_overtaken() -> None:
    """§1 "overtake", W3: the starter marks the claimed run it passed over, ``scheduled``."""
    passed = scheduled_run()
    mark = overtake_op(passed, "j@manual:1")
    assert holds(mark, passed) and mark.set == {"overtaken_by": "j@manual:1"}
    assert not holds(mark, {**passed, "status": "running", "version": 2})  # it started since the walk
    assert not holds(mark, {**passed, "overtaken_by": "j@manual:2"})


def test_a_scheduled_run_is_skipped_or_waits_at_its_start() -> None:
    """§1 "skip, buffer, buffer unnamed": the run's own condition takes ``scheduled``."""
    (skip,) = skip_at_start_ops("j@x", 1, "busy", "j@a", NOW, CFG)
    assert holds(skip, scheduled_run()) and not holds(skip, scheduled_run(version=2))
    holder = run(run_id="j@a", status="running")
    for register in (True, False):  # named on the holder, or unnamed (buffer_all)
        own = buffer_at_start_ops("j@x", 1, holder, NOW, CFG, register=register)[0]
        assert holds(own, scheduled_run()) and not holds(own, scheduled_run(version=2))
        assert own.set["status"] == "buffered" and own.set["check_at"] == NOW + 30_000


def test_a_scheduled_run_holds_the_turn_for_the_run_waiting_behind_it() -> None:
    """§1 "buffer", W15: the holder may be a claimed run that has not started (``buffer_all``: a
    manual run behind a claimed occurrence not yet due waits behind it)."""
    holder = scheduled_run(run_id="j@a")
    _, mark = buffer_at_start_ops("j@manual:1", 1, holder, NOW, CFG)
    assert holds(mark, holder) and mark.set == {"buffered_next": "j@manual:1"}
    assert not holds(mark, {**holder, "status": "succeeded"})  # it ended since the walk
    assert not holds(mark, {**holder, "status": "closed"})  # not a run: nobody would promote


def test_cancel_other_asks_a_scheduled_holder_to_stop_and_its_start_is_refused() -> None:
    """W16: ``cancel_other`` behind a claimed run not started marks it ``cancel_requested`` at the
    token read; its start is refused, and the recovery ends it as cancelled (§1 "recover", the
    model's ``end_cancelled``), conditional on its token: a head has no lease to compare."""
    holder = scheduled_run(run_id="j@a")
    _, mark = buffer_at_start_ops("j@manual:1", 1, holder, NOW, CFG, cancel=True, alone=True)
    assert holds(mark, holder) and not holds(mark, {**holder, "version": 2})
    assert mark.set["cancel_requested"] == "j@manual:1"
    asked = {**holder, "buffered_next": "j@manual:1", "cancel_requested": "j@manual:1"}
    start = start_op("j@a", 1, "w/1", NOW + 30_000, NOW)
    assert [part.attr for part in failing_parts(start.condition, asked)] == ["cancel_requested"]
    end, after = recover_op(asked, NOW + 90_000, CFG, max_attempts=3)
    assert holds(end, asked) and not holds(end, {**asked, "version": 2})
    assert not holds(end, {**asked, "status": "running", "version": 2})
    assert end.set["status"] == after["status"] == "failed" and end.set["version"] == 2
    assert after["last_error"].startswith("cancelled: j@manual:1 replaces it")
    assert {"check_at", "lease_shard"} <= set(end.remove)  # out of the index
    with pytest.raises(ValueError, match="redispatched"):  # a lost dispatch is not this write's
        recover_op(holder, NOW + 90_000, CFG, max_attempts=3)
