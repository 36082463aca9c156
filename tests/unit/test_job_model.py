"""The job definition at its boundary: lossless item form, readable reasons, a stable digest."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jobsched.core.job import (
    MAX_PAYLOAD_BYTES,
    ActionAfterCompletion,
    InvalidJob,
    JobDefinition,
    Misfire,
    MisfirePolicy,
    OverlapPolicy,
    RetryPolicy,
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


@st.composite
def definitions(draw: st.DrawFn) -> JobDefinition:
    backoff = draw(st.integers(1, 900))
    start = draw(st.none() | st.datetimes(datetime(2020, 1, 1), datetime(2030, 1, 1)))
    end = None
    if start is not None and draw(st.booleans()):
        end = start + timedelta(days=draw(st.integers(1, 400)))
    return JobDefinition(
        job_id=draw(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,20}", fullmatch=True)),
        schedule=draw(
            st.sampled_from(
                ["rate(5 minutes)", "rate(1 hour)", "cron(0 3 * * ? *)", "cron(*/15 9-17 ? * MON-FRI *)"]
            )
        ),
        timezone=draw(st.sampled_from(["UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata"])),
        start=start.replace(tzinfo=UTC) if start else None,
        end=end.replace(tzinfo=UTC) if end else None,
        target=draw(st.from_regex(r"[a-z][a-z0-9_.-]{0,10}", fullmatch=True)),
        payload=draw(st.dictionaries(st.text(max_size=8), json_values, max_size=4)),
        retry=RetryPolicy(
            max_attempts=draw(st.integers(1, 20)),
            backoff_seconds=backoff,
            max_backoff_seconds=draw(st.integers(backoff, 900)),
            jitter=draw(st.booleans()),
        ),
        timeout_seconds=draw(st.integers(1, 840)),
        misfire=Misfire(
            policy=draw(st.sampled_from(list(MisfirePolicy))),
            grace_seconds=draw(st.integers(0, 86_400)),
            max_catchup=draw(st.integers(1, 1000)),
        ),
        overlap=draw(st.sampled_from(list(OverlapPolicy))),
        enabled=draw(st.booleans()),
        description=draw(st.text(max_size=30)),
        action_after_completion=draw(st.sampled_from(list(ActionAfterCompletion))),
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(definitions())
def test_item_round_trip_is_lossless(definition: JobDefinition) -> None:
    item = definition.to_item()
    assert JobDefinition.from_item(item) == definition
    # The item is DynamoDB-friendly: no floats, no datetimes, payload as a JSON string.
    assert isinstance(item["payload"], str)
    assert JobDefinition.from_item(json.loads(json.dumps(item))) == definition
    assert JobDefinition.from_item(item).definition_hash() == definition.definition_hash()


def base_item(**changes: Any) -> dict[str, Any]:
    item: dict[str, Any] = {"job_id": "nightly", "schedule": "cron(0 3 * * ? *)", "target": "log"}
    item.update(changes)
    return item


def reasons_for(item: dict[str, Any]) -> list[str]:
    with pytest.raises(InvalidJob) as caught:
        JobDefinition.from_item(item)
    assert caught.value.reasons, "an invalid job must say why"
    assert str(caught.value) == "; ".join(caught.value.reasons)
    return caught.value.reasons


@pytest.mark.parametrize(
    ("changes", "field", "words"),
    [
        ({"job_id": "bad id!"}, "job_id", "1-128 characters"),
        ({"job_id": "-leading"}, "job_id", "starting with a letter or digit"),
        ({"scheduel": "rate(1 minute)"}, "scheduel", "unknown field"),
        ({"schedule": "cron(61 * * * ? *)"}, "schedule", "schedule"),
        ({"schedule": "every day"}, "schedule", "at(...), rate(...) or cron(...)"),
        ({"schedule": "cron(0 3 * * ? 2030-2026)"}, "schedule", "year range 2030-2026 is reversed"),
        ({"timezone": "Mars/Olympus"}, "timezone", "Mars/Olympus"),
        ({"payload": json.dumps({"blob": "x" * MAX_PAYLOAD_BYTES})}, "payload", "limit"),
        ({"payload": "{not json"}, "payload", "not valid JSON"),
        ({"retry": {"backoff_seconds": 60, "max_backoff_seconds": 30}}, "retry", "max_backoff_seconds"),
        ({"target": "Bad Target"}, "target", "registered handler"),
        ({"timeout_seconds": 10_000}, "timeout_seconds", "840"),
        ({"misfire": {"policy": "sometimes"}}, "misfire.policy", "run_once"),
        ({"start": "2026-01-01T00:00:00"}, "start", "UTC offset"),
        ({"action_after_completion": "remove"}, "action_after_completion", '"none" (keep the job item) or'),
        ({"action_after_completion": "DELETE"}, "action_after_completion", "write it in lowercase"),
        ({"action_after_completion": True}, "action_after_completion", "got a boolean"),
    ],
)
def test_invalid_items_name_the_field(changes: dict[str, Any], field: str, words: str) -> None:
    reasons = reasons_for(base_item(**changes))
    matching = [r for r in reasons if r.startswith(field)]
    assert matching, f"no reason names {field}: {reasons}"
    assert any(words in r for r in matching), reasons


@pytest.mark.parametrize(
    "schedule",
    [
        "cron(0/30 20-2 ? * MON-FRI *)",
        "cron(0 8 ? * SAT-SUN *)",
        "cron(0 0 28-3 NOV-FEB ? *)",
        "cron(50-10 * * * ? *)",
    ],
)
def test_ranges_that_wrap_around_are_valid(schedule: str) -> None:
    definition = JobDefinition.from_item(base_item(schedule=schedule, timezone="America/New_York"))
    assert definition.schedule == schedule


def test_action_after_completion_defaults_to_none_and_keeps_old_digests() -> None:
    """``action_after_completion`` (issue 29): "none" (the default: absent, or null) leaves the
    item form, so the digest of every job written before the field existed, unchanged; "delete"
    is written and changes the digest (an edit of it is a change the registrar applies)."""
    plain = JobDefinition.from_item(base_item())
    assert plain.action_after_completion is ActionAfterCompletion.NONE
    for same in ({"action_after_completion": "none"}, {"action_after_completion": None}):
        assert JobDefinition.from_item(base_item(**same)).definition_hash() == plain.definition_hash()
    deleting = JobDefinition.from_item(base_item(action_after_completion="delete"))
    assert deleting.action_after_completion is ActionAfterCompletion.DELETE
    assert deleting.to_item()["action_after_completion"] == "delete"
    assert deleting.definition_hash() != plain.definition_hash()
    assert JobDefinition.from_item(deleting.to_item()) == deleting


def test_every_problem_is_reported_at_once() -> None:
    reasons = reasons_for(base_item(job_id="bad id!", target="Bad Target", overlap="never"))
    assert {r.split(":", 1)[0] for r in reasons} >= {"job_id", "target", "overlap"}


def test_missing_required_fields_are_named() -> None:
    reasons = reasons_for({"job_id": "x"})
    assert any(r.startswith("schedule") for r in reasons)
    assert any(r.startswith("target") for r in reasons)


def test_scheduler_state_is_ignored_and_decimals_accepted() -> None:
    from decimal import Decimal

    item = base_item(version=Decimal(7), status="active", next_run_at=Decimal(1), timeout_seconds=Decimal(30))
    definition = JobDefinition.from_item(item)
    assert definition.timeout_seconds == 30
    assert isinstance(definition.timeout_seconds, int)


def test_empty_payload_string_is_empty_object() -> None:
    assert JobDefinition.from_item(base_item(payload="")).payload == {}


def test_definition_hash_is_stable_and_sensitive() -> None:
    a = JobDefinition.from_item(base_item(payload='{"b": 1, "a": [1, 2]}'))
    b = JobDefinition.from_item(base_item(payload='{"a":[1,2],"b":1}'))
    assert a.definition_hash() == b.definition_hash()  # canonical JSON: key order and spacing don't count
    assert a.definition_hash() == JobDefinition.from_item(a.to_item()).definition_hash()
    assert len(a.definition_hash()) == 16
    changed = JobDefinition.from_item(base_item(schedule="cron(0 4 * * ? *)"))
    assert changed.definition_hash() != a.definition_hash()
    # Defaults written out or left implicit describe the same job.
    explicit = JobDefinition.from_item(base_item(timezone="UTC", overlap="skip", enabled=True))
    implicit = JobDefinition.from_item(base_item())
    assert explicit.definition_hash() == implicit.definition_hash()
