"""Ranges that wrap around, field by field, and across daylight-saving changes in named zones.

Cases from peer libraries' suites (Quartz, croniter, cron parsers' "22-2" tests): FRI-MON,
TUE-SUN, NOV-FEB, JUN-FEB, 22-2 and 12-8 in hours. 2026-01-01 is a Thursday.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from jobsched.core.schedule import parse_schedule

FAR = datetime(2300, 1, 1, tzinfo=UTC)


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


def first(expression: str, after: datetime, n: int, zone: str = "UTC") -> list[datetime]:
    return list(parse_schedule(expression, zone).occurrences(after, FAR, limit=n))


def between(expression: str, zone: str, after: datetime, until: datetime) -> list[datetime]:
    return list(parse_schedule(expression, zone).occurrences(after, until))


def test_minutes_wrap_past_the_hour() -> None:
    got = first("cron(55-5 * * * ? *)", utc(2026, 1, 1, 0, 53), 12)
    assert got == [
        *(utc(2026, 1, 1, 0, m) for m in range(55, 60)),
        *(utc(2026, 1, 1, 1, m) for m in range(6)),
        utc(2026, 1, 1, 1, 55),
    ]
    # With a step along the wrapped sequence: 50, then 50+15-60 = 5.
    assert first("cron(50-10/15 * * * ? *)", utc(2026, 1, 1), 3) == [
        utc(2026, 1, 1, 0, 5),
        utc(2026, 1, 1, 0, 50),
        utc(2026, 1, 1, 1, 5),
    ]


def test_hours_22_to_2() -> None:
    got = first("cron(0 22-2 * * ? *)", utc(2026, 1, 1, 12), 6)
    assert got == [
        utc(2026, 1, 1, 22),
        utc(2026, 1, 1, 23),
        utc(2026, 1, 2, 0),
        utc(2026, 1, 2, 1),
        utc(2026, 1, 2, 2),
        utc(2026, 1, 2, 22),
    ]


def test_hours_12_to_8_leave_out_the_morning() -> None:
    got = first("cron(0 12-8 * * ? *)", utc(2026, 1, 1, 8, 30), 22)
    assert [t.hour for t in got] == [*range(12, 24), *range(9), 12]
    assert got[-1] == utc(2026, 1, 2, 12)


def test_hours_with_a_step_along_the_wrap() -> None:
    got = first("cron(0 20-2/2 * * ? *)", utc(2026, 1, 1, 12), 5)
    assert got == [
        utc(2026, 1, 1, 20),
        utc(2026, 1, 1, 22),
        utc(2026, 1, 2, 0),
        utc(2026, 1, 2, 2),
        utc(2026, 1, 2, 20),
    ]


def test_day_of_month_wraps_after_31_and_each_month_keeps_the_days_it_has() -> None:
    got = first("cron(0 0 28-3 * ? *)", utc(2026, 1, 27), 18)
    assert [t.date().isoformat()[5:] for t in got] == [
        "01-28", "01-29", "01-30", "01-31", "02-01", "02-02", "02-03",
        "02-28", "03-01", "03-02", "03-03",
        "03-28", "03-29", "03-30", "03-31", "04-01", "04-02", "04-03",
    ]  # fmt: skip
    # A leap February has its 29th; a step is fixed on the 1-31 cycle (28, 30, 1, 3).
    assert [t.day for t in first("cron(0 0 28-3 2 ? 2028)", utc(2028, 1, 1), 10)] == [1, 2, 3, 28, 29]
    got = first("cron(0 0 28-3/2 * ? *)", utc(2026, 1, 27), 8)
    assert [t.date().isoformat()[5:] for t in got] == [
        "01-28", "01-30", "02-01", "02-03", "02-28", "03-01", "03-03", "03-28",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("months", "expected"),
    [
        ("NOV-FEB", ["2026-11", "2026-12", "2027-01", "2027-02", "2027-11"]),
        ("JUN-FEB", ["2026-06", "2026-07", "2026-08", "2026-09", "2026-10", "2026-11", "2026-12", "2027-01",
                     "2027-02", "2027-06"]),
        ("12-1", ["2026-12", "2027-01", "2027-12"]),
    ],
)  # fmt: skip
def test_months_wrap_into_the_next_year(months: str, expected: list[str]) -> None:
    got = first(f"cron(0 0 1 {months} ? *)", utc(2026, 2, 2), len(expected))
    assert [t.strftime("%Y-%m") for t in got] == expected


@pytest.mark.parametrize(
    ("weekdays", "expected"),
    [
        ("SAT-SUN", ["Sat", "Sun", "Sat", "Sun"]),
        ("FRI-MON", ["Fri", "Sat", "Sun", "Mon", "Fri", "Sat", "Sun", "Mon"]),
        ("6-2", ["Fri", "Sat", "Sun", "Mon", "Fri", "Sat", "Sun", "Mon"]),
        ("TUE-SUN", ["Thu", "Fri", "Sat", "Sun", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun", "Tue"]),
        ("FRI-MON/2", ["Fri", "Sun", "Fri", "Sun"]),
    ],
)
def test_weekdays_wrap_over_the_weekend(weekdays: str, expected: list[str]) -> None:
    got = first(f"cron(0 8 ? * {weekdays} *)", utc(2026, 1, 1), len(expected))
    assert [t.strftime("%a") for t in got] == expected
    assert got[0] >= utc(2026, 1, 1, 8)


def test_every_field_wrapped_at_once_across_a_year_end() -> None:
    # Thursday 31 Dec 2026 is not in FRI-MON; Friday 1 Jan 2027 runs from midnight.
    got = first("cron(50-10/20 22-2 ? NOV-FEB FRI-MON *)", utc(2026, 12, 31, 21), 6)
    assert got == [
        utc(2027, 1, 1, 0, 10),
        utc(2027, 1, 1, 0, 50),
        utc(2027, 1, 1, 1, 10),
        utc(2027, 1, 1, 1, 50),
        utc(2027, 1, 1, 2, 10),
        utc(2027, 1, 1, 2, 50),
    ]
    # Day-of-month, hours and months wrapped together: the 3rd's evening, then the 28th.
    got = first("cron(0 22-2 28-3 NOV-FEB ? *)", utc(2026, 12, 3, 3), 5)
    assert got == [
        utc(2026, 12, 3, 22),
        utc(2026, 12, 3, 23),
        utc(2026, 12, 28, 0),
        utc(2026, 12, 28, 1),
        utc(2026, 12, 28, 2),
    ]


# ---- daylight saving in named zones: skipped times are skipped, repeated ones run once ----


def test_hours_22_to_2_in_new_york_across_spring_forward() -> None:
    # 2026-03-08 02:00 EST becomes 03:00 EDT: the 02:00 run of that night does not exist.
    got = between("cron(0 22-2 * * ? *)", "America/New_York", utc(2026, 3, 7, 12), utc(2026, 3, 9, 12))
    assert got == [
        utc(2026, 3, 8, 3),  # Sat 22:00 EST
        utc(2026, 3, 8, 4),  # Sat 23:00 EST
        utc(2026, 3, 8, 5),  # Sun 00:00 EST
        utc(2026, 3, 8, 6),  # Sun 01:00 EST; 02:00 is skipped, not moved to 03:00
        utc(2026, 3, 9, 2),  # Sun 22:00 EDT
        utc(2026, 3, 9, 3),  # Sun 23:00 EDT
        utc(2026, 3, 9, 4),  # Mon 00:00 EDT
        utc(2026, 3, 9, 5),  # Mon 01:00 EDT
        utc(2026, 3, 9, 6),  # Mon 02:00 EDT
    ]


def test_hours_22_to_2_in_new_york_across_fall_back() -> None:
    # 2026-11-01 02:00 EDT becomes 01:00 EST: 01:00 happens twice and runs once, at its first instant.
    got = between("cron(0 22-2 * * ? *)", "America/New_York", utc(2026, 10, 31, 12), utc(2026, 11, 2, 12))
    assert got == [
        utc(2026, 11, 1, 2),  # Sat 22:00 EDT
        utc(2026, 11, 1, 3),  # Sat 23:00 EDT
        utc(2026, 11, 1, 4),  # Sun 00:00 EDT
        utc(2026, 11, 1, 5),  # Sun 01:00 EDT, and not again at 01:00 EST (06:00Z)
        utc(2026, 11, 1, 7),  # Sun 02:00 EST
        utc(2026, 11, 2, 3),  # Sun 22:00 EST
        utc(2026, 11, 2, 4),  # Sun 23:00 EST
        utc(2026, 11, 2, 5),  # Mon 00:00 EST
        utc(2026, 11, 2, 6),  # Mon 01:00 EST
        utc(2026, 11, 2, 7),  # Mon 02:00 EST
    ]
    half = between("cron(30 22-2 * * ? *)", "America/New_York", utc(2026, 11, 1, 4), utc(2026, 11, 1, 8))
    assert half == [utc(2026, 11, 1, 4, 30), utc(2026, 11, 1, 5, 30), utc(2026, 11, 1, 7, 30)]


def test_weekend_range_in_london_across_both_changes() -> None:
    # Sunday 2026-03-29: 01:00 GMT becomes 02:00 BST, so Sunday's 01:30 is skipped.
    spring = between("cron(30 1 ? * SAT-SUN *)", "Europe/London", utc(2026, 3, 27), utc(2026, 4, 6))
    assert spring == [utc(2026, 3, 28, 1, 30), utc(2026, 4, 4, 0, 30), utc(2026, 4, 5, 0, 30)]
    # Sunday 2026-10-25: 02:00 BST becomes 01:00 GMT, so Sunday's 01:30 runs once, in BST.
    autumn = between("cron(30 1 ? * SAT-SUN *)", "Europe/London", utc(2026, 10, 23), utc(2026, 11, 2))
    assert autumn == [
        utc(2026, 10, 24, 0, 30),
        utc(2026, 10, 25, 0, 30),
        utc(2026, 10, 31, 1, 30),
        utc(2026, 11, 1, 1, 30),
    ]


def test_month_range_over_the_southern_summer_in_sydney() -> None:
    # OCT-APR wraps the year; Sydney's clocks go back on 5 April and forward on 4 October 2026.
    got = between("cron(30 2 1-5 OCT-APR ? *)", "Australia/Sydney", utc(2026, 3, 31), utc(2026, 11, 1))
    assert got == [
        utc(2026, 3, 31, 15, 30),  # 1 Apr 02:30 AEDT
        utc(2026, 4, 1, 15, 30),
        utc(2026, 4, 2, 15, 30),
        utc(2026, 4, 3, 15, 30),
        utc(2026, 4, 4, 15, 30),  # 5 Apr: 02:30 happens twice; the first (AEDT) runs, once
        utc(2026, 9, 30, 16, 30),  # 1 Oct 02:30 AEST; May to September are not in OCT-APR
        utc(2026, 10, 1, 16, 30),
        utc(2026, 10, 2, 16, 30),
        # 4 Oct: 02:00 AEST becomes 03:00 AEDT, 02:30 does not exist and is skipped
        utc(2026, 10, 4, 15, 30),  # 5 Oct 02:30 AEDT
        utc(2026, 10, 31, 15, 30),  # 1 Nov 02:30 AEDT
    ]
