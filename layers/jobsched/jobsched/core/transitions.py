"""Every state change jobsched makes, as conditional writes with named parts.

Each function returns the write operations for one transition. Each condition part carries, in
its ``why``, the race it stops; together they are the argument that an occurrence runs once.
The services decide *when* a transition happens; this module decides *what* it writes and
under which conditions. The job's scheduler state lives on its state item (``core/state.py``),
never on the job item people write, so a person's put-item or delete cannot undo it.
"""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal
from typing import Any

from jobsched.core.config import SchedulerConfig
from jobsched.core.job import DEFINITION_FIELDS, bound_reasons
from jobsched.core.limits import DYNAMODB_MAX_ITEM_BYTES, SAFETY_BYTES, item_size
from jobsched.core.run import NOT_RUN, RunKind, RunStatus, run_key, shard_of
from jobsched.core.state import INDEX_ATTRIBUTES, JobStatus
from jobsched.core.timing import start_at_ms
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
    any_of,
    eq,
    exists,
    is_in,
    ne,
    not_exists,
)

StateItem = dict[str, Any]
RunItem = dict[str, Any]

# Redispatches of a run no worker starts before it is failed: 20 dispatch leases of 30 s.
MAX_REDISPATCHES = 20

# --- named condition parts, shared by the transitions below ------------------------------------


def _state_unchanged(state: StateItem) -> Cond:
    return eq(
        "version",
        state["version"],
        "another trigger, the miss detector or the registrar moved the job's schedule since we "
        "read it (possibly from the eventually consistent index): we must not act on a stale "
        "view, e.g. claim an occurrence twice or advance past a changed schedule",
    )


def _state_as_read(state: StateItem | None) -> Cond:
    why = "the state changed since we read it (a racer, or the registrar): act on the new state instead"
    if state is None:
        return not_exists("job_id", why)
    return eq("version", state["version"], why)


def _still_active() -> Cond:
    return eq("status", JobStatus.ACTIVE.value, "a paused, invalid, finished or deleted job is not claimed")


def _next_is(occurrence: int, why: str) -> Cond:
    return eq("next_run_at", occurrence, why)


def _run_is_new() -> Cond:
    return not_exists(
        "run_id",
        "the occurrence already has a record: another trigger, a retried tick, the miss detector, "
        "the registrar or a backfill made it first. The run id is deterministic, so exactly one "
        "writer creates it",
    )


def _run_token(version: int) -> Cond:
    return eq(
        "version",
        version,
        "fencing: someone (a recovery, a duplicate delivery, another worker) moved the run on "
        "since this actor's token was issued; a stale actor's write must fail, not overwrite",
    )


def _run_status(*statuses: RunStatus) -> Cond:
    if len(statuses) == 1:
        return eq(
            "status",
            statuses[0].value,
            f"the run must still be {statuses[0].value} (not finished or moved on)",
        )
    return is_in(
        "status", [s.value for s in statuses], "the run must still be in a state this step applies to"
    )


def _dispatch_lease(run_id: str, until: int, cfg: SchedulerConfig) -> Item:
    """A lease the miss detector checks at ``check_at``, the lease index's sort key. Only the
    writes that hand a run to a new holder (claim, retry, recovery, promotion) set it; a worker's
    start and heartbeats renew ``lease_expires_at`` alone, which no index holds, so a renewal is
    one write unit. When ``check_at`` comes and the lease was renewed, the detector moves
    ``check_at`` to the lease (``recheck_op``)."""
    return {"lease_expires_at": until, "check_at": until, "lease_shard": shard_of(run_id, cfg.shard_count)}


LEASE_ATTRIBUTES = ("lease_expires_at", "check_at", "lease_shard")


def _lease_as_read(run: RunItem) -> Cond:
    return eq(
        "lease_expires_at",
        run["lease_expires_at"],
        "a heartbeat renewed the lease after we read it: the worker is alive",
    )


# --- claiming ----------------------------------------------------------------------------------


