"""The runs table's key follows from the run id (core/run.py run_key): every run id is
``<job_id>@...`` and a job id cannot contain ``@``."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jobsched.core.job import JOB_ID_PATTERN
from jobsched.core.run import RunIdParts, end_run_id, manual_run_id, parse_run_id, run_id_for, run_key

job_ids = st.from_regex(re.compile(JOB_ID_PATTERN), fullmatch=True)


@given(job_id=job_ids, at=st.integers(0, 4_102_444_800_000), request_id=st.text(min_size=1, max_size=20))
def test_every_run_id_keys_its_jobs_partition(job_id: str, at: int, request_id: str) -> None:
    for run_id in (run_id_for(job_id, at), manual_run_id(job_id, request_id)):
        assert run_key(run_id) == {"job_id": job_id, "run_id": run_id}


def test_a_job_id_cannot_hold_the_separator() -> None:
    assert "@" not in JOB_ID_PATTERN


@pytest.mark.parametrize("not_a_run_id", ["", "r1", "@2026-01-01T00:00:00Z"])
def test_an_id_without_a_job_is_rejected(not_a_run_id: str) -> None:
    with pytest.raises(ValueError):
        run_key(not_a_run_id)


# The successor claim's ids (issue 37, docs/proposals/successor-claim-build.md §0).
AT = 1_700_000_000_000  # 2023-11-14T22:13:20Z


@pytest.mark.parametrize("at", [AT, AT + 1, AT + 999, 0])
def test_epoch_ids_parse_back_to_their_instant_and_epoch(at: int) -> None:
    for epoch in (1, 9, 10, 12345):
        parts = parse_run_id(run_id_for("job-1", at, epoch))
        assert parts == RunIdParts("job-1", "timed", at, epoch)


def test_an_id_without_an_epoch_reads_as_epoch_0() -> None:
    assert run_id_for("j", AT) == "j@2023-11-14T22:13:20Z"
    assert parse_run_id(run_id_for("j", AT)) == RunIdParts("j", "timed", AT, 0)


def test_manual_and_end_ids() -> None:
    assert parse_run_id(manual_run_id("j", "req#1@x")) == RunIdParts("j", "manual", None, 0, "req#1@x")
    end = end_run_id("j", AT, 3)
    assert end == "j@end:2023-11-14T22:13:20Z#3"
    assert parse_run_id(end) == RunIdParts("j", "end", AT, 3)


def test_epochs_sort_as_text_within_an_instant_so_readers_parse_them() -> None:
    ids = sorted([run_id_for("j", AT, 9), run_id_for("j", AT, 10), run_id_for("j", AT + 1000, 1)])
    assert [parse_run_id(i).epoch for i in ids] == [10, 9, 1]  # "#10" < "#9" as text
    assert ids[-1] == run_id_for("j", AT + 1000, 1)  # instants still sort in order
    assert run_id_for("j", AT) < run_id_for("j", AT, 1)  # a legacy id just before its epochs


@pytest.mark.parametrize(
    "bad",
    [
        "j@",
        "j@not-a-time",
        "j@2023-11-14T22:13:20Z#0",
        "j@2023-11-14T22:13:20Z#x",
        "j@end:2023-11-14T22:13:20Z",
        "nojob",
    ],
)
def test_what_is_not_a_run_id_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="not a"):
        parse_run_id(bad)


@given(job_id=job_ids, at=st.integers(0, 4_102_444_800_000), epoch=st.integers(1, 10**9))
def test_every_timed_id_parses_back(job_id: str, at: int, epoch: int) -> None:
    assert parse_run_id(run_id_for(job_id, at, epoch)) == RunIdParts(job_id, "timed", at, epoch)
    assert parse_run_id(run_id_for(job_id, at)) == RunIdParts(job_id, "timed", at, 0)
    assert parse_run_id(end_run_id(job_id, at, epoch)) == RunIdParts(job_id, "end", at, epoch)
