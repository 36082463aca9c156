"""The detector under the successor claim (core/transitions/head_recover.py): HC7's judgement of a
``due`` entry by its successor key, HC8's recheck of a late claim, and the redispatch of a claimed
``scheduled`` run whose message was lost, applied to the product's in-memory store."""

from __future__ import annotations

from typing import Any

import pytest
from head_items import CFG, MINUTE, SECOND, T0, get, head, job, store_with, without
from jobsched.core.errors import ConditionFailed
from jobsched.core.head import head_check_delay_ms
from jobsched.core.run import RunStatus, end_run_id
from jobsched.core.transitions.head_claim import claim_head_op, claimed_run_message
from jobsched.core.transitions.head_recover import (
    DueVerdict,
    judge_due_entry,
    recheck_claimed_op,
    redispatch_head_op,
)
from jobsched.core.transitions.recover import MAX_REDISPATCHES
from jobsched.core.writes import Item

SKEW = CFG.clock_skew_allowance_ms
LEASE = CFG.dispatch_lease_seconds * SECOND
CHECK = T0 + head_check_delay_ms(CFG)  # a head's check_at
MET = CHECK + SKEW + 1  # the first time the detector's sweep (below now - skew) meets it


def claimed(claimed_at: int = T0 - 30 * SECOND, **changes: Any) -> tuple[Item, Item]:
    """A head N (with ``changes``) and the successor its claim at ``claimed_at`` put."""
    n = {**head(), **changes}
    return n, claim_head_op(n, claimed_at, "t/1", CFG).item


def test_an_entry_that_moved_since_the_index_read_is_left() -> None:
    n = head()
    assert judge_due_entry(None, None, MET, CFG).verdict is DueVerdict.MOVED
    assert judge_due_entry(n, None, CHECK + SKEW - 1, CFG).verdict is DueVerdict.MOVED
    committed = {k: v for k, v in n.items() if k != "check_at"} | {"status": "succeeded"}
    assert judge_due_entry(committed, None, MET, CFG).verdict is DueVerdict.MOVED


def test_what_is_not_a_head_or_a_claimed_run_is_todays_check() -> None:
    n = head()
    for status in ("running", "pending", "buffered"):
        assert judge_due_entry({**n, "status": status}, None, MET, CFG).verdict is DueVerdict.OTHER
    manual = {"job_id": "j", "run_id": "j@manual:r", "status": "scheduled", "kind": "manual", "check_at": T0}
    assert judge_due_entry(manual, None, MET, CFG).verdict is DueVerdict.OTHER


def test_an_unclaimed_head_is_the_triggers_within_grace_and_settled_past_it() -> None:
    n = head(the_job=job(misfire={"grace_seconds": 60}))
    assert judge_due_entry(n, None, MET, CFG).verdict is DueVerdict.TRIGGERS
    assert judge_due_entry(n, None, T0 + 60 * SECOND, CFG).verdict is DueVerdict.TRIGGERS
    assert judge_due_entry(n, None, T0 + 60 * SECOND + 1, CFG).verdict is DueVerdict.SETTLE
    # A grace shorter than the check delay: settled as soon as it is met (HC7's cost, §6 q5).
    short = head(the_job=job(misfire={"grace_seconds": 5}))
    assert judge_due_entry(short, None, MET, CFG).verdict is DueVerdict.SETTLE


def test_a_head_closed_by_a_change_is_left() -> None:
    n = head()
    marker = {"job_id": "j", "run_id": n["next_key"], "status": "closed", "closes_epoch": 1, "closed_by": 2}
    assert judge_due_entry(n, marker, T0 + 10 * MINUTE, CFG).verdict is DueVerdict.CLOSED
    # Taken for a claim (the model's mutant 3), the redispatch's parts still refuse the change's
    # closed head: a saving, not a fence.
    closed = {**n, "status": "cancelled", "version": 2}
    store = store_with(closed)
    with pytest.raises(ConditionFailed) as lost:
        store.write([redispatch_head_op(n, T0 + 10 * MINUTE, CFG)[0]])
    assert lost.value.op.condition[0].why.startswith("redispatch.status_scheduled")


def test_a_run_claimed_ahead_whose_message_was_lost_is_redispatched_when_first_met() -> None:
    n, successor = claimed()
    verdict = judge_due_entry(n, successor, MET, CFG)
    assert verdict.verdict is DueVerdict.REDISPATCH and verdict.lease_until == T0 + LEASE
    marker_successor = {
        "job_id": "j",
        "run_id": end_run_id("j", T0, 1),
        "status": "end",
        "claimed_at": T0 - 1,
    }
    assert judge_due_entry(n, marker_successor, MET, CFG).verdict is DueVerdict.REDISPATCH


