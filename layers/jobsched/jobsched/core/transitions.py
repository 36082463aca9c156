"""Every state change jobsched makes, as conditional writes with named parts.

Each function returns the write operations for one transition. Each condition part carries, in
its ``why``, the race it stops; together they are the argument that an occurrence runs once.
The services decide *when* a transition happens; this module decides *what* it writes and
under which conditions. The job's scheduler state lives on its state item (``core/state.py``),
never on the job item people write, so a person's put-item or delete cannot undo it.
"""

from __future__ import annotations

from typing import Any

from jobsched.core.config import SchedulerConfig
from jobsched.core.job import OverlapPolicy
from jobsched.core.run import RunKind, RunStatus, shard_of
from jobsched.core.state import INDEX_ATTRIBUTES, JobStatus
from jobsched.core.writes import (
    JOBS,
    RUNS,
    STATE,
    Cond,
    Item,
    Put,
    Update,
    WriteOp,
    any_of,
    eq,
    exists,
    is_in,
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


def _advance(state: StateItem, occurrence: int, next_occurrence: int | None, now: int) -> Update:
    sets: Item = {"version": state["version"] + 1, "last_scheduled_at": occurrence, "updated_at": now}
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
        if definition is None:
            raise ValueError(f"{run_id}: a pending run needs its definition")
        item["overlap"] = str(definition.get("overlap", "skip"))
        item["max_attempts"] = int((definition.get("retry") or {}).get("max_attempts", 3))
        # The dispatch lease: if no worker starts the run by then (the trigger died before
        # sending, the message was lost), the miss detector finds it in the lease index.
        item.update(_dispatch_lease(run_id, max(scheduled_at, now) + cfg.dispatch_lease_seconds * 1000, cfg))
    else:
        item["finished_at"] = now
        item["expires_at"] = retention_expiry(now, cfg)
    return item


def create_run_op(run: RunItem) -> Put:
    """A claim's first write: the occurrence's run, created once. The claim writes it before it
    advances the job (two writes, not one transaction: half the write units). A claimer that dies
    between the two leaves a pending run with its dispatch lease (recovered and sent by the miss
    detector) and a job whose next claim finds the run and only advances."""
    return Put(RUNS, run, condition=(_run_is_new(),), label="create run")


def advance_op(state: StateItem, occurrence: int, next_occurrence: int | None, now: int) -> Update:
    """A claim's second write: the job moved past the occurrence (also when its run was made by
    someone else first: a backfill, the miss detector, or this claimer before a crash)."""
    return _advance(state, occurrence, next_occurrence, now)


def settle_ops(
    state: StateItem,
    records: list[RunItem],
    first: int,
    last: int,
    resume_at: int | None,
    catchups: int,
    now: int,
    switch: tuple[Item, tuple[str, ...]] | None = None,
) -> list[WriteOp]:
    """Write a chunk of occurrences that came due without a claim (catch-up runs, late runs and
    missed records, oldest first) and move the job past them, atomically.

    The chunk covers the job's occurrences ``first`` to ``last``; ``records`` are those that get
    a record (all of them, less any that had one already). ``resume_at`` is the job's next
    occurrence after the chunk. An interrupted writer leaves the job at the first occurrence not
    yet written, so the next attempt continues from there. ``switch`` (sets, removes) is applied
    in the same write: the registrar's change of timing or status, made together with the last
    chunk of the old timing's occurrences.
    """
    sets: Item = {
        "version": state["version"] + 1,
        "updated_at": now,
        "catchups": catchups,
        "last_scheduled_at": max(last, int(state.get("last_scheduled_at") or 0)),
    }
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


def adhoc_run_ops(run: RunItem) -> list[WriteOp]:
    """A manual or backfill run: created once per deterministic id, leaving the schedule alone."""
    return [Put(RUNS, run, condition=(_run_is_new(),), label="create ad-hoc run")]


def rerun_missed_op(
    missed: RunItem, definition: Item, def_hash: str, now: int, cfg: SchedulerConfig
) -> Update:
    """A person backfills an occurrence recorded as missed: the record itself becomes the run
    (same id), so the occurrence still has exactly one record and runs at most once."""
    return Update(
        RUNS,
        {"run_id": missed["run_id"]},
        condition=(
            _run_status(RunStatus.MISSED),
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


def register_op(
    state: StateItem | None, job_id: str, sets: Item, remove: tuple[str, ...], now: int
) -> Update:
    """The registrar's change of a job's state: its definition digest, timing, status and place."""
    version = int(state["version"]) if state is not None else 0
    return Update(
        STATE,
        {"job_id": job_id},
        condition=(_state_as_read(state),),
        label="register job",
        set={**sets, "version": version + 1, "updated_at": now},
        remove=tuple(name for name in remove if state is not None and name in state),
    )


def report_op(job_id: str, status: str, reasons: list[str] | None, def_hash: str, now: int) -> Update:
    """The registrar's report on the job item: what a person sees with get-item. Never
    authoritative (the state item is), so it needs no version: a stale report is corrected by
    the stream record of whatever write overtook it."""
    sets: Item = {"status": status, "def_hash": def_hash, "registered_at": now}
    remove: tuple[str, ...] = ("invalid_reasons",)
    if reasons is not None:
        sets["invalid_reasons"] = reasons
        remove = ()
    return Update(
        JOBS,
        {"job_id": job_id},
        condition=(exists("job_id", "a job a person deleted meanwhile is not re-created by its report"),),
        label="report registration",
        set=sets,
        remove=remove,
    )


# --- starting, heartbeats ----------------------------------------------------------------------


def _slot_take(job_id: str, run_id: str, now: int) -> Update:
    return Update(
        STATE,
        {"job_id": job_id},
        condition=(
            exists("job_id", "a job without a state item has no slot to take (the run proceeds without one)"),
            any_of(
                "the previous occurrence still holds the job's overlap slot: the overlap policy "
                "decides (skip or buffer) instead of running the two concurrently",
                not_exists("active_run_id", "the slot is free"),
                eq("active_run_id", run_id, "this run holds the slot already (a retry or recovery)"),
            ),
        ),
        label="take overlap slot",
        set={"active_run_id": run_id, "updated_at": now},
    )


def start_ops(
    run_id: str,
    job_id: str,
    version: int,
    overlap: OverlapPolicy,
    owner: str,
    lease_until: int,
    now: int,
    use_slot: bool = True,
) -> list[WriteOp]:
    """A worker takes over a pending run: the takeover bumps the fencing token it will hold."""
    ops: list[WriteOp] = [
        Update(
            RUNS,
            {"run_id": run_id},
            condition=(
                exists("run_id", "a message for a run that does not exist starts nothing"),
                _run_status(RunStatus.PENDING),
                _run_token(version),
            ),
            label="start run",
            set={
                "status": RunStatus.RUNNING.value,
                "version": version + 1,
                "owner": owner,
                "started_at": now,
                "heartbeat_at": now,
                "lease_expires_at": lease_until,
            },
            set_if_missing={"first_started_at": now},
        )
    ]
    if overlap is not OverlapPolicy.ALLOW and use_slot:
        ops.append(_slot_take(job_id, run_id, now))
    return ops


def heartbeat_op(run_id: str, version: int, owner: str, lease_until: int, now: int) -> Update:
    return Update(
        RUNS,
        {"run_id": run_id},
        condition=(
            _run_status(RunStatus.RUNNING),
            _run_token(version),
            eq("owner", owner, "only the worker holding the lease renews it"),
        ),
        label="heartbeat",
        set={"lease_expires_at": lease_until, "heartbeat_at": now},
    )


def skip_at_start_ops(
    run_id: str, version: int, reason: str, now: int, cfg: SchedulerConfig
) -> list[WriteOp]:
    return [
        Update(
            RUNS,
            {"run_id": run_id},
            condition=(_run_status(RunStatus.PENDING), _run_token(version)),
            label="skip run",
            set={
                "status": RunStatus.SKIPPED.value,
                "version": version + 1,
                "reason": reason,
                "finished_at": now,
                "expires_at": retention_expiry(now, cfg),
            },
            remove=(*LEASE_ATTRIBUTES, "owner"),
        )
    ]


def buffer_at_start_ops(
    run_id: str, version: int, state: StateItem, now: int, cfg: SchedulerConfig
) -> list[WriteOp]:
    """Park the run until the slot holder finishes, and record it as the job's one buffered run.
    It keeps a lease, renewed by the miss detector while the holder runs: every run that is not
    finished holds a lease, so none can wait forever unseen."""
    return [
        Update(
            RUNS,
            {"run_id": run_id},
            condition=(_run_status(RunStatus.PENDING), _run_token(version)),
            label="buffer run",
            set={
                "status": RunStatus.BUFFERED.value,
                "version": version + 1,
                "buffered_at": now,
                **_dispatch_lease(run_id, now + cfg.dispatch_lease_seconds * 1000, cfg),
            },
            remove=("owner",),
        ),
        Update(
            STATE,
            {"job_id": state["job_id"]},
            condition=(
                eq(
                    "active_run_id",
                    state.get("active_run_id"),
                    "the slot holder has not finished since we read the job (else this run "
                    "would wait for a release that already happened)",
                ),
                not_exists("buffered_run_id", "buffer_one: at most one run waits"),
            ),
            label="buffer in job",
            set={"buffered_run_id": run_id, "updated_at": now},
        ),
    ]


# --- finishing ---------------------------------------------------------------------------------


def _promote(buffered: RunItem, now: int, cfg: SchedulerConfig) -> tuple[Update, RunItem]:
    lease = _dispatch_lease(buffered["run_id"], now + cfg.dispatch_lease_seconds * 1000, cfg)
    promoted = {**buffered, "status": RunStatus.PENDING.value, "version": buffered["version"] + 1, **lease}
    condition: tuple[Cond, ...] = (_run_status(RunStatus.BUFFERED), _run_token(buffered["version"]))
    update = Update(
        RUNS,
        {"run_id": buffered["run_id"]},
        condition=condition,
        label="promote buffered run",
        set={"status": RunStatus.PENDING.value, "version": promoted["version"], **lease},
    )
    return update, promoted


def slot_release_ops(
    state: StateItem | None,
    job_id: str,
    run_id: str,
    buffered: RunItem | None,
    now: int,
    cfg: SchedulerConfig,
) -> tuple[list[WriteOp], RunItem | None]:
    """Release the job's overlap slot held by ``run_id``, promoting the buffered run if any.

    ``state`` is the state item as read (None: assume the common case, slot held and nothing
    buffered; the write's conditions make a wrong assumption fail safely and the caller reads
    and retries). Returns the ops and the promoted run item (to dispatch), if any.
    """
    if state is not None and state.get("active_run_id") != run_id:
        return [], None  # not the slot holder (allow policy, or the slot was never taken)
    buffered_id = state.get("buffered_run_id") if state is not None else None
    release = Update(
        STATE,
        {"job_id": job_id},
        condition=(
            eq("active_run_id", run_id, "only the slot holder releases the job's overlap slot"),
            (
                eq("buffered_run_id", buffered_id, "the buffered run we promote is still the buffered one")
                if buffered_id
                else not_exists(
                    "buffered_run_id", "a run buffered after we read the job must be promoted, not stranded"
                )
            ),
        ),
        label="release overlap slot",
        set={"updated_at": now, **({"active_run_id": buffered_id} if buffered_id else {})},
        remove=("buffered_run_id",) if buffered_id else ("active_run_id",),
    )
    if not buffered_id:
        return [release], None
    if buffered is None or buffered.get("status") != RunStatus.BUFFERED.value:
        # The buffered run is gone or no longer waiting: release the slot and forget it.
        release = Update(
            release.table,
            release.key,
            release.condition,
            release.label,
            set={"updated_at": now},
            remove=("active_run_id", "buffered_run_id"),
        )
        return [release], None
    promote, promoted = _promote(buffered, now, cfg)
    return [release, promote], promoted


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
        {"run_id": run_id},
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
        {"run_id": run_id},
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

    Returns the write and the run as it will be after it (to dispatch when pending)."""
    status = RunStatus(run["status"])
    condition = (_run_status(status), _run_token(run["version"]), _lease_as_read(run))
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
        {"run_id": run["run_id"]},
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


def recheck_op(run: RunItem) -> Update:
    """The detector reached a run's ``check_at`` and found its lease renewed (the worker is
    alive): look again when the lease as it is now runs out. No token changes hands."""
    return Update(
        RUNS,
        {"run_id": run["run_id"]},
        condition=(
            _run_token(run["version"]),
            _run_status(RunStatus(run["status"])),
        ),
        label="recheck lease",
        set={"check_at": run["lease_expires_at"]},
    )


def recheck_buffered_ops(
    run: RunItem, state: StateItem | None, holder: RunItem | None, now: int, cfg: SchedulerConfig
) -> tuple[list[WriteOp], RunItem | None]:
    """A buffered run's lease lapsed: it is still waiting for a live slot holder (renew its
    lease), or its wait can no longer end by a release (the holder is finished or gone, or the
    job's state no longer names it): promote it, so that its start decides again under the
    overlap policy. Returns the ops and the promoted run, if any."""
    waiting = (
        state is not None
        and state.get("buffered_run_id") == run["run_id"]
        and state.get("active_run_id") not in (None, run["run_id"])
        and holder is not None
        and holder.get("status") not in _FINISHED
    )
    unchanged = (_run_status(RunStatus.BUFFERED), _run_token(run["version"]), _lease_as_read(run))
    if waiting:
        renew = Update(
            RUNS,
            {"run_id": run["run_id"]},
            condition=unchanged,
            label="renew buffered lease",
            set=_dispatch_lease(run["run_id"], now + cfg.dispatch_lease_seconds * 1000, cfg),
        )
        return [renew], None
    promote, promoted = _promote(run, now, cfg)
    promote = Update(promote.table, promote.key, unchanged, promote.label, set=promote.set)
    ops: list[WriteOp] = [promote]
    if state is not None and state.get("buffered_run_id") == run["run_id"]:
        holder_id = state.get("active_run_id")
        ops.append(
            Update(
                STATE,
                {"job_id": state["job_id"]},
                condition=(
                    eq("buffered_run_id", run["run_id"], "the job still names this run as buffered"),
                    (
                        eq("active_run_id", holder_id, "the finished holder still holds the slot")
                        if holder_id
                        else not_exists("active_run_id", "the slot is still free")
                    ),
                ),
                label="clear stranded slot",
                set={"updated_at": now},
                remove=("buffered_run_id", "active_run_id") if holder_id else ("buffered_run_id",),
            )
        )
    return ops, promoted


_FINISHED = frozenset(
    {RunStatus.SUCCEEDED.value, RunStatus.FAILED.value, RunStatus.SKIPPED.value, RunStatus.MISSED.value}
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
