"""The local stack's moto server stays the same size however long it runs (emulator/moto_fast.py):
a transaction keeps no copy of the tables it names, no model object is kept once moto drops it,
stream iterators expire; and a cancelled transaction still leaves nothing behind, in the table or
in its stream. Counted in objects, not in seconds or megabytes."""

from __future__ import annotations

import contextlib
import gc
import json
import random
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


# --- A Query reads its partition (moto_fast._partition_queries) --------------------------------

JOBS = [f"j{n}" for n in range(4)]
RUN_IDS = [f"r{n}" for n in range(8)]


def _random_attrs(rng: random.Random) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    if rng.random() < 0.7:
        attrs["sh"] = {"N": str(rng.randrange(3))}
    if rng.random() < 0.7:
        attrs["at_ms"] = {"N": str(rng.randrange(100))}
    if rng.random() < 0.5:
        attrs["phase"] = {"S": rng.choice(("pending", "running"))}
    return attrs


def _random_write(dynamodb: Any, rng: random.Random) -> None:
    """One of the writes that change what a Query finds: a put, an update that sets or removes an
    index's keys (or creates the item), a delete, a transaction (cancelled or not), a batch."""
    key = {"job_id": {"S": rng.choice(JOBS)}, "run_id": {"S": rng.choice(RUN_IDS)}}
    kind = rng.randrange(5)
    if kind == 0:
        dynamodb.put_item(TableName="parts", Item={**key, **_random_attrs(rng)})
    elif kind == 1:
        attrs = _random_attrs(rng)
        removed = [name for name in ("sh", "at_ms", "phase") if name not in attrs and rng.random() < 0.5]
        sets = ", ".join(f"{name} = :{name}" for name in attrs)
        expression = " ".join(
            part
            for part in (f"SET {sets}" if sets else "", f"REMOVE {', '.join(removed)}" if removed else "")
            if part
        )
        if expression:
            dynamodb.update_item(
                TableName="parts",
                Key=key,
                UpdateExpression=expression,
                **({"ExpressionAttributeValues": {f":{n}": v for n, v in attrs.items()}} if attrs else {}),
            )
    elif kind == 2:
        dynamodb.delete_item(TableName="parts", Key=key)
    elif kind == 3:
        other = {"job_id": {"S": rng.choice(JOBS)}, "run_id": {"S": rng.choice(RUN_IDS)}}
        if other == key:
            return
        attrs = _random_attrs(rng) or {"phase": {"S": "pending"}}
        items: list[Any] = [
            {
                "Update": {
                    "TableName": "parts",
                    "Key": key,
                    "UpdateExpression": "SET " + ", ".join(f"{n} = :{n}" for n in attrs),
                    "ExpressionAttributeValues": {f":{n}": v for n, v in attrs.items()},
                }
            },
            {"Put": {"TableName": "parts", "Item": {**other, **_random_attrs(rng)}}},
        ]
        if rng.random() < 0.5:  # cancelled: both writes are rolled back, item by item
            items.append(
                {
                    "ConditionCheck": {
                        "TableName": "parts",
                        "Key": {"job_id": {"S": "absent"}, "run_id": {"S": "absent"}},
                        "ConditionExpression": "attribute_exists(run_id)",
                    }
                }
            )
        with contextlib.suppress(dynamodb.exceptions.TransactionCanceledException):
            dynamodb.transact_write_items(TransactItems=items)
    else:
        keys = {json.dumps(key, sort_keys=True): key}
        for _ in range(3):
            more = {"job_id": {"S": rng.choice(JOBS)}, "run_id": {"S": rng.choice(RUN_IDS)}}
            keys[json.dumps(more, sort_keys=True)] = more
        requests = [
            {"PutRequest": {"Item": {**k, **_random_attrs(rng)}}}
            if rng.random() < 0.6
            else {"DeleteRequest": {"Key": k}}
            for k in keys.values()
        ]
        dynamodb.batch_write_item(RequestItems={"parts": requests})


def _every_query(dynamodb: Any) -> list[Any]:
    """Every page of every Query the checks compare: each index partition, forwards and back, a
    key condition on the sort key, small pages; each table partition, whole and by prefix."""
    queries: list[dict[str, Any]] = []
    for shard in range(3):
        for forward in (True, False):
            queries.append(
                {
                    "IndexName": "due",
                    "KeyConditionExpression": "sh = :s AND at_ms BETWEEN :a AND :b",
                    "ExpressionAttributeValues": {
                        ":s": {"N": str(shard)},
                        ":a": {"N": "10"},
                        ":b": {"N": "80"},
                    },
                    "ScanIndexForward": forward,
                    "Limit": 3,
                }
            )
        queries.append(
            {
                "IndexName": "due",
                "KeyConditionExpression": "sh = :s",
                "ExpressionAttributeValues": {":s": {"N": str(shard)}},
            }
        )
    for status in ("pending", "running"):
        queries.append(
            {
                "IndexName": "by-status",
                "KeyConditionExpression": "#s = :s",
                "ExpressionAttributeNames": {"#s": "phase"},
                "ExpressionAttributeValues": {":s": {"S": status}},
                "Limit": 2,
            }
        )
    for job in (*JOBS, "absent"):
        queries.append(
            {
                "KeyConditionExpression": "job_id = :j",
                "ExpressionAttributeValues": {":j": {"S": job}},
                "Limit": 3,
            }
        )
        queries.append(
            {
                "KeyConditionExpression": "job_id = :j AND begins_with(run_id, :p)",
                "ExpressionAttributeValues": {":j": {"S": job}, ":p": {"S": "r1"}},
                "ConsistentRead": True,
            }
        )
    pages: list[Any] = []
    for query in queries:
        start: dict[str, Any] = {}
        while True:
            page = dynamodb.query(TableName="parts", **query, **start)
            pages.append(
                (query, page["Items"], page["Count"], page["ScannedCount"], page.get("LastEvaluatedKey"))
            )
            if "LastEvaluatedKey" not in page:
                break
            start = {"ExclusiveStartKey": page["LastEvaluatedKey"]}
    return pages


def test_a_query_answers_as_moto_does_from_its_partition(lean: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Random puts, updates (setting and removing index keys), deletes, transactions (cancelled
    ones restored item by item) and batches; after each few, every page of every Query is the page
    moto's own Query (every item of the table) returns."""
    _, _, dynamodb = lean
    dynamodb.create_table(
        TableName="parts",
        KeySchema=[
            {"AttributeName": "job_id", "KeyType": "HASH"},
            {"AttributeName": "run_id", "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": name, "AttributeType": kind}
            for name, kind in (
                ("job_id", "S"),
                ("run_id", "S"),
                ("sh", "N"),
                ("at_ms", "N"),
                ("phase", "S"),
            )
        ],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "due",
                "KeySchema": [
                    {"AttributeName": "sh", "KeyType": "HASH"},
                    {"AttributeName": "at_ms", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            },
            {
                "IndexName": "by-status",
                "KeySchema": [{"AttributeName": "phase", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            },
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    rng = random.Random(37)
    partitioned = Table.query
    compared = 0
    for step in range(240):
        _random_write(dynamodb, rng)
        if step % 12 != 11:
            continue
        ours = _every_query(dynamodb)
        with monkeypatch.context() as plain:
            plain.setattr(Table, "query", partitioned.__wrapped__)  # type: ignore[attr-defined]
            motos = _every_query(dynamodb)
        assert ours == motos, f"after write {step}"
        compared += sum(len(page[1]) for page in ours)
    assert compared > 200  # the checks compared items, not empty pages
