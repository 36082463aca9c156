"""Property tests: random expressions, zones and instants against a brute-force oracle."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jobsched.core.schedule import parse_schedule
from jobsched.core.schedule.cron import parse_cron_fields
from schedule_strategies import (
    MONTHS,
    WEEKDAYS,
    ZONES,
    Expr,
    cron_expr,
    first_instant,
    missed_between,
    plain_values,
    wall_matches,
)

FAR = datetime(2200, 1, 1, tzinfo=UTC)
RESULTS = 12


def _transitions(zone_name: str) -> list[datetime]:
    """Instants shortly before each UTC-offset change in 2018-2026, found by a daily scan."""
    zone = ZoneInfo(zone_name)
    found: list[datetime] = []
    day = datetime(2018, 1, 1, tzinfo=UTC)
    previous = day.astimezone(zone).utcoffset()
    while day.year < 2027:
        day += timedelta(days=1)
        offset = day.astimezone(zone).utcoffset()
        if offset != previous:
            found.append(day - timedelta(days=1))
        previous = offset
    return found or [datetime(2025, 6, 1, tzinfo=UTC)]


_TRANSITIONS = {zone: _transitions(zone) for zone in ZONES}

_any_instant = st.datetimes(
    min_value=datetime(2019, 1, 1), max_value=datetime(2031, 1, 1), timezones=st.just(UTC)
)


@st.composite
def zone_and_instant(draw: st.DrawFn) -> tuple[str, datetime]:
    """A zone and an instant, usually within a day or two of one of that zone's DST changes."""
    zone = draw(st.sampled_from(ZONES))
    if draw(st.integers(0, 3)) == 0:
        return zone, draw(_any_instant)
    base = draw(st.sampled_from(_TRANSITIONS[zone]))
    return zone, base + timedelta(seconds=draw(st.integers(-12 * 3600, 48 * 3600)))


instants = _any_instant

_settings = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _check_sequence(expr: Expr, zone_name: str, after: datetime, results: list[datetime]) -> None:
    zone = ZoneInfo(zone_name)
    for r in results:
        assert r.tzinfo is UTC and r.microsecond == 0 and r.second == 0
        wall = r.astimezone(zone).replace(tzinfo=None)
        assert wall_matches(expr, wall), f"{r} ({wall} local) does not match {expr.text}"
        # A repeated fall-back wall time runs only at its first instant.
        assert first_instant(wall, zone) == r
    bounds = [after, *results]
    for low, high in itertools.pairwise(bounds):
        assert low < high
        assert not missed_between(expr, zone, low, high), f"skipped occurrences in ({low}, {high})"


@_settings
@given(expr=cron_expr(), zone_after=zone_and_instant())
def test_cron_occurrences_match_oracle(expr: Expr, zone_after: tuple[str, datetime]) -> None:
    zone, after = zone_after
    schedule = parse_schedule(expr.text, zone)
    results = list(schedule.occurrences(after, FAR, limit=RESULTS))
    _check_sequence(expr, zone, after, results)
    for earlier, later in itertools.pairwise(results):
        assert schedule.next_after(earlier) == later
    if results:
        # Any instant inside a gap leads to the gap's end.
        inside = results[0] - timedelta(seconds=1)
        assert schedule.next_after(inside) == results[0]
    if len(results) < RESULTS:
        last = results[-1] if results else after
        assert schedule.next_after(last) is None


@_settings
@given(expr=cron_expr(wrap=True))
def test_wrapped_ranges_denote_the_walked_values(expr: Expr) -> None:
    """The parser's value sets equal the oracle's, which walks each range value by value."""
    fields = parse_cron_fields(expr.text.removeprefix("cron(").removesuffix(")"))
    assert fields.minutes == tuple(sorted(expr.minutes.values))
    assert fields.hours == tuple(sorted(expr.hours.values))
    assert fields.months == tuple(sorted(expr.month.values))
    assert set(fields.months) == plain_values(expr.month.text, 1, 12, MONTHS)
    plain = not any(mark in expr.dom + expr.dow for mark in "LW#")
    if plain and fields.day_of_month is not None:
        assert fields.day_of_month.days == plain_values(expr.dom, 1, 31, None)
    if plain and fields.day_of_week is not None:
        assert fields.day_of_week.weekdays == plain_values(expr.dow, 1, 7, WEEKDAYS)


@_settings
@given(expr=cron_expr(wrap=True), zone_after=zone_and_instant())
def test_wrapped_cron_occurrences_match_oracle(expr: Expr, zone_after: tuple[str, datetime]) -> None:
    """Ranges that wrap around, in every field but the year, in zones with and near DST changes."""
    zone, after = zone_after
    schedule = parse_schedule(expr.text, zone)
    results = list(schedule.occurrences(after, FAR, limit=RESULTS))
    _check_sequence(expr, zone, after, results)
    if len(results) < RESULTS:
        last = results[-1] if results else after
        assert schedule.next_after(last) is None


@_settings
@given(expr=cron_expr(), zone_after=zone_and_instant(), hours=st.integers(1, 24 * 40))
def test_occurrences_equal_repeated_next_after(
    expr: Expr, zone_after: tuple[str, datetime], hours: int
) -> None:
    zone, after = zone_after
    schedule = parse_schedule(expr.text, zone)
    until = after + timedelta(hours=hours)
    expected: list[datetime] = []
    current = schedule.next_after(after)
    while current is not None and current <= until and len(expected) < 50:
        expected.append(current)
        current = schedule.next_after(current)
    assert list(schedule.occurrences(after, until, limit=50)) == expected


@_settings
@given(
    value=st.integers(1, 500),
    unit=st.sampled_from(["minute", "hour", "day"]),
    zone=st.sampled_from(ZONES),
    after=instants,
    start=st.one_of(st.none(), instants),
)
def test_rate_is_elapsed_time(
    value: int, unit: str, zone: str, after: datetime, start: datetime | None
) -> None:
    word = unit if value == 1 else unit + "s"
    schedule = parse_schedule(f"rate({value} {word})", zone, start=start)
    interval = timedelta(seconds=value * {"minute": 60, "hour": 3600, "day": 86400}[unit])
    # A start with microseconds is rounded up to the next whole second.
    anchor = schedule.start or datetime(1970, 1, 1, tzinfo=UTC)
    results = list(schedule.occurrences(after, FAR, limit=5))
    assert len(results) == 5
    assert results[0] > after
    previous = results[0] - interval
    assert previous <= after or (schedule.start is not None and previous < schedule.start)
    for r in results:
        assert (r - anchor) % interval == timedelta(0)
        assert start is None or r >= start
    for earlier, later in itertools.pairwise(results):
        assert later - earlier == interval


@_settings
@given(expr=cron_expr(), zone_after=zone_and_instant(), start=instants, days=st.integers(1, 400))
def test_bounds_are_respected(
    expr: Expr, zone_after: tuple[str, datetime], start: datetime, days: int
) -> None:
    zone, after = zone_after
    end = start + timedelta(days=days)
    bounded = parse_schedule(expr.text, zone, start=start, end=end)
    free = parse_schedule(expr.text, zone)
    got = list(bounded.occurrences(after, FAR, limit=10))
    # The stored start is rounded up to a whole second; occurrences are whole seconds anyway.
    assert bounded.start is not None
    from_start = free.occurrences(max(after, bounded.start - timedelta(seconds=1)), end)
    want = list(itertools.islice((r for r in from_start if r > after), 10))
    assert got == want
