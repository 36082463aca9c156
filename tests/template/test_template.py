"""template.yaml: least-privilege IAM, the settings every function gets, the tables and queues it
provisions (on moto), and the sample events in events/.

cfn-lint and ``sam validate`` run in ``make template-check``, not here.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import boto3
import pytest
from boto3.dynamodb.types import TypeDeserializer
from jobsched.core.config import SchedulerConfig
from jobsched.core.job import InvalidJob, JobDefinition
from jobsched.runtime.settings import Settings
from jobsched.services.outcomes import TERMINAL
from jobsched_tools.emulator.provision import (
    FUNCTION_IDS,
    find_template,
    load_template,
    provision,
    table_specs,
)
from moto import mock_aws

ROOT = find_template().parent
EVENTS = ROOT / "events"
FUNCTIONS = FUNCTION_IDS

# Environment variable -> the template parameter it carries (the settings model reads these names).
SETTINGS_ENV = {
    "SHARD_COUNT": "ShardCount",
    "TRIGGER_GROUPS": "TriggerGroups",
    "LOOKAHEAD_SECONDS": "LookaheadSeconds",
    "TRIGGER_LOOKBACK_SECONDS": "TriggerLookbackSeconds",
    "LEASE_SECONDS": "LeaseSeconds",
    "HEARTBEAT_SECONDS": "HeartbeatSeconds",
    "DISPATCH_LEASE_SECONDS": "DispatchLeaseSeconds",
    "MAX_CLAIMS_PER_TICK": "MaxClaimsPerTick",
    "CLAIM_CONCURRENCY": "ClaimConcurrency",
    "DEADLINE_MARGIN_MS": "DeadlineMarginMs",
    "DETECTOR_MAX_ITEMS": "DetectorMaxItems",
    "DETECTOR_DEGRADE_BACKLOG": "DetectorDegradeBacklog",
    "DETECTOR_SWEEP_SECONDS": "DetectorSweepSeconds",
    "DETECTOR_IDLE_RETURN": "DetectorIdleReturn",
    "WORKER_RECORD_CONCURRENCY": "WorkerRecordConcurrency",
    "HISTORY_RETENTION_DAYS": "HistoryRetentionDays",
    "CLOCK_SKEW_ALLOWANCE_MS": "ClockSkewAllowanceMs",
    "MIN_RATE_SECONDS": "MinRateSeconds",
    "POWERTOOLS_LOG_LEVEL": "LogLevel",
}
LIST_ENV = {
    "ALLOWED_QUEUE_ARNS": "AllowedTargetQueueArns",
    "ALLOWED_EVENT_BUS_ARNS": "AllowedEventBusArns",
    "ALLOWED_FUNCTION_ARNS": "AllowedFunctionArns",
    "STAGED_EFFECT_TABLE_ARNS": "StagedEffectTableArns",
    "ALLOWED_STATE_MACHINE_ARNS": "AllowedStateMachineArns",
    "ALLOWED_TASK_DEFINITION_ARNS": "AllowedTaskDefinitionArns",
    "ALLOWED_TASK_ROLE_ARNS": "AllowedTaskRoleArns",
}
DATA_ACTION = re.compile(r"^(dynamodb:|sqs:|lambda:Invoke|events:Put|s3:|kinesis:|sns:Publish)", re.I)


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return load_template()


# ---------------------------------------------------------------------------- (a) IAM and settings


def _statements(node: Any) -> Iterator[dict[str, Any]]:
    """Every IAM statement in ``node``, both branches of an Fn::If included."""
    if isinstance(node, list):
        for item in node:
            yield from _statements(item)
    elif isinstance(node, dict):
        if "Fn::If" in node:
            _condition, when_true, when_false = node["Fn::If"]
            yield from _statements(when_true)
            yield from _statements(when_false)
        elif "Effect" in node and ("Action" in node or "NotAction" in node):
            yield node
        elif "Statement" in node:
            yield from _statements(node["Statement"])


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _policy_statements(template: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    found = []
    for logical_id, resource in template["Resources"].items():
        props = resource.get("Properties", {})
        if resource["Type"] == "AWS::Serverless::Function":
            for policy in _as_list(props.get("Policies", [])):
                assert not isinstance(policy, str) or policy.startswith("arn:"), (
                    f"{logical_id}: managed policy {policy} is broader than the inline statements"
                )
                for statement in _statements(policy):
                    found.append((logical_id, statement))
        elif resource["Type"] in ("AWS::IAM::Policy", "AWS::IAM::Role", "AWS::IAM::ManagedPolicy"):
            for statement in _statements(props):
                found.append((logical_id, statement))
    return found


# Actions with no resource-level permissions that read no data: a statement may grant them on "*".
# dynamodb:ListStreams returns stream ARNs (the registrar's stream mapping needs it; docs/deploy.md).
LIST_ONLY_ACTIONS = {"dynamodb:ListStreams"}


def _assert_no_wildcard_data_action(owner: str, statement: dict[str, Any]) -> None:
    assert "NotAction" not in statement and "NotResource" not in statement, f"{owner}: {statement}"
    if statement.get("Effect") != "Allow":
        return
    actions = [str(action) for action in _as_list(statement["Action"])]
    assert "*" not in actions, f"{owner}: Action * in {statement}"
    data_actions = [
        action
        for action in actions
        if (DATA_ACTION.match(action) or action.endswith(":*")) and action not in LIST_ONLY_ACTIONS
    ]
    if not data_actions:
        return
    for resource in _as_list(statement.get("Resource")):
        assert not (isinstance(resource, str) and "*" in resource), (
            f"{owner}: {data_actions} granted on {resource!r}"
        )


def test_every_function_has_inline_scoped_policies(template: dict[str, Any]) -> None:
    statements = _policy_statements(template)
    owners = {owner for owner, _ in statements}
    assert set(FUNCTIONS) <= owners
    for owner, statement in statements:
        _assert_no_wildcard_data_action(owner, statement)


def test_builtin_target_grants_exist_only_when_their_parameter_is_set(template: dict[str, Any]) -> None:
    worker = template["Resources"]["WorkerFunction"]["Properties"]
    conditional = {}
    for policy in worker["Policies"]:
        for item in policy["Statement"]:
            if "Fn::If" in item:
                condition, statement, otherwise = item["Fn::If"]
                assert otherwise == {"Ref": "AWS::NoValue"}
                if condition == "HasOutcomeEventBus":
                    continue  # not a target: test_outcome_events_are_granted_...
                action = statement["Action"]
                actions = tuple(_as_list(action)) if not isinstance(action, dict) else (json.dumps(action),)
                conditional[condition] = (actions, statement["Resource"])
                if actions == ("iam:PassRole",):  # only to ECS tasks
                    assert statement["Condition"] == {
                        "StringEquals": {"iam:PassedToService": "ecs-tasks.amazonaws.com"}
                    }
                elif actions == ("kms:GenerateDataKey", "kms:Decrypt"):  # only through the target services
                    services = statement["Condition"]["StringLike"]["kms:ViaService"]
                    assert services == [
                        {"Fn::Sub": f"{s}.*.${{AWS::URLSuffix}}"}
                        for s in ("sqs", "events", "dynamodb", "sns", "kinesis")
                    ]
                else:
                    assert "Condition" not in statement
    # Staged effects commit in the worker's own transaction: each contained action on its table
    # (puts and updates; no effect is a ConditionCheck).
    staged = ("dynamodb:PutItem", "dynamodb:UpdateItem")
    sdk_actions = (json.dumps({"Ref": "AllowedSdkActions"}),)
    assert conditional == {
        "HasAllowedQueues": (("sqs:SendMessage",), {"Ref": "AllowedTargetQueueArns"}),
        "HasAllowedEventBuses": (("events:PutEvents",), {"Ref": "AllowedEventBusArns"}),
        "HasAllowedFunctions": (("lambda:InvokeFunction",), {"Ref": "AllowedFunctionArns"}),
        "HasStagedEffectTables": (staged, {"Ref": "StagedEffectTableArns"}),
        "HasAllowedStateMachines": (("states:StartExecution",), {"Ref": "AllowedStateMachineArns"}),
        "HasAllowedTaskDefinitions": (("ecs:RunTask",), {"Ref": "AllowedTaskDefinitionArns"}),
        "HasAllowedTaskRoles": (("iam:PassRole",), {"Ref": "AllowedTaskRoleArns"}),
        # Issue 38: any API (exactly the listed actions, on any resource), SNS, Kinesis, and the
        # jobs' dead-letter queues.
        "HasAllowedSdkActions": (sdk_actions, "*"),
        "HasAllowedTopics": (("sns:Publish",), {"Ref": "AllowedTopicArns"}),
        "HasAllowedStreams": (("kinesis:PutRecord",), {"Ref": "AllowedStreamArns"}),
        "HasAllowedDeadLetterQueues": (("sqs:SendMessage",), {"Ref": "AllowedDeadLetterQueueArns"}),
        "HasTargetKmsKeys": (("kms:GenerateDataKey", "kms:Decrypt"), {"Ref": "TargetKmsKeyArns"}),
    }
    for condition, (_, ref) in conditional.items():
        ref = {"Ref": "AllowedSdkActions"} if condition == "HasAllowedSdkActions" else ref
        assert template["Conditions"][condition] == {
            "Fn::Not": [{"Fn::Equals": [{"Fn::Join": ["", ref]}, ""]}]
        }


def test_the_detector_may_use_the_keys_only_through_sqs_and_only_with_dead_letter_queues(
    template: dict[str, Any],
) -> None:
    """The miss detector sends jobs' dead letters (services/dead_letters.py) to queues that may be
    encrypted with a customer-managed key, as the worker does: it gets kms:GenerateDataKey and
    kms:Decrypt on TargetKmsKeyArns through SQS alone, and only when the stack lists both keys
    and dead-letter queues (it reaches nothing else under such a key)."""
    from jobsched_tools.iam.policy import Stack

    detector = template["Resources"]["MissDetectorFunction"]["Properties"]
    keyed = [
        item["Fn::If"]
        for policy in detector["Policies"]
        for item in policy["Statement"]
        if "Fn::If" in item and "kms:Decrypt" in _as_list(item["Fn::If"][1].get("Action"))
    ]
    assert len(keyed) == 1
    condition, statement, otherwise = keyed[0]
    assert (condition, otherwise) == ("HasDeadLetterQueueKeys", {"Ref": "AWS::NoValue"})
    assert statement["Action"] == ["kms:GenerateDataKey", "kms:Decrypt"]
    assert statement["Resource"] == {"Ref": "TargetKmsKeyArns"}
    assert statement["Condition"] == {
        "StringLike": {"kms:ViaService": {"Fn::Sub": "sqs.*.${AWS::URLSuffix}"}}
    }
    key = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    queue = "arn:aws:sqs:us-east-1:123456789012:job-failures"
    for keys, queues, granted in (([key], [queue], True), ([key], [""], False), ([""], [queue], False)):
        stack = Stack(template, {"TargetKmsKeyArns": keys, "AllowedDeadLetterQueueArns": queues})
        assert stack.condition("HasDeadLetterQueueKeys") is granted, (keys, queues)


def test_only_the_outcome_publisher_puts_outcomes_and_only_when_a_bus_is_named(
    template: dict[str, Any],
) -> None:
    """Outcome events come from the runs stream (services/outcomes.py), so the publisher alone
    may put on the bus, on that bus only; it, its mapping, its failure queue and its alarms exist
    only with a bus named. The functions that write terminal records have no events grant."""
    bus = "arn:${AWS::Partition}:events:${AWS::Region}:${AWS::AccountId}:event-bus/${OutcomeEventBusName}"
    for function in FUNCTIONS:
        granted = _grants(template, function)
        if function == "OutcomePublisherFunction":
            assert granted["events:PutEvents"] == [{"Fn::Sub": bus}]
            assert {action for action in granted if action.startswith("events:")} == {"events:PutEvents"}
        else:  # the worker's PutEvents is its eventbridge_put target's (AllowedEventBusArns)
            assert {"Fn::Sub": bus} not in granted.get("events:PutEvents", []), function
    conditional = {
        logical_id
        for logical_id, resource in template["Resources"].items()
        if resource.get("Condition") == "HasOutcomeEventBus"
    }
    assert conditional == {
        "OutcomePublisherFunction",
        "OutcomePublisherFunctionRunChanges",
        "OutcomeFailureQueue",
        "OutcomePublisherErrorsAlarm",
        "OutcomePublisherIteratorAgeAlarm",
        "OutcomeEventsRejectedAlarm",
        "OutcomeFailureQueueAlarm",
        "OutcomePublisherLogGroup",
    }
    assert template["Conditions"]["HasOutcomeEventBus"] == {
        "Fn::Not": [{"Fn::Equals": [{"Ref": "OutcomeEventBusName"}, ""]}]
    }
    assert template["Parameters"]["OutcomeEventBusName"]["Default"] == ""
    assert "OUTCOME_EVENT_BUS_NAME" not in template["Globals"]["Function"]["Environment"]["Variables"]
    env = template["Resources"]["OutcomePublisherFunction"]["Properties"]["Environment"]["Variables"]
    assert env["OUTCOME_EVENT_BUS_NAME"] == {"Ref": "OutcomeEventBusName"}


# AWS managed policies that grant data actions on Resource "*": SAM attaches the first for an
# `SQS` event and the second for a `DynamoDB` event, so the template uses neither kind of event.
STAR_DATA_MANAGED_POLICIES = {"AWSLambdaSQSQueueExecutionRole", "AWSLambdaDynamoDBExecutionRole"}


def _transformed(template: dict[str, Any]) -> dict[str, Any]:
    """The template after the SAM transform (offline: managed policy names resolve from a table;
    aws-sam-translator runs in .venv-tools, beside the SAM CLI)."""
    from jobsched_tools.iam.policy import transform

    return transform(template, {}, "us-east-1")


def test_sam_adds_no_managed_policy_with_wildcard_data_actions(template: dict[str, Any]) -> None:
    """What SAM attaches on top of the inline statements: only the logs and X-Ray policies (no
    data actions). The event-source policies (Resource "*") must never come back: the event
    sources are explicit AWS::Lambda::EventSourceMapping resources (docs/deploy.md)."""
    output = _transformed(template)
    roles = {k: v["Properties"] for k, v in output["Resources"].items() if v["Type"] == "AWS::IAM::Role"}
    # The one role SAM adds for DeploymentPreference: CodeDeploy's, with only AWS's policy for
    # shifting Lambda aliases (it grants CodeDeploy, not the functions, anything).
    codedeploy = roles.pop("CodeDeployServiceRole")
    assert codedeploy["ManagedPolicyArns"] == [
        "arn:aws:iam::aws:policy/service-role/AWSCodeDeployRoleForLambda"
    ], codedeploy
    assert not codedeploy.get("Policies"), codedeploy
    assert set(roles) == {f"{function}Role" for function in FUNCTIONS}
    base = {
        "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole",
        "arn:aws:iam::aws:policy/AWSXrayWriteOnlyAccess",
    }
    for name, props in roles.items():
        attached = set(props.get("ManagedPolicyArns", []))
        wildcard_data = {arn for arn in attached if arn.rsplit("/", 1)[-1] in STAR_DATA_MANAGED_POLICIES}
        assert wildcard_data == set(), f"{name}: {wildcard_data}"
        assert attached == base, name
        for policy in props.get("Policies", []):
            for statement in _statements(policy["PolicyDocument"]):
                _assert_no_wildcard_data_action(name, statement)
    for logical_id, resource in output["Resources"].items():
        assert resource["Type"] != "AWS::IAM::ManagedPolicy", logical_id


@pytest.mark.parametrize("function", FUNCTIONS)
def test_schedules_invoke_the_alias(template: dict[str, Any], function: str) -> None:
    """SAM targets a function's events at its alias when AutoPublishAlias is set: after the
    transform, each schedule rule's target is the alias (more alias checks: test_template_ops.py)."""
    output = _transformed(template)
    rules = {
        k: v
        for k, v in output["Resources"].items()
        if v["Type"] == "AWS::Events::Rule" and k.startswith(function)
    }
    if not template["Resources"][function]["Properties"].get("Events"):
        assert not rules
        return
    assert rules
    for rule in rules.values():
        for target in rule["Properties"]["Targets"]:
            assert target["Arn"] == {"Ref": f"{function}Aliaslive"}, target


