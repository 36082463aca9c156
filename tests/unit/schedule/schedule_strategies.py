"""Hypothesis strategies that build cron expressions together with their expected meaning.

Each strategy returns the field text and, independently of the engine's parser, the set of
values it denotes, so property tests can check results against an oracle.
"""

from __future__ import annotations

import calendar
import functools
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from hypothesis import strategies as st

MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
WEEKDAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]

ZONES = [
    "UTC",
    "America/New_York",
    "Europe/London",
    "Europe/Berlin",
    "Australia/Sydney",
    "Asia/Kolkata",
    "Australia/Lord_Howe",  # 30-minute DST shift
    "America/Sao_Paulo",  # southern hemisphere, DST abolished in 2019
    "Pacific/Chatham",  # +12:45/+13:45
]


@dataclass(frozen=True)
class Field:
    text: str
    values: frozenset[int]


@dataclass(frozen=True)
class Expr:
    minutes: Field
    hours: Field
    dom: str  # raw text, or "?"
    dow: str
    month: Field
    year: Field

    @property
    def text(self) -> str:
        parts = (self.minutes.text, self.hours.text, self.dom, self.month.text, self.dow, self.year.text)
        return f"cron({' '.join(parts)})"


def _name(value: int, names: list[str] | None, low: int, use_name: bool) -> str:
    return names[value - low] if names is not None and use_name else str(value)


def walk(a: int, b: int, low: int, high: int) -> list[int]:
    """The values of range a-b one by one, going past ``high`` back to ``low`` if b < a."""
    values = [a]
    while values[-1] != b:
        values.append(low if values[-1] == high else values[-1] + 1)
    return values


