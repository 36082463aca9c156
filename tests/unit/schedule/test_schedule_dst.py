"""Daylight-saving behaviour as EventBridge documents it.

A local time skipped by spring-forward does not run (it is not moved to the next valid
time); a local time repeated by fall-back runs once, at its first instant.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import pairwise
from zoneinfo import ZoneInfo

import pytest
from jobsched.core.schedule import ScheduleError, parse_schedule

FAR = datetime(2300, 1, 1, tzinfo=UTC)


def utc(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0, micro: int = 0
) -> datetime:
    return datetime(year, month, day, hour, minute, second, micro, tzinfo=UTC)


def run(expression: str, zone: str, after: datetime, until: datetime) -> list[datetime]:
    return list(parse_schedule(expression, zone).occurrences(after, until))


# (zone, spring-forward date, a wall time in its gap, fall-back date, a repeated wall time,
#  UTC instant of the repeated wall time's first occurrence)
ZONE_CASES = [
    ("America/New_York", (2026, 3, 8), (2, 30), (2026, 11, 1), (1, 30), utc(2026, 11, 1, 5, 30)),
    ("Europe/London", (2026, 3, 29), (1, 30), (2026, 10, 25), (1, 30), utc(2026, 10, 25, 0, 30)),
    ("Europe/Berlin", (2026, 3, 29), (2, 30), (2026, 10, 25), (2, 30), utc(2026, 10, 25, 0, 30)),
    # Southern hemisphere: clocks go back in April and forward in October.
    ("Australia/Sydney", (2026, 10, 4), (2, 30), (2026, 4, 5), (2, 30), utc(2026, 4, 4, 15, 30)),
    # A 30-minute shift: 02:00-02:29 is skipped, 01:30-01:59 repeats.
    ("Australia/Lord_Howe", (2026, 10, 4), (2, 15), (2026, 4, 5), (1, 45), utc(2026, 4, 4, 14, 45)),
]


@pytest.mark.parametrize(("zone", "spring", "gap", "fall", "repeat", "first"), ZONE_CASES)
def test_daily_job_in_spring_forward_gap_is_skipped(
    zone: str,
    spring: tuple[int, int, int],
    gap: tuple[int, int],
    fall: tuple[int, int, int],
    repeat: tuple[int, int],
    first: datetime,
) -> None:
    day = datetime(*spring, tzinfo=UTC)
    got = run(f"cron({gap[1]} {gap[0]} * * ? *)", zone, day - timedelta(days=2), day + timedelta(days=2))
    local_days = [r.astimezone(ZoneInfo(zone)).date() for r in got]
    assert datetime(*spring).date() not in local_days
    assert len(got) == 3  # four days in the window, one of them skipped
    for r in got:
        local = r.astimezone(ZoneInfo(zone))
        assert (local.hour, local.minute) == gap  # never shifted to a later wall time


@pytest.mark.parametrize(("zone", "spring", "gap", "fall", "repeat", "first"), ZONE_CASES)
def test_daily_job_in_fall_back_repeat_runs_once_at_first_instant(
    zone: str,
    spring: tuple[int, int, int],
    gap: tuple[int, int],
    fall: tuple[int, int, int],
    repeat: tuple[int, int],
    first: datetime,
) -> None:
    expression = f"cron({repeat[1]} {repeat[0]} * * ? *)"
    got = run(expression, zone, first - timedelta(days=1, hours=1), first + timedelta(days=1, hours=1))
    assert len(got) == 3
    assert got[1] == first
    # Asking from inside the second pass of the repeated hour does not run it again.
    schedule = parse_schedule(expression, zone)
    assert schedule.next_after(first + timedelta(minutes=31)) == got[2]


@pytest.mark.parametrize(("zone", "spring", "gap", "fall", "repeat", "first"), ZONE_CASES)
def test_hourly_job_runs_once_in_repeated_hour(
    zone: str,
    spring: tuple[int, int, int],
    gap: tuple[int, int],
    fall: tuple[int, int, int],
    repeat: tuple[int, int],
    first: datetime,
) -> None:
    got = run(f"cron({repeat[1]} * * * ? *)", zone, first - timedelta(hours=3), first + timedelta(hours=3))
    walls = [r.astimezone(ZoneInfo(zone)).replace(tzinfo=None) for r in got]
    assert len(walls) == len(set(walls)), "a repeated wall time ran twice"
    assert first in got
    # The repeated wall time's second pass is the only thing dropped, so consecutive
    # runs are never closer than an hour and at most one extra hour apart.
    assert all(timedelta(hours=1) <= b - a <= timedelta(hours=2) for a, b in pairwise(got))
    assert len(got) == 5


def test_hourly_job_new_york_exact() -> None:
    fall = run("cron(30 * * * ? *)", "America/New_York", utc(2026, 11, 1, 4), utc(2026, 11, 1, 8))
    # 00:30 EDT, 01:30 EDT, (01:30 EST skipped), 02:30 EST
    assert fall == [utc(2026, 11, 1, 4, 30), utc(2026, 11, 1, 5, 30), utc(2026, 11, 1, 7, 30)]
    spring = run("cron(30 * * * ? *)", "America/New_York", utc(2026, 3, 8, 5), utc(2026, 3, 8, 8))
    # 00:30 EST, 01:30 EST, (02:30 does not exist), 03:30 EDT
    assert spring == [utc(2026, 3, 8, 5, 30), utc(2026, 3, 8, 6, 30), utc(2026, 3, 8, 7, 30)]


def test_job_only_in_gap_never_runs() -> None:
    assert parse_schedule("cron(* 2 8 3 ? 2026)", "America/New_York").next_after(utc(2026, 1, 1)) is None


def test_zone_without_dst_half_hour_offset() -> None:
    got = run("cron(0 9 * * ? *)", "Asia/Kolkata", utc(2026, 3, 1), utc(2026, 12, 1))
    assert len(got) == 275
    assert all((r.hour, r.minute) == (3, 30) for r in got)


def test_daily_wall_time_follows_dst_but_rate_does_not() -> None:
    cron = run("cron(0 9 * * ? *)", "America/New_York", utc(2026, 3, 6), utc(2026, 3, 10))
    assert [r.hour for r in cron] == [14, 14, 13, 13]
    rate = run("rate(1 day)", "America/New_York", utc(2026, 3, 6), utc(2026, 3, 10))
    assert [r.hour for r in rate] == [0, 0, 0, 0]
    hourly = run("rate(1 hour)", "America/New_York", utc(2026, 11, 1), utc(2026, 11, 1, 12))
    assert len(hourly) == 12
    assert all(b - a == timedelta(hours=1) for a, b in pairwise(hourly))


@pytest.mark.parametrize(
    ("zone", "wall"),
    [
        ("America/New_York", "2026-03-08T02:30:00"),
        ("Europe/Berlin", "2026-03-29T02:00:00"),
        ("Australia/Sydney", "2026-10-04T02:59:59"),
    ],
)
def test_at_in_gap_is_an_error(zone: str, wall: str) -> None:
    with pytest.raises(ScheduleError, match=f"at\\(\\) time {wall} does not exist in {zone}"):
        parse_schedule(f"at({wall})", zone)


def test_at_repeated_time_is_first_instant() -> None:
    s = parse_schedule("at(2026-11-01T01:30:00)", "America/New_York")
    assert s.next_after(utc(2026, 1, 1)) == utc(2026, 11, 1, 5, 30)
    s = parse_schedule("at(2026-04-05T02:30:00)", "Australia/Sydney")
    assert s.next_after(utc(2026, 1, 1)) == utc(2026, 4, 4, 15, 30)