def test_no_function_uses_a_polling_sam_event(template: dict[str, Any]) -> None:
    for function in FUNCTIONS:
        events = template["Resources"][function]["Properties"].get("Events", {})
        kinds = {event["Type"] for event in events.values()}
        assert not kinds & {"SQS", "DynamoDB", "Kinesis", "MQ", "MSK", "SelfManagedKafka", "DocumentDB"}, (
            f"{function}: {kinds}"
        )


def _mappings(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        logical_id: resource
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] == "AWS::Lambda::EventSourceMapping"
    }


def _grants(template: dict[str, Any], function: str) -> dict[str, list[Any]]:
    """Action -> the resources the function's inline statements allow it on."""
    grants: dict[str, list[Any]] = {}
    for policy in template["Resources"][function]["Properties"]["Policies"]:
        for statement in _statements(policy):
            if statement["Effect"] == "Allow":
                for action in _as_list(statement["Action"]):
                    # An action list from a parameter (AllowedSdkActions) is keyed by its Ref.
                    key = action if isinstance(action, str) else json.dumps(action, sort_keys=True)
                    grants.setdefault(key, []).extend(_as_list(statement["Resource"]))
    return grants


def test_event_source_mappings_keep_the_former_sam_event_settings(template: dict[str, Any]) -> None:
    mappings = _mappings(template)
    assert set(mappings) == {
        "WorkerFunctionWork",
        "RegistrarFunctionJobChanges",
        "OutcomePublisherFunctionRunChanges",
    }

    worker = mappings["WorkerFunctionWork"]
    # The role (with its inline grants) must exist before Lambda validates the mapping.
    assert worker["DependsOn"] in ("WorkerFunctionRole", ["WorkerFunctionRole"])
    assert worker["Properties"] == {
        "FunctionName": {"Ref": "WorkerFunction.Alias"},
        "EventSourceArn": {"Fn::GetAtt": ["WorkQueue", "Arn"]},
        "BatchSize": {"Ref": "WorkerBatchSize"},
        "MaximumBatchingWindowInSeconds": 0,
        "FunctionResponseTypes": ["ReportBatchItemFailures"],
        "ScalingConfig": {"MaximumConcurrency": {"Ref": "WorkerMaxConcurrency"}},
    }

    registrar = mappings["RegistrarFunctionJobChanges"]
    assert registrar["DependsOn"] in ("RegistrarFunctionRole", ["RegistrarFunctionRole"])
    assert registrar["Properties"] == {
        "FunctionName": {"Ref": "RegistrarFunction.Alias"},
        "EventSourceArn": {"Fn::GetAtt": ["JobsTable", "StreamArn"]},
        "StartingPosition": "TRIM_HORIZON",
        "BatchSize": 100,
        "BisectBatchOnFunctionError": True,
        "MaximumRetryAttempts": 10,
        "FunctionResponseTypes": ["ReportBatchItemFailures"],
        "DestinationConfig": {"OnFailure": {"Destination": {"Fn::GetAtt": ["RegistrarFailureQueue", "Arn"]}}},
    }

    # Outcome events, at least once: retried until the record expires from the stream, and only
    # the records whose new image ends a run reach the function.
    publisher = mappings["OutcomePublisherFunctionRunChanges"]
    assert publisher["DependsOn"] in ("OutcomePublisherFunctionRole", ["OutcomePublisherFunctionRole"])
    properties = publisher["Properties"]
    pattern = json.loads(properties.pop("FilterCriteria")["Filters"][0]["Pattern"])
    statuses = pattern["dynamodb"]["NewImage"]["status"]["S"]
    assert pattern == {"dynamodb": {"NewImage": {"status": {"S": statuses}}}}
    assert sorted(statuses) == sorted(TERMINAL)  # the statuses the publisher turns into outcomes
    assert properties == {
        "FunctionName": {"Ref": "OutcomePublisherFunction.Alias"},
        "EventSourceArn": {"Fn::GetAtt": ["RunsTable", "StreamArn"]},
        "StartingPosition": "TRIM_HORIZON",
        "BatchSize": 100,
        "MaximumRetryAttempts": -1,
        "MaximumRecordAgeInSeconds": -1,
        "BisectBatchOnFunctionError": True,
        "FunctionResponseTypes": ["ReportBatchItemFailures"],
        "DestinationConfig": {"OnFailure": {"Destination": {"Fn::GetAtt": ["OutcomeFailureQueue", "Arn"]}}},
    }


