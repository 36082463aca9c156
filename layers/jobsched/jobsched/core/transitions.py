"""Every state change jobsched makes, as conditional writes with named parts.

Each function returns the write operations for one transition. Each condition part carries, in
its ``why``, the race it stops; together they are the argument that an occurrence runs once.
The services decide *when* a transition happens; this module decides *what* it writes and
under which conditions.
"""

from __future__ import annotations

from typing import Any

from jobsched.core.config import SchedulerConfig
from jobsched.core.job import OverlapPolicy
from jobsched.core.run import RunKind, RunStatus, shard_of
from jobsched.core.writes import (
    JOBS,
    RUNS,
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

JobItem = dict[str, Any]
RunItem = dict[str, Any]

MAX_REDISPATCHES = 10

# --- named condition parts, shared by the transitions below ------------------------------------


def _job_unchanged(job: JobItem) -> Cond:
    return eq(
        "version",
        job["version"],
        "another trigger, the miss detector, the registrar or a finishing run changed the job "
        "since we read it (possibly from the eventually consistent index): we must not act on "
        "a stale view, e.g. claim the same occurrence twice or advance past a changed schedule",
    )


def _run_is_new() -> Cond:
    return not_exists(
        "run_id",
        "the occurrence already has a run: another trigger, a retried tick, or the miss detector "
        "claimed it first. The run id is deterministic, so exactly one claim creates it",
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


# --- claiming ----------------------------------------------------------------------------------


def _job_advance(
    job: JobItem, occurrence: int, next_occurrence: int | None, now: int, cfg: SchedulerConfig
) -> Update:
    sets: Item = {"version": job["version"] + 1, "last_scheduled_at": occurrence, "updated_at": now}
    remove: tuple[str, ...] = ("catchups",)
    if next_occurrence is None:
        sets["status"] = "finished"
        remove += ("next_run_at", "sched_shard")
    else:
        sets["next_run_at"] = next_occurrence
    return Update(
        JOBS,
        {"job_id": job["job_id"]},
        condition=(
            _job_unchanged(job),
            eq(
                "next_run_at",
                occurrence,
                "the occurrence being claimed is still the job's next one (not advanced by a racer)",
            ),
            eq("status", "active", "a paused, invalid or finished job is not claimed"),
        ),
        label="advance job",
        set=sets,
        remove=remove,
    )


def new_run_item(
    job_id: str,
    run_id: str,
    scheduled_at: int,
    definition: Item,
    kind: RunKind,
    now: int,
    cfg: SchedulerConfig,
    status: RunStatus = RunStatus.PENDING,
    reason: str | None = None,
) -> RunItem:
    item: RunItem = {
        "run_id": run_id,
        "job_id": job_id,
        "scheduled_at": scheduled_at,
        "kind": kind.value,
        "status": status.value,
        "version": 1,
        "attempt": 1,
        "recoveries": 0,
        "definition": definition,
        "claimed_at": now,
    }
    if status is RunStatus.PENDING:
        # The dispatch lease: if no worker starts the run by then (the trigger died before
        # sending, the message was lost), the miss detector finds it in the lease index.
        item["lease_expires_at"] = max(scheduled_at, now) + cfg.dispatch_lease_seconds * 1000
        item["lease_shard"] = shard_of(run_id, cfg.shard_count)
    else:
        item["finished_at"] = now
        item["expires_at"] = retention_expiry(now, cfg)
        if reason:
            item["reason"] = reason
    return item


def claim_ops(
    job: JobItem,
    definition: Item,
    run_id: str,
    occurrence: int,
    next_occurrence: int | None,
    now: int,
    cfg: SchedulerConfig,
    kind: RunKind = RunKind.SCHEDULED,
) -> tuple[list[WriteOp], RunItem]:
    """Claim one occurrence: create its run and advance the job, atomically (one transaction)."""
    run = new_run_item(job["job_id"], run_id, occurrence, definition, kind, now, cfg)
    ops: list[WriteOp] = [
        _job_advance(job, occurrence, next_occurrence, now, cfg),
        Put(RUNS, run, condition=(_run_is_new(),), label="create run"),
    ]
    return ops, run


def advance_only_ops(
    job: JobItem, occurrence: int, next_occurrence: int | None, now: int, cfg: SchedulerConfig
) -> list[WriteOp]:
    """The occurrence's run exists already (e.g. a person re-put the job item, resetting its
    next-run time to an occurrence that was claimed): move the job on without a second run."""
    return [_job_advance(job, occurrence, next_occurrence, now, cfg)]


def misfire_ops(
    job: JobItem,
    fates: list[tuple[RunItem, RunStatus]],
    resume_at: int | None,
    catchups: int,
    now: int,
) -> list[WriteOp]:
    """Record a chunk of missed occurrences (oldest first) and move the job past them, atomically.

    ``fates`` holds the run items to create (pending catch-ups and missed records); ``resume_at``
    is the job's next occurrence after the chunk. An interrupted detector leaves the job at the
    first occurrence not yet written, so the next detector run continues from there.
    """
    first = min(run["scheduled_at"] for run, _ in fates)
    # The chunk's newest occurrence is the job's last handled one, as for a claim.
    last = max(run["scheduled_at"] for run, _ in fates)
    sets: Item = {
        "version": job["version"] + 1,
        "updated_at": now,
        "catchups": catchups,
        "last_scheduled_at": last,
    }
    remove: tuple[str, ...] = ()
    if resume_at is None:
        sets["status"] = "finished"
        remove = ("next_run_at", "sched_shard")
    else:
        sets["next_run_at"] = resume_at
    ops: list[WriteOp] = [
        Update(
            JOBS,
            {"job_id": job["job_id"]},
            condition=(
                _job_unchanged(job),
                eq(
                    "next_run_at",
                    first,
                    "the chunk starts at the job's next occurrence: no occurrence is skipped "
                    "or recorded twice by two detectors",
                ),
                eq("status", "active", "a paused or invalid job is not caught up"),
            ),
            label="advance job past missed",
            set=sets,
            remove=remove,
        )
    ]
    ops += [Put(RUNS, run, condition=(_run_is_new(),), label=f"record {run['run_id']}") for run, _ in fates]
    return ops


def adhoc_run_ops(run: RunItem) -> list[WriteOp]:
    """A manual or backfill run: created once per deterministic id, leaving the schedule alone."""
    return [Put(RUNS, run, condition=(_run_is_new(),), label="create ad-hoc run")]


# --- starting, heartbeats ----------------------------------------------------------------------


def _slot_take(job_id: str, run_id: str, now: int) -> Update:
    return Update(
        JOBS,
        {"job_id": job_id},
        condition=(
            exists("job_id", "a deleted job has no slot to take (the run proceeds without one)"),
            any_of(
                "the previous occurrence still holds the job's overlap slot: the overlap policy "
                "decides (skip or buffer) instead of running the two concurrently",
                not_exists("active_run_id", "the slot is free"),
                eq("active_run_id", run_id, "this run holds the slot already (a retry or recovery)"),
            ),
        ),
        label="take overlap slot",
        set={"active_run_id": run_id, "updated_at": now},
        add={"version": 1},
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
            remove=("lease_expires_at", "lease_shard", "owner"),
        )
    ]


def buffer_at_start_ops(run_id: str, version: int, job: JobItem, now: int) -> list[WriteOp]:
    """Park the run until the slot holder finishes: no lease (nothing to expire), and the job
    records it as the one buffered run."""
    return [
        Update(
            RUNS,
            {"run_id": run_id},
            condition=(_run_status(RunStatus.PENDING), _run_token(version)),
            label="buffer run",
            set={"status": RunStatus.BUFFERED.value, "version": version + 1, "buffered_at": now},
            remove=("lease_expires_at", "lease_shard", "owner"),
        ),
        Update(
            JOBS,
            {"job_id": job["job_id"]},
            condition=(
                eq(
                    "active_run_id",
                    job.get("active_run_id"),
                    "the slot holder has not finished since we read the job (else this run "
                    "would wait for a release that already happened)",
                ),
                not_exists("buffered_run_id", "buffer_one: at most one run waits"),
            ),
            label="buffer in job",
            set={"buffered_run_id": run_id, "updated_at": now},
            add={"version": 1},
        ),
    ]


# --- finishing ---------------------------------------------------------------------------------


def retention_expiry(now: int, cfg: SchedulerConfig) -> int:
    """DynamoDB TTL is in epoch seconds."""
    return now // 1000 + cfg.history_retention_days * 86_400


def slot_release_ops(
    job: JobItem | None, run_id: str, buffered: RunItem | None, now: int, cfg: SchedulerConfig
) -> tuple[list[WriteOp], RunItem | None]:
    """Release the job's overlap slot held by ``run_id``, promoting the buffered run if any.

    ``job`` is the job as read (None: assume the common case, slot held and nothing buffered;
    the write's conditions make a wrong assumption fail safely and the caller reads and retries).
    Returns the ops and the promoted run item (to dispatch), if any.
    """
    if job is not None and job.get("active_run_id") != run_id:
        return [], None  # not the slot holder (allow policy, deleted or re-put job): nothing to release
    buffered_id = job.get("buffered_run_id") if job is not None else None
    release = Update(
        JOBS,
        {"job_id": job["job_id"] if job is not None else _job_of(run_id)},
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
        add={"version": 1},
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
            add={"version": 1},
        )
        return [release], None
    promoted = {
        **buffered,
        "status": RunStatus.PENDING.value,
        "version": buffered["version"] + 1,
        "lease_expires_at": now + cfg.dispatch_lease_seconds * 1000,
        "lease_shard": shard_of(buffered["run_id"], cfg.shard_count),
    }
    promote = Update(
        RUNS,
        {"run_id": buffered["run_id"]},
        condition=(_run_status(RunStatus.BUFFERED), _run_token(buffered["version"])),
        label="promote buffered run",
        set={
            "status": RunStatus.PENDING.value,
            "version": promoted["version"],
            "lease_expires_at": promoted["lease_expires_at"],
            "lease_shard": promoted["lease_shard"],
        },
    )
    return [release, promote], promoted


def _job_of(run_id: str) -> str:
    return run_id.rsplit("@", 1)[0]


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
        remove=("lease_expires_at", "lease_shard"),
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
            "lease_expires_at": now + delay_ms + cfg.dispatch_lease_seconds * 1000,
        },
        remove=("owner",),
    )


# --- recovery ----------------------------------------------------------------------------------


def recover_op(run: RunItem, now: int, cfg: SchedulerConfig, max_attempts: int) -> tuple[Update, RunItem]:
    """Recover a run whose lease expired: redispatch it, as the same attempt if it never started,
    as the next attempt if its worker died, or fail it for good when no attempt is left.

    Returns the write and the run as it will be after it (to dispatch when pending)."""
    status = RunStatus(run["status"])
    condition = (
        _run_status(status),
        _run_token(run["version"]),
        eq(
            "lease_expires_at",
            run["lease_expires_at"],
            "a heartbeat renewed the lease after we read it: the worker is alive",
        ),
    )
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
        after.pop("lease_expires_at", None)
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
            "lease_expires_at": lease_until,
            "recovered_at": now,
            "lease_expired_at": run["lease_expires_at"],
        },
        remove=("owner",),
    )
    return update, after
