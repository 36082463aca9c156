"""Job items as DynamoDB can hold them, and the two shapes in which the services read them.

- ``boto3_shape``: what the DynamoDB store adapter reads (boto3's TypeDeserializer, then
  ``adapters.dynamodb_store.to_plain``): sets stay sets, Binary stays boto3 ``Binary``.
- ``stream_shape``: what the registrar reads from a stream record (the Lambda event's JSON, where
  binary is base64 text, through Powertools' deserializer, then ``core.job.plain_values``).

The strategies draw attribute values of every DynamoDB type within DynamoDB's own limits:
strings up to 400 KB, numbers of up to 38 significant digits between 1E-130 and 9.99E+125,
binary, booleans, null, lists and maps nested up to 32 levels, non-empty sets.
"""

from __future__ import annotations

import base64
from decimal import Decimal
from typing import Any

from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import StreamRecord
from boto3.dynamodb.types import Binary, TypeDeserializer, TypeSerializer
from hypothesis import strategies as st
from jobsched.adapters.dynamodb_store import to_plain
from jobsched.core.job import plain_values

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()

MAX_DEPTH = 32


def to_wire(item: dict[str, Any]) -> dict[str, Any]:
    """The item in DynamoDB's typed JSON; raises if DynamoDB could not hold a value."""
    return {name: _serializer.serialize(value) for name, value in item.items()}


def boto3_shape(item: dict[str, Any]) -> dict[str, Any]:
    return {name: to_plain(_deserializer.deserialize(value)) for name, value in to_wire(item).items()}


def _as_event_json(typed: dict[str, Any]) -> dict[str, Any]:
    """A typed value as a Lambda event carries it: binary values are base64 text."""
    ((kind, inner),) = typed.items()
    if kind == "B":
        return {kind: _b64(inner)}
    if kind == "BS":
        return {kind: [_b64(b) for b in inner]}
    if kind == "M":
        return {kind: {name: _as_event_json(v) for name, v in inner.items()}}
    if kind == "L":
        return {kind: [_as_event_json(v) for v in inner]}
    return typed


def _b64(value: Any) -> str:
    return base64.b64encode(bytes(value)).decode()


def stream_shape(item: dict[str, Any]) -> dict[str, Any]:
    image = {name: _as_event_json(typed) for name, typed in to_wire(item).items()}
    record = StreamRecord({"NewImage": image})
    return dict(plain_values(record.new_image))


# --- scalar values -----------------------------------------------------------------------------


@st.composite
def numbers(draw: st.DrawFn) -> Decimal:
    """Any number DynamoDB stores: up to 38 significant digits, magnitude 1E-130 to 9.99E+125."""
    if draw(st.booleans()):
        return draw(
            st.sampled_from(
                [
                    Decimal("9.9E+125"),
                    Decimal("-9.9E+125"),
                    Decimal("9.9999999999999999999999999999999999999E+125"),
                    Decimal("1E-130"),
                    Decimal("-1E-130"),
                    Decimal(0),
                    Decimal("0.5"),
                    Decimal("1.5"),
                    Decimal("30.0"),
                    Decimal(1),
                    Decimal(60),
                    Decimal(840),
                    Decimal(841),
                    Decimal(-1),
                    Decimal(1700000000),
                    Decimal(2**63),
                ]
            )
        )
    adjusted = draw(st.integers(-130, 125))
    # Below 1E-128 boto3's context keeps fewer digits (subnormal numbers).
    digits = draw(st.integers(1, max(1, min(38, adjusted + 166))))
    coefficient = draw(st.integers(10 ** (digits - 1), 10**digits - 1))
    sign = draw(st.sampled_from([1, -1]))
    return Decimal(sign * coefficient).scaleb(adjusted - digits + 1)


