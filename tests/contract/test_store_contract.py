"""One contract for every Store: the in-memory store and DynamoStore (on moto) must agree.

The simulation's evidence about jobsched's conditions carries over to DynamoDB only because both
stores pass this same suite. Semantics checked against DynamoDB's documented behaviour (moto
agrees unless noted): a comparison against a missing attribute is false, except ``<>``, which is
true; a top-level ``None`` is an absent attribute.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jobsched.adapters.aws import RequestCounter, make_client
from jobsched.adapters.dynamodb_store import DynamoStore
from jobsched.core.errors import ConditionFailed, Throttled, TransientStoreError
from jobsched.core.limits import (
    DYNAMODB_MAX_ITEM_BYTES,
    DYNAMODB_MAX_TRANSACTION_ITEMS,
    RequestTooLarge,
    item_size,
)
from jobsched.core.run import run_key
from jobsched.core.writes import (
    JOBS,
    RUNS,
    STATE,
    Check,
    Cond,
    Delete,
    Put,
    Update,
    any_of,
    eq,
    exists,
    is_in,
    le,
    lt,
    ne,
    not_exists,
)
from jobsched.ports import DUE_INDEX, DUE_PROJECTED, TABLE_KEY, IndexName, Store
from jobsched_tools.emulator.provision import load_template, provision, table_specs, with_indexes
from jobsched_tools.fakes.memory_store import MemoryStore
from moto import mock_aws

EFFECTS = "effects"  # a staged-effects table with its own key, as the worker writes
DUE_RUNS = "contract-due-runs"  # a runs table with the `due` index (build step S3)


@pytest.fixture(scope="module")
def moto_tables() -> Iterator[tuple[Any, Any]]:
    """One in-process moto for the module, tables provisioned from template.yaml once (creating
    them per test costs most of a second); each test starts from emptied tables."""
    with mock_aws():
        dynamodb = make_client("dynamodb", region="us-east-1")
        sqs = make_client("sqs", region="us-east-1")
        resources = provision(dynamodb, sqs, prefix="contract", parameters={"ClaimShape": "legacy"})
        dynamodb.create_table(
            TableName=EFFECTS,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        # A runs table with the successor claim's index, which template.yaml does not create yet
        # (ports.UNDEPLOYED_INDEXES): made from the template's runs table plus the code's
        # definition, as the plan's deploy 1 will add it.
        due_spec = with_indexes(table_specs(load_template(), {"ClaimShape": "legacy"}), [DUE_INDEX])[
            "RunsTable"
        ]
        dynamodb.create_table(TableName=DUE_RUNS, **due_spec)
        yield dynamodb, resources


def _empty(dynamodb: Any, table: str, *key: str) -> None:
    names = {f"#k{i}": name for i, name in enumerate(key)}
    keys = [
        {name: item[name] for name in key}
        for page in dynamodb.get_paginator("scan").paginate(
            TableName=table, ProjectionExpression=", ".join(names), ExpressionAttributeNames=names
        )
        for item in page["Items"]
    ]
    for start in range(0, len(keys), 25):
        batch = [{"DeleteRequest": {"Key": k}} for k in keys[start : start + 25]]
        dynamodb.batch_write_item(RequestItems={table: batch})


@pytest.fixture
def dynamo(moto_tables: tuple[Any, Any]) -> Iterator[DynamoStore]:
    dynamodb, resources = moto_tables
    yield DynamoStore(
        dynamodb,
        resources.jobs_table,
        resources.state_table,
        resources.runs_table,
        table_keys={EFFECTS: ("pk",)},
    )
    _empty(dynamodb, resources.jobs_table, "job_id")
    _empty(dynamodb, resources.state_table, "job_id")
    _empty(dynamodb, resources.runs_table, *TABLE_KEY[RUNS])
    _empty(dynamodb, EFFECTS, "pk")


@pytest.fixture
def due_dynamo(moto_tables: tuple[Any, Any]) -> Iterator[DynamoStore]:
    dynamodb, resources = moto_tables
    yield DynamoStore(dynamodb, resources.jobs_table, resources.state_table, DUE_RUNS)
    _empty(dynamodb, DUE_RUNS, *TABLE_KEY[RUNS])


@pytest.fixture(params=["memory", "dynamodb"])
def due_store(request: pytest.FixtureRequest) -> Store:
    """A store whose runs table has the `due` index."""
    if request.param == "memory":
        return MemoryStore(extra_indexes=(DUE_INDEX,))
    dynamo_store: DynamoStore = request.getfixturevalue("due_dynamo")
    return dynamo_store


@pytest.fixture(params=["memory", "dynamodb"])
def store(request: pytest.FixtureRequest) -> Store:
    if request.param == "memory":
        return MemoryStore(extra_keys={EFFECTS: ("pk",)})
    dynamo_store: DynamoStore = request.getfixturevalue("dynamo")
    return dynamo_store


def why(text: str = "test") -> str:
    return text


JOB = {
    "job_id": "j1",
    "version": 3,
    "status": "active",
    "owner": "w1",
    "name": "nightly",
    "tags": ["a", "b"],
    "retry": {"max_attempts": 3, "backoff": {"base_ms": 1000}},
}


def seed(store: Store, item: dict[str, Any] | None = None) -> dict[str, Any]:
    item = dict(item or JOB)
    store.write([Put(JOBS, item, (not_exists("job_id", why()),), "seed")])
    return item


def rk(name: str) -> dict[str, str]:
    """A runs-table key (core/run.py run_key): the run id ``name``, or job "j"'s run ``j@name``."""
    return run_key(name if "@" in name else f"j@{name}")


def drain(store: Store, index: IndexName, partition: Any, limit: int, **bounds: Any) -> list[list[Any]]:
    """Every page of a query, following cursors until None."""
    pages: list[list[Any]] = []
    cursor = None
    while True:
        page = store.query(index, partition, limit=limit, cursor=cursor, **bounds)
        assert len(page.items) <= limit
        pages.append(page.items)
        cursor = page.cursor
        if cursor is None:
            return pages
        assert len(pages) < 1000


