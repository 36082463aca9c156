"""Differential tests against croniter (five-field Unix cron) and pyawscron (AWS syntax, UTC).

Both libraries are only trusted where the shared README says they agree with EventBridge:
croniter in UTC and in zones with no DST change, pyawscron in UTC.
"""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from croniter import CroniterBadDateError, croniter
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jobsched.core.schedule import parse_schedule
from pyawscron import AWSCron
from schedule_strategies import WEEKDAYS, Expr, cron_expr, plain_values

N = 20
FAR = datetime(2300, 1, 1, tzinfo=UTC)
# Zones that had no offset change in the years the instants are drawn from.
NO_DST_ZONES = ["UTC", "Asia/Kolkata", "Asia/Tokyo", "America/Phoenix", "Africa/Nairobi"]

_instants = st.datetimes(min_value=datetime(2020, 1, 1), max_value=datetime(2030, 1, 1))
_settings = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _listed(values: set[int] | frozenset[int], shift: int = 0) -> str:
    return ",".join(str(v - shift) for v in sorted(values))


def _unix(expr: Expr) -> str:
    """The same schedule in five-field Unix cron, spelled as explicit lists.

    Explicit lists keep croniter's own quirks out of the comparison (it misreads "0-0", for
    one); the property tests already check that our parser derives these sets from the text.
    With '?' in one day field the other alone decides, which Unix cron's '*' also means.
    Unix numbers weekdays 0-6 from Sunday, AWS 1-7.
    """
    dom = "*" if expr.dom == "?" else _listed(plain_values(expr.dom, 1, 31, None))
    dow = "*" if expr.dow == "?" else _listed(plain_values(expr.dow, 1, 7, WEEKDAYS), shift=1)
    minutes, hours, months = (_listed(f.values) for f in (expr.minutes, expr.hours, expr.month))
    return f"{minutes} {hours} {dom} {months} {dow}"


@_settings
@given(expr=cron_expr(special=False, years=False), zone=st.sampled_from(NO_DST_ZONES), naive=_instants)
def test_matches_croniter_where_it_is_right(expr: Expr, zone: str, naive: datetime) -> None:
    after = naive.replace(tzinfo=UTC)
    ours = list(parse_schedule(expr.text, zone).occurrences(after, FAR, limit=N))
    iterator = croniter(_unix(expr), after.astimezone(ZoneInfo(zone)))
    if not ours:
        # Only a day that no month in the set has (e.g. 30 in February) never fires.
        with pytest.raises(CroniterBadDateError):
            iterator.get_next(datetime)
        return
    theirs = [iterator.get_next(datetime).astimezone(UTC) for _ in range(N)]
    assert ours == theirs


@st.composite
def _wrapped_pair(draw: st.DrawFn) -> tuple[str, str]:
    """The same schedule as AWS cron and as Unix cron, each field '*' or a range that wraps.

    No steps: croniter miscounts some stepped wraps (minutes 50-10/15 gives :06 where Quartz
    gives :05; months 10-3/2 gives March where Quartz gives February). The property tests
    check stepped wraps against the oracle instead.
    """

    def part(low: int, high: int) -> tuple[int, int] | None:
        if draw(st.booleans()):
            return None
        start = draw(st.integers(low + 1, high))
        return start, draw(st.integers(low, start - 1))

    def text(value: tuple[int, int] | None, shift: int = 0) -> str:
        return "*" if value is None else f"{value[0] - shift}-{value[1] - shift}"

    minutes, hours, month = part(0, 59), part(0, 23), part(1, 12)
    common = f"{text(minutes)} {text(hours)}"
    if draw(st.booleans()):
        dom = part(1, 31)
        return f"{common} {text(dom)} {text(month)} ? *", f"{common} {text(dom)} {text(month)} *"
    dow = part(1, 7)
    return f"{common} ? {text(month)} {text(dow)} *", f"{common} * {text(month)} {text(dow, shift=1)}"


@_settings
@given(pair=_wrapped_pair(), zone=st.sampled_from(NO_DST_ZONES), naive=_instants)
def test_wrapped_ranges_match_croniter(pair: tuple[str, str], zone: str, naive: datetime) -> None:
    """croniter parses a wrapped range itself here, so the wrap is checked against a peer's."""
    aws, unix = pair
    after = naive.replace(tzinfo=UTC)
    ours = list(parse_schedule(f"cron({aws})", zone).occurrences(after, FAR, limit=N))
    iterator = croniter(unix, after.astimezone(ZoneInfo(zone)))
    theirs = [iterator.get_next(datetime).astimezone(UTC) for _ in range(N)]
    assert ours == theirs


def _pyawscron_next(body: str, after: datetime, n: int) -> list[datetime]:
    """Up to n occurrences from pyawscron, stopping where it crashes or runs out.

    pyawscron raises (rather than returning None) on some valid input, e.g. Feb 29 or a
    schedule whose years are exhausted, so its answer is only trusted up to that point.
    """
    try:
        cron = AWSCron(body)
    except Exception:  # syntax it does not know, e.g. "LW"
        return []
    found: list[datetime] = []
    current = after
    for _ in range(n):
        try:
            nxt = cron.occurrence(current).next()
        except Exception:  # a crash ends the trusted prefix
            break
        if nxt is None:
            break
        found.append(nxt.astimezone(UTC))
        current = nxt
    return found


@_settings
@given(expr=cron_expr(special=True, years=True), naive=_instants)
def test_matches_pyawscron_in_utc(expr: Expr, naive: datetime) -> None:
    after = naive.replace(tzinfo=UTC)
    body = expr.text.removeprefix("cron(").removesuffix(")")
    theirs = _pyawscron_next(body, after, N)
    ours = list(parse_schedule(expr.text).occurrences(after, FAR, limit=N))
    assert ours[: len(theirs)] == theirs


@pytest.mark.parametrize(
    "body",
    [
        "0/15 * ? * MON-FRI *",
        "0 12 L * ? *",
        "0 8 ? * 6L *",
        "0 8 ? * 2#3 *",
        "0 8 15W * ? *",
        "0 8 1W * ? *",
        "30 4 L-2 * ? 2025-2030",
        "0 0 ? JAN,JUL SUN 2026-2028",
    ],
)
def test_known_expressions_match_pyawscron(body: str) -> None:
    after = datetime(2025, 1, 1, tzinfo=UTC)
    theirs = _pyawscron_next(body, after, N)
    ours = list(parse_schedule(f"cron({body})").occurrences(after, FAR, limit=N))
    assert ours == theirs