def test_event_source_grants_are_scoped_to_the_exact_arns(template: dict[str, Any]) -> None:
    worker = _grants(template, "WorkerFunction")
    queue = {"Fn::GetAtt": ["WorkQueue", "Arn"]}
    for action in (
        "sqs:ReceiveMessage",
        "sqs:DeleteMessage",
        "sqs:ChangeMessageVisibility",
        "sqs:GetQueueAttributes",
    ):
        assert worker[action] == [queue], action

    registrar = _grants(template, "RegistrarFunction")
    stream = {"Fn::GetAtt": ["JobsTable", "StreamArn"]}
    for action in ("dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"):
        assert registrar[action] == [stream], action
    # The stream mapping needs ListStreams, which has no resource-level permissions: granted on
    # "*" (it returns stream ARNs, no data), in a statement of its own, to the two functions
    # that a stream mapping invokes only.
    assert registrar["dynamodb:ListStreams"] == ["*"]
    readers = {"RegistrarFunction", "OutcomePublisherFunction"}
    for function in FUNCTIONS:
        for policy in template["Resources"][function]["Properties"]["Policies"]:
            for statement in _statements(policy):
                if statement.get("Sid") == "BuiltinSdkTargets":
                    # aws_sdk (issue 38): exactly the listed actions (the parameter's pattern
                    # refuses a wildcard) on any resource, the worker's only.
                    assert function == "WorkerFunction"
                    assert statement["Action"] == {"Ref": "AllowedSdkActions"}, statement
                    continue
                if "*" in _as_list(statement.get("Resource")):
                    assert function in readers, function
                    assert statement["Action"] == "dynamodb:ListStreams", statement
    failures = {"Fn::GetAtt": ["RegistrarFailureQueue", "Arn"]}
    # The on-failure destinations need SendMessage only (SAM grants that alone for one).
    assert "sqs:GetQueueAttributes" not in registrar
    # Its sends: failed batches to the failure queue, and late runs of a changed schedule.
    assert registrar["sqs:SendMessage"] == [{"Fn::GetAtt": ["WorkQueue", "Arn"]}, failures]

    publisher = _grants(template, "OutcomePublisherFunction")
    runs_stream = {"Fn::GetAtt": ["RunsTable", "StreamArn"]}
    for action in ("dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"):
        assert publisher[action] == [runs_stream], action
    assert publisher["dynamodb:ListStreams"] == ["*"]
    expired = {"Fn::GetAtt": ["OutcomeFailureQueue", "Arn"]}
    assert publisher["sqs:SendMessage"] == [expired] and "sqs:GetQueueAttributes" not in publisher