# ---------------------------------------------------------------------------------- put


def test_put_not_exists_creates_once_and_returns_the_current_item(store: Store) -> None:
    first = {**rk("r1"), "status": "pending", "version": 1}
    store.write([Put(RUNS, first, (not_exists("run_id", why()),), "claim")])
    with pytest.raises(ConditionFailed) as lost:
        store.write([Put(RUNS, {**first, "version": 9}, (not_exists("run_id", why()),), "claim again")])
    assert lost.value.op_index == 0
    assert lost.value.label == "claim again"
    assert lost.value.current == first
    assert store.get(RUNS, rk("r1")) == first


def test_unconditional_put_overwrites(store: Store) -> None:
    store.write([Put(RUNS, {**rk("r1"), "a": 1}, (), "p1")])
    store.write([Put(RUNS, {**rk("r1"), "b": 2}, (), "p2")])
    assert store.get(RUNS, rk("r1")) == {**rk("r1"), "b": 2}


# ---------------------------------------------------------------------------- conditions

CONDITIONS: list[tuple[str, Cond, bool]] = [
    ("eq true", eq("version", 3, why()), True),
    ("eq false", eq("version", 4, why()), False),
    ("eq string (reserved word status)", eq("status", "active", why()), True),
    ("eq reserved word owner false", eq("owner", "w2", why()), False),
    ("eq list", eq("tags", ["a", "b"], why()), True),
    ("eq map", eq("retry", {"max_attempts": 3, "backoff": {"base_ms": 1000}}, why()), True),
    ("eq other type", eq("version", "3", why()), False),
    ("ne true", ne("version", 4, why()), True),
    ("ne false", ne("version", 3, why()), False),
    ("ne other type", ne("version", "3", why()), True),
    ("lt true", lt("version", 4, why()), True),
    ("lt false (equal)", lt("version", 3, why()), False),
    ("le true (equal)", le("version", 3, why()), True),
    ("le false", le("version", 2, why()), False),
    ("gt true", Cond("gt", "version", why(), 2), True),
    ("gt false", Cond("gt", "version", why(), 3), False),
    ("ge true", Cond("ge", "version", why(), 3), True),
    ("ge false", Cond("ge", "version", why(), 4), False),
    ("lt string", lt("status", "b", why()), True),
    ("le string false", le("status", "aa", why()), False),
    ("in true", is_in("status", ["paused", "active"], why()), True),
    ("in false", is_in("status", ["paused", "invalid"], why()), False),
    ("in numbers", is_in("version", [1, 2, 3], why()), True),
    ("exists true", exists("owner", why()), True),
    ("exists false", exists("missing", why()), False),
    ("not_exists true", not_exists("missing", why()), True),
    ("not_exists false", not_exists("owner", why()), False),
    ("any_of one true", any_of(why(), eq("version", 9, why()), eq("status", "active", why())), True),
    ("any_of none true", any_of(why(), eq("version", 9, why()), eq("status", "paused", why())), False),
    ("any_of nested", any_of(why(), any_of(why(), not_exists("owner", why())), exists("name", why())), True),
    # Missing attributes: every comparison is false except <>, which is true (DynamoDB; moto agrees).
    ("missing eq", eq("missing", 1, why()), False),
    ("missing ne", ne("missing", 1, why()), True),
    ("missing lt", lt("missing", 1, why()), False),
    ("missing le", le("missing", 1, why()), False),
    ("missing gt", Cond("gt", "missing", why(), 1), False),
    ("missing ge", Cond("ge", "missing", why(), 1), False),
    ("missing in", is_in("missing", [1, 2], why()), False),
    ("missing or not_exists", any_of(why(), eq("missing", 1, why()), not_exists("missing", why())), True),
]


@pytest.mark.parametrize(("name", "cond", "holds"), CONDITIONS, ids=[c[0] for c in CONDITIONS])
def test_update_condition(store: Store, name: str, cond: Cond, holds: bool) -> None:
    seed(store)
    op = Update(JOBS, {"job_id": "j1"}, (cond,), f"update if {name}", set={"touched": 1})
    if holds:
        assert store.update(op) == {**JOB, "touched": 1}
    else:
        with pytest.raises(ConditionFailed) as lost:
            store.update(op)
        assert (lost.value.op_index, lost.value.label, lost.value.current) == (0, op.label, JOB)
        assert store.get(JOBS, {"job_id": "j1"}) == JOB


@pytest.mark.parametrize(("name", "cond", "holds"), CONDITIONS, ids=[c[0] for c in CONDITIONS])
def test_write_condition_matches_cond_holds(
    store: Store,
    name: str,  # noqa: ARG001 - the case's id column
    cond: Cond,
    holds: bool,
) -> None:
    """The store and the pure evaluator (``Cond.holds``) agree, through ``write`` too."""
    seed(store)
    assert cond.holds(JOB) is holds
    op = Update(JOBS, {"job_id": "j1"}, (cond,), "write", set={"touched": 1})
    if holds:
        store.write([op])
    else:
        with pytest.raises(ConditionFailed):
            store.write([op])


def test_conditions_on_an_absent_item(store: Store) -> None:
    key = {"job_id": "nobody"}
    with pytest.raises(ConditionFailed) as lost:
        store.update(Update(JOBS, key, (eq("version", 1, why()),), "bump"))
    assert lost.value.current is None
    assert store.get(JOBS, key) is None
    # <> on an absent item holds (every attribute is missing), and an update creates the item.
    assert store.update(
        Update(JOBS, key, (ne("status", "active", why()),), "create", set={"version": 1})
    ) == {
        "job_id": "nobody",
        "version": 1,
    }


def test_all_condition_parts_must_hold(store: Store) -> None:
    seed(store)
    op = Update(
        JOBS, {"job_id": "j1"}, (eq("version", 3, why()), eq("status", "paused", why())), "both", set={"x": 1}
    )
    with pytest.raises(ConditionFailed):
        store.update(op)
    both = Update(
        JOBS, {"job_id": "j1"}, (eq("version", 3, why()), eq("status", "active", why())), "both", set={"x": 1}
    )
    assert store.update(both)["x"] == 1


