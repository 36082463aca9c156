"""HC12's read of a job's occurrence items (issue 37, the successor claim; ports.OccurrenceQuery):
the in-memory store and DynamoStore on moto must agree, as the rest of the store contract
(test_store_contract.py) does. The partitions are hand-written: nothing in the product writes
epoch ids, markers or end markers yet."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from jobsched.adapters.aws import make_client
from jobsched.adapters.dynamodb_store import DynamoStore
from jobsched.core.occurrences import find_head
from jobsched.core.run import end_run_id, manual_run_id, run_id_for
from jobsched.core.writes import RUNS, Put
from jobsched.ports import TABLE_KEY, OccurrenceQuery
from jobsched_tools.emulator.provision import provision
from jobsched_tools.fakes.memory_store import MemoryStore
from jobsched_tools.fakes.metering import MeteringStore
from jobsched_tools.iam.policy import authorisations
from moto import mock_aws

REGION, ACCOUNT = "us-east-1", "123456789012"
T0 = 1_796_428_800_000  # 2026-12-05T00:00:00Z
MINUTE = 60_000


@pytest.fixture(scope="module")
def moto_tables() -> Iterator[tuple[Any, Any]]:
    with mock_aws():
        dynamodb = make_client("dynamodb", region=REGION)
        resources = provision(dynamodb, make_client("sqs", region=REGION), prefix="occurrences")
        yield dynamodb, resources


@pytest.fixture
def dynamo(moto_tables: tuple[Any, Any]) -> Iterator[DynamoStore]:
    dynamodb, resources = moto_tables
    yield DynamoStore(dynamodb, resources.jobs_table, resources.state_table, resources.runs_table)
    keys = [
        {name: item[name] for name in TABLE_KEY[RUNS]}
        for page in dynamodb.get_paginator("scan").paginate(TableName=resources.runs_table)
        for item in page["Items"]
    ]
    for key in keys:
        dynamodb.delete_item(TableName=resources.runs_table, Key=key)


@pytest.fixture(params=["memory", "metering", "dynamodb"])
def store(request: pytest.FixtureRequest) -> Any:
    """A Store that also answers ``OccurrenceQuery`` (the annotation holds each to the protocol)."""
    reader: OccurrenceQuery
    if request.param == "memory":
        reader = MemoryStore()
    elif request.param == "metering":
        reader = MeteringStore()
    else:
        dynamo: DynamoStore = request.getfixturevalue("dynamo")
        reader = dynamo
    return reader


def _item(job_id: str, run_id: str, status: str, **extra: Any) -> dict[str, Any]:
    return {"job_id": job_id, "run_id": run_id, "status": status, **extra}


def seed(store: Any) -> dict[str, list[dict[str, Any]]]:
    """Job j1 under HC1's retime, with legacy records before it, epochs 9 and 10 at one instant
    (their ids sort as text: ``#10`` before ``#9``), a finished life's end marker and manual runs;
    job j10 beside it (its ids start with j1's partition value, but not its partition)."""

    def timed(minute: int, epoch: int | None = None) -> str:
        return run_id_for("j1", T0 + minute * MINUTE, epoch)

    inside = [
        _item("j1", timed(0), "succeeded", scheduled_at=T0),
        _item("j1", timed(1), "cancelled", scheduled_at=T0 + MINUTE),  # legacy: a record
        _item("j1", timed(5, 1), "succeeded", next_key=timed(10, 1)),
        _item("j1", timed(10, 1), "cancelled", next_key=timed(15, 1)),
        _item("j1", timed(15, 1), "closed", closes_epoch=1, closed_by=2),
        _item("j1", timed(10, 2), "succeeded", next_key=timed(20, 2)),
        _item("j1", timed(20, 9), "cancelled", next_key=timed(30, 9)),
        _item("j1", timed(20, 10), "scheduled", next_key=timed(30, 10)),
        _item("j1", timed(30, 10), "scheduled", next_key=end_run_id("j1", T0 + 30 * MINUTE, 10)),
        _item("j1", end_run_id("j1", T0 + 30 * MINUTE, 10), "end", runs_claimed=5),
    ]
    outside = [
        _item("j1", manual_run_id("j1", "r1"), "succeeded", scheduled_at=T0 + 2 * MINUTE),
        _item("j1", manual_run_id("j1", "0"), "pending", scheduled_at=T0 + 3 * MINUTE),
        _item("j10", run_id_for("j10", T0, 1), "scheduled", next_key=run_id_for("j10", T0 + MINUTE, 1)),
    ]
    items = inside + outside
    for start in range(0, len(items), 25):
        store.write([Put(RUNS, item, (), f"seed {item['run_id']}") for item in items[start : start + 25]])
    return {"inside": inside, "outside": outside}


def newest_first(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(items, key=lambda item: str(item["run_id"]), reverse=True)


@pytest.mark.parametrize("page_limit", [None, 1, 3, 10, 100])
def test_the_occurrence_items_newest_first_every_page_to_the_end(store: Any, page_limit: int | None) -> None:
    seeded = seed(store)
    assert store.occurrence_items("j1", page_limit) == newest_first(seeded["inside"])


def test_a_job_without_items_reads_none(store: Any) -> None:
    seed(store)
    assert store.occurrence_items("nobody") == []
    assert store.occurrence_items("j", 2) == []  # a prefix of j1 and j10: another partition


def test_the_read_finds_the_head_through_the_end_marker(store: Any) -> None:
    """The finished life's last run (30#10) names the end marker as its successor: it is claimed,
    and 20#10's successor exists. So the job has no head, which the read shows only because end
    markers are in its range (core.occurrences.occurrence_key_range)."""
    seed(store)
    assert find_head(store.occurrence_items("j1")).verdict == "none"
    assert find_head(store.occurrence_items("j10")).head == {
        "job_id": "j10",
        "run_id": run_id_for("j10", T0, 1),
        "status": "scheduled",
        "next_key": run_id_for("j10", T0 + MINUTE, 1),
    }


def test_a_page_limit_below_one_is_refused(store: Any) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        store.occurrence_items("j1", 0)


def test_the_metering_store_charges_a_strongly_consistent_read() -> None:
    store = MeteringStore()
    seed(store)
    store.reset_meters()
    store.occurrence_items("j1")
    assert store.read_units == 1.0  # well under 4 KB, strongly consistent: one unit


def test_dynamodb_is_asked_one_strongly_consistent_query_of_the_table_newest_first(
    dynamo: DynamoStore,
) -> None:
    """The request itself (moto would answer an eventually consistent or ascending Query the same
    way here): ConsistentRead, ScanIndexForward false, no IndexName, the key range. IAM: it needs
    ``dynamodb:Query`` on the runs table's own ARN, no index ARN."""
    seed(dynamo)
    sent: list[dict[str, Any]] = []

    def record(params: dict[str, Any], **_: Any) -> None:
        sent.append(dict(params))

    dynamo.client.meta.events.register("provide-client-params.dynamodb.Query", record)
    try:
        dynamo.occurrence_items("j1", 4)
    finally:
        dynamo.client.meta.events.unregister("provide-client-params.dynamodb.Query", record)
    assert len(sent) == 3  # 10 items, 4 a page
    first = sent[0]
    assert first["ConsistentRead"] is True and first["ScanIndexForward"] is False
    assert "IndexName" not in first and first["Limit"] == 4
    assert first["ExpressionAttributeValues"][":a"] == {"S": "j1@0"}
    assert first["ExpressionAttributeValues"][":b"] == {"S": "j1@end;"}
    assert all("ExclusiveStartKey" in later for later in sent[1:])
    table = dynamo.table_name(RUNS)
    assert authorisations("dynamodb", "Query", first, REGION, ACCOUNT) == [
        ("dynamodb:Query", f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{table}")
    ]
