"""Build step S3 (docs/proposals/successor-claim-build.md §5): the `due` index, defined once in
code (``jobsched.ports.index_definition``) and created by template.yaml under ``ClaimShape``
migrating and successor (tests/template/test_template_claim_shape.py holds each shape's indexes). These
hold that definition to the plan's §0, the template's `due` to it, and the tooling that adds it to
a legacy stack's tables (provision's ``extra_indexes``, the migrating deploy on moto).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from jobsched.adapters.dynamodb_store import DynamoStore
from jobsched.core.run import run_key
from jobsched.core.writes import RUNS, Put
from jobsched.ports import (
    DUE_INDEX,
    DUE_PROJECTED,
    INDEX_KEYS,
    INDEX_PROJECTION,
    INDEX_TABLE,
    index_definition,
)
from jobsched_tools.emulator.provision import (
    TemplateError,
    load_template,
    provision,
    table_specs,
    with_indexes,
)
from jobsched_tools.ops import capacity
from moto import mock_aws

PLAN = Path(__file__).resolve().parents[2] / "docs" / "proposals" / "successor-claim-build.md"
# DynamoDB's limits on an INCLUDE projection (Projection, NonKeyAttributes: "Maximum number of 20
# items"; "the total count of NonKeyAttributes summed across all of the secondary indexes, must
# not exceed 100": https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_Projection.html).
MAX_NON_KEY_PER_INDEX = 20
MAX_NON_KEY_PER_TABLE = 100


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return load_template()


def _plan_due() -> tuple[tuple[str, str], list[str]]:
    """The `due` index's key and projected attributes as the plan's §0 writes them."""
    text = PLAN.read_text(encoding="utf-8")
    section = " ".join(text.split("**The `due` index**", 1)[1].split("\n\n", 1)[0].split())
    key = re.match(r"\(runs table; key `(\w+)`, `(\w+)`\)", section)
    assert key, section[:80]
    projects = section.split("It projects (`INCLUDE`)", 1)[1].split(".", 1)[0]
    assert "`status` and `version` are left out on purpose" in section
    return (key[1], key[2]), re.findall(r"`(\w+)`", projects)


def test_the_code_defines_due_as_the_plan_says() -> None:
    """Key, projection type and projected attributes, in the plan's order; never `status` or
    `version` (a start writes both: §0)."""
    plan_key, plan_projected = _plan_due()
    assert len(plan_projected) == 16
    assert list(DUE_PROJECTED) == plan_projected
    assert INDEX_KEYS[DUE_INDEX] == plan_key == ("lease_shard", "check_at")
    assert INDEX_TABLE[DUE_INDEX] == "runs"
    assert not {"status", "version"} & set(INDEX_PROJECTION[DUE_INDEX])
    assert index_definition(DUE_INDEX) == {
        "IndexName": "due",
        "KeySchema": [
            {"AttributeName": "lease_shard", "KeyType": "HASH"},
            {"AttributeName": "check_at", "KeyType": "RANGE"},
        ],
        "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": plan_projected},
    }


def test_template_yaml_creates_due_as_the_code_defines_it_and_a_legacy_stack_takes_it_in_one_update(
    template: dict[str, Any],
) -> None:
    """Under migrating and successor the runs table has `due`, as ports defines it (the keys, the
    INCLUDE projection of DUE_PROJECTED). Deploy 1 adds one index to a legacy stack's runs table,
    which UpdateTable allows ("You can create or delete only one global secondary index per
    UpdateTable operation",
    https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_UpdateTable.html), and
    needs no new attribute definition: `due`'s keys are `lease`'s, declared as numbers."""
    for shape in ("migrating", "successor"):
        runs = table_specs(template, {"ClaimShape": shape})["RunsTable"]
        (due,) = [index for index in runs["GlobalSecondaryIndexes"] if index["IndexName"] == DUE_INDEX]
        assert due == index_definition(DUE_INDEX)
        assert due["Projection"]["NonKeyAttributes"] == list(DUE_PROJECTED)
    legacy = table_specs(template, {"ClaimShape": "legacy"})["RunsTable"]
    assert [index["IndexName"] for index in legacy["GlobalSecondaryIndexes"]] == ["lease"]
    declared = {attr["AttributeName"]: attr["AttributeType"] for attr in legacy["AttributeDefinitions"]}
    assert {key: declared.get(key) for key in INDEX_KEYS[DUE_INDEX]} == {"lease_shard": "N", "check_at": "N"}


def test_due_fits_dynamodbs_projection_limits(template: dict[str, Any]) -> None:
    """At most 20 projected attributes an index, and 100 across the table's indexes, with `due`
    beside the template's."""
    specs = table_specs(template, {"ClaimShape": "migrating"})  # due beside lease
    for spec in specs.values():
        counts = [
            len(i["Projection"].get("NonKeyAttributes", [])) for i in spec.get("GlobalSecondaryIndexes", [])
        ]
        assert all(count <= MAX_NON_KEY_PER_INDEX for count in counts)
        assert sum(counts) <= MAX_NON_KEY_PER_TABLE
    assert len(DUE_PROJECTED) <= MAX_NON_KEY_PER_INDEX


