"""Why the head's condition parts that no explored set catches alone
(tools/jobsched_tools/explore/sets_successor_reads.py ``UNCAUGHT``) stop nothing their partners
do not: each switched off alone (``sim/mutants.switched_off``, the explorer's own switch), the
race it names meets another part on the product's in-memory store, or lands harmlessly; and with
the partner off too, the race goes through (the explorer's ``PAIRS`` show what that breaks)."""

from __future__ import annotations

from typing import Any

import pytest
from head_items import CFG, SECOND, T0, get, head, store_with
from jobsched.core.errors import ConditionFailed
from jobsched.core.head import head_check_delay_ms
from jobsched.core.run import RunStatus
from jobsched.core.transitions.head_adhoc import relink_head_ops
from jobsched.core.transitions.head_claim import claim_head_op
from jobsched.core.transitions.head_recover import (
    DueVerdict,
    judge_due_entry,
    recheck_claimed_op,
    redispatch_head_op,
)
from jobsched.core.transitions.start import start_op
from jobsched.core.writes import Item
from jobsched_tools.explore.sets_successor_reads import ALONE, PAIRS, UNCAUGHT
from jobsched_tools.sim.mutants import SUCCESSOR_SWITCHABLE, switched_off

SKEW = CFG.clock_skew_allowance_ms
LEASE = CFG.dispatch_lease_seconds * SECOND
MET = T0 + head_check_delay_ms(CFG) + SKEW + 1  # the detector's sweep first meets a head's entry


def claimed(claimed_at: int, **changes: Any) -> tuple[Item, Item]:
    n = {**head(), **changes}
    return n, claim_head_op(n, claimed_at, "t/1", CFG).item


def refused(store: Any, op: Any) -> str:
    """The why of the first part that refused ``op`` (its model tag, or the helper's)."""
    with pytest.raises(ConditionFailed) as lost:
        store.write([op] if not isinstance(op, list) else op)
    failing = [part for part in lost.value.op.condition if not part.holds(lost.value.current or {})]
    return failing[0].why


def test_every_uncaught_part_is_switchable_reasoned_and_reached() -> None:
    assert set(UNCAUGHT) <= set(SUCCESSOR_SWITCHABLE)
    assert set(ALONE) == set(UNCAUGHT)
    for part, reason in UNCAUGHT.items():
        if "redundant" in reason:
            assert any(part in pair for pair in PAIRS), f"{part}: a redundancy without its pair"


# --- recheck_claimed_op (HC8) -----------------------------------------------------------------------


def _rechecked() -> tuple[Item, Item, int]:
    """00:00 claimed late (00:00:50): the detector meets it before its dispatch lease lapses."""
    n, successor = claimed(T0 + 50 * SECOND)
    verdict = judge_due_entry(n, successor, MET, CFG)
    assert verdict.verdict is DueVerdict.RECHECK and verdict.lease_until is not None
    return n, successor, verdict.lease_until


def test_a_recheck_without_its_status_part_is_stopped_by_the_token_a_start_moved() -> None:
    n, successor, lapse = _rechecked()
    started = {**n, "status": "running", "version": 2, "owner": "w/1", "lease_expires_at": MET + 30 * SECOND}
    with switched_off("recheck_claimed_op:_run_status"):
        op = recheck_claimed_op(n, lapse)
    assert refused(store_with(started, successor), op).startswith("fencing")
    committed = {k: v for k, v in started.items() if k not in ("check_at", "lease_expires_at", "owner")}
    assert refused(store_with({**committed, "status": "succeeded"}, successor), op).startswith("fencing")
    # Without the token part too, the recheck puts a due entry back on the committed run (the
    # explorer's late-claim-recheck reports finished_in_due).
    with switched_off("recheck_claimed_op:_run_status", "recheck_claimed_op:_run_token"):
        both = recheck_claimed_op(n, lapse)
    store = store_with({**committed, "status": "succeeded"}, successor)
    store.write([both])
    assert get(store, n["run_id"])["check_at"] == lapse  # type: ignore[index]


