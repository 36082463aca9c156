"""runtime/batch.py, the worker's and the registrar's partial batch responses, against what
Powertools' batch processors (which they replace, for the cold start) answer for the same batches:
the same response, the same records handled, the same invocation errors."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from aws_lambda_powertools.utilities.batch import (
    AsyncBatchProcessor,
    BatchProcessor,
    EventType,
    async_process_partial_response,
)
from aws_lambda_powertools.utilities.batch import (
    process_partial_response as powertools_process,
)
from aws_lambda_powertools.utilities.batch.exceptions import UnexpectedBatchTypeError
from jobsched.runtime import batch


def sqs(i: int, body: str) -> dict[str, Any]:
    return {"messageId": f"m{i}", "receiptHandle": f"h{i}", "body": body, "attributes": {}}


def stream(i: int, body: str) -> dict[str, Any]:
    return {
        "eventID": f"e{i}",
        "eventName": "INSERT",
        "body": body,
        "dynamodb": {"SequenceNumber": f"{i:03}"},
    }


BATCHES = {
    "all succeed": ["ok", "ok", "ok"],
    "one fails": ["ok", "fail", "ok"],
    "all fail": ["fail", "fail"],
    "one record": ["fail"],
    "ten mixed": ["ok", "fail", "fail", "ok", "ok", "fail", "ok", "ok", "fail", "ok"],
}


def handle(body: str) -> str:
    if body == "fail":
        raise RuntimeError("failed on purpose")
    return body


@pytest.mark.parametrize("bodies", BATCHES.values(), ids=BATCHES.keys())
def test_one_after_another_as_powertools_batch_processor(bodies: list[str]) -> None:
    event = {"Records": [stream(i, b) for i, b in enumerate(bodies)]}
    seen: list[str] = []

    def ours(record: dict[str, Any]) -> str:
        seen.append(record["eventID"])
        return handle(record["body"])

    theirs_seen: list[str] = []

    def theirs(record: Any) -> str:
        theirs_seen.append(record.event_id)
        return handle(record["body"])

    processor = BatchProcessor(event_type=EventType.DynamoDBStreams, raise_on_entire_batch_failure=False)
    expected = powertools_process(event=event, record_handler=theirs, processor=processor)
    got = batch.process_partial_response(event, ours, batch.stream_sequence_number, "DynamoDBStreams")
    assert got == expected
    assert seen == theirs_seen


@pytest.mark.parametrize("bodies", BATCHES.values(), ids=BATCHES.keys())
def test_in_a_pool_as_powertools_async_batch_processor(bodies: list[str]) -> None:
    event = {"Records": [sqs(i, b) for i, b in enumerate(bodies)]}
    failed: list[str] = []
    with ThreadPoolExecutor(max_workers=4) as pool:

        async def theirs(record: Any) -> str:
            return handle(record.body)

        processor = AsyncBatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
        expected = async_process_partial_response(event=event, record_handler=theirs, processor=processor)
        got = batch.process_partial_response_in_pool(
            event,
            pool,
            prepare=lambda record: record["body"],
            run=handle,
            record_failed=lambda record, _exc: failed.append(record["messageId"]),
            identifier=batch.sqs_message_id,
            source="SQS",
        )
    # Failures in the order they happened: here, those of the pool in any order.
    assert sorted(got["batchItemFailures"], key=str) == sorted(expected["batchItemFailures"], key=str)
    assert sorted(failed) == sorted(str(f["itemIdentifier"]) for f in got["batchItemFailures"])


def test_a_failure_to_prepare_is_reported_at_once_and_in_the_batch_s_order() -> None:
    event = {"Records": [sqs(i, b) for i, b in enumerate(["bad", "slow", "bad", "ok"])]}
    release = threading.Event()
    reported: list[str] = []

    def prepare(record: dict[str, Any]) -> str:
        if record["body"] == "bad":
            raise ValueError("not a run message")
        return str(record["body"])

    def run(body: str) -> None:
        if body == "slow":
            assert release.wait(timeout=10)

    def record_failed(record: dict[str, Any], _exc: Exception) -> None:
        reported.append(record["messageId"])
        if len(reported) == 2:
            release.set()  # both reported before the slow record could finish

    with ThreadPoolExecutor(max_workers=2) as pool:
        got = batch.process_partial_response_in_pool(
            event, pool, prepare, run, record_failed, batch.sqs_message_id, "SQS"
        )
    assert reported == ["m0", "m2"]
    assert got == {"batchItemFailures": [{"itemIdentifier": "m0"}, {"itemIdentifier": "m2"}]}


def test_an_error_while_reporting_a_failure_leaves_the_record_failed() -> None:
    event = {"Records": [sqs(0, "fail"), sqs(1, "ok")]}

    def record_failed(_record: dict[str, Any], _exc: Exception) -> None:
        raise KeyError("attributes")

    with ThreadPoolExecutor(max_workers=2) as pool:
        got = batch.process_partial_response_in_pool(
            event, pool, lambda r: r["body"], handle, record_failed, batch.sqs_message_id, "SQS"
        )
    assert got == {"batchItemFailures": [{"itemIdentifier": "m0"}]}


def test_a_base_exception_ends_the_invocation_as_it_did() -> None:
    def stop(_record: dict[str, Any]) -> None:
        raise SystemExit(1)

    with pytest.raises(SystemExit):
        batch.process_partial_response({"Records": [stream(0, "x")]}, stop, batch.stream_sequence_number, "x")


BAD_EVENTS: dict[str, Any] = {"no Records": {}, "empty": {"Records": []}, "not a list": {"Records": {"a": 1}}}


@pytest.mark.parametrize("event", BAD_EVENTS.values(), ids=BAD_EVENTS.keys())
def test_an_event_without_records_fails_the_invocation_as_powertools_does(event: Mapping[str, Any]) -> None:
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    with pytest.raises(UnexpectedBatchTypeError) as theirs:
        powertools_process(event=event, record_handler=handle, processor=processor)  # type: ignore[arg-type]
    ours: Callable[[dict[str, Any]], object] = lambda _record: None  # noqa: E731
    with pytest.raises(batch.UnexpectedBatchEvent) as raised:
        batch.process_partial_response(event, ours, batch.sqs_message_id, "SQS")
    assert str(raised.value) == theirs.value.msg


def test_an_event_that_is_not_a_mapping_is_a_value_error_as_in_powertools() -> None:
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    with pytest.raises(ValueError):
        powertools_process(event=["x"], record_handler=handle, processor=processor)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        batch.process_partial_response(["x"], handle, batch.sqs_message_id, "SQS")  # type: ignore[arg-type]
