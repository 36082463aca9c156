"""The worker's writes after its handler: the fenced commit, and the retry that releases the run
for its next attempt.
"""

from __future__ import annotations

from jobsched.core.config import SchedulerConfig
from jobsched.core.run import RunStatus, run_key
from jobsched.core.transitions.conditions import (
    LEASE_ATTRIBUTES,
    _dispatch_lease,
    _run_status,
    _run_token,
    retention_expiry,
)
from jobsched.core.writes import RUNS, Cond, Item, Update


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
