"""Built-in handlers, so jobsched is useful without writing code.

- ``log``: writes the payload to the run's log.
- ``sqs_send``: sends ``payload["message"]`` to ``payload["queue_url"]``.
- ``eventbridge_put``: puts ``payload["detail"]`` on ``payload["event_bus"]`` with
  ``payload["detail_type"]`` and ``payload["source"]``.
- ``lambda_invoke``: invokes ``payload["function"]`` asynchronously with ``payload["input"]``.
- ``sfn_start_execution``: starts ``payload["state_machine"]`` with ``payload["input"]`` as the
  execution's input, named after the run's idempotency key (``execution_name``).
- ``aws_sdk``, ``sns_publish``, ``kinesis_put_record``: any allow-listed AWS API call, an SNS
  publish, a Kinesis record (``targets/universal.py``).
- ``ecs_run_task``: runs ``payload["task_definition"]`` on ``payload["cluster"]`` with the run's
  idempotency key as RunTask's ``clientToken`` (``client_token``), and ``payload["run_task"]``'s
  further RunTask parameters.

Destinations must be allowed by configuration (``ALLOWED_QUEUE_ARNS`` and friends, which the
template also turns into IAM permissions): a job item can never reach a resource the operator did
not name. External calls are at-least-once; each carries the run's idempotency key (SQS message
attribute, EventBridge detail field, Lambda payload field) so the receiver can deduplicate; the
Step Functions execution name and the ECS client token make the service itself deduplicate.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import weakref
from collections.abc import Callable, Mapping
from fnmatch import fnmatchcase
from typing import Any, Protocol
from urllib.parse import urlparse

from jobsched.targets import universal
from jobsched.targets.registry import HandlerRegistry, NotAllowed, PermanentHandlerError, RunContext


class AllowLists(Protocol):
    """The stack's allow-lists (its ``Allowed*`` parameters): runtime/settings.py ``Settings``, and
    the CLI's and the Python API's copy of a deployment's (jobsched_tools/deployment.py)."""

    allowed_queue_arns: list[str]
    allowed_event_bus_arns: list[str]
    allowed_function_arns: list[str]
    allowed_state_machine_arns: list[str]
    allowed_task_definition_arns: list[str]
    allowed_task_role_arns: list[str]
    allowed_sdk_actions: list[str]
    allowed_topic_arns: list[str]
    allowed_stream_arns: list[str]
    allowed_dead_letter_queue_arns: list[str]


def log_payload(ctx: RunContext) -> dict[str, Any]:
    ctx.logger.info("job payload", extra={"payload": ctx.payload, "attempt": ctx.attempt})
    return {"logged": True}


def _partition(region: str) -> str:
    if region.startswith("cn-"):
        return "aws-cn"
    if region.startswith("us-gov-"):
        return "aws-us-gov"
    return "aws"


def _queue_arn(queue_url: str) -> str:
    """The ARN of a queue URL, to check against the allowed list:
    ``https://sqs.REGION.amazonaws.com[.cn]/ACCOUNT/NAME``, the legacy
    ``https://REGION.queue.amazonaws.com/ACCOUNT/NAME`` and ``https://queue.amazonaws.com/...``
    (us-east-1), with the partition of the region (``aws-cn``, ``aws-us-gov``). Any other host
    (a VPC endpoint, a local stack) is taken to be in the function's own region (``AWS_REGION``)."""
    parsed = urlparse(queue_url)
    path = [part for part in parsed.path.split("/") if part]
    if len(path) != 2:
        return queue_url  # not a queue URL: matches no ARN on the list
    account, name = path
    labels = (parsed.hostname or "").lower().split(".")
    if labels[:3] == ["queue", "amazonaws", "com"]:
        region = "us-east-1"
    elif len(labels) > 2 and labels[0] == "sqs" and labels[2] == "amazonaws":
        region = labels[1]
    elif len(labels) > 2 and labels[1:3] == ["queue", "amazonaws"]:
        region = labels[0]
    else:
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or ""
    return f"arn:{_partition(region)}:sqs:{region}:{account}:{name}"


def _require(allowed: list[str], arn: str, what: str, parameter: str) -> None:
    """``arn`` must be on ``allowed`` as it is (or the list holds ``*``)."""
    if arn not in allowed and "*" not in allowed:
        raise NotAllowed(_not_allowed(allowed, arn, what, parameter))


