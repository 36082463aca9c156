"""The writes on a job's definition and its registration: the registrar's change of the state
(register, redate) and its report on the job item; the pause on failure and the delete after
completion, each conditional on the definition as read.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from jobsched.core.job import DEFINITION_FIELDS, InvalidJob, JobDefinition, Misfire, bound_reasons
from jobsched.core.limits import DYNAMODB_MAX_ITEM_BYTES, SAFETY_BYTES, item_size
from jobsched.core.schedule import Schedule
from jobsched.core.state import (
    STREAM_RETENTION_MS,
    JobStatus,
    misfire_of,
    state_misfire,
    state_schedule,
    timing_of,
)
from jobsched.core.transitions.conditions import (
    RunItem,
    StateItem,
    _run_is_new,
    _state_as_read,
    _state_unchanged,
)
from jobsched.core.transitions.settle import link_runs
from jobsched.core.writes import (
    JOBS,
    RUNS,
    STATE,
    Check,
    Cond,
    Delete,
    Item,
    Put,
    Update,
    WriteOp,
    eq,
    exists,
    not_exists,
)


def register_ops(
    state: StateItem | None,
    job_id: str,
    sets: Item,
    remove: tuple[str, ...],
    now: int,
) -> Update:
    """The registrar's change of a job's state: its definition digest, timing, status and place.
    Conditional on the state's version alone: every claim moves that version in the same
    transaction as it makes its run, so a change either follows a claim whole (the run is in the
    chain and runs as claimed) or precedes it (the claim loses and reads the changed job)."""
    version = int(state["version"]) if state is not None else 0
    return Update(
        STATE,
        {"job_id": job_id},
        condition=(_state_as_read(state),),
        label="register job",
        # registered_at: when the registrar read the job item it applies (core/state.py
        # change_time: no later change can be dated before it).
        set={"registered_at": now, **sets, "version": version + 1, "updated_at": now},
        remove=tuple(name for name in remove if state is not None and name in state),
    )


# On a state whose change the reconcile pass applied, dated when the pass first saw it (the
# person wrote it earlier): the earliest time the change can have been made (the previous
# registration's read of the job item, or its last record). The change's own stream record, if
# it arrives late rather than never, dates it exactly (``redate_ops``).
REDATE_FLOOR = "redate_floor"

# The registration read the person's write came after, beside ``REDATE_FLOOR`` (which an earlier
# chunk moves on): a record made before it is of an earlier write (``written_before_the_change``).
REDATE_AFTER = "redate_after"
# A provisional date outlives the changes applied after it until its record dates it or is known
# lost (``kept_redate_marks``): the first such change copies the pass's date and the digest it
# applied here, since the state's ``changed_at`` and ``def_hash`` are then the later change's.
REDATE_UNTIL = "redate_until"
REDATE_HASH = "redate_hash"
REDATE_MARKS = (REDATE_FLOOR, REDATE_AFTER, REDATE_UNTIL, REDATE_HASH)


def pending_redate(state: Item) -> tuple[int, str] | None:
    """The provisional change a late record may still date: the pass's date and the digest it
    applied (the state's own, unless a later change kept them aside), or None (no floor)."""
    if REDATE_FLOOR not in state:
        return None
    until = state.get(REDATE_UNTIL, state.get("changed_at"))
    applied = state.get(REDATE_HASH, state.get("def_hash"))
    if not isinstance(until, (int, Decimal)) or not isinstance(applied, str):
        return None
    return int(until), applied


def kept_redate_marks(state: Item | None, now: int) -> tuple[Item, tuple[str, ...]]:
    """What a change that sets no floor of its own does with one the state has: keeps it (the
    sets: the pass's date and digest copied aside, ``REDATE_UNTIL``/``REDATE_HASH``), so the late
    record still dates the pass's change and records the occurrences between the person's write
    and the pass's date (dropping it lost them silently: w3floor). Once the stream's retention has
    passed since the pass's date the record is known lost: the marks are removed (the removes)."""
    pending = pending_redate(state) if state is not None else None
    if state is None or pending is None:
        return {}, tuple(name for name in REDATE_MARKS if state is not None and name in state)
    until, applied = pending
    if now - until > STREAM_RETENTION_MS:
        return {}, tuple(name for name in REDATE_MARKS if name in state)
    return {REDATE_UNTIL: until, REDATE_HASH: applied}, ()


def record_definition(
    state: Item,
    definition: JobDefinition | None,
    digest: str | None,
    written: str | None,
    image: Item | None,
) -> JobDefinition | None:
    """The definition of the provisional change a stream record dates, or None (it dates none).
    ``written``/``image``: the digest of the item the record's write left, and that item;
    ``definition``/``digest``: the job item's now. The record of the write the pass applied has
    the digest the state follows and the item still has (``definition``), or, once a later change
    kept the floor aside (``kept_redate_marks``), the digest the pass applied: the image is then
    that definition (the item and the state have moved on)."""
    if written is None or REDATE_FLOOR not in state:
        return None
    if REDATE_HASH in state:
        if written != state[REDATE_HASH] or image is None:
            return None
        try:
            return JobDefinition.from_item(image)
        except InvalidJob:
            return None
    return definition if written == digest == state.get("def_hash") else None


@dataclass(frozen=True)
class RedateWindow:
    """What a late record dates (``redate_window``): the occurrences of ``schedule`` after ``at``
    (the record's time, at least the floor) up to ``dated`` (the pass's date), each recorded under
    ``misfire`` (or ``missed`` with ``reason``) and carrying the digest the pass ``applied``."""

    at: int
    dated: int
    applied: str
    schedule: Schedule
    misfire: Misfire
    reason: str | None


def redate_window(state: Item, definition: JobDefinition, changed_at: int, now: int) -> RedateWindow | None:
    """The window a stream record made at ``changed_at`` dates, for the definition the pass
    applied (``record_definition``), or None: no floor, a ``max_runs`` job (its count is the
    claims'), a record of an earlier write (``written_before_the_change``), or a stopped job whose
    floor no later change kept. A later change kept the floor (``REDATE_UNTIL``): the timing is the
    definition's (the state's copy is the later change's), and a job it stopped records the
    occurrences ``missed``, as its settle records a stopped job's backlog."""
    pending = pending_redate(state)
    if pending is None or definition.max_runs is not None or written_before_the_change(state, changed_at):
        return None
    dated, applied = pending
    kept = REDATE_UNTIL in state
    status = state.get("status")
    reason = None
    if status not in (JobStatus.ACTIVE.value, JobStatus.FINISHED.value):
        if not kept:
            return None
        reason = f"job {status} before it ran"
    timing = {"timing": timing_of(definition), "misfire": misfire_of(definition)} if kept else state
    at = max(min(changed_at, now), int(state[REDATE_FLOOR]), now - STREAM_RETENTION_MS)
    return RedateWindow(at, dated, applied, state_schedule(timing), state_misfire(timing), reason)


def written_before_the_change(state: Item, changed_at: int) -> bool:
    """Whether a stream record made at ``changed_at`` (its ``ApproximateCreationDateTime``, whole
    seconds) is of a write made before the registration read the change the pass applied came
    after (``REDATE_AFTER``): an earlier write, whose item the person wrote again since (a pause
    and a resume bring the same digest back). Its record dates nothing."""
    after = state.get(REDATE_AFTER)
    return after is not None and changed_at + 1000 <= int(after)


def redate_ops(
    state: StateItem, records: list[RunItem], dated_at: int | None, upto: int, now: int
) -> list[WriteOp]:
    """A change the reconcile pass applied, dated by its late stream record (issue 34, item 4):
    the records of the occurrences of the job's timing between the person's write and the date
    the pass gave it (run late, caught up or recorded missed, as any change's settle), behind
    the job's place, which stays (a change applied since kept the floor aside: ``kept_redate_marks``).
    One transaction per chunk, oldest first: the state conditional
    on its version (a claim, a change or another record since the read), each record created once
    (a backfill's record stays). The runs join the chain in the same write (``link_runs``). The
    last chunk writes the change's date (``dated_at``; not over a later change's) and drops the
    floor's marks; an earlier one moves
    the floor to ``upto`` (its last occurrence), so a retry goes on after it."""
    sets: Item = {
        "version": state["version"] + 1,
        "updated_at": now,
        "last_scheduled_at": max(upto, int(state.get("last_scheduled_at") or 0)),
    }
    latest = link_runs(state.get("latest_run_id"), records)
    if latest is not None:
        sets["latest_run_id"] = latest
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
    ops += [Put(RUNS, run, condition=(_run_is_new(),), label=f"record {run['run_id']}") for run in records]
    return ops


def report_op(job_id: str, status: str, reasons: list[str] | None, def_hash: str, now: int) -> Update:
    """The registrar's report on the job item: what a person sees with get-item. Never
    authoritative (the state item is), so it needs no version: a stale report is corrected by
    the stream record of whatever write overtook it."""
    sets: Item = {"status": status, "def_hash": def_hash, "registered_at": now}
    remove: tuple[str, ...] = ("invalid_reasons",)
    if reasons is not None:
        sets["invalid_reasons"] = reasons
        remove = ()
    if status == JobStatus.ACTIVE.value:
        remove += ("paused_reason", "paused_at")  # resumed (pause_on_failure): the reason is past
    return Update(
        JOBS,
        {"job_id": job_id},
        condition=(exists("job_id", "a job a person deleted meanwhile is not re-created by its report"),),
        label="report registration",
        set=sets,
        remove=remove,
    )


def sized_report_ops(
    job: Item, status: str, reasons: list[str] | None, def_hash: str, now: int
) -> list[Update]:
    """``report_op`` for this job item, sized so that the person always gets the most it can:
    every report that keeps the item within DynamoDB's item limit (``DYNAMODB_MAX_ITEM_BYTES``,
    attribute names included), the most complete first. In that order: the full report; a short
    one, one reason saying that the item is too large for its full report, with its first reason;
    that reason alone; the status alone (the reasons then go to the log). Each is tried in turn,
    so the one written is the largest that fits, whichever is larger than which (near the limit,
    a one-reason full report is smaller than the short one); the caller goes on to the next when
    a store refuses one for its size (moto counts sizes its own way). Empty: nothing can be
    added to the item."""
    job_id = str(job["job_id"])
    full = report_op(job_id, status, reasons, def_hash, now)
    size = item_size(_after(job, full))
    if size <= DYNAMODB_MAX_ITEM_BYTES - SAFETY_BYTES:
        return [full]  # far from the limit: no other report is needed
    over = f" by {size - DYNAMODB_MAX_ITEM_BYTES} bytes" if size > DYNAMODB_MAX_ITEM_BYTES else ""
    why = (
        f"the job item is too large for its full report{over} ({size} bytes with it; DynamoDB's item "
        f"limit is 400 KB, {DYNAMODB_MAX_ITEM_BYTES} bytes, attribute names included); make it smaller."
    )
    first = f" First of its {len(reasons)} reasons: {reasons[0]}" if reasons else ""
    shorts = [report_op(job_id, status, bound_reasons([text]), def_hash, now) for text in (why + first, why)]
    candidates = [full, *shorts, report_op(job_id, status, None, def_hash, now)]
    return [op for op in candidates if item_size(_after(job, op)) <= DYNAMODB_MAX_ITEM_BYTES]


def _after(item: Item, update: Update) -> Item:
    after = {**item, **update.set}
    for name in update.remove:
        after.pop(name, None)
    return after


def definition_as_read(job: Item, why: str) -> list[Cond]:
    """The job item as read, as a condition: it exists, every definition attribute is ``=`` its
    value as read (maps and lists too: DynamoDB's ``=`` compares them whole), and those absent
    are still absent. Job items carry no version of their own (people write them whole), so the
    definition as read is the token: a person's edit of any definition attribute (``retry``,
    ``misfire``, ``tags``, a map ``payload`` as much as ``schedule``) fails the write."""
    conditions: list[Cond] = [exists("job_id", "the job item was deleted meanwhile: it is not re-created")]
    for name in DEFINITION_FIELDS:
        if name == "job_id":
            continue
        value = job.get(name)
        conditions.append(not_exists(name, why) if value is None else eq(name, _compared(value), why))
    return conditions


def pause_on_failure_op(job: Item, reason: str, now: int) -> Update:
    """``pause_on_failure``: the job pauses itself after a run failed for good. A write on the
    person's job item (``enabled: false``, with the reason), conditional on the whole definition
    as read (``definition_as_read``), so a person's edit that lands first is never overwritten:
    the pause then fails, and the edit stands. The registrar then applies the pause through the
    stream, as it does a person's (``plan_registration``: ``PAUSED``)."""
    why = "a person changed the job since the failed run's worker read it: their edit stands"
    return Update(
        JOBS,
        {"job_id": job["job_id"]},
        condition=tuple(definition_as_read(job, why)),
        label="pause on failure",
        set={"enabled": False, "paused_reason": reason[:300], "paused_at": now},
    )


def delete_after_completion_ops(job: Item, state: StateItem) -> list[WriteOp]:
    """``action_after_completion: delete`` (issue 29): delete the job item of a complete job.
    One transaction:

    - the job item's delete, conditional on every definition attribute as read (maps and lists
      too: DynamoDB's ``=`` compares them whole), and those absent still absent: a person's
      edit, pause or re-put that lands first wins, and the delete loses its condition;
    - a check of the state as read (``version``: a run made since, a manual run or a backfill,
      or a registration moved it; ``status = finished``), so no run joins the job between the
      read that found every run ended and the delete.

    The registrar then marks the state ``deleted`` (the REMOVE record, or the caller inline),
    as for any deleted job; the runs stay as history."""
    why = "a person changed the job since the reconcile pass read it: their edit stands"
    conditions = definition_as_read(job, why)
    return [
        Delete(JOBS, {"job_id": job["job_id"]}, tuple(conditions), "delete after completion"),
        Check(
            STATE,
            {"job_id": job["job_id"]},
            (
                _state_unchanged(state),
                eq(
                    "status",
                    JobStatus.FINISHED.value,
                    "the job is finished: a run it made since the read (manual, backfill) or a "
                    "change of its definition must be seen first",
                ),
            ),
            "job complete as read",
        ),
    ]


def _compared(value: Any) -> Any:
    """A value as read, as a condition compares it: a non-integral number (a person's payload
    map may hold one; jobsched's own values never do) as the Decimal of its shortest repr,
    which DynamoDB compares numerically with the stored number."""
    if isinstance(value, float):
        return Decimal(repr(value))
    if isinstance(value, dict):
        return {k: _compared(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_compared(v) for v in value]
    return value
