"""Parse ``rate(value unit)`` and compute its elapsed-time occurrences."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from .errors import ScheduleError, clip

_UNIT_SECONDS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400}
# A century: a longer rate fires at most three times in the engine's 1970-2199 range, which is a
# one-time job (at()) in disguise; and anchor + k * interval stays far inside datetime's range.
MAX_RATE_DAYS = 36_500
# Longer value texts are over the maximum whatever the unit; int() of thousands of digits is slow,
# and beyond 4300 digits Python refuses it.
_MAX_VALUE_DIGITS = 15

# Without a start the anchor is fixed, not "when the schedule was created", so that every
# process (and every retry) derives the same occurrence instants from the expression alone.
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def parse_rate(body: str, min_rate_seconds: int) -> int:
    """Return the interval in seconds for the text between ``rate(`` and ``)``."""
    parts = body.split()
    if len(parts) != 2:
        raise ScheduleError(
            f"rate needs a value and a unit, e.g. 'rate(5 minutes)', got {clip(repr(body.strip()), 80)}"
        )
    value_text, unit = parts
    if not value_text.isascii() or not value_text.isdigit():
        raise ScheduleError(f"rate value {clip(repr(value_text), 40)} is not a whole number")
    digits = value_text.lstrip("0") or "0"
    value = int(digits) if len(digits) <= _MAX_VALUE_DIGITS else 10**_MAX_VALUE_DIGITS
    if value < 1:
        raise ScheduleError(f"rate value {value} must be at least 1")
    singular = unit.removesuffix("s")
    if singular not in _UNIT_SECONDS:
        raise ScheduleError(
            f"rate unit {clip(repr(unit), 40)} is not one of minute(s), hour(s), day(s) or second(s)"
        )
    # AWS insists on grammatical agreement: "rate(1 minutes)" and "rate(5 minute)" are rejected.
    if unit == singular and value != 1:
        raise ScheduleError(f"rate unit {unit!r} requires value 1; use '{unit}s'")
    if unit != singular and value == 1:
        raise ScheduleError(f"rate unit {unit!r} requires a value above 1; use '{singular}'")
    interval = value * _UNIT_SECONDS[singular]
    if interval < min_rate_seconds:
        raise ScheduleError(f"rate of {value} {unit} is below the minimum of {min_rate_seconds} seconds")
    if interval > MAX_RATE_DAYS * _UNIT_SECONDS["day"]:
        raise ScheduleError(
            f"rate of {clip(value_text, 20)} {unit} is longer than the longest supported interval, "
            f"{MAX_RATE_DAYS} days (about a century); use at(...) for a one-time job"
        )
    return interval


def first_rate_at_or_after(anchor: datetime, interval: int, earliest: datetime) -> datetime:
    """First instant ``anchor + k*interval`` (k any integer) that is >= ``earliest``."""
    elapsed = earliest - anchor
    # Exact integer microsecond arithmetic; float seconds would drift over decades.
    micros = elapsed // timedelta(microseconds=1)
    step = interval * 1_000_000
    k = -(-micros // step)
    return (anchor + timedelta(seconds=k * interval)).astimezone(UTC)
