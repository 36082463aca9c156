"""Issue 27, item 8: every parameter combination the template accepts works.

Each combination that used to pass its own bounds and break the stack is now refused before
CloudFormation changes anything: by the template's Rules (evaluated here in Python, as
CloudFormation does: ``jobsched_tools.ops.rules.evaluate``) or by tighter bounds. The tests walk
the boundaries and check the Rules against the settings' own validation, value by value."""

from __future__ import annotations

from typing import Any

import pytest
from jobsched.core.config import SchedulerConfig
from jobsched.core.job import JobDefinition
from jobsched_tools.emulator.provision import find_template, load_template
from jobsched_tools.iam.policy import Stack, transform
from jobsched_tools.ops import rules
from pydantic import ValidationError


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return load_template()


def test_the_rules_block_is_what_the_generator_writes(template: dict[str, Any]) -> None:
    text = find_template().read_text(encoding="utf-8")
    assert rules.current(text) == rules.render(), "run python -m jobsched_tools.ops.rules"
    assert template["Rules"] == rules.rules()
    # SAM keeps the section for CloudFormation (offline transform).
    assert transform(template)["Rules"] == rules.rules()


def test_the_rules_use_only_rule_functions(template: dict[str, Any]) -> None:
    allowed = {"Fn::And", "Fn::Contains", "Fn::EachMemberEquals", "Fn::EachMemberIn", "Fn::Equals"}
    allowed |= {"Fn::Not", "Fn::Or", "Fn::RefAll", "Fn::ValueOf", "Fn::ValueOfAll", "Ref"}

    def functions(node: Any) -> set[str]:
        if isinstance(node, dict):
            return set(node) | {f for value in node.values() for f in functions(value)}
        if isinstance(node, list):
            return {f for value in node for f in functions(value)}
        return set()

    for rule in template["Rules"].values():
        used = functions(rule.get("RuleCondition", {})) | functions([a["Assert"] for a in rule["Assertions"]])
        assert used <= allowed, used - allowed


def test_the_defaults_and_every_samconfig_environment_pass(template: dict[str, Any]) -> None:
    from test_template import _samconfig_overrides

    assert rules.evaluate(template, {}) == []
    for env in ("default", "dev", "prod"):
        assert rules.evaluate(template, _samconfig_overrides(env)) == [], env


def test_lookahead_must_exceed_the_tick_interval(template: dict[str, Any]) -> None:
    assert template["Parameters"]["TickRate"]["AllowedValues"] == list(rules.TICK_RATES)
    maximum = template["Parameters"]["LookaheadSeconds"]["MaxValue"]
    for rate, seconds in rules.TICK_RATES.items():
        least = seconds + rules.LOOKAHEAD_SLACK_S
        assert least <= maximum, rate  # each allowed tick has a working lookahead
        for lookahead in (1, seconds - 1, seconds, least - 1):
            assert rules.evaluate(template, {"TickRate": rate, "LookaheadSeconds": lookahead}), (
                rate,
                lookahead,
            )
        for lookahead in (least, least + 1, maximum):
            assert rules.evaluate(template, {"TickRate": rate, "LookaheadSeconds": lookahead}) == []


def test_lease_and_heartbeat_the_rules_accept_are_what_the_settings_accept(template: dict[str, Any]) -> None:
    """Every allowed heartbeat against every lease in bounds: the Rules refuse exactly the pairs
    the settings would refuse at each cold start (which would roll the canary back)."""
    heartbeat = template["Parameters"]["HeartbeatSeconds"]
    lease = template["Parameters"]["LeaseSeconds"]
    assert [int(v) for v in heartbeat["AllowedValues"]] == list(rules.HEARTBEATS)
    assert str(heartbeat["Default"]) in [str(v) for v in heartbeat["AllowedValues"]]
    for beat in rules.HEARTBEATS:
        for seconds in range(lease["MinValue"], lease["MaxValue"] + 1):
            refused = bool(rules.evaluate(template, {"HeartbeatSeconds": beat, "LeaseSeconds": seconds}))
            try:
                SchedulerConfig(heartbeat_seconds=beat, lease_seconds=seconds)
                works = True
            except ValidationError:
                works = False
            assert refused is not works, (beat, seconds)
    # The case: the default heartbeat (10) with a lease of 5 to 19 s.
    for seconds in range(5, 20):
        assert rules.evaluate(template, {"LeaseSeconds": seconds}), seconds
    assert rules.evaluate(template, {"LeaseSeconds": 20}) == []


def test_the_deadline_margin_leaves_each_function_most_of_its_time(template: dict[str, Any]) -> None:
    margin_max_s = template["Parameters"]["DeadlineMarginMs"]["MaxValue"] / 1000
    assert template["Parameters"]["DeadlineMarginMs"]["MaxValue"] == 15_000
    timeouts = [template["Globals"]["Function"]["Timeout"]]  # trigger, detector, registrar
    timeouts += [int(t) for t in template["Parameters"]["WorkerTimeoutSeconds"]["AllowedValues"]]
    for timeout in timeouts:
        assert margin_max_s <= timeout / 4, timeout
    with pytest.raises(ValidationError):
        SchedulerConfig(deadline_margin_ms=60_000)  # as large as a function's timeout: refused