# ---------------------------------------------------------------------------- updates


def test_update_set_remove_add_set_if_missing(store: Store) -> None:
    seed(store)
    new = store.update(
        Update(
            JOBS,
            {"job_id": "j1"},
            (eq("version", 3, why()),),
            "all clauses",
            set={"version": 4, "status": "paused", "payload": {"k": [1, "two", None, True]}},
            remove=("owner", "never_there"),
            add={"catchups": 2, "version_counter": 5},
            set_if_missing={"name": "other", "first_started_at": 1000},
        )
    )
    expected = {
        **{k: v for k, v in JOB.items() if k != "owner"},
        "version": 4,
        "status": "paused",
        "payload": {"k": [1, "two", None, True]},
        "catchups": 2,
        "version_counter": 5,
        "first_started_at": 1000,
    }
    assert new == expected
    assert store.get(JOBS, {"job_id": "j1"}) == expected
    again = store.update(Update(JOBS, {"job_id": "j1"}, (), "add again", add={"catchups": 3}))
    assert again["catchups"] == 5
    assert type(again["catchups"]) is int


def test_update_to_none_removes_the_attribute(store: Store) -> None:
    seed(store)
    new = store.update(Update(JOBS, {"job_id": "j1"}, (), "clear owner", set={"owner": None}))
    assert "owner" not in new
    with pytest.raises(ConditionFailed):
        store.update(Update(JOBS, {"job_id": "j1"}, (exists("owner", why()),), "owner?"))


def test_put_drops_top_level_none_and_keeps_nested_none(store: Store) -> None:
    store.write([Put(RUNS, {**rk("r1"), "owner": None, "m": {"a": None}, "l": [None]}, (), "p")])
    assert store.get(RUNS, rk("r1")) == {**rk("r1"), "m": {"a": None}, "l": [None]}


def test_update_with_no_changes_creates_the_key_only_item(store: Store) -> None:
    assert store.update(Update(RUNS, rk("r1"), (not_exists("run_id", why()),), "touch")) == rk("r1")


def test_update_cannot_change_the_key(store: Store) -> None:
    seed(store)
    with pytest.raises(ValueError):
        store.update(Update(JOBS, {"job_id": "j1"}, (), "rekey", set={"job_id": "j2"}))
    with pytest.raises(ValueError):
        store.update(Update(JOBS, {"job_id": "j1"}, (), "unkey", remove=("job_id",)))
    # Setting the key to its own value is harmless.
    assert store.update(Update(JOBS, {"job_id": "j1"}, (), "same", set={"job_id": "j1", "x": 1}))["x"] == 1


def test_update_names_each_attribute_once(store: Store) -> None:
    seed(store)
    with pytest.raises(ValueError):
        store.update(Update(JOBS, {"job_id": "j1"}, (), "overlap", set={"owner": "w2"}, remove=("owner",)))


def test_floats_are_rejected(store: Store) -> None:
    with pytest.raises(TypeError):
        store.write([Put(RUNS, {**rk("r1"), "ratio": 0.5}, (), "float")])


# ------------------------------------------------------------------------ transactions


def test_transaction_applies_all(store: Store) -> None:
    seed(store)
    store.write(
        [
            Update(JOBS, {"job_id": "j1"}, (eq("version", 3, why()),), "advance", set={"version": 4}),
            Put(
                RUNS,
                {**rk("j1@1"), "scheduled_at": 1},
                (not_exists("run_id", why()),),
                "new",
            ),
            Check(RUNS, rk("j1@0"), (not_exists("run_id", why()),), "no such run"),
            Put(EFFECTS, {"pk": "e1", "value": 1}, (not_exists("pk", why()),), "effect"),
        ]
    )
    assert store.get(JOBS, {"job_id": "j1"}) == {**JOB, "version": 4}
    assert store.get(RUNS, rk("j1@1")) == {**rk("j1@1"), "scheduled_at": 1}
    assert store.get(EFFECTS, {"pk": "e1"}) == {"pk": "e1", "value": 1}


@pytest.mark.parametrize("failing", [0, 1, 2, 3])
def test_transaction_is_all_or_nothing_and_names_the_failing_op(store: Store, failing: int) -> None:
    seed(store)
    store.write([Put(RUNS, {**rk("old"), "status": "running", "version": 7}, (), "seed run")])
    store.write([Put(RUNS, {**rk("other"), "status": "succeeded"}, (), "seed other")])
    ops = [
        Update(
            JOBS,
            {"job_id": "j1"},
            (eq("version", 99 if failing == 0 else 3, why()),),
            "advance job",
            set={"version": 4},
        ),
        Put(
            RUNS,
            {**rk("old" if failing == 1 else "new"), "status": "pending"},
            (not_exists("run_id", why()),),
            "create run",
        ),
        Check(RUNS, rk("ghost" if failing == 2 else "other"), (exists("run_id", why()),), "run exists"),
        Update(
            RUNS,
            rk("old"),
            (eq("version", 8 if failing == 3 else 7, why()),),
            "fence",
            set={"version": 8},
        )
        if failing != 1
        else Put(EFFECTS, {"pk": "e"}, (), "effect"),
    ]
    with pytest.raises(ConditionFailed) as lost:
        store.write(ops)
    assert lost.value.op_index == failing
    assert lost.value.label == ops[failing].label
    assert lost.value.op is ops[failing]  # the very operation: services ask "was it my commit?"
    expected_current = {
        0: JOB,
        1: {**rk("old"), "status": "running", "version": 7},
        2: None,
        3: {**rk("old"), "status": "running", "version": 7},
    }[failing]
    assert lost.value.current == expected_current
    # Nothing was applied.
    assert store.get(JOBS, {"job_id": "j1"}) == JOB
    assert store.get(RUNS, rk("new")) is None
    assert store.get(RUNS, rk("old")) == {**rk("old"), "status": "running", "version": 7}
    assert store.get(EFFECTS, {"pk": "e"}) is None


