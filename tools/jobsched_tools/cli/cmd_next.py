"""``jobsched next``: print the next occurrences of a schedule expression.

Other tools parse this output, so the format is a contract: one occurrence per line, starting
with its UTC instant as ``YYYY-MM-DDTHH:MM:SSZ``; with ``--tz`` other than UTC, two spaces and
the wall time in that zone follow, as ISO 8601 with its offset and the zone's abbreviation
(``2026-11-01T05:30:00Z  2026-11-01T01:30:00-04:00 EDT``), so the first field is still the
instant. On bad input, exit status 2 and a stderr line starting ``error:``. When the schedule
has fewer occurrences left than asked for (an ``at`` in the past, a ``cron`` whose years are
over), stderr says so and the exit status is still 0.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from jobsched.core.schedule import ScheduleError, parse_schedule

DEFAULT_COUNT = 5


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "next",
        help="print the next occurrences of a schedule expression",
        description="Print up to COUNT occurrences strictly after --after, one per line in UTC.",
    )
    parser.add_argument("expression", metavar="EXPR", help="at(...), rate(...) or cron(...)")
    parser.add_argument("--tz", default="UTC", metavar="ZONE", help="IANA time zone (default UTC)")
    # Parsed in run() rather than by argparse so bad values get our "error:" contract.
    parser.add_argument(
        "--after",
        metavar="ISO8601",
        help="instant to start after; offset or Z optional, naive means UTC (default: now)",
    )
    parser.add_argument(
        "--count", default=str(DEFAULT_COUNT), metavar="N", help=f"how many (default {DEFAULT_COUNT})"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        count = _parse_count(args.count)
        after = _parse_after(args.after)
        schedule = parse_schedule(args.expression, timezone=args.tz)
    except ScheduleError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    zone = None if args.tz == "UTC" else ZoneInfo(args.tz)
    current = after
    printed = 0
    for _ in range(count):
        found = schedule.next_after(current)
        if found is None:
            break
        print(_line(found, zone))
        printed += 1
        current = found
    if printed < count:
        instant = current.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        what = "no occurrences" if printed == 0 else "no more occurrences"
        print(f"{what} of {args.expression} after {instant}", file=sys.stderr)
    return 0


def _line(instant: datetime, zone: ZoneInfo | None) -> str:
    utc = instant.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if zone is None:
        return utc
    local = instant.astimezone(zone)
    return f"{utc}  {local.isoformat()} {local.tzname()}"


def _parse_count(text: str) -> int:
    if not text.isascii() or not text.isdigit() or int(text) < 1:
        raise ScheduleError(f"--count {text!r} must be a positive whole number")
    return int(text)


def _parse_after(text: str | None) -> datetime:
    if text is None:
        # The CLI is an edge: reading the clock here keeps the core clock-free.
        return datetime.now(UTC)
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise ScheduleError(f"--after {text!r} is not an ISO 8601 date-time") from None
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value