def _advance(
    state: StateItem,
    occurrence: int,
    next_occurrence: int | None,
    now: int,
    latest_run_id: str | None,
    count: bool = False,
) -> Update:
    sets: Item = {"version": state["version"] + 1, "last_scheduled_at": occurrence, "updated_at": now}
    if latest_run_id is not None:
        sets["latest_run_id"] = latest_run_id
    if count:
        # ``max_runs``: the scheduled runs made so far, counted in the write that makes each one
        # (an attribute on the claim's own update: no write added). The claimer passes
        # ``next_occurrence`` None for the last one, and the job is finished in this write.
        sets["runs_claimed"] = runs_claimed(state) + 1
    remove: tuple[str, ...] = ("catchups",)
    if next_occurrence is None:
        sets["status"] = JobStatus.FINISHED.value
        remove += INDEX_ATTRIBUTES
    else:
        sets["next_run_at"] = next_occurrence
    return Update(
        STATE,
        {"job_id": state["job_id"]},
        condition=(
            _state_unchanged(state),
            _next_is(
                occurrence,
                "the occurrence being claimed is still the job's next one (not advanced by a racer)",
            ),
            _still_active(),
        ),
        label="advance job",
        set=sets,
        remove=remove,
    )


def retention_expiry(now: int, cfg: SchedulerConfig) -> int:
    """DynamoDB TTL is in epoch seconds."""
    return now // 1000 + cfg.history_retention_days * 86_400


def new_run_item(
    job_id: str,
    run_id: str,
    scheduled_at: int,
    definition: Item | None,
    def_hash: str,
    kind: RunKind,
    now: int,
    cfg: SchedulerConfig,
    status: RunStatus = RunStatus.PENDING,
    reason: str | None = None,
    claimed_by: str | None = None,
    after_run_id: str | None = None,
) -> RunItem:
    """A run item. It carries its definition's digest, not the definition (services/definitions.py):
    a run's write units do not grow with its payload. A run that will run also carries the two
    facts of its definition the miss detector acts on without reading it: the overlap policy
    and the attempts allowed."""
    item: RunItem = {
        "run_id": run_id,
        "job_id": job_id,
        "scheduled_at": scheduled_at,
        "kind": kind.value,
        "status": status.value,
        "version": 1,
        "attempt": 1,
        "recoveries": 0,
        "def_hash": def_hash,
        "claimed_at": now,
    }
    if claimed_by is not None:
        item["claimed_by"] = claimed_by
    if reason:
        item["reason"] = reason
    if status is RunStatus.PENDING:
        if after_run_id is not None:
            item["after_run_id"] = after_run_id
        if definition is None:
            raise ValueError(f"{run_id}: a pending run needs its definition")
        item["overlap"] = str(definition.get("overlap", "skip"))
        item["max_attempts"] = int((definition.get("retry") or {}).get("max_attempts", 3))
        # The dispatch lease: if no worker starts the run by then (the trigger died before
        # sending, the message was lost), the miss detector finds it in the lease index.
        # It covers the run's start window too (``jitter_seconds``): its message is delayed to it.
        start = start_at_ms(run_id, scheduled_at, definition)
        item.update(_dispatch_lease(run_id, max(start, now) + cfg.dispatch_lease_seconds * 1000, cfg))
    else:
        item["finished_at"] = now
        item["expires_at"] = retention_expiry(now, cfg)
    return item


def runs_claimed(state: StateItem) -> int:
    """The scheduled runs made for the job so far (``max_runs``; 0 when never counted)."""
    return int(state.get("runs_claimed") or 0)


def claim_ops(
    state: StateItem, run: RunItem, next_occurrence: int | None, now: int, count: bool = False
) -> list[WriteOp]:
    """The claim: one transaction, the job's linearisation point. The occurrence's run is created
    (``attribute_not_exists``), linked behind the chain's end as read (``after_run_id`` =
    ``latest_run_id``), and the job's state moves past the occurrence and makes the run the
    chain's end, conditional on the state's version. Either both land or neither does: no actor
    ever meets a run that exists without its state having moved (a "half-made claim"), and the
    link the run carries is the chain's end at the instant it joins, whoever's clock or index
    page the claimer read. A claim that read a stale state loses its condition and reads again."""
    return [
        Put(RUNS, run, condition=(_run_is_new(),), label="create run"),
        _advance(state, int(run["scheduled_at"]), next_occurrence, now, str(run["run_id"]), count),
    ]


