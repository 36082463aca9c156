"""Issue 35: what a first deploy into a fresh account needs from the template, checked on the
template as SAM transforms it (offline): reserved concurrency (item 6), alarms when the scheduled
functions stop being invoked (item 7), deployment alarms that watch the new version (item 8), the
dashboard's console domain per partition (item 10), and each function's own log group (item 11).
cfn-lint and ``sam validate`` run in ``make template-check``."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest
from jobsched_tools.emulator.provision import FUNCTION_IDS, load_template
from jobsched_tools.iam.policy import Stack, transform
from jobsched_tools.ops import rules

ON = {"OutcomeEventBusName": "outcomes", "DashboardEnabled": "true"}


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return load_template()


@pytest.fixture(scope="module")
def output(template: dict[str, Any]) -> dict[str, Any]:
    return transform(template, ON)


def _stack(output: dict[str, Any], parameters: dict[str, Any], partition: str = "aws") -> Stack:
    attributes: defaultdict[str, defaultdict[str, str]] = defaultdict(lambda: defaultdict(lambda: "name"))
    return Stack(output, parameters, attributes, partition=partition)


# ---------------------------------------------------------------------------- 6. concurrency


@pytest.mark.parametrize(
    ("function", "parameter"),
    [
        ("TriggerFunction", "TriggerReservedConcurrency"),
        ("MissDetectorFunction", "DetectorReservedConcurrency"),
    ],
)
def test_reserved_concurrency_is_optional_and_off_by_default(
    template: dict[str, Any], output: dict[str, Any], function: str, parameter: str
) -> None:
    """0 (the default) reserves nothing, so a new account's small pool cannot refuse the deploy
    (Lambda keeps 100 unreserved: docs/deploy.md, "Concurrency"); a value reserves exactly it."""
    assert template["Parameters"][parameter]["Default"] == 0
    props = output["Resources"][function]["Properties"]
    assert "ReservedConcurrentExecutions" not in _stack(output, {}).resolve(props)
    assert _stack(output, {parameter: "17"}).resolve(props)["ReservedConcurrentExecutions"] == "17"
    assert rules.parameter_refusals(template, {parameter: "-1"})
    others = set(FUNCTION_IDS) - {function, "TriggerFunction", "MissDetectorFunction"}
    for other in others:  # the worker is capped by its mapping's MaximumConcurrency instead
        assert "ReservedConcurrentExecutions" not in output["Resources"][other]["Properties"], other


# ---------------------------------------------------------------------------- 7. invocations


@pytest.mark.parametrize(
    ("alarm", "function", "schedule"),
    [
        ("TriggerInvocationsAlarm", "TriggerFunction", "TickRate"),
        ("MissDetectorInvocationsAlarm", "MissDetectorFunction", "DetectorRate"),
    ],
)
def test_an_alarm_fires_when_a_scheduled_function_stops_being_invoked(
    template: dict[str, Any], alarm: str, function: str, schedule: str
) -> None:
    """No datapoint is the failure here (a disabled schedule publishes nothing), so missing data
    breaches; each period is as long as the slowest schedule allowed, so a working schedule never
    leaves a whole period empty, and two empty periods in a row fire it."""
    props = template["Resources"][alarm]["Properties"]
    assert (props["Namespace"], props["MetricName"], props["Statistic"]) == (
        "AWS/Lambda",
        "Invocations",
        "Sum",
    )
    assert props["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": function}}]
    assert props["TreatMissingData"] == "breaching"
    assert (props["ComparisonOperator"], props["Threshold"]) == ("LessThanThreshold", 1)
    slowest = max(rules.TICK_RATES[rate] for rate in template["Parameters"][schedule]["AllowedValues"])
    assert props["Period"] >= slowest
    assert props["EvaluationPeriods"] == props["DatapointsToAlarm"] == 2
    assert "Condition" not in template["Resources"][alarm]
    # Every other alarm reads missing data as nothing to count.
    for logical_id, resource in template["Resources"].items():
        if resource["Type"] == "AWS::CloudWatch::Alarm" and "Invocations" not in logical_id:
            assert resource["Properties"]["TreatMissingData"] == "notBreaching", logical_id


# ---------------------------------------------------------------------------- 8. the canary


@pytest.mark.parametrize("function", FUNCTION_IDS)
def test_each_deployment_alarm_watches_the_version_being_deployed(
    output: dict[str, Any], function: str
) -> None:
    """The alarm CodeDeploy watches reads the function's Errors through its `live` alias for the
    version this deployment published (ExecutedVersion), not the errors of every version: an old
    version's error during the shift no longer rolls back a good deployment."""
    group = output["Resources"][f"{function}DeploymentGroup"]["Properties"]
    (alarm_ref,) = group["AlarmConfiguration"]["Alarms"]
    alarm_id = alarm_ref["Name"]["Ref"]
    props = output["Resources"][alarm_id]["Properties"]
    assert props["MetricName"] == "Errors"
    dimensions = {d["Name"]: d["Value"] for d in props["Dimensions"]}
    (version_id,) = [
        k
        for k, v in output["Resources"].items()
        if v["Type"] == "AWS::Lambda::Version" and k.startswith(f"{function}Version")
    ]
    assert dimensions == {
        "FunctionName": {"Ref": function},
        "Resource": {"Fn::Sub": f"${{{function}}}:live"},
        "ExecutedVersion": {"Fn::Select": [7, {"Fn::Split": [":", {"Ref": version_id}]}]},
    }
    # The version's ARN ends with its number: field 7 of arn:aws:lambda:REGION:ACCOUNT:function:NAME:N.
    arn = "arn:aws:lambda:us-east-1:123456789012:function:name:42"
    attributes = {version_id: {"Ref": arn}, function: {"Ref": "name"}}
    assert Stack(output, ON, attributes).resolve(dimensions["ExecutedVersion"]) == "42"
    assert Stack(output, ON, attributes).resolve(dimensions["Resource"]) == "name:live"


