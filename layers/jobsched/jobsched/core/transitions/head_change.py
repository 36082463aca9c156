"""The change transaction of the successor claim (shape f; build plan §1, rows "change" and "first
registration"; the model's ``change`` in tools/jobsched_tools/successor/writes.py), and what the
registrar does when it loses.

``head_change_ops`` writes a ``HeadChangePlan`` (core/head_change.py) as one transaction of at most
four items, each conditional on a named part (conditions.py, "d2change"):

- the state: ``change.state_version`` (a first registration: ``change.state_absent``);
- the closed head: ``change.head_scheduled`` and ``change.head_version`` (the parts the settle and
  the ad-hoc relink share, conditions.py ``_head_scheduled``/``_head_version``); its ``due`` entry goes
  (``check_at`` and ``lease_shard`` removed), so no trigger or detector reads it again;
- the closure marker at the head's successor key: ``change.marker_absent``, the change's
  linearisation point against a claim of the head (both write that key; one loses);
- the new head at epoch E: ``change.new_head_free``.

Nothing in the services calls these yet (the build's later wave wires them behind a switch, S8).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jobsched.core.config import SchedulerConfig
from jobsched.core.head import (
    epoch_of,
    is_closure_marker,
    is_end_marker,
    is_unstarted_occurrence,
)
from jobsched.core.head_change import HeadChangePlan
from jobsched.core.run import RunStatus, run_key
from jobsched.core.transitions.conditions import (
    _change_marker_absent,
    _change_new_head_free,
    _change_state_absent,
    _change_state_version,
    _head_scheduled,
    _head_version,
    retention_expiry,
)
from jobsched.core.writes import RUNS, STATE, Item, Put, Update, WriteOp

# The head's ``due`` index entry (§0 "The due index"): removed when the change closes it.
DUE_ATTRIBUTES = ("check_at", "lease_shard")

STATE_LABEL = "change state"
CLOSE_LABEL = "change closes head"
MARKER_LABEL = "change marker"
NEW_HEAD_LABEL = "change new head"


def head_change_ops(plan: HeadChangePlan, now: int, cfg: SchedulerConfig) -> list[WriteOp]:
    """The plan's one transaction (empty when the plan writes nothing). A plain change is at most
    four items (state, closed head, marker, new head), far inside DynamoDB's 100."""
    if not plan.writes:
        return []
    state = plan.state
    ops: list[WriteOp] = [
        Update(
            STATE,
            {"job_id": plan.job_id},
            condition=(_change_state_version(state) if state is not None else _change_state_absent(),),
            label=STATE_LABEL,
            set={**plan.state_set, "updated_at": now},
            remove=plan.state_remove,
        )
    ]
    if plan.close is not None:
        head = plan.close.head
        closed: Item = {
            "status": plan.close.status.value,
            "version": int(head["version"]) + 1,
            "closed_by": plan.epoch,
            "finished_at": now,
            # A cancelled head and a missed record are history: TTL removes them with it (§0).
            "expires_at": retention_expiry(now, cfg),
        }
        if plan.close.reason is not None:
            closed["reason"] = plan.close.reason
        ops.append(
            Update(
                RUNS,
                run_key(str(head["run_id"])),
                condition=(_head_scheduled("change"), _head_version("change", int(head["version"]))),
                label=CLOSE_LABEL,
                set=closed,
                remove=tuple(name for name in DUE_ATTRIBUTES if name in head),
            )
        )
    if plan.marker is not None:
        marker = {**plan.marker, "expires_at": retention_expiry(now, cfg)}  # history: TTL removes it
        ops.append(Put(RUNS, marker, condition=(_change_marker_absent(),), label=MARKER_LABEL))
    if plan.new_head is not None:
        ops.append(Put(RUNS, plan.new_head, condition=(_change_new_head_free(),), label=NEW_HEAD_LABEL))
    return ops


@dataclass(frozen=True)
class LostChange:
    """What the registrar does after its change transaction lost a condition: always plan again
    (nothing was written). ``head``: the head to plan against, when the failure showed it (the
    claim that landed first on the marker's key made N+1, which is the head to close now); else
    None: read the state and the head again (HC12). ``end_marker``: the claim that landed first
    was the life's last (HC5): plan again with it, the job is finished."""

    why: str
    head: Item | None = None
    end_marker: Item | None = None


def after_lost_change(plan: HeadChangePlan, lost_label: str, current: Mapping[str, Any] | None) -> LostChange:
    """The decision after ``head_change_ops(plan)`` failed on the op labelled ``lost_label``, whose
    item is now ``current`` (``ConditionFailed.op.label`` and ``.current``; DynamoDB returns it with
    ``ReturnValuesOnConditionCheckFailure=ALL_OLD``). Pure: the caller reads or plans again."""
    if lost_label == MARKER_LABEL and current is not None and plan.close is not None:
        closing = plan.close.head
        if is_end_marker(current):
            # The head's claim was its life's last: N runs, and the job is finished (HC5).
            return LostChange("the head's claim ended its life first", end_marker=dict(current))
        if is_unstarted_occurrence(current) and epoch_of(current) == epoch_of(closing):
            # A claim landed first (§1 "change"): N runs as claimed; its successor is the head
            # now, unless it was claimed too (its own marker's put then fails: one more round).
            return LostChange("a claim landed first: close its successor", head=dict(current))
        if is_closure_marker(current):
            return LostChange("another change closed the head first: read again")
        return LostChange("a settle decided the head first: read again")
    if (
        lost_label == CLOSE_LABEL
        and current is not None
        and current.get("status") == RunStatus.SCHEDULED.value
    ):
        # A relink or a redispatch raised its version: the same head, read as it is now.
        return LostChange("the head was relinked or redispatched: plan against it again", head=dict(current))
    if lost_label == CLOSE_LABEL:
        return LostChange("the head was started, settled or closed since the read: read again")
    if lost_label == NEW_HEAD_LABEL:
        return LostChange("a racing change named the same epoch: read again")
    return LostChange("the state moved since the read (another change, the finish write): read again")
