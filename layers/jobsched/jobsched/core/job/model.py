"""The job definition's model: its policies and the pydantic models a job item is validated
into (``JobDefinition.from_item``), and what a definition gives back: its item form
(``to_item``), its digest (``definition_hash``) and its compiled schedule."""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from jobsched.core.job.fields import (
    DEAD_LETTER_QUEUE_ARN_PATTERN,
    GROUP_PATTERN,
    JOB_ID_PATTERN,
    MAX_BACKOFF_SECONDS,
    MAX_EVENT_AGE_SECONDS,
    MAX_JITTER_SECONDS,
    MAX_PAYLOAD_BYTES,
    MAX_PAYLOAD_DEPTH,
    MAX_TAG_KEY_CHARS,
    MAX_TAG_VALUE_CHARS,
    MAX_TAGS,
    MAX_TIMEOUT_SECONDS,
    MIN_EVENT_AGE_SECONDS,
    OPTIONAL_FIELDS,
    STATE_FIELDS,
    TARGET_PATTERN,
)
from jobsched.core.job.parse import (
    InvalidJob,
    clip,
    decode_payload,
    enabled_value,
    kind_of,
    nesting_depth,
    plain_values,
    readable_reasons,
    show_name,
)
from jobsched.core.schedule import HORIZON_END, Schedule, ScheduleError, load_zone, parse_schedule


class MisfirePolicy(StrEnum):
    RUN_ONCE = "run_once"  # coalesce: one catch-up run for all missed occurrences
    RUN_ALL = "run_all"  # each missed occurrence runs, up to max_catchup
    SKIP = "skip"  # missed occurrences are recorded and not run


class OverlapPolicy(StrEnum):
    SKIP = "skip"  # an occurrence due while the previous run is active is recorded as skipped
    ALLOW = "allow"  # occurrences run concurrently
    BUFFER_ONE = "buffer_one"  # at most one occurrence waits for the active run to finish
    BUFFER_ALL = "buffer_all"  # every occurrence waits its turn, in chain order
    CANCEL_OTHER = "cancel_other"  # a new occurrence asks the active run to stop, then waits for it


class ActionAfterCompletion(StrEnum):
    """What happens to the job item once the job is complete: it makes no more runs (an ``at()``
    that ran, an ``end`` passed, ``max_runs`` reached) and every run it made has ended. As
    EventBridge Scheduler's ``ActionAfterCompletion`` (``NONE``, ``DELETE``)."""

    NONE = "none"  # the job item stays, its state finished
    DELETE = "delete"  # the miss detector's reconcile pass deletes the job item (services/completion.py)


