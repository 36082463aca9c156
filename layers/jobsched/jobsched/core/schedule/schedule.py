"""The Schedule value object: a parsed expression plus zone and bounds."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from .at import parse_at
from .cron import MAX_YEAR, CronFields, parse_cron_fields
from .cron_eval import first_cron_at_or_after
from .errors import ScheduleError
from .rate import EPOCH, first_rate_at_or_after, parse_rate
from .zones import load_zone, require_aware

_ONE_SECOND = timedelta(seconds=1)
# The engine's horizon: cron years are 1970-2199 and at() takes the same years, so every
# occurrence lies between these instants (a day beyond each end covers every zone's offset).
# Clamping query instants to it keeps the local-time conversions away from datetime's overflow
# limits without changing answers, and capping results to it (rates included) leaves callers
# thousands of years of headroom for their own arithmetic on an occurrence.
HORIZON_START = datetime(1969, 12, 30, tzinfo=UTC)
HORIZON_END = datetime(2200, 1, 2, tzinfo=UTC)

_EXPRESSION = re.compile(r"(at|rate|cron)\((.*)\)", re.DOTALL)


@dataclass(frozen=True)
class _CronRule:
    fields: CronFields
    zone: ZoneInfo

    def first_at_or_after(self, earliest: datetime) -> datetime | None:
        if earliest >= HORIZON_END:
            return None
        return first_cron_at_or_after(self.fields, self.zone, max(earliest, HORIZON_START))


@dataclass(frozen=True)
class _RateRule:
    interval: int
    anchor: datetime

    def first_at_or_after(self, earliest: datetime) -> datetime | None:
        try:
            return first_rate_at_or_after(self.anchor, self.interval, earliest)
        except OverflowError:
            return None


@dataclass(frozen=True)
class _AtRule:
    instant: datetime

    def first_at_or_after(self, earliest: datetime) -> datetime | None:
        return self.instant if self.instant >= earliest else None


_Rule = _CronRule | _RateRule | _AtRule


@dataclass(frozen=True)
class Schedule:
    """An immutable, hashable schedule. Build it with :func:`parse_schedule`.

    ``start`` and ``end`` are stored in UTC, rounded inward to whole seconds (occurrences
    are always whole seconds, so this changes no answer).
    """

    expression: str
    timezone: str
    start: datetime | None
    end: datetime | None
    _rule: _Rule = field(compare=False, repr=False)

    def is_one_time(self) -> bool:
        return isinstance(self._rule, _AtRule)

    def next_after(self, t: datetime) -> datetime | None:
        """First occurrence strictly after aware ``t`` within [start, end], in UTC, or None.

        Never raises for an aware ``t``, whatever its value; None also past the horizon."""
        require_aware(t, "next_after() instant")
        try:
            earliest = _floor_second(t.astimezone(UTC)) + _ONE_SECOND
        except OverflowError:
            return None
        if self.start is not None and earliest < self.start:
            earliest = self.start
        found = self._first_at_or_after(earliest)
        if found is None or (self.end is not None and found > self.end):
            return None
        return found

    def first_occurrence(self) -> datetime | None:
        """The first occurrence at or after ``start`` (or the horizon's start) regardless of
        ``end``, or None when the schedule has none before the end of 2199: a cron that can
        never match (``cron(0 0 30 2 ? *)``), or whose matches all precede ``start``."""
        return self._first_at_or_after(self.start or HORIZON_START)

    def _first_at_or_after(self, earliest: datetime) -> datetime | None:
        found = self._rule.first_at_or_after(earliest)
        return found if found is not None and found < HORIZON_END else None

    def occurrences(self, after: datetime, until: datetime, limit: int | None = None) -> Iterator[datetime]:
        """Occurrences in (after, until], ascending, as aware UTC datetimes."""
        require_aware(after, "occurrences() 'after'")
        require_aware(until, "occurrences() 'until'")
        if limit is not None and limit < 0:
            raise ScheduleError(f"occurrences() limit {limit} must not be negative")
        return self._iterate(after, until, limit)

    def _iterate(self, after: datetime, until: datetime, limit: int | None) -> Iterator[datetime]:
        produced = 0
        current = after
        while limit is None or produced < limit:
            found = self.next_after(current)
            if found is None or found > until:
                return
            yield found
            produced += 1
            current = found


def parse_schedule(
    expression: str,
    timezone: str = "UTC",
    start: datetime | None = None,
    end: datetime | None = None,
    min_rate_seconds: int = 10,
) -> Schedule:
    """Parse an EventBridge-style ``at(...)``, ``rate(...)`` or ``cron(...)`` expression."""
    zone = load_zone(timezone)
    if start is not None:
        require_aware(start, "start")
    if end is not None:
        require_aware(end, "end")
    if start is not None and start >= HORIZON_END:
        raise ScheduleError(
            f"start {start.isoformat()} is after {MAX_YEAR}, the last year jobsched schedules in"
        )
    if start is not None and end is not None and end <= start:
        raise ScheduleError(f"end {end.isoformat()} must be after start {start.isoformat()}")
    text = expression.strip()
    match = _EXPRESSION.fullmatch(text)
    if match is None:
        raise ScheduleError(
            f"schedule expression must be at(...), rate(...) or cron(...), got {expression!r}"
        )
    kind, body = match.groups()
    norm_start = None if start is None else _ceil_second(start.astimezone(UTC))
    norm_end = None if end is None else _floor_second(end.astimezone(UTC))
    rule: _Rule
    if kind == "cron":
        rule = _CronRule(parse_cron_fields(body), zone)
    elif kind == "rate":
        rule = _RateRule(parse_rate(body, min_rate_seconds), norm_start or EPOCH)
    else:
        rule = _AtRule(parse_at(body, zone, timezone))
    return Schedule(expression=text, timezone=timezone, start=norm_start, end=norm_end, _rule=rule)


def _floor_second(value: datetime) -> datetime:
    return value.replace(microsecond=0)


def _ceil_second(value: datetime) -> datetime:
    floor = value.replace(microsecond=0)
    return floor if floor == value else floor + _ONE_SECOND
