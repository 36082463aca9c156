"""The DynamoDB stream event source mapping of the local stack, as Lambda runs it for the registrar.

Per shard, in order: read a batch of up to ``batch_size`` records after the checkpoint, invoke the
function with it, and move the checkpoint only past what succeeded.

* The function's ``batchItemFailures`` (sequence numbers) are honoured: the checkpoint moves to
  just before the lowest one and the batch is retried from there, records after it included, as
  Lambda does. An invocation that raises, or a failure that names no record of the batch, fails
  the whole batch.
* A record that still fails after ``max_retries`` retries (the mapping's ``MaximumRetryAttempts``)
  is logged, described on the failure destination (the registrar's failure queue, as Lambda's
  ``OnFailure`` destination does) and passed over. Lambda's ``BisectBatchOnFunctionError`` splits
  a failing batch until the failing record is alone, so only that record is passed over; the
  records after it are delivered.
* The checkpoint (per shard, the sequence number of the last record done with) is kept in a file,
  so a registrar process that is restarted goes on from there.
* A fresh shard iterator is taken for every read, from the checkpoint (``AFTER_SEQUENCE_NUMBER``;
  ``TRIM_HORIZON`` before the first record). An iterator kept from one read to the next sees
  nothing new once moto has replaced the table object, which it does on a cancelled transaction.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

Invoke = Callable[[dict[str, Any]], Any]
Report = Callable[[str, dict[str, Any]], None]


def _ignore(name: str, fields: dict[str, Any]) -> None:
    pass


class Checkpoints:
    """Per shard, the sequence number of the last record done with; in ``path`` (JSON, written
    atomically) when given. A file written for another stream is ignored."""

    def __init__(self, stream_arn: str, path: Path | None = None) -> None:
        self.stream_arn = stream_arn
        self.path = path
        self.shards: dict[str, str] = {}
        if path is not None and path.exists():
            with contextlib.suppress(ValueError, OSError):
                data = json.loads(path.read_text(encoding="utf-8"))
                if data.get("stream_arn") == stream_arn:
                    self.shards = {str(k): str(v) for k, v in data.get("shards", {}).items()}

    def get(self, shard_id: str) -> str | None:
        return self.shards.get(shard_id)

    def set(self, shard_id: str, sequence_number: str) -> None:
        self.shards[shard_id] = sequence_number
        if self.path is not None:
            temporary = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
            temporary.write_text(
                json.dumps({"stream_arn": self.stream_arn, "shards": self.shards}), encoding="utf-8"
            )
            os.replace(temporary, self.path)


@dataclass
class _Retry:
    sequence_number: str  # the first record that failed
    failures: int


def lambda_stream_record(record: dict[str, Any], stream_arn: str, region: str) -> dict[str, Any]:
    """A ``GetRecords`` record as Lambda hands it to the function (JSON types, the source ARN)."""
    change = dict(record["dynamodb"])
    created = change.get("ApproximateCreationDateTime")
    if isinstance(created, datetime):
        change["ApproximateCreationDateTime"] = int(created.timestamp())
    return {
        "eventID": record.get("eventID", str(uuid.uuid4())),
        "eventName": record["eventName"],
        "eventVersion": record.get("eventVersion", "1.1"),
        "eventSource": "aws:dynamodb",
        "awsRegion": region,
        "dynamodb": change,
        "eventSourceARN": stream_arn,
    }


class StreamMapping:
    def __init__(
        self,
        client: Any,
        stream_arn: str,
        invoke: Invoke,
        checkpoints: Checkpoints,
        *,
        batch_size: int = 100,
        max_retries: int = 10,
        failure_destination: Callable[[dict[str, Any]], None] | None = None,
        report: Report = _ignore,
        region: str = "us-east-1",
    ) -> None:
        self.client = client
        self.stream_arn = stream_arn
        self.invoke = invoke
        self.checkpoints = checkpoints
        self.batch_size = batch_size
        self.max_retries = max_retries
        self.failure_destination = failure_destination
        self.report = report
        self.region = region
        self._retries: dict[str, _Retry] = {}

    def poll(self) -> int:
        """One batch from each shard that has records. Returns how many records were handed over
        and done with (0: nothing new, or a batch failed and waits to be retried)."""
        done = 0
        description = self.client.describe_stream(StreamArn=self.stream_arn)["StreamDescription"]
        for shard in description.get("Shards", []):
            done += self._poll_shard(str(shard["ShardId"]))
        return done

    def _poll_shard(self, shard_id: str) -> int:
        after = self.checkpoints.get(shard_id)
        position: dict[str, str] = (
            {"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": after}
            if after is not None
            else {"ShardIteratorType": "TRIM_HORIZON"}
        )
        iterator = self.client.get_shard_iterator(StreamArn=self.stream_arn, ShardId=shard_id, **position)[
            "ShardIterator"
        ]
        records = [
            dict(r)
            for r in self.client.get_records(ShardIterator=iterator, Limit=self.batch_size).get("Records", [])
        ]
        if not records:
            return 0
        numbers = [str(r["dynamodb"]["SequenceNumber"]) for r in records]
        failed_at = self._deliver(shard_id, records, numbers)
        if failed_at is None:
            self._retries.pop(shard_id, None)
            self.checkpoints.set(shard_id, numbers[-1])
            return len(records)
        if failed_at > 0:  # the records before the first failure are done with
            self.checkpoints.set(shard_id, numbers[failed_at - 1])
        first = numbers[failed_at]
        retry = self._retries.get(shard_id)
        retry = _Retry(first, retry.failures + 1 if retry and retry.sequence_number == first else 1)
        self._retries[shard_id] = retry
        if retry.failures <= self.max_retries:
            return failed_at
        # Retries exhausted: the record goes to the failure destination and is passed over.
        self._retries.pop(shard_id, None)
        record = records[failed_at]
        self.report(
            "local.stream_record_discarded",
            {
                "shard_id": shard_id,
                "sequence_number": first,
                "event_id": record.get("eventID"),
                "attempts": retry.failures,
            },
        )
        if self.failure_destination is not None:
            self.failure_destination(self._failure_record(shard_id, record, retry.failures))
        self.checkpoints.set(shard_id, first)
        return failed_at + 1

    def _deliver(self, shard_id: str, records: list[dict[str, Any]], numbers: list[str]) -> int | None:
        """Invoke with the batch; None when it all succeeded, else the index of the first record
        to retry from."""
        event = {"Records": [lambda_stream_record(r, self.stream_arn, self.region) for r in records]}
        try:
            result = self.invoke(event)
        except Exception as exc:  # the whole batch failed
            self.report(
                "local.stream_batch_failed",
                {
                    "shard_id": shard_id,
                    "first_sequence_number": numbers[0],
                    "error": f"{type(exc).__name__}: {exc}",
                },
            )
            return 0
        failures = result.get("batchItemFailures") if isinstance(result, dict) else None
        if not failures:
            return None
        identifiers = [str(f.get("itemIdentifier") or "") for f in failures]
        if any(i not in numbers for i in identifiers):
            return 0  # as Lambda: a failure that names no record of the batch fails all of it
        return min(numbers.index(i) for i in identifiers)

    def _failure_record(self, shard_id: str, record: dict[str, Any], attempts: int) -> dict[str, Any]:
        """What Lambda sends to a stream mapping's OnFailure destination (a description of the
        records, not the records)."""
        number = str(record["dynamodb"]["SequenceNumber"])
        created = record["dynamodb"].get("ApproximateCreationDateTime")
        arrival = created.isoformat() if isinstance(created, datetime) else str(created)
        return {
            "requestContext": {
                "requestId": str(uuid.uuid4()),
                "condition": "RetryAttemptsExhausted",
                "approximateInvokeCount": attempts,
            },
            "version": "1.0",
            "timestamp": datetime.now(UTC).isoformat(),
            "DDBStreamBatchInfo": {
                "shardId": shard_id,
                "startSequenceNumber": number,
                "endSequenceNumber": number,
                "approximateArrivalOfFirstRecord": arrival,
                "approximateArrivalOfLastRecord": arrival,
                "batchSize": 1,
                "streamArn": self.stream_arn,
            },
        }


def run(
    mapping: StreamMapping, stop: Callable[[], bool], poll_s: float, on_error: Callable[[Exception], None]
) -> None:
    """Poll until ``stop()``; wait ``poll_s`` whenever a pass handed nothing over (nothing new,
    or a failed batch waiting for its retry)."""
    while not stop():
        try:
            busy = mapping.poll() > 0
        except Exception as exc:  # the stream or the endpoint: try again after a pause
            on_error(exc)
            busy = False
        if not busy:
            time.sleep(poll_s)


def matches(pattern: Any, value: Any) -> bool:
    """Whether a stream record matches one of a mapping's ``FilterCriteria`` patterns, for the
    patterns this template uses: nested objects whose leaves list the values allowed (Lambda's
    filter syntax has more: prefixes, numeric ranges, exists; an unknown shape raises rather
    than guessing). https://docs.aws.amazon.com/lambda/latest/dg/invocation-eventfiltering.html"""
    if isinstance(pattern, list):
        if not all(isinstance(allowed, str | int | float | bool) for allowed in pattern):
            raise ValueError(f"filter values this local mapping does not implement: {pattern!r}")
        return value in pattern
    if isinstance(pattern, dict):
        return isinstance(value, dict) and all(matches(p, value.get(key)) for key, p in pattern.items())
    raise ValueError(f"filter pattern this local mapping does not implement: {pattern!r}")


def filtered(invoke: Invoke, patterns: list[dict[str, Any]]) -> Invoke:
    """``invoke`` behind a mapping's filter: a record that matches no pattern is dropped before
    the invocation, as Lambda drops it (the checkpoint moves past it); a batch with none left
    invokes nothing."""

    def run(event: dict[str, Any]) -> Any:
        records = [r for r in event["Records"] if any(matches(p, r) for p in patterns)]
        return invoke({"Records": records}) if records else {"batchItemFailures": []}

    return run