def _require_match(allowed: list[str], arn: str, what: str, parameter: str) -> None:
    """``arn`` must match an entry of ``allowed`` (IAM's wildcards ``*`` and ``?``, as in the grant
    the same parameter makes)."""
    if not any(fnmatchcase(arn, entry) for entry in allowed):
        raise NotAllowed(_not_allowed(allowed, arn, what, parameter))


def _not_allowed(allowed: list[str], arn: str, what: str, parameter: str) -> str:
    listed = ", ".join(allowed) or "empty: none is allowed"
    return (
        f"{what} {arn} is not allowed: add it to the stack's {parameter} parameter (now {listed}), "
        "which also grants the worker's role the call"
    )


def _digest(key: str, length: int) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:length]


# Step Functions execution names: 1-80 characters, no white space, brackets, wildcards, control
# characters or ``" # % \ ^ | ~ ` $ & , ; : /`` (StartExecution's ``name``); CloudWatch Logs
# logging wants only 0-9 A-Z a-z - _, so the name keeps to those.
_EXECUTION_NAME_UNSAFE = re.compile(r"[^0-9A-Za-z_-]")
EXECUTION_NAME_MAX = 80


def execution_name(idempotency_key: str) -> str:
    """The Step Functions execution name of one occurrence: the idempotency key itself when it
    is already a safe name, else its safe characters (each other one as ``-``, cut to fit) and 16
    hex digits of its SHA-256, so two keys that differ only in unsafe characters or beyond the
    cut still get different names. The same key always gives the same name."""
    if _EXECUTION_NAME_UNSAFE.search(idempotency_key) is None and len(idempotency_key) <= EXECUTION_NAME_MAX:
        return idempotency_key
    readable = _EXECUTION_NAME_UNSAFE.sub("-", idempotency_key)[: EXECUTION_NAME_MAX - 17]
    return f"{readable}-{_digest(idempotency_key, 16)}"


# ECS RunTask's clientToken: up to 64 ASCII characters in the range 33-126.
CLIENT_TOKEN_MAX = 64


def client_token(idempotency_key: str) -> str:
    """RunTask's ``clientToken`` for one occurrence: the idempotency key when it fits, else its
    printable ASCII characters cut to fit and 16 hex digits of its SHA-256 (as ``execution_name``)."""
    printable = all(33 <= ord(c) <= 126 for c in idempotency_key)
    if printable and 0 < len(idempotency_key) <= CLIENT_TOKEN_MAX:
        return idempotency_key
    readable = "".join(c if 33 <= ord(c) <= 126 else "-" for c in idempotency_key)[: CLIENT_TOKEN_MAX - 17]
    return f"{readable}-{_digest(idempotency_key, 16)}"


# RunTask parameters a job may set besides the cluster, the task definition and the token.
RUN_TASK_PARAMETERS = frozenset(
    {
        "capacityProviderStrategy",
        "count",
        "enableECSManagedTags",
        "enableExecuteCommand",
        "group",
        "launchType",
        "networkConfiguration",
        "overrides",
        "placementConstraints",
        "placementStrategy",
        "platformVersion",
        "propagateTags",
        "referenceId",
        "startedBy",
        "tags",
    }
)


def _task_definition_arn_allowed(allowed: list[str], arn: str) -> None:
    """A task definition without a revision is authorised by IAM as its latest revision's ARN
    (RunTask, since March 2024), so it is allowed only by an entry covering every revision."""
    revision = arn.rsplit(":", 1)[-1]
    candidate = arn if revision.isdigit() else f"{arn}:*"
    _require_match(allowed, candidate, "task definition", "AllowedTaskDefinitionArns")


# --- destinations: each built-in's allow-list check, made by its handler at call time and by the
# registrar at registration (``destination_problems``), so both say the same.


def check_queue(payload: Mapping[str, Any], allow: AllowLists) -> str:
    queue_url = str(payload["queue_url"])
    _require(allow.allowed_queue_arns, _queue_arn(queue_url), "queue", "AllowedTargetQueueArns")
    return queue_url


def check_event_bus(payload: Mapping[str, Any], allow: AllowLists) -> str:
    bus = str(payload.get("event_bus", "default"))
    if not bus.startswith("arn:"):
        raise NotAllowed("event_bus must be an ARN so it can be checked against the allowed list")
    _require(allow.allowed_event_bus_arns, bus, "event bus", "AllowedEventBusArns")
    return bus


