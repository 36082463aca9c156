"""The miss detector's writes on runs whose lease lapsed: the recovery (a redispatch with a new
token, or the run failed), the recheck of a renewed lease, and the recheck of a buffered run.
"""

from __future__ import annotations

from dataclasses import replace

from jobsched.core.config import SchedulerConfig
from jobsched.core.run import RunStatus, run_key
from jobsched.core.transitions.conditions import (
    LEASE_ATTRIBUTES,
    RunItem,
    _dispatch_lease,
    _lease_as_read,
    _not_asked_to_stop,
    _run_status,
    _run_token,
)
from jobsched.core.transitions.finish import finish_ops
from jobsched.core.transitions.start import promote_op
from jobsched.core.writes import RUNS, Cond, Update

# Redispatches of a run no worker starts before it is failed: 20 dispatch leases of 30 s.
MAX_REDISPATCHES = 20


def recover_op(run: RunItem, now: int, cfg: SchedulerConfig, max_attempts: int) -> tuple[Update, RunItem]:
    """Recover a run whose lease expired: redispatch it, as the same attempt if it never started,
    as the next attempt if its worker died, or fail it for good when no attempt is left.

    ``cancel_other``: a run a newer one asked to stop (``cancel_requested``, set by the newer
    run's buffer write) is not redispatched: it ends ``failed`` as cancelled (``cancelled_error``:
    no retry, no pause on failure), and the run waiting behind it is promoted by the caller. A
    redispatch is conditional on no such request (``_not_asked_to_stop``), so a request that
    lands after the read fails it, and the next look ends the run instead.

    A ``scheduled`` run (the successor claim's claimed run, not started) asked to stop is ended
    so too (build plan §1 "recover", W16; the model's ``end_cancelled``): a ``cancel_other`` run
    may wait behind a claimed run not yet due, and that run's start is then refused. Its lost
    dispatch otherwise is the redispatch's (it stays ``scheduled``), not a recovery's. A head
    carries no ``lease_expires_at`` (its ``check_at`` is its instant's, HC7), so its token alone
    fences the end: every write that moves a ``scheduled`` run on moves its token.

    Returns the write and the run as it will be after it (to dispatch when pending)."""
    status = RunStatus(run["status"])
    if status is RunStatus.SCHEDULED and not run.get("cancel_requested"):
        raise ValueError(
            f"run {run['run_id']}: a scheduled run's lost dispatch is redispatched (it stays "
            "scheduled), not recovered; only one asked to stop (cancel_other) ends here"
        )
    condition: tuple[Cond, ...] = (_run_status(status), _run_token(run["version"]))
    if "lease_expires_at" in run or status is not RunStatus.SCHEDULED:
        condition += (_lease_as_read(run),)
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
