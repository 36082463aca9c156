"""The engine's range: expressions and bounds at datetime's limits are refused with a
ScheduleError, and a compiled schedule answers every query in 1970-2200 without raising."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jobsched.core.schedule import HORIZON_END, ScheduleError, load_zone, parse_schedule
from schedule_strategies import ZONES, cron_expr


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


@pytest.mark.parametrize(
    ("expression", "zone", "words"),
    [
        # West of UTC the wall time lies in year 10000 in UTC (was OverflowError).
        ("at(9999-12-31T23:59:59)", "America/New_York", "at() year 9999 is outside 1970-2199"),
        # East of UTC it is representable, but past anything a cron could reach (was accepted).
        ("at(9999-12-31T23:59:59)", "Asia/Tokyo", "at() year 9999 is outside 1970-2199"),
        # East of UTC a year-1 wall time lies in year 0 in UTC (was OverflowError).
        ("at(0001-01-01T00:00:00)", "Asia/Tokyo", "at() year 1 is outside 1970-2199"),
        # 8.6e15 seconds: every occurrence after the first overflowed into None (was accepted).
        ("rate(99999999999 days)", "UTC", "longer than the longest supported interval, 36500 days"),
        ("rate(36501 days)", "UTC", "36500 days"),
        ("rate(" + "9" * 5000 + " minutes)", "UTC", "longest supported interval"),
        ("cron(" + "7" * 5000 + " * * * ? *)", "UTC", "minutes 7777777777"),
        ("cron(0 0 L-" + "1" * 5000 + " * ? *)", "UTC", "out of range L-0 to L-30"),
        ("cron(0/" + "1" * 5000 + " * * * ? *)", "UTC", None),
    ],
)
def test_expressions_beyond_the_range_are_schedule_errors(
    expression: str, zone: str, words: str | None
) -> None:
    if words is None:
        parse_schedule(expression, zone)  # a huge step is only "the first value", not an error
        return
    with pytest.raises(ScheduleError) as caught:
        parse_schedule(expression, zone)
    assert words in str(caught.value)
    assert len(str(caught.value)) < 300


def test_longest_rate_is_accepted() -> None:
    s = parse_schedule("rate(36500 days)", start=utc(2000, 1, 1))
    assert s.next_after(utc(2000, 1, 1)) == utc(2099, 12, 7)


@pytest.mark.parametrize(
    "start",
    [
        utc(2200, 6, 1),
        datetime(9999, 12, 31, 23, 59, 59, 500_000, tzinfo=UTC),  # rounding up overflowed
        datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC),
    ],
)
def test_start_beyond_the_horizon_is_refused(start: datetime) -> None:
    with pytest.raises(ScheduleError, match="is after 2199"):
        parse_schedule("rate(1 day)", start=start)


def test_results_stay_inside_the_horizon() -> None:
    late = parse_schedule("rate(1 day)", start=utc(2199, 12, 31))
    assert late.next_after(utc(2199, 12, 31)) == utc(2200, 1, 1)
    assert late.next_after(utc(2200, 1, 1)) is None  # 2200-01-02 is past the horizon
    assert list(late.occurrences(utc(2199, 12, 1), datetime.max.replace(tzinfo=UTC))) == [
        utc(2199, 12, 31),
        utc(2200, 1, 1),
    ]


def test_first_occurrence_ignores_end_and_knows_never() -> None:
    assert parse_schedule("cron(0 0 30 2 ? *)").first_occurrence() is None
    assert parse_schedule("cron(0 0 1 1 ? 2020)", start=utc(2021, 1, 1)).first_occurrence() is None
    assert parse_schedule("cron(0 0 1 1 ? 2020)", end=utc(2000, 1, 1)).first_occurrence() == utc(2020, 1, 1)
    assert parse_schedule("cron(0 12 * * ? *)").first_occurrence() == utc(1970, 1, 1, 12)
    assert parse_schedule("rate(1 hour)", start=utc(2199, 12, 31, 23)).first_occurrence() == utc(
        2199, 12, 31, 23
    )
    # The last cron wall time in a zone far west of UTC is in 2200 in UTC, still inside.
    assert parse_schedule("cron(59 23 31 12 ? 2199)", "Etc/GMT+12").first_occurrence() == utc(
        2200, 1, 1, 11, 59
    )


def test_unknown_zone_message_is_bounded() -> None:
    with pytest.raises(ScheduleError) as caught:
        load_zone("x" * 400_000)
    assert len(str(caught.value)) < 120


# Start and end anywhere datetime can hold them, in any offset; expressions of every kind.
_offsets = st.sampled_from([UTC, timezone(timedelta(hours=-12)), timezone(timedelta(hours=14, minutes=-1))])
_anywhere = st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=_offsets)
_queries = st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(2200, 12, 31), timezones=_offsets)
_expressions = st.one_of(
    cron_expr(special=True, years=False).map(lambda e: e.text),
    st.integers(1, 36_500).map(lambda n: f"rate({n} days)" if n > 1 else "rate(1 day)"),
    st.integers(10, 10**6).map(lambda n: f"rate({n} seconds)"),
    st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(2199, 12, 31, 23, 59, 59)).map(
        lambda d: f"at({d.strftime('%Y-%m-%dT%H:%M:%S')})"
    ),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    expression=_expressions,
    zone=st.sampled_from([*ZONES, "Etc/GMT+12", "Etc/GMT-14"]),
    start=st.none() | _anywhere,
    end=st.none() | _anywhere,
    queries=st.lists(_queries, min_size=1, max_size=4),
)
def test_queries_in_range_never_raise(
    expression: str, zone: str, start: datetime | None, end: datetime | None, queries: list[datetime]
) -> None:
    try:
        schedule = parse_schedule(expression, zone, start=start, end=end)
    except ScheduleError:
        return  # e.g. end before start, a start past 2199, an at() time in a DST gap
    for t in queries:
        found = schedule.next_after(t)
        assert found is None or (t < found < HORIZON_END and found.tzinfo is UTC)
        for occurrence in schedule.occurrences(t, t + timedelta(days=3), limit=3):
            assert t < occurrence < HORIZON_END
    first = schedule.first_occurrence()
    assert first is None or first < HORIZON_END
