"""Parse the six fields of an AWS cron expression into explicit value sets.

Parsing is separate from evaluation so that every syntax error is reported when a
schedule is created, naming the field, instead of surfacing at fire time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import ScheduleError, clip

FIELD_NAMES = ("minutes", "hours", "day-of-month", "month", "day-of-week", "year")

MONTH_NAMES = {
    name: number
    for number, name in enumerate(
        ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"), start=1
    )
}
# AWS numbers weekdays 1=SUN..7=SAT (Quartz style), not Unix's 0=SUN..6=SAT.
WEEKDAY_NAMES = {
    name: number for number, name in enumerate(("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"), start=1)
}

MIN_YEAR = 1970
MAX_YEAR = 2199


@dataclass(frozen=True)
class _Field:
    name: str
    low: int
    high: int
    names: dict[str, int] | None = None


_MINUTES = _Field("minutes", 0, 59)
_HOURS = _Field("hours", 0, 23)
_DOM = _Field("day-of-month", 1, 31)
_MONTH = _Field("month", 1, 12, MONTH_NAMES)
_DOW = _Field("day-of-week", 1, 7, WEEKDAY_NAMES)
_YEAR = _Field("year", MIN_YEAR, MAX_YEAR)


@dataclass(frozen=True)
class DayOfMonthRule:
    """Day-of-month constraint. Exactly one attribute is non-empty/true."""

    days: frozenset[int] = frozenset()
    last_minus: int | None = None  # "L" is last_minus=0, "L-3" is 3
    nearest_weekday: int | None = None  # "15W"
    last_weekday: bool = False  # "LW"


@dataclass(frozen=True)
class DayOfWeekRule:
    """Day-of-week constraint (weekdays 1=SUN..7=SAT). Exactly one attribute is set."""

    weekdays: frozenset[int] = frozenset()
    last_of: int | None = None  # "6L": last Friday of the month
    nth: tuple[int, int] | None = None  # "2#1": (weekday, occurrence) first Monday


@dataclass(frozen=True)
class CronFields:
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    months: tuple[int, ...]
    years: tuple[int, ...]
    # Exactly one of these is None: that field was '?'.
    day_of_month: DayOfMonthRule | None
    day_of_week: DayOfWeekRule | None


def parse_cron_fields(body: str) -> CronFields:
    """Parse the text between ``cron(`` and ``)``."""
    parts = body.split()
    if len(parts) != 6:
        raise ScheduleError(f"cron needs 6 fields ({' '.join(FIELD_NAMES)}), got {len(parts)}")
    minutes, hours, dom, month, dow, year = parts
    dom_is_any = dom == "?"
    dow_is_any = dow == "?"
    if dom_is_any and dow_is_any:
        raise ScheduleError("day-of-month and day-of-week cannot both be '?'; exactly one must be '?'")
    if not dom_is_any and not dow_is_any:
        raise ScheduleError(
            f"day-of-month {dom!r} and day-of-week {dow!r} cannot both be set; "
            "exactly one of them must be '?'"
        )
    return CronFields(
        minutes=_sorted(_parse_list(minutes, _MINUTES)),
        hours=_sorted(_parse_list(hours, _HOURS)),
        months=_sorted(_parse_list(month, _MONTH)),
        years=_sorted(_parse_list(year, _YEAR)),
        day_of_month=None if dom_is_any else _parse_day_of_month(dom),
        day_of_week=None if dow_is_any else _parse_day_of_week(dow),
    )


def _sorted(values: set[int]) -> tuple[int, ...]:
    return tuple(sorted(values))


def _parse_list(text: str, field: _Field) -> set[int]:
    if "?" in text:
        raise ScheduleError(f"{field.name} does not accept '?' (only day-of-month and day-of-week do)")
    values: set[int] = set()
    for item in text.split(","):
        if not item:
            raise ScheduleError(f"{field.name} {text!r} has an empty list item")
        values |= _parse_item(item, field)
    return values


def _parse_item(item: str, field: _Field) -> set[int]:
    range_part, slash, step_text = item.partition("/")
    step = 1
    if slash:
        step = _parse_number(step_text, field, what="step")
        if step < 1:
            raise ScheduleError(f"{field.name} step {step} must be at least 1")
    if range_part == "*":
        low, high = field.low, field.high
    else:
        start_text, dash, end_text = range_part.partition("-")
        low = _parse_value(start_text, field)
        if dash:
            high = _parse_value(end_text, field)
            if high < low:
                return _wrapped_range(low, high, step, field, range_part)
        else:
            # "5/15" means from 5 to the field's maximum every 15, as in AWS/Quartz.
            high = field.high if slash else low
    return set(range(low, high + 1, step))


def _wrapped_range(start: int, end: int, step: int, field: _Field, text: str) -> set[int]:
    """A range whose start exceeds its end: start to the field's maximum, then its minimum to end.

    AWS documents it by example (``cron(0/30 20-2 ? * MON-FRI *)`` runs from 22:00 to 02:00).
    A step counts along the wrapped sequence (``20-2/2`` is 20, 22, 0, 2), and day-of-month
    wraps after 31 whatever the month's length, as Quartz does; the evaluator then keeps only
    the days the month has. Years have no cycle to wrap around, so a reversed year range is
    an error.
    """
    if field is _YEAR:
        raise ScheduleError(
            f"year range {text} is reversed; a year range cannot wrap around, "
            "so the start must not exceed the end"
        )
    span = field.high - field.low + 1
    # Walk start..end+span (end + span is end, one cycle later) and fold each value back.
    return {field.low + (value - field.low) % span for value in range(start, end + span + 1, step)}


# Every number in a cron field fits in 4 digits; a longer text (leading zeros aside) is out of
# range whatever the field, and int() of thousands of digits is slow, or refused past 4300.
_MAX_DIGITS = 9


def _small_int(text: str) -> int:
    """``text`` (ASCII digits) as an int, or a value above every field's range if it is long."""
    digits = text.lstrip("0") or "0"
    return int(digits) if len(digits) <= _MAX_DIGITS else 10**_MAX_DIGITS