@pytest.mark.parametrize(
    ("deployment_type", "detector_config"),
    [
        ("Canary10Percent5Minutes", "Linear10PercentEvery1Minute"),
        ("Linear10PercentEvery2Minutes", "Linear10PercentEvery1Minute"),
        ("AllAtOnce", "AllAtOnce"),
    ],
)
def test_the_detector_s_deployment_runs_its_new_version(
    template: dict[str, Any], deployment_type: str, detector_config: str
) -> None:
    """Invoked once a minute, the detector's new version runs 0.1 x 5 = 0.5 times on average in
    the default 5-minute canary, and not at all with probability 0.9^5 = 59%. Shifting 10% a
    minute for 10 minutes, it runs 0.1 + 0.2 + ... + 0.9 = 4.5 times on average and at least once
    with probability 1 - 0.9 x 0.8 x ... x 0.1 > 99.9%, then takes all the traffic while its
    alarm still watches. AllAtOnce (dev) stays at once. The other functions keep DeploymentType."""
    parameters = {"DeploymentType": deployment_type}
    output = transform(template, parameters)
    stack = Stack(output, parameters)
    groups = {
        function: stack.resolve(
            output["Resources"][f"{function}DeploymentGroup"]["Properties"]["DeploymentConfigName"]
        )
        for function in FUNCTION_IDS
        if f"{function}DeploymentGroup" in output["Resources"]
    }
    assert groups.pop("MissDetectorFunction") == f"CodeDeployDefault.Lambda{detector_config}"
    assert set(groups.values()) == {f"CodeDeployDefault.Lambda{deployment_type}"}
    never = 1.0
    for step in range(1, 10):
        never *= 1 - step / 10
    assert sum(step / 10 for step in range(1, 10)) == pytest.approx(4.5)
    assert 1 - never > 0.999 and 1 - 0.9**5 < 0.5


# ---------------------------------------------------------------------------- 10. partitions


@pytest.mark.parametrize(
    ("partition", "console"),
    [
        ("aws", "console.aws.amazon.com"),
        ("aws-cn", "console.amazonaws.cn"),
        ("aws-us-gov", "console.amazonaws-us-gov.com"),
    ],
)
def test_the_dashboard_url_is_on_the_partition_s_console(
    output: dict[str, Any], partition: str, console: str
) -> None:
    url = _stack(output, ON, partition).resolve(output["Outputs"]["DashboardUrl"]["Value"])
    assert url.startswith(f"https://us-east-1.{console}/cloudwatch/home?region=us-east-1#dashboards:name="), (
        url
    )
    assert output["Outputs"]["DashboardUrl"]["Condition"] == "HasDashboard"


def test_the_dashboard_is_optional_and_off_by_default(template: dict[str, Any]) -> None:
    assert template["Resources"]["Dashboard"]["Condition"] == "HasDashboard"
    assert template["Parameters"]["DashboardEnabled"]["Default"] == "false"
    assert not Stack(template).condition("HasDashboard")
    assert Stack(template, {"DashboardEnabled": "true"}).condition("HasDashboard")


# ---------------------------------------------------------------------------- 11. log groups


@pytest.mark.parametrize("function", FUNCTION_IDS)
def test_each_function_logs_to_a_log_group_the_stack_makes(
    template: dict[str, Any], output: dict[str, Any], function: str
) -> None:
    """A group the stack makes (so deleting the stack deletes it) with LogRetentionDays, under a
    generated name (no collision with the /aws/lambda/<name> group Lambda makes by itself), and
    the function logs there (LoggingConfig.LogGroup), in JSON as the Globals say."""
    group_id = function.replace("Function", "LogGroup")
    group = template["Resources"][group_id]
    assert group["Type"] == "AWS::Logs::LogGroup"
    assert group["Properties"] == {"RetentionInDays": {"Ref": "LogRetentionDays"}}
    assert group.get("DeletionPolicy", "Delete") == "Delete"
    assert group.get("Condition") == template["Resources"][function].get("Condition")
    logging = output["Resources"][function]["Properties"]["LoggingConfig"]
    assert logging["LogGroup"] == {"Ref": group_id}
    assert logging["LogFormat"] == "JSON"
    retention = template["Parameters"]["LogRetentionDays"]
    assert retention["Default"] in retention["AllowedValues"]