@st.composite
def numeric_field(
    draw: st.DrawFn,
    low: int,
    high: int,
    names: list[str] | None = None,
    allow_star: bool = True,
    field_high: int | None = None,
    wrap: bool = False,
) -> Field:
    """Values are drawn from low-high; ``field_high`` is the field's true maximum, which "a/s" runs to.

    With ``wrap``, some ranges run backwards (start above end) and wrap around low-high, which
    must then be the whole field.
    """
    kinds = ["star", "single", "list", "range", "step", "star_step", "range_step"]
    if wrap:
        kinds += ["wrap", "wrap_step", "wrap_list"]
    kind = draw(st.sampled_from(kinds))
    if not allow_star and kind in ("star", "star_step"):
        kind = "range"
    use_name = names is not None and draw(st.booleans())

    def show(value: int) -> str:
        return _name(value, names, low, use_name)

    if kind == "star":
        return Field("*", frozenset(range(low, high + 1)))
    if kind == "single":
        v = draw(st.integers(low, high))
        return Field(show(v), frozenset({v}))
    if kind == "list":
        vs = draw(st.lists(st.integers(low, high), min_size=2, max_size=4, unique=True))
        return Field(",".join(show(v) for v in vs), frozenset(vs))
    step = draw(st.integers(1, max(1, (high - low) // 2 + 1)))
    if kind.startswith("wrap"):
        return _wrapped(draw, kind, low, high, step, show)
    if kind == "star_step":
        return Field(f"*/{step}", frozenset(range(low, high + 1, step)))
    a = draw(st.integers(low, high))
    if kind == "step":
        return Field(f"{a}/{step}", frozenset(range(a, (field_high or high) + 1, step)))
    b = draw(st.integers(a, high))
    if kind == "range":
        return Field(f"{show(a)}-{show(b)}", frozenset(range(a, b + 1)))
    return Field(f"{show(a)}-{show(b)}/{step}", frozenset(range(a, b + 1, step)))


def _wrapped(draw: st.DrawFn, kind: str, low: int, high: int, step: int, show: Callable[[int], str]) -> Field:
    """A range a-b with b < a (stepped, or in a list, by ``kind``), with its walked values."""
    a = draw(st.integers(low + 1, high))
    b = draw(st.integers(low, a - 1))
    text = f"{show(a)}-{show(b)}"
    values = walk(a, b, low, high)
    if kind == "wrap_step":
        text += f"/{step}"
        values = values[::step]
    if kind == "wrap_list":
        extra = draw(st.integers(low, high))
        text += f",{show(extra)}"
        values.append(extra)
    return Field(text, frozenset(values))


@st.composite
def dom_text(draw: st.DrawFn, special: bool = True, wrap: bool = False) -> str:
    kinds = ["plain"] * 3
    if special:
        kinds += ["L", "L-n", "LW", "nW"]
    kind = draw(st.sampled_from(kinds))
    if kind == "L":
        return "L"
    if kind == "L-n":
        return f"L-{draw(st.integers(0, 5))}"
    if kind == "LW":
        return "LW"
    if kind == "nW":
        return f"{draw(st.integers(1, 31))}W"
    return draw(numeric_field(1, 31, wrap=wrap)).text


@st.composite
def dow_text(draw: st.DrawFn, special: bool = True, wrap: bool = False) -> str:
    kinds = ["plain"] * 3
    if special:
        kinds += ["L", "nL", "hash"]
    kind = draw(st.sampled_from(kinds))
    if kind == "L":
        return "L"
    if kind == "nL":
        return f"{draw(st.integers(1, 7))}L"
    if kind == "hash":
        return f"{draw(st.sampled_from([str(d) for d in range(1, 8)] + WEEKDAYS))}#{draw(st.integers(1, 5))}"
    return draw(numeric_field(1, 7, WEEKDAYS, wrap=wrap)).text


def year_field(min_year: int = 2020, max_year: int = 2035) -> st.SearchStrategy[Field]:
    star = st.just(Field("*", frozenset(range(1970, 2200))))
    ranged = numeric_field(min_year, max_year, allow_star=False, field_high=2199)
    return st.one_of(star, star, ranged)


@st.composite
def cron_expr(draw: st.DrawFn, special: bool = True, years: bool = True, wrap: bool = False) -> Expr:
    """A cron expression; ``wrap`` adds ranges that wrap around in every field but the year."""
    minutes = draw(numeric_field(0, 59, wrap=wrap))
    hours = draw(numeric_field(0, 23, wrap=wrap))
    month = draw(numeric_field(1, 12, MONTHS, wrap=wrap))
    year = draw(year_field()) if years else Field("*", frozenset(range(1970, 2200)))
    if draw(st.booleans()):
        dom, dow = draw(dom_text(special, wrap)), "?"
    else:
        dom, dow = "?", draw(dow_text(special, wrap))
    return Expr(minutes, hours, dom, dow, month, year)


# ---- independent oracle for the day fields -------------------------------------------------


def aws_weekday(d: date) -> int:
    return d.isoweekday() % 7 + 1  # isoweekday: Mon=1..Sun=7 -> AWS Sun=1..Sat=7


def plain_values(text: str, low: int, high: int, names: list[str] | None) -> set[int]:
    def value(token: str) -> int:
        if names is not None and token.upper() in names:
            return names.index(token.upper()) + low
        return int(token)

    out: set[int] = set()
    for item in text.split(","):
        rng, _, step_text = item.partition("/")
        step = int(step_text) if step_text else 1
        if rng == "*":
            a, b = low, high
        elif "-" in rng:
            x, y = rng.split("-")
            # A backwards range wraps past the field's maximum (day-of-month after 31).
            out |= set(walk(value(x), value(y), low, high)[::step])
            continue
        else:
            a = value(rng)
            b = high if step_text else a
        out |= set(range(a, b + 1, step))
    return out


def day_matches(expr: Expr, d: date) -> bool:
    return d.day in month_days(expr.dom, expr.dow, d.year, d.month)


@functools.lru_cache(maxsize=65536)
def month_days(dom: str, dow: str, year: int, month: int) -> frozenset[int]:
    """Days of the month matching the day fields, by brute force over every day."""
    length = calendar.monthrange(year, month)[1]
    days = [date(year, month, n) for n in range(1, length + 1)]
    weekdays = {n: aws_weekday(d) for n, d in enumerate(days, start=1)}
    business = [n for n in weekdays if weekdays[n] not in (1, 7)]
    if dom != "?":
        if dom == "L":
            return frozenset({length})
        if dom.startswith("L-"):
            return frozenset({length - int(dom[2:])})
        if dom == "LW":
            return frozenset({max(business)})
        if dom.endswith("W"):
            target = int(dom[:-1])
            if target > length:
                return frozenset()
            # The business day of this month closest to the target (ties cannot happen).
            return frozenset({min(business, key=lambda n: abs(n - target))})
        return frozenset(plain_values(dom, 1, 31, None) & set(weekdays))
    if dow == "L":
        return frozenset(n for n in weekdays if weekdays[n] == 7)
    if "#" in dow:
        day_text, nth = dow.split("#")
        target = plain_values(day_text, 1, 7, WEEKDAYS).pop()
        return frozenset(n for n in weekdays if weekdays[n] == target and (n - 1) // 7 + 1 == int(nth))
    if dow.endswith("L"):
        return frozenset(n for n in weekdays if weekdays[n] == int(dow[:-1]) and n + 7 > length)
    allowed = plain_values(dow, 1, 7, WEEKDAYS)
    return frozenset(n for n in weekdays if weekdays[n] in allowed)


def wall_matches(expr: Expr, wall: datetime) -> bool:
    return (
        wall.minute in expr.minutes.values
        and wall.hour in expr.hours.values
        and wall.month in expr.month.values
        and wall.year in expr.year.values
        and day_matches(expr, wall.date())
    )


def first_instant(wall: datetime, zone: ZoneInfo) -> datetime | None:
    """The instant EventBridge would run naive ``wall`` at, or None inside a DST gap."""
    instant = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    return instant if instant.astimezone(zone).replace(tzinfo=None) == wall else None


def missed_between(
    expr: Expr, zone: ZoneInfo, low: datetime, high: datetime, max_days: int = 400
) -> list[datetime]:
    """Matching instants strictly inside (low, high), by brute force over local wall times.

    Scans at most ``max_days`` days from each end, which covers every gap the tests produce
    except multi-year ones, whose middle is left unchecked. Only wall times within a few
    hours of the window are converted: no zone here shifts by more than that.
    """
    margin = timedelta(hours=3)
    low_wall = low.astimezone(zone).replace(tzinfo=None) - margin
    high_wall = high.astimezone(zone).replace(tzinfo=None) + margin
    first, last = low_wall.date(), high_wall.date()
    span = (last - first).days
    days = {first + timedelta(days=i) for i in range(min(span, max_days) + 1)}
    if span > max_days:
        days |= {last - timedelta(days=i) for i in range(max_days)}
    found: list[datetime] = []
    for day in sorted(days):
        if day.year not in expr.year.values or day.month not in expr.month.values:
            continue
        if not day_matches(expr, day):
            continue
        for hour in sorted(expr.hours.values):
            hour_start = datetime(day.year, day.month, day.day, hour)
            if hour_start + timedelta(hours=1) < low_wall or hour_start > high_wall:
                continue
            for minute in sorted(expr.minutes.values):
                instant = first_instant(hour_start.replace(minute=minute), zone)
                if instant is not None and low < instant < high:
                    found.append(instant)
    return found
