"""Batch records a function could not process: each one is logged with its message id and the
reason, and counted, before the batch processor reports it as a batch item failure.

A *poison* record is one that is not what the function consumes at all: an SQS body that is not a
run message (``Hello from SQS!``, ``Test message.``), a stream record without a ``job_id`` key.
Retrying it cannot help; it ends in the dead-letter queue (worker) or the registrar's failure
destination after the event source's retries. Any other failure (a store error, say) is retried
by the event source as well, and usually succeeds on a later delivery.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.shared.dynamodb_deserializer import TypeDeserializer

from jobsched.core.job import plain_values
from jobsched.ports import Telemetry
from jobsched.services.messages import PoisonMessage

# A stream record's DynamoDB JSON as Python values, as Powertools' DynamoDBRecord reads it (its
# deserializer alone: the data_classes package would import every event class, runtime/batch.py).
_deserializer = TypeDeserializer()


def stream_image(image: dict[str, Any] | None) -> dict[str, Any] | None:
    """A stream record's image (``Keys``, ``NewImage``, ``OldImage``) as the core reads an item;
    None when the record has none."""
    if not image:
        return None
    values: dict[str, Any] = plain_values({name: _deserializer.deserialize(v) for name, v in image.items()})
    return values


EVENT = "batch.record_failed"
FAILED_RECORDS = "FailedRecords"  # every record reported as a batch item failure
POISON_RECORDS = "PoisonRecords"  # those of them that cannot be what the function consumes


# A work message reported as a batch item failure becomes visible again after this many seconds,
# doubling with each receive up to the cap, instead of after the queue's visibility timeout (six
# worker timeouts, 5,400 s at the defaults). With DlqMaxReceiveCount 5: 10 + 20 + 40 + 80 + 160 s,
# so a message that keeps failing reaches the dead-letter queue about 5 minutes after its first
# receive, not 7.5 hours. A poison one (not a run message: retrying cannot help) is made visible
# again at once, and reaches the dead-letter queue within seconds. docs/deploy.md, "Retries".
RETRY_VISIBILITY_BASE_S = 10
RETRY_VISIBILITY_MAX_S = 300


def retry_visibility_seconds(receive_count: int, poison: bool = False) -> int:
    """When a failed work message should be visible again, by its ``ApproximateReceiveCount``."""
    if poison:
        return 0
    exponent = min(max(receive_count, 1) - 1, 16)
    return min(RETRY_VISIBILITY_MAX_S, RETRY_VISIBILITY_BASE_S << exponent)


class ForeignRecord(ValueError):
    """A stream record that is not a change to a job item (for example AWS's sample event)."""


def is_poison(exc: BaseException) -> bool:
    return isinstance(exc, ForeignRecord | PoisonMessage)


def report_failed_record(
    logger: Any, telemetry: Telemetry, message_id: str, exc: BaseException, **fields: Any
) -> None:
    """One WARNING line (``batch.record_failed``, correlation id = the message id) and the metrics.
    ``logger`` is a Powertools Logger (or anything with ``warning(msg, extra=...)``); ``fields``
    (such as the registrar's ``job_id``) are added to the line where not None."""
    poison = is_poison(exc)
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    logger.warning(
        EVENT,
        extra={
            "event": EVENT,
            "correlation_id": message_id,
            "message_id": message_id,
            "reason": reason,
            "error_type": type(exc).__name__,
            "poison": poison,
            **{name: value for name, value in fields.items() if value is not None},
        },
    )
    telemetry.metric(FAILED_RECORDS, 1)
    if poison:
        telemetry.metric(POISON_RECORDS, 1)
