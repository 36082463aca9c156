"""Time-zone lookup with errors in the engine's vocabulary."""

from __future__ import annotations

import zoneinfo
from datetime import datetime

from .errors import ScheduleError, clip


def load_zone(name: str) -> zoneinfo.ZoneInfo:
    """Return the IANA zone called ``name`` or raise ScheduleError."""
    try:
        return zoneinfo.ZoneInfo(name)
    # ZoneInfo raises ValueError (not ZoneInfoNotFoundError) for keys that are not
    # even path-like, e.g. "" or "../x"; both mean the same thing to a user.
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        raise ScheduleError(f"unknown time zone {clip(repr(name), 80)}") from None


def require_aware(value: datetime, what: str) -> None:
    """Reject naive datetimes: guessing their zone would silently shift occurrences."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ScheduleError(f"{what} must be a timezone-aware datetime, got naive {value.isoformat()}")
