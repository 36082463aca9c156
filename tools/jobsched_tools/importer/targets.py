"""A schedule's target as a built-in handler and its payload (``target_for``), by its ARN's
service: SQS, Lambda, Step Functions, EventBridge, ECS, SNS, Kinesis, and the universal target
(``aws-sdk``); any other is ``Refused``."""

from __future__ import annotations

import json
from typing import Any

from jobsched_tools.importer.plan import PlannedImport, Refused
from jobsched_tools.importer.values import mapping

# EcsParameters (PascalCase) to RunTask's (camelCase) where the name is not the lower-cased first
# letter: https://docs.aws.amazon.com/scheduler/latest/APIReference/API_EcsParameters.html
_ECS_RENAMED = {"TaskCount": "count"}


def _input(target: dict[str, Any], plan: PlannedImport) -> Any:
    raw = target.get("Input")
    if raw is None:
        return {}
    if not isinstance(raw, str):
        raise Refused(f"Target.Input {raw!r:.80}: expected a string (the JSON text get-schedule returns)")
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        plan.notes.append("Input is not JSON: it is passed as a JSON string")
        return raw


def _lower_first(value: Any) -> Any:
    if isinstance(value, list):
        return [_lower_first(item) for item in value]
    if isinstance(value, dict):
        return {_ECS_RENAMED.get(k, k[:1].lower() + k[1:]): _lower_first(v) for k, v in value.items()}
    return value


def target_for(target: dict[str, Any], plan: PlannedImport) -> tuple[str, dict[str, Any]]:
    """The built-in handler and its payload for a schedule's target (``Refused`` says why not)."""
    arn = target.get("Arn", "")
    parts = arn.split(":", 5) if isinstance(arn, str) else []
    if len(parts) < 6 or parts[0] != "arn":
        raise Refused(f"target {arn!r:.120} is not an ARN")
    partition, service, region, account, resource = parts[1], parts[2], parts[3], parts[4], parts[5]
    if service == "scheduler" and resource.startswith("aws-sdk:"):
        return _universal_target(arn, target, plan)
    if service == "sns":
        return _sns_target(arn, target, plan)
    if service == "kinesis":
        return _kinesis_target(arn, target, plan)
    if service == "sqs":
        if mapping(target.get("SqsParameters"), "Target.SqsParameters").get("MessageGroupId"):
            raise Refused("SQS FIFO target (MessageGroupId): sqs_send sets no message group")
        suffix = "amazonaws.com.cn" if partition == "aws-cn" else "amazonaws.com"
        url = f"https://sqs.{region}.{suffix}/{account}/{resource}"
        return "sqs_send", {"queue_url": url, "message": _input(target, plan)}
    if service == "lambda":
        plan.notes.append(
            "Lambda target: the function receives {input, idempotency_key, run_id}, "
            "the schedule's Input under input (EventBridge passes the Input alone)"
        )
        return "lambda_invoke", {"function": arn, "input": _input(target, plan)}
    if service == "states":
        return "sfn_start_execution", {"state_machine": arn, "input": _input(target, plan)}
    if service == "events":
        return _eventbridge_target(arn, target, plan)
    if service == "ecs":
        return _ecs_target(arn, target, plan)
    raise Refused(f"target type {service}: jobsched has no built-in handler for it")


def _universal_target(arn: str, target: dict[str, Any], plan: PlannedImport) -> tuple[str, dict[str, Any]]:
    """A universal target (``arn:aws:scheduler:::aws-sdk:SERVICE:apiAction``) as ``aws_sdk``, with
    the schedule's Input as the request (issue 38)."""
    from jobsched.targets.universal import boto3_service, iam_action, parse_universal_arn

    try:
        service, action = parse_universal_arn(arn)
    except ValueError as exc:
        raise Refused(str(exc)) from None
    request = _input(target, plan)
    if not isinstance(request, dict):
        raise Refused(f"universal target {service}:{action}: its Input (the request) must be a JSON object")
    allowed = iam_action(boto3_service(service), action[:1].upper() + action[1:])
    plan.notes.append(f"AWS API call: list {allowed} in the stack's AllowedSdkActions (the worker's grant)")
    return "aws_sdk", {"target_arn": arn, "input": request}


def _sns_target(arn: str, target: dict[str, Any], plan: PlannedImport) -> tuple[str, dict[str, Any]]:
    """An SNS topic (EventBridge's templated Publish target) as ``sns_publish``."""
    plan.notes.append("SNS target: list the topic in the stack's AllowedTopicArns")
    message = target.get("Input") or ""
    if not isinstance(message, str):
        raise Refused(f"Target.Input {message!r:.80}: expected a string (the JSON text get-schedule returns)")
    return "sns_publish", {"topic_arn": arn, "message": message}


def _kinesis_target(arn: str, target: dict[str, Any], plan: PlannedImport) -> tuple[str, dict[str, Any]]:
    """A Kinesis stream (EventBridge's templated PutRecord target) as ``kinesis_put_record``,
    with KinesisParameters.PartitionKey."""
    plan.notes.append("Kinesis target: list the stream in the stack's AllowedStreamArns")
    data = target.get("Input") or ""
    if not isinstance(data, str):
        raise Refused(f"Target.Input {data!r:.80}: expected a string (the JSON text get-schedule returns)")
    payload: dict[str, Any] = {"stream_arn": arn, "data": data}
    key = mapping(target.get("KinesisParameters"), "Target.KinesisParameters").get("PartitionKey")
    if key is not None:
        if not isinstance(key, str):
            raise Refused(f"Target.KinesisParameters.PartitionKey {key!r:.80}: expected text")
        payload["partition_key"] = key
    return "kinesis_put_record", payload


def _eventbridge_target(arn: str, target: dict[str, Any], plan: PlannedImport) -> tuple[str, dict[str, Any]]:
    detail = _input(target, plan)
    if not isinstance(detail, dict):
        raise Refused("EventBridge target: its Input (the event's detail) must be a JSON object")
    parameters = mapping(target.get("EventBridgeParameters"), "Target.EventBridgeParameters")
    payload = {"event_bus": arn, "detail": detail}
    for source, name in (("DetailType", "detail_type"), ("Source", "source")):
        if source in parameters:
            if not isinstance(parameters[source], str):
                what = f"Target.EventBridgeParameters.{source}"
                raise Refused(f"{what} {parameters[source]!r:.80}: expected text")
            payload[name] = parameters[source]
    plan.notes.append("EventBridge target: the detail gains an idempotency_key field")
    return "eventbridge_put", payload


def _ecs_target(arn: str, target: dict[str, Any], plan: PlannedImport) -> tuple[str, dict[str, Any]]:
    parameters = dict(mapping(target.get("EcsParameters"), "Target.EcsParameters"))
    definition = parameters.pop("TaskDefinitionArn", None)
    if not definition or not isinstance(definition, str):
        raise Refused("ECS target without EcsParameters.TaskDefinitionArn")
    run_task = _lower_first(parameters)
    if "tags" in run_task:  # Scheduler: [{key: value}]; RunTask: [{key, value}]
        tags = parameters["Tags"]
        if not isinstance(tags, list) or not all(isinstance(tag, dict) for tag in tags):
            raise Refused(f"Target.EcsParameters.Tags {tags!r:.80}: expected a list of objects")
        run_task["tags"] = [{"key": k, "value": v} for tag in tags for k, v in tag.items()]
    if target.get("Input"):
        plan.notes.append("ECS target: Input is not passed (set overrides in the job's run_task)")
    return "ecs_run_task", {"cluster": arn, "task_definition": definition, "run_task": run_task}