def test_job_items_are_people_s_the_state_is_jobsched_s(template: dict[str, Any]) -> None:
    """Only the registrar writes job items (its report), and the worker and the detector update
    them for ``pause_on_failure`` (a conditional UpdateItem, services/pausing.py; never a put);
    only the detector deletes one, a complete job's that asked for it (``action_after_completion:
    delete``, services/completion.py, conditional on the item as read); the trigger, the detector
    (and its reconcile pass: Scan, BatchGetItem) and the worker (a promotion's definition,
    services/definitions.py) read them. Every function that moves a schedule writes the state
    table; the worker moves no schedule (the overlap chain is on the runs) and only reads it."""
    jobs = {"Fn::GetAtt": ["JobsTable", "Arn"]}
    state = {"Fn::GetAtt": ["StateTable", "Arn"]}
    writes = ("dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem")
    for function in FUNCTIONS:
        grants = _grants(template, function)
        on_jobs = {action for action, resources in grants.items() if jobs in resources}
        expected = {
            "WorkerFunction": {"dynamodb:GetItem", "dynamodb:UpdateItem"},
            "TriggerFunction": {"dynamodb:GetItem"},
            "MissDetectorFunction": {
                "dynamodb:GetItem",
                "dynamodb:UpdateItem",
                "dynamodb:Scan",
                "dynamodb:BatchGetItem",
                "dynamodb:DeleteItem",
            },
            "RegistrarFunction": {"dynamodb:GetItem", "dynamodb:UpdateItem"},
            "OutcomePublisherFunction": set(),
        }[function]
        assert on_jobs == expected, function
        if function == "OutcomePublisherFunction":  # reads the runs stream, writes no table
            stream_reads = {"dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"}
            assert {a for a in grants if a.startswith("dynamodb:")} == stream_reads | {"dynamodb:ListStreams"}
            continue
        moves_schedules = function != "WorkerFunction"
        assert (state in grants["dynamodb:UpdateItem"]) is moves_schedules, function
        assert not any(state in grants.get(action, []) for action in ("dynamodb:DeleteItem",)), function
    for function, allowed in (
        ("WorkerFunction", {"dynamodb:UpdateItem"}),
        ("MissDetectorFunction", {"dynamodb:UpdateItem", "dynamodb:DeleteItem"}),
    ):
        grants = _grants(template, function)
        assert all(jobs not in grants.get(action, []) for action in writes if action not in allowed)


