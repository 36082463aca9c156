"""The redate of a late stream record when the job has a head (HC4; docs/proposals/
successor-claim-build.md §1 row "redate", §3 HC4; unexplored by the model).

A change the reconcile pass applied before its stream record arrived was dated when the pass
first saw it (``register.REDATE_FLOOR``), so the new timing's occurrences between the person's
write and that date were taken as not due. The late record dates the change exactly, and those
occurrences are settled now (run late, caught up or recorded missed, as any change's settle),
**behind the head**, which stays. Under shape f the chain's end is on the head, so the records
join the chain by relinking it, in the same transaction:

- the state, conditional on its version (``_state_unchanged``, as today's ``redate_ops``): the
  change's date (``changed_at``, the floor dropped) on the last chunk, the floor moved to the
  chunk's last instant on an earlier one;
- each record at its instant's key **in the head's epoch**, ``attribute_not_exists``
  (``_run_is_new``); a pause's cancelled head or marker at such an instant is of an older epoch,
  so the keys never meet;
- none at an instant that already holds a live record of any epoch (the old timing ran it before
  the change was applied): ``redate_records`` drops them, from the job's items read with the head
  (HC12). No writer puts a record at a past instant without moving the head's version or that
  key (a backfill takes the head's epoch too: ``head_adhoc.backfill_run_id``), so the relink's
  part and ``_run_is_new`` hold that read (I1');
- when a run joins (a chunk with a ``pending`` record), the head relinked behind the chunk's last
  run, as the ad-hoc run's (``head_adhoc.relink_head_ops``: its three parts), its ``through``
  raised to the chunk's last instant. A chunk of ``missed`` records alone (or none: all dropped)
  leaves the head as it is: no run joins the chain, and a write that moved only the head's token
  would read as a redispatch (``head_invariants.redispatched``) and stop nothing the records'
  own parts do not.

The records all lie before the head (I6), their last one's successor key is unused (H2), and the
relink and the records are one write (I3).

A job without a head (an ``at()`` job or an ended timing the pass applied after its last
occurrence: ``finished``) keeps its chain's end on the state while it has none (every change
copies the closed head's there, core/head_change.py ``CHAIN_END``): its redate is today's
(``register.redate_ops``) in the state's epoch, the records joining the state's ``latest_run_id``
and raising its ``through`` (``redate_without_head_ops``).

**The provisional date** (``with_redate_floor``): the reconcile pass applies a change whose stream
record it never saw, dated when it first saw the difference; a change that starts a timing where
none ran (a new, resumed, fixed or re-created job, as today's ``registrar._with_floor``) records
``redate_floor`` on the state in the change's own transaction, the earliest the person can have
written it, so the record, if it comes late rather than never, dates it again. Any other change
keeps it (and the pass's date and digest aside) until the record dates it or is known lost.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from jobsched.core.head import epoch_of, is_record
from jobsched.core.head_change import CHAIN_END, THROUGH, HeadChangePlan
from jobsched.core.limits import DYNAMODB_MAX_TRANSACTION_ITEMS
from jobsched.core.run import parse_run_id, run_id_for
from jobsched.core.state import JobStatus, Registration
from jobsched.core.transitions.conditions import RunItem, StateItem, _run_is_new, _state_unchanged
from jobsched.core.transitions.head_adhoc import relink_head_ops
from jobsched.core.transitions.register import (
    REDATE_AFTER,
    REDATE_FLOOR,
    REDATE_HASH,
    REDATE_MARKS,
    REDATE_UNTIL,
    kept_redate_marks,
)
from jobsched.core.transitions.settle import link_runs
from jobsched.core.writes import RUNS, STATE, Item, Put, Update, WriteOp

# A chunk's records: the transaction also holds the state, the head and the check at its successor.
REDATE_CHUNK_RECORDS = DYNAMODB_MAX_TRANSACTION_ITEMS - 3


def redate_records(records: Iterable[RunItem], items: Iterable[Mapping[str, Any]]) -> list[RunItem]:
    """The records a redate may write: those at an instant that holds no live record of any epoch
    among ``items`` (the job's items as read with the head). A cancelled head or a marker is not a
    record."""
    decided = {_instant(item) for item in items if is_record(item)}
    return [record for record in records if int(record["scheduled_at"]) not in decided]


def _instant(item: Mapping[str, Any]) -> int | None:
    try:
        parts = parse_run_id(str(item["run_id"]))
    except ValueError:
        return None
    return parts.instant_ms if parts.kind == "timed" else None


def redate_with_head_ops(
    state: StateItem, head: RunItem, records: list[RunItem], dated_at: int | None, upto: int, now: int
) -> list[WriteOp]:
    """One chunk of a redate (see the module's docstring). ``records``: the chunk, oldest first,
    each at its key in the head's epoch and before the head (``ValueError`` otherwise), filtered
    by ``redate_records``; they are copied and linked (``link_runs``) behind the head's
    ``after_run_id``. ``dated_at``: the change's date on the last chunk, else None."""
    if len(records) > REDATE_CHUNK_RECORDS:
        raise ValueError(f"a redate chunk holds at most {REDATE_CHUNK_RECORDS} records, not {len(records)}")
    epoch, head_at = epoch_of(head), int(head["scheduled_at"])
    for record in records:
        at = int(record["scheduled_at"])
        if at >= head_at:
            raise ValueError(f"{record['run_id']}: a redate's records lie before the head ({head['run_id']})")
        if record["run_id"] != run_id_for(str(state["job_id"]), at, epoch):
            raise ValueError(f"{record['run_id']}: a redate's record takes the head's epoch ({epoch})")
    chunk = [dict(record) for record in records]
    end = link_runs(head.get("after_run_id"), chunk)
    sets: Item = {"version": int(state["version"]) + 1, "updated_at": now}
    remove: tuple[str, ...] = ()
    if dated_at is not None:
        if REDATE_UNTIL not in state:  # else ``changed_at`` is a later change's, kept
            sets["changed_at"] = dated_at
        remove = tuple(name for name in REDATE_MARKS if name in state)
    else:
        sets[REDATE_FLOOR] = upto
    ops: list[WriteOp] = [
        Update(
            STATE,
            {"job_id": state["job_id"]},
            condition=(_state_unchanged(state),),
            label="redate a reconciled change",
            set=sets,
            remove=remove,
        )
    ]
    ops += [Put(RUNS, run, condition=(_run_is_new(),), label=f"record {run['run_id']}") for run in chunk]
    if end != head.get("after_run_id"):
        ops += relink_head_ops(head, end, "redate", through=upto)
    return ops


def redate_without_head_ops(
    state: StateItem, records: list[RunItem], dated_at: int | None, upto: int, now: int
) -> list[WriteOp]:
    """One chunk of the redate of a job without a head (see the module's docstring): the state,
    conditional on its version (``_state_unchanged``), dated as ``redate_with_head_ops`` dates it,
    its chain's end (``latest_run_id``) moved behind the chunk's runs and its ``through`` raised to
    the chunk's last instant; each record at its key in the state's epoch (``epoch``, else its
    version), ``attribute_not_exists`` (``_run_is_new``)."""
    if len(records) > REDATE_CHUNK_RECORDS:
        raise ValueError(f"a redate chunk holds at most {REDATE_CHUNK_RECORDS} records, not {len(records)}")
    epoch = int(state["epoch"] if "epoch" in state else state["version"])
    for record in records:
        if record["run_id"] != run_id_for(str(state["job_id"]), int(record["scheduled_at"]), epoch):
            raise ValueError(f"{record['run_id']}: a redate's record takes the state's epoch ({epoch})")
    chunk = [dict(record) for record in records]
    sets: Item = {
        "version": int(state["version"]) + 1,
        "updated_at": now,
        THROUGH: max(upto, int(state.get(THROUGH) or 0)),
    }
    end = link_runs(state.get(CHAIN_END), chunk)
    if end is not None:
        sets[CHAIN_END] = end
    remove: tuple[str, ...] = ()
    if dated_at is not None:
        if REDATE_UNTIL not in state:  # else ``changed_at`` is a later change's, kept
            sets["changed_at"] = dated_at
        remove = tuple(name for name in REDATE_MARKS if name in state)
    else:
        sets[REDATE_FLOOR] = upto
    ops: list[WriteOp] = [
        Update(
            STATE,
            {"job_id": state["job_id"]},
            condition=(_state_unchanged(state),),
            label="redate a reconciled change",
            set=sets,
            remove=remove,
        )
    ]
    ops += [Put(RUNS, run, condition=(_run_is_new(),), label=f"record {run['run_id']}") for run in chunk]
    return ops


def with_redate_floor(plan: HeadChangePlan, provisional: bool, now: int) -> HeadChangePlan:
    """The change, with the reconcile pass's mark that its date is provisional when it starts a
    timing where none ran (the state read is absent or not active) and schedules or finishes the
    job: ``REDATE_FLOOR``, the earliest the change can have been made (the last registration's
    read of the job item, or the last occurrence decided), and ``REDATE_AFTER``, that read alone
    (a record of a write made before it is of an earlier write, ``written_before_the_change``).
    Any other change keeps a floor the state has, until its record dates it or is known lost
    (``register.kept_redate_marks``): dropping it lost the occurrences the record would date."""
    state = plan.state
    starts = state is None or state.get("status") != JobStatus.ACTIVE.value
    if provisional and starts and plan.outcome in (Registration.SCHEDULED, Registration.FINISHED):
        before = state or {}
        read = int(before.get("registered_at") or 0)
        floor = max(read, *(int(before.get(name) or 0) for name in (THROUGH, "last_scheduled_at")))
        # A floor kept from an earlier provisional change is replaced (its record, if it comes
        # now, is of an earlier write: ``written_before_the_change``).
        aside = tuple(n for n in (REDATE_UNTIL, REDATE_HASH) if n in before)
        return replace(
            plan,
            state_set={**plan.state_set, REDATE_FLOOR: floor, REDATE_AFTER: read},
            state_remove=(*plan.state_remove, *aside),
        )
    if plan.writes and state is not None:
        kept, lost = kept_redate_marks(state, now)
        marks = tuple(n for n in lost if n not in plan.state_remove)
        return replace(plan, state_set={**plan.state_set, **kept}, state_remove=(*plan.state_remove, *marks))
    return plan
