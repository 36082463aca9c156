"""The IAM contract, offline: what each function calls against what its role is granted.

moto checks no IAM, so a call a role does not grant succeeds in every local test and fails on the
first deploy. This module gives the three parts of checking that without AWS:

- ``CallRecorder``: records every AWS call made while installed (a wrapper around botocore's
  ``BaseClient._make_api_call``, which every client method goes through), as the IAM actions and
  resource ARNs it is authorised by, tagged with the function acting at the time. A
  ``TransactWriteItems`` is recorded as its contained actions (each ``Put``, ``Update``, ``Delete``,
  ``ConditionCheck`` as ``PutItem``, ``UpdateItem``, ``DeleteItem``, ``ConditionCheckItem`` on its
  own table: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis-iam.html);
  a ``Query`` on an index as the index's ARN (``table/NAME/index/INDEX``); SQS batch calls as the
  action that authorises them (``SendMessageBatch`` as ``sqs:SendMessage``); an ECS ``RunTask`` as
  ``ecs:RunTask`` on its task definition and ``iam:PassRole`` on each role its overrides name, with
  the request context ``iam:PassedToService = ecs-tasks.amazonaws.com``; a Step Functions
  ``StartExecution`` as ``states:StartExecution`` on its state machine.
- ``role_statements``: a function role's statements from the template after the SAM transform
  (``transform``), with the intrinsics resolved to ARNs for a ``Stack`` (fake account, region,
  stack name, parameter values and the resources' physical names): ``Ref``, ``Fn::GetAtt``,
  ``Fn::Sub``, ``Fn::Join``, ``Fn::If`` and the conditions. SAM policy templates arrive expanded.
- ``evaluate``: IAM's evaluation for one identity policy set: a matching explicit ``Deny`` wins,
  else a matching ``Allow`` allows, else it is denied. Actions match case-insensitively with
  ``*``/``?`` wildcards, resources segment by segment of the ARN (``*`` within the last segment
  spans ``/``). A statement's ``Condition`` is evaluated when every key it names is in the call's
  recorded request context and every operator is ``StringEquals`` or ``StringLike``; any other is
  not evaluated: it is reported (``Decision.unevaluated``), never counted as an Allow, and a
  conditional Deny counts as denying.

Not modelled: resource-based policies, permission boundaries, SCPs, session policies (the stack
uses none of them).
"""

from __future__ import annotations

import copy
import functools
import importlib.util
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

# ---------------------------------------------------------------------------- recorded calls


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


class CallRecorder:
    """Records the AWS calls made while ``installed()``, tagged with the function named by the
    innermost ``acting(function)`` (calls made while no function acts, such as a test's own setup,
    are not recorded). The tag is process-wide, not per thread: a function's worker threads
    (the handler's, the fan-out's) are tagged with it too, so run one function at a time."""

    def __init__(self, account: str) -> None:
        self.account = account
        self.calls: list[Call] = []
        # Every request while installed, acting or not: (function or None, service, operation, params).
        self.requests: list[tuple[str | None, str, str, Mapping[str, Any]]] = []
        self._acting: str | None = None
        self._lock = threading.Lock()

    @contextmanager
    def acting(self, function: str) -> Iterator[None]:
        before, self._acting = self._acting, function
        try:
            yield
        finally:
            self._acting = before

    @contextmanager
    def outside(self) -> Iterator[None]:
        """Calls made meanwhile are no function's (a test's own writes, racing a function)."""
        before, self._acting = self._acting, None
        try:
            yield
        finally:
            self._acting = before

    def declare(
        self,
        function: str,
        action: str,
        resource: str,
        origin: str,
        context: tuple[tuple[str, str], ...] = (),
    ) -> None:
        """A call AWS makes with the function's role on its behalf (an event source mapping's
        polling, a service's use of a customer-managed key), which no code here makes."""
        with self._lock:
            self.calls.append(Call(function, action, resource, origin, context))

    def record(self, service: str, region: str, operation: str, params: Mapping[str, Any]) -> None:
        function = self._acting
        with self._lock:
            self.requests.append((function, service, operation, params))
            if function is None:
                return
            for action, resource in authorisations(service, operation, params, region, self.account):
                self.calls.append(Call(function, action, resource))
            for action, resource, context in passed_roles(service, operation, params):
                self.calls.append(Call(function, action, resource, context=context))

    @contextmanager
    def installed(self) -> Iterator[CallRecorder]:
        from botocore.client import BaseClient

        original: Callable[..., Any] = BaseClient._make_api_call  # type: ignore[attr-defined]
        recorder = self

        def recording(client: Any, operation_name: str, api_params: Mapping[str, Any]) -> Any:
            meta = client.meta
            recorder.record(meta.service_model.service_name, meta.region_name, operation_name, api_params)
            return original(client, operation_name, api_params)

        BaseClient._make_api_call = recording  # type: ignore[attr-defined]
        try:
            yield self
        finally:
            BaseClient._make_api_call = original  # type: ignore[attr-defined]

    def distinct(self, function: str | None = None) -> list[Call]:
        return sorted({c for c in self.calls if function is None or c.function == function})