def _environment(template: dict[str, Any], function: str) -> dict[str, Any]:
    merged = dict(template["Globals"]["Function"]["Environment"]["Variables"])
    own = template["Resources"][function]["Properties"].get("Environment", {}).get("Variables", {})
    merged.update(own)
    return merged


@pytest.mark.parametrize("function", FUNCTIONS)
def test_every_function_gets_every_setting(template: dict[str, Any], function: str) -> None:
    env = _environment(template, function)
    for name, parameter in SETTINGS_ENV.items():
        assert env.get(name) == {"Ref": parameter}, name
        assert parameter in template["Parameters"]
    for name, parameter in LIST_ENV.items():
        assert env.get(name) == {"Fn::Join": [",", {"Ref": parameter}]}, name
        assert template["Parameters"][parameter]["Type"] == "CommaDelimitedList"
    assert env["JOBS_TABLE"] == {"Ref": "JobsTable"}
    assert env["STATE_TABLE"] == {"Ref": "StateTable"}
    assert env["RUNS_TABLE"] == {"Ref": "RunsTable"}
    assert env["WORK_QUEUE_URL"] == {"Ref": "WorkQueue"}
    # Per stack (issue 27): the service dimension is the stack's name, so two stacks in one
    # account and region never share a metric.
    assert env["POWERTOOLS_SERVICE_NAME"] == {"Ref": "AWS::StackName"}
    assert env["POWERTOOLS_METRICS_NAMESPACE"] == "Jobsched"
    # Only sam local / tests may redirect AWS calls: absent unless LocalEndpointUrl is set.
    assert env["AWS_ENDPOINT_URL"] == {
        "Fn::If": ["HasLocalEndpoint", {"Ref": "LocalEndpointUrl"}, {"Ref": "AWS::NoValue"}]
    }
    assert template["Parameters"]["LocalEndpointUrl"]["Default"] == ""


def _bounds(field: Any) -> tuple[int | None, int | None]:
    lower = next((m.ge for m in field.metadata if getattr(m, "ge", None) is not None), None)
    upper = next((m.le for m in field.metadata if getattr(m, "le", None) is not None), None)
    return lower, upper


def _parameter_for(env_var: str) -> str:
    return "".join(part.capitalize() for part in env_var.lower().split("_"))


def _text(default: object) -> str:
    """A default as the template and the deploy guide write it (a switch in lower case)."""
    return str(default).lower() if isinstance(default, bool) else str(default)


def _settings_sources() -> dict[str, Any]:
    """Every setting's one source: SchedulerConfig for the scheduler's tunables, Settings for the
    runtime's own (worker threads), by environment variable."""
    fields = dict(SchedulerConfig.model_fields)
    fields["worker_record_concurrency"] = Settings.model_fields["worker_record_concurrency"]
    return {name.upper(): field for name, field in fields.items()}


def test_every_setting_is_a_template_parameter_with_the_source_s_default_and_bounds(
    template: dict[str, Any],
) -> None:
    """The template's Default, MinValue and MaxValue of each setting come from its one source,
    and every function's environment passes it (issue 17: defaults once, the rest derived)."""
    sources = _settings_sources()
    globals_env = template["Globals"]["Function"]["Environment"]["Variables"]
    for env_var, field in sources.items():
        parameter = _parameter_for(env_var)
        assert SETTINGS_ENV.get(env_var) == parameter, env_var
        assert globals_env[env_var] == {"Ref": parameter}, env_var
        spec = template["Parameters"][parameter]
        if isinstance(field.default, bool):  # a switch: "true" or "false", as CloudFormation has them
            assert (spec["Type"], spec["Default"], spec["AllowedValues"]) == (
                "String",
                _text(field.default),
                ["true", "false"],
            ), parameter
            continue
        lower, upper = _bounds(field)
        assert (spec["Default"], spec.get("MinValue"), spec.get("MaxValue")) == (
            field.default,
            lower,
            upper,
        ), parameter
    assert set(SETTINGS_ENV) - {"POWERTOOLS_LOG_LEVEL"} == set(sources)
    assert template["Parameters"]["LookaheadSeconds"]["MaxValue"] == 900  # SQS delay limit


def test_the_deploy_guide_states_each_source_default() -> None:
    """docs/deploy.md's parameter table: one row per setting, with the source's default."""
    rows = {}
    for line in (ROOT / "docs" / "deploy.md").read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].startswith("`") and cells[2].startswith("`"):
            rows[cells[2].strip("`")] = cells[1]
    for env_var, field in _settings_sources().items():
        assert rows.get(env_var) == _text(field.default), env_var


