"""A job's own dead-letter queue (``dead_letter_queue_arn``, issue 38), as EventBridge Scheduler's
``DeadLetterConfig``: the writes that make its delivery at least once.

A run that fails for good under a job with a dead-letter queue owes that queue its outcome. The
debt is written **in the failure's own write** (``with_dead_letter``): ``dead_letter: pending``,
the queue, and a ``check_at`` in the lease index, a dispatch lease ahead. Whoever made the
failure (the worker, or the miss detector) then sends and records the send
(``dead_letter_done_op``), which takes the run out of the index. If that actor dies, or its send
fails, the run's ``check_at`` comes and the detector's lease sweep finds it, sends and records:
level-triggered, as a lapsed lease is. A send whose record was lost is sent again (at least once:
the message carries the run id, and a FIFO queue deduplicates on it for 5 minutes). The run's
``status`` stays ``failed``: the debt is beside it, never a new status.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from jobsched.core.config import SchedulerConfig
from jobsched.core.run import RunStatus, run_key, shard_of
from jobsched.core.writes import RUNS, Cond, Update, eq

PENDING = "pending"  # the outcome is owed to the queue
SENT = "sent"  # SQS accepted it (at least once: perhaps more than once)
REFUSED = "refused"  # the queue is not on the stack's allow-list: never sent, logged as an error
# How long a failed send waits before the detector tries again.
RETRY_MS = 60_000


def with_dead_letter(commit: Update, run_id: str, queue_arn: str, now: int, cfg: SchedulerConfig) -> Update:
    """``commit`` (a final failure) that also records the debt to ``queue_arn``, with a
    ``check_at`` in the lease index so the detector delivers it if nobody else does. The index
    entry is kept rather than removed (the commit removes a run's lease attributes)."""
    due = now + cfg.dispatch_lease_seconds * 1000
    sets = {
        **commit.set,
        "dead_letter": PENDING,
        "dead_letter_queue_arn": queue_arn,
        "check_at": due,
        "lease_shard": shard_of(run_id, cfg.shard_count),
    }
    remove = tuple(name for name in commit.remove if name not in ("check_at", "lease_shard"))
    return replace(commit, set=sets, remove=remove, label=f"{commit.label} (dead letter owed)")


# The named condition parts of the two writes that settle a debt (each its switch in
# sim/mutants.py: ``dead_letter_done_op:_letter_owed`` ...; docs/promises.md, row 30).
def _failed_run() -> Cond:
    return eq("status", RunStatus.FAILED.value, "the debt belongs to a failed run, and a failed run is final")


def _letter_owed() -> Cond:
    return eq(
        "dead_letter",
        PENDING,
        "a racer (the worker or the detector) recorded the delivery already: one record, and no "
        "check_at put back on a settled debt",
    )


def _failure_as_read(run: dict[str, Any]) -> Cond:
    return eq("version", run["version"], "the failure as read: no other write moved the run")


def dead_letter_done_op(run: dict[str, Any], outcome: str, now: int, note: str | None = None) -> Update:
    """The debt is settled (``SENT``, or ``REFUSED`` with why): out of the lease index."""
    sets: dict[str, Any] = {"dead_letter": outcome, "dead_letter_at": now}
    if note:
        sets["dead_letter_error"] = note[:1000]
    return Update(
        RUNS,
        run_key(str(run["run_id"])),
        condition=(_failed_run(), _letter_owed(), _failure_as_read(run)),
        label=f"dead letter {outcome}",
        set=sets,
        remove=("check_at", "lease_shard"),
    )


def dead_letter_retry_op(run: dict[str, Any], error: str, now: int) -> Update:
    """A send failed: look again in ``RETRY_MS`` (the run stays in the index, owed)."""
    return Update(
        RUNS,
        run_key(str(run["run_id"])),
        condition=(_failed_run(), _letter_owed(), _failure_as_read(run)),
        label="dead letter retry",
        set={"check_at": now + RETRY_MS, "dead_letter_error": error[:1000]},
    )


def dead_letter_body(run: dict[str, Any]) -> dict[str, Any]:
    """What the queue receives: the run, the error, the attempts (as the run recorded them)."""
    return {
        "source": "jobsched",
        "type": "Run Failed",
        "job_id": run.get("job_id"),
        "run_id": run.get("run_id"),
        "scheduled_at": run.get("scheduled_at"),
        "failed_at": run.get("finished_at"),
        "attempts": run.get("attempt"),
        "error": run.get("last_error"),
    }