def advance_op(
    state: StateItem,
    occurrence: int,
    next_occurrence: int | None,
    now: int,
) -> Update:
    """Move the job past an occurrence that already has its record (a backfill of it made the
    record, and joined the chain then): no second run, the chain's end unchanged."""
    return _advance(state, occurrence, next_occurrence, now, None)


# --- settling, ad-hoc runs ----------------------------------------------------------------------


def settle_ops(
    state: StateItem,
    records: list[RunItem],
    first: int,
    last: int,
    resume_at: int | None,
    catchups: int,
    now: int,
    switch: tuple[Item, tuple[str, ...]] | None = None,
    counted: int | None = None,
) -> list[WriteOp]:
    """Write a chunk of occurrences that came due without a claim (catch-up runs, late runs and
    missed records, oldest first) and move the job past them, atomically.

    The chunk covers the job's occurrences ``first`` to ``last``; ``records`` are those that get
    a record (all of them, less any that had one already). ``resume_at`` is the job's next
    occurrence after the chunk. An interrupted writer leaves the job at the first occurrence not
    yet written, so the next attempt continues from there. ``switch`` (sets, removes) is applied
    in the same write: the registrar's change of timing or status, made together with the last
    chunk of the old timing's occurrences. The chunk's runs that will run join the job's chain
    (``link_runs``: their ``after_run_id`` is set in place, so what the caller dispatches carries
    it) in the same transaction that moves the chain's end: like a claim, one linearisation point.
    """
    sets: Item = {
        "version": state["version"] + 1,
        "updated_at": now,
        "catchups": catchups,
        "last_scheduled_at": max(last, int(state.get("last_scheduled_at") or 0)),
    }
    latest = link_runs(state.get("latest_run_id"), records)
    if latest is not None:
        sets["latest_run_id"] = latest
    if counted is not None:
        sets["runs_claimed"] = counted  # ``max_runs``: the count after this chunk's runs
    remove: tuple[str, ...] = ()
    if resume_at is None:
        sets["status"] = JobStatus.FINISHED.value
        remove = INDEX_ATTRIBUTES
    else:
        sets["next_run_at"] = resume_at
    if switch is not None:
        # The registrar's plan wins over the chunk's own bookkeeping of the old timing.
        switch_sets, switch_remove = switch
        for name in switch_remove:
            sets.pop(name, None)
        sets.update(switch_sets)
        remove = tuple(dict.fromkeys(name for name in (*remove, *switch_remove) if name not in sets))
    ops: list[WriteOp] = [
        Update(
            STATE,
            {"job_id": state["job_id"]},
            condition=(
                _state_unchanged(state),
                _next_is(
                    first,
                    "the chunk starts at the job's next occurrence: no occurrence is skipped or "
                    "recorded twice by two detectors, or by a detector and the registrar",
                ),
                _still_active(),
            ),
            label="settle occurrences",
            set=sets,
            remove=remove,
        )
    ]
    ops += [Put(RUNS, run, condition=(_run_is_new(),), label=f"record {run['run_id']}") for run in records]
    return ops


def adhoc_run_ops(run: RunItem, state: StateItem | None) -> list[WriteOp]:
    """A manual or backfill run: created once per deterministic id, leaving the schedule alone.
    It joins the job's chain (``run`` must be linked: ``link_runs``), so the job's next
    occurrence waits for it as it would for a scheduled run. One transaction: a run outside the
    chain could overlap the next occurrence. A job without a state item has no chain. (A
    claimed run whose advance has not landed is not in the chain yet: whoever advances the job
    past it links it behind this one, before it is sent.)"""
    ops: list[WriteOp] = [Put(RUNS, run, condition=(_run_is_new(),), label="create ad-hoc run")]
    if state is not None:
        ops.append(_join_chain(state, run["run_id"], run["claimed_at"]))
    return ops


def _join_chain(state: StateItem, run_id: str, now: int) -> Update:
    return Update(
        STATE,
        {"job_id": state["job_id"]},
        condition=(
            _state_as_read(state),  # the run links to the chain's end as read: still the end
        ),
        label="join chain",
        set={"latest_run_id": run_id, "version": state["version"] + 1, "updated_at": now},
    )