# The policies under which a run waits behind the one holding the job's turn (services/chain.py).
WAITING_POLICIES = frozenset({OverlapPolicy.BUFFER_ONE, OverlapPolicy.BUFFER_ALL, OverlapPolicy.CANCEL_OTHER})


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
    jitter_seconds: int = Field(
        0,
        ge=0,
        le=MAX_JITTER_SECONDS,
        description="A run starts up to this long after its instant, at an offset fixed per occurrence.",
    )
    pause_on_failure: bool = Field(False, description="A run that fails for good pauses the job.")
    max_runs: int | None = Field(None, ge=1, le=1_000_000, description="Scheduled runs, then finished.")
    action_after_completion: ActionAfterCompletion = Field(
        ActionAfterCompletion.NONE,
        description="delete: the job item is deleted once the job made its last run and every run ended.",
    )
    group: str | None = Field(None, pattern=GROUP_PATTERN, description="For list/pause/resume by group.")
    tags: dict[str, str] = Field(default_factory=dict, description="For list/pause/resume by tag.")
    max_event_age_seconds: int | None = Field(
        None,
        ge=MIN_EVENT_AGE_SECONDS,
        le=MAX_EVENT_AGE_SECONDS,
        description="No retry starts once the run is older than this (from its scheduled instant).",
    )
    dead_letter_queue_arn: str | None = Field(
        None,
        pattern=DEAD_LETTER_QUEUE_ARN_PATTERN,
        description="An SQS queue a run that fails for good is reported to, at least once.",
    )

    @field_validator("tags")
    @classmethod
    def _tags_bounded(cls, value: dict[str, str]) -> dict[str, str]:
        if len(value) > MAX_TAGS:
            raise ValueError(f"{len(value)} tags; the limit is {MAX_TAGS}")
        for key, text in value.items():
            if not 1 <= len(key) <= MAX_TAG_KEY_CHARS:
                raise ValueError(f"a tag key must be 1-{MAX_TAG_KEY_CHARS} characters, got {len(key)}")
            if len(text) > MAX_TAG_VALUE_CHARS:
                raise ValueError(f"tag {clip(key, 40)!r}: value longer than {MAX_TAG_VALUE_CHARS} characters")
        return value

    @field_validator("enabled", mode="before")
    @classmethod
    def _enabled_read_one_way(cls, value: Any) -> Any:
        read = enabled_value(value)
        return value if read is None else read  # unreadable: pydantic's own reason

    @field_validator("action_after_completion", mode="before")
    @classmethod
    def _known_action(cls, value: Any) -> Any:
        if value is None:
            return ActionAfterCompletion.NONE  # null, as absent: the default
        if value in tuple(ActionAfterCompletion):
            return value
        shown = clip(repr(value), 40) if isinstance(value, str) else kind_of(value)
        lower = isinstance(value, str) and value.lower() in tuple(ActionAfterCompletion)
        raise ValueError(
            'must be "none" (keep the job item) or "delete" (delete the job item once the job made '
            f"its last run and every run ended), got {shown}" + ("; write it in lowercase" if lower else "")
        )

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
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("needs a UTC offset or 'Z' (e.g. 2026-01-01T00:00:00Z)")
        try:
            instant = value.astimezone(UTC)
        except OverflowError:
            # 9999-12-31T23:59:59-05:00 is in year 10000 in UTC, 0001-01-01T00:00:00+01:00 in year 0.
            edge = "after year 9999" if value.year > 1 else "before year 1"
            raise ValueError(
                f"{value.isoformat()} is {edge} in UTC, outside the dates that can be stored; "
                "leave the field out for no bound"
            ) from None
        return instant

    @field_validator("start")
    @classmethod
    def _start_in_horizon(cls, value: datetime | None) -> datetime | None:
        # An end this late is fine ("never ends"); a start this late leaves nothing to schedule.
        if value is not None and value >= HORIZON_END:
            raise ValueError(f"{_iso(value)} is after 2199, the last year jobsched schedules in")
        return value

    @field_validator("payload", mode="before")
    @classmethod
    def _payload_object(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = decode_payload(value)  # which limits the depth itself
        elif nesting_depth(value, MAX_PAYLOAD_DEPTH) > MAX_PAYLOAD_DEPTH:
            raise ValueError(
                f"nested more than {MAX_PAYLOAD_DEPTH} levels deep; the limit is {MAX_PAYLOAD_DEPTH}"
            )
        if not isinstance(value, dict):
            raise ValueError(f"must be a JSON object ({{...}}), got {kind_of(value)}")
        return value

    @field_validator("payload")
    @classmethod
    def _payload_size(cls, value: dict[str, Any]) -> dict[str, Any]:
        try:
            size = len(_canonical_json(value).encode())
        except UnicodeEncodeError:
            raise ValueError(
                "contains an unpaired surrogate escape (such as \\ud800), which is not Unicode text"
            ) from None
        except ValueError:
            # json refuses inf and NaN here (allow_nan=False): NaN or Infinity written in the
            # JSON text (Python's json accepts them, JSON does not) or a number too large for a
            # double (1e400); in a payload built in Python, also a huge int.
            raise ValueError(
                "holds NaN, Infinity or a number too large for a double (such as 1e400), "
                "which JSON cannot represent"
            ) from None
        except TypeError:
            raise ValueError("holds a value that is not JSON (only a payload built in Python can)") from None
        if size > MAX_PAYLOAD_BYTES:
            raise ValueError(f"payload is {size} bytes as JSON; the limit is {MAX_PAYLOAD_BYTES}")
        return value

    @model_validator(mode="after")
    def _schedule_parses(self) -> JobDefinition:
        try:
            schedule = self.compiled_schedule()
        except ScheduleError as exc:
            raise ValueError(f"schedule: {exc}") from exc
        # A recurring schedule with no occurrence at all is a mistake worth reporting (an at() in
        # the past is not: it has run, or was meant to).
        if not schedule.is_one_time() and schedule.first_occurrence() is None:
            since = f"start {_iso(self.start)}" if self.start is not None else "1970"
            raise ValueError(
                f"schedule: {self.schedule} has no occurrence from {since} to the end of 2199, "
                "the last year jobsched schedules in"
            )
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
        for name, default in OPTIONAL_FIELDS.items():
            value = getattr(self, name)
            if value != default:
                item[name] = dict(value) if isinstance(value, dict) else value
        if "action_after_completion" in item:
            item["action_after_completion"] = self.action_after_completion.value
        return item

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> JobDefinition:
        """Parse the definition attributes of an item; scheduler state attributes are ignored.

        Raises ``InvalidJob`` with human-readable reasons, and nothing else, for any item
        DynamoDB can hold, in either shape the services see (boto3's, through
        ``adapters.dynamodb_store.to_plain``, or a stream image through ``plain_values``).

        Deliberately lenient where a person's intent is plain, as pydantic's lax mode reads it:
        ``enabled`` takes true/false, 0/1 and the strings true/false, yes/no, on/off, t/f, y/n,
        1/0 in any case; whole numbers may be written as strings ("60") or as 60.0;
        ``start``/``end`` take ISO 8601 text with an offset or a number of Unix time (seconds, or
        milliseconds above 2e10); ``payload`` is a JSON object written as JSON text (the
        canonical form) or as a map, where a set becomes a sorted list and a binary value its
        base64 text. ``to_item`` writes the canonical form of each, so the leniency never
        changes a definition's hash.

        Strict where a value cannot be scheduled or handed on: a payload nested more than
        ``MAX_PAYLOAD_DEPTH`` levels, with NaN/Infinity or an integer of more than
        ``MAX_PAYLOAD_NUMBER_DIGITS`` digits; dates outside years 1-9999 in UTC; a start or a
        schedule beyond the engine's 1970-2199 horizon; a recurring schedule that never fires.
        """
        reasons: list[str] = []
        data: dict[str, Any] = {}
        for name, value in item.items():
            if name in STATE_FIELDS:
                continue
            # Before plain_values and pydantic, both recursive: a stack-deep value must not reach them.
            if nesting_depth(value, MAX_PAYLOAD_DEPTH) > MAX_PAYLOAD_DEPTH:
                reasons.append(
                    f"{show_name(name)}: nested more than {MAX_PAYLOAD_DEPTH} levels deep; "
                    f"the limit is {MAX_PAYLOAD_DEPTH}"
                )
                continue
            data[name] = plain_values(value)
        try:
            definition = cls.model_validate(data)
        except ValidationError as exc:
            skip = {name for name in item if name not in data and name not in STATE_FIELDS}
            raise InvalidJob([*reasons, *readable_reasons(exc, skip=skip)]) from exc
        if reasons:
            raise InvalidJob(reasons)
        return definition


@functools.lru_cache(maxsize=1024)
def _compile(expression: str, zone: str, start: datetime | None, end: datetime | None) -> Schedule:
    # Cached: the services compile each due job's schedule at every sweep, and validation
    # searches a cron's first occurrence (a few hundred steps at most).
    return parse_schedule(expression, timezone=zone, start=start, end=end)


def _canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
