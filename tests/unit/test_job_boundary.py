"""Items people can write that used to escape from_item as another exception, or pass when they
cannot be scheduled (issue 12, item 1): each is now a definition or an InvalidJob whose reasons
name the field, and the digest of any item is computed without raising."""

from __future__ import annotations

import json
import sys
from decimal import Decimal
from typing import Any

import pytest
from boto3.dynamodb.types import Binary
from ddb_items import SPECIAL_STRINGS, boto3_shape, stream_shape
from jobsched.core.job import (
    DEFINITION_FIELDS,
    MAX_REASON_CHARS,
    MAX_REASONS,
    InvalidJob,
    JobDefinition,
    definition_digest,
    plain_values,
)


def base_item(**changes: Any) -> dict[str, Any]:
    item: dict[str, Any] = {"job_id": "nightly", "schedule": "cron(0 3 * * ? *)", "target": "log"}
    item.update(changes)
    return item


def reasons_for(item: dict[str, Any]) -> list[str]:
    with pytest.raises(InvalidJob) as caught:
        JobDefinition.from_item(item)
    reasons = caught.value.reasons
    assert 1 <= len(reasons) <= MAX_REASONS and all(len(r) <= MAX_REASON_CHARS for r in reasons)
    return reasons


def assert_invalid(item: dict[str, Any], field: str, *words: str) -> None:
    """Invalid in both shapes the services read, with a reason naming ``field`` and ``words``."""
    for shape in (boto3_shape(item), stream_shape(item)):
        reasons = reasons_for(shape)
        named = [r for r in reasons if r.startswith(f"{field}:")]
        assert named, f"no reason names {field}: {reasons}"
        assert any(all(w in r for w in words) for r in named), reasons


# --- dates out of datetime's range once in UTC (OverflowError before) ---------------------------


def test_end_past_year_9999_in_utc() -> None:
    assert_invalid(
        base_item(end="9999-12-31T23:59:59-05:00"), "end", "after year 9999 in UTC", "leave the field out"
    )


def test_start_before_year_1_in_utc() -> None:
    assert_invalid(base_item(start="0001-01-01T00:00:00+01:00"), "start", "before year 1 in UTC")


def test_start_rounded_up_past_year_9999() -> None:
    assert_invalid(base_item(start="9999-12-31T23:59:59.5Z"), "start", "after 2199")


def test_an_end_that_never_comes_is_still_valid() -> None:
    assert JobDefinition.from_item(base_item(end="9999-12-31T23:59:59Z")).end is not None


# --- payload JSON (RecursionError, ValueError before; NaN and Infinity accepted before) ----------


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, '{"a":' * 100_000 + "1" + "}" * 100_000])
def test_payload_nested_100000_deep(text: str) -> None:
    assert_invalid(base_item(payload=text), "payload", "nested more than 32 levels deep", "the limit is 32")


def test_payload_nesting_limit_is_32_levels() -> None:
    ok = '{"a":' * 31 + "[1]" + "}" * 31
    assert JobDefinition.from_item(base_item(payload=ok)).payload["a"]
    assert_invalid(
        base_item(payload='{"a":' * 32 + "[1]" + "}" * 32), "payload", "nested more than 32 levels"
    )
    # A JSON string holding brackets does not count, and neither does an escaped quote.
    tricky = json.dumps({"s": '["[{\\"' * 50})
    assert JobDefinition.from_item(base_item(payload=tricky)).payload["s"].startswith('["[{')


def test_payload_map_nested_past_32_levels() -> None:
    deep: Any = 1
    for _ in range(40):
        deep = {"a": deep}
    assert_invalid(base_item(payload=deep), "payload", "nested more than 32 levels")


def test_payload_integer_of_5000_digits() -> None:
    assert_invalid(base_item(payload='{"n": ' + "9" * 5000 + "}"), "payload", "limited to 4300 digits")
    assert_invalid(base_item(payload='{"n": -' + "9" * 5000 + "}"), "payload", "limited to 4300 digits")
    # The interpreter's own limit is not what decides: the same answer with it switched off.
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        assert_invalid(base_item(payload='{"n": ' + "9" * 5000 + "}"), "payload", "4300")
    finally:
        sys.set_int_max_str_digits(limit)
    assert JobDefinition.from_item(base_item(payload='{"n": ' + "9" * 4300 + "}")).payload["n"] > 0


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_payload_nan_and_infinity_are_not_json(constant: str) -> None:
    assert_invalid(base_item(payload='{"x": ' + constant + "}"), "payload", "NaN, Infinity", "JSON cannot")


def test_payload_float_too_large_for_a_double() -> None:
    assert_invalid(base_item(payload='{"x": 1e400}'), "payload", "too large", "1e400")


