"""The local stack's moto server stays the same size however long it runs (emulator/moto_fast.py):
a transaction keeps no copy of the tables it names, no model object is kept once moto drops it,
stream iterators expire; and a cancelled transaction still leaves nothing behind, in the table or
in its stream. Counted in objects, not in seconds or megabytes."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from jobsched_tools.emulator import moto_fast
from jobsched_tools.emulator.local_moto import LocalMoto, start_moto_server
from jobsched_tools.emulator.provision import Resources, provision
from moto.core import DEFAULT_ACCOUNT_ID
from moto.dynamodb.models import dynamodb_backends
from moto.dynamodb.models.table import Table


@pytest.fixture
def lean() -> Iterator[tuple[LocalMoto, Resources, Any]]:
    with start_moto_server(lean=True) as server:
        dynamodb = boto3.client("dynamodb", region_name="us-east-1", endpoint_url=server.endpoint_url)
        sqs = boto3.client("sqs", region_name="us-east-1", endpoint_url=server.endpoint_url)
        resources = provision(dynamodb, sqs, prefix="lean", parameters={"ClaimShape": "legacy"})
        yield server, resources, dynamodb
        server.reset()


def tables_alive() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, Table))


def claim(dynamodb: Any, resources: Resources, n: int, *, cancel: bool) -> None:
    """A transaction over both tables, like the trigger's claim; ``cancel`` makes its condition
    on the job fail."""
    update = {
        "TableName": resources.jobs_table,
        "Key": {"job_id": {"S": "j"}},
        "UpdateExpression": "SET n = :n",
        "ConditionExpression": "n = :wrong" if cancel else "attribute_exists(job_id)",
        "ExpressionAttributeValues": {":n": {"N": str(n)}, **({":wrong": {"N": "-1"}} if cancel else {})},
    }
    items: list[Any] = [
        {
            "Put": {
                "TableName": resources.runs_table,
                "Item": {"job_id": {"S": "j"}, "run_id": {"S": f"j@r{n}"}},
            }
        },
        {"Update": update},
    ]
    if cancel:
        with pytest.raises(dynamodb.exceptions.TransactionCanceledException):
            dynamodb.transact_write_items(TransactItems=items)
    else:
        dynamodb.transact_write_items(TransactItems=items)


def test_transactions_keep_no_table_copies(lean: tuple[LocalMoto, Resources, Any]) -> None:
    _, resources, dynamodb = lean
    dynamodb.put_item(TableName=resources.jobs_table, Item={"job_id": {"S": "j"}})
    claim(dynamodb, resources, 1, cancel=False)
    before = tables_alive()
    tracked = len(Table.instances_tracked)  # type: ignore[attr-defined]

    for n in range(2, 42):
        claim(dynamodb, resources, n, cancel=n % 2 == 0)

    assert tables_alive() == before  # moto alone keeps two (the backups) per transaction
    assert len(Table.instances_tracked) == tracked  # type: ignore[attr-defined]


def test_a_cancelled_transaction_leaves_no_item_and_no_stream_record(
    lean: tuple[LocalMoto, Resources, Any],
) -> None:
    _, resources, dynamodb = lean
    dynamodb.put_item(TableName=resources.jobs_table, Item={"job_id": {"S": "j"}, "n": {"N": "7"}})
    table = dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].tables[resources.jobs_table]
    records = len(table.stream_shard.items)

    with pytest.raises(dynamodb.exceptions.TransactionCanceledException):
        dynamodb.transact_write_items(
            TransactItems=[
                {
                    "Update": {  # applied by moto, then rolled back
                        "TableName": resources.jobs_table,
                        "Key": {"job_id": {"S": "j"}},
                        "UpdateExpression": "SET n = :n",
                        "ExpressionAttributeValues": {":n": {"N": "8"}},
                    }
                },
                {"Put": {"TableName": resources.jobs_table, "Item": {"job_id": {"S": "new"}}}},
                {
                    "ConditionCheck": {
                        "TableName": resources.runs_table,
                        "Key": {"job_id": {"S": "j"}, "run_id": {"S": "j@absent"}},
                        "ConditionExpression": "attribute_exists(run_id)",
                    }
                },
            ]
        )

    assert dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].tables[resources.jobs_table] is table
    assert len(table.stream_shard.items) == records
    kept = dynamodb.get_item(TableName=resources.jobs_table, Key={"job_id": {"S": "j"}}, ConsistentRead=True)
    assert kept["Item"]["n"] == {"N": "7"}
    assert "Item" not in dynamodb.get_item(TableName=resources.jobs_table, Key={"job_id": {"S": "new"}})


def test_stream_iterators_expire(
    lean: tuple[LocalMoto, Resources, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    server, resources, _ = lean
    assert resources.jobs_stream_arn
    streams = boto3.client("dynamodbstreams", region_name="us-east-1", endpoint_url=server.endpoint_url)
    shard = streams.describe_stream(StreamArn=resources.jobs_stream_arn)["StreamDescription"]["Shards"][0]

    def read() -> None:
        iterator = streams.get_shard_iterator(
            StreamArn=resources.jobs_stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        streams.get_records(ShardIterator=iterator)

    from moto.dynamodbstreams.models import dynamodbstreams_backends

    backend = dynamodbstreams_backends[DEFAULT_ACCOUNT_ID]["us-east-1"]
    for _ in range(20):
        read()
    assert len(backend.shard_iterators) >= 20  # kept for their 15 minutes

    monkeypatch.setattr(moto_fast, "ITERATOR_TTL_S", -1)  # every iterator issued so far has expired
    read()
    assert len(backend.shard_iterators) <= 2  # the one just issued and the one GetRecords returned


def test_a_cancelled_transaction_restores_an_item_of_a_table_with_a_range_key(lean: Any) -> None:
    """The runs table is keyed by (job_id, run_id): its items are restored one by one too."""
    _, resources, dynamodb = lean
    key = {"job_id": {"S": "j"}, "run_id": {"S": "j@1"}}
    dynamodb.put_item(TableName=resources.runs_table, Item={**key, "v": {"N": "1"}})
    table = dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].tables[resources.runs_table]
    with pytest.raises(dynamodb.exceptions.TransactionCanceledException):
        dynamodb.transact_write_items(
            TransactItems=[
                {
                    "Update": {
                        "TableName": resources.runs_table,
                        "Key": key,
                        "UpdateExpression": "SET v = :v",
                        "ExpressionAttributeValues": {":v": {"N": "2"}},
                    }
                },
                {
                    "Put": {
                        "TableName": resources.runs_table,
                        "Item": {"job_id": {"S": "k"}, "run_id": {"S": "k@1"}},
                    }
                },
                {
                    "ConditionCheck": {
                        "TableName": resources.runs_table,
                        "Key": {"job_id": {"S": "j"}, "run_id": {"S": "j@absent"}},
                        "ConditionExpression": "attribute_exists(run_id)",
                    }
                },
            ]
        )
    assert dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].tables[resources.runs_table] is table
    kept = dynamodb.get_item(TableName=resources.runs_table, Key=key, ConsistentRead=True)
    assert kept["Item"]["v"] == {"N": "1"}
    gone = dynamodb.get_item(
        TableName=resources.runs_table,
        Key={"job_id": {"S": "k"}, "run_id": {"S": "k@1"}},
        ConsistentRead=True,
    )
    assert "Item" not in gone
