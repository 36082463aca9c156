"""DynamoDB's and SQS's request limits, and the sizes that count against them.

Each service rejects a request past these limits as a whole (DynamoDB with a
``ValidationException``, SQS with ``BatchRequestTooLong``/``MessageTooLong``), so a request
built without them fails every time it is retried: an outage's backlog would then block the job
for good. The services size every request by bytes as well as by count with the helpers here,
and the in-memory store and queue enforce the same limits, so a test fails where AWS would.

Sources (checked 2026-12):

- DynamoDB developer guide, "Constraints in Amazon DynamoDB" (Items, "Item size"): an item is at
  most 400 KB, "which includes both attribute name binary length (UTF-8 length) and attribute
  value lengths"; and "All size measurements in DynamoDB use binary-based units. DynamoDB denotes
  1 KB = 1024 bytes": 409,600 bytes;
  https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Constraints.html
- DynamoDB API reference, TransactWriteItems: "groups up to 100 action requests [...] The
  aggregate size of the items in the transaction cannot exceed 4 MB";
  https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html
- DynamoDB, "Item sizes and formats": how an item's size is counted (``item_size`` below);
  https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html
- DynamoDB Query/Scan: a page holds at most 1 MB of items (the reader pages, see services/paging).
- SQS API reference, SendMessageBatch: at most 10 entries; each message and the sum of a batch's
  messages at most 262,144 bytes (256 KiB);
  https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessageBatch.html
  SQS raised the ceiling to 1 MiB in 2025 for queues configured for it; jobsched keeps to 256 KiB,
  which every queue accepts whatever its ``MaximumMessageSize``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any, TypeVar

T = TypeVar("T")

# "400 KB" in DynamoDB's binary units, names and values counted as ``item_size`` does. moto's
# own rule differs (405,000 bytes, numbers counted as their text, no list or map overhead): a
# write that must land keeps ``SAFETY_BYTES`` below this (the registrar's report does).
DYNAMODB_MAX_ITEM_BYTES = 400 * 1024
DYNAMODB_MAX_TRANSACTION_ITEMS = 100
DYNAMODB_MAX_TRANSACTION_BYTES = 4 * 1024 * 1024

SQS_MAX_BATCH_ENTRIES = 10
SQS_MAX_MESSAGE_BYTES = 262_144
SQS_MAX_BATCH_BYTES = 262_144

# Room kept below a byte limit for what a size estimate leaves out (request framing, the
# attributes an update leaves untouched on a small item).
SAFETY_BYTES = 16 * 1024


class RequestTooLarge(ValueError):
    """A request that the service would reject for its size, whatever the retry."""


def value_size(value: Any) -> int:
    """The size DynamoDB counts for one attribute value (its name not included)."""
    if value is None or isinstance(value, bool):
        return 1
    if isinstance(value, str):
        return len(value.encode("utf-8"))
    if isinstance(value, bytes | bytearray):
        return len(value)
    if isinstance(value, int | Decimal | float):
        return _number_size(value)
    if isinstance(value, Mapping):
        # 3 bytes for the map, 1 per element, plus each element's name and value.
        return 3 + sum(1 + len(str(k).encode("utf-8")) + value_size(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return 3 + sum(1 + value_size(v) for v in value)
    if isinstance(value, set | frozenset):
        return sum(value_size(v) for v in value)
    raw = getattr(value, "value", None)  # boto3's Binary
    if isinstance(raw, bytes):
        return len(raw)
    return len(str(value).encode("utf-8"))


def _number_size(value: int | Decimal | float) -> int:
    # "1 byte per two significant digits, plus 1 byte"; leading and trailing zeros are trimmed.
    digits = str(abs(Decimal(value)).normalize()).split("E")[0].replace(".", "").strip("0") or "0"
    return (len(digits) + 1) // 2 + 1 + (1 if value < 0 else 0)


def item_size(item: Mapping[str, Any]) -> int:
    """An item's size as DynamoDB counts it: every attribute's name and value."""
    return sum(len(name.encode("utf-8")) + value_size(value) for name, value in item.items())


def check_item_size(item: Mapping[str, Any], what: str) -> None:
    size = item_size(item)
    if size > DYNAMODB_MAX_ITEM_BYTES:
        raise RequestTooLarge(
            f"{what}: the item is {size} bytes; DynamoDB's limit is 400 KB ({DYNAMODB_MAX_ITEM_BYTES} bytes, "
            "attribute names included)"
        )


def check_transaction(sizes: Sequence[int], what: str = "transaction") -> None:
    """``sizes``: the size of each item the transaction writes or checks."""
    if len(sizes) > DYNAMODB_MAX_TRANSACTION_ITEMS:
        raise RequestTooLarge(
            f"{what}: {len(sizes)} operations; a transaction holds at most {DYNAMODB_MAX_TRANSACTION_ITEMS}"
        )
    total = sum(sizes)
    if total > DYNAMODB_MAX_TRANSACTION_BYTES:
        raise RequestTooLarge(f"{what}: {total} bytes of items; a transaction holds at most 4 MB")


def message_size(body: str) -> int:
    return len(body.encode("utf-8"))


def check_sqs_batch(bodies: Sequence[str]) -> None:
    if len(bodies) > SQS_MAX_BATCH_ENTRIES:
        raise RequestTooLarge(f"a batch holds at most {SQS_MAX_BATCH_ENTRIES} messages, got {len(bodies)}")
    sizes = [message_size(body) for body in bodies]
    for size in sizes:
        if size > SQS_MAX_MESSAGE_BYTES:
            raise RequestTooLarge(f"a message is {size} bytes; SQS's limit is {SQS_MAX_MESSAGE_BYTES}")
    if sum(sizes) > SQS_MAX_BATCH_BYTES:
        raise RequestTooLarge(f"a batch is {sum(sizes)} bytes; SQS's limit is {SQS_MAX_BATCH_BYTES}")


def chunks_by_size(
    items: Iterable[T], size_of: Callable[[T], int], max_count: int, max_bytes: int
) -> list[list[T]]:
    """Consecutive chunks, in order, each within ``max_count`` items and ``max_bytes`` bytes.

    An item larger than ``max_bytes`` on its own goes alone in its chunk (the caller's own size
    check then names it, rather than this function looping or dropping it)."""
    chunks: list[list[T]] = []
    current: list[T] = []
    used = 0
    for item in items:
        size = size_of(item)
        if current and (len(current) >= max_count or used + size > max_bytes):
            chunks.append(current)
            current, used = [], 0
        current.append(item)
        used += size
    if current:
        chunks.append(current)
    return chunks


# SNS FIFO and SQS FIFO MessageDeduplicationId: at most 128 characters.
DEDUPLICATION_ID_MAX = 128


def fit(key: str, limit: int) -> str:
    """The idempotency key within ``limit`` characters, printable ASCII: the key itself when it
    fits, else its printable characters cut and hex digits of its SHA-256 (as ``client_token``),
    so two keys that differ beyond the cut still differ."""
    if all(33 <= ord(c) <= 126 for c in key) and 0 < len(key) <= limit:
        return key
    tail = hashlib.sha256(key.encode()).hexdigest()[: min(16, limit)]
    room = limit - len(tail) - 1
    if room <= 0:
        return tail
    readable = "".join(c if 33 <= ord(c) <= 126 else "-" for c in key)[:room]
    return f"{readable}-{tail}"
