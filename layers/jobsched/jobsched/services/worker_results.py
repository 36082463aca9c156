"""What the worker's steps return: ``begin`` a ``Started`` run (or an ``Outcome`` when it does not
start), the handler's run a ``HandlerResult``, ``finish`` an ``Outcome`` (services/worker.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from jobsched.core.job import JobDefinition
from jobsched.core.run import RunMessage
from jobsched.core.writes import WriteOp
from jobsched.targets.registry import RunContext


class Outcome(StrEnum):
    SUCCEEDED = "succeeded"
    RETRY_SCHEDULED = "retry_scheduled"
    FAILED = "failed"
    DUPLICATE = "duplicate_dropped"
    FENCED_OUT = "fenced_out"
    SKIPPED = "skipped"
    BUFFERED = "buffered"
    DEFERRED = "deferred"
    ABANDONED = "abandoned"


@dataclass
class Started:
    message: RunMessage
    definition: JobDefinition
    token: int  # the fencing token this worker holds
    owner: str
    started_at: int
    deadline_ms: int
    context: RunContext
    # ``cancel_other``: the run that asked this one to stop (seen in a heartbeat's response).
    cancel_requested_by: str | None = None


@dataclass
class HandlerResult:
    ok: bool
    error: str | None = None
    staged: list[WriteOp] = field(default_factory=list)
    # No attempt can succeed (the target names no handler here, or the handler raised a
    # PermanentHandlerError such as NotAllowed): fail now, without retries.
    permanent: bool = False
    # The worker lost its lease while the handler ran: nothing may be committed.
    fenced: bool = False
    # Past its timeout the handler ignored ``ctx.cancelled`` until the invocation's deadline: its
    # thread cannot be killed, so nothing is recorded (the lease, held to the deadline, keeps the
    # job's turn) and the sandbox must end with it (``SANDBOX_MUST_END``).
    abandoned: bool = False


FENCED_OUT = HandlerResult(False, "fenced out: lease lost", fenced=True)
