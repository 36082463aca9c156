"""Built-in handlers, so jobsched is useful without writing code.

- ``log``: writes the payload to the run's log.
- ``sqs_send``: sends ``payload["message"]`` to ``payload["queue_url"]``.
- ``eventbridge_put``: puts ``payload["detail"]`` on ``payload["event_bus"]`` with
  ``payload["detail_type"]`` and ``payload["source"]``.
- ``lambda_invoke``: invokes ``payload["function"]`` asynchronously with ``payload["input"]``.

Destinations must be allowed by configuration (``ALLOWED_QUEUE_ARNS`` and friends, which the
template also turns into IAM permissions): a job item can never reach a resource the operator did
not name. External calls are at-least-once; each carries the run's idempotency key (SQS message
attribute, EventBridge detail field, Lambda payload field) so the receiver can deduplicate.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any, Protocol
from urllib.parse import urlparse

from jobsched.targets.registry import HandlerRegistry, RunContext


class AllowLists(Protocol):
    allowed_queue_arns: list[str]
    allowed_event_bus_arns: list[str]
    allowed_function_arns: list[str]


class NotAllowed(PermissionError):
    pass


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


def _require(allowed: list[str], arn: str, what: str) -> None:
    if arn not in allowed and "*" not in allowed:
        raise NotAllowed(f"{what} {arn} is not in the allowed list; add it to the stack's parameters")


def register_builtins(registry: HandlerRegistry, allow: AllowLists, clients: Any = None) -> None:
    """Register the built-ins once per registry. ``clients`` is a callable service -> boto3 client."""
    if registry.get("log") is not None:
        return

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
        queue_url = str(ctx.payload["queue_url"])
        _require(allow.allowed_queue_arns, _queue_arn(queue_url), "queue")
        response = client("sqs").send_message(
            QueueUrl=queue_url,
            MessageBody=json.dumps(ctx.payload.get("message", {})),
            MessageAttributes={"idempotency_key": {"DataType": "String", "StringValue": ctx.idempotency_key}},
        )
        return {"message_id": response["MessageId"]}

    def eventbridge_put(ctx: RunContext) -> dict[str, Any]:
        bus = str(ctx.payload.get("event_bus", "default"))
        if not bus.startswith("arn:"):
            raise NotAllowed("event_bus must be an ARN so it can be checked against the allowed list")
        _require(allow.allowed_event_bus_arns, bus, "event bus")
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
        function = str(ctx.payload["function"])
        _require(allow.allowed_function_arns, function, "function")
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
