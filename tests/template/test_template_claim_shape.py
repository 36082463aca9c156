"""template.yaml's ``ClaimShape`` (issue 37): which claim indexes the tables have, held to
``ports.DEPLOYED_INDEXES`` under each value, each index to ``ports.index_definition``; the
updates between values CloudFormation can make; ``CLAIM_SHAPE`` in every function; no role granted
a Query on an index its stack lacks.

CloudFormation adds or deletes one global secondary index of a table per update, and fails an
update that does both ("You can delete or add one global secondary index without interruption. If
you do both in the same update (for example, by changing the index's logical ID), the update
fails": AWS::DynamoDB::Table, GlobalSecondaryIndexes,
https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-dynamodb-table.html),
which is DynamoDB's own limit ("You can create or delete only one global secondary index per
UpdateTable operation": https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_UpdateTable.html).
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import boto3
import pytest
from jobsched.core.claim_shape import DeployedShape
from jobsched.ports import DEPLOYED_INDEXES, INDEX_TABLE, index_definition
from jobsched.runtime.settings import Settings
from jobsched_tools.emulator.provision import FUNCTION_IDS, load_template, provision, table_specs
from jobsched_tools.iam.policy import Stack, role_statements, transform
from moto import mock_aws

ROOT = Path(__file__).resolve().parents[2]
SHAPES = [shape.value for shape in DeployedShape]
# The order an existing stack moves in (docs/deploy.md, "Moving a stack to the successor claim").
UPGRADE = ["legacy", "migrating", "successor"]
TABLES = {"state": "StateTable", "runs": "RunsTable"}
PROVISIONED = {"CapacityMode": "PROVISIONED", "WriteCapacityMin": "7", "ReadCapacityMin": "3"}


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return load_template()


def _indexes(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {index["IndexName"]: index for index in spec.get("GlobalSecondaryIndexes", [])}


def test_the_parameter_offers_each_deployed_shape_and_defaults_to_successor(template: dict[str, Any]) -> None:
    parameter = template["Parameters"]["ClaimShape"]
    assert parameter["AllowedValues"] == SHAPES == UPGRADE == sorted(DEPLOYED_INDEXES)
    assert parameter["Default"] == DeployedShape.SUCCESSOR.value  # a new stack claims from heads
    assert "docs/deploy.md" in parameter["Description"]
    for shape in SHAPES:
        assert shape in parameter["Description"]


@pytest.mark.parametrize("mode", [{}, PROVISIONED], ids=["on-demand", "provisioned"])
@pytest.mark.parametrize("shape", SHAPES)
def test_each_shape_s_tables_have_exactly_its_indexes(
    template: dict[str, Any], shape: str, mode: dict[str, str]
) -> None:
    """The indexes each table gets under ``shape`` are DEPLOYED_INDEXES[shape], each one to the
    letter ports' definition (plus, when provisioned, the table's throughput, as every index)."""
    specs = table_specs(template, {**mode, "ClaimShape": shape})
    found: dict[str, dict[str, Any]] = {}
    for logical_id, spec in specs.items():
        for name, index in _indexes(spec).items():
            assert TABLES[INDEX_TABLE[name]] == logical_id, name
            found[name] = index
            throughput = index.pop("ProvisionedThroughput", None)
            assert throughput == spec.get("ProvisionedThroughput"), name
            assert index == index_definition(name), name
    assert set(found) == DEPLOYED_INDEXES[shape]


@pytest.mark.parametrize("shape", SHAPES)
def test_each_table_defines_only_the_attributes_its_keys_use(template: dict[str, Any], shape: str) -> None:
    """DynamoDB refuses an attribute definition no key uses ("Some AttributeDefinitions are not
    used") and a key without one; CreateTable's AttributeDefinitions "describe the key schema for
    the table and indexes" (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_CreateTable.html).
    So the state table defines next-run's keys only where it has next-run."""
    for logical_id, spec in table_specs(template, {"ClaimShape": shape}).items():
        keys = {key["AttributeName"] for key in spec["KeySchema"]}
        for index in _indexes(spec).values():
            keys |= {key["AttributeName"] for key in index["KeySchema"]}
        defined = [attribute["AttributeName"] for attribute in spec["AttributeDefinitions"]]
        assert sorted(defined) == sorted(keys), (shape, logical_id)
    state = table_specs(template, {"ClaimShape": shape})["StateTable"]
    assert ("sched_shard" in str(state)) is ("next-run" in DEPLOYED_INDEXES[shape])


@pytest.fixture
def aws() -> Iterator[tuple[Any, Any]]:
    with mock_aws():
        yield boto3.client("dynamodb", region_name="us-east-1"), boto3.client("sqs", region_name="us-east-1")


@pytest.mark.parametrize("shape", SHAPES)
def test_provision_creates_each_shape_s_indexes(aws: tuple[Any, Any], shape: str) -> None:
    dynamodb, sqs = aws
    resources = provision(dynamodb, sqs, prefix=shape, parameters={"ClaimShape": shape})
    found = set()
    for table in (resources.jobs_table, resources.state_table, resources.runs_table):
        found |= {
            i["IndexName"]
            for i in dynamodb.describe_table(TableName=table)["Table"].get("GlobalSecondaryIndexes", [])
        }
    assert found == DEPLOYED_INDEXES[shape]


def test_provision_s_default_is_the_template_s_a_new_stack_s(aws: tuple[Any, Any]) -> None:
    """No parameter: ``due`` alone, as a new stack deploys; ``extra_indexes`` still adds what
    the shape lacks (``due`` beside legacy's indexes: a migrating stack's runs table)."""
    dynamodb, sqs = aws
    plain = provision(dynamodb, sqs, prefix="new")
    runs = dynamodb.describe_table(TableName=plain.runs_table)["Table"]
    assert [i["IndexName"] for i in runs["GlobalSecondaryIndexes"]] == ["due"]
    assert not dynamodb.describe_table(TableName=plain.state_table)["Table"].get("GlobalSecondaryIndexes")
    both = provision(dynamodb, sqs, prefix="both", parameters={"ClaimShape": "legacy"}, extra_indexes=["due"])
    runs = dynamodb.describe_table(TableName=both.runs_table)["Table"]
    assert sorted(i["IndexName"] for i in runs["GlobalSecondaryIndexes"]) == ["due", "lease"]


def _changes(template: dict[str, Any], before: str, after: str) -> dict[str, set[str]]:
    """Each table's indexes an update from ``before`` to ``after`` adds or deletes."""
    old, new = (table_specs(template, {"ClaimShape": shape}) for shape in (before, after))
    return {logical_id: set(_indexes(old[logical_id])) ^ set(_indexes(new[logical_id])) for logical_id in old}


@pytest.mark.parametrize(("before", "after"), [*pairwise(UPGRADE), *pairwise(reversed(UPGRADE))])
def test_an_update_between_adjacent_shapes_changes_one_index_a_table_at_most(
    template: dict[str, Any], before: str, after: str
) -> None:
    """Each step of the upgrade (and back, before the switch is set) adds or deletes one index a
    table, and keeps every index it leaves exactly as it was (CloudFormation cannot update an
    index's definition in place)."""
    changes = _changes(template, before, after)
    assert all(len(changed) <= 1 for changed in changes.values()), changes
    assert any(changes.values())
    old, new = (table_specs(template, {"ClaimShape": shape}) for shape in (before, after))
    for logical_id in old:
        kept = set(_indexes(old[logical_id])) & set(_indexes(new[logical_id]))
        for name in kept:
            assert _indexes(old[logical_id])[name] == _indexes(new[logical_id])[name]


def test_legacy_straight_to_successor_is_two_index_changes_on_the_runs_table(
    template: dict[str, Any],
) -> None:
    """CloudFormation fails that update (the module's docstring): the runs table would lose
    ``lease`` and gain ``due`` at once. The deploy guide says so and gives the two steps."""
    assert _changes(template, "legacy", "successor") == {
        "JobsTable": set(),
        "StateTable": {"next-run"},
        "RunsTable": {"lease", "due"},
    }
    guide = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
    section = guide.split("## Moving a stack to the successor claim", 1)[1].split("\n## ", 1)[0]
    for step in (
        "ClaimShape=migrating",
        "jobsched migrate successor-claim",
        "--check",
        "ClaimShape=successor",
    ):
        assert step in section, step
    assert "the update fails" in " ".join(section.split())


@pytest.mark.parametrize("function", FUNCTION_IDS)
def test_every_function_is_told_the_shape(template: dict[str, Any], function: str) -> None:
    """CLAIM_SHAPE, which Settings reads as a DeployedShape: each of the parameter's values parses."""
    env = dict(template["Globals"]["Function"]["Environment"]["Variables"])
    env.update(template["Resources"][function]["Properties"].get("Environment", {}).get("Variables", {}))
    assert env["CLAIM_SHAPE"] == {"Ref": "ClaimShape"}
    for shape in template["Parameters"]["ClaimShape"]["AllowedValues"]:
        assert Settings.model_fields["claim_shape"].annotation is DeployedShape
        assert DeployedShape(shape).value == shape


def test_the_deploy_guide_has_the_parameter_s_row() -> None:
    guide = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
    rows = [line for line in guide.splitlines() if line.startswith("| `ClaimShape` |")]
    assert len(rows) == 1
    cells = [cell.strip() for cell in rows[0].strip("|").split("|")]
    assert cells[1:3] == ["`successor`", "`CLAIM_SHAPE`"]


class _Attributes(dict[str, str]):
    """Any attribute of one resource: ``arn:aws:fake:<logical id>:<attribute>``."""

    def __init__(self, logical_id: str) -> None:
        super().__init__()
        self.logical_id = logical_id

    def __missing__(self, name: str) -> str:
        return f"arn:aws:fake:{self.logical_id}:{name}"


class _AnyResource(dict[str, _Attributes]):
    def __missing__(self, logical_id: str) -> _Attributes:
        return _Attributes(logical_id)


def _queried_indexes(template: dict[str, Any], transformed: dict[str, Any], shape: str) -> set[str]:
    stack = Stack(template, {"ClaimShape": shape, "OutcomeEventBusName": "outcomes"}, _AnyResource())
    found = set()
    for function in FUNCTION_IDS:
        for statement in role_statements(transformed, function, stack):
            if any(action.lower() in ("dynamodb:query", "dynamodb:*") for action in statement.actions):
                found |= {
                    resource.rsplit("/index/", 1)[1]
                    for resource in statement.resources
                    if "/index/" in resource
                }
    return found


def test_no_role_may_query_an_index_its_stack_lacks(template: dict[str, Any]) -> None:
    """Under each shape the roles' Query grants name only that shape's indexes (and every one of
    them: some function reads each). tests/functional/test_iam_contract.py checks each grant
    against the calls the services make under legacy and successor."""
    transformed = transform(template, {"OutcomeEventBusName": "outcomes"}, "us-east-1")
    for shape in SHAPES:
        assert _queried_indexes(template, transformed, shape) == DEPLOYED_INDEXES[shape], shape


def _names_index(resource: dict[str, Any], index: str) -> bool:
    """Whether a resource names ``index``: its ARN (``.../index/<name>``: a scalable target) or a
    metric's ``GlobalSecondaryIndexName`` dimension (an alarm on the index)."""
    text = str(resource)
    return f"/index/{index}" in text or f"'GlobalSecondaryIndexName', 'Value': '{index}'" in text


def test_every_resource_on_a_claim_index_exists_only_with_it(template: dict[str, Any]) -> None:
    """A scalable target or an alarm naming an index the stack lacks would fail the deploy (or
    watch nothing): each one's condition is false under every shape without the index, whatever
    the capacity mode. The functions' grants are Fn::If within their roles
    (test_no_role_may_query_an_index_its_stack_lacks)."""
    checked = 0
    for index in frozenset().union(*DEPLOYED_INDEXES.values()):
        for logical_id, resource in template["Resources"].items():
            if resource["Type"] == "AWS::Serverless::Function" or not _names_index(resource, index):
                continue
            checked += 1
            for shape in SHAPES:
                for mode in ({}, PROVISIONED):
                    stack = Stack(template, {**mode, "ClaimShape": shape})
                    exists = "Condition" not in resource or stack.condition(resource["Condition"])
                    if index not in DEPLOYED_INDEXES[shape]:
                        assert not exists, (logical_id, shape, mode)
    assert checked >= 6  # each claim index's read and write targets (their policies: test_capacity_mode.py)
