"""Issue 35, item 3: no name the stack gives a resource can overflow, whatever the stack's name.

CloudFormation takes stack names of up to 128 characters. A name a template builds from the stack's
name (``!Sub "${AWS::StackName}-trigger"``) can pass a service's limit, and fails when that
resource is made: the trigger's did past a 55-character stack name, after the retained tables
already existed. Resources the template leaves unnamed get a name CloudFormation generates, which
it keeps within each type's limit. This test resolves every explicit name in the template as SAM
transforms it, for a 60- and a 128-character stack name, against each type's documented limit.
"""

from __future__ import annotations

from collections import defaultdict

import pytest
from jobsched_tools.emulator.provision import load_template
from jobsched_tools.iam.policy import Stack, transform

# (resource type, name property) -> most characters the service takes.
LIMITS = {
    # https://docs.aws.amazon.com/lambda/latest/api/API_CreateFunction.html (FunctionName: 64)
    ("AWS::Lambda::Function", "FunctionName"): 64,
    # https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_PutDashboard.html (255)
    ("AWS::CloudWatch::Dashboard", "DashboardName"): 255,
    # https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_PutMetricAlarm.html (255)
    ("AWS::CloudWatch::Alarm", "AlarmName"): 255,
    # https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_CreateLogGroup.html (512)
    ("AWS::Logs::LogGroup", "LogGroupName"): 512,
    # https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_PutRule.html (Name: 64)
    ("AWS::Events::Rule", "Name"): 64,
    # https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_CreateTable.html (255)
    ("AWS::DynamoDB::Table", "TableName"): 255,
    # https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_CreateQueue.html (80)
    ("AWS::SQS::Queue", "QueueName"): 80,
    # https://docs.aws.amazon.com/IAM/latest/APIReference/API_CreateRole.html (RoleName: 64)
    ("AWS::IAM::Role", "RoleName"): 64,
    ("AWS::IAM::Policy", "PolicyName"): 128,
    ("AWS::Lambda::LayerVersion", "LayerName"): 140,
    ("AWS::CodeDeploy::Application", "ApplicationName"): 100,
    ("AWS::CodeDeploy::DeploymentGroup", "DeploymentGroupName"): 100,
}

EVERYTHING_ON = {
    "OutcomeEventBusName": "outcomes",
    "DashboardEnabled": "true",
    "AlarmTopicArn": "arn:aws:sns:us-east-1:123456789012:alarms",
}


def _names(stack_name: str) -> dict[tuple[str, str], str]:
    template = load_template()
    output = transform(template, EVERYTHING_ON)
    # Any other resource's Ref or attribute, as long as its service allows: the test measures only
    # what the stack's own name and id add.
    attributes: defaultdict[str, defaultdict[str, str]] = defaultdict(lambda: defaultdict(lambda: "x" * 20))
    stack = Stack(output, EVERYTHING_ON, attributes, name=stack_name)
    found = {}
    for logical_id, resource in output["Resources"].items():
        for prop, value in resource.get("Properties", {}).items():
            if (resource["Type"], prop) in LIMITS:
                found[(logical_id, prop)] = str(stack.resolve(value))
    return found


@pytest.mark.parametrize("length", [60, 128])
def test_no_name_built_from_the_stack_can_overflow(length: int) -> None:
    stack_name = ("j" * length)[:length]
    output = transform(load_template(), EVERYTHING_ON)
    found = _names(stack_name)
    assert found, "the template names something (the trigger)"
    for (logical_id, prop), name in found.items():
        limit = LIMITS[(output["Resources"][logical_id]["Type"], prop)]
        assert len(name) <= limit, f"{logical_id}.{prop}: {len(name)} > {limit}: {name}"


def test_the_trigger_is_named_by_the_stack_s_id_not_its_name() -> None:
    """Its role names its alias, so it cannot take a generated name (a circular reference): its
    name is the stack id's UUID behind a fixed prefix, 53 characters for any stack name."""
    short = _names("s")[("TriggerFunction", "FunctionName")]
    long = _names("s" * 128)[("TriggerFunction", "FunctionName")]
    assert short == long == f"jobsched-trigger-{Stack({}).uuid}"
    assert len(short) == 53