def test_the_default_job_fits_every_worker_timeout(template: dict[str, Any]) -> None:
    """A job's default timeout_seconds, plus the largest margin, plus the wait for the exact
    second (up to 1 s) and the run's start and commit, fits in each allowed worker timeout."""
    job_timeout = JobDefinition.model_fields["timeout_seconds"].default
    assert job_timeout == 60
    margin_max_s = template["Parameters"]["DeadlineMarginMs"]["MaxValue"] / 1000
    allowed = [int(t) for t in template["Parameters"]["WorkerTimeoutSeconds"]["AllowedValues"]]
    assert 60 not in allowed
    for timeout in allowed:
        assert job_timeout + margin_max_s + 5 <= timeout, timeout
    assert set(template["Mappings"]["QueueVisibility"]) == {str(t) for t in allowed}


# ---------------------------------------------------------------------------- issue 35


def test_the_defaults_and_every_samconfig_environment_pass_the_parameter_constraints(
    template: dict[str, Any],
) -> None:
    from test_template import _samconfig_overrides

    assert rules.parameter_refusals(template, {}) == []
    for env in ("default", "dev", "prod"):
        overrides = {k: str(v).strip('"') for k, v in _samconfig_overrides(env).items()}
        assert rules.parameter_refusals(template, overrides) == [], env


def test_sam_deploy_guided_asks_in_the_groups_order(template: dict[str, Any]) -> None:
    """Issue 35, item 5. The console groups the parameters by the Interface metadata; `sam deploy
    --guided` ignores it and asks in the Parameters section's declaration order (SAM CLI 1.170.0,
    samcli/commands/deploy/guided_context.py: prompt_parameters walks get_template_parameters'
    dict). So both orders are one: what a first deploy sets first, LocalEndpointUrl last."""
    groups = template["Metadata"]["AWS::CloudFormation::Interface"]["ParameterGroups"]
    grouped = [name for group in groups for name in group["Parameters"]]
    assert grouped == list(template["Parameters"]), "declare the parameters in the groups' order"
    assert len(grouped) == len(set(grouped))
    assert groups[0]["Label"]["default"].startswith("First deployment")
    assert grouped[0] == "AlarmTopicArn"
    assert groups[-1]["Parameters"] == ["LocalEndpointUrl"]


ACCOUNT = "123456789012"
# Each allow-list parameter: values it must take, and values it must refuse (a wildcard, an ARN of
# another service, a malformed one).
ALLOW_LISTS = {
    "AllowedTargetQueueArns": (
        [f"arn:aws:sqs:us-east-1:{ACCOUNT}:orders", f"arn:aws-cn:sqs:cn-north-1:{ACCOUNT}:o.fifo"],
        [
            "*",
            "arn:aws:sqs:*:*:*",
            f"arn:aws:sqs:us-east-1:{ACCOUNT}:*",
            f"arn:aws:sns:us-east-1:{ACCOUNT}:orders",
        ],
    ),
    "AllowedEventBusArns": (
        [f"arn:aws:events:eu-west-1:{ACCOUNT}:event-bus/default"],
        ["*", f"arn:aws:events:eu-west-1:{ACCOUNT}:event-bus/*", f"arn:aws:sqs:eu-west-1:{ACCOUNT}:bus"],
    ),
    "AllowedFunctionArns": (
        [
            f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:report",
            f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:report:live",
        ],
        [
            "*",
            f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:*",
            f"arn:aws:states:us-east-1:{ACCOUNT}:function:x",
        ],
    ),
    "StagedEffectTableArns": (
        [
            f"arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/ledger",
            f"arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/Runs",
        ],
        [
            "*",
            f"arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/*",
            f"arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/app-*",
            f"arn:aws:sqs:us-east-1:{ACCOUNT}:ledger",
            # jobsched's own tables, as CloudFormation names them: <stack>-<logical id>-<suffix>
            f"arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/jobsched-RunsTable-1A2B3C4D5E6F",
            f"arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/jobsched-prod-StateTable-ABCDEF123456",
            f"arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/x-JobsTable-Q1W2E3R4T5Y6",
        ],
    ),
    "AllowedStateMachineArns": (
        [
            f"arn:aws:states:us-east-1:{ACCOUNT}:stateMachine:report",
            f"arn:aws:states:us-east-1:{ACCOUNT}:stateMachine:report-*",
        ],
        [
            "*",
            f"arn:aws:states:us-east-1:{ACCOUNT}:stateMachine:*",
            f"arn:aws:lambda:us-east-1:{ACCOUNT}:stateMachine:x",
        ],
    ),
    "AllowedTaskDefinitionArns": (
        [
            f"arn:aws:ecs:us-east-1:{ACCOUNT}:task-definition/report:3",
            f"arn:aws:ecs:us-east-1:{ACCOUNT}:task-definition/report:*",
        ],
        [
            "*",
            f"arn:aws:ecs:us-east-1:{ACCOUNT}:task-definition/*",
            f"arn:aws:ecs:us-east-1:{ACCOUNT}:cluster/report:1",
        ],
    ),
    "AllowedTaskRoleArns": (
        [f"arn:aws:iam::{ACCOUNT}:role/report-task", f"arn:aws-us-gov:iam::{ACCOUNT}:role/path/task"],
        [
            "*",
            f"arn:aws:iam::{ACCOUNT}:role/*",
            f"arn:aws:iam::{ACCOUNT}:user/report",
            "arn:aws:iam::*:role/x",
        ],
    ),
    "TargetKmsKeyArns": (
        [f"arn:aws:kms:us-east-1:{ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab"],
        ["*", f"arn:aws:kms:us-east-1:{ACCOUNT}:key/*", f"arn:aws:kms:us-east-1:{ACCOUNT}:alias/jobs"],
    ),
}


