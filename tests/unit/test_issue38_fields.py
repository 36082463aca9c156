"""Issue 38's job fields: ``max_event_age_seconds`` (EventBridge's MaximumEventAgeInSeconds bounds,
60 s to 24 h) and ``dead_letter_queue_arn`` (an SQS queue's ARN), validated at the job boundary,
written into the item only when set (a job without them keeps its digest), and the pure retry
rule for the age."""

from __future__ import annotations

import pytest
from jobsched.core.job import InvalidJob, JobDefinition
from jobsched.core.policies import past_event_age

BASE = {"job_id": "j", "schedule": "rate(1 minute)", "target": "log"}


def test_a_job_without_the_fields_keeps_its_item_and_digest() -> None:
    plain = JobDefinition.model_validate(BASE)
    assert "max_event_age_seconds" not in plain.to_item() and "dead_letter_queue_arn" not in plain.to_item()
    # The digest this definition had before the fields existed (core/job.py at commit a24b8b2): a
    # changed digest would make the registrar see every deployed job as edited.
    assert plain.definition_hash() == "365227b07ce46de1"
    with_fields = JobDefinition.model_validate(
        {
            **BASE,
            "max_event_age_seconds": 600,
            "dead_letter_queue_arn": "arn:aws:sqs:us-east-1:123456789012:d",
        }
    )
    assert JobDefinition.from_item(with_fields.to_item()) == with_fields
    assert with_fields.definition_hash() != plain.definition_hash()


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("max_event_age_seconds", 59, "max_event_age_seconds: Input should be greater than or equal to 60"),
        (
            "max_event_age_seconds",
            86_401,
            "max_event_age_seconds: Input should be less than or equal to 86400",
        ),
        (
            "dead_letter_queue_arn",
            "https://sqs.us-east-1.amazonaws.com/123456789012/d",
            "dead_letter_queue_arn",
        ),
        ("dead_letter_queue_arn", "arn:aws:sns:us-east-1:123456789012:t", "dead_letter_queue_arn"),
    ],
)
def test_out_of_range_values_make_the_job_invalid_with_a_reason(
    field: str, value: object, reason: str
) -> None:
    with pytest.raises(InvalidJob) as refused:
        JobDefinition.from_item({**BASE, field: value})
    assert any(r.startswith(reason) for r in refused.value.reasons), refused.value.reasons


def test_a_retry_may_start_up_to_the_limit_and_not_after() -> None:
    assert past_event_age(None, 0, 10**12) is None  # no limit
    assert past_event_age(60, None, 10**12) is None  # a backfill: not limited
    assert past_event_age(60, 1_000, 61_000) is None  # exactly at the limit
    reason = past_event_age(60, 1_000, 61_001)
    assert reason is not None and reason.startswith("maximum event age reached")
