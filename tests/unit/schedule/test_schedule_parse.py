"""Parsing: every operator and name, and the exact wording of each error."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from jobsched.core.schedule import ScheduleError, load_zone, parse_schedule
from jobsched.core.schedule.cron import parse_cron_fields

ALL_MINUTES = tuple(range(60))
NEEDS_SIX = "cron needs 6 fields (minutes hours day-of-month month day-of-week year), got"


@pytest.mark.parametrize(
    ("field_text", "expected"),
    [
        ("*", ALL_MINUTES),
        ("7", (7,)),
        ("07", (7,)),
        ("1,5,3", (1, 3, 5)),
        ("10-13", (10, 11, 12, 13)),
        ("0/15", (0, 15, 30, 45)),
        ("5/20", (5, 25, 45)),
        ("*/20", (0, 20, 40)),
        ("10-50/10", (10, 20, 30, 40, 50)),
        ("1-3,10-50/20,59", (1, 2, 3, 10, 30, 50, 59)),
        ("0/60", (0,)),
    ],
)
def test_minutes_operators(field_text: str, expected: tuple[int, ...]) -> None:
    assert parse_cron_fields(f"{field_text} 0 * * ? *").minutes == expected


@pytest.mark.parametrize(
    ("body", "attribute", "expected"),
    [
        # A range whose start exceeds its end runs to the field's maximum, then from its minimum.
        ("50-10 0 * * ? *", "minutes", (*range(11), *range(50, 60))),
        ("59-0 0 * * ? *", "minutes", (0, 59)),
        ("0 22-2 * * ? *", "hours", (0, 1, 2, 22, 23)),
        ("0 12-8 * * ? *", "hours", (*range(9), *range(12, 24))),
        ("0 23-0 * * ? *", "hours", (0, 23)),
        ("0 0 1 NOV-FEB ? *", "months", (1, 2, 11, 12)),
        ("0 0 1 JUN-FEB ? *", "months", (1, 2, 6, 7, 8, 9, 10, 11, 12)),
        ("0 0 1 12-1 ? *", "months", (1, 12)),
        # A step counts along the wrapped sequence, not from the field's minimum.
        ("0 20-2/2 * * ? *", "hours", (0, 2, 20, 22)),
        ("0 21-3/3 * * ? *", "hours", (0, 3, 21)),
        ("50-10/15 0 * * ? *", "minutes", (5, 50)),
        ("0 0 1 OCT-MAR/2 ? *", "months", (2, 10, 12)),
        # Inside a list, and next to a forward range.
        ("0 1-2,22-23,23-0 * * ? *", "hours", (0, 1, 2, 22, 23)),
        # Equal ends are the one value, never a whole cycle.
        ("0 5-5 * * ? *", "hours", (5,)),
    ],
)
def test_wrapped_ranges(body: str, attribute: str, expected: tuple[int, ...]) -> None:
    assert getattr(parse_cron_fields(body), attribute) == expected


@pytest.mark.parametrize(
    ("dow", "weekdays"),
    [
        ("SAT-SUN", {7, 1}),
        ("FRI-MON", {6, 7, 1, 2}),
        ("6-2", {6, 7, 1, 2}),
        ("TUE-SUN", {3, 4, 5, 6, 7, 1}),
        ("SAT-FRI", {1, 2, 3, 4, 5, 6, 7}),
        ("FRI-MON/2", {6, 1}),
        ("mon-fri,sat-sun", {1, 2, 3, 4, 5, 6, 7}),
    ],
)
def test_wrapped_day_of_week(dow: str, weekdays: set[int]) -> None:
    rule = parse_cron_fields(f"0 0 ? * {dow} *").day_of_week
    assert rule is not None and rule.weekdays == frozenset(weekdays)


@pytest.mark.parametrize(
    ("dom", "days"),
    [
        # Day-of-month wraps after 31 whatever the month; the evaluator drops days a month lacks.
        ("28-3", {28, 29, 30, 31, 1, 2, 3}),
        ("31-1", {31, 1}),
        ("28-3/2", {28, 30, 1, 3}),
        ("30-2/2", {30, 1}),
    ],
)
def test_wrapped_day_of_month(dom: str, days: set[int]) -> None:
    rule = parse_cron_fields(f"0 0 {dom} * ? *").day_of_month
    assert rule is not None and rule.days == frozenset(days)


def test_names_are_case_insensitive_and_mix_with_numbers() -> None:
    fields = parse_cron_fields("0 0 ? jan,Mar-MAY,12 mon-FRI,sun *")
    assert fields.months == (1, 3, 4, 5, 12)
    assert fields.day_of_week is not None
    assert fields.day_of_week.weekdays == frozenset({1, 2, 3, 4, 5, 6})


def test_year_field() -> None:
    assert parse_cron_fields("0 0 * * ? 2030").years == (2030,)
    assert parse_cron_fields("0 0 * * ? 2196/2").years == (2196, 2198)
    assert parse_cron_fields("0 0 * * ? *").years == tuple(range(1970, 2200))


@pytest.mark.parametrize(
    ("dom", "attr", "value"),
    [
        ("L", "last_minus", 0),
        ("l", "last_minus", 0),
        ("L-3", "last_minus", 3),
        ("LW", "last_weekday", True),
        ("15W", "nearest_weekday", 15),
        ("1w", "nearest_weekday", 1),
    ],
)
def test_day_of_month_specials(dom: str, attr: str, value: object) -> None:
    fields = parse_cron_fields(f"0 0 {dom} * ? *")
    assert getattr(fields.day_of_month, attr) == value
    assert fields.day_of_week is None


def test_day_of_week_specials() -> None:
    dow = parse_cron_fields("0 0 ? * 6L *").day_of_week
    assert dow is not None and dow.last_of == 6
    dow = parse_cron_fields("0 0 ? * MON#2 *").day_of_week
    assert dow is not None and dow.nth == (2, 2)
    # AWS: a bare L in day-of-week is Saturday.
    dow = parse_cron_fields("0 0 ? * L *").day_of_week
    assert dow is not None and dow.weekdays == frozenset({7})


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("cron(* * * * *)", f"{NEEDS_SIX} 5"),
        (
            "cron(0 0 * * ? * *)",
            f"{NEEDS_SIX} 7",
        ),
        ("cron(61 * * * ? *)", "minutes 61 is out of range 0-59"),
        ("cron(0 24 * * ? *)", "hours 24 is out of range 0-23"),
        ("cron(0 0 32 * ? *)", "day-of-month 32 is out of range 1-31"),
        ("cron(0 0 0 * ? *)", "day-of-month 0 is out of range 1-31"),
        ("cron(0 0 * 13 ? *)", "month 13 is out of range 1-12"),
        ("cron(0 0 ? * 8 *)", "day-of-week 8 is out of range 1-7"),
        ("cron(0 0 ? * 0 *)", "day-of-week 0 is out of range 1-7"),
        ("cron(0 0 * * ? 1969)", "year 1969 is out of range 1970-2199"),
        ("cron(0 0 * * ? 2200)", "year 2200 is out of range 1970-2199"),
        ("cron(0 0 * FOO ? *)", "month value 'FOO' is not a number 1-12 or a name JAN-DEC"),
        ("cron(0 0 ? * FUN *)", "day-of-week value 'FUN' is not a number 1-7 or a name SUN-SAT"),
        ("cron(x 0 * * ? *)", "minutes value 'x' is not a number 0-59"),
        ("cron(0/0 0 * * ? *)", "minutes step 0 must be at least 1"),
        ("cron(0/x 0 * * ? *)", "minutes step 'x' is not a number"),
        # Ranges wrap around in every field but the year, which has no cycle to wrap around.
        ("cron(0 0 * * ? 2030-2026)", "year range 2030-2026 is reversed; a year range cannot wrap"),
        ("cron(0 0 * * ? 2199-1970/5)", "year range 2199-1970 is reversed"),
        ("cron(0 20-2/0 * * ? *)", "hours step 0 must be at least 1"),
        ("cron(0 0 ? * L-2 *)", "day-of-week 'L-2' is not valid; 'L-n' is allowed only in day-of-month"),
        ("cron(0 0 28-3W * ? *)", "day-of-month '28-3W' is not valid"),
        ("cron(1,,2 0 * * ? *)", "minutes '1,,2' has an empty list item"),
        ("cron(0 ? * * ? *)", "hours does not accept '?'"),
        ("cron(0 0 * * * *)", "day-of-month '*' and day-of-week '*' cannot both be set"),
        ("cron(0 0 1 * MON *)", "day-of-month '1' and day-of-week 'MON' cannot both be set"),
        ("cron(0 0 ? * ? *)", "day-of-month and day-of-week cannot both be '?'"),
        ("cron(0 0 L,1 * ? *)", "day-of-month 'L' cannot be combined with other values"),
        ("cron(0 0 32W * ? *)", "day-of-month 32 is out of range 1-31"),
        ("cron(0 0 L-31 * ? *)", "day-of-month offset L-31 is out of range"),
        ("cron(0 0 WL * ? *)", "day-of-month 'WL' is not valid"),
        ("cron(0 0 ? * 2#6 *)", "day-of-week occurrence #6 is out of range 1-5"),
        ("cron(0 0 ? * 2#0 *)", "day-of-week occurrence #0 is out of range 1-5"),
        ("cron(0 0 ? * 9#1 *)", "day-of-week 9 is out of range 1-7"),
        ("cron(0 0 ? * 8L *)", "day-of-week 8 is out of range 1-7"),
        ("cron(0 0 ? * 1#1,2 *)", "day-of-week '#' cannot be combined with other values"),
        ("cron(0 0 ?,1 * ? *)", "day-of-month '?' must stand alone"),
        ("rate(5 minute)", "rate unit 'minute' requires value 1; use 'minutes'"),
        ("rate(1 minutes)", "rate unit 'minutes' requires a value above 1; use 'minute'"),
        ("rate(2 hour)", "rate unit 'hour' requires value 1; use 'hours'"),
        ("rate(1 days)", "rate unit 'days' requires a value above 1; use 'day'"),
        ("rate(0 minutes)", "rate value 0 must be at least 1"),
        ("rate(-5 minutes)", "rate value '-5' is not a whole number"),
        ("rate(1.5 hours)", "rate value '1.5' is not a whole number"),
        ("rate(5 weeks)", "rate unit 'weeks' is not one of"),
        ("rate(5)", "rate needs a value and a unit"),
        ("rate(5 seconds)", "rate of 5 seconds is below the minimum of 10 seconds"),
        ("rate(1 second)", "rate of 1 second is below the minimum of 10 seconds"),
        ("at(2026-01-01 10:00:00)", "at() needs a local time as yyyy-mm-ddThh:mm:ss"),
        ("at(2026-02-30T10:00:00)", "at() time '2026-02-30T10:00:00' is not a valid date and time"),
        ("at(2026-01-01T24:00:00)", "at() time '2026-01-01T24:00:00' is not a valid date and time"),
        ("every(5 minutes)", "schedule expression must be at(...), rate(...) or cron(...)"),
        ("cron 0 0 * * ? *", "schedule expression must be at(...), rate(...) or cron(...)"),
        ("", "schedule expression must be at(...), rate(...) or cron(...)"),
    ],
)
def test_error_messages_name_the_field(expression: str, message: str) -> None:
    with pytest.raises(ScheduleError) as caught:
        parse_schedule(expression)
    assert str(caught.value).startswith(message)


def test_schedule_error_is_a_value_error() -> None:
    assert issubclass(ScheduleError, ValueError)


def test_rate_units_and_seconds_extension() -> None:
    base = datetime(2026, 1, 1, tzinfo=UTC)
    cases = {
        "rate(1 minute)": 60,
        "rate(5 minutes)": 300,
        "rate(1 hour)": 3600,
        "rate(3 hours)": 3 * 3600,
        "rate(1 day)": 86400,
        "rate(2 days)": 2 * 86400,
        "rate(10 seconds)": 10,
        "rate(45 seconds)": 45,
    }
    for expression, seconds in cases.items():
        schedule = parse_schedule(expression)
        first = schedule.next_after(base)
        assert first is not None
        second = schedule.next_after(first)
        assert second is not None and (second - first).total_seconds() == seconds, expression
    assert parse_schedule("rate(1 second)", min_rate_seconds=1).next_after(base) == base + timedelta(
        seconds=1
    )
    with pytest.raises(ScheduleError, match="minimum of 120 seconds"):
        parse_schedule("rate(1 minute)", min_rate_seconds=120)


def test_unknown_zone() -> None:
    with pytest.raises(ScheduleError, match=r"^unknown time zone 'Mars/Base'$"):
        load_zone("Mars/Base")
    for bad in ("", "../etc/passwd", "/abs"):
        with pytest.raises(ScheduleError, match="unknown time zone"):
            parse_schedule("rate(1 day)", bad)
    assert load_zone("Europe/Berlin").key == "Europe/Berlin"


def test_bounds_validation() -> None:
    aware = datetime(2026, 1, 1, tzinfo=UTC)
    with pytest.raises(ScheduleError, match="start must be a timezone-aware datetime"):
        parse_schedule("rate(1 day)", start=datetime(2026, 1, 1))
    with pytest.raises(ScheduleError, match="end must be a timezone-aware datetime"):
        parse_schedule("rate(1 day)", end=datetime(2026, 1, 1))
    with pytest.raises(ScheduleError, match="must be after start"):
        parse_schedule("rate(1 day)", start=aware, end=aware)
    with pytest.raises(ScheduleError, match="must be after start"):
        parse_schedule("rate(1 day)", start=aware, end=aware - timedelta(seconds=1))


def test_schedule_is_immutable_hashable_and_normalised() -> None:
    plus_two = timezone(timedelta(hours=2))
    a = parse_schedule(
        " cron(0 12 * * ? *) ", "Europe/Berlin", start=datetime(2026, 1, 1, 2, tzinfo=plus_two)
    )
    b = parse_schedule("cron(0 12 * * ? *)", "Europe/Berlin", start=datetime(2026, 1, 1, tzinfo=UTC))
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a.expression == "cron(0 12 * * ? *)"
    assert a.timezone == "Europe/Berlin"
    assert a.start == datetime(2026, 1, 1, tzinfo=UTC) and a.start.tzinfo is UTC
    assert a.end is None
    assert a != parse_schedule("cron(0 12 * * ? *)", "Europe/London", start=datetime(2026, 1, 1, tzinfo=UTC))
    with pytest.raises(AttributeError):
        a.expression = "rate(1 day)"  # type: ignore[misc]
    assert not a.is_one_time()
    assert not parse_schedule("rate(1 day)").is_one_time()
    assert parse_schedule("at(2026-01-01T00:00:00)").is_one_time()


def test_start_and_end_round_inward_to_whole_seconds() -> None:
    s = parse_schedule(
        "rate(1 minute)",
        start=datetime(2026, 1, 1, 0, 0, 0, 1, tzinfo=UTC),
        end=datetime(2026, 1, 2, 0, 0, 0, 999999, tzinfo=UTC),
    )
    assert s.start == datetime(2026, 1, 1, 0, 0, 1, tzinfo=UTC)
    assert s.end == datetime(2026, 1, 2, tzinfo=UTC)
