"""The claim (the trigger's; the registrar's for a first occurrence): a new run and the job's state
past its occurrence, in one transaction; and the advance past an occurrence a backfill recorded.
"""

from __future__ import annotations

from jobsched.core.config import SchedulerConfig
from jobsched.core.run import RunKind, RunStatus
from jobsched.core.state import INDEX_ATTRIBUTES, JobStatus
from jobsched.core.timing import start_at_ms
from jobsched.core.transitions.conditions import (
    RunItem,
    StateItem,
    _dispatch_lease,
    _next_is,
    _run_is_new,
    _state_unchanged,
    _still_active,
    retention_expiry,
)
from jobsched.core.writes import RUNS, STATE, Item, Put, Update, WriteOp


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