def test_work_queue_visibility_is_six_worker_timeouts(template: dict[str, Any]) -> None:
    queue = template["Resources"]["WorkQueue"]["Properties"]
    assert queue["VisibilityTimeout"] == {
        "Fn::FindInMap": ["QueueVisibility", {"Ref": "WorkerTimeoutSeconds"}, "Seconds"]
    }
    assert template["Resources"]["WorkerFunction"]["Properties"]["Timeout"] == {"Ref": "WorkerTimeoutSeconds"}
    mapping = template["Mappings"]["QueueVisibility"]
    allowed = template["Parameters"]["WorkerTimeoutSeconds"]["AllowedValues"]
    assert set(mapping) == set(allowed)
    for timeout in allowed:
        assert mapping[timeout]["Seconds"] >= 6 * int(timeout)
    assert max(int(t) for t in allowed) <= 900


def _samconfig_overrides(env: str) -> dict[str, str]:
    config = tomllib.loads((ROOT / "samconfig.toml").read_text())
    entries = config.get(env, {}).get("deploy", {}).get("parameters", {}).get("parameter_overrides", [])
    overrides = {}
    for entry in entries:
        key, _, value = entry.partition("=")
        overrides[key] = value.strip('"')
    return overrides


@pytest.mark.parametrize("env", ["default", "dev", "prod"])
def test_samconfig_overrides_fit_the_template_and_the_settings(template: dict[str, Any], env: str) -> None:
    parameters = template["Parameters"]
    values = {name: str(spec.get("Default", "")) for name, spec in parameters.items()}
    for name, value in _samconfig_overrides(env).items():
        assert name in parameters, f"{env}: unknown parameter {name}"
        spec = parameters[name]
        if "AllowedValues" in spec:
            assert value in [str(v) for v in spec["AllowedValues"]], f"{env}: {name}={value}"
        if "AllowedPattern" in spec:
            assert re.fullmatch(spec["AllowedPattern"], value), f"{env}: {name}={value}"
        if spec["Type"] == "Number":
            assert spec.get("MinValue", float("-inf")) <= float(value) <= spec.get("MaxValue", float("inf"))
        values[name] = value
    # The settings model's own cross-field rules (e.g. heartbeat <= lease / 2) hold too.
    # (Settings that are not the scheduler's, e.g. the worker's record concurrency, are skipped.)
    numeric = {
        name: p
        for name, p in SETTINGS_ENV.items()
        if name != "POWERTOOLS_LOG_LEVEL" and name.lower() in SchedulerConfig.model_fields
    }
    SchedulerConfig(**{name.lower(): values[p] for name, p in numeric.items()})  # as the env has them


# ---------------------------------------------------------------------------- (b) provisioning


@pytest.fixture
def aws() -> Iterator[tuple[Any, Any]]:
    # Dummy credentials and the region: the autouse fixture of tests/conftest.py.
    with mock_aws():
        yield boto3.client("dynamodb"), boto3.client("sqs")


# The trigger reads the attributes next-run includes; the detector reads each run the lease
# index lists. A job's history is a query of the runs table's own key: no index (docs/data-model.md).
PROJECTIONS = {"next-run": "INCLUDE", "lease": "KEYS_ONLY"}


def _index(description: dict[str, Any], name: str) -> list[tuple[str, str]]:
    (index,) = [i for i in description.get("GlobalSecondaryIndexes", []) if i["IndexName"] == name]
    assert index["Projection"]["ProjectionType"] == PROJECTIONS[name]
    return [(k["AttributeName"], k["KeyType"]) for k in index["KeySchema"]]


def _types(description: dict[str, Any]) -> dict[str, str]:
    return {a["AttributeName"]: a["AttributeType"] for a in description["AttributeDefinitions"]}


def test_table_specs_are_create_table_kwargs(template: dict[str, Any]) -> None:
    specs = table_specs(template)
    assert set(specs) == {"JobsTable", "StateTable", "RunsTable"}
    for spec in specs.values():
        assert spec["BillingMode"] == "PAY_PER_REQUEST"
        assert "TableName" not in spec
    assert specs["JobsTable"]["StreamSpecification"] == {
        "StreamEnabled": True,
        "StreamViewType": "NEW_AND_OLD_IMAGES",
    }
    # Every write to a run, for the outcome publisher (on whether or not it is deployed).
    assert specs["RunsTable"]["StreamSpecification"] == {
        "StreamEnabled": True,
        "StreamViewType": "NEW_AND_OLD_IMAGES",
    }
    assert "StreamSpecification" not in specs["StateTable"]  # only people's writes wake the registrar


