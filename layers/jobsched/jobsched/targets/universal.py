"""Any AWS API as a target (issue 38), as EventBridge Scheduler's universal targets
(``arn:aws:scheduler:::aws-sdk:SERVICE:apiAction``), and SNS Publish and Kinesis PutRecord as
templated built-ins.

- ``aws_sdk``: calls ``payload["action"]`` of ``payload["service"]`` through boto3 with
  ``payload["input"]`` as the request. The service is the AWS SDK's service identifier and the
  action its operation in camelCase, as in a universal target's ARN
  (https://docs.aws.amazon.com/scheduler/latest/UserGuide/managing-targets-universal.html);
  ``payload["target_arn"]`` may give both as that ARN instead. The call's IAM action
  (``ec2:StopInstances``) must be on the stack's ``AllowedSdkActions`` list, which is also the
  worker's grant: no wildcard actions.
- ``sns_publish``: publishes ``payload["message"]`` (text, or JSON for anything else) to
  ``payload["topic_arn"]``, on ``AllowedTopicArns``.
- ``kinesis_put_record``: puts ``payload["data"]`` on ``payload["stream_arn"]`` with
  ``payload["partition_key"]`` (the run's idempotency key when absent), on ``AllowedStreamArns``.

Idempotency: the run's idempotency key goes into each field the service deduplicates on, unless
the input sets it: every member the operation's model marks as an idempotency token (botocore
would otherwise fill it with a new random UUID on each call, so a retried attempt would not be
recognised): EC2's ``ClientToken`` (RunInstances, CreateFleet, ...), ECS's ``clientToken``, RDS,
... cut to the member's length limit with a digest; and, for a FIFO topic or queue, SNS Publish's
and SQS SendMessage's ``MessageDeduplicationId`` (deduplicated for 5 minutes). Kinesis PutRecord
has no such field: a retried attempt can put a second record (at least once), and the record
carries the key as its partition key and in ``idempotency_key`` of a JSON object's data.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from datetime import date, datetime
from fnmatch import fnmatchcase
from typing import Any

from jobsched.core.limits import DEDUPLICATION_ID_MAX, fit
from jobsched.targets.registry import NotAllowed, PermanentHandlerError, RunContext

# The universal target's ARN (EventBridge Scheduler's user guide, "Using universal targets").
UNIVERSAL_ARN = re.compile(
    r"^arn:aws[a-z-]*:scheduler:::aws-sdk:(?P<service>[a-z0-9-]+):(?P<action>[A-Za-z0-9]+)$"
)
# An entry of AllowedSdkActions: an IAM action without wildcards (the template checks it too).
SDK_ACTION_ENTRY = re.compile(r"^[a-z0-9-]+:[A-Za-z0-9]+$")

# SDK service identifiers (as universal targets name them) whose boto3 name differs.
BOTO3_SERVICE = {
    "sfn": "stepfunctions",
    "eventbridge": "events",
    "cloudwatchlogs": "logs",
    "cloudwatchevents": "events",
    "elasticloadbalancingv2": "elbv2",
    "cognitoidentityprovider": "cognito-idp",
    "databasemigration": "dms",
}
# boto3 service names whose IAM action prefix differs.
IAM_PREFIX = {
    "stepfunctions": "states",
    "elbv2": "elasticloadbalancing",
    "dms": "dms",
}
# Fields a service deduplicates on that its model does not mark as idempotency tokens:
# (boto3 service, operation) -> (field, the request field naming the destination whose FIFO
# suffix turns deduplication on). Both take 1-128 characters.
# https://docs.aws.amazon.com/sns/latest/api/API_Publish.html,
# https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessage.html
FIFO_DEDUPLICATION = {
    ("sns", "Publish"): ("MessageDeduplicationId", "TopicArn"),
    ("sqs", "SendMessage"): ("MessageDeduplicationId", "QueueUrl"),
}
# An idempotency token member without a length limit in its model gets at most this many.
DEFAULT_TOKEN_MAX = 64


class SdkCallRefused(PermanentHandlerError, PermissionError):
    """The call is not on the stack's allow-list (or names no operation)."""