@pytest.mark.parametrize(("text", "kind"), [("[1, 2]", "a list"), ("5", "a number"), ('"x"', "a string")])
def test_payload_must_be_an_object(text: str, kind: str) -> None:
    assert_invalid(base_item(payload=text), "payload", "must be a JSON object", kind)


def test_payload_with_a_lone_surrogate_escape() -> None:
    # Not Unicode text, so it could not be written back as a DynamoDB string.
    assert_invalid(base_item(payload='{"a": "\\ud800"}'), "payload", "not valid JSON")
    # Only a payload built in Python can hold a lone surrogate itself.
    with pytest.raises(InvalidJob, match="payload: contains an unpaired surrogate"):
        JobDefinition.from_item(base_item(payload={"a": "\ud800"}))
    with pytest.raises(InvalidJob, match="payload: is not valid Unicode text"):
        JobDefinition.from_item(base_item(payload='{"a": "\ud800"}'))
    with pytest.raises(InvalidJob, match=r"description: .*unicode string"):  # pydantic's own check
        JobDefinition.from_item(base_item(description="\ud800"))
    assert definition_digest(base_item(description="\ud800")).startswith("invalid-")


# --- numbers where whole seconds are wanted -----------------------------------------------------


def test_timeout_of_9_9e125() -> None:
    assert_invalid(base_item(timeout_seconds=Decimal("9.9E+125")), "timeout_seconds", "840")


@pytest.mark.parametrize("value", [Decimal("1.5"), Decimal("1E-130")])
def test_timeout_with_a_fraction(value: Decimal) -> None:
    assert_invalid(base_item(timeout_seconds=value), "timeout_seconds", "must be a whole number")


# --- wrong types ---------------------------------------------------------------------------------


def test_retry_as_a_list() -> None:
    assert_invalid(base_item(retry=[Decimal(3)]), "retry", "must be a map, got a list")


@pytest.mark.parametrize("value", [Decimal(5), {"UTC"}])
def test_timezone_as_a_number_or_set(value: Any) -> None:
    assert_invalid(base_item(timezone=value), "timezone", "must be a string, got a")


def test_timezone_as_binary() -> None:
    # A stream image carries binary as base64 text, indistinguishable from a string; boto3's shape
    # is read the same way so that both readers agree.
    assert_invalid(base_item(timezone=Binary(b"UTC")), "timezone", "unknown time zone 'VVRD'")


def test_enabled_as_a_set() -> None:
    assert_invalid(base_item(enabled={"true"}), "enabled", "must be true or false, got a list or set")


@pytest.mark.parametrize("value", [False, "false", "no", "off", "0", Decimal(0)])
def test_enabled_false_as_people_write_it(value: Any) -> None:
    for shape in (boto3_shape(base_item(enabled=value)), stream_shape(base_item(enabled=value))):
        assert JobDefinition.from_item(shape).enabled is False


# --- schedules that cannot be computed, or never fire (accepted or OverflowError before) ---------


def test_rate_of_99999999999_days() -> None:
    assert_invalid(base_item(schedule="rate(99999999999 days)"), "schedule", "longest supported interval")


@pytest.mark.parametrize("zone", ["Asia/Tokyo", "America/New_York"])
def test_at_in_year_9999(zone: str) -> None:
    assert_invalid(base_item(schedule="at(9999-12-31T23:59:59)", timezone=zone), "schedule", "year 9999")


def test_at_in_year_1_east_of_utc() -> None:
    assert_invalid(base_item(schedule="at(0001-01-01T00:00:00)", timezone="Asia/Tokyo"), "schedule", "year 1")


def test_cron_whose_occurrences_would_all_lie_past_2199() -> None:
    assert_invalid(base_item(start="2200-06-01T00:00:00Z"), "start", "after 2199")
    assert_invalid(
        base_item(schedule="cron(0 0 1 1 ? 2150)", start="2151-01-01T00:00:00Z"), "schedule", "no occurrence"
    )


def test_cron_that_never_matches() -> None:
    assert_invalid(base_item(schedule="cron(0 0 30 2 ? *)"), "schedule", "no occurrence from 1970")


def test_last_cron_occurrence_far_west_is_valid() -> None:
    definition = JobDefinition.from_item(
        base_item(schedule="cron(59 23 31 12 ? 2199)", timezone="Etc/GMT+12")
    )
    assert definition.compiled_schedule().first_occurrence() is not None


# --- the reasons themselves ---------------------------------------------------------------------


