"""The job definition: the job queue's data shape, validated at every boundary.

A job item in the jobs table has two kinds of attributes:

- **definition** attributes, written by people (console, ``aws dynamodb put-item``, the CLI, the
  Python API) and validated here: ``job_id``, ``schedule``, ``timezone``, ``start``, ``end``,
  ``target``, ``payload``, ``retry``, ``timeout_seconds``, ``misfire``, ``overlap``, ``enabled``;
- **scheduler state** attributes, written only by jobsched (``JobState`` in ``job_state.py``).

``to_item``/``from_item`` convert a definition to and from its item form losslessly.

``from_item`` is a boundary that anyone with write access to the table feeds, so it is total: for
any item DynamoDB can hold it returns a definition or raises ``InvalidJob`` with bounded reasons,
never another exception, and never works for long. ``definition_digest`` is total too.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from enum import StrEnum
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import from_json

from jobsched.core.schedule import HORIZON_END, Schedule, ScheduleError, load_zone, parse_schedule

JOB_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"
TARGET_PATTERN = r"^[a-z][a-z0-9_.-]{0,63}$"
_JOB_ID = re.compile(JOB_ID_PATTERN)


def is_job_id(value: object) -> bool:
    """Whether a job item's key is a job id. Only a job id has a state item: the state table's
    other keys (definition snapshots, ``<job_id>#<digest>``) contain ``#``, which a job id
    cannot, so no job item, whatever a person keys it with, can reach them."""
    return isinstance(value, str) and _JOB_ID.match(value) is not None


# The payload travels in the run record (a DynamoDB item, 400 KB maximum) and to the handler;
# and, in the run message's definition snapshot, through SQS (256 KiB). 64 KiB keeps every item
# and every message far below both services' limits with room for the other attributes.
MAX_PAYLOAD_BYTES = 64 * 1024
# Retries are delivered as delayed SQS messages, and SQS delays stop at 15 minutes.
MAX_BACKOFF_SECONDS = 900
# The worker Lambda's own timeout (template parameter) must exceed this.
MAX_TIMEOUT_SECONDS = 840
# DynamoDB's own limit for nested attributes, applied to the payload whether it is written as a map
# or as JSON text, and checked before anything recursive (json, pydantic) sees the value.
MAX_PAYLOAD_DEPTH = 32
# The JSON parser's own limit (pydantic-core's jiter), which is also Python's default limit for
# converting an int to and from text: a longer integer would fail in any Python handler too.
MAX_PAYLOAD_NUMBER_DIGITS = 4300
# Reasons are written back into the item (400 KB at most in all) and shown to people: a few short
# lines, never an echo of a huge input.
MAX_REASONS = 20
MAX_REASON_CHARS = 300
# A run may start up to this long after its instant (``jitter_seconds``). The claim sends it with
# an SQS delay to that start, and SQS delays stop at 900 s: the lookahead (90 s by default, at most
# 300 s recommended) plus the window must fit, so the window stops at 10 minutes. (EventBridge
# Scheduler's flexible windows go up to 1,440 minutes; a run that late is a different schedule.)
MAX_JITTER_SECONDS = 600
# Groups and tags (``jobsched list/pause/resume --group G --tag k=v``), sized as EventBridge
# Scheduler's and AWS's tags are: 50 tags, keys up to 128 characters, values up to 256.
GROUP_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$"
MAX_TAGS = 50
MAX_TAG_KEY_CHARS = 128
MAX_TAG_VALUE_CHARS = 256
# ``max_event_age_seconds``: EventBridge Scheduler's MaximumEventAgeInSeconds bounds, 60 s to 24 h.
MIN_EVENT_AGE_SECONDS = 60
MAX_EVENT_AGE_SECONDS = 86_400
# ``dead_letter_queue_arn``: an SQS queue's ARN (names are 1-80 characters of A-Z a-z 0-9 - _, a
# FIFO queue's ending in .fifo), as EventBridge Scheduler's DeadLetterConfig.Arn.
DEAD_LETTER_QUEUE_ARN_PATTERN = r"^arn:aws[a-z-]*:sqs:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]{1,80}(\.fifo)?$"

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
    "jitter_seconds",
    "pause_on_failure",
    "max_runs",
    "action_after_completion",
    "group",
    "tags",
    "max_event_age_seconds",
    "dead_letter_queue_arn",
)
# The definition fields added by issue 29: written into the item form (and so into the digest)
# only when set, so a job that uses none of them keeps the digest it had before they existed.
OPTIONAL_FIELDS: dict[str, Any] = {
    "jitter_seconds": 0,
    "pause_on_failure": False,
    "max_runs": None,
    "action_after_completion": "none",
    "group": None,
    "tags": {},
    # Issue 38, as EventBridge Scheduler's RetryPolicy.MaximumEventAgeInSeconds and DeadLetterConfig.
    "max_event_age_seconds": None,
    "dead_letter_queue_arn": None,
}
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
        "latest_run_id",
        "catchups",
        "last_scheduled_at",
        "updated_at",
        "registered_at",
        # Why jobsched paused the job (``pause_on_failure``, services/pausing.py); removed by a
        # resume.
        "paused_reason",
        "paused_at",
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
                raise ValueError(
                    f"tag {_clip(key, 40)!r}: value longer than {MAX_TAG_VALUE_CHARS} characters"
                )
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
        shown = _clip(repr(value), 40) if isinstance(value, str) else _kind(value)
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
            value = _decode_payload(value)  # which limits the depth itself
        elif nesting_depth(value, MAX_PAYLOAD_DEPTH) > MAX_PAYLOAD_DEPTH:
            raise ValueError(
                f"nested more than {MAX_PAYLOAD_DEPTH} levels deep; the limit is {MAX_PAYLOAD_DEPTH}"
            )
        if not isinstance(value, dict):
            raise ValueError(f"must be a JSON object ({{...}}), got {_kind(value)}")
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
                    f"{_show_name(name)}: nested more than {MAX_PAYLOAD_DEPTH} levels deep; "
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


_BOOL = TypeAdapter(bool)


def enabled_value(value: Any) -> bool | None:
    """An ``enabled`` value as the item format reads it: pydantic's lax bool (true/false, 0/1,
    and the strings true/false, yes/no, on/off, t/f, y/n, 1/0 in any case; a DynamoDB number as
    its integer), or None when the format refuses it (the item is invalid). The one reading of
    ``enabled``: the definition's (``JobDefinition.enabled``) and every reader of a raw job item
    (``read_enabled``) go through it, so a job stored with ``"off"`` or ``0`` is paused for all."""
    try:
        return _BOOL.validate_python(plain_values(value))
    except ValidationError:
        return None


def read_enabled(item: Mapping[str, Any]) -> bool | None:
    """Whether a raw job item is enabled (absent: the default, enabled), read as its definition
    reads it (``enabled_value``); None when its ``enabled`` is not a value the format accepts."""
    return True if "enabled" not in item else enabled_value(item["enabled"])


class InvalidJob(ValueError):
    """A job item that cannot be scheduled, with reasons a person can act on.

    The reasons are bounded whoever raises it (see ``bound_reasons``): they are written back
    into the item.
    """

    def __init__(self, reasons: Iterable[str]) -> None:
        bounded = bound_reasons(reasons)
        super().__init__("; ".join(bounded))
        self.reasons = bounded


def bound_reasons(reasons: Iterable[str]) -> list[str]:
    """At most ``MAX_REASONS`` reasons of at most ``MAX_REASON_CHARS`` characters each, never
    empty, and always valid UTF-8 (a lone surrogate in an echoed name is escaped)."""
    shown = [
        _clip(str(reason).encode("utf-8", "backslashreplace").decode("utf-8"), MAX_REASON_CHARS)
        for reason in reasons
    ]
    if not shown:
        return ["item: not a valid job definition"]
    if len(shown) > MAX_REASONS:
        hidden = len(shown) - (MAX_REASONS - 1)
        shown = [*shown[: MAX_REASONS - 1], f"... and {hidden} more problems"]
    return shown


# Pydantic's messages for type errors name Python types ("a valid dictionary or instance of
# RetryPolicy"); a person wrote a DynamoDB item, so say what is expected in its words.
_EXPECTED = {
    "string_type": "must be a string",
    "int_type": "must be a whole number",
    "int_parsing": "must be a whole number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "dict_type": "must be a map",
    "model_type": "must be a map",
    "datetime_type": "must be an ISO 8601 date and time with an offset (e.g. 2026-01-01T00:00:00Z)",
}


def readable_reasons(exc: ValidationError, skip: Iterable[str] = ()) -> list[str]:
    """One reason per error, naming the field; errors for the fields in ``skip`` (already
    reported by the caller) are left out."""
    skipped = set(skip)
    reasons = []
    for error in exc.errors(include_url=False):
        if error["loc"] and error["loc"][0] in skipped:
            continue
        where = ".".join(_show_name(part) for part in error["loc"]) or "item"
        message = str(error["msg"]).removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            message = "unknown field (check the spelling against the documented job item format)"
        elif error["type"] == "string_pattern_mismatch" and where == "job_id":
            message = "must be 1-128 characters of A-Z a-z 0-9 _ . : - starting with a letter or digit"
        elif error["type"] == "string_pattern_mismatch" and where == "target":
            message = "must be the name of a registered handler: lowercase letters, digits, _ . -"
        elif error["type"] in _EXPECTED:
            message = f"{_EXPECTED[error['type']]}, got {_kind(error['input'])}"
        elif error["type"] == "int_from_float":
            message = f"must be a whole number, got {_clip(repr(error['input']), 40)}"
        # A model-level check (no location) names its field in its own message ("schedule: ...").
        reasons.append(f"{where}: {message}" if error["loc"] else message)
    return reasons


def nesting_depth(value: Any, limit: int) -> int:
    """Levels of maps and lists in ``value`` (a scalar is 0, ``{}`` is 1), counted up to
    ``limit + 1`` and no further. Iterative, so it is safe on any value and stops early on a
    deep one (or a cyclic one, built in Python)."""
    depth = 0
    level = [value]
    while level:
        containers = [item for item in level if isinstance(item, _CONTAINERS)]
        if not containers:
            break
        depth += 1
        if depth > limit:
            break
        level = [
            child for item in containers for child in (item.values() if isinstance(item, dict) else item)
        ]
    return depth


_CONTAINERS = (dict, list, tuple, set, frozenset)


def _decode_payload(text: str) -> Any:
    """The payload's JSON text decoded under the payload's limits (``ValueError`` with a reason).

    pydantic-core's parser (jiter) rather than json: json recurses in Python once per level
    (RecursionError at about 1,000 levels, wherever the stack stands) and leaves long integers
    to int(), whose limit is the interpreter's setting; jiter stops at 200 levels and at
    numbers of 4300 digits on its own, and nothing else recursive sees the value before the
    depth check below. NaN, Infinity and too large a float (1e400) decode as floats and are
    refused by _payload_size, when the payload is written as canonical JSON.
    """
    if not text.strip():
        return {}
    try:
        value = from_json(text, allow_inf_nan=True)
    except TypeError:
        # jiter's answer to text it cannot encode as UTF-8: a lone surrogate, which only a
        # payload built in Python can hold (DynamoDB strings are UTF-8).
        raise ValueError("is not valid Unicode text (it holds an unpaired surrogate)") from None
    except ValueError as exc:
        message = str(exc)
        if "recursion limit" in message:
            raise ValueError(_TOO_DEEP) from None
        if "number out of range" in message:
            message += f"; numbers are limited to {MAX_PAYLOAD_NUMBER_DIGITS} digits"
        raise ValueError(f"not valid JSON ({_clip(message, 160)})") from None
    if nesting_depth(value, MAX_PAYLOAD_DEPTH) > MAX_PAYLOAD_DEPTH:
        raise ValueError(_TOO_DEEP)
    return value


_TOO_DEEP = f"JSON nested more than {MAX_PAYLOAD_DEPTH} levels deep; the limit is {MAX_PAYLOAD_DEPTH}"


def _kind(value: Any) -> str:
    """What a value is, in DynamoDB's words (after plain_values: sets are lists, binary is text)."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float | Decimal):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple | set | frozenset):
        return "a list or set"
    if isinstance(value, dict):
        return "a map"
    if value is None:
        return "null"
    return f"a {type(value).__name__}"