def link_runs(latest_run_id: str | None, runs: list[RunItem]) -> str | None:
    """Link the runs that will run, in order, behind the job's latest run: each one's
    ``after_run_id`` is the run before it. Returns the new end of the chain."""
    for run in runs:
        if run.get("status") != RunStatus.PENDING.value:
            continue  # a missed record never runs: it holds no turn
        if latest_run_id is not None:
            run["after_run_id"] = latest_run_id
        latest_run_id = str(run["run_id"])
    return latest_run_id


def rerun_missed_ops(
    missed: RunItem,
    definition: Item,
    def_hash: str,
    now: int,
    cfg: SchedulerConfig,
    state: StateItem | None,
) -> list[WriteOp]:
    """A person backfills an occurrence recorded as missed (or ``cancelled``, a legacy fence: it
    never ran, and no run links to it): the record itself becomes the run (same id), so the
    occurrence still has exactly one record and runs at most once. Like any ad-hoc run it joins
    the job's chain, in the same transaction."""
    rerun = _rerun_missed(missed, definition, def_hash, now, cfg)
    if state is None:
        return [rerun]
    link = {"after_run_id": state["latest_run_id"]} if state.get("latest_run_id") else {}
    rerun = replace(rerun, set={**rerun.set, **link})
    return [rerun, _join_chain(state, missed["run_id"], now)]


def _not_run(record: RunItem) -> RunStatus:
    if record.get("status") not in NOT_RUN:
        raise ValueError(
            f"{record['run_id']}: only a record that did not run is rerun, not {record.get('status')}"
        )
    return RunStatus(record["status"])


def _rerun_missed(missed: RunItem, definition: Item, def_hash: str, now: int, cfg: SchedulerConfig) -> Update:
    return Update(
        RUNS,
        run_key(missed["run_id"]),
        condition=(
            _run_status(_not_run(missed)),
            _run_token(missed["version"]),
        ),
        label="rerun missed occurrence",
        set={
            "status": RunStatus.PENDING.value,
            "kind": RunKind.BACKFILL.value,
            "version": missed["version"] + 1,
            "attempt": 1,
            "def_hash": def_hash,
            "overlap": str(definition.get("overlap", "skip")),
            "max_attempts": int((definition.get("retry") or {}).get("max_attempts", 3)),
            "retry_at": now,
            **_dispatch_lease(missed["run_id"], now + cfg.dispatch_lease_seconds * 1000, cfg),
            "missed_reason": missed.get("reason", ""),
        },
        remove=("finished_at", "expires_at", "reason"),
    )


# --- registering -------------------------------------------------------------------------------


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


def redate_ops(
    state: StateItem, records: list[RunItem], dated_at: int | None, upto: int, now: int
) -> list[WriteOp]:
    """A change the reconcile pass applied, dated by its late stream record (issue 34, item 4):
    the records of the occurrences of the job's timing between the person's write and the date
    the pass gave it (run late, caught up or recorded missed, as any change's settle), behind
    the job's place, which stays. One transaction per chunk, oldest first: the state conditional
    on its version (a claim, a change or another record since the read), each record created once
    (a backfill's record stays). The runs join the chain in the same write (``link_runs``). The
    last chunk writes the change's date (``dated_at``) and drops the floor; an earlier one moves
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


# --- starting, heartbeats ----------------------------------------------------------------------


def start_op(
    run_id: str,
    version: int,
    owner: str,
    lease_until: int,
    now: int,
    overtaken_by: str | None = None,
    overtakes: bool = False,
) -> Update:
    """A worker takes over a pending run: the takeover bumps the fencing token it will hold. The
    job's turn needs no write here: the worker read it from the chain (``core/policies.py``).
    ``overtaken_by``: the run that passed over this one before it came due, which the worker
    found finished (or runs beside it under ``allow``); None: no run may have overtaken it.
    ``overtakes``: this start passes over runs not yet due (``overtake_op``, same transaction):
    the run is marked ``overtook``, so that once finished it passes a later run's walk on to the
    runs it overtook, which may run after it (``core/policies.chain_step``)."""
    overtaken = (
        eq("overtaken_by", overtaken_by, "the run that overtook this one is the one the worker read")
        if overtaken_by is not None
        else not_exists(
            "overtaken_by",
            "no run started before this one came due (``overtake_op``): else the worker must "
            "wait for that run, which the walk back along the chain cannot see",
        )
    )
    return Update(
        RUNS,
        run_key(run_id),
        condition=(
            exists("run_id", "a message for a run that does not exist starts nothing"),
            _run_status(RunStatus.PENDING),
            _run_token(version),
            overtaken,
            # cancel_other: a pending run a newer one asked to stop never starts its handler
            # again; the start is refused as a stale message's, and the detector ends the run as
            # cancelled when its dispatch lease lapses (recover_op).
            _not_asked_to_stop(),
        ),
        label="start run",
        set={
            "status": RunStatus.RUNNING.value,
            "version": version + 1,
            "owner": owner,
            "started_at": now,
            "heartbeat_at": now,
            "lease_expires_at": lease_until,
            **({"overtook": True} if overtakes else {}),
        },
        set_if_missing={"first_started_at": now},
        remove=("overtaken_by",) if overtaken_by is not None else (),
    )


def overtake_op(passed: RunItem, starter_id: str) -> Update:
    """In a start's transaction: a run not yet due that the starter passed over is marked, so its
    own start sees the starter. Its token is not moved (its message stays good); the mark is
    conditional on the run as the walk read it, so a run that started or was recovered since
    fails the starter's write, and the starter walks again."""
    before = passed.get("overtaken_by")
    return Update(
        RUNS,
        run_key(passed["run_id"]),
        condition=(
            _run_status(RunStatus.PENDING),
            _run_token(passed["version"]),
            (
                eq("overtaken_by", before, "no other run overtook it since the walk read it")
                if before is not None
                else not_exists("overtaken_by", "no other run overtook it since the walk read it")
            ),
        ),
        label="overtake run",
        set={"overtaken_by": starter_id},
    )