def listed(allow: Any, name: str) -> list[str]:
    """An allow-list of the settings, or none (an older settings object lacks the new lists)."""
    return list(getattr(allow, name, None) or [])


def boto3_service(sdk_service: str) -> str:
    return BOTO3_SERVICE.get(sdk_service, sdk_service)


def iam_action(service: str, operation: str) -> str:
    """The IAM action one call is authorised as: the service prefix and the operation's name."""
    return f"{IAM_PREFIX.get(service, service)}:{operation}"


def parse_universal_arn(arn: str) -> tuple[str, str]:
    """(SDK service, action) of ``arn:aws:scheduler:::aws-sdk:SERVICE:ACTION``; ValueError else."""
    match = UNIVERSAL_ARN.match(arn)
    if match is None:
        raise ValueError(
            f"{arn!r} is not a universal target ARN (arn:aws:scheduler:::aws-sdk:SERVICE:apiAction)"
        )
    return match["service"], match["action"]


def sdk_action_allowed(allowed: list[str], action: str) -> bool:
    """IAM action names are case-insensitive; the entries hold no wildcards (a ``*`` in one is
    refused by the settings and the template), so the match is exact."""
    wanted = action.lower()
    return any(entry.lower() == wanted for entry in allowed if SDK_ACTION_ENTRY.match(entry))


def with_idempotency(
    service: str, operation: str, model: Any, request: dict[str, Any], key: str
) -> list[str]:
    """Put the run's idempotency key into ``request``'s deduplication fields the input left
    unset; returns the fields set."""
    filled = []
    shape = model.input_shape
    for name, member in shape.members.items() if shape is not None else ():
        if member.metadata.get("idempotencyToken") and name not in request:
            request[name] = fit(key, int(member.metadata.get("max") or DEFAULT_TOKEN_MAX))
            filled.append(name)
    fifo = FIFO_DEDUPLICATION.get((service, operation))
    if fifo is not None:
        field, destination = fifo
        if str(request.get(destination, "")).endswith(".fifo") and field not in request:
            request[field] = fit(key, DEDUPLICATION_ID_MAX)
            filled.append(field)
    return filled


def _plain(value: Any) -> Any:
    """A response as JSON-friendly data (datetimes as ISO text, bytes left out)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k != "ResponseMetadata"}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, bytes | bytearray):
        return None
    return value


# --- destinations: each one's allow-list check, made by its handler at call time (the list may have
# shrunk since) and by every registration path (targets/builtin.py ``DESTINATION_CHECKS``), so
# both refuse alike, in the same words.


def sdk_target(payload: Mapping[str, Any]) -> tuple[str, str]:
    """(boto3 service, action as the payload gives it) of an ``aws_sdk`` payload: ``target_arn``,
    or ``service`` and ``action``. KeyError or ValueError when it names neither."""
    if "target_arn" in payload:
        sdk_service, action = parse_universal_arn(str(payload["target_arn"]))
    else:
        sdk_service, action = str(payload["service"]), str(payload["action"])
    return boto3_service(sdk_service.lower()), action


def check_sdk_action(payload: Mapping[str, Any], allow: Any) -> tuple[str, str]:
    """The call's (boto3 service, action), if its IAM action is on ``AllowedSdkActions``;
    ``SdkCallRefused`` naming the parameter and the action to add otherwise."""
    service, action = sdk_target(payload)
    allowed = listed(allow, "allowed_sdk_actions")
    named = iam_action(service, action[:1].upper() + action[1:])
    if not sdk_action_allowed(allowed, named):
        shown = ", ".join(allowed) or "empty: none is allowed"
        raise SdkCallRefused(
            f"{named} is not allowed: add it to the stack's AllowedSdkActions parameter (now {shown}), "
            "which also grants the worker's role the action"
        )
    return service, action


def check_topic(payload: Mapping[str, Any], allow: Any) -> str:
    """``sns_publish``'s topic, if it is on ``AllowedTopicArns``."""
    topic = str(payload["topic_arn"])
    _require_listed(allow, "allowed_topic_arns", "AllowedTopicArns", topic, "topic")
    return topic


