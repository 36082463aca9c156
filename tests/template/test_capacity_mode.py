"""template.yaml, issue 37: the capacity mode. On-demand by default; with ``CapacityMode:
PROVISIONED`` every table and every global secondary index it has under its ``ClaimShape`` is
provisioned, and auto scaling tracks each one's read and write utilisation.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from jobsched.ports import DEPLOYED_INDEXES
from jobsched_tools.emulator.provision import find_template, load_template, provision, table_specs
from jobsched_tools.iam.policy import Stack
from jobsched_tools.ops import capacity
from moto import mock_aws

PROVISIONED = {"CapacityMode": "PROVISIONED", "WriteCapacityMin": "7", "ReadCapacityMin": "3"}
SHAPES = sorted(DEPLOYED_INDEXES)  # template.yaml's ClaimShape values


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return load_template()


def _resources(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {logical_id: r for logical_id, r in template["Resources"].items() if r["Type"] == kind}


def _scaled(target: dict[str, Any]) -> tuple[str, str]:
    """A scalable target's (resource id, dimension), with the table's logical id for its name."""
    props = target["Properties"]
    return props["ResourceId"]["Fn::Sub"], props["ScalableDimension"]


def test_on_demand_is_the_default(template: dict[str, Any]) -> None:
    assert template["Parameters"]["CapacityMode"]["Default"] == "ON_DEMAND"
    for spec in table_specs(template).values():
        assert spec["BillingMode"] == "PAY_PER_REQUEST"
        assert "ProvisionedThroughput" not in spec
        for index in spec.get("GlobalSecondaryIndexes", []):
            assert "ProvisionedThroughput" not in index


@pytest.mark.parametrize("shape", SHAPES)
def test_provisioned_mode_provisions_every_table_and_index(template: dict[str, Any], shape: str) -> None:
    specs = table_specs(template, {**PROVISIONED, "ClaimShape": shape})
    for spec in specs.values():
        assert spec["BillingMode"] == "PROVISIONED"
        assert spec["ProvisionedThroughput"] == {"ReadCapacityUnits": 3, "WriteCapacityUnits": 7}
        for index in spec.get("GlobalSecondaryIndexes", []):
            assert index["ProvisionedThroughput"] == {"ReadCapacityUnits": 3, "WriteCapacityUnits": 7}


@pytest.mark.parametrize("shape", SHAPES)
def test_auto_scaling_tracks_read_and_write_of_every_table_and_index(
    template: dict[str, Any], shape: str
) -> None:
    """Derived from the tables as the template defines them under each ClaimShape, not from
    capacity.SCALED: a new table or index without its scaling fails here, and so does a target
    on an index the shape lacks (a scalable target naming a missing index fails the deploy). An
    index left out would throttle its table's writes at the index's minimum."""
    wanted = set()
    for logical_id, spec in table_specs(template, {**PROVISIONED, "ClaimShape": shape}).items():
        for kind in ("Read", "Write"):
            wanted.add((f"table/${{{logical_id}}}", f"dynamodb:table:{kind}CapacityUnits"))
            for index in spec.get("GlobalSecondaryIndexes", []):
                wanted.add(
                    (
                        f"table/${{{logical_id}}}/index/{index['IndexName']}",
                        f"dynamodb:index:{kind}CapacityUnits",
                    )
                )
    provisioned = Stack(template, {**PROVISIONED, "ClaimShape": shape})
    on_demand = Stack(template, {"ClaimShape": shape})
    targets = _resources(template, "AWS::ApplicationAutoScaling::ScalableTarget")
    assert not [target for target in targets.values() if on_demand.condition(target["Condition"])]
    made = {logical_id: t for logical_id, t in targets.items() if provisioned.condition(t["Condition"])}
    assert {_scaled(target) for target in made.values()} == wanted
    assert len(made) == len(wanted)
    policies = [
        policy
        for policy in _resources(template, "AWS::ApplicationAutoScaling::ScalingPolicy").values()
        if provisioned.condition(policy["Condition"])
    ]
    assert len(policies) == len(wanted)
    for policy in policies:
        config = policy["Properties"]["TargetTrackingScalingPolicyConfiguration"]
        assert config["TargetValue"] == {"Ref": "CapacityTargetUtilization"}
        metric = config["PredefinedMetricSpecification"]["PredefinedMetricType"]
        target = template["Resources"][policy["Properties"]["ScalingTargetId"]["Ref"]]
        kind = "Write" if "Write" in target["Properties"]["ScalableDimension"] else "Read"
        assert metric == f"DynamoDB{kind}CapacityUtilization"
        assert target["Condition"] == policy["Condition"]


def test_an_index_s_scaling_is_its_presence_and_provisioned_capacity(template: dict[str, Any]) -> None:
    """The combined conditions (Fn::And of ProvisionedCapacity and the index's presence) are the
    generated ones, and each claim index's targets carry its own."""
    conditions = template["Conditions"]
    for scaled in capacity.SCALED:
        if scaled.presence is None:
            assert scaled.condition == "ProvisionedCapacity"
            continue
        assert conditions[scaled.condition] == {
            "Fn::And": [{"Condition": "ProvisionedCapacity"}, {"Condition": scaled.presence}]
        }
        for kind in ("Write", "Read"):
            assert template["Resources"][f"{scaled.stem}{kind}Capacity"]["Condition"] == scaled.condition
    assert {s.index: s.presence for s in capacity.SCALED if s.index} == {
        "next-run": "HasNextRunIndex",
        "lease": "HasLeaseIndex",
        "due": "HasDueIndex",
    }


def test_the_capacity_block_is_what_the_generator_writes() -> None:
    text = find_template().read_text(encoding="utf-8")
    assert capacity.current(text) == capacity.render(), "run python -m jobsched_tools.ops.capacity"
    assert capacity.current_conditions(text) == capacity.render_conditions(), (
        "run python -m jobsched_tools.ops.capacity"
    )


@pytest.fixture
def aws() -> Iterator[tuple[Any, Any]]:
    with mock_aws():
        yield boto3.client("dynamodb"), boto3.client("sqs")


def test_a_provisioned_stack_provisions_on_moto(aws: tuple[Any, Any]) -> None:
    dynamodb, sqs = aws
    resources = provision(dynamodb, sqs, prefix="p", parameters=PROVISIONED)
    runs = dynamodb.describe_table(TableName=resources.runs_table)["Table"]
    assert runs["BillingModeSummary"]["BillingMode"] == "PROVISIONED"
    assert runs["ProvisionedThroughput"]["WriteCapacityUnits"] == 7
    (due,) = runs["GlobalSecondaryIndexes"]  # the default ClaimShape's one index
    assert due["IndexName"] == "due"
    assert due["ProvisionedThroughput"]["ReadCapacityUnits"] == 3