def heartbeat_op(run_id: str, version: int, owner: str, lease_until: int, now: int) -> Update:
    return Update(
        RUNS,
        run_key(run_id),
        condition=(
            _run_status(RunStatus.RUNNING),
            _run_token(version),
            eq("owner", owner, "only the worker holding the lease renews it"),
        ),
        label="heartbeat",
        set={"lease_expires_at": lease_until, "heartbeat_at": now},
    )


def skip_at_start_ops(
    run_id: str, version: int, reason: str, blocked_by: str, now: int, cfg: SchedulerConfig
) -> list[WriteOp]:
    """Record the run as skipped. ``blocked_by`` names the unfinished run that holds the job's
    turn, so a later run's walk along the chain goes straight to it."""
    return [
        Update(
            RUNS,
            run_key(run_id),
            condition=(_run_status(RunStatus.PENDING), _run_token(version)),
            label="skip run",
            set={
                "status": RunStatus.SKIPPED.value,
                "version": version + 1,
                "reason": reason,
                "blocked_by": blocked_by,
                "finished_at": now,
                "expires_at": retention_expiry(now, cfg),
            },
            remove=(*LEASE_ATTRIBUTES, "owner"),
        )
    ]


def buffer_at_start_ops(
    run_id: str,
    version: int,
    holder: RunItem,
    now: int,
    cfg: SchedulerConfig,
    cancel: bool = False,
    register: bool = True,
    alone: bool = False,
) -> list[WriteOp]:
    """Park the run behind the run holding the job's turn, and name it on the holder, so that
    the holder's end promotes it (``promote_op``). One transaction: the holder's condition is
    what makes the wait end. It keeps a lease, renewed by the miss detector while the holder
    runs: every run that is not finished holds a lease, so none can wait forever unseen.

    ``cancel`` (``cancel_other``): the same write asks the holder to stop (``cancel_requested``),
    conditional on the holder's token as read, so the request reaches the attempt that was read;
    its worker sees the mark in its next heartbeat's response and sets ``ctx.cancelled``.
    ``register`` False (``buffer_all`` only, when the holder names another waiting run): the
    run waits without being named; its lease brings it to the miss detector, which promotes it
    to decide again (``recheck_buffered_ops``: nobody names it, so it is not waiting).

    ``alone`` (``buffer_one`` and ``cancel_other``, a run not from a backfill: at most one run
    waits, walk rule W16): the run waits only if nobody waits behind it and its holder is not
    waiting itself, both as written. Two runs in one chain can each find their holder free of
    waiters at once (a manual run behind a pending 00:05 waits behind it; 00:05 then finds the
    running run before it): one of the two writes must fail, whichever lands first."""
    holder_conditions: tuple[Cond, ...] = (
        is_in(
            "status",
            [RunStatus.PENDING.value, RunStatus.RUNNING.value, RunStatus.BUFFERED.value],
            "the holder has not finished since we read it (else this run would wait for "
            "an end that already happened, and wait until its lease lapses); a backfill or "
            "buffer_all run may wait behind a run that waits itself",
        ),
        any_of(
            "one run waits behind a holder (buffer_all: each waiting run behind its own)",
            not_exists("buffered_next", "nothing waits yet"),
            eq("buffered_next", run_id, "this run waits already (a retried write)"),
        ),
    )
    holder_sets: Item = {"buffered_next": run_id}
    if cancel:
        holder_conditions += (_run_token(int(holder["version"])),)
        holder_sets["cancel_requested"] = run_id
    own_conditions: tuple[Cond, ...] = (_run_status(RunStatus.PENDING), _run_token(version))
    if alone:
        holder_conditions += (_holder_not_waiting(),)
        own_conditions += (_nobody_waits_behind(),)
    own = Update(
        RUNS,
        run_key(run_id),
        condition=own_conditions,
        label="buffer run",
        set={
            "status": RunStatus.BUFFERED.value,
            "version": version + 1,
            "buffered_at": now,
            "blocked_by": holder["run_id"],
            **_dispatch_lease(run_id, now + cfg.dispatch_lease_seconds * 1000, cfg),
        },
        remove=("owner",),
    )
    if not register:
        return [own]
    return [
        own,
        Update(
            RUNS,
            run_key(holder["run_id"]),
            condition=holder_conditions,
            label="wait behind holder",
            set=holder_sets,
        ),
    ]


