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
  key, so the relink's part holds that read (I1');
- the head relinked behind the chunk's last run, as the ad-hoc run's (``head_adhoc.relink_head_ops``:
  its three parts), its ``through`` raised to the chunk's last instant.

The records all lie before the head (I6), their last one's successor key is unused (H2), and the
relink and the records are one write (I3).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from jobsched.core.head import epoch_of, is_record
from jobsched.core.limits import DYNAMODB_MAX_TRANSACTION_ITEMS
from jobsched.core.run import parse_run_id, run_id_for
from jobsched.core.transitions.conditions import RunItem, StateItem, _run_is_new, _state_unchanged
from jobsched.core.transitions.head_adhoc import relink_head_ops
from jobsched.core.transitions.register import REDATE_FLOOR
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
        sets["changed_at"] = dated_at
        remove = (REDATE_FLOOR,)
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
    ops += relink_head_ops(head, end, "redate", through=upto)
    return ops