# ---------------------------------------------------------------------------- the template


# aws-sam-translator comes with the SAM CLI, which lives apart in .venv-tools/: it pins its own
# pydantic (~=2.13), while .venv holds exactly the layer's locked one (issue 35 item 16). So the
# transform runs in .venv-tools' Python, fed the document on stdin.
_TRANSLATE = """
import json, sys
import boto3
from samtranslator.parser.parser import Parser
from samtranslator.translator.translator import Translator

request = json.load(sys.stdin)
# A session naming the region, with dummy credentials: the transform calls nothing.
session = boto3.session.Session(
    region_name=request["region"], aws_access_key_id="x", aws_secret_access_key="x"
)
output = Translator(None, Parser(), boto_session=session).translate(
    request["template"],
    parameter_values=request["parameters"],
    get_managed_policy_map=lambda: request["managed"],
)
json.dump(output, sys.stdout)
"""
TOOLS_PYTHON = Path(__file__).resolve().parents[3] / ".venv-tools" / "bin" / "python"


class TransformError(RuntimeError):
    """The SAM transform refused the template (its message is aws-sam-translator's)."""


def translator_python() -> str:
    """The Python that has aws-sam-translator: $JOBSCHED_TOOLS_PYTHON, else the checkout's
    .venv-tools (``make install``), else this one if it has it."""
    explicit = os.environ.get("JOBSCHED_TOOLS_PYTHON")
    if explicit:
        return explicit
    if TOOLS_PYTHON.exists():
        return str(TOOLS_PYTHON)
    if importlib.util.find_spec("samtranslator") is not None:
        return sys.executable
    raise TransformError(
        "the SAM transform needs aws-sam-translator (it comes with the SAM CLI): run `make install`,"
        " which puts it in .venv-tools/, or set JOBSCHED_TOOLS_PYTHON to a Python that has it"
    )


@functools.lru_cache(maxsize=32)
def _translate(request: str, python: str) -> str:
    done = subprocess.run(
        [python, "-c", _TRANSLATE], input=request, capture_output=True, text=True, timeout=300, check=False
    )
    if done.returncode != 0:
        raise TransformError(f"the SAM transform failed ({python}):\n{done.stderr[-3000:]}")
    return done.stdout


def transform(
    template: Mapping[str, Any], parameters: Mapping[str, Any] | None = None, region: str = "us-east-1"
) -> dict[str, Any]:
    """The template after the SAM transform, offline: code locations become a dummy S3 object,
    AWS managed policy names resolve from a fixed table instead of IAM, and the region is given
    (SAM otherwise asks boto3 for one). Run by aws-sam-translator in ``translator_python()``;
    the same request is transformed once per process."""
    document = copy.deepcopy(dict(template))
    for resource in document["Resources"].values():
        for key in ("CodeUri", "ContentUri"):
            if key in resource.get("Properties", {}):
                resource["Properties"][key] = "s3://bucket/key"
    arn = "arn:aws:iam::aws:policy/"
    known = {
        "AWSLambdaBasicExecutionRole": arn + "service-role/AWSLambdaBasicExecutionRole",
        "AWSXrayWriteOnlyAccess": arn + "AWSXrayWriteOnlyAccess",
        "AWSLambdaSQSQueueExecutionRole": arn + "service-role/AWSLambdaSQSQueueExecutionRole",
        "AWSLambdaDynamoDBExecutionRole": arn + "service-role/AWSLambdaDynamoDBExecutionRole",
        "AWSLambdaRole": arn + "service-role/AWSLambdaRole",
        "AWSCodeDeployRoleForLambda": arn + "service-role/AWSCodeDeployRoleForLambda",
    }
    request = {"template": document, "parameters": dict(parameters or {}), "region": region, "managed": known}
    output: dict[str, Any] = json.loads(
        _translate(json.dumps(request, sort_keys=True, default=str), translator_python())
    )
    return output