@pytest.mark.parametrize("parameter", list(ALLOW_LISTS))
def test_an_allow_list_refuses_wildcards_and_foreign_arns_before_any_resource(
    template: dict[str, Any], parameter: str
) -> None:
    """Issue 35, item 2: CloudFormation checks each item of a list parameter against its
    AllowedPattern before it makes anything. A wildcard, another service's ARN or one of jobsched's
    own tables is refused; a good value, alone or beside another, passes."""
    good, bad = ALLOW_LISTS[parameter]
    for value in good:
        assert rules.parameter_refusals(template, {parameter: value}) == [], value
    assert rules.parameter_refusals(template, {parameter: ",".join(good)}) == []
    for value in bad:
        assert rules.parameter_refusals(template, {parameter: value}), value
        assert rules.parameter_refusals(template, {parameter: f"{good[0]},{value}"}), value


def test_without_its_pattern_a_wildcard_would_be_granted(template: dict[str, Any]) -> None:
    """What the patterns stand between: the offline transform turns a `*` staged-effect table
    into PutItem and UpdateItem on every table, jobsched's own included."""
    import copy

    loose = copy.deepcopy(template)
    del loose["Parameters"]["StagedEffectTableArns"]["AllowedPattern"]
    assert rules.parameter_refusals(loose, {"StagedEffectTableArns": "*"}) == []
    role = transform(loose, {"StagedEffectTableArns": "*"})["Resources"]["WorkerFunctionRole"]

    def with_sid(node: Any) -> list[dict[str, Any]]:
        if isinstance(node, dict):
            own = [node] if node.get("Sid") == "StagedEffects" else []
            return own + [s for value in node.values() for s in with_sid(value)]
        return [s for value in node for s in with_sid(value)] if isinstance(node, list) else []

    (staged,) = with_sid(role["Properties"]["Policies"])
    assert staged["Resource"] == {"Ref": "StagedEffectTableArns"}
    assert Stack(loose, {"StagedEffectTableArns": "*"}).resolve(staged["Resource"]) == ["*"]
    assert {"dynamodb:PutItem", "dynamodb:UpdateItem"} <= set(staged["Action"])
    assert rules.parameter_refusals(template, {"StagedEffectTableArns": "*"})


def eventbridge_accepts(expression: str) -> bool:
    """EventBridge's rate expressions: rate(value unit), value a positive whole number, unit
    minute(s), hour(s) or day(s), singular exactly for 1
    (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-rate-expressions.html); so a
    minute at least."""
    import re

    match = re.fullmatch(r"rate\((\d+) (minute|minutes|hour|hours|day|days)\)", expression)
    if match is None:
        return False
    value, unit = int(match.group(1)), match.group(2)
    return value >= 1 and (unit.endswith("s") == (value != 1))


@pytest.mark.parametrize("parameter", ["DetectorRate", "TickRate"])
def test_a_schedule_eventbridge_refuses_is_refused_before_any_resource(
    template: dict[str, Any], parameter: str
) -> None:
    """Issue 35, item 4: `rate(30 seconds)` used to pass DetectorRate's pattern and fail in the
    middle of a deploy, when EventBridge refused the rule."""
    for expression in (
        "rate(30 seconds)",
        "rate(0 minutes)",
        "rate(1 minutes)",
        "rate(2 minute)",
        "rate(1 second)",
    ):
        assert not eventbridge_accepts(expression), expression
        assert rules.parameter_refusals(template, {parameter: expression}), expression
    allowed = template["Parameters"][parameter]["AllowedValues"]
    assert allowed and all(eventbridge_accepts(value) for value in allowed)
    assert template["Parameters"][parameter]["Default"] in allowed