def check_stream(payload: Mapping[str, Any], allow: Any) -> str:
    """``kinesis_put_record``'s stream, if it is on ``AllowedStreamArns``."""
    stream = str(payload["stream_arn"])
    _require_listed(allow, "allowed_stream_arns", "AllowedStreamArns", stream, "stream")
    return stream


def sdk_call(ctx: RunContext, client_for: Callable[[str], Any], allow: Any) -> dict[str, Any]:
    """``aws_sdk``: one allow-listed API call with the payload's input as its request."""
    payload = ctx.payload
    # The check comes before any client is built: a refused call never reaches botocore.
    service, action = check_sdk_action(payload, allow)
    request = payload.get("input", {})
    if not isinstance(request, dict):
        raise ValueError("input must be a JSON object: the API's request parameters")
    client = client_for(service)
    model = client.meta.service_model
    operations = {name.lower(): name for name in model.operation_names}
    operation = operations.get(action.lower())
    if operation is None:
        raise SdkCallRefused(f"{service} has no operation {action!r}")
    from botocore import xform_name

    request = dict(request)
    operation_model = model.operation_model(operation)
    filled = with_idempotency(service, operation, operation_model, request, ctx.idempotency_key)
    response = getattr(client, xform_name(operation))(**request)
    request_id = (response.get("ResponseMetadata") or {}).get("RequestId")
    return {
        "operation": iam_action(service, operation),
        "idempotency_fields": filled,
        "request_id": request_id,
        "response": _plain(response),
    }


def _require_listed(allow: Any, name: str, parameter: str, arn: str, what: str) -> None:

    entries = listed(allow, name)
    if not any(fnmatchcase(arn, entry) for entry in entries):
        shown = ", ".join(entries) or "empty: none is allowed"
        raise NotAllowed(
            f"{what} {arn} is not allowed: add it to the stack's {parameter} parameter (now {shown}), "
            "which also grants the worker's role the call"
        )


def sns_publish(ctx: RunContext, sns: Any, allow: Any) -> dict[str, Any]:
    """``sns_publish``: ``payload["message"]`` to ``payload["topic_arn"]``; on a FIFO topic with
    the idempotency key as ``MessageDeduplicationId`` and ``payload["group_id"]`` (default: the
    job id) as ``MessageGroupId``."""
    topic = check_topic(ctx.payload, allow)
    message = ctx.payload.get("message", {})
    request: dict[str, Any] = {
        "TopicArn": topic,
        "Message": message if isinstance(message, str) else json.dumps(message),
        "MessageAttributes": {"idempotency_key": {"DataType": "String", "StringValue": ctx.idempotency_key}},
    }
    if "subject" in ctx.payload:
        request["Subject"] = str(ctx.payload["subject"])
    if topic.endswith(".fifo"):
        request["MessageDeduplicationId"] = fit(ctx.idempotency_key, DEDUPLICATION_ID_MAX)
        request["MessageGroupId"] = str(ctx.payload.get("group_id") or ctx.job_id)
    response = sns.publish(**request)
    deduplication_id = request.get("MessageDeduplicationId")
    return {"message_id": response.get("MessageId"), "deduplication_id": deduplication_id}


# Kinesis partition keys: 1-256 Unicode characters.
PARTITION_KEY_MAX = 256


def kinesis_put_record(ctx: RunContext, kinesis: Any, allow: Any) -> dict[str, Any]:
    """``kinesis_put_record``: ``payload["data"]`` (text, or JSON: an object gets the
    idempotency key as ``idempotency_key``) on ``payload["stream_arn"]``."""
    stream = check_stream(ctx.payload, allow)
    data = ctx.payload.get("data", {})
    if isinstance(data, dict):
        data = {**data, "idempotency_key": ctx.idempotency_key}
    body = data if isinstance(data, str) else json.dumps(data)
    key = str(ctx.payload.get("partition_key") or ctx.idempotency_key)[:PARTITION_KEY_MAX]
    response = kinesis.put_record(StreamARN=stream, Data=body.encode(), PartitionKey=key)
    return {"shard_id": response.get("ShardId"), "sequence_number": response.get("SequenceNumber")}