def _parse_number(text: str, field: _Field, what: str) -> int:
    if not text.isascii() or not text.isdigit():
        raise ScheduleError(f"{field.name} {what} {text!r} is not a number")
    return _small_int(text)


def _parse_value(text: str, field: _Field) -> int:
    if field.names is not None and text.upper() in field.names:
        return field.names[text.upper()]
    if not text.isascii() or not text.isdigit():
        names = ""
        if field.names is not None:
            keys = list(field.names)
            names = f" or a name {keys[0]}-{keys[-1]}"
        raise ScheduleError(f"{field.name} value {text!r} is not a number {field.low}-{field.high}{names}")
    value = _small_int(text)
    if not field.low <= value <= field.high:
        shown = value if value < 10**_MAX_DIGITS else clip(text, 12)
        raise ScheduleError(f"{field.name} {shown} is out of range {field.low}-{field.high}")
    return value


_LAST_MINUS = re.compile(r"L-(\d+)")
_NEAREST_WEEKDAY = re.compile(r"(\d+)W")


def _reject_in_list(text: str, token: str, field: _Field) -> None:
    if "," in text:
        raise ScheduleError(
            f"{field.name} {token!r} cannot be combined with other values in a list: {text!r}"
        )


def _parse_day_of_month(text: str) -> DayOfMonthRule:
    upper = text.upper()
    if "?" in text:
        raise ScheduleError(f"day-of-month '?' must stand alone, got {text!r}")
    if "L" in upper or "W" in upper:
        _reject_in_list(text, "L" if "L" in upper else "W", _DOM)
        if upper == "L":
            return DayOfMonthRule(last_minus=0)
        if upper == "LW":
            return DayOfMonthRule(last_weekday=True)
        if match := _LAST_MINUS.fullmatch(upper):
            offset = _small_int(match.group(1))
            if offset > 30:
                raise ScheduleError(f"day-of-month offset L-{offset} is out of range L-0 to L-30")
            return DayOfMonthRule(last_minus=offset)
        if match := _NEAREST_WEEKDAY.fullmatch(upper):
            return DayOfMonthRule(nearest_weekday=_parse_value(match.group(1), _DOM))
        raise ScheduleError(
            f"day-of-month {text!r} is not valid; L and W are allowed only as 'L', 'L-n', 'LW' or 'nW'"
        )
    return DayOfMonthRule(days=frozenset(_parse_list(text, _DOM)))


def _parse_day_of_week(text: str) -> DayOfWeekRule:
    upper = text.upper()
    if "?" in text:
        raise ScheduleError(f"day-of-week '?' must stand alone, got {text!r}")
    if "#" in text:
        _reject_in_list(text, "#", _DOW)
        day_text, _, nth_text = text.partition("#")
        weekday = _parse_value(day_text, _DOW)
        nth = _parse_number(nth_text, _DOW, what="occurrence")
        if not 1 <= nth <= 5:
            raise ScheduleError(f"day-of-week occurrence #{nth} is out of range 1-5")
        return DayOfWeekRule(nth=(weekday, nth))
    if upper.startswith("L-"):
        # AWS documents L-n for day-of-month only; in day-of-week it has no meaning to guess.
        raise ScheduleError(
            f"day-of-week {text!r} is not valid; 'L-n' is allowed only in day-of-month "
            "(in day-of-week, 'nL' is the last day n of the month)"
        )
    # Names contain no "L" except when written as the suffix ("FRIL" is unusual but unambiguous).
    if upper.endswith("L"):
        _reject_in_list(text, "L", _DOW)
        if upper == "L":
            # A bare L in day-of-week means Saturday (7), as AWS documents.
            return DayOfWeekRule(weekdays=frozenset({7}))
        return DayOfWeekRule(last_of=_parse_value(text[:-1], _DOW))
    return DayOfWeekRule(weekdays=frozenset(_parse_list(text, _DOW)))
