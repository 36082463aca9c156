"""template.yaml, issue 37: the capacity mode. On-demand by default; with ``CapacityMode:
PROVISIONED`` every table and every global secondary index is provisioned, and auto scaling
tracks each one's read and write utilisation.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from jobsched_tools.emulator.provision import find_template, load_template, provision, table_specs
from jobsched_tools.ops import capacity
from moto import mock_aws

PROVISIONED = {"CapacityMode": "PROVISIONED", "WriteCapacityMin": "7", "ReadCapacityMin": "3"}


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return load_template()


def _scaled_resources(template: dict[str, Any]) -> set[tuple[str, str]]:
    """(resource id, dimension) of every scalable target, with the table's logical id for its name."""
    found = set()
    for resource in template["Resources"].values():
        if resource["Type"] != "AWS::ApplicationAutoScaling::ScalableTarget":
            continue
        props = resource["Properties"]
        found.add((props["ResourceId"]["Fn::Sub"], props["ScalableDimension"]))
    return found


def test_on_demand_is_the_default(template: dict[str, Any]) -> None:
    assert template["Parameters"]["CapacityMode"]["Default"] == "ON_DEMAND"
    for spec in table_specs(template).values():
        assert spec["BillingMode"] == "PAY_PER_REQUEST"
        assert "ProvisionedThroughput" not in spec
        for index in spec.get("GlobalSecondaryIndexes", []):
            assert "ProvisionedThroughput" not in index


def test_provisioned_mode_provisions_every_table_and_index(template: dict[str, Any]) -> None:
    specs = table_specs(template, PROVISIONED)
    for spec in specs.values():
        assert spec["BillingMode"] == "PROVISIONED"
        assert spec["ProvisionedThroughput"] == {"ReadCapacityUnits": 3, "WriteCapacityUnits": 7}
        for index in spec.get("GlobalSecondaryIndexes", []):
            assert index["ProvisionedThroughput"] == {"ReadCapacityUnits": 3, "WriteCapacityUnits": 7}


def test_auto_scaling_tracks_read_and_write_of_every_table_and_index(template: dict[str, Any]) -> None:
    """Derived from the tables as the template defines them, not from capacity.SCALED: a new table
    or index without its scaling fails here. An index left out would throttle its table's writes
    at the index's minimum."""
    wanted = set()
    for logical_id, resource in template["Resources"].items():
        if resource["Type"] != "AWS::DynamoDB::Table":
            continue
        for kind in ("Read", "Write"):
            wanted.add((f"table/${{{logical_id}}}", f"dynamodb:table:{kind}CapacityUnits"))
            for index in resource["Properties"].get("GlobalSecondaryIndexes", []):
                wanted.add(
                    (
                        f"table/${{{logical_id}}}/index/{index['IndexName']}",
                        f"dynamodb:index:{kind}CapacityUnits",
                    )
                )
    assert _scaled_resources(template) == wanted
    policies = [
        r for r in template["Resources"].values() if r["Type"] == "AWS::ApplicationAutoScaling::ScalingPolicy"
    ]
    assert len(policies) == len(wanted)
    for policy in policies:
        assert policy["Condition"] == "ProvisionedCapacity"
        config = policy["Properties"]["TargetTrackingScalingPolicyConfiguration"]
        assert config["TargetValue"] == {"Ref": "CapacityTargetUtilization"}
        metric = config["PredefinedMetricSpecification"]["PredefinedMetricType"]
        target = template["Resources"][policy["Properties"]["ScalingTargetId"]["Ref"]]
        kind = "Write" if "Write" in target["Properties"]["ScalableDimension"] else "Read"
        assert metric == f"DynamoDB{kind}CapacityUtilization"
        assert target["Condition"] == "ProvisionedCapacity"


def test_the_capacity_block_is_what_the_generator_writes() -> None:
    text = find_template().read_text(encoding="utf-8")
    assert capacity.current(text) == capacity.render(), "run python -m jobsched_tools.ops.capacity"


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
    (lease,) = runs["GlobalSecondaryIndexes"]
    assert lease["ProvisionedThroughput"]["ReadCapacityUnits"] == 3