def _holder_not_waiting() -> Cond:
    return ne(
        "status",
        RunStatus.BUFFERED.value,
        "the holder does not wait itself (buffer_one, cancel_other: at most one run waits; W16)",
    )


def _nobody_waits_behind() -> Cond:
    return not_exists(
        "buffered_next",
        "nobody waits behind this run (buffer_one, cancel_other: at most one run waits; the run "
        "that found a waiter behind it is skipped, and its end promotes the waiter: W16)",
    )


def promote_op(buffered: RunItem, holder_id: str, now: int, cfg: SchedulerConfig) -> tuple[Update, RunItem]:
    """The holder ended: the run waiting behind it becomes pending again, with a fresh dispatch
    lease, to be sent and to decide again at its start."""
    lease = _dispatch_lease(buffered["run_id"], now + cfg.dispatch_lease_seconds * 1000, cfg)
    promoted = {**buffered, "status": RunStatus.PENDING.value, "version": buffered["version"] + 1, **lease}
    update = Update(
        RUNS,
        run_key(buffered["run_id"]),
        condition=(
            _run_status(RunStatus.BUFFERED),
            _run_token(buffered["version"]),  # promoted once: a second promoter's write fails
            eq("blocked_by", holder_id, "the run waits behind this holder, not another"),
        ),
        label="promote buffered run",
        set={"status": RunStatus.PENDING.value, "version": promoted["version"], **lease},
    )
    return update, promoted


def finish_ops(
    run_id: str,
    held_version: int,
    from_status: RunStatus,
    status: RunStatus,
    now: int,
    cfg: SchedulerConfig,
    error: str | None = None,
    extra_conditions: tuple[Cond, ...] = (),
) -> Update:
    """The fenced commit: succeeds only with the token the actor holds."""
    sets: Item = {
        "status": status.value,
        "version": held_version + 1,
        "finished_at": now,
        "expires_at": retention_expiry(now, cfg),
    }
    if error:
        sets["last_error"] = error[:2000]
    return Update(
        RUNS,
        run_key(run_id),
        condition=(_run_status(from_status), _run_token(held_version), *extra_conditions),
        label=f"commit {status.value}",
        set=sets,
        remove=LEASE_ATTRIBUTES,
    )