def test_a_recheck_without_its_token_part_moves_a_redispatched_runs_check_earlier_only() -> None:
    n, successor, lapse = _rechecked()
    later = lapse + SKEW + 1
    redispatch, after = redispatch_head_op(n, later, CFG)  # another detector, once it lapsed
    store = store_with(n, successor)
    store.write([redispatch])
    with switched_off("recheck_claimed_op:_run_token"):
        stale = recheck_claimed_op(n, lapse)
    store.write([stale])  # lands: the run is still scheduled
    run = get(store, n["run_id"])
    assert run is not None and run["version"] == after["version"]
    assert run["check_at"] == lapse < after["check_at"]  # looked at earlier, not later
    assert judge_due_entry(run, successor, after["check_at"] + SKEW, CFG).verdict is DueVerdict.REDISPATCH
    # A start since the read: the status part refuses it.
    started = {**run, "status": "running", "version": after["version"] + 1}
    assert refused(store_with(started, successor), stale).startswith("the run must still be scheduled")


# --- relink_head_ops (HC3) --------------------------------------------------------------------------


def test_a_relink_without_head_scheduled_is_stopped_by_the_successor_check() -> None:
    """Every write that takes a head out of ``scheduled`` fills its successor key first (the
    claim's put before the start) or in the same transaction (a settle, a change's marker)."""
    n, successor = claimed(T0 - 30 * SECOND)
    with switched_off("relink_head_ops:_head_scheduled"):
        ops = relink_head_ops(n, "j@manual:m", "adhoc")
    started = {**n, "status": "running"}  # at the version read: only the status part could tell
    assert refused(store_with(started, successor), ops).startswith("adhoc.successor_absent")
    marker = {"job_id": "j", "run_id": n["next_key"], "status": "closed", "closes_epoch": 1, "closed_by": 2}
    assert refused(store_with({**n, "status": "cancelled"}, marker), ops).startswith("adhoc.successor_absent")
    with switched_off("relink_head_ops:_head_scheduled", "relink_head_ops:_relink_successor_absent"):
        both = relink_head_ops(n, "j@manual:m", "adhoc")
    store = store_with(started, successor)
    store.write(both)  # a run joins ahead of a started run (tick-manual: adhoc_behind_claimed)
    assert get(store, n["run_id"])["after_run_id"] == "j@manual:m"  # type: ignore[index]


# --- redispatch_head_op (HC7) -----------------------------------------------------------------------


def test_a_redispatch_without_its_lease_part_is_stopped_by_the_token_the_other_moved() -> None:
    n, successor = claimed(T0 - 30 * SECOND)
    store = store_with(n, successor)
    first, once = redispatch_head_op(n, MET, CFG)
    store.write([first])
    again = MET + LEASE + SKEW
    a, _ = redispatch_head_op(once, again, CFG)  # two detectors read the redispatched run
    with switched_off("redispatch_head_op:_lease_as_read"):
        b, _ = redispatch_head_op(once, again + 1, CFG)
    store.write([a])
    assert refused(store, b).startswith("redispatch.version")


def test_a_redispatch_read_before_a_stop_request_lands_and_its_start_is_refused() -> None:
    n, successor = claimed(T0 - 30 * SECOND)
    with switched_off("redispatch_head_op:_not_asked_to_stop"):
        stale, after = redispatch_head_op(n, MET, CFG)
    asked = {**n, "cancel_requested": "j@manual:m"}  # cancel_other's request moves no token
    store = store_with(asked, successor)
    store.write([stale])
    token = int(after["version"])
    start = start_op(n["run_id"], token, "w/1", MET + 30 * SECOND, MET)
    assert refused(store, start).startswith("cancel_other")
    # The next sweep reads the request and ends the run: never started, never run.
    run = get(store, n["run_id"])
    assert run is not None
    end, ended = redispatch_head_op(run, int(run["check_at"]) + SKEW + 1, CFG)
    store.write([end])
    assert get(store, n["run_id"])["status"] == ended["status"] == RunStatus.FAILED.value  # type: ignore[index]
    assert str(ended["last_error"]).startswith("cancelled: j@manual:m")