def check_function(payload: Mapping[str, Any], allow: AllowLists) -> str:
    function = str(payload["function"])
    _require(allow.allowed_function_arns, function, "function", "AllowedFunctionArns")
    return function


def check_state_machine(payload: Mapping[str, Any], allow: AllowLists) -> str:
    machine = str(payload["state_machine"])
    if not machine.startswith("arn:"):
        raise NotAllowed("state_machine must be an ARN so it can be checked against the allowed list")
    _require_match(allow.allowed_state_machine_arns, machine, "state machine", "AllowedStateMachineArns")
    return machine


def check_task(payload: Mapping[str, Any], allow: AllowLists) -> str:
    """The task definition, and the roles ``run_task.overrides`` names."""
    definition = str(payload["task_definition"])
    if not definition.startswith("arn:"):
        raise NotAllowed("task_definition must be an ARN so it can be checked against the allowed list")
    _task_definition_arn_allowed(allow.allowed_task_definition_arns, definition)
    overrides = dict(payload.get("run_task") or {}).get("overrides") or {}
    for field_name in ("taskRoleArn", "executionRoleArn"):
        if field_name in overrides:
            role = str(overrides[field_name])
            _require_match(allow.allowed_task_role_arns, role, "role", "AllowedTaskRoleArns")
    return definition


# Every built-in that calls out, with its destination's check: a built-in missing here would be
# refused only when a run calls it (tests/functional/test_registration_allow_lists.py checks).
DESTINATION_CHECKS: dict[str, Callable[[Mapping[str, Any], AllowLists], object]] = {
    "sqs_send": check_queue,
    "eventbridge_put": check_event_bus,
    "lambda_invoke": check_function,
    "sfn_start_execution": check_state_machine,
    "ecs_run_task": check_task,
    "aws_sdk": universal.check_sdk_action,
    "sns_publish": universal.check_topic,
    "kinesis_put_record": universal.check_stream,
}


def destination_problems(target: str, payload: Mapping[str, Any], allow: AllowLists) -> list[str]:
    """Why the stack would refuse a built-in target's destination (``NotAllowed``, an SDK action's
    ``SdkCallRefused``), known before any run: every registration path makes the job invalid with
    these reasons (services/allow_lists.py). A payload without its destination, or another
    target, has none here (its handler says what is wrong when it runs)."""
    check = DESTINATION_CHECKS.get(target)
    if check is None:
        return []
    try:
        check(payload, allow)
    except PermanentHandlerError as refused:
        return [f"target: {target}: {refused}"]
    except (KeyError, TypeError, ValueError, AttributeError):
        return []
    return []


def start_execution(ctx: RunContext, sfn: Any, allow: AllowLists) -> dict[str, Any]:
    """``sfn_start_execution``: start ``payload["state_machine"]`` with ``payload["input"]``,
    named after the occurrence (``execution_name``)."""
    machine = check_state_machine(ctx.payload, allow)
    name = execution_name(ctx.idempotency_key)
    # The same input on every attempt (the definition the run was claimed with), serialised the
    # same way: a Standard workflow then answers a retry with the execution it started.
    document = json.dumps(ctx.payload.get("input", {}), sort_keys=True, separators=(",", ":"))
    try:
        response = sfn.start_execution(stateMachineArn=machine, name=name, input=document)
    except sfn.exceptions.ExecutionAlreadyExists:
        # A Standard workflow's name is this occurrence's for 90 days after its execution closes:
        # an earlier attempt started it and it has closed since (an open one with the same input
        # answers with success). Its input can only differ if another occurrence had this name,
        # which the digest in the name rules out.
        ctx.logger.info("execution already started", extra={"execution_name": name})
        return {"execution_name": name, "already_started": True}
    return {"execution_arn": response["executionArn"], "execution_name": name}


