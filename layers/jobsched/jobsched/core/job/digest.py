"""``definition_digest``: a digest of any job item, valid or not, that never raises. The state
item records it as ``def_hash``; the registrar and the reconcile pass compare a job item's digest
with it to tell whether the definition changed, an invalid one too."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from jobsched.core.job.fields import STATE_FIELDS
from jobsched.core.job.model import JobDefinition
from jobsched.core.job.parse import InvalidJob, binary_text, plain_number, plain_values, set_order


def definition_digest(item: Mapping[str, Any]) -> str:
    """A digest of an item's definition that never raises, for any item.

    For a valid definition it is ``definition_hash()``; for an invalid one, ``invalid-`` and a
    digest of every attribute but jobsched's own state (``STATE_FIELDS``), so that fixing a
    misspelled field changes it. The same data gives the same digest in both item shapes (sets
    or lists from sets, Binary or its base64 text, Decimal or int/float).
    """
    try:
        return JobDefinition.from_item(item).definition_hash()
    except InvalidJob:
        pass
    digest = hashlib.sha256()
    for token in _canonical_tokens({k: v for k, v in item.items() if k not in STATE_FIELDS}):
        digest.update(token.encode("utf-8", "surrogatepass"))
        digest.update(b"\0")
    return "invalid-" + digest.hexdigest()[:16]


@dataclass(frozen=True)
class _Close:
    """Marks the end of a container on the token stack."""

    container_id: int
    token: str


def _scalar_token(value: Any) -> str | None:
    """The token of a scalar (None, bool, int, float, str); None for anything else."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"i{value:x}"
    if isinstance(value, float):
        return f"f{value.hex()}"
    if isinstance(value, str):
        return json.dumps(value)
    return None


def _canonical_tokens(value: Any) -> Iterator[str]:
    """``value`` as a token stream that depends only on its data: map keys sorted, sets as
    sorted lists (as plain_values gives them), numbers and binary as plain_values reads them.

    Written by hand rather than with json.dumps, which recurses (RecursionError on deep values),
    rejects sets and Binary, and cannot print integers of more than 4300 digits; this walks an
    explicit stack and prints integers in hex.
    """
    on_path: set[int] = set()  # the containers being walked: a cycle (built in Python) ends
    stack: list[Any] = [value]
    while stack:
        current = stack.pop()
        if isinstance(current, _Close):
            on_path.discard(current.container_id)
            yield current.token
            continue
        if isinstance(current, Decimal):
            current = plain_number(current)
        binary = binary_text(current)
        if binary is not None:
            current = binary
        scalar = _scalar_token(current)
        if scalar is not None:
            yield scalar
        elif isinstance(current, dict | list | tuple | set | frozenset):
            if id(current) in on_path:
                yield "cycle"
                continue
            if isinstance(current, dict):
                keys = sorted(current, key=lambda key: (type(key).__name__, str(key)))
                children: list[Any] = [part for key in keys for part in (str(key), current[key])]
                opening, closing = "{", "}"
            elif isinstance(current, set | frozenset):
                children = sorted((plain_values(v) for v in current), key=set_order)
                opening, closing = "[", "]"
            else:
                children = list(current)
                opening, closing = "[", "]"
            yield opening
            on_path.add(id(current))
            stack.append(_Close(id(current), closing))
            stack.extend(reversed(children))
        else:
            yield f"?{type(current).__qualname__}"
