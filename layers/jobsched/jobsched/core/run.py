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
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, Literal, NamedTuple

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
    # withdrew); no write makes one now. Kept so that such history still reads as not run. The
    # successor claim (docs/proposals/successor-claim-build.md) reuses it for a cancelled head:
    # an occurrence that was not due under its timing, and is not a record.
    CANCELLED = "cancelled"
    # The successor claim's vocabulary (issue 37; nothing writes these yet, see the build plan):
    # a head, or a claimed run not yet started (its successor exists).
    SCHEDULED = "scheduled"
    # A change's closure marker at a closed head's successor key: no claim lands there.
    CLOSED = "closed"
    # The end marker of a finite job's life (``max_runs``, ``at()``, ``end``): its last claim.
    END = "end"


# Records of occurrences that did not run and will not (a backfill may rerun a missed one): no
# turn held in the job's chain.
NOT_RUN = frozenset({RunStatus.MISSED.value, RunStatus.CANCELLED.value})
# A run a worker's message may still start (or skip, or park behind the run holding its job's
# turn): ``pending`` (claimed today, a retry, a promoted or redispatched run) and, under the
# successor claim, ``scheduled`` (a claimed run not started yet: docs/proposals/
# successor-claim-build.md §1 "start", "overtake", "skip, buffer"). One tuple for every condition
# and test that names them, in this order (a condition's values keep it).
AWAITING_START = (RunStatus.SCHEDULED, RunStatus.PENDING)
# A run that holds its job's turn until it ends (walk rule W5; core/policies.py ``UNFINISHED``).
UNFINISHED_STATUSES = (*AWAITING_START, RunStatus.RUNNING, RunStatus.BUFFERED)


class RunKind(StrEnum):
    SCHEDULED = "scheduled"
    CATCHUP = "catchup"
    MANUAL = "manual"
    BACKFILL = "backfill"


# A run id's length: the runs table's sort key and the message's field. A job id is at most 128
# characters, an instant 24, so a manual run's request id has the rest (``manual_run_id``).
MAX_RUN_ID_LENGTH = 400


def run_id_for(job_id: str, scheduled_at_ms: int, epoch: int | None = None) -> str:
    """Deterministic: every trigger derives the same id for the same occurrence. ``epoch``: the
    successor claim's key (``<job>@<instant>#<epoch>``, the state version of the change that set
    the timing, so no record of one timing lies at another's key); None: today's id, which reads
    as epoch 0 (``parse_run_id``)."""
    base = f"{job_id}@{iso_z(scheduled_at_ms)}"
    return base if epoch is None else f"{base}#{epoch}"


def end_run_id(job_id: str, last_head_at_ms: int, epoch: int) -> str:
    """The end marker's key: the instant and epoch of the life's last head, so no two lives, raises
    of ``max_runs`` or changes share one. Sorts after the instants' digits, as ``manual:`` does."""
    return f"{job_id}@end:{iso_z(last_head_at_ms)}#{epoch}"


class RunIdParts(NamedTuple):
    """A run id, parsed. ``kind``: ``timed`` (an occurrence), ``manual`` (a request) or ``end`` (an
    end marker). ``instant_ms``: the occurrence's (or the last head's) instant; None for a manual
    run. ``epoch``: 0 for an id written before epochs (and for a manual run)."""

    job_id: str
    kind: Literal["timed", "manual", "end"]
    instant_ms: int | None
    epoch: int
    request_id: str | None = None


_UNIX_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_EPOCH_SUFFIX = re.compile(r"^(?P<instant>[^#]+)(?:#(?P<epoch>[1-9][0-9]*))?$")


def parse_run_id(run_id: str) -> RunIdParts:
    """The parts of a run id (``ValueError`` if it is not one). Readers group a job's items by
    instant and compare epochs as numbers: within an instant, ids sort as text (``#10`` before
    ``#9``), so an id is never compared for its epoch."""
    job_id = run_key(run_id)["job_id"]
    rest = run_id[len(job_id) + 1 :]
    if rest.startswith("manual:"):
        return RunIdParts(job_id, "manual", None, 0, rest[len("manual:") :])
    kind: Literal["timed", "end"] = "timed"
    if rest.startswith("end:"):
        kind, rest = "end", rest[len("end:") :]
    match = _EPOCH_SUFFIX.match(rest)
    if match is None:
        raise ValueError(f"not a run id (expected <job_id>@<instant>[#<epoch>]): {run_id!r}")
    try:
        at = datetime.fromisoformat(match["instant"].replace("Z", "+00:00"))
        # Exact milliseconds (``dt_to_ms`` goes through a float timestamp).
        instant = (at - _UNIX_EPOCH) // timedelta(milliseconds=1)
    except (ValueError, TypeError):
        raise ValueError(f"not a run id (its instant does not parse): {run_id!r}") from None
    if kind == "end" and match["epoch"] is None:
        raise ValueError(f"not an end marker's id (expected an epoch): {run_id!r}")
    return RunIdParts(job_id, kind, instant, int(match["epoch"] or 0))


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
