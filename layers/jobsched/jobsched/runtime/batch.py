"""Partial batch responses for the worker (SQS) and the registrar (DynamoDB Streams), written out
instead of Powertools' batch utility.

Why not ``aws_lambda_powertools.utilities.batch``: importing it imports asyncio and the whole
``data_classes`` package (every event class Powertools has, API Gateway, AppSync, Bedrock, S3 and
the rest, because ``sqs_event`` and ``dynamo_db_stream_event`` live in that package) to use two
record types as dictionaries: about 30 ms of each of these functions' cold start, with nothing
smaller to import from it (docs/benchmarks.md, "Issue 27, item 10"). What its ``BatchProcessor``
and ``AsyncBatchProcessor`` do for these functions (``raise_on_entire_batch_failure=False``, no
parser model) is small, and kept exactly:

- the event's ``Records`` must be a non-empty list, else the invocation fails, with Powertools'
  messages (``UnexpectedBatchEvent``; a ``ValueError`` for an event that is not a mapping);
- each record is handled on its own; one whose handler raises an ``Exception`` (not a
  ``BaseException`` such as ``SystemExit``, which ends the invocation) is a batch item failure,
  named by its ``messageId`` (SQS) or its ``dynamodb.SequenceNumber`` (DynamoDB Streams);
- when every record fails, the response lists them all rather than failing the invocation;
- the response is ``{"batchItemFailures": [{"itemIdentifier": ...}, ...]}``, the failures in the
  order they happened.

tests/unit/test_batch.py runs these and Powertools' processors on the same batches and compares
the responses; the functions' own tests (tests/functional) are unchanged.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor, Future, as_completed
from contextlib import suppress
from typing import Any, TypedDict, TypeVar

P = TypeVar("P")


class PartialItemFailure(TypedDict):
    itemIdentifier: str | None


class PartialItemFailureResponse(TypedDict):
    """What Lambda's event source mapping reads (ReportBatchItemFailures)."""

    batchItemFailures: list[PartialItemFailure]


class UnexpectedBatchEvent(Exception):
    """An event with no records to process (Powertools' ``UnexpectedBatchTypeError``)."""


def batch_records(event: Mapping[str, Any], source: str) -> list[dict[str, Any]]:
    """The event's ``Records``, as Powertools' ``process_partial_response`` reads them."""
    try:
        records = event.get("Records", [])
    except AttributeError:
        raise ValueError(
            f"Invalid event format. Please ensure batch event is a valid {source} event."
        ) from None
    if not records or not isinstance(records, list):
        raise UnexpectedBatchEvent(
            "Unexpected batch event type. "
            "Possible values are: SQS, KinesisDataStreams, DynamoDBStreams, Kafka"
        )
    return records


def sqs_message_id(record: Mapping[str, Any]) -> str | None:
    """A failed SQS record's item identifier."""
    message_id: str | None = record["messageId"]
    return message_id


def stream_sequence_number(record: Mapping[str, Any]) -> str | None:
    """A failed DynamoDB stream record's item identifier (a record without ``dynamodb`` fails the
    invocation, as it does Powertools')."""
    change = record.get("dynamodb")
    if change is None:
        raise AttributeError("a DynamoDB stream record without 'dynamodb' has no sequence number")
    sequence_number: str | None = change.get("SequenceNumber")
    return sequence_number


def failure_response(
    failed: Sequence[Mapping[str, Any]], identifier: Callable[[Mapping[str, Any]], str | None]
) -> PartialItemFailureResponse:
    return {"batchItemFailures": [{"itemIdentifier": identifier(record)} for record in failed]}


def process_partial_response(
    event: Mapping[str, Any],
    record_handler: Callable[[dict[str, Any]], object],
    identifier: Callable[[Mapping[str, Any]], str | None],
    source: str,
) -> PartialItemFailureResponse:
    """Each record through ``record_handler``, one after another (Powertools' ``BatchProcessor``)."""
    failed = []
    for record in batch_records(event, source):
        try:
            record_handler(record)
        except Exception:
            failed.append(record)
    return failure_response(failed, identifier)


def process_partial_response_in_pool(
    event: Mapping[str, Any],
    pool: Executor,
    prepare: Callable[[dict[str, Any]], P],
    run: Callable[[P], object],
    record_failed: Callable[[dict[str, Any], Exception], None],
    identifier: Callable[[Mapping[str, Any]], str | None],
    source: str,
) -> PartialItemFailureResponse:
    """Every record at once (Powertools' ``AsyncBatchProcessor``, whose handler awaited a thread of
    ``pool``): ``prepare(record)`` here, in the batch's order, then ``run(prepared)`` on a thread of
    ``pool`` in a fresh copy of this context (what a logger binds there stays with its record).
    A record whose ``prepare`` or ``run`` raises goes to ``record_failed(record, exc)`` in this
    thread as soon as it fails (an error there leaves the record failed, as it did), then into
    the response."""
    failed: list[dict[str, Any]] = []

    def fail(record: dict[str, Any], exc: Exception) -> None:
        with suppress(Exception):
            record_failed(record, exc)
        failed.append(record)

    running: dict[Future[object], dict[str, Any]] = {}
    for record in batch_records(event, source):
        try:
            prepared = prepare(record)
        except Exception as exc:
            fail(record, exc)
            continue
        running[pool.submit(contextvars.copy_context().run, run, prepared)] = record
    for done in as_completed(running):
        try:
            done.result()
        except Exception as exc:
            fail(running[done], exc)
    return failure_response(failed, identifier)
