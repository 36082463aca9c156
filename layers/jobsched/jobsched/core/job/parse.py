"""Reading a job item as a person or DynamoDB wrote it: its values as the core reads them (the
same from boto3's item shape and a stream image's), and the reasons, bounded and in a person's
words, that ``InvalidJob`` carries back into the item. Everything here is total and bounded: it
runs on any value DynamoDB can hold before the model (``model.JobDefinition``) sees it."""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from pydantic import TypeAdapter, ValidationError
from pydantic_core import from_json

from jobsched.core.job.fields import (
    MAX_PAYLOAD_DEPTH,
    MAX_PAYLOAD_NUMBER_DIGITS,
    MAX_REASON_CHARS,
    MAX_REASONS,
)

_BOOL = TypeAdapter(bool)


def enabled_value(value: Any) -> bool | None:
    """An ``enabled`` value as the item format reads it: pydantic's lax bool (true/false, 0/1,
    and the strings true/false, yes/no, on/off, t/f, y/n, 1/0 in any case; a DynamoDB number as
    its integer), or None when the format refuses it (the item is invalid). The one reading of
    ``enabled``: the definition's (``JobDefinition.enabled``) and every reader of a raw job item
    (``read_enabled``) go through it, so a job stored with ``"off"`` or ``0`` is paused for all."""
    try:
        return _BOOL.validate_python(plain_values(value))
    except ValidationError:
        return None


def read_enabled(item: Mapping[str, Any]) -> bool | None:
    """Whether a raw job item is enabled (absent: the default, enabled), read as its definition
    reads it (``enabled_value``); None when its ``enabled`` is not a value the format accepts."""
    return True if "enabled" not in item else enabled_value(item["enabled"])


class InvalidJob(ValueError):
    """A job item that cannot be scheduled, with reasons a person can act on.

    The reasons are bounded whoever raises it (see ``bound_reasons``): they are written back
    into the item.
    """

    def __init__(self, reasons: Iterable[str]) -> None:
        bounded = bound_reasons(reasons)
        super().__init__("; ".join(bounded))
        self.reasons = bounded


def bound_reasons(reasons: Iterable[str]) -> list[str]:
    """At most ``MAX_REASONS`` reasons of at most ``MAX_REASON_CHARS`` characters each, never
    empty, and always valid UTF-8 (a lone surrogate in an echoed name is escaped)."""
    shown = [
        clip(str(reason).encode("utf-8", "backslashreplace").decode("utf-8"), MAX_REASON_CHARS)
        for reason in reasons
    ]
    if not shown:
        return ["item: not a valid job definition"]
    if len(shown) > MAX_REASONS:
        hidden = len(shown) - (MAX_REASONS - 1)
        shown = [*shown[: MAX_REASONS - 1], f"... and {hidden} more problems"]
    return shown


# Pydantic's messages for type errors name Python types ("a valid dictionary or instance of
# RetryPolicy"); a person wrote a DynamoDB item, so say what is expected in its words.
_EXPECTED = {
    "string_type": "must be a string",
    "int_type": "must be a whole number",
    "int_parsing": "must be a whole number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "dict_type": "must be a map",
    "model_type": "must be a map",
    "datetime_type": "must be an ISO 8601 date and time with an offset (e.g. 2026-01-01T00:00:00Z)",
}


def readable_reasons(exc: ValidationError, skip: Iterable[str] = ()) -> list[str]:
    """One reason per error, naming the field; errors for the fields in ``skip`` (already
    reported by the caller) are left out."""
    skipped = set(skip)
    reasons = []
    for error in exc.errors(include_url=False):
        if error["loc"] and error["loc"][0] in skipped:
            continue
        where = ".".join(show_name(part) for part in error["loc"]) or "item"
        message = str(error["msg"]).removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            message = "unknown field (check the spelling against the documented job item format)"
        elif error["type"] == "string_pattern_mismatch" and where == "job_id":
            message = "must be 1-128 characters of A-Z a-z 0-9 _ . : - starting with a letter or digit"
        elif error["type"] == "string_pattern_mismatch" and where == "target":
            message = "must be the name of a registered handler: lowercase letters, digits, _ . -"
        elif error["type"] in _EXPECTED:
            message = f"{_EXPECTED[error['type']]}, got {kind_of(error['input'])}"
        elif error["type"] == "int_from_float":
            message = f"must be a whole number, got {clip(repr(error['input']), 40)}"
        # A model-level check (no location) names its field in its own message ("schedule: ...").
        reasons.append(f"{where}: {message}" if error["loc"] else message)
    return reasons


