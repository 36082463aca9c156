"""The EventBridge User Guide's own cron examples, word for word, with the instants they give.

Source: "Using cron and rate expressions to schedule rules in Amazon EventBridge", section
"Cron expressions", table "Examples", and the put-rule examples below it
(https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-scheduled-rule-pattern.html;
doc_source/eb-create-rule-schedule.md in awsdocs/amazon-eventbridge-user-guide). The guide's
times are UTC, so the schedules here are in UTC. 2026-01-02 is a Friday.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import pairwise

import pytest
from jobsched.core.schedule import parse_schedule

FAR = datetime(2300, 1, 1, tzinfo=UTC)

# (expression exactly as in the table, the table's "Meaning")
GUIDE_TABLE = [
    ("0 10 * * ? *", "Run at 10:00 am (UTC+0) every day"),
    ("15 12 * * ? *", "Run at 12:15 pm (UTC+0) every day"),
    ("0 18 ? * MON-FRI *", "Run at 6:00 pm (UTC+0) every Monday through Friday"),
    ("0 8 1 * ? *", "Run at 8:00 am (UTC+0) every 1st day of the month"),
    ("0/15 * * * ? *", "Run every 15 minutes"),
    ("0/10 * ? * MON-FRI *", "Run every 10 minutes Monday through Friday"),
    (
        "0/5 8-17 ? * MON-FRI *",
        "Run every 5 minutes Monday through Friday between 8:00 am and 5:55 pm (UTC+0)",
    ),
    (
        "0/30 20-2 ? * MON-FRI *",
        "Run every 30 minutes Monday through Friday between 10:00 pm on the starting day to 2:00 am "
        "on the following day (UTC) Run from 12:00 am to 2:00 am on Monday morning (UTC).",
    ),
]


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


def between(body: str, after: datetime, until: datetime) -> list[datetime]:
    return list(parse_schedule(f"cron({body})").occurrences(after, until))


def first(body: str, after: datetime, n: int) -> list[datetime]:
    return list(parse_schedule(f"cron({body})").occurrences(after, FAR, limit=n))


def hhmm(instants: list[datetime]) -> list[str]:
    return [f"{t:%a %H:%M}" for t in instants]


@pytest.mark.parametrize(("body", "meaning"), GUIDE_TABLE)
def test_every_row_of_the_guide_table_parses(body: str, meaning: str) -> None:
    schedule = parse_schedule(f"cron({body})")
    assert schedule.next_after(utc(2026, 1, 2)) is not None, meaning


def test_10_am_every_day() -> None:
    assert first("0 10 * * ? *", utc(2026, 1, 2), 3) == [utc(2026, 1, d, 10) for d in (2, 3, 4)]


def test_12_15_pm_every_day() -> None:
    assert first("15 12 * * ? *", utc(2026, 1, 2, 12, 15), 3) == [utc(2026, 1, d, 12, 15) for d in (3, 4, 5)]


def test_6_pm_monday_through_friday() -> None:
    got = between("0 18 ? * MON-FRI *", utc(2026, 1, 2), utc(2026, 1, 10))
    # Friday, then Monday to Friday of the next week: never Saturday or Sunday.
    assert got == [utc(2026, 1, d, 18) for d in (2, 5, 6, 7, 8, 9)]


def test_8_am_on_the_first_of_each_month() -> None:
    assert first("0 8 1 * ? *", utc(2026, 1, 2), 3) == [utc(2026, m, 1, 8) for m in (2, 3, 4)]


def test_every_15_minutes() -> None:
    got = between("0/15 * * * ? *", utc(2026, 1, 2), utc(2026, 1, 3))
    assert len(got) == 96 and got[0] == utc(2026, 1, 2, 0, 15) and got[-1] == utc(2026, 1, 3)
    assert {b - a for a, b in pairwise(got)} == {timedelta(minutes=15)}


def test_every_10_minutes_monday_through_friday() -> None:
    got = between("0/10 * ? * MON-FRI *", utc(2026, 1, 2, 23, 30), utc(2026, 1, 5, 0, 10))
    # Friday's last two, nothing at the weekend, then Monday from midnight.
    assert hhmm(got) == ["Fri 23:40", "Fri 23:50", "Mon 00:00", "Mon 00:10"]
    week = between("0/10 * ? * MON-FRI *", utc(2026, 1, 4), utc(2026, 1, 11))
    assert len(week) == 5 * 144 and {t.strftime("%a") for t in week} == {"Mon", "Tue", "Wed", "Thu", "Fri"}


def test_every_5_minutes_8_am_to_5_55_pm_monday_through_friday() -> None:
    monday = between("0/5 8-17 ? * MON-FRI *", utc(2026, 1, 5), utc(2026, 1, 6))
    assert len(monday) == 120
    assert monday[0] == utc(2026, 1, 5, 8) and monday[-1] == utc(2026, 1, 5, 17, 55)
    assert hhmm(first("0/5 8-17 ? * MON-FRI *", utc(2026, 1, 2, 17, 50), 3)) == [
        "Fri 17:55",
        "Mon 08:00",
        "Mon 08:05",
    ]


def test_every_30_minutes_from_the_evening_to_2_am_monday_through_friday() -> None:
    """AWS's own wrap-around example.

    Each field is matched on its own: every Monday to Friday has runs from 00:00 to 02:30 and
    from 20:00 to 23:30. That gives the night from 20:00 on each of Monday to Thursday through
    to 02:30 the following day, and, as the guide's added line says, Monday morning from
    00:00. Friday's night ends at 23:30 because Saturday is not in MON-FRI. Hour 20 is
    8:00 pm (the guide's "10:00 pm" does not match its own fields), and hour 2 matches whole,
    so 02:30 runs, as 17:55 does in the row above.
    """
    body = "0/30 20-2 ? * MON-FRI *"
    day = ["00:00", "00:30", "01:00", "01:30", "02:00", "02:30"]
    evening = ["20:00", "20:30", "21:00", "21:30", "22:00", "22:30", "23:00", "23:30"]
    week = between(body, utc(2026, 1, 4), utc(2026, 1, 11))  # Sunday to Sunday
    expected = [f"{d} {t}" for d in ("Mon", "Tue", "Wed", "Thu", "Fri") for t in day + evening]
    assert hhmm(week) == expected
    # The Monday night runs on, every 30 minutes, into Tuesday morning.
    night = first(body, utc(2026, 1, 5, 19, 59), 14)
    assert night[0] == utc(2026, 1, 5, 20) and night[-1] == utc(2026, 1, 6, 2, 30)
    assert {b - a for a, b in pairwise(night)} == {timedelta(minutes=30)}
    # Friday night stops at 23:30; the next run is Monday at midnight.
    assert first(body, utc(2026, 1, 9, 23, 30), 1) == [utc(2026, 1, 12)]


def test_the_guides_put_rule_examples() -> None:
    assert first("0 12 * * ? *", utc(2026, 1, 2), 2) == [utc(2026, 1, 2, 12), utc(2026, 1, 3, 12)]
    assert hhmm(first("5,35 14 * * ? *", utc(2026, 1, 2), 3)) == ["Fri 14:05", "Fri 14:35", "Sat 14:05"]
    # 10:15 on the last Friday of each month, 2019 to 2022, then never again.
    got = first("15 10 ? * 6L 2019-2022", utc(2022, 11, 1), 5)
    assert got == [utc(2022, 11, 25, 10, 15), utc(2022, 12, 30, 10, 15)]
