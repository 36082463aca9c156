"""``jobsched next``: output format and error contract, through a local argparse harness."""

from __future__ import annotations

import argparse
import re
from datetime import UTC, datetime

import pytest
from jobsched_tools.cli import cmd_next


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str], str]:
    parser = argparse.ArgumentParser(prog="jobsched")
    cmd_next.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    code = args.func(args)
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err


def test_prints_five_utc_lines_by_default(capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, err = _run(["next", "cron(0 8 ? * MON-FRI *)", "--after", "2026-01-02T00:00:00Z"], capsys)
    assert code == 0 and err == ""
    assert lines == [
        "2026-01-02T08:00:00Z",
        "2026-01-05T08:00:00Z",
        "2026-01-06T08:00:00Z",
        "2026-01-07T08:00:00Z",
        "2026-01-08T08:00:00Z",
    ]


def test_a_zone_shows_the_wall_time_beside_the_utc_instant(capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, err = _run(
        [
            "next",
            "cron(30 1 * * ? *)",
            "--tz",
            "America/New_York",
            "--after",
            "2026-11-01T00:00:00Z",
            "--count",
            "3",
        ],
        capsys,
    )
    assert code == 0 and err == ""
    assert lines == [
        "2026-11-01T05:30:00Z  2026-11-01T01:30:00-04:00 EDT",
        "2026-11-02T06:30:00Z  2026-11-02T01:30:00-05:00 EST",
        "2026-11-03T06:30:00Z  2026-11-03T01:30:00-05:00 EST",
    ]


def test_count_offset_and_naive_after(capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, _ = _run(
        ["next", "rate(1 hour)", "--after", "2026-01-01T01:30:00+01:00", "--count", "2"], capsys
    )
    assert code == 0 and lines == ["2026-01-01T01:00:00Z", "2026-01-01T02:00:00Z"]
    # A naive --after is UTC.
    code, lines, _ = _run(["next", "rate(1 hour)", "--after", "2026-01-01T00:30:00", "--count", "1"], capsys)
    assert code == 0 and lines == ["2026-01-01T01:00:00Z"]


def test_fewer_lines_when_the_schedule_ends(capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, _ = _run(
        ["next", "at(2026-03-08T01:30:00)", "--tz", "America/New_York", "--after", "2026-01-01T00:00:00Z"],
        capsys,
    )
    assert code == 0 and lines == ["2026-03-08T06:30:00Z  2026-03-08T01:30:00-05:00 EST"]
    code, lines, _ = _run(["next", "cron(0 0 1 1 ? 2026)", "--after", "2027-01-01T00:00:00Z"], capsys)
    assert code == 0 and lines == []


def test_default_after_is_now(capsys: pytest.CaptureFixture[str]) -> None:
    before = datetime.now(UTC)
    code, lines, _ = _run(["next", "rate(1 minute)", "--count", "3"], capsys)
    assert code == 0 and len(lines) == 3
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:00Z", line) for line in lines)
    first = datetime.strptime(lines[0], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    assert 0 < (first - before).total_seconds() <= 61


def test_wrapped_ranges_as_an_eventbridge_user_writes_them(capsys: pytest.CaptureFixture[str]) -> None:
    # AWS's own example: Friday evening to 23:30 (Saturday is not MON-FRI), then Monday from 00:00.
    code, lines, err = _run(
        ["next", "cron(0/30 20-2 ? * MON-FRI *)", "--after", "2026-01-02T22:45:00Z", "--count", "4"], capsys
    )
    assert code == 0 and err == ""
    assert lines == [
        "2026-01-02T23:00:00Z",
        "2026-01-02T23:30:00Z",
        "2026-01-05T00:00:00Z",
        "2026-01-05T00:30:00Z",
    ]
    # Weekends at 08:00 in Berlin (UTC+1 in January): Saturday 3rd, Sunday 4th, Saturday 10th.
    code, lines, _ = _run(
        [
            "next",
            "cron(0 8 ? * SAT-SUN *)",
            "--tz",
            "Europe/Berlin",
            "--after",
            "2026-01-02T00:00:00Z",
            "--count",
            "3",
        ],
        capsys,
    )
    assert code == 0
    assert lines == [
        "2026-01-03T07:00:00Z  2026-01-03T08:00:00+01:00 CET",
        "2026-01-04T07:00:00Z  2026-01-04T08:00:00+01:00 CET",
        "2026-01-10T07:00:00Z  2026-01-10T08:00:00+01:00 CET",
    ]


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["next", "cron(0 0 ? * 8 *)"], "day-of-week 8 is out of range 1-7"),
        (["next", "cron(0 0 * * ? 2030-2026)"], "year range 2030-2026 is reversed"),
        (["next", "rate(5 minute)"], "rate unit 'minute' requires value 1"),
        (["next", "rate(1 day)", "--tz", "Mars/Base"], "unknown time zone 'Mars/Base'"),
        (["next", "rate(1 day)", "--after", "yesterday"], "--after 'yesterday' is not an ISO 8601"),
        (["next", "rate(1 day)", "--count", "0"], "--count '0' must be a positive whole number"),
        (["next", "rate(1 day)", "--count", "x"], "--count 'x' must be a positive whole number"),
        (
            ["next", "at(2026-03-08T02:30:00)", "--tz", "America/New_York"],
            "does not exist in America/New_York",
        ),
    ],
)
def test_bad_input_exits_2_with_error_prefix(
    argv: list[str], fragment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, lines, err = _run(argv, capsys)
    assert code == 2
    assert lines == []
    assert err.startswith("error: ") and fragment in err
    assert "Traceback" not in err
