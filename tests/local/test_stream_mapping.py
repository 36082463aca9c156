"""The local stack's DynamoDB stream event source mapping (``jobsched_tools.local.streams``) against a
moto server: in order, ``batchItemFailures`` retried from the first failure, a bounded number of
retries and then the failure destination, checkpoints that survive a restart, and records written
after a cancelled transaction (which makes moto replace the table object) still delivered."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from jobsched_tools.emulator.local_moto import LocalMoto, start_moto_server
from jobsched_tools.emulator.provision import Resources, provision
from jobsched_tools.local.streams import Checkpoints, StreamMapping
from moto.core import DEFAULT_ACCOUNT_ID
from moto.dynamodb.models import dynamodb_backends


@pytest.fixture
def moto() -> Iterator[tuple[LocalMoto, Resources, Any]]:
    with start_moto_server() as server:
        dynamodb = boto3.client("dynamodb", region_name="us-east-1", endpoint_url=server.endpoint_url)
        sqs = boto3.client("sqs", region_name="us-east-1", endpoint_url=server.endpoint_url)
        resources = provision(dynamodb, sqs, prefix="streams", parameters={"ClaimShape": "legacy"})
        yield server, resources, dynamodb
        server.reset()


class Function:
    """A stand-in for the registrar: records what it was given, fails what it is told to."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []  # job ids per invocation
        self.fail: dict[str, int] = {}  # job id -> how many more times to fail it
        self.raise_times = 0

    def __call__(self, event: dict[str, Any]) -> dict[str, Any]:
        records = event["Records"]
        self.batches.append([r["dynamodb"]["Keys"]["job_id"]["S"] for r in records])
        if self.raise_times:
            self.raise_times -= 1
            raise RuntimeError("the function crashed")
        failures = []
        for record in records:
            job_id = record["dynamodb"]["Keys"]["job_id"]["S"]
            if self.fail.get(job_id, 0) > 0:
                self.fail[job_id] -= 1
                failures.append({"itemIdentifier": record["dynamodb"]["SequenceNumber"]})
        return {"batchItemFailures": failures}

    def delivered(self) -> list[str]:
        return [job_id for batch in self.batches for job_id in batch]


def put(dynamodb: Any, resources: Resources, *job_ids: str) -> None:
    for job_id in job_ids:
        dynamodb.put_item(TableName=resources.jobs_table, Item={"job_id": {"S": job_id}})


def mapping(
    resources: Resources, server: LocalMoto, function: Function, path: Path | None = None, **kwargs: Any
) -> StreamMapping:
    assert resources.jobs_stream_arn
    streams = boto3.client("dynamodbstreams", region_name="us-east-1", endpoint_url=server.endpoint_url)
    checkpoints = Checkpoints(resources.jobs_stream_arn, path)
    return StreamMapping(streams, resources.jobs_stream_arn, function, checkpoints, **kwargs)


def drain(stream: StreamMapping, polls: int = 30) -> None:
    for _ in range(polls):
        stream.poll()


def test_a_job_put_after_a_cancelled_transaction_is_delivered(
    moto: tuple[LocalMoto, Resources, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    server, resources, dynamodb = moto
    function = Function()
    stream = mapping(resources, server, function)
    put(dynamodb, resources, "before")
    drain(stream, 2)
    assert function.delivered() == ["before"]

    # A cancelled transaction that moto rolls back by replacing the jobs table with its backup:
    # moto's own transaction, as it runs where emulator/moto_fast.py is not applied.
    from moto.dynamodb.models import DynamoDBBackend

    plain = getattr(DynamoDBBackend.transact_write_items, "__wrapped__", DynamoDBBackend.transact_write_items)
    monkeypatch.setattr(DynamoDBBackend, "transact_write_items", plain)
    tables = dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].tables
    jobs_table_object = tables[resources.jobs_table]
    with pytest.raises(dynamodb.exceptions.TransactionCanceledException):
        dynamodb.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": resources.jobs_table, "Item": {"job_id": {"S": "cancelled"}}}},
                {
                    "ConditionCheck": {
                        "TableName": resources.jobs_table,
                        "Key": {"job_id": {"S": "absent"}},
                        "ConditionExpression": "attribute_exists(job_id)",
                    }
                },
            ]
        )
    assert tables[resources.jobs_table] is not jobs_table_object  # the case this test is about

    put(dynamodb, resources, "after")
    drain(stream, 3)
    assert function.delivered() == ["before", "after"]  # the cancelled put never streamed


def test_item_failures_are_retried_from_the_first_one_in_order_then_passed_over(
    moto: tuple[LocalMoto, Resources, Any],
) -> None:
    server, resources, dynamodb = moto
    function = Function()
    destination: list[dict[str, Any]] = []
    reports: list[tuple[str, dict[str, Any]]] = []
    stream = mapping(
        resources,
        server,
        function,
        max_retries=3,
        failure_destination=destination.append,
        report=lambda name, fields: reports.append((name, fields)),
    )
    put(dynamodb, resources, "a", "b", "c", "d")
    function.fail = {"b": 2, "c": 100}  # b succeeds on its third delivery; c never does

    drain(stream)

    # b fails twice: retried from b each time (a is not redelivered); then c fails on every
    # delivery: the first attempt and max_retries=3 retries; then it is passed over, and d
    # (delivered each time after c) is delivered once more, alone.
    assert function.batches == [
        ["a", "b", "c", "d"],
        ["b", "c", "d"],
        ["b", "c", "d"],
        ["c", "d"],
        ["c", "d"],
        ["c", "d"],
        ["d"],
    ]
    assert [name for name, _ in reports] == ["local.stream_record_discarded"]
    assert len(destination) == 1
    info = destination[0]["DDBStreamBatchInfo"]
    assert info["batchSize"] == 1
    assert destination[0]["requestContext"]["condition"] == "RetryAttemptsExhausted"
    assert destination[0]["requestContext"]["approximateInvokeCount"] == 4
    assert info["startSequenceNumber"] == reports[0][1]["sequence_number"]


def test_a_function_error_retries_the_whole_batch(moto: tuple[LocalMoto, Resources, Any]) -> None:
    server, resources, dynamodb = moto
    function = Function()
    function.raise_times = 2
    stream = mapping(resources, server, function)
    put(dynamodb, resources, "a", "b")

    drain(stream, 5)

    assert function.batches == [["a", "b"], ["a", "b"], ["a", "b"]]


def test_a_restarted_reader_goes_on_from_its_checkpoint(
    moto: tuple[LocalMoto, Resources, Any], tmp_path: Path
) -> None:
    server, resources, dynamodb = moto
    checkpoint = tmp_path / "checkpoint.json"
    first = Function()
    put(dynamodb, resources, "a", "b")
    drain(mapping(resources, server, first, checkpoint), 2)
    put(dynamodb, resources, "c")

    second = Function()  # a new process, reading the same checkpoint file
    drain(mapping(resources, server, second, checkpoint), 2)

    assert first.delivered() == ["a", "b"]
    assert second.delivered() == ["c"]