_NO_VALUE = object()


@dataclass
class Stack:
    """What CloudFormation would resolve: pseudo parameters, parameter values (the template's
    defaults unless given) and each resource's physical id (``Ref``) and attributes (``GetAtt``)."""

    template: Mapping[str, Any]
    parameters: Mapping[str, Any] = field(default_factory=dict)
    resources: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    account: str = "123456789012"
    region: str = "us-east-1"
    partition: str = "aws"
    name: str = "jobsched"
    # The UUID that ends the stack's id (AWS::StackId: arn:...:stack/<name>/<uuid>).
    uuid: str = "1c2fa620-982a-11e3-aff7-50e2416294e0"

    def parameter(self, name: str) -> Any:
        spec = self.template.get("Parameters", {}).get(name)
        if spec is None:
            raise KeyError(f"no parameter {name}")
        value = self.parameters.get(name, spec.get("Default"))
        if value is None:
            raise KeyError(f"parameter {name} has no value and no default")
        if spec.get("Type") == "CommaDelimitedList":
            return value if isinstance(value, list) else [part.strip() for part in str(value).split(",")]
        return str(value)

    def ref(self, name: str) -> Any:
        pseudo = {
            "AWS::AccountId": self.account,
            "AWS::Region": self.region,
            "AWS::Partition": self.partition,
            "AWS::StackName": self.name,
            "AWS::URLSuffix": {"aws-cn": "amazonaws.com.cn"}.get(self.partition, "amazonaws.com"),
            "AWS::StackId": f"arn:{self.partition}:cloudformation:{self.region}:{self.account}:stack/"
            f"{self.name}/{self.uuid}",
        }
        if name in pseudo:
            return pseudo[name]
        if name == "AWS::NoValue":
            return _NO_VALUE
        if name in self.template.get("Parameters", {}):
            return self.parameter(name)
        return self.attribute(name, "Ref")

    def attribute(self, logical_id: str, name: str) -> str:
        try:
            return self.resources[logical_id][name]
        except KeyError:
            raise KeyError(f"the stack knows no {name} of {logical_id}") from None

    def condition(self, name: str) -> bool:
        return bool(self.resolve(self.template["Conditions"][name]))

    def resolve(self, node: Any) -> Any:
        """``node`` with every intrinsic function resolved; ``AWS::NoValue`` drops its key or item."""
        if isinstance(node, list):
            return [value for value in (self.resolve(item) for item in node) if value is not _NO_VALUE]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            ((key, value),) = node.items()
            function = _INTRINSICS.get(key)
            if function is not None:
                return function(self, value)
        resolved = {key: self.resolve(value) for key, value in node.items()}
        return {key: value for key, value in resolved.items() if value is not _NO_VALUE}

    def sub(self, text: str, variables: Mapping[str, Any]) -> str:
        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if name.startswith("!"):
                return "${" + name[1:] + "}"
            if name in variables:
                return str(variables[name])
            if "." in name and not name.startswith("AWS::"):
                logical_id, attribute = name.split(".", 1)
                return self.attribute(logical_id, attribute)
            value = self.ref(name)
            return ",".join(value) if isinstance(value, list) else str(value)

        return re.sub(r"\$\{([^}]+)\}", replace, text)


def _get_att(stack: Stack, value: Any) -> str:
    logical_id, name = value.split(".", 1) if isinstance(value, str) else value
    return stack.attribute(str(logical_id), str(stack.resolve(name)))


def _sub(stack: Stack, value: Any) -> str:
    if isinstance(value, str):
        return stack.sub(value, {})
    text, variables = value
    return stack.sub(text, {k: stack.resolve(v) for k, v in variables.items()})


def _join(stack: Stack, value: Any) -> str:
    separator, items = value
    resolved = stack.resolve(items)
    flat: list[str] = []
    for item in resolved if isinstance(resolved, list) else [resolved]:
        flat.extend(str(part) for part in (item if isinstance(item, list) else [item]))
    return str(separator).join(flat)


def _if(stack: Stack, value: Any) -> Any:
    condition, when_true, when_false = value
    return stack.resolve(when_true if stack.condition(condition) else when_false)