def retry_op(
    run_id: str, held_version: int, attempt: int, delay_ms: int, error: str, now: int, cfg: SchedulerConfig
) -> Update:
    """Release the lease at once and schedule the next attempt (delivered as a delayed message;
    the dispatch lease covers the delay, so a lost retry message is recovered too)."""
    return Update(
        RUNS,
        run_key(run_id),
        condition=(_run_status(RunStatus.RUNNING), _run_token(held_version)),
        label="schedule retry",
        set={
            "status": RunStatus.PENDING.value,
            "version": held_version + 1,
            "attempt": attempt + 1,
            "last_error": error[:2000],
            "retry_at": now + delay_ms,
            **_dispatch_lease(run_id, now + delay_ms + cfg.dispatch_lease_seconds * 1000, cfg),
        },
        remove=("owner",),
    )


# --- recovery ----------------------------------------------------------------------------------


def recover_op(run: RunItem, now: int, cfg: SchedulerConfig, max_attempts: int) -> tuple[Update, RunItem]:
    """Recover a run whose lease expired: redispatch it, as the same attempt if it never started,
    as the next attempt if its worker died, or fail it for good when no attempt is left.

    ``cancel_other``: a run a newer one asked to stop (``cancel_requested``, set by the newer
    run's buffer write) is not redispatched: it ends ``failed`` as cancelled (``cancelled_error``:
    no retry, no pause on failure), and the run waiting behind it is promoted by the caller. A
    redispatch is conditional on no such request (``_not_asked_to_stop``), so a request that
    lands after the read fails it, and the next look ends the run instead.

    Returns the write and the run as it will be after it (to dispatch when pending)."""
    status = RunStatus(run["status"])
    condition: tuple[Cond, ...] = (_run_status(status), _run_token(run["version"]), _lease_as_read(run))
    after = dict(run)
    after["version"] = run["version"] + 1
    after["recoveries"] = int(run.get("recoveries", 0)) + 1
    if status is RunStatus.RUNNING:
        error = f"lease expired at {run['lease_expires_at']}: worker {run.get('owner')} stopped heartbeating"
        next_attempt = int(run["attempt"]) + 1
        exhausted = next_attempt > max_attempts
    else:
        error = "dispatch lease expired: no worker started the run (message lost or trigger crashed)"
        next_attempt = int(run["attempt"])
        exhausted = after["recoveries"] > MAX_REDISPATCHES
    if run.get("cancel_requested"):
        error, exhausted = cancelled_error(str(run["cancel_requested"]), error), True
    else:
        condition += (_not_asked_to_stop(),)
    if exhausted:
        update = finish_ops(
            run["run_id"], run["version"], status, RunStatus.FAILED, now, cfg, error, condition[2:]
        )
        after.update(status=RunStatus.FAILED.value, last_error=error, finished_at=now)
        for name in LEASE_ATTRIBUTES:
            after.pop(name, None)
        return update, after
    lease_until = now + cfg.dispatch_lease_seconds * 1000
    after.update(
        status=RunStatus.PENDING.value,
        attempt=next_attempt,
        last_error=error,
        lease_expires_at=lease_until,
    )
    update = Update(
        RUNS,
        run_key(run["run_id"]),
        condition=condition,
        label="recover run",
        set={
            "status": RunStatus.PENDING.value,
            "version": after["version"],
            "attempt": next_attempt,
            "recoveries": after["recoveries"],
            "last_error": error,
            **_dispatch_lease(run["run_id"], lease_until, cfg),
            "recovered_at": now,
            "lease_expired_at": run["lease_expires_at"],
        },
        remove=("owner",),
    )
    return update, after


def _not_asked_to_stop() -> Cond:
    return not_exists(
        "cancel_requested",
        "cancel_other: a newer run asked this one to stop since the read; it must end as "
        "cancelled, never be handed to a new attempt that runs its handler again",
    )


def cancelled_error(replaced_by: str, error: str) -> str:
    """The ``last_error`` of a run that ended because ``replaced_by`` asked it to stop
    (``cancel_other``): the worker's commit and the detector's recovery write the same."""
    return f"cancelled: {replaced_by} replaces it (overlap cancel_other); {error}"


def recheck_op(run: RunItem) -> Update:
    """The detector reached a run's ``check_at`` and found its lease renewed (the worker is
    alive): look again when the lease as it is now runs out. No token changes hands."""
    return Update(
        RUNS,
        run_key(run["run_id"]),
        condition=(
            _run_token(run["version"]),
            _run_status(RunStatus(run["status"])),
        ),
        label="recheck lease",
        set={"check_at": run["lease_expires_at"]},
    )


