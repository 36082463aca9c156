"""The job definition: the job queue's data shape, validated at every boundary.

A job item in the jobs table has two kinds of attributes:

- **definition** attributes, written by people (console, ``aws dynamodb put-item``, the CLI, the
  Python API) and validated here: ``job_id``, ``schedule``, ``timezone``, ``start``, ``end``,
  ``target``, ``payload``, ``retry``, ``timeout_seconds``, ``misfire``, ``overlap``, ``enabled``;
- **scheduler state** attributes, written only by jobsched (``JobState`` in ``job_state.py``).

``to_item``/``from_item`` convert a definition to and from its item form losslessly.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from decimal import Decimal
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from jobsched.core.schedule import Schedule, ScheduleError, load_zone, parse_schedule

JOB_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"
TARGET_PATTERN = r"^[a-z][a-z0-9_.-]{0,63}$"
# The payload travels in the run record (a DynamoDB item, 400 KB maximum) and to the handler;
# and, in the run message's definition snapshot, through SQS (256 KiB). 64 KiB keeps every item
# and every message far below both services' limits with room for the other attributes.
MAX_PAYLOAD_BYTES = 64 * 1024
# Retries are delivered as delayed SQS messages, and SQS delays stop at 15 minutes.
MAX_BACKOFF_SECONDS = 900
# The worker Lambda's own timeout (template parameter) must exceed this.
MAX_TIMEOUT_SECONDS = 840

DEFINITION_FIELDS = (
    "job_id",
    "schedule",
    "timezone",
    "start",
    "end",
    "target",
    "payload",
    "retry",
    "timeout_seconds",
    "misfire",
    "overlap",
    "enabled",
    "description",
)
# Attributes jobsched itself writes on a job item (docs/data-model.md). Any other attribute is
# neither definition nor state: most likely a misspelled field, reported instead of ignored.
STATE_FIELDS = frozenset(
    {
        "version",
        "status",
        "def_hash",
        "invalid_reasons",
        "next_run_at",
        "sched_shard",
        "active_run_id",
        "buffered_run_id",
        "catchups",
        "last_scheduled_at",
        "updated_at",
        "registered_at",
    }
)


class MisfirePolicy(StrEnum):
    RUN_ONCE = "run_once"  # coalesce: one catch-up run for all missed occurrences
    RUN_ALL = "run_all"  # each missed occurrence runs, up to max_catchup
    SKIP = "skip"  # missed occurrences are recorded and not run


class OverlapPolicy(StrEnum):
    SKIP = "skip"  # an occurrence due while the previous run is active is recorded as skipped
    ALLOW = "allow"  # occurrences run concurrently
    BUFFER_ONE = "buffer_one"  # at most one occurrence waits for the active run to finish


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RetryPolicy(_Strict):
    """Exponential backoff with full jitter: delay = uniform(0, min(max, base * 2**(attempt-1)))."""

    max_attempts: int = Field(3, ge=1, le=20, description="Attempts in all, the first included.")
    backoff_seconds: int = Field(10, ge=1, le=MAX_BACKOFF_SECONDS, description="Base delay.")
    max_backoff_seconds: int = Field(300, ge=1, le=MAX_BACKOFF_SECONDS, description="Delay cap.")
    jitter: bool = Field(True, description="Full jitter, so retries of many jobs spread out.")

    @model_validator(mode="after")
    def _cap_not_below_base(self) -> RetryPolicy:
        if self.max_backoff_seconds < self.backoff_seconds:
            raise ValueError("max_backoff_seconds must be >= backoff_seconds")
        return self


class Misfire(_Strict):
    policy: MisfirePolicy = Field(MisfirePolicy.RUN_ONCE, description="What to do with missed occurrences.")
    grace_seconds: int = Field(
        60, ge=0, le=86_400, description="An occurrence later than this is missed, not merely late."
    )
    max_catchup: int = Field(10, ge=1, le=1000, description="run_all: most occurrences run per outage.")


class JobDefinition(_Strict):
    job_id: str = Field(pattern=JOB_ID_PATTERN, description="1-128 of A-Z a-z 0-9 _ . : -")
    schedule: str = Field(min_length=1, max_length=256, description="at(...), rate(...) or cron(...)")
    timezone: str = Field("UTC", description="IANA zone the schedule's wall times are read in.")
    start: datetime | None = Field(None, description="No occurrence before this instant.")
    end: datetime | None = Field(None, description="No occurrence after this instant.")
    target: str = Field(pattern=TARGET_PATTERN, description="Name of a registered handler.")
    payload: dict[str, Any] = Field(default_factory=dict, description="JSON object given to the handler.")
    retry: RetryPolicy = Field(default_factory=lambda: RetryPolicy())
    timeout_seconds: int = Field(60, ge=1, le=MAX_TIMEOUT_SECONDS)
    misfire: Misfire = Field(default_factory=lambda: Misfire())
    overlap: OverlapPolicy = OverlapPolicy.SKIP
    enabled: bool = True
    description: str = Field("", max_length=1024)

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            load_zone(value)
        except ScheduleError as exc:
            raise ValueError(str(exc)) from exc
        return value

    @field_validator("start", "end")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError("needs a UTC offset or 'Z' (e.g. 2026-01-01T00:00:00Z)")
        return value.astimezone(UTC) if value is not None else None

    @field_validator("payload")
    @classmethod
    def _payload_size(cls, value: dict[str, Any]) -> dict[str, Any]:
        size = len(_canonical_json(value).encode())
        if size > MAX_PAYLOAD_BYTES:
            raise ValueError(f"payload is {size} bytes as JSON; the limit is {MAX_PAYLOAD_BYTES}")
        return value

    @model_validator(mode="after")
    def _schedule_parses(self) -> JobDefinition:
        try:
            self.compiled_schedule()
        except ScheduleError as exc:
            raise ValueError(f"schedule: {exc}") from exc
        return self

    def compiled_schedule(self) -> Schedule:
        return _compile(self.schedule, self.timezone, self.start, self.end)

    def definition_hash(self) -> str:
        """A digest of the definition: the registrar's way to tell a person's change from its own
        write (which leaves the definition, hence the digest, unchanged)."""
        return hashlib.sha256(_canonical_json(self.to_item()).encode()).hexdigest()[:16]

    def to_item(self) -> dict[str, Any]:
        """The item form of the definition: only DynamoDB-friendly values (no floats, no datetimes)."""
        item: dict[str, Any] = {
            "job_id": self.job_id,
            "schedule": self.schedule,
            "timezone": self.timezone,
            "target": self.target,
            # A JSON string keeps any JSON (floats included) lossless, which DynamoDB numbers are not.
            "payload": _canonical_json(self.payload),
            "retry": self.retry.model_dump(),
            "timeout_seconds": self.timeout_seconds,
            "misfire": {**self.misfire.model_dump(), "policy": self.misfire.policy.value},
            "overlap": self.overlap.value,
            "enabled": self.enabled,
        }
        if self.start is not None:
            item["start"] = _iso(self.start)
        if self.end is not None:
            item["end"] = _iso(self.end)
        if self.description:
            item["description"] = self.description
        return item

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> JobDefinition:
        """Parse the definition attributes of an item; scheduler state attributes are ignored.

        Raises ``InvalidJob`` with human-readable reasons.
        """
        data = {k: _plain(v) for k, v in item.items() if k not in STATE_FIELDS}
        payload = data.get("payload")
        if isinstance(payload, str):
            try:
                data["payload"] = json.loads(payload) if payload.strip() else {}
            except json.JSONDecodeError as exc:
                raise InvalidJob([f"payload: not valid JSON ({exc.msg} at position {exc.pos})"]) from exc
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise InvalidJob(readable_reasons(exc)) from exc


class InvalidJob(ValueError):
    """A job item that cannot be scheduled, with reasons a person can act on."""

    def __init__(self, reasons: list[str]) -> None:
        super().__init__("; ".join(reasons))
        self.reasons = reasons


def readable_reasons(exc: ValidationError) -> list[str]:
    reasons = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error["loc"]) or "item"
        message = str(error["msg"]).removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            message = "unknown field (check the spelling against the documented job item format)"
        elif error["type"] == "string_pattern_mismatch" and where == "job_id":
            message = "must be 1-128 characters of A-Z a-z 0-9 _ . : - starting with a letter or digit"
        elif error["type"] == "string_pattern_mismatch" and where == "target":
            message = "must be the name of a registered handler: lowercase letters, digits, _ . -"
        # A model-level check (no location) names its field in its own message ("schedule: ...").
        reasons.append(f"{where}: {message}" if error["loc"] else message)
    return reasons


def _compile(expression: str, zone: str, start: datetime | None, end: datetime | None) -> Schedule:
    return parse_schedule(expression, timezone=zone, start=start, end=end)


def _canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def plain_values(value: Any) -> Any:
    """DynamoDB numbers arrive as Decimal through boto3 (and stream images); the core wants ints."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: plain_values(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [plain_values(v) for v in value]
    return value


_plain = plain_values


JobStatus = Literal["active", "paused", "invalid", "finished"]