def nesting_depth(value: Any, limit: int) -> int:
    """Levels of maps and lists in ``value`` (a scalar is 0, ``{}`` is 1), counted up to
    ``limit + 1`` and no further. Iterative, so it is safe on any value and stops early on a
    deep one (or a cyclic one, built in Python)."""
    depth = 0
    level = [value]
    while level:
        containers = [item for item in level if isinstance(item, _CONTAINERS)]
        if not containers:
            break
        depth += 1
        if depth > limit:
            break
        level = [
            child for item in containers for child in (item.values() if isinstance(item, dict) else item)
        ]
    return depth


_CONTAINERS = (dict, list, tuple, set, frozenset)


def decode_payload(text: str) -> Any:
    """The payload's JSON text decoded under the payload's limits (``ValueError`` with a reason).

    pydantic-core's parser (jiter) rather than json: json recurses in Python once per level
    (RecursionError at about 1,000 levels, wherever the stack stands) and leaves long integers
    to int(), whose limit is the interpreter's setting; jiter stops at 200 levels and at
    numbers of 4300 digits on its own, and nothing else recursive sees the value before the
    depth check below. NaN, Infinity and too large a float (1e400) decode as floats and are
    refused by _payload_size, when the payload is written as canonical JSON.
    """
    if not text.strip():
        return {}
    try:
        value = from_json(text, allow_inf_nan=True)
    except TypeError:
        # jiter's answer to text it cannot encode as UTF-8: a lone surrogate, which only a
        # payload built in Python can hold (DynamoDB strings are UTF-8).
        raise ValueError("is not valid Unicode text (it holds an unpaired surrogate)") from None
    except ValueError as exc:
        message = str(exc)
        if "recursion limit" in message:
            raise ValueError(_TOO_DEEP) from None
        if "number out of range" in message:
            message += f"; numbers are limited to {MAX_PAYLOAD_NUMBER_DIGITS} digits"
        raise ValueError(f"not valid JSON ({clip(message, 160)})") from None
    if nesting_depth(value, MAX_PAYLOAD_DEPTH) > MAX_PAYLOAD_DEPTH:
        raise ValueError(_TOO_DEEP)
    return value


_TOO_DEEP = f"JSON nested more than {MAX_PAYLOAD_DEPTH} levels deep; the limit is {MAX_PAYLOAD_DEPTH}"


def kind_of(value: Any) -> str:
    """What a value is, in DynamoDB's words (after plain_values: sets are lists, binary is text)."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float | Decimal):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple | set | frozenset):
        return "a list or set"
    if isinstance(value, dict):
        return "a map"
    if value is None:
        return "null"
    return f"a {type(value).__name__}"


def show_name(name: Any) -> str:
    """An attribute name as a reason shows it: any characters are allowed, up to 64 KB."""
    text = name if isinstance(name, str) and name.isprintable() else repr(name)
    return clip(text, 64)


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def plain_values(value: Any) -> Any:
    """A DynamoDB value as the core reads it, the same from either item shape.

    Numbers arrive as Decimal through boto3 and stream images; the core wants int (integral)
    or float. Binary arrives as boto3's ``Binary`` (or bytes) from boto3 but as base64 text in a
    stream image, so it becomes that text here too. Sets become lists in a fixed order (sets of
    strings iterate in a per-process order, which would change a digest from run to run).
    """
    if isinstance(value, _PLAIN_SCALARS):  # first: the common case, on every value of a payload
        return value
    if isinstance(value, Decimal):
        return plain_number(value)
    if isinstance(value, dict):
        return {k: plain_values(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain_values(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((plain_values(v) for v in value), key=set_order)
    binary = binary_text(value)
    return value if binary is None else binary


_PLAIN_SCALARS = (str, int, float, type(None))


def plain_number(value: Decimal) -> int | float:
    # DynamoDB numbers lie within 1E-130..9.99E+125; past that (a Decimal built in Python), int()
    # could build a huge integer, so such a value is a float (inf).
    if value.is_finite() and value.adjusted() <= 125 and value == value.to_integral_value():
        return int(value)
    return float("nan") if value.is_nan() else float(value)


def binary_text(value: Any) -> str | None:
    """Base64 text of a binary value, or None if ``value`` is not binary. boto3's ``Binary`` is
    recognised by its ``__bytes__`` so that the core imports no boto3."""
    if isinstance(value, bytes | bytearray | memoryview) or (
        not isinstance(value, str) and hasattr(type(value), "__bytes__")
    ):
        return base64.b64encode(bytes(value)).decode("ascii")
    return None


def set_order(value: Any) -> tuple[int, Any]:
    # DynamoDB sets are all strings, all numbers or all binary (text by now); the rank keeps a
    # mixed set built in Python sortable.
    if isinstance(value, int | float) and not isinstance(value, bool):
        return (0, value)
    if isinstance(value, str):
        return (1, value)
    return (2, repr(value))