def run_task(ctx: RunContext, ecs: Any, allow: AllowLists) -> dict[str, Any]:
    """``ecs_run_task``: run ``payload["task_definition"]`` on ``payload["cluster"]`` with the
    occurrence's ``client_token`` and ``payload["run_task"]``'s other RunTask parameters."""
    cluster = str(ctx.payload["cluster"])
    definition = check_task(ctx.payload, allow)
    extra = dict(ctx.payload.get("run_task", {}))
    unknown = sorted(set(extra) - RUN_TASK_PARAMETERS)
    if unknown:
        raise ValueError(f"run_task: unsupported RunTask parameters {unknown}")
    token = client_token(ctx.idempotency_key)
    response = ecs.run_task(cluster=cluster, taskDefinition=definition, clientToken=token, **extra)
    tasks = [task["taskArn"] for task in response.get("tasks", [])]
    if response.get("failures") and not tasks:
        raise RuntimeError(f"ECS started no task: {response['failures']}")
    return {"task_arns": tasks, "client_token": token}


# Each registry's allow-lists, as its latest register_builtins gave them.
_ALLOW_LISTS: weakref.WeakKeyDictionary[HandlerRegistry, AllowLists] = weakref.WeakKeyDictionary()


def register_builtins(registry: HandlerRegistry, allow: AllowLists, clients: Any = None) -> None:
    """Register the built-ins once per registry. ``clients`` is a callable service -> boto3 client.
    The allow-lists are the latest registration's, read at each call: an App built again with other
    settings (tests, the local stack after ``reset_app``) checks against its own lists, not those of
    the first App that registered the built-ins."""
    _ALLOW_LISTS[registry] = allow
    if registry.get("log") is not None:
        return

    def current() -> AllowLists:
        return _ALLOW_LISTS[registry]

    # One client per service for the life of the registry (the execution environment): a new
    # client per run would build a session and load the service model on every run. boto3
    # clients are thread-safe once built; building one is not, hence the lock.
    cache: dict[str, Any] = {}
    lock = threading.Lock()

    def client(service: str) -> Any:
        with lock:
            if service not in cache:
                if clients is not None:
                    cache[service] = clients(service)
                else:
                    from jobsched.adapters.aws import make_client

                    cache[service] = make_client(service)
            return cache[service]

    def sqs_send(ctx: RunContext) -> dict[str, Any]:
        queue_url = check_queue(ctx.payload, current())
        response = client("sqs").send_message(
            QueueUrl=queue_url,
            MessageBody=json.dumps(ctx.payload.get("message", {})),
            MessageAttributes={"idempotency_key": {"DataType": "String", "StringValue": ctx.idempotency_key}},
        )
        return {"message_id": response["MessageId"]}

    def eventbridge_put(ctx: RunContext) -> dict[str, Any]:
        bus = check_event_bus(ctx.payload, current())
        detail = {**ctx.payload.get("detail", {}), "idempotency_key": ctx.idempotency_key}
        response = client("events").put_events(
            Entries=[
                {
                    "EventBusName": bus,
                    "Source": str(ctx.payload.get("source", "jobsched")),
                    "DetailType": str(ctx.payload.get("detail_type", "Scheduled job")),
                    "Detail": json.dumps(detail),
                }
            ]
        )
        if response.get("FailedEntryCount"):
            raise RuntimeError(f"EventBridge rejected the event: {response['Entries']}")
        return {"event_id": response["Entries"][0].get("EventId")}

    def lambda_invoke(ctx: RunContext) -> dict[str, Any]:
        function = check_function(ctx.payload, current())
        body = {
            "input": ctx.payload.get("input", {}),
            "idempotency_key": ctx.idempotency_key,
            "run_id": ctx.run_id,
        }
        response = client("lambda").invoke(
            FunctionName=function, InvocationType="Event", Payload=json.dumps(body)
        )
        return {"status": response.get("StatusCode")}

    registry.add("log", log_payload)
    registry.add("sqs_send", sqs_send)
    registry.add("eventbridge_put", eventbridge_put)
    registry.add("lambda_invoke", lambda_invoke)
    registry.add("sfn_start_execution", lambda ctx: start_execution(ctx, client("stepfunctions"), current()))
    registry.add("ecs_run_task", lambda ctx: run_task(ctx, client("ecs"), current()))
    # Issue 38: any allow-listed AWS API (universal targets), SNS and Kinesis (targets/universal.py).
    registry.add("aws_sdk", lambda ctx: universal.sdk_call(ctx, client, current()))
    registry.add("sns_publish", lambda ctx: universal.sns_publish(ctx, client("sns"), current()))
    registry.add(
        "kinesis_put_record", lambda ctx: universal.kinesis_put_record(ctx, client("kinesis"), current())
    )
