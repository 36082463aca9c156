"""Evaluation in UTC: calendar specials, leap days, year bounds, start/end, naive input."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from jobsched.core.schedule import Schedule, ScheduleError, parse_schedule

FAR = datetime(2300, 1, 1, tzinfo=UTC)


def utc(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0, micro: int = 0
) -> datetime:
    return datetime(year, month, day, hour, minute, second, micro, tzinfo=UTC)


def take(schedule: Schedule, after: datetime, n: int) -> list[datetime]:
    return list(schedule.occurrences(after, FAR, limit=n))


def days(schedule: Schedule, after: datetime, n: int) -> list[str]:
    return [r.date().isoformat() for r in take(schedule, after, n)]


def test_next_after_is_strict_and_whole_seconds() -> None:
    s = parse_schedule("cron(0/15 * * * ? *)")
    assert s.next_after(utc(2026, 1, 1, 0, 0)) == utc(2026, 1, 1, 0, 15)
    assert s.next_after(utc(2026, 1, 1, 0, 14, 59, 999999)) == utc(2026, 1, 1, 0, 15)
    assert s.next_after(utc(2026, 1, 1, 0, 15, 0, 1)) == utc(2026, 1, 1, 0, 30)
    result = s.next_after(datetime(2026, 1, 1, 1, 0, tzinfo=timezone(timedelta(hours=1))))
    assert result == utc(2026, 1, 1, 0, 15) and result is not None and result.tzinfo is UTC


def test_weekday_ranges_and_steps() -> None:
    s = parse_schedule("cron(30 9 ? * MON-FRI *)")
    # 2026-01-02 is a Friday.
    assert days(s, utc(2026, 1, 2, 10), 3) == ["2026-01-05", "2026-01-06", "2026-01-07"]
    s = parse_schedule("cron(0 0 ? * 1/3 *)")  # SUN, WED, SAT
    assert [r.strftime("%a") for r in take(s, utc(2026, 1, 1), 4)] == ["Sat", "Sun", "Wed", "Sat"]


def test_last_day_of_month_and_leap_years() -> None:
    s = parse_schedule("cron(0 0 L * ? *)")
    assert days(s, utc(2024, 1, 15), 3) == ["2024-01-31", "2024-02-29", "2024-03-31"]
    assert days(s, utc(2100, 2, 1), 1) == ["2100-02-28"]
    s = parse_schedule("cron(0 0 L-2 2 ? *)")
    assert days(s, utc(2024, 1, 1), 2) == ["2024-02-27", "2025-02-26"]


def test_leap_day_skips_2100() -> None:
    s = parse_schedule("cron(0 0 29 2 ? *)")
    assert s.next_after(utc(2097, 3, 1)) == utc(2104, 2, 29)
    assert days(s, utc(2023, 1, 1), 3) == ["2024-02-29", "2028-02-29", "2032-02-29"]


def test_impossible_schedules_end() -> None:
    assert parse_schedule("cron(0 0 31 2 ? *)").next_after(utc(1970, 1, 1)) is None
    assert parse_schedule("cron(0 0 30 2 ? *)").next_after(utc(1970, 1, 1)) is None
    assert parse_schedule("cron(0 0 31 4,6,9,11 ? *)").next_after(utc(1970, 1, 1)) is None
    assert parse_schedule("cron(0 0 * * ? 2001-2003)").next_after(utc(2026, 1, 1)) is None
    assert parse_schedule("cron(0 0 ? 2 2#5 2026)").next_after(utc(2000, 1, 1)) is None


def test_nearest_weekday_stays_in_month() -> None:
    s = parse_schedule("cron(0 0 1W * ? *)")
    # 2025-02-01 is a Saturday: moving back would leave the month, so Monday the 3rd.
    assert days(s, utc(2025, 1, 2), 1) == ["2025-02-03"]
    # 2026-03-01 is a Sunday: Monday the 2nd.
    assert days(s, utc(2026, 2, 2), 1) == ["2026-03-02"]
    s = parse_schedule("cron(0 0 31W * ? *)")
    # 2026-05-31 is a Sunday: moving forward would leave the month, so Friday the 29th;
    # months without a 31st don't fire at all.
    assert days(s, utc(2026, 4, 1), 1) == ["2026-05-29"]
    s = parse_schedule("cron(0 0 15W * ? *)")
    # 2026-08-15 is a Saturday -> Friday 14th; 2026-11-15 is a Sunday -> Monday 16th.
    assert days(s, utc(2026, 8, 1), 1) == ["2026-08-14"]
    assert days(s, utc(2026, 11, 1), 1) == ["2026-11-16"]
    s = parse_schedule("cron(0 0 LW * ? *)")
    # 2026-05-31 is a Sunday, 2026-10-31 a Saturday.
    assert days(s, utc(2026, 5, 1), 1) == ["2026-05-29"]
    assert days(s, utc(2026, 10, 1), 1) == ["2026-10-30"]


def test_nth_and_last_weekday() -> None:
    s = parse_schedule("cron(0 0 ? * MON#1 *)")
    assert days(s, utc(2026, 1, 1), 3) == ["2026-01-05", "2026-02-02", "2026-03-02"]
    s = parse_schedule("cron(0 0 ? * 5#5 *)")  # fifth Thursday, only in some months
    assert days(s, utc(2026, 1, 1), 3) == ["2026-01-29", "2026-04-30", "2026-07-30"]
    s = parse_schedule("cron(0 0 ? * 6L *)")  # last Friday
    assert days(s, utc(2026, 1, 1), 3) == ["2026-01-30", "2026-02-27", "2026-03-27"]
    s = parse_schedule("cron(0 0 ? * L *)")  # bare L = Saturday
    assert days(s, utc(2026, 1, 1), 2) == ["2026-01-03", "2026-01-10"]


def test_year_bounds() -> None:
    s = parse_schedule("cron(0 0 1 1 ? *)")
    assert s.next_after(datetime.min.replace(tzinfo=UTC)) == utc(1970, 1, 1)
    assert s.next_after(utc(2198, 6, 1)) == utc(2199, 1, 1)
    assert s.next_after(utc(2199, 1, 1)) is None
    assert s.next_after(datetime.max.replace(tzinfo=UTC)) is None
    assert parse_schedule("cron(59 23 31 12 ? 2199)").next_after(utc(2199, 12, 31, 23, 58)) == utc(
        2199, 12, 31, 23, 59
    )
    assert parse_schedule("cron(0 0 1 1 ? 1970)").next_after(utc(1969, 12, 31)) == utc(1970, 1, 1)
    # In a zone east of UTC, 1970-01-01 00:00 local is still in 1969 in UTC.
    east = parse_schedule("cron(0 0 1 1 ? 1970)", "Asia/Tokyo")
    assert east.next_after(utc(1960, 1, 1)) == utc(1969, 12, 31, 15)


def test_start_and_end_bounds() -> None:
    start, end = utc(2026, 1, 10, 12), utc(2026, 1, 12, 12)
    s = parse_schedule("cron(0 12 * * ? *)", start=start, end=end)
    assert take(s, utc(2020, 1, 1), 10) == [utc(2026, 1, 10, 12), utc(2026, 1, 11, 12), utc(2026, 1, 12, 12)]
    assert s.next_after(end) is None
    assert s.next_after(utc(2030, 1, 1)) is None
    at = parse_schedule("at(2026-01-11T00:00:00)", start=start, end=end)
    assert at.next_after(utc(2000, 1, 1)) == utc(2026, 1, 11)
    assert parse_schedule("at(2026-01-01T00:00:00)", start=start).next_after(utc(2000, 1, 1)) is None


def test_rate_anchoring() -> None:
    # Without a start, rates are anchored at the Unix epoch so every process agrees.
    s = parse_schedule("rate(7 minutes)")
    first = s.next_after(utc(2026, 1, 1))
    assert first == utc(2026, 1, 1, 0, 7)  # 20,454 days after the epoch: a multiple of 7 min
    assert (first - utc(1970, 1, 1)) % timedelta(minutes=7) == timedelta(0)
    anchored = parse_schedule("rate(7 minutes)", start=utc(2026, 1, 1, 0, 1))
    assert take(anchored, utc(2000, 1, 1), 3) == [
        utc(2026, 1, 1, 0, 1),
        utc(2026, 1, 1, 0, 8),
        utc(2026, 1, 1, 0, 15),
    ]
    assert anchored.next_after(utc(2026, 1, 1, 0, 8)) == utc(2026, 1, 1, 0, 15)
    ended = parse_schedule("rate(1 hour)", start=utc(2026, 1, 1), end=utc(2026, 1, 1, 2, 30))
    assert take(ended, utc(2025, 1, 1), 10) == [utc(2026, 1, 1), utc(2026, 1, 1, 1), utc(2026, 1, 1, 2)]
    assert parse_schedule("rate(30 seconds)").next_after(utc(2026, 1, 1, 0, 0, 1)) == utc(
        2026, 1, 1, 0, 0, 30
    )


def test_at_is_one_time() -> None:
    s = parse_schedule("at(2026-06-01T09:30:00)", "Europe/Berlin")
    assert s.next_after(utc(2026, 1, 1)) == utc(2026, 6, 1, 7, 30)
    assert s.next_after(utc(2026, 6, 1, 7, 30)) is None
    assert list(s.occurrences(utc(2026, 1, 1), utc(2027, 1, 1))) == [utc(2026, 6, 1, 7, 30)]


def test_occurrences_window_and_limit() -> None:
    s = parse_schedule("cron(0 * * * ? *)")
    got = list(s.occurrences(utc(2026, 1, 1), utc(2026, 1, 1, 3)))
    assert got == [utc(2026, 1, 1, 1), utc(2026, 1, 1, 2), utc(2026, 1, 1, 3)]
    assert list(s.occurrences(utc(2026, 1, 1), utc(2026, 1, 1, 3), limit=2)) == got[:2]
    assert list(s.occurrences(utc(2026, 1, 1), utc(2026, 1, 1, 3), limit=0)) == []
    assert list(s.occurrences(utc(2026, 1, 2), utc(2026, 1, 1))) == []
    with pytest.raises(ScheduleError, match="limit -1"):
        s.occurrences(utc(2026, 1, 1), utc(2026, 1, 2), limit=-1)


def test_naive_instants_are_rejected() -> None:
    s = parse_schedule("rate(1 hour)")
    with pytest.raises(ScheduleError, match="timezone-aware"):
        s.next_after(datetime(2026, 1, 1))
    with pytest.raises(ScheduleError, match="timezone-aware"):
        s.occurrences(datetime(2026, 1, 1), utc(2026, 1, 2))
    with pytest.raises(ScheduleError, match="timezone-aware"):
        s.occurrences(utc(2026, 1, 1), datetime(2026, 1, 2))