_INTRINSICS: dict[str, Callable[[Stack, Any], Any]] = {
    "Ref": lambda stack, value: stack.ref(value),
    "Fn::GetAtt": _get_att,
    "Fn::Sub": _sub,
    "Fn::Join": _join,
    "Fn::If": _if,
    "Fn::Select": lambda stack, value: stack.resolve(value[1])[int(stack.resolve(value[0]))],
    "Fn::Split": lambda stack, value: str(stack.resolve(value[1])).split(value[0]),
    # CloudFormation compares the two values as strings: a Number parameter's 0 equals "0".
    "Fn::Equals": lambda stack, value: str(stack.resolve(value[0])) == str(stack.resolve(value[1])),
    "Fn::FindInMap": lambda stack, value: stack.template["Mappings"][str(stack.resolve(value[0]))][
        str(stack.resolve(value[1]))
    ][str(stack.resolve(value[2]))],
    "Fn::Not": lambda stack, value: not stack.resolve(value[0]),
    "Fn::And": lambda stack, value: all(stack.resolve(item) for item in value),
    "Fn::Or": lambda stack, value: any(stack.resolve(item) for item in value),
    "Condition": lambda stack, value: stack.condition(value),
}


# ---------------------------------------------------------------------------- statements


def _strings(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    items = value if isinstance(value, list) else [value]
    flat: list[str] = []
    for item in items:
        flat.extend(str(part) for part in (item if isinstance(item, list) else [item]))
    return tuple(flat)


@dataclass(frozen=True)
class Statement:
    sid: str
    effect: str
    actions: tuple[str, ...] = ()
    not_actions: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    not_resources: tuple[str, ...] = ()
    condition: Mapping[str, Any] | None = None

    @classmethod
    def parse(cls, raw: Mapping[str, Any], default_sid: str) -> Statement:
        return cls(
            sid=str(raw.get("Sid") or default_sid),
            effect=str(raw["Effect"]),
            actions=_strings(raw.get("Action")),
            not_actions=_strings(raw.get("NotAction")),
            resources=_strings(raw.get("Resource")),
            not_resources=_strings(raw.get("NotResource")),
            condition=raw.get("Condition") or None,
        )

    def matches(self, action: str, resource: str) -> bool:
        if self.actions and not any(action_matches(p, action) for p in self.actions):
            return False
        if self.not_actions and any(action_matches(p, action) for p in self.not_actions):
            return False
        if self.resources and not any(resource_matches(p, resource) for p in self.resources):
            return False
        return not (self.not_resources and any(resource_matches(p, resource) for p in self.not_resources))


def _glob(pattern: str, value: str) -> bool:
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, re.DOTALL) is not None


def action_matches(pattern: str, action: str) -> bool:
    """IAM action matching: case-insensitive, ``*`` and ``?`` wildcards."""
    return _glob(pattern.lower(), action.lower())


def resource_matches(pattern: str, resource: str) -> bool:
    """IAM resource matching: ``*`` alone matches anything; otherwise the ARN's six segments
    (``arn:partition:service:region:account:resource``) match one by one, case-sensitively, and
    the last segment's wildcards span ``/`` and ``:``. A call on ``*`` (an action with no
    resource-level permissions) is matched only by a ``*`` pattern."""
    if pattern == "*":
        return True
    pattern_parts, resource_parts = pattern.split(":", 5), resource.split(":", 5)
    if len(pattern_parts) != 6 or len(resource_parts) != 6:
        return _glob(pattern, resource)
    return all(_glob(p, r) for p, r in zip(pattern_parts, resource_parts, strict=True))


def role_statements(transformed: Mapping[str, Any], function: str, stack: Stack) -> list[Statement]:
    """The statements of ``function``'s role (``<function>Role``, made by SAM): its inline
    policies, resolved. Managed policies are listed by ``managed_policies``, not expanded."""
    role = transformed["Resources"][f"{function}Role"]["Properties"]
    statements: list[Statement] = []
    for policy in stack.resolve(role.get("Policies", [])):
        document = policy["PolicyDocument"]
        raw = document["Statement"]
        for index, statement in enumerate(raw if isinstance(raw, list) else [raw]):
            statements.append(Statement.parse(statement, f"{policy['PolicyName']}#{index}"))
    return statements


def managed_policies(transformed: Mapping[str, Any], function: str, stack: Stack) -> list[str]:
    role = transformed["Resources"][f"{function}Role"]["Properties"]
    return [str(arn) for arn in stack.resolve(role.get("ManagedPolicyArns", []))]


