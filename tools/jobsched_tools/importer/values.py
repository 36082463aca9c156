"""get-schedule values read as jobsched needs them (a date, an object, a whole number in bounds),
or ``Refused`` with the reason."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from jobsched_tools.importer.plan import Refused


def instant(value: Any, field_name: str) -> str:
    """A get-schedule date: ISO 8601 text (the CLI's output) or epoch seconds (a number)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise Refused(f"{field_name} {value!r:.80}: not a date (ISO 8601 text or epoch seconds)")
    try:
        if isinstance(value, int | float):
            return datetime.fromtimestamp(value, UTC).isoformat()
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except (ValueError, OverflowError, OSError) as exc:
        raise Refused(f"{field_name} {value!r:.80}: not a date jobsched can read ({exc})") from None
    if parsed.tzinfo is None:  # the API's dates are UTC
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.isoformat()


def mapping(value: Any, field_name: str) -> dict[str, Any]:
    """An object field (``Target``, ``RetryPolicy``, ...); absent or null is empty."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise Refused(f"{field_name} {value!r:.80}: expected an object")
    return value


def whole_number(value: Any, field_name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise Refused(f"{field_name} {value!r:.80}: expected a whole number {low}-{high}")
    try:
        number = float(value)
    except ValueError:
        raise Refused(f"{field_name} {value!r:.80}: expected a whole number {low}-{high}") from None
    if not number.is_integer() or not low <= number <= high:
        raise Refused(f"{field_name} {value!r:.80}: expected a whole number {low}-{high}")
    return int(number)