def test_lone_check(store: Store) -> None:
    seed(store)
    store.write([Check(JOBS, {"job_id": "j1"}, (eq("status", "active", why()),), "active?")])
    with pytest.raises(ConditionFailed) as lost:
        store.write([Check(JOBS, {"job_id": "j1"}, (eq("status", "paused", why()),), "paused?")])
    assert (lost.value.op_index, lost.value.label, lost.value.current) == (0, "paused?", JOB)


def test_transaction_limits(store: Store) -> None:
    store.write([])  # nothing to do
    with pytest.raises(ValueError):
        store.write([Put(RUNS, {**rk(f"r{i}")}, (), "p") for i in range(DYNAMODB_MAX_TRANSACTION_ITEMS + 1)])
    with pytest.raises(ValueError):
        store.write([Put(RUNS, rk("r"), (), "p"), Update(RUNS, rk("r"), (), "u", set={"a": 1})])


def test_an_item_past_400_kb_is_rejected_before_anything_is_written(store: Store) -> None:
    """DynamoDB rejects an item past 400 KB, 409,600 bytes (names and values counted); moto does
    not always, so both stores check it themselves, as DynamoDB would."""
    big = {**rk("big"), "blob": "x" * DYNAMODB_MAX_ITEM_BYTES}
    assert item_size(big) > DYNAMODB_MAX_ITEM_BYTES
    with pytest.raises(RequestTooLarge):
        store.write([Put(RUNS, big, (), "too big")])
    with pytest.raises(RequestTooLarge):
        store.write([Put(RUNS, rk("ok"), (), "ok"), Put(RUNS, big, (), "too big")])
    assert store.get(RUNS, rk("ok")) is None  # the transaction wrote nothing
    fits = {**rk("fits"), "blob": "x" * (400_000 - 100)}  # (within moto's own 405,000 too)
    store.write([Put(RUNS, fits, (), "fits")])
    assert store.get(RUNS, rk("fits")) == fits


def test_a_transaction_past_4_mb_is_rejected_before_anything_is_written(store: Store) -> None:
    """DynamoDB rejects a TransactWriteItems whose items add up to more than 4 MB; moto does not."""
    chunk = [Put(RUNS, {**rk(f"r{i}"), "blob": "x" * 90_000}, (), f"p{i}") for i in range(50)]
    with pytest.raises(RequestTooLarge):
        store.write(chunk)
    assert store.get(RUNS, rk("r0")) is None
    store.write(chunk[:40])  # 3.6 MB: within the limit
    assert store.get(RUNS, rk("r39")) is not None


def test_transaction_of_many_items(store: Store) -> None:
    store.write(
        [Put(RUNS, {**rk(f"r{i:03d}"), "n": i}, (not_exists("run_id", why()),), "p") for i in range(100)]
    )
    assert store.get(RUNS, rk("r099")) == {**rk("r099"), "n": 99}


# ---------------------------------------------------------------------------- reads


def test_get_consistent_and_eventually_consistent(store: Store) -> None:
    seed(store)
    assert store.get(JOBS, {"job_id": "j1"}, consistent=True) == JOB
    assert store.get(JOBS, {"job_id": "j1"}, consistent=False) == JOB
    assert store.get(JOBS, {"job_id": "nope"}) is None


def test_delete(store: Store) -> None:
    seed(store)
    store.delete(JOBS, {"job_id": "j1"})
    assert store.get(JOBS, {"job_id": "j1"}) is None
    store.delete(JOBS, {"job_id": "j1"})  # deleting nothing is not an error


def test_conditional_delete(store: Store) -> None:
    seed(store)
    before = store.get(JOBS, {"job_id": "j1"})
    assert before is not None
    stale = (eq("version", -1, "the item changed since we read it"),)
    with pytest.raises(ConditionFailed) as lost:
        store.delete(JOBS, {"job_id": "j1"}, condition=stale, label="delete job")
    assert lost.value.label == "delete job" and lost.value.current == before
    assert store.get(JOBS, {"job_id": "j1"}) == before  # a lost condition deletes nothing
    store.delete(JOBS, {"job_id": "j1"}, condition=(eq("version", before["version"], "as read"),))
    assert store.get(JOBS, {"job_id": "j1"}) is None


def test_a_delete_in_a_transaction_lands_with_the_rest_or_not_at_all(store: Store) -> None:
    """A Delete beside a ConditionCheck on another item (the delete after completion: the job
    item goes only while the state is as read). Either condition lost: nothing is deleted, and
    ConditionFailed names the operation that lost; both hold: the item is gone."""
    seed(store)
    before = store.get(JOBS, {"job_id": "j1"})
    assert before is not None
    store.write([Put(STATE, {"job_id": "j1", "version": 3}, (), "state")])
    item_as_read = (eq("version", before["version"], "the job item as read"),)
    delete = Delete(JOBS, {"job_id": "j1"}, item_as_read, "delete after completion")
    with pytest.raises(ConditionFailed) as lost:
        store.write([delete, Check(STATE, {"job_id": "j1"}, (eq("version", 2, "state as read"),), "state")])
    assert lost.value.op_index == 1 and lost.value.label == "state"
    assert store.get(JOBS, {"job_id": "j1"}) == before
    stale = Delete(JOBS, {"job_id": "j1"}, (eq("version", -1, "as read"),), "delete after completion")
    with pytest.raises(ConditionFailed) as lost:
        store.write([stale, Check(STATE, {"job_id": "j1"}, (eq("version", 3, "state as read"),), "state")])
    assert lost.value.op_index == 0 and lost.value.current == before
    assert store.get(JOBS, {"job_id": "j1"}) == before
    store.write([delete, Check(STATE, {"job_id": "j1"}, (eq("version", 3, "state as read"),), "state")])
    assert store.get(JOBS, {"job_id": "j1"}) is None
    assert store.get(STATE, {"job_id": "j1"}) == {"job_id": "j1", "version": 3}
    store.write([Delete(JOBS, {"job_id": "j1"}, (), "delete nothing")])  # alone, no condition: a no-op


