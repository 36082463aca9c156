"""``jobsched next`` says so when a schedule has no (more) occurrences after the instant, on
stderr: stdout keeps its one-instant-per-line contract and the exit status stays 0."""

from __future__ import annotations

import argparse

import pytest
from jobsched_tools.cli import cmd_next


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="jobsched")
    cmd_next.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    code = args.func(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_an_at_in_the_past_says_there_are_no_occurrences(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["next", "at(2020-01-01T00:00:00)", "--after", "2026-12-02T10:00:00Z"], capsys)
    assert (code, out) == (0, "")
    assert err == "no occurrences of at(2020-01-01T00:00:00) after 2026-12-02T10:00:00Z\n"


def test_fewer_than_asked_says_there_are_no_more(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        ["next", "cron(0 12 1 1 ? 2027)", "--after", "2026-06-01T00:00:00+02:00", "--count", "3"], capsys
    )
    assert (code, out) == (0, "2027-01-01T12:00:00Z\n")
    assert err == "no more occurrences of cron(0 12 1 1 ? 2027) after 2027-01-01T12:00:00Z\n"


def test_enough_occurrences_print_nothing_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["next", "rate(1 hour)", "--after", "2026-01-01T00:00:00Z", "--count", "2"], capsys)
    assert (code, out.splitlines(), err) == (0, ["2026-01-01T01:00:00Z", "2026-01-01T02:00:00Z"], "")
