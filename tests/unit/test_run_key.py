"""The runs table's key follows from the run id (core/run.py run_key): every run id is
``<job_id>@...`` and a job id cannot contain ``@``."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jobsched.core.job import JOB_ID_PATTERN
from jobsched.core.run import manual_run_id, run_id_for, run_key

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