def test_a_delete_compares_maps_as_read(store: Store) -> None:
    """DynamoDB's = compares maps and lists as whole values ("EQ is supported for all data
    types, including lists and maps"): the delete after completion's condition on a job item
    as read includes its maps, so an edit inside ``retry`` loses it."""
    job = {"job_id": "m", "retry": {"max_attempts": 3, "jitter": True}, "tags": {}}
    store.write([Put(JOBS, job, (), "p")])
    changed = (eq("retry", {"max_attempts": 2, "jitter": True}, "as read"),)
    with pytest.raises(ConditionFailed):
        store.write([Delete(JOBS, {"job_id": "m"}, changed, "delete")])
    same = (eq("retry", {"jitter": True, "max_attempts": 3}, "as read"), eq("tags", {}, "as read"))
    store.write([Delete(JOBS, {"job_id": "m"}, same, "delete")])
    assert store.get(JOBS, {"job_id": "m"}) is None


def test_ints_stay_ints_and_nested_values_round_trip(store: Store) -> None:
    item = {
        **rk("r1"),
        "big": 2**53 + 1,
        "neg": -5,
        "zero": 0,
        "flag": False,
        "nested": {"a": [1, {"b": 2, "c": [True, None, "x"]}], "empty_map": {}, "empty_list": []},
        "text": "",
    }
    store.write([Put(RUNS, item, (), "p")])
    got = store.get(RUNS, rk("r1"))
    assert got == item
    assert got is not None
    assert type(got["big"]) is int and type(got["nested"]["a"][0]) is int
    assert type(got["flag"]) is bool


def _query_runs(store: Store) -> list[dict[str, Any]]:
    runs = [
        {**rk(f"j1@{i:02d}"), "scheduled_at": 1000 + i * 10, "status": "succeeded", "attempt": 1}
        for i in range(25)
    ]
    runs.append({**rk("j2@00"), "scheduled_at": 1050})  # another job's partition
    runs.append(rk("j1@nosort"))  # the base table holds every run, whatever attributes it has
    for start in range(0, len(runs), 25):
        store.write([Put(RUNS, run, (), f"run {start}") for run in runs[start : start + 25]])
    return [run for run in runs if run["job_id"] == "j1"]


@pytest.mark.parametrize("limit", [1, 4, 5, 100])
def test_runs_of_job_pages_through_the_jobs_partition(store: Store, limit: int) -> None:
    """The runs table is keyed by (job_id, run_id): a job's history is a query of the table's own
    key, no index. Whole items, in run id order, every page within the limit."""
    written = _query_runs(store)
    pages = drain(store, "runs-of-job", "j1", limit)
    items = [item for page in pages for item in page]
    assert items == sorted(written, key=lambda run: run["run_id"])
    # A page may end exactly at the last match and still carry a cursor (DynamoDB does, moto
    # sometimes): at most one trailing empty page.
    assert len(pages) <= max(1, math.ceil(len(written) / limit)) + 1
    assert all(pages[:-1])
    assert drain(store, "runs-of-job", "nobody", limit) == [[]]


def test_runs_of_job_may_be_read_strongly_consistent(store: Store) -> None:
    """A base-table query may be strongly consistent (ConsistentRead); an index query may not,
    as DynamoDB refuses ConsistentRead on a global secondary index."""
    written = _query_runs(store)
    assert store.query("runs-of-job", "j1", limit=100, consistent=True).items == sorted(
        written, key=lambda run: run["run_id"]
    )
    with pytest.raises(ValueError):
        store.query("lease", 0, consistent=True)


def test_runs_of_job_takes_no_sort_bounds(store: Store) -> None:
    # Its sort key is the run id (a string), not an instant: callers order by scheduled_at.
    with pytest.raises(ValueError):
        store.query("runs-of-job", "j1", sort_from=1000)
    with pytest.raises(ValueError):
        store.query("runs-of-job", "j1", sort_to=1000)


def test_a_runs_key_needs_the_job_id(store: Store) -> None:
    """DynamoDB rejects a key without its partition attribute (ValidationException): the fakes
    too, so a call site that keys a run by run_id alone fails in tests as it would on AWS."""
    store.write([Put(RUNS, rk("j1@a"), (), "seed")])
    with pytest.raises(ValueError):
        store.get(RUNS, {"run_id": "j1@a"})
    with pytest.raises(ValueError):
        store.update(Update(RUNS, {"run_id": "j1@a"}, (), "no job id", set={"x": 1}))
    with pytest.raises(ValueError):
        store.write([Put(RUNS, {"run_id": "j1@b"}, (), "no job id")])
    with pytest.raises(ValueError):
        store.write(
            [
                Check(RUNS, {"run_id": "j1@a"}, (exists("run_id", why()),), "no job id"),
                Put(JOBS, JOB, (), "j"),
            ]
        )
    assert store.get(RUNS, rk("j1@a")) == rk("j1@a")


def test_next_run_index_is_sparse_and_partitioned(store: Store) -> None:
    jobs = [
        {"job_id": f"a{i}", "sched_shard": i % 2, "next_run_at": 5000 - i, "status": "active"}
        for i in range(6)
    ]
    jobs.append({"job_id": "paused", "status": "paused"})
    jobs.append({"job_id": "half", "sched_shard": 0})  # no sort key: not in the index
    store.write([Put(STATE, job, (), "j") for job in jobs])
    shard0 = [item["job_id"] for page in drain(store, "next-run", 0, 100) for item in page]
    shard1 = [item["job_id"] for page in drain(store, "next-run", 1, 2, sort_to=4998) for item in page]
    assert shard0 == ["a4", "a2", "a0"]  # ascending next_run_at
    assert shard1 == ["a5", "a3"]
    # Pausing removes a job from the index.
    store.update(
        Update(
            STATE,
            {"job_id": "a0"},
            (),
            "pause",
            set={"status": "paused"},
            remove=("next_run_at", "sched_shard"),
        )
    )
    assert [item["job_id"] for page in drain(store, "next-run", 0, 100) for item in page] == ["a4", "a2"]