def test_with_indexes_adds_what_a_table_lacks_to_it(template: dict[str, Any]) -> None:
    specs = table_specs(template, {"ClaimShape": "legacy"})
    added = with_indexes(specs, [DUE_INDEX])
    assert [i["IndexName"] for i in added["RunsTable"]["GlobalSecondaryIndexes"]] == ["lease", "due"]
    assert added["StateTable"] == specs["StateTable"] and added["JobsTable"] == specs["JobsTable"]
    assert [i["IndexName"] for i in specs["RunsTable"]["GlobalSecondaryIndexes"]] == ["lease"]  # not mutated
    assert added == table_specs(template, {"ClaimShape": "migrating"})  # the migrating deploy's tables
    assert with_indexes(specs, []) == specs
    assert with_indexes(specs, ["lease"]) == specs  # the template's own: one definition only
    with pytest.raises(TemplateError):
        with_indexes(specs, ["nope"])
    with pytest.raises(TemplateError):
        with_indexes(specs, ["runs-of-job"])  # the runs table's own key, no index
    successor = table_specs(template)
    with pytest.raises(TemplateError):  # next-run's keys are not defined where it is absent
        with_indexes(successor, ["next-run"])


@pytest.fixture
def aws() -> Iterator[tuple[Any, Any]]:
    with mock_aws():
        yield boto3.client("dynamodb", region_name="us-east-1"), boto3.client("sqs", region_name="us-east-1")


@pytest.mark.parametrize("mode", ["ON_DEMAND", "PROVISIONED"])
def test_provision_adds_due_to_a_legacy_stack_when_asked(aws: tuple[Any, Any], mode: str) -> None:
    dynamodb, sqs = aws
    parameters = {
        "CapacityMode": mode,
        "WriteCapacityMin": "7",
        "ReadCapacityMin": "3",
        "ClaimShape": "legacy",
    }
    plain = provision(dynamodb, sqs, prefix="plain", parameters=parameters)
    with_due = provision(dynamodb, sqs, prefix="due", parameters=parameters, extra_indexes=[DUE_INDEX])
    names = [
        i["IndexName"]
        for i in dynamodb.describe_table(TableName=plain.runs_table)["Table"]["GlobalSecondaryIndexes"]
    ]
    assert names == ["lease"]
    indexes = dynamodb.describe_table(TableName=with_due.runs_table)["Table"]["GlobalSecondaryIndexes"]
    (due,) = [i for i in indexes if i["IndexName"] == DUE_INDEX]
    assert due["KeySchema"] == index_definition(DUE_INDEX)["KeySchema"]
    assert due["Projection"] == index_definition(DUE_INDEX)["Projection"]
    if mode == "PROVISIONED":
        throughput = due["ProvisionedThroughput"]
        assert (throughput["ReadCapacityUnits"], throughput["WriteCapacityUnits"]) == (3, 7)


def test_capacity_scales_due_only_where_it_exists(template: dict[str, Any]) -> None:
    """SCALED's `due` targets exist with provisioned capacity and the index (migrating,
    successor), named for it; test_capacity_mode.py checks every shape's targets."""
    (due,) = [scaled for scaled in capacity.SCALED if scaled.index == DUE_INDEX]
    assert (due.table, due.presence, due.condition) == (
        "RunsTable",
        "HasDueIndex",
        "ProvisionedRunsTableDueIndex",
    )
    block = capacity.render()
    for kind in ("Write", "Read"):
        target = f"  RunsTableDueIndex{kind}Capacity:\n    Type: AWS::ApplicationAutoScaling::ScalableTarget"
        assert f"{target}\n    Condition: ProvisionedRunsTableDueIndex\n" in block
        assert f"  RunsTableDueIndex{kind}CapacityTracking:\n" in block
    assert block.count("ResourceId: !Sub table/${RunsTable}/index/due") == 2
    assert template["Conditions"]["HasDueIndex"] == {
        "Fn::Not": [{"Fn::Equals": [{"Ref": "ClaimShape"}, "legacy"]}]
    }


def test_deploy_1_adds_due_to_a_runs_table_in_use(aws: tuple[Any, Any]) -> None:
    """The plan's deploy 1, on moto: one UpdateTable ``Create`` of the code's definition, with the
    keys' attribute definitions ("If you are adding a new global secondary index to the table,
    AttributeDefinitions must include the key element(s) of the new index",
    https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_UpdateTable.html). The runs
    already leased are backfilled into it ("Adding a global secondary index to an existing
    table", https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/GSI.OnlineOps.html),
    sparsely: a finished run, with no `check_at`, is not."""
    dynamodb, sqs = aws
    resources = provision(dynamodb, sqs, prefix="live", parameters={"ClaimShape": "legacy"})
    store = DynamoStore(dynamodb, resources.jobs_table, resources.state_table, resources.runs_table)
    leased = {**run_key("j@1"), "lease_shard": 1, "check_at": 5, "scheduled_at": 1, "status": "pending"}
    finished = {**run_key("j@0"), "status": "succeeded"}
    store.write([Put(RUNS, leased, (), "claim"), Put(RUNS, finished, (), "done")])
    with pytest.raises(ValueError):
        store.query("due", 1)
    keys = {attr["AttributeName"] for attr in index_definition(DUE_INDEX)["KeySchema"]}
    dynamodb.update_table(
        TableName=resources.runs_table,
        AttributeDefinitions=[{"AttributeName": key, "AttributeType": "N"} for key in sorted(keys)],
        GlobalSecondaryIndexUpdates=[{"Create": index_definition(DUE_INDEX)}],
    )
    assert store.query("due", 1).items == [
        {"job_id": "j", "run_id": "j@1", "lease_shard": 1, "check_at": 5, "scheduled_at": 1}
    ]
