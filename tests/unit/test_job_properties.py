"""The job item boundary is total: any item DynamoDB can hold, in either shape the services read,
becomes a JobDefinition or an InvalidJob with bounded reasons, and nothing else."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from ddb_items import JSON_VALUES, NAMES, VALUES, boto3_shape, stream_shape, to_wire
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jobsched.core.job import (
    DEFINITION_FIELDS,
    MAX_REASON_CHARS,
    MAX_REASONS,
    STATE_FIELDS,
    InvalidJob,
    JobDefinition,
    definition_digest,
)
from jobsched.core.schedule import HORIZON_END

# Plausible values per field, so that a good share of the items drawn is valid.
_PLAUSIBLE: dict[str, st.SearchStrategy[Any]] = {
    "job_id": st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,20}", fullmatch=True),
    "schedule": st.sampled_from(
        [
            "rate(5 minutes)",
            "rate(36500 days)",
            "cron(0 3 * * ? *)",
            "cron(59 23 31 12 ? 2199)",
            "at(2199-12-31T23:59:59)",
        ]
    ),
    "timezone": st.sampled_from(["UTC", "Europe/Berlin", "Etc/GMT+12", "Etc/GMT-14"]),
    "start": st.sampled_from(["2026-01-01T00:00:00Z", "1970-01-01T00:00:00+14:00", "2199-12-31T12:00:00Z"]),
    "end": st.sampled_from(["9999-12-31T23:59:59Z", "2027-01-01T00:00:00-05:00"]),
    "target": st.from_regex(r"[a-z][a-z0-9_.-]{0,10}", fullmatch=True),
    "payload": JSON_VALUES.map(lambda v: json.dumps({"v": v}))
    | st.dictionaries(st.text(max_size=6), VALUES, max_size=3),
    "retry": st.fixed_dictionaries({"max_attempts": st.integers(1, 20)}),
    "timeout_seconds": st.integers(1, 840),
    "misfire": st.fixed_dictionaries({"policy": st.sampled_from(["run_once", "run_all", "skip"])}),
    "overlap": st.sampled_from(["skip", "allow", "buffer_one", "buffer_all", "cancel_other"]),
    "enabled": st.sampled_from([True, False, "false", 0]),
    "description": st.text(max_size=30),
    "jitter_seconds": st.integers(-1, 601),
    "pause_on_failure": st.sampled_from([True, False, "true"]),
    "max_runs": st.integers(0, 5),
    "action_after_completion": st.sampled_from(["none", "delete", "DELETE", None]),
    "group": st.sampled_from(["billing", "a/b", "", "-x"]),
    "tags": st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=3),
    "max_event_age_seconds": st.sampled_from([59, 60, 3600, 86_400, 86_401, "600", None]),
    "dead_letter_queue_arn": st.sampled_from(
        ["arn:aws:sqs:us-east-1:123456789012:dlq", "arn:aws:sqs:us-east-1:123456789012:q.fifo", "dlq", None]
    ),
}


@st.composite
def items(draw: st.DrawFn) -> dict[str, Any]:
    """A job item: fields plausible, absent or arbitrary, with state and stray attributes."""
    fields = [f for f in DEFINITION_FIELDS if f != "job_id"]  # the table's key is always a string
    arbitrary = draw(st.sets(st.sampled_from(fields), max_size=2))
    absent = draw(st.sets(st.sampled_from(fields), max_size=3))
    item: dict[str, Any] = {"job_id": draw(_PLAUSIBLE["job_id"])}
    for field in fields:
        if field in arbitrary:
            item[field] = draw(VALUES)
        elif field not in absent and (field in ("schedule", "target") or draw(st.booleans())):
            item[field] = draw(_PLAUSIBLE[field])
    if draw(st.integers(0, 3)) == 0:
        item.update(draw(st.dictionaries(st.sampled_from(sorted(STATE_FIELDS)), VALUES, max_size=2)))
    if draw(st.integers(0, 3)) == 0:
        item.update(draw(st.dictionaries(NAMES, VALUES, max_size=2)))
    return item


def parse(item: dict[str, Any]) -> JobDefinition | InvalidJob:
    try:
        return JobDefinition.from_item(item)
    except InvalidJob as exc:
        return exc


def check_reasons(exc: InvalidJob) -> None:
    assert 1 <= len(exc.reasons) <= MAX_REASONS
    for reason in exc.reasons:
        assert isinstance(reason, str) and 0 < len(reason) <= MAX_REASON_CHARS
        reason.encode("utf-8")  # written back into the item: DynamoDB takes UTF-8 only
    to_wire({"invalid_reasons": exc.reasons})


_QUERIES = [
    datetime(1970, 1, 1, tzinfo=UTC),
    datetime(2026, 3, 8, 7, 0, tzinfo=UTC),
    datetime(2199, 12, 31, 23, 59, 59, tzinfo=UTC),
    datetime(2200, 12, 31, tzinfo=UTC),
]


def check_valid(definition: JobDefinition) -> None:
    item = definition.to_item()
    to_wire(item)  # writable back to DynamoDB
    again = JobDefinition.from_item(item)
    assert again == definition
    assert again.definition_hash() == definition.definition_hash()
    assert JobDefinition.from_item(boto3_shape(item)) == definition
    assert definition_digest(item) == definition.definition_hash()
    schedule = definition.compiled_schedule()
    for t in _QUERIES:
        found = schedule.next_after(t)
        assert found is None or (t < found < HORIZON_END)
        for occurrence in schedule.occurrences(t, t + timedelta(days=2), limit=2):
            assert t < occurrence < HORIZON_END


_settings = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))


@_settings
@given(items())
def test_any_item_is_a_definition_or_invalid_in_both_shapes(item: dict[str, Any]) -> None:
    from_boto3 = parse(boto3_shape(item))
    from_stream = parse(stream_shape(item))
    for result in (from_boto3, from_stream):
        if isinstance(result, InvalidJob):
            check_reasons(result)
        else:
            check_valid(result)
    # Both readers must agree, or the registrar and the trigger would undo each other's writes.
    if isinstance(from_boto3, JobDefinition):
        assert from_boto3 == from_stream
    else:
        assert isinstance(from_stream, InvalidJob)
    assert definition_digest(boto3_shape(item)) == definition_digest(stream_shape(item))


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(field=st.sampled_from(DEFINITION_FIELDS), value=VALUES)
def test_any_value_in_any_field(field: str, value: Any) -> None:
    item = {"job_id": "j", "schedule": "rate(1 hour)", "target": "log", field: value}
    for shape in (boto3_shape(item), stream_shape(item)):
        result = parse(shape)
        if isinstance(result, InvalidJob):
            check_reasons(result)
            assert any(r.startswith(field) or r.startswith("schedule") for r in result.reasons), (
                result.reasons
            )
        else:
            check_valid(result)


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(payload=JSON_VALUES)
def test_json_payloads_round_trip(payload: Any) -> None:
    item = {"job_id": "j", "schedule": "rate(1 hour)", "target": "log", "payload": json.dumps({"v": payload})}
    definition = JobDefinition.from_item(item)
    assert definition.payload == {"v": payload}
    check_valid(definition)