def test_lease_index_holds_only_leased_runs(store: Store) -> None:
    for i in range(6):
        store.write(
            [
                Put(
                    RUNS,
                    {
                        **rk(f"r{i}"),
                        "status": "running",
                        "lease_shard": 3,
                        "check_at": 100 + i,
                        "owner": "w",
                    },
                    (),
                    "p",
                )
            ]
        )
    store.write([Put(RUNS, {**rk("done"), "status": "succeeded"}, (), "p")])
    entries = [item for page in drain(store, "lease", 3, 2, sort_to=103) for item in page]
    assert [item["run_id"] for item in entries] == ["j@r0", "j@r1", "j@r2", "j@r3"]
    # Keys only: the index's and the table's keys (job and run), never the run's other attributes.
    assert all(set(item) == {"job_id", "run_id", "lease_shard", "check_at"} for item in entries)
    store.update(
        Update(
            RUNS,
            rk("r1"),
            (exists("check_at", why()),),
            "finish",
            set={"status": "succeeded"},
            remove=("check_at", "lease_shard"),
        )
    )
    store.update(Update(RUNS, rk("r2"), (), "extend", set={"check_at": 200}))
    leased = [item["run_id"] for page in drain(store, "lease", 3, 100) for item in page]
    assert leased == ["j@r0", "j@r3", "j@r4", "j@r5", "j@r2"]
    assert drain(store, "lease", 4, 100) == [[]]


# --- the `due` index (docs/proposals/successor-claim-build.md §0, build step S3) -----------------

# A head as §0 describes it: every projected attribute, and the ones `due` leaves out.
HEAD = {
    "scheduled_at": 3_600_000,
    "epoch": 4,
    "head_version": 1,
    "after_run_id": "j@0#4",
    "def_hash": "abc",
    "timing": {"kind": "rate", "every_ms": 3_600_000},
    "misfire": "skip",
    "next_at": 7_200_000,
    "next_key": "j@7200000#4",
    "through": 0,
    "runs_before": 2,
    "catchups": 0,
    "overlap": "skip",
    "max_attempts": 3,
    "kind": "scheduled",
    "max_runs": 5,
}
LEFT_OUT = {"status": "scheduled", "version": 1, "lease_expires_at": 99, "owner": "w", "payload": "x" * 50}


def _due(store: Store, shard: int, limit: int = 100, **bounds: Any) -> list[dict[str, Any]]:
    return [item for page in drain(store, "due", shard, limit, **bounds) for item in page]


def test_due_index_is_sparse_sorted_by_check_at_and_pages(due_store: Store) -> None:
    """Only runs with both `lease_shard` and `check_at` are in `due` (a GSI is sparse: "only
    the items in the base table that contain those attributes appear in the index",
    https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-indexes-general-sparse-indexes.html),
    in `check_at` order within a shard, every page within the limit."""
    for i in range(5):
        item = {**rk(f"h{i}"), **HEAD, "lease_shard": 2, "check_at": 500 - i}
        due_store.write([Put(RUNS, item, (), "head")])
    due_store.write([Put(RUNS, {**rk("other"), "lease_shard": 3, "check_at": 1}, (), "p")])
    due_store.write([Put(RUNS, {**rk("unkeyed"), **HEAD, "lease_shard": 2}, (), "p")])  # no check_at
    due_store.write([Put(RUNS, {**rk("marker"), "status": "closed"}, (), "p")])  # neither key
    pages = drain(due_store, "due", 2, 2, sort_from=497)
    assert all(len(page) <= 2 for page in pages)
    assert [item["run_id"] for page in pages for item in page] == ["j@h3", "j@h2", "j@h1", "j@h0"]
    assert [item["run_id"] for item in _due(due_store, 2)] == ["j@h4", "j@h3", "j@h2", "j@h1", "j@h0"]
    assert [item["run_id"] for item in _due(due_store, 3)] == ["j@other"]
    # It shares `lease`'s key: the same runs, and `lease` still returns keys only.
    lease = [item for page in drain(due_store, "lease", 2, 100) for item in page]
    assert [item["run_id"] for item in lease] == ["j@h4", "j@h3", "j@h2", "j@h1", "j@h0"]
    assert all(set(item) == {"job_id", "run_id", "lease_shard", "check_at"} for item in lease)


def test_due_index_returns_the_keys_and_its_projection_and_nothing_else(due_store: Store) -> None:
    """INCLUDE: an entry holds the table's key, the index's key and the projected attributes the
    item has (API_Projection); `status` and `version`, which a start writes, are never in it
    (§0), nor any attribute outside the projection."""
    due_store.write(
        [Put(RUNS, {**rk("full"), **HEAD, **LEFT_OUT, "lease_shard": 1, "check_at": 10}, (), "p")]
    )
    partial = {
        **rk("partial"),
        "scheduled_at": 5,
        "kind": "scheduled",
        **LEFT_OUT,
        "lease_shard": 1,
        "check_at": 11,
    }
    due_store.write([Put(RUNS, partial, (), "p")])
    full, part = _due(due_store, 1)
    keys = {"job_id": "j", "lease_shard": 1}
    assert full == {**keys, "run_id": "j@full", "check_at": 10, **HEAD}
    assert part == {**keys, "run_id": "j@partial", "check_at": 11, "scheduled_at": 5, "kind": "scheduled"}
    assert set(full) == {"job_id", "run_id", "lease_shard", "check_at", *DUE_PROJECTED}


