"""The run state machine.

    pending ──start──▶ running ──succeed──▶ succeeded
       ▲   ╲             │  ╲──fail (attempts left)──▶ pending (next attempt, delayed)
       │    ╲            │   ╲─fail (last attempt)───▶ failed
       │     ╲           └─lease expired (detector)──▶ pending (next attempt) / failed
       │      ╲─overlap skip at start──▶ skipped
       │       ╲─overlap buffer at start──▶ buffered ──holder ended──▶ pending
       └──dispatch lease expired (detector): redispatched, same attempt
    missed: an occurrence not run by misfire policy (written by the miss detector)

Every transition is a conditional write on ``version`` (the fencing token), see ``transitions/``.
"""

from __future__ import annotations

import hashlib
import json
import re
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from jobsched.core.clock import iso_z


class RunStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    BUFFERED = "buffered"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    SKIPPED = "skipped"
    MISSED = "missed"
    # Written by releases before issue 25's atomic claim (a change's fence at an occurrence it
    # withdrew); no write makes one now. Kept so that such history still reads as not run.
    CANCELLED = "cancelled"


# Records of occurrences that did not run and will not (a backfill may rerun a missed one): no
# turn held in the job's chain.
NOT_RUN = frozenset({RunStatus.MISSED.value, RunStatus.CANCELLED.value})


class RunKind(StrEnum):
    SCHEDULED = "scheduled"
    CATCHUP = "catchup"
    MANUAL = "manual"
    BACKFILL = "backfill"


# A run id's length: the runs table's sort key and the message's field. A job id is at most 128
# characters, an instant 24, so a manual run's request id has the rest (``manual_run_id``).
MAX_RUN_ID_LENGTH = 400


def run_id_for(job_id: str, scheduled_at_ms: int) -> str:
    """Deterministic: every trigger derives the same id for the same occurrence."""
    return f"{job_id}@{iso_z(scheduled_at_ms)}"


def manual_run_id(job_id: str, request_id: str) -> str:
    return f"{job_id}@manual:{request_id}"


# A manual run's request id (``jobsched trigger --request-id``): printable ASCII without spaces,
# so its run id's length in characters is its length in bytes (a DynamoDB key's limit is bytes).
REQUEST_ID_PATTERN = re.compile(r"[!-~]+")


def check_request_id(job_id: str, request_id: str) -> None:
    """Refuse a request id whose run id could not be written or sent (``ValueError``), before
    anything is written: the run would otherwise join the job's chain and then fail as a message
    on every dispatch."""
    if not REQUEST_ID_PATTERN.fullmatch(request_id):
        raise ValueError(f"request id {request_id[:60]!r}: use printable ASCII characters without spaces")
    room = MAX_RUN_ID_LENGTH - len(manual_run_id(job_id, ""))
    if len(request_id) > room:
        raise ValueError(
            f"request id is {len(request_id)} characters; job {job_id} allows at most {room} "
            f"(a run id, <job_id>@manual:<request id>, is at most {MAX_RUN_ID_LENGTH} characters)"
        )


def run_key(run_id: str) -> dict[str, str]:
    """The runs table's key of a run: partition ``job_id``, sort ``run_id``. Every run id is
    ``<job_id>@...`` and a job id cannot contain ``@`` (``JOB_ID_PATTERN``), so the job id is the
    part before the first ``@``. A run id without one is not a run's (``ValueError``)."""
    job_id, at, _ = run_id.partition("@")
    if not at or not job_id:
        raise ValueError(f"not a run id (expected <job_id>@...): {run_id!r}")
    return {"job_id": job_id, "run_id": run_id}


def shard_of(key: str, shard_count: int) -> int:
    # A stable hash (not Python's salted hash()) so every process agrees on the shard.
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=4).digest(), "big") % shard_count


class RunMessage(BaseModel):
    """What travels through SQS: enough to start the run without reading it. The one model of a
    message: the dispatcher builds it from a run item, the worker validates a body against it
    (services/messages.py), and a retry or a deferral turns it back into a run item."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    v: Literal[1] = 1  # the message format, for a later change to be told apart
    run_id: str = Field(min_length=3, max_length=MAX_RUN_ID_LENGTH)
    job_id: str = Field(min_length=1, max_length=128)
    version: int = Field(ge=1)
    attempt: int = Field(ge=1)
    scheduled_at: int = Field(ge=0)
    definition: dict[str, Any]
    # The run before this one in the job's chain (services/chain.py): where the start's walk
    # for the job's turn begins. None: the first run of its job, or a job without a state item.
    after_run_id: str | None = Field(default=None, max_length=MAX_RUN_ID_LENGTH)
    # The run's kind (``RunKind``): a backfill run waits for its turn where another would be
    # skipped (core/policies.py ``decide_overlap``). None: a message from before the field.
    kind: str | None = Field(default=None, max_length=32)

    @model_validator(mode="after")
    def _runs_of_its_job(self) -> RunMessage:
        """Both ids are the job's own run ids (``<job_id>@...``, ``run_key``): a message that says
        otherwise was not written by jobsched, and would fail deep in the worker on every
        delivery. Refused here, it is poison: to the dead-letter queue, not retried."""
        prefix = f"{self.job_id}@"
        for name in ("run_id", "after_run_id"):
            value = getattr(self, name)
            if value is not None and (not value.startswith(prefix) or len(value) == len(prefix)):
                raise ValueError(
                    f"{name} {value[:200]!r} is not a run id of job {self.job_id!r} ({prefix}...)"
                )
        return self

    def to_body(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)

    def as_run_item(self) -> dict[str, Any]:
        """The run as the message describes it, to dispatch again (a deferral, a retry)."""
        return self.model_dump(exclude={"v"}, exclude_none=True)

    @classmethod
    def from_run_item(cls, item: dict[str, Any]) -> RunMessage:
        return cls.model_validate({name: item[name] for name in cls.model_fields if name in item})


def encode_body(body: dict[str, Any]) -> str:
    """A message body as it travels: compact, deterministic JSON (sorted keys, no spaces). Its
    UTF-8 length is what SQS's size limits count (core/limits.py)."""
    return json.dumps(body, separators=(",", ":"), sort_keys=True)