def test_provision_creates_the_data_model(aws: tuple[Any, Any]) -> None:
    """A legacy stack's tables (ClaimShape legacy: next-run and lease); tests/template/
    test_template_claim_shape.py checks each shape's indexes, the default's `due` among them."""
    dynamodb, sqs = aws
    resources = provision(dynamodb, sqs, prefix="t", parameters={"ClaimShape": "legacy"})

    jobs = dynamodb.describe_table(TableName=resources.jobs_table)["Table"]
    assert [(k["AttributeName"], k["KeyType"]) for k in jobs["KeySchema"]] == [("job_id", "HASH")]
    assert _types(jobs) == {"job_id": "S"} and not jobs.get("GlobalSecondaryIndexes")
    assert jobs["StreamSpecification"] == {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}
    assert resources.jobs_stream_arn == jobs["LatestStreamArn"]

    state = dynamodb.describe_table(TableName=resources.state_table)["Table"]
    assert [(k["AttributeName"], k["KeyType"]) for k in state["KeySchema"]] == [("job_id", "HASH")]
    assert _index(state, "next-run") == [("sched_shard", "HASH"), ("next_run_at", "RANGE")]
    assert _types(state) == {"job_id": "S", "sched_shard": "N", "next_run_at": "N"}

    runs = dynamodb.describe_table(TableName=resources.runs_table)["Table"]
    # Keyed by job and run (core/run.py run_key): a job's runs are one partition, no index.
    assert [(k["AttributeName"], k["KeyType"]) for k in runs["KeySchema"]] == [
        ("job_id", "HASH"),
        ("run_id", "RANGE"),
    ]
    assert [i["IndexName"] for i in runs["GlobalSecondaryIndexes"]] == ["lease"]
    assert _index(runs, "lease") == [("lease_shard", "HASH"), ("check_at", "RANGE")]
    assert _types(runs) == {"job_id": "S", "run_id": "S", "lease_shard": "N", "check_at": "N"}
    ttl = dynamodb.describe_time_to_live(TableName=resources.runs_table)["TimeToLiveDescription"]
    assert (ttl["TimeToLiveStatus"], ttl["AttributeName"]) == ("ENABLED", "expires_at")

    def attributes(url: str) -> dict[str, str]:
        return dict(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"])

    work = attributes(resources.work_queue_url)
    dlq = attributes(resources.dead_letter_queue_url)
    assert json.loads(work["RedrivePolicy"]) == {"deadLetterTargetArn": dlq["QueueArn"], "maxReceiveCount": 5}
    assert work["VisibilityTimeout"] == str(6 * 900)
    assert dlq["MessageRetentionPeriod"] == str(14 * 86400)
    assert attributes(resources.registrar_failure_queue_url)["MessageRetentionPeriod"] == str(14 * 86400)
    assert work["SqsManagedSseEnabled"] == "true"


def test_provision_twice_reuses_everything(aws: tuple[Any, Any]) -> None:
    dynamodb, sqs = aws
    first = provision(dynamodb, sqs, prefix="t")
    dynamodb.put_item(TableName=first.jobs_table, Item={"job_id": {"S": "kept"}})
    second = provision(dynamodb, sqs, prefix="t")
    assert second == first
    assert "Item" in dynamodb.get_item(TableName=first.jobs_table, Key={"job_id": {"S": "kept"}})
    assert len(dynamodb.list_tables()["TableNames"]) == 3
    assert len(sqs.list_queues()["QueueUrls"]) == 3


def test_provision_parameter_overrides(aws: tuple[Any, Any]) -> None:
    dynamodb, sqs = aws
    resources = provision(dynamodb, sqs, prefix="short", parameters={"WorkerTimeoutSeconds": "120"})
    attrs = sqs.get_queue_attributes(QueueUrl=resources.work_queue_url, AttributeNames=["VisibilityTimeout"])
    assert attrs["Attributes"]["VisibilityTimeout"] == "720"


# ---------------------------------------------------------------------------- (c) sample events


def _load(name: str) -> dict[str, Any]:
    document = json.loads((EVENTS / name).read_text())
    assert isinstance(document, dict)
    return document


def _epoch_ms(iso_z: str) -> int:
    return int(datetime.fromisoformat(iso_z.replace("Z", "+00:00")).timestamp() * 1000)


def test_every_event_file_is_known_and_valid_json() -> None:
    names = sorted(path.name for path in EVENTS.glob("*"))
    assert names == [
        "miss_detector_scheduled.json",
        "outcome_publisher_stream.json",
        "registrar_stream.json",
        "trigger_group.json",
        "trigger_scheduled.json",
        "worker_sqs_batch.json",
    ]
    for name in names:
        _load(name)


@pytest.mark.parametrize("name", ["trigger_scheduled.json", "miss_detector_scheduled.json"])
def test_scheduled_events(name: str) -> None:
    event = _load(name)
    assert event["detail-type"] == "Scheduled Event"
    assert event["source"] == "aws.events"
    assert event["detail"] == {}
    assert re.match(r"^arn:aws:events:[a-z0-9-]+:\d{12}:rule/.+", event["resources"][0])
    datetime.fromisoformat(event["time"].replace("Z", "+00:00"))


def test_trigger_group_event_is_what_a_fan_out_tick_sends() -> None:
    from jobsched.core.shard_groups import group_event, parse_tick_event

    sample = _load("trigger_group.json")
    request = parse_tick_event(sample, groups=1)  # the event's own group count decides
    assert sample == group_event(request.group, request.groups)
    assert not request.fan_out


def test_worker_batch_has_two_run_messages_and_one_malformed() -> None:
    records = _load("worker_sqs_batch.json")["Records"]
    assert len(records) == 3
    assert len({record["messageId"] for record in records}) == 3
    valid = []
    for record in records:
        assert record["eventSource"] == "aws:sqs"
        assert record["receiptHandle"]
        assert re.match(r"^arn:aws:sqs:[a-z0-9-]+:\d{12}:.+", record["eventSourceARN"])
        assert int(record["attributes"]["ApproximateReceiveCount"]) >= 1
        try:
            valid.append(json.loads(record["body"]))
        except json.JSONDecodeError:
            assert record["body"] == "not json"
    assert len(valid) == 2
    for body in valid:
        assert set(body) == {"v", "run_id", "job_id", "version", "attempt", "scheduled_at", "definition"}
        assert body["v"] == 1
        job_id, _, instant = body["run_id"].partition("@")
        assert job_id == body["job_id"] == body["definition"]["job_id"]
        assert body["scheduled_at"] == _epoch_ms(instant)
        definition = JobDefinition.from_item(body["definition"])
        assert definition.to_item() == body["definition"]  # the item form, exactly
        # The run id names a real occurrence of the job's schedule (03:00 Berlin is 02:00Z in December).
        at = datetime.fromisoformat(instant.replace("Z", "+00:00"))
        assert definition.compiled_schedule().next_after(at - timedelta(seconds=1)) == at


def _plain(value: Any) -> Any:
    return TypeDeserializer().deserialize(value)


def test_registrar_stream_records() -> None:
    records = _load("registrar_stream.json")["Records"]
    assert [record["eventName"] for record in records] == ["INSERT", "MODIFY", "INSERT", "REMOVE"]
    outcomes = []
    for record in records:
        assert record["eventSource"] == "aws:dynamodb"
        assert re.match(
            r"^arn:aws:dynamodb:[a-z0-9-]+:\d{12}:table/[^/]+/stream/\d{4}-\d\d-\d\dT[\d:.]+$",
            record["eventSourceARN"],
        )
        change = record["dynamodb"]
        assert change["StreamViewType"] == "NEW_AND_OLD_IMAGES"
        assert set(change["Keys"]) == {"job_id"}
        assert ("NewImage" in change) == (record["eventName"] != "REMOVE")
        assert ("OldImage" in change) == (record["eventName"] != "INSERT")
        image = change.get("NewImage") or change["OldImage"]
        assert image["job_id"] == change["Keys"]["job_id"]
        item = {key: _plain(value) for key, value in image.items()}
        try:
            JobDefinition.from_item(item)
            outcomes.append("valid")
        except InvalidJob as exc:
            assert any("61" in reason for reason in exc.reasons)
            outcomes.append("invalid")
    assert outcomes == ["valid", "valid", "invalid", "valid"]
    modify = records[1]["dynamodb"]
    assert modify["NewImage"]["schedule"] != modify["OldImage"]["schedule"]


def test_the_indexes_project_what_the_stores_return(template: dict[str, Any]) -> None:
    """ports.INDEX_PROJECTION (what the in-memory store returns of an index, and what the
    services may read of it) is the template's projection of each index, keys included, under
    the ClaimShape values that have it (ports.DEPLOYED_INDEXES); together they make every index
    the code defines. Each template index is, to the letter, what ports.index_definition would
    create."""
    from jobsched.ports import BASE_QUERIES, DEPLOYED_INDEXES, INDEX_KEYS, INDEX_PROJECTION, index_definition

    found = {}
    for shape in DEPLOYED_INDEXES:
        specs = table_specs(template, {"ClaimShape": shape})
        for logical_id in ("JobsTable", "StateTable", "RunsTable"):
            table_keys = [k["AttributeName"] for k in specs[logical_id]["KeySchema"]]
            for index in specs[logical_id].get("GlobalSecondaryIndexes", []):
                projection = index["Projection"]
                assert projection["ProjectionType"] in ("KEYS_ONLY", "INCLUDE"), index[
                    "IndexName"
                ]  # never ALL
                keys = [k["AttributeName"] for k in index["KeySchema"]]
                assert tuple(keys) == INDEX_KEYS[index["IndexName"]]
                found[index["IndexName"]] = {*table_keys, *keys, *projection.get("NonKeyAttributes", [])}
                written = {k: v for k, v in index.items() if k != "ProvisionedThroughput"}
                assert written == index_definition(index["IndexName"])
    coded = {name: set(attrs) for name, attrs in INDEX_PROJECTION.items() if name not in BASE_QUERIES}
    assert found == coded


def test_the_table_keys_are_the_stores_keys(template: dict[str, Any]) -> None:
    """ports.TABLE_KEY (how every store keys an item) is each table's key schema in the template,
    and a base-table query (the runs of a job) queries the runs table's own key."""
    from jobsched.ports import BASE_QUERIES, INDEX_KEYS, INDEX_TABLE, TABLE_KEY

    logical = {"jobs": "JobsTable", "state": "StateTable", "runs": "RunsTable"}
    for table, logical_id in logical.items():
        schema = template["Resources"][logical_id]["Properties"]["KeySchema"]
        assert TABLE_KEY[table] == tuple(k["AttributeName"] for k in schema)
    assert {"runs-of-job"} == BASE_QUERIES
    for query in BASE_QUERIES:
        assert INDEX_KEYS[query] == TABLE_KEY[INDEX_TABLE[query]]


def test_every_resource_made_for_the_outcome_publisher_exists_only_with_a_bus(
    template: dict[str, Any],
) -> None:
    """After the SAM transform, every resource generated for the conditional function (its role,
    version, alias and CodeDeploy deployment group) carries its condition: a deployment group
    without it would name an alarm and an alias that a stack without an outcome bus lacks."""
    from jobsched_tools.iam.policy import transform

    output = transform(template, {"OutcomeEventBusName": ""}, "us-east-1")
    made = {k: v for k, v in output["Resources"].items() if k.startswith("OutcomePublisher")}
    assert {v["Type"] for v in made.values()} >= {
        "AWS::Lambda::Function",
        "AWS::Lambda::Alias",
        "AWS::IAM::Role",
        "AWS::CodeDeploy::DeploymentGroup",
    }
    assert {k: v.get("Condition") for k, v in made.items()} == dict.fromkeys(made, "HasOutcomeEventBus")


def _references(value: Any, guarded: bool = False) -> Iterator[tuple[str, bool]]:
    """Every resource a value names (Ref, Fn::GetAtt, ${X} in Fn::Sub), and whether an Fn::If
    guards it."""
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == "Ref" and isinstance(inner, str):
                yield inner.split(".")[0], guarded
            elif key == "Fn::GetAtt":
                target = inner[0] if isinstance(inner, list) else str(inner).split(".")[0]
                yield str(target), guarded
            elif key == "Fn::Sub":
                text = inner[0] if isinstance(inner, list) else inner
                for name in re.findall(r"\$\{([A-Za-z0-9]+)[.}]", str(text)):
                    yield name, guarded
                if isinstance(inner, list):
                    yield from _references(inner[1], guarded)
            else:
                yield from _references(inner, guarded or key == "Fn::If")
    elif isinstance(value, list):
        for item in value:
            yield from _references(item, guarded)


def test_no_unconditional_resource_names_a_conditional_one_after_the_transform(
    template: dict[str, Any],
) -> None:
    """What CloudFormation refuses at deploy time when a condition is false: an unconditional
    resource (or output) that names a conditional one outside an Fn::If. Checked on the template
    as SAM transforms it, since the transform makes resources of its own."""
    from jobsched_tools.iam.policy import transform

    output = transform(template, {}, "us-east-1")
    conditional = {k for k, v in output["Resources"].items() if v.get("Condition")}
    offenders = [
        (owner, target)
        for owner, resource in {**output["Resources"], **output.get("Outputs", {})}.items()
        if not resource.get("Condition")
        for target, guarded in _references({k: v for k, v in resource.items() if k != "Condition"})
        if target in conditional and not guarded
    ]
    assert offenders == []