def test_due_index_follows_its_items_writes(due_store: Store) -> None:
    """A change to a projected attribute shows in the entry; a change outside the projection
    leaves it as it was; a new `check_at` moves it; removing `check_at` takes it out."""
    for name, check_at in (("a", 10), ("b", 20)):
        due_store.write(
            [Put(RUNS, {**rk(name), **HEAD, **LEFT_OUT, "lease_shard": 1, "check_at": check_at}, (), "p")]
        )
    due_store.update(Update(RUNS, rk("a"), (), "claim", set={"head_version": 2, "next_key": "j@9#4"}))
    due_store.update(
        Update(RUNS, rk("b"), (), "start", set={"status": "pending", "version": 2}, add={"n": 1})
    )
    a, b = _due(due_store, 1)
    assert (a["head_version"], a["next_key"]) == (2, "j@9#4")
    assert b == {"job_id": "j", "run_id": "j@b", "lease_shard": 1, "check_at": 20, **HEAD}
    due_store.update(Update(RUNS, rk("a"), (), "release", set={"check_at": 30}))
    assert [item["run_id"] for item in _due(due_store, 1)] == ["j@b", "j@a"]
    due_store.update(Update(RUNS, rk("b"), (), "commit", remove=("check_at", "lease_shard")))
    due_store.write([Delete(RUNS, rk("a"), (), "gone")])
    assert _due(due_store, 1) == []


def test_due_index_has_no_consistent_reads(due_store: Store) -> None:
    with pytest.raises(ValueError):
        due_store.query("due", 0, consistent=True)


def test_a_table_made_from_the_template_has_no_due_index(store: Store) -> None:
    """template.yaml does not create `due` yet (build step S3, off by default): a query of it is
    refused as DynamoDB refuses an index the table lacks (ValidationException), never served
    from nowhere and never taken for a transient error."""
    with pytest.raises(ValueError, match="due"):
        store.query("due", 0)


def test_scan_pagination(store: Store) -> None:
    store.write([Put(RUNS, {**rk(f"r{i:02d}"), "n": i}, (), "p") for i in range(23)])
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        page = store.scan(RUNS, limit=5, cursor=cursor)
        assert len(page.items) <= 5
        seen += [item["run_id"] for item in page.items]
        pages += 1
        cursor = page.cursor
        if cursor is None:
            break
        assert pages < 100
    assert sorted(seen) == [f"j@r{i:02d}" for i in range(23)]
    assert len(seen) == 23
    assert pages <= 6


def test_batch_get_returns_the_items_that_exist(store: Store) -> None:
    for i in range(120):
        store.write([Put(STATE, {"job_id": f"j{i:03d}", "n": i}, (), "p")])
    keys = [{"job_id": f"j{i:03d}"} for i in range(0, 200, 2)]  # 100 keys, 60 of them present
    for consistent in (False, True):
        found = store.batch_get(STATE, keys, consistent)
        assert sorted(item["n"] for item in found) == list(range(0, 120, 2))
    assert store.batch_get(RUNS, [rk("r1"), rk("r2")]) == []
    store.write([Put(RUNS, {**rk("r2"), "n": 2}, (), "p")])
    assert store.batch_get(RUNS, [rk("r1"), rk("r2")]) == [{**rk("r2"), "n": 2}]
    assert store.batch_get(STATE, []) == []
    with pytest.raises(ValueError):
        store.batch_get(STATE, [{"job_id": f"k{i}"} for i in range(101)])  # DynamoDB's limit: 100


# --------------------------------------------------------------------- staged effects


def test_extra_table_for_staged_effects(store: Store) -> None:
    store.write([Put(EFFECTS, {"pk": "order-1", "amount": 5}, (not_exists("pk", why()),), "effect")])
    with pytest.raises(ConditionFailed) as lost:
        store.write(
            [Put(EFFECTS, {"pk": "order-1", "amount": 6}, (not_exists("pk", why()),), "effect again")]
        )
    assert lost.value.current == {"pk": "order-1", "amount": 5}
    assert store.update(
        Update(EFFECTS, {"pk": "order-1"}, (eq("amount", 5, why()),), "bump", add={"amount": 1})
    ) == {
        "pk": "order-1",
        "amount": 6,
    }
    store.delete(EFFECTS, {"pk": "order-1"})
    assert store.get(EFFECTS, {"pk": "order-1"}) is None


# ------------------------------------------------------------------ round-trip property

scalars = st.one_of(
    st.text(max_size=8),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.booleans(),
    st.none(),
)
values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(min_size=1, max_size=6), children, max_size=4)
    ),
    max_leaves=12,
)
attribute_names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=8).filter(
    lambda name: name not in ("run_id", "job_id")
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(attributes=st.dictionaries(attribute_names, values, max_size=6), counter=st.integers(0, 10**9))
def test_item_values_round_trip(store: Store, attributes: dict[str, Any], counter: int) -> None:
    key = f"rt-{counter}"
    item = {**rk(key), **attributes}
    store.write([Put(RUNS, item, (), "round trip")])
    expected = {k: v for k, v in item.items() if v is not None}  # a top-level None is an absent attribute
    assert store.get(RUNS, rk(key)) == expected
    updated = store.update(Update(RUNS, rk(key), (), "set", set={"copy": attributes}))
    assert updated["copy"] == attributes
    assert store.update(Update(RUNS, rk(key), (eq("copy", attributes, why()),), "eq")) == updated


# ------------------------------------------------------------ DynamoStore adapter specifics


def test_every_attribute_name_goes_through_a_placeholder(dynamo: DynamoStore) -> None:
    captured: list[dict[str, Any]] = []

    def capture(params: dict[str, Any], **kwargs: Any) -> None:
        captured.append(params)

    dynamo.client.meta.events.register("provide-client-params.dynamodb.*", capture)
    seed(dynamo)
    dynamo.write(
        [
            Update(
                JOBS,
                {"job_id": "j1"},
                (
                    eq("status", "active", why()),
                    any_of(why(), is_in("owner", ["w1"], why()), not_exists("owner", why())),
                ),
                "reserved words",
                set={"status": "paused", "size": 1},
                remove=("owner",),
                add={"count": 1},
                set_if_missing={"name": "x"},
            ),
            Check(RUNS, rk("x"), (not_exists("run_id", why()),), "no run"),
        ]
    )
    request = captured[-1]["TransactItems"][0]["Update"]
    for text in (request["UpdateExpression"], request["ConditionExpression"]):
        for attr in ("status", "owner", "size", "count", "name"):
            assert attr not in text.replace("if_not_exists", "")
    assert set(request["ExpressionAttributeNames"].values()) == {"status", "owner", "size", "count", "name"}
    assert dynamo.get(JOBS, {"job_id": "j1"}) == {
        **{k: v for k, v in JOB.items() if k != "owner"},
        "status": "paused",
        "size": 1,
        "count": 1,
    }


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("ThrottlingException", Throttled),
        ("ProvisionedThroughputExceededException", Throttled),
        ("RequestLimitExceeded", Throttled),
        ("InternalServerError", TransientStoreError),
        ("ServiceUnavailable", TransientStoreError),
        ("ValidationException", ValueError),
    ],
)
def test_client_errors_map_to_core_errors(code: str, expected: type[Exception]) -> None:
    client = boto3.client("dynamodb", region_name="us-east-1")
    store = DynamoStore(client, "jobs-t", "state-t", "runs-t")
    with Stubber(client) as stub:
        stub.add_client_error("update_item", service_error_code=code, http_status_code=400)
        with pytest.raises(expected):
            store.update(Update(JOBS, {"job_id": "j"}, (), "u", set={"a": 1}))
        stub.add_client_error("get_item", service_error_code=code, http_status_code=400)
        with pytest.raises(expected):
            store.get(JOBS, {"job_id": "j"})


