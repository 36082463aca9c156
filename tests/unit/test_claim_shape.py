"""A job's claim protocol follows from its state item and the stack's switch (core/claim_shape.py)."""

from __future__ import annotations

import pytest
from jobsched.core.claim_shape import CLAIM_SHAPE_ATTRIBUTE, ClaimShape, job_shape, stack_shape

LEGACY, SUCCESSOR = ClaimShape.LEGACY, ClaimShape.SUCCESSOR


@pytest.mark.parametrize(
    ("bookkeeping", "shape"),
    [
        (None, LEGACY),
        ({"job_id": "#detector"}, LEGACY),
        ({CLAIM_SHAPE_ATTRIBUTE: "successor"}, SUCCESSOR),
        ({CLAIM_SHAPE_ATTRIBUTE: "legacy"}, LEGACY),
        ({CLAIM_SHAPE_ATTRIBUTE: "a-later-shape"}, LEGACY),
    ],
)
def test_the_stack_switch(bookkeeping: dict[str, str] | None, shape: ClaimShape) -> None:
    assert stack_shape(bookkeeping) is shape


@pytest.mark.parametrize("stack", [LEGACY, SUCCESSOR])
def test_a_state_in_next_run_is_legacy_whatever_the_switch(stack: ClaimShape) -> None:
    assert job_shape({"job_id": "j", "version": 3, "next_run_at": 0, "sched_shard": 1}, stack) is LEGACY
    assert job_shape({"job_id": "j", "version": 3, "sched_shard": 1}, stack) is LEGACY


@pytest.mark.parametrize("stack", [LEGACY, SUCCESSOR])
def test_a_state_with_an_epoch_is_successor_whatever_the_switch(stack: ClaimShape) -> None:
    assert job_shape({"job_id": "j", "version": 4, "epoch": 4}, stack) is SUCCESSOR


@pytest.mark.parametrize("stack", [LEGACY, SUCCESSOR])
def test_a_new_job_or_one_out_of_next_run_follows_the_switch(stack: ClaimShape) -> None:
    assert job_shape(None, stack) is stack
    assert job_shape({"job_id": "j", "version": 2, "status": "paused"}, stack) is stack