def test_reasons_are_bounded_in_number() -> None:
    reasons = reasons_for(base_item(**{f"extra{i}": 1 for i in range(1000)}))
    assert len(reasons) == MAX_REASONS
    assert reasons[-1] == "... and 981 more problems"


@pytest.mark.parametrize(
    "item",
    [
        base_item(**{"y" * 65_000: 1}),
        base_item(retry={"z" * 65_000: 1}),
        base_item(timezone="x" * 400_000),
        base_item(job_id="j" * 400_000),
        base_item(schedule="cron(" + "1," * 120 + "2 * * * ? *)", timezone="x" * 1000),
    ],
)
def test_reasons_never_echo_a_huge_value(item: dict[str, Any]) -> None:
    assert all(len(r) <= MAX_REASON_CHARS for r in reasons_for(item))


def test_many_problems_are_reported_at_once() -> None:
    reasons = reasons_for(base_item(payload="[" * 50, timeout_seconds=Decimal("1.5"), retry=[1]))
    assert {r.split(":", 1)[0] for r in reasons} == {"payload", "timeout_seconds", "retry"}


@pytest.mark.parametrize("field", DEFINITION_FIELDS)
def test_every_special_string_in_every_field(field: str) -> None:
    for text in SPECIAL_STRINGS:
        item = base_item(**{field: text})
        for shape in (boto3_shape(item), stream_shape(item)):
            try:
                JobDefinition.from_item(shape).compiled_schedule()
            except InvalidJob as exc:
                assert 1 <= len(exc.reasons) <= MAX_REASONS
                assert all(0 < len(r) <= MAX_REASON_CHARS for r in exc.reasons)


# --- both item shapes read alike ----------------------------------------------------------------


def test_binary_in_a_payload_map_is_base64_text_in_both_shapes() -> None:
    item = base_item(payload={"blob": Binary(b"\x00\xff"), "blobs": {Binary(b"b"), Binary(b"a")}})
    expected = {"blob": "AP8=", "blobs": ["YQ==", "Yg=="]}
    assert JobDefinition.from_item(boto3_shape(item)).payload == expected
    assert JobDefinition.from_item(stream_shape(item)).payload == expected


def test_a_binary_description_is_valid_in_both_shapes_alike() -> None:
    item = base_item(description=Binary(b"hello"))
    assert JobDefinition.from_item(boto3_shape(item)) == JobDefinition.from_item(stream_shape(item))


def test_sets_become_sorted_lists() -> None:
    words = {f"w{i}" for i in range(50)}
    item = base_item(payload={"tags": words, "ns": {Decimal(10), Decimal(9), Decimal("0.5")}})
    for shape in (boto3_shape(item), stream_shape(item)):
        payload = JobDefinition.from_item(shape).payload
        assert payload["tags"] == sorted(words)
        assert payload["ns"] == [0.5, 9, 10]
    assert plain_values({"b", "a"}) == ["a", "b"]


# --- the digest of any item ---------------------------------------------------------------------


def test_digest_of_a_valid_item_is_its_definition_hash() -> None:
    item = base_item(payload='{"a": 1}', status="active", version=Decimal(3))
    assert definition_digest(item) == JobDefinition.from_item(item).definition_hash()


def test_digest_of_an_invalid_item_is_stable_across_shapes() -> None:
    item = base_item(
        schedule="cron(0 0 30 2 ? *)",
        tags={"b", "a", "c"},
        blob=Binary(b"\x01"),
        blobs={Binary(b"x"), Binary(b"y")},
        n={Decimal("1E-130"), Decimal("9.9E+125")},
        deep=[[[[{"k": Decimal("1.50")}]]]],
    )
    digest = definition_digest(boto3_shape(item))
    assert digest.startswith("invalid-")
    assert digest == definition_digest(stream_shape(item))
    assert digest == definition_digest(item)  # raw deserializer output (Decimal, sets) too


def test_digest_ignores_state_and_sees_definition_changes() -> None:
    item = base_item(schedule="cron(0 0 30 2 ? *)")
    digest = definition_digest(item)
    assert definition_digest({**item, "status": "invalid", "version": 9}) == digest
    assert definition_digest({**item, "schedule": "cron(0 0 31 2 ? *)"}) != digest
    assert definition_digest({**item, "scheduel": "x"}) != digest


def test_digest_never_raises() -> None:
    deep: Any = 1
    for _ in range(10_000):  # ten times Python's recursion limit
        deep = [deep]
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    for attribute in (deep, cyclic, 10**10_000, float("nan"), Decimal("NaN"), object(), {1: {2}}, b"x"):
        assert definition_digest(base_item(extra=attribute)).startswith("invalid-")
    assert definition_digest(base_item(extra=deep)) != definition_digest(base_item(extra=[deep]))