def _cancelled(codes: list[str]) -> dict[str, Any]:
    return {"CancellationReasons": [{"Code": code} for code in codes]}


@pytest.mark.parametrize(
    ("codes", "expected"),
    [
        (["None", "TransactionConflict"], TransientStoreError),
        (["ThrottlingError", "None"], Throttled),
        (["None", "None"], TransientStoreError),
        (["TransactionConflict", "ConditionalCheckFailed"], ConditionFailed),
    ],
)
def test_transaction_cancellations_map_to_core_errors(codes: list[str], expected: type[Exception]) -> None:
    client = boto3.client("dynamodb", region_name="us-east-1")
    store = DynamoStore(client, "jobs-t", "state-t", "runs-t")
    with Stubber(client) as stub:
        stub.add_client_error(
            "transact_write_items",
            service_error_code="TransactionCanceledException",
            http_status_code=400,
            response_meta=None,
            modeled_fields=_cancelled(codes),
        )
        with pytest.raises(expected) as raised:
            store.write([Put(RUNS, rk("a"), (), "first"), Put(RUNS, rk("b"), (), "second")])
    if expected is ConditionFailed:
        assert isinstance(raised.value, ConditionFailed)
        assert (raised.value.op_index, raised.value.label, raised.value.current) == (1, "second", None)


def test_connection_failures_are_transient() -> None:
    client = make_client(
        "dynamodb", endpoint_url="http://127.0.0.1:9", region="us-east-1", max_attempts=1, connect_timeout=0.5
    )
    store = DynamoStore(client, "jobs-t", "state-t", "runs-t")
    with pytest.raises(TransientStoreError):
        store.get(JOBS, {"job_id": "j"})
    with pytest.raises(TransientStoreError):
        store.write([Put(RUNS, rk("a"), (), "a"), Put(RUNS, rk("b"), (), "b")])


def test_request_counter_counts_calls_and_attempts(dynamo: DynamoStore) -> None:
    counter = RequestCounter().attach(dynamo.client)
    counter.attach(dynamo.client)  # attaching twice does not double count
    seed(dynamo)
    dynamo.get(JOBS, {"job_id": "j1"})
    dynamo.write([Put(RUNS, rk("a"), (), "a"), Put(RUNS, rk("b"), (), "b")])
    dynamo.query("runs-of-job", "j1")
    assert counter.snapshot()["calls"] == {
        "dynamodb:GetItem": 1,
        "dynamodb:PutItem": 1,
        "dynamodb:Query": 1,
        "dynamodb:TransactWriteItems": 1,
    }
    assert counter.total("dynamodb") == 4
    assert counter.total("sqs") == 0

    # A retried call: one call, two attempts. The first attempt gets a 500 before moto sees it.
    from botocore.awsrequest import AWSResponse

    class Raw:
        def stream(self, **kwargs: Any) -> Iterator[bytes]:
            yield b'{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"boom"}'

    failures = [1]

    def fail_once(request: Any, **kwargs: Any) -> AWSResponse | None:
        if failures:
            failures.pop()
            return AWSResponse(request.url, 500, {}, Raw())
        return None

    dynamo.client.meta.events.register_first("before-send.dynamodb.GetItem", fail_once)
    counter.reset()
    assert dynamo.get(JOBS, {"job_id": "j1"}) == JOB
    assert counter.calls["dynamodb:GetItem"] == 1
    assert counter.attempts["dynamodb:GetItem"] == 2
    counter.detach(dynamo.client)
    dynamo.get(JOBS, {"job_id": "j1"})
    assert counter.calls["dynamodb:GetItem"] == 1


def test_a_projected_read_returns_the_named_attributes_alone(store: Store) -> None:
    """ports.AttributeRead (DynamoDB's ProjectionExpression): the switch's read of a large
    bookkeeping item returns its ``claim_shape`` alone; an item without the attribute reads as an
    empty item, an absent item as None."""
    from jobsched.ports import AttributeRead, read_attributes

    assert isinstance(store, AttributeRead)
    book = {"job_id": "#book", "claim_shape": "successor", "suspects": {"j": 1}}
    store.write([Put(STATE, book, (), "book")])
    store.write([Put(STATE, {"job_id": "plain", "version": 1}, (), "plain")])
    assert store.get_attributes(STATE, {"job_id": "#book"}, ("claim_shape",)) == {"claim_shape": "successor"}
    assert read_attributes(store, STATE, {"job_id": "plain"}, ("claim_shape",)) == {}
    assert read_attributes(store, STATE, {"job_id": "absent"}, ("claim_shape",)) is None