def _show_name(name: Any) -> str:
    """An attribute name as a reason shows it: any characters are allowed, up to 64 KB."""
    text = name if isinstance(name, str) and name.isprintable() else repr(name)
    return _clip(text, 64)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


@functools.lru_cache(maxsize=1024)
def _compile(expression: str, zone: str, start: datetime | None, end: datetime | None) -> Schedule:
    # Cached: the services compile each due job's schedule at every sweep, and validation
    # searches a cron's first occurrence (a few hundred steps at most).
    return parse_schedule(expression, timezone=zone, start=start, end=end)


def _canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def plain_values(value: Any) -> Any:
    """A DynamoDB value as the core reads it, the same from either item shape.

    Numbers arrive as Decimal through boto3 and stream images; the core wants int (integral)
    or float. Binary arrives as boto3's ``Binary`` (or bytes) from boto3 but as base64 text in a
    stream image, so it becomes that text here too. Sets become lists in a fixed order (sets of
    strings iterate in a per-process order, which would change a digest from run to run).
    """
    if isinstance(value, _PLAIN_SCALARS):  # first: the common case, on every value of a payload
        return value
    if isinstance(value, Decimal):
        return _plain_number(value)
    if isinstance(value, dict):
        return {k: plain_values(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain_values(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((plain_values(v) for v in value), key=_set_order)
    binary = _binary(value)
    return value if binary is None else binary


_PLAIN_SCALARS = (str, int, float, type(None))


def _plain_number(value: Decimal) -> int | float:
    # DynamoDB numbers lie within 1E-130..9.99E+125; past that (a Decimal built in Python), int()
    # could build a huge integer, so such a value is a float (inf).
    if value.is_finite() and value.adjusted() <= 125 and value == value.to_integral_value():
        return int(value)
    return float("nan") if value.is_nan() else float(value)


def _binary(value: Any) -> str | None:
    """Base64 text of a binary value, or None if ``value`` is not binary. boto3's ``Binary`` is
    recognised by its ``__bytes__`` so that the core imports no boto3."""
    if isinstance(value, bytes | bytearray | memoryview) or (
        not isinstance(value, str) and hasattr(type(value), "__bytes__")
    ):
        return base64.b64encode(bytes(value)).decode("ascii")
    return None


def _set_order(value: Any) -> tuple[int, Any]:
    # DynamoDB sets are all strings, all numbers or all binary (text by now); the rank keeps a
    # mixed set built in Python sortable.
    if isinstance(value, int | float) and not isinstance(value, bool):
        return (0, value)
    if isinstance(value, str):
        return (1, value)
    return (2, repr(value))


def definition_digest(item: Mapping[str, Any]) -> str:
    """A digest of an item's definition that never raises, for any item.

    For a valid definition it is ``definition_hash()``; for an invalid one, ``invalid-`` and a
    digest of every attribute but jobsched's own state (``STATE_FIELDS``), so that fixing a
    misspelled field changes it. The same data gives the same digest in both item shapes (sets
    or lists from sets, Binary or its base64 text, Decimal or int/float).
    """
    try:
        return JobDefinition.from_item(item).definition_hash()
    except InvalidJob:
        pass
    digest = hashlib.sha256()
    for token in _canonical_tokens({k: v for k, v in item.items() if k not in STATE_FIELDS}):
        digest.update(token.encode("utf-8", "surrogatepass"))
        digest.update(b"\0")
    return "invalid-" + digest.hexdigest()[:16]


@dataclass(frozen=True)
class _Close:
    """Marks the end of a container on the token stack."""

    container_id: int
    token: str


def _scalar_token(value: Any) -> str | None:
    """The token of a scalar (None, bool, int, float, str); None for anything else."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"i{value:x}"
    if isinstance(value, float):
        return f"f{value.hex()}"
    if isinstance(value, str):
        return json.dumps(value)
    return None


def _canonical_tokens(value: Any) -> Iterator[str]:
    """``value`` as a token stream that depends only on its data: map keys sorted, sets as
    sorted lists (as plain_values gives them), numbers and binary as plain_values reads them.

    Written by hand rather than with json.dumps, which recurses (RecursionError on deep values),
    rejects sets and Binary, and cannot print integers of more than 4300 digits; this walks an
    explicit stack and prints integers in hex.
    """
    on_path: set[int] = set()  # the containers being walked: a cycle (built in Python) ends
    stack: list[Any] = [value]
    while stack:
        current = stack.pop()
        if isinstance(current, _Close):
            on_path.discard(current.container_id)
            yield current.token
            continue
        if isinstance(current, Decimal):
            current = _plain_number(current)
        binary = _binary(current)
        if binary is not None:
            current = binary
        scalar = _scalar_token(current)
        if scalar is not None:
            yield scalar
        elif isinstance(current, dict | list | tuple | set | frozenset):
            if id(current) in on_path:
                yield "cycle"
                continue
            if isinstance(current, dict):
                keys = sorted(current, key=lambda key: (type(key).__name__, str(key)))
                children: list[Any] = [part for key in keys for part in (str(key), current[key])]
                opening, closing = "{", "}"
            elif isinstance(current, set | frozenset):
                children = sorted((plain_values(v) for v in current), key=_set_order)
                opening, closing = "[", "]"
            else:
                children = list(current)
                opening, closing = "[", "]"
            yield opening
            on_path.add(id(current))
            stack.append(_Close(id(current), closing))
            stack.extend(reversed(children))
        else:
            yield f"?{type(current).__qualname__}"
