"""Evaluate parsed AWS cron fields in a time zone, the way EventBridge Scheduler does.

This is hand-written on purpose. No maintained library handles AWS's six-field syntax
(``?``, ``L``, ``W``, ``#``, years) together with IANA time zones and EventBridge's
daylight-saving rules: pyawscron and aws-croniter understand the syntax but only in UTC
(pyawscron even crashes on ``cron(0 0 29 2 ? *)``); croniter and cronsim handle zones but
only five-field Unix cron, and both fire a skipped spring-forward time at 03:00 (croniter
also fires a repeated fall-back time twice), where EventBridge skips the former and runs
the latter once.

The search walks calendar fields (year, month, day, hour, minute) over the sets of
allowed values, so it never scans minute by minute and an impossible expression is
disproved within the 1970-2199 year range in a few hundred steps.
"""

from __future__ import annotations

import calendar
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from .cron import CronFields, DayOfMonthRule, DayOfWeekRule


def aws_weekday(year: int, month: int, day: int) -> int:
    """Weekday in AWS numbering, 1=SUN..7=SAT."""
    return (calendar.weekday(year, month, day) + 1) % 7 + 1


def days_matching(fields: CronFields, year: int, month: int) -> tuple[int, ...]:
    """The days of ``year``-``month`` that satisfy the day-of-month or day-of-week rule."""
    if fields.day_of_month is not None:
        return _days_for_dom(fields.day_of_month, year, month)
    assert fields.day_of_week is not None  # the parser guarantees exactly one is '?'
    return _days_for_dow(fields.day_of_week, year, month)


def _days_for_dom(rule: DayOfMonthRule, year: int, month: int) -> tuple[int, ...]:
    length = calendar.monthrange(year, month)[1]
    if rule.last_minus is not None:
        day = length - rule.last_minus
        return (day,) if day >= 1 else ()
    if rule.last_weekday:
        return (_nearest_weekday(year, month, length, length),)
    if rule.nearest_weekday is not None:
        if rule.nearest_weekday > length:
            # Quartz/AWS: "31W" does not fire in 30-day months rather than moving to the 30th's weekday.
            return ()
        return (_nearest_weekday(year, month, rule.nearest_weekday, length),)
    return tuple(day for day in sorted(rule.days) if day <= length)


def _nearest_weekday(year: int, month: int, day: int, length: int) -> int:
    weekday = aws_weekday(year, month, day)
    # The result never leaves the month: a Saturday 1st moves forward to Monday 3rd and a
    # Sunday last-day moves back to Friday.
    if weekday == 7:  # Saturday
        return day - 1 if day > 1 else day + 2
    if weekday == 1:  # Sunday
        return day + 1 if day < length else day - 2
    return day


def _days_for_dow(rule: DayOfWeekRule, year: int, month: int) -> tuple[int, ...]:
    length = calendar.monthrange(year, month)[1]
    first = aws_weekday(year, month, 1)
    if rule.nth is not None:
        weekday, nth = rule.nth
        day = 1 + (weekday - first) % 7 + 7 * (nth - 1)
        return (day,) if day <= length else ()
    if rule.last_of is not None:
        last = aws_weekday(year, month, length)
        return (length - (last - rule.last_of) % 7,)
    return tuple(day for day in range(1, length + 1) if (first + day - 2) % 7 + 1 in rule.weekdays)


def local_matches(fields: CronFields, start: datetime) -> Iterator[datetime]:
    """Naive wall times matching ``fields`` at or after naive ``start``, ascending."""
    floor = start.replace(second=0, microsecond=0)
    if floor < start:
        floor += timedelta(minutes=1)
    for year in fields.years:
        if year < floor.year:
            continue
        on_year = year == floor.year
        for month in fields.months:
            if on_year and month < floor.month:
                continue
            on_month = on_year and month == floor.month
            for day in days_matching(fields, year, month):
                if on_month and day < floor.day:
                    continue
                on_day = on_month and day == floor.day
                for hour in fields.hours:
                    if on_day and hour < floor.hour:
                        continue
                    on_hour = on_day and hour == floor.hour
                    for minute in fields.minutes:
                        if on_hour and minute < floor.minute:
                            continue
                        # Naive on purpose: wall times are mapped to instants by the caller.
                        yield datetime(year, month, day, hour, minute)  # noqa: DTZ001


def wall_to_utc(wall: datetime, zone: ZoneInfo) -> datetime | None:
    """The first instant showing naive ``wall`` in ``zone``, or None if the wall time is skipped.

    fold=0 picks the earlier instant of a repeated (fall-back) time, which is the one
    EventBridge runs; a spring-forward gap time does not survive the round trip and is
    skipped, as EventBridge does, rather than shifted to the next valid time.
    """
    instant = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    if instant.astimezone(zone).replace(tzinfo=None) != wall:
        return None
    return instant


def first_cron_at_or_after(fields: CronFields, zone: ZoneInfo, earliest: datetime) -> datetime | None:
    """First matching instant >= aware ``earliest``, as an aware UTC datetime, or None.

    Wall time -> first instant (skipping gaps) is strictly increasing, so walking wall
    times upward from the wall time of ``earliest`` and returning the first instant that
    is not before ``earliest`` is exact. The only wall times we pass over are those
    repeated earlier in a fall-back hour, so the skip is bounded by one transition.
    """
    earliest_wall = earliest.astimezone(zone).replace(tzinfo=None)
    for wall in local_matches(fields, earliest_wall.replace(second=0, microsecond=0)):
        instant = wall_to_utc(wall, zone)
        if instant is not None and instant >= earliest:
            return instant
    return None
