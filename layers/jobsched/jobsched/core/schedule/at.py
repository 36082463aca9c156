"""Parse ``at(yyyy-mm-ddThh:mm:ss)``, a one-time schedule in the schedule's local time."""

from __future__ import annotations

import re
from datetime import datetime
from zoneinfo import ZoneInfo

from .cron import MAX_YEAR, MIN_YEAR
from .cron_eval import wall_to_utc
from .errors import ScheduleError

_AT = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})")


def parse_at(body: str, zone: ZoneInfo, zone_name: str) -> datetime:
    """Return the aware UTC instant of the local time in ``body``."""
    text = body.strip()
    match = _AT.fullmatch(text)
    if match is None:
        raise ScheduleError(f"at() needs a local time as yyyy-mm-ddThh:mm:ss, got {text!r}")
    year, month, day, hour, minute, second = (int(group) for group in match.groups())
    # The cron years bound at() too: converting a year-1 or year-9999 wall time to UTC can
    # leave datetime's range, and the engine answers nothing beyond its 2199 horizon anyway.
    if not MIN_YEAR <= year <= MAX_YEAR:
        raise ScheduleError(
            f"at() year {year} is outside {MIN_YEAR}-{MAX_YEAR}, the years jobsched schedules in"
        )
    try:
        # Deliberately naive: a wall time in the schedule's zone, resolved by wall_to_utc.
        wall = datetime(year, month, day, hour, minute, second)  # noqa: DTZ001
    except ValueError as exc:
        raise ScheduleError(f"at() time {text!r} is not a valid date and time: {exc}") from None
    instant = wall_to_utc(wall, zone)
    if instant is None:
        raise ScheduleError(
            f"at() time {text} does not exist in {zone_name}: it falls in the gap skipped "
            "when clocks spring forward"
        )
    return instant