def test_hc8_a_late_claim_is_rechecked_once_then_redispatched() -> None:
    n, successor = claimed(claimed_at=T0 + 50 * SECOND)  # the trigger behind, within grace
    store = store_with(n, successor)
    verdict = judge_due_entry(n, successor, MET, CFG)
    assert verdict.verdict is DueVerdict.RECHECK and verdict.lease_until == T0 + 50 * SECOND + LEASE
    assert verdict.lease_until is not None
    store.write([recheck_claimed_op(n, verdict.lease_until)])
    moved = get(store, n["run_id"])
    assert moved is not None and moved["check_at"] == T0 + 80 * SECOND and moved["version"] == 1
    assert judge_due_entry(moved, successor, MET, CFG).verdict is DueVerdict.MOVED
    later = T0 + 80 * SECOND + SKEW
    assert judge_due_entry(moved, successor, later, CFG).verdict is DueVerdict.REDISPATCH
    # A start since the read: the recheck is refused (today's recheck parts).
    started = {**moved, "status": "running", "version": 2}
    store = store_with(started)
    with pytest.raises(ConditionFailed):
        store.write([recheck_claimed_op(n, verdict.lease_until)])


def test_a_start_window_delays_the_lapse() -> None:
    n, successor = claimed()
    window = {"jitter_seconds": 600}
    verdict = judge_due_entry(n, successor, MET, CFG, definition=window)
    assert verdict.verdict is DueVerdict.RECHECK and verdict.lease_until is not None
    assert T0 + LEASE <= verdict.lease_until <= T0 + 600 * SECOND + LEASE


def test_the_redispatch_keeps_the_run_scheduled_with_a_new_token() -> None:
    n, successor = claimed()
    store = store_with(n, successor)
    op, after = redispatch_head_op(n, MET, CFG)
    store.write([op])
    again = get(store, n["run_id"])
    assert again is not None and again == {**after, "recovered_at": MET}
    assert again["status"] == RunStatus.SCHEDULED.value
    assert again["version"] == again["head_version"] == 2 and again["recoveries"] == 1
    assert again["check_at"] == again["lease_expires_at"] == MET + LEASE
    message = claimed_run_message(again, {"target": "noop"})
    assert message.version == 2 and message.after_run_id == n.get("after_run_id")
    # Met again after that lease: its own lease decides, and the next redispatch holds it as read.
    met_again = MET + LEASE + SKEW
    assert judge_due_entry(again, successor, met_again, CFG).verdict is DueVerdict.REDISPATCH
    second, _ = redispatch_head_op(again, met_again, CFG)
    assert any(part.attr == "lease_expires_at" for part in second.condition)
    store.write([second])
    assert get(store, n["run_id"])["version"] == 3  # type: ignore[index]


def test_a_run_started_since_the_read_is_not_redispatched() -> None:
    n, _ = claimed()
    started = {**n, "status": "running", "version": 2, "owner": "w/1"}  # its message came late
    store = store_with(started)
    op, _ = redispatch_head_op(n, MET, CFG)
    with pytest.raises(ConditionFailed):
        store.write([op])
    # The status alone refuses it too (the version is the other part's).
    with pytest.raises(ConditionFailed) as lost:
        store.write(without([op], "redispatch.version"))
    assert lost.value.op.condition[0].why.startswith("redispatch.status_scheduled")
    # Without both the running run is made scheduled again under a new token: its worker's
    # commit is fenced out and the run is sent twice.
    store.write(without([op], "redispatch."))
    assert get(store, n["run_id"])["recovered_at"] == MET  # type: ignore[index]


def test_a_racing_redispatch_or_relink_since_the_read_wins() -> None:
    n, _ = claimed()
    relinked = {**n, "version": 2, "head_version": 2, "after_run_id": "j@manual:m"}
    store = store_with(relinked)
    op, _ = redispatch_head_op(n, MET, CFG)
    with pytest.raises(ConditionFailed) as lost:
        store.write([op])
    assert any(part.why.startswith("redispatch.version") for part in lost.value.op.condition)
    failing = [part for part in op.condition if not part.holds(relinked)]
    assert [part.why.split(":")[0] for part in failing] == ["redispatch.version"]
    # Without it the stale read's message would carry the old link, beside the manual run.
    store.write(without([op], "redispatch.version"))
    assert get(store, n["run_id"])["recovered_at"] == MET  # type: ignore[index]


def test_redispatches_run_out_and_the_run_fails() -> None:
    n, _ = claimed()
    tired = {**n, "recoveries": MAX_REDISPATCHES}
    store = store_with(tired)
    op, after = redispatch_head_op(tired, MET, CFG)
    store.write([op])
    failed = get(store, n["run_id"])
    assert failed is not None and failed["status"] == "failed" == after["status"]
    assert "check_at" not in failed and "lease_shard" not in failed and "expires_at" in failed


def test_a_run_asked_to_stop_ends_cancelled_and_a_late_request_fails_the_redispatch() -> None:
    n, _ = claimed()
    asked = {**n, "cancel_requested": "j@manual:m"}
    op, after = redispatch_head_op(asked, MET, CFG)
    store = store_with(asked)
    store.write([op])
    assert get(store, n["run_id"])["status"] == "failed"  # type: ignore[index]
    assert str(after["last_error"]).startswith("cancelled: j@manual:m")
    op, _ = redispatch_head_op(n, MET, CFG)  # read before the request landed
    store = store_with(asked)
    with pytest.raises(ConditionFailed):
        store.write([op])