# ---------------------------------------------------------------------------- evaluation


@dataclass(frozen=True)
class Decision:
    allowed: bool
    allowed_by: tuple[str, ...]
    denied_by: tuple[str, ...]
    unevaluated: tuple[str, ...]  # statements that match but carry a Condition


_CONDITION_OPERATORS: dict[str, Callable[[str, str], bool]] = {
    "StringEquals": lambda pattern, value: pattern == value,
    "StringLike": lambda pattern, value: _glob(pattern, value),
}


def condition_holds(condition: Mapping[str, Any], context: Sequence[tuple[str, str]]) -> bool | None:
    """Whether a statement's ``Condition`` holds for a request context: every operator's every key
    must match one of its values (IAM: AND across keys and operators, OR across values; keys
    case-insensitive). None: it cannot be evaluated here (another operator, or a key the context
    lacks)."""
    values = {key.lower(): value for key, value in context}
    for operator, tests in condition.items():
        compare = _CONDITION_OPERATORS.get(operator)
        if compare is None or not isinstance(tests, Mapping):
            return None
        for key, wanted in tests.items():
            if key.lower() not in values:
                return None
            if not any(compare(str(pattern), values[key.lower()]) for pattern in _strings(wanted)):
                return False
    return True


def evaluate(
    statements: Sequence[Statement], action: str, resource: str, context: Sequence[tuple[str, str]] = ()
) -> Decision:
    allows: list[str] = []
    denies: list[str] = []
    unevaluated: list[str] = []
    for statement in statements:
        if not statement.matches(action, resource):
            continue
        if statement.condition:
            holds = condition_holds(statement.condition, context)
            if holds is False:
                continue
            if holds is None:
                unevaluated.append(statement.sid)
                if statement.effect == "Deny":
                    denies.append(statement.sid)  # it may apply: count it
                continue
        (denies if statement.effect == "Deny" else allows).append(statement.sid)
    return Decision(bool(allows) and not denies, tuple(allows), tuple(denies), tuple(unevaluated))


@dataclass(frozen=True)
class Grant:
    """One action pattern on one resource pattern of one Allow statement."""

    function: str
    sid: str
    action: str
    resource: str
    # The statement's Condition, as JSON ("" for none): a conditional grant covers only the calls
    # whose recorded context satisfies it.
    condition: str = ""

    def __str__(self) -> str:
        when = f" if {self.condition}" if self.condition else ""
        return f"{self.function} {self.sid}: {self.action} on {self.resource}{when}"

    def covers(self, call: Call) -> bool:
        if not (action_matches(self.action, call.action) and resource_matches(self.resource, call.resource)):
            return False
        return not self.condition or condition_holds(json.loads(self.condition), call.context) is True


def grants(function: str, statements: Sequence[Statement]) -> list[Grant]:
    return [
        Grant(
            function,
            statement.sid,
            action,
            resource,
            json.dumps(statement.condition, sort_keys=True) if statement.condition else "",
        )
        for statement in statements
        if statement.effect == "Allow"
        for action in statement.actions
        for resource in statement.resources
    ]


def without(statements: Sequence[Statement], grant: Grant) -> list[Statement]:
    """``statements`` with one grant taken away: its statement loses the action on that resource
    (it keeps the action on its other resources and its other actions on every resource)."""
    kept: list[Statement] = []
    for statement in statements:
        if statement.sid != grant.sid or grant.action not in statement.actions:
            kept.append(statement)
            continue
        others = tuple(a for a in statement.actions if a != grant.action)
        if others:
            kept.append(_replace(statement, actions=others))
        remaining = tuple(r for r in statement.resources if r != grant.resource)
        if remaining:
            kept.append(_replace(statement, actions=(grant.action,), resources=remaining))
    return kept


def _replace(statement: Statement, **changes: Any) -> Statement:
    values = {**statement.__dict__, **changes}
    return Statement(**values)


def denied(calls: Sequence[Call], statements: Sequence[Statement]) -> list[Call]:
    return [
        call for call in calls if not evaluate(statements, call.action, call.resource, call.context).allowed
    ]


def unused(grant_list: Sequence[Grant], calls: Sequence[Call]) -> list[Grant]:
    return [grant for grant in grant_list if not any(grant.covers(call) for call in calls)]


def describe(statements: Sequence[Statement]) -> str:
    return json.dumps([statement.__dict__ for statement in statements], indent=1, default=str)