def recheck_buffered_ops(
    run: RunItem, holder: RunItem | None, now: int, cfg: SchedulerConfig
) -> tuple[Update, RunItem | None]:
    """A buffered run's lease lapsed: it is still waiting behind a holder that has not finished
    (renew its lease), or the holder ended without promoting it (a worker died between its
    commit and the promotion): promote it. Returns the op and the promoted run, if any."""
    unchanged = (_run_status(RunStatus.BUFFERED), _run_token(run["version"]), _lease_as_read(run))
    waiting = (
        holder is not None
        and holder.get("status") not in _FINISHED
        and holder.get("buffered_next") == run["run_id"]
    )
    if waiting:
        renew = Update(
            RUNS,
            run_key(run["run_id"]),
            condition=unchanged,
            label="renew buffered lease",
            set=_dispatch_lease(run["run_id"], now + cfg.dispatch_lease_seconds * 1000, cfg),
        )
        return renew, None
    promote, promoted = promote_op(run, str(run.get("blocked_by")), now, cfg)
    return replace(promote, condition=unchanged), promoted


_FINISHED = frozenset(
    {
        RunStatus.SUCCEEDED.value,
        RunStatus.FAILED.value,
        RunStatus.SKIPPED.value,
        RunStatus.MISSED.value,
        RunStatus.CANCELLED.value,
    }
)


# --- the miss detector's bookkeeping (services/reconciler.py) ----------------------------------

# The detector's own item in the state table: the reconciler's place in the jobs table and the
# highest ShardCount whose shards may still hold index entries. ``#`` starts no job id
# (``JOB_ID_PATTERN`` starts with a letter or digit), and a snapshot's key is ``<job_id>#...``,
# so no job's state and no snapshot can have this key; readers of the state table skip it as
# they skip snapshots (services/definitions.py ``is_snapshot``: its key holds ``#``).
BOOKKEEPING_KEY: Item = {"job_id": "#detector"}


def bookkeeping_op(item: Item | None, sets: Item, remove: tuple[str, ...], now: int) -> Update:
    """Move the detector's bookkeeping on, conditional on it as read: two detector invocations
    that overlap (one runs into the next minute's) read the same cursor; only one moves it, the
    other stops reconciling for this run, so no page is skipped and none is read twice."""
    version = int(item["version"]) if item is not None else 0
    why = "another detector invocation moved the reconcile cursor or the shard mark since we read it"
    return Update(
        STATE,
        dict(BOOKKEEPING_KEY),
        condition=(eq("version", version, why) if item is not None else not_exists("job_id", why),),
        label="detector bookkeeping",
        set={**sets, "version": version + 1, "updated_at": now},
        remove=tuple(name for name in remove if item is not None and name in item),
    )


# --- definition snapshots (services/definitions.py) ----------------------------------------------


def snapshot_key(job_id: str, def_hash: str) -> Item:
    """A definition's snapshot lives in the state table beside the job's state, under a key no
    job can have (``#`` is not allowed in a job id), so it is never in the next-run index."""
    return {"job_id": f"{job_id}#{def_hash}"}


def save_definition_op(job_id: str, def_hash: str, definition: Item) -> Update:
    """Keep the definition a job is being registered with, without expiry while it is current."""
    # No condition: a snapshot is keyed by its content's digest, so two racing registrars write
    # the same item; removing the expiry revives a snapshot a re-registration brings back.
    return Update(
        STATE,
        snapshot_key(job_id, def_hash),
        condition=(),
        label="save definition",
        set={"definition": definition},
        remove=("expires_at",),
    )


def retire_definition_op(job_id: str, def_hash: str, now: int, cfg: SchedulerConfig) -> Update:
    """Let a superseded definition's snapshot expire with the runs that may still run under it."""
    return Update(
        STATE,
        snapshot_key(job_id, def_hash),
        condition=(
            exists(
                "definition",
                "a snapshot never saved (a job registered before snapshots) is not created empty",
            ),
        ),
        label="retire definition",
        set={"expires_at": retention_expiry(now, cfg)},
    )