SPECIAL_STRINGS = [
    # dates at datetime's edges, and around the engine's 1970-2199 horizon
    "9999-12-31T23:59:59-05:00",
    "9999-12-31T23:59:59Z",
    "9999-12-31T23:59:59.999999Z",
    "0001-01-01T00:00:00+01:00",
    "0001-01-01T00:00:00Z",
    "2200-01-01T00:00:00Z",
    "2199-12-31T23:59:59-12:00",
    "1969-12-31T23:59:59Z",
    "2026-01-01T00:00:00+23:59",
    "2026-01-01T00:00:00",
    "2026-02-30T00:00:00Z",
    # schedules
    "rate(1 minute)",
    "rate(10 seconds)",
    "rate(99999999999 days)",
    "rate(36500 days)",
    "rate(" + "9" * 240 + " days)",
    "at(9999-12-31T23:59:59)",
    "at(0001-01-01T00:00:00)",
    "at(2199-12-31T23:59:59)",
    "at(1970-01-01T00:00:00)",
    "at(2026-03-08T02:30:00)",
    "cron(0 0 30 2 ? *)",
    "cron(59 23 31 12 ? 2199)",
    "cron(0 0 1 1 ? 1970)",
    "cron(0/5 * L * ? *)",
    "cron(0 12 ? * 6#5 *)",
    "cron(" + "7" * 240 + " * * * ? *)",
    # zones
    "UTC",
    "Etc/GMT+12",
    "Etc/GMT-14",
    "Pacific/Kiritimati",
    "America/New_York",
    "Asia/Tokyo",
    "Mars/Olympus",
    "../../etc/passwd",
    "zone.tab",
    "America",
    "",
    " ",
    # payload JSON text
    "{}",
    '{"a": 1}',
    '{"a": NaN}',
    '{"a": Infinity}',
    '{"a": -Infinity}',
    '{"a": 1e400}',
    '{"a": "\\ud800"}',
    '{"a": ' + "9" * 5000 + "}",
    '{"a": ' + "9" * 4300 + "}",
    "[" * 100_000 + "]" * 100_000,
    '{"a":' * 31 + "1" + "}" * 31,
    '{"a":' * 32 + "1" + "}" * 32,
    '{"a":' * 33 + "1" + "}" * 33,
    "[1]",
    "5",
    "null",
    '"text"',
    "{not json",
    '"' + '\\"' * 1000,
    # booleans and enums as people write them
    "true",
    "false",
    "yes",
    "0",
    "maybe",
    "skip",
    "allow",
    "buffer_one",
    "run_once",
    "run_all",
    "log",
    "nightly",
    "60",
]


# Strategies are built once: hypothesis re-validates a strategy object each time one is built.
STRINGS: st.SearchStrategy[str] = st.one_of(
    st.text(max_size=40),
    st.sampled_from(SPECIAL_STRINGS),
    st.builds(
        lambda unit, n: unit * n,
        st.sampled_from(["x", "9", "[", "é", "\U0001f600"]),
        st.sampled_from([1000, 70_000, 130_000]),
    ),
)
SETS: st.SearchStrategy[set[Any]] = st.one_of(
    st.sets(st.text(max_size=12), min_size=1, max_size=6),
    st.sets(numbers(), min_size=1, max_size=6),
    st.sets(st.binary(max_size=8), min_size=1, max_size=6).map(lambda s: {Binary(b) for b in s}),
)
SCALARS: st.SearchStrategy[Any] = st.one_of(
    STRINGS, numbers(), st.binary(max_size=40).map(Binary), st.booleans(), st.none(), SETS
)


# --- nested values -----------------------------------------------------------------------------

NAMES = st.one_of(
    st.text(min_size=1, max_size=20),
    st.sampled_from(["a", "job_id", "payload", "retry", "x" * 1000, "\n\t", "é"]),
)


@st.composite
def deep(draw: st.DrawFn, max_depth: int = MAX_DEPTH) -> Any:
    """A scalar wrapped in up to ``max_depth`` lists and maps."""
    value = draw(SCALARS)
    for _ in range(draw(st.integers(1, max_depth))):
        value = [value] if draw(st.booleans()) else {draw(NAMES): value}
    return value


# Any attribute value, nested to DynamoDB's limit.
VALUES: st.SearchStrategy[Any] = st.one_of(
    st.recursive(
        SCALARS,
        lambda children: st.lists(children, max_size=4) | st.dictionaries(NAMES, children, max_size=4),
        max_leaves=12,
    ),
    deep(),
)
JSON_VALUES: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=16,
)
