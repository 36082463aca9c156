"""What one AWS call needs of IAM: the actions and resource ARNs that authorise it (``Call``,
``authorisations``), the roles it passes (``passed_roles``) and the KMS calls a service makes for
it on an encrypted resource (``key_calls``). See iam/policy.py for the contract as a whole."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse


@dataclass(frozen=True, order=True)
class Call:
    """One IAM authorisation a request needs: ``action`` (``service:Action``) on ``resource``."""

    function: str
    action: str
    resource: str
    origin: str = "code"  # or what makes it on the function's behalf (an event source mapping)
    # IAM's request context for the call, as far as a condition in the stack's roles asks for it
    # (``iam:PassedToService``): (key, value) pairs.
    context: tuple[tuple[str, str], ...] = ()

    def __str__(self) -> str:
        where = "".join(f" [{key}={value}]" for key, value in self.context)
        return f"{self.function}: {self.action} on {self.resource}{where} ({self.origin})"


# The IAM prefix of a botocore service, where it differs from the service's name.
_IAM_PREFIX = {"dynamodbstreams": "dynamodb", "stepfunctions": "states"}
# API operations that IAM authorises with another action.
_AUTHORISED_AS = {
    ("sqs", "SendMessageBatch"): "SendMessage",
    ("sqs", "DeleteMessageBatch"): "DeleteMessage",
    ("sqs", "ChangeMessageVisibilityBatch"): "ChangeMessageVisibility",
    ("lambda", "Invoke"): "InvokeFunction",
    ("lambda", "InvokeAsync"): "InvokeFunction",
}
_TRANSACT_WRITE = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
}


def dynamodb_table_arn(table: str, region: str, account: str, partition: str = "aws") -> str:
    """A DynamoDB ``TableName`` parameter (a name, or an ARN, which DynamoDB also accepts)."""
    if table.startswith("arn:"):
        return table
    return f"arn:{partition}:dynamodb:{region}:{account}:table/{table}"


def sqs_queue_arn(queue_url: str, region: str, partition: str = "aws") -> str:
    """The ARN of a queue URL (``https://HOST/ACCOUNT/NAME``), in the client's region."""
    account, name = urlparse(queue_url).path.strip("/").split("/")[-2:]
    return f"arn:{partition}:sqs:{region}:{account}:{name}"


def lambda_function_arn(function: str, qualifier: str | None, region: str, account: str) -> str:
    if function.startswith("arn:"):
        arn = function
    else:
        arn = f"arn:aws:lambda:{region}:{account}:function:{function}"
    return f"{arn}:{qualifier}" if qualifier else arn


# Services whose calls name their resource by ARN in one request parameter.
_RESOURCE_PARAMETER = {"stepfunctions": "stateMachineArn", "sns": "TopicArn", "kinesis": "StreamARN"}


def authorisations(
    service: str, operation: str, params: Mapping[str, Any], region: str, account: str
) -> list[tuple[str, str]]:
    """The (IAM action, resource ARN) pairs one API call needs."""
    prefix = _IAM_PREFIX.get(service, service)
    action = f"{prefix}:{_AUTHORISED_AS.get((service, operation), operation)}"
    if prefix == "dynamodb":
        return _dynamodb(action, operation, params, region, account)
    if service == "sqs":
        if "QueueUrl" in params:
            return [(action, sqs_queue_arn(str(params["QueueUrl"]), region))]
        if "QueueName" in params:
            return [(action, f"arn:aws:sqs:{region}:{account}:{params['QueueName']}")]
        return [(action, "*")]
    if service == "lambda" and "FunctionName" in params:
        qualifier = params.get("Qualifier")
        return [(action, lambda_function_arn(str(params["FunctionName"]), qualifier, region, account))]
    named = _RESOURCE_PARAMETER.get(service)
    if named is not None and named in params:
        return [(action, str(params[named]))]
    if service == "ecs" and operation == "RunTask":
        definition = str(params["taskDefinition"])
        if not definition.startswith("arn:"):
            definition = f"arn:aws:ecs:{region}:{account}:task-definition/{definition}"
        return [(action, definition)]
    if service == "events" and operation == "PutEvents":
        pairs = []
        for entry in params.get("Entries", []):
            bus = str(entry.get("EventBusName") or "default")
            arn = bus if bus.startswith("arn:") else f"arn:aws:events:{region}:{account}:event-bus/{bus}"
            pairs.append((action, arn))
        return sorted(set(pairs))
    return [(action, "*")]


ECS_TASKS = (("iam:PassedToService", "ecs-tasks.amazonaws.com"),)


# What a service asks of KMS with the caller's own credentials when a call reaches a resource
# encrypted with a customer-managed key, by the call's action: the service (the
# ``kms:ViaService`` it comes through) and the KMS actions.
# - SQS: a producer needs kms:GenerateDataKey and kms:Decrypt on the queue's key
#   (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-key-management.html);
# - DynamoDB: reads and writes of a table under the key use it through DynamoDB
#   (https://docs.aws.amazon.com/kms/latest/developerguide/services-dynamodb.html);
# - EventBridge: a bus under the key generates and decrypts data keys with it
#   (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-encryption-key-policy.html).
KEY_USE = {
    "sqs:SendMessage": "sqs",
    "dynamodb:PutItem": "dynamodb",
    "dynamodb:UpdateItem": "dynamodb",
    "events:PutEvents": "events",
}
KEY_ACTIONS = ("kms:GenerateDataKey", "kms:Decrypt")


def key_calls(calls: Sequence[Call], keys: Mapping[str, str], region: str) -> list[Call]:
    """The KMS calls the recorded ``calls`` make the services make on their caller's behalf:
    ``keys`` maps a resource ARN (a queue, a table, a bus) to the customer-managed key that
    encrypts it. moto encrypts nothing, so these are derived, not recorded: each call of a
    ``KEY_USE`` action on such a resource needs ``KEY_ACTIONS`` on its key, through its service,
    for the same function. Deriving them from the calls (rather than listing them per function)
    gives every function that reaches an encrypted resource its key calls, the ones a new path
    adds too."""
    needed = set()
    for call in calls:
        service, key = KEY_USE.get(call.action), keys.get(call.resource)
        if service is None or key is None:
            continue
        via = (("kms:ViaService", f"{service}.{region}.amazonaws.com"),)
        origin = f"{service} using the key of {call.resource}"
        needed |= {Call(call.function, action, key, origin, via) for action in KEY_ACTIONS}
    return sorted(needed)


def passed_roles(service: str, operation: str, params: Mapping[str, Any]) -> list[tuple[str, str, Any]]:
    """The ``iam:PassRole`` authorisations one API call needs besides its own action: (action,
    role ARN, request context). Only the roles the request names are seen: the roles of an ECS
    task definition are passed too, and must be granted as well (docs/deploy.md)."""
    if service == "ecs" and operation == "RunTask":
        overrides = params.get("overrides") or {}
        roles = [overrides[name] for name in ("taskRoleArn", "executionRoleArn") if name in overrides]
        return [("iam:PassRole", str(role), ECS_TASKS) for role in roles]
    return []


def _dynamodb(
    action: str, operation: str, params: Mapping[str, Any], region: str, account: str
) -> list[tuple[str, str]]:
    def table(name: Any) -> str:
        return dynamodb_table_arn(str(name), region, account)

    if operation == "TransactWriteItems":
        pairs = []
        for item in params.get("TransactItems", []):
            for kind, body in item.items():
                pairs.append((f"dynamodb:{_TRANSACT_WRITE[kind]}", table(body["TableName"])))
        return sorted(set(pairs))
    if operation == "TransactGetItems":
        items = params["TransactItems"]
        return sorted({("dynamodb:GetItem", table(item["Get"]["TableName"])) for item in items})
    if operation in ("BatchWriteItem", "BatchGetItem"):
        return sorted((action, table(name)) for name in params.get("RequestItems", {}))
    if "StreamArn" in params:
        return [(action, str(params["StreamArn"]))]
    if "TableName" in params:
        arn = table(params["TableName"])
        if params.get("IndexName"):
            arn = f"{arn}/index/{params['IndexName']}"
        return [(action, arn)]
    return [(action, "*")]
