"""The demo ends with one verdict line, PASS or FAIL, and its exit status follows it."""

from __future__ import annotations

import dataclasses

import pytest
from jobsched_tools.local.demo import passed, summary_json, verdict_line
from jobsched_tools.local.measure import Report

GOOD = Report(occurrences_due=28, runs_succeeded=27, runs_skipped=1, crashes_injected=1, crashes_recovered=1)


def test_a_clean_run_passes() -> None:
    assert passed(GOOD)
    assert verdict_line(GOOD) == (
        "demo: PASS - 28 occurrences due, 0 duplicated, 0 lost, 0 unfinished, 1 of 1 killed runs recovered"
    )
    assert summary_json(GOOD, 75)["verdict"] == "PASS"


@pytest.mark.parametrize(
    "change",
    [
        {"duplicate_runs": 1},
        {"lost_occurrences": 1},
        {"runs_unfinished": 1},
        {"ledger_mismatches": 1},
        {"crashes_recovered": 0},  # the killed run never finished
        {"crashes_injected": 0, "crashes_recovered": 0},  # nothing was shown
    ],
)
def test_anything_wrong_fails(change: dict[str, int]) -> None:
    report = dataclasses.replace(GOOD, **change)
    assert not passed(report)
    assert verdict_line(report).startswith("demo: FAIL - ")
    assert summary_json(report, 75)["verdict"] == "FAIL"
