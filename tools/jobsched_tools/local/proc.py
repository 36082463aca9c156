"""One process of the local stack: drives a real Lambda handler with the events AWS would send.

    python -m jobsched_tools.local.proc trigger  --every 5     # EventBridge scheduled events
    python -m jobsched_tools.local.proc trigger  --every 5 --group 1 --groups 3  # one shard group
    python -m jobsched_tools.local.proc detector --every 5
    python -m jobsched_tools.local.proc worker                  # SQS event source mapping
    python -m jobsched_tools.local.proc registrar --checkpoint F  # DynamoDB stream event source mapping
    python -m jobsched_tools.local.proc publisher --checkpoint F  # the runs stream, filtered (outcomes)

The environment (tables, queue, endpoint, settings) comes from the parent (``LocalStack``).
The handler is ``functions/<name>/app.py``'s ``lambda_handler``, loaded by file path, so what runs
here is exactly the code that is deployed. Every line a handler logs goes to stdout as JSON.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import os
import signal
import sys
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any

from jobsched.adapters.aws import make_client

from jobsched_tools.emulator.provision import find_template

Handler = Callable[[dict[str, Any], Any], Any]

FUNCTION_DIRS = {
    "trigger": "trigger",
    "detector": "miss_detector",
    "worker": "worker",
    "registrar": "registrar",
    "publisher": "outcome_publisher",
}


def functions_dir() -> Path:
    return find_template().parent / "functions"


def load_handler(function: str) -> Handler:
    """``functions/<function>/app.py``'s ``lambda_handler``; the function's folder and the
    handlers layer go on sys.path first, as in the Lambda package (``import job_handlers``)."""
    folder = functions_dir() / function
    sys.path.insert(0, str(functions_dir().parent / "layers" / "handlers"))
    sys.path.insert(0, str(folder))
    spec = importlib.util.spec_from_file_location(f"jobsched_local_{function}_app", folder / "app.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    handler: Handler = module.lambda_handler
    return handler


class FakeLambdaContext:
    """The attributes Powertools reads from a LambdaContext, with a real deadline."""

    def __init__(self, function_name: str, request_id: str, timeout_s: float) -> None:
        region = os.environ.get("AWS_DEFAULT_REGION", "us-east-1")
        self.function_name = function_name
        self.function_version = "$LATEST"
        self.invoked_function_arn = f"arn:aws:lambda:{region}:123456789012:function:{function_name}"
        self.memory_limit_in_mb = 512
        self.aws_request_id = request_id
        self.log_group_name = f"/aws/lambda/{function_name}"
        self.log_stream_name = f"local/{os.getpid()}"
        self._deadline = time.monotonic() + timeout_s

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


class Invoker:
    """Makes a fresh context per invocation; request ids name the process (``<name>-<pid>-<n>``),
    so a run's ``owner`` tells which process holds it."""

    def __init__(self, name: str, function: str, timeout_s: float) -> None:
        self.name = name
        self.function = function
        self.timeout_s = timeout_s
        self.handler = load_handler(function)
        self._counter = itertools.count(1)

    def __call__(self, event: dict[str, Any]) -> Any:
        request_id = f"{self.name}-{os.getpid()}-{next(self._counter)}"
        context = FakeLambdaContext(f"jobsched-local-{self.function}", request_id, self.timeout_s)
        return self.handler(event, context)


def scheduled_event(rule: str) -> dict[str, Any]:
    """An EventBridge ``Scheduled Event``, as the trigger and the miss detector receive it."""
    region = os.environ.get("AWS_DEFAULT_REGION", "us-east-1")
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": "123456789012",
        "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": region,
        "resources": [f"arn:aws:events:{region}:123456789012:rule/{rule}"],
        "detail": {},
    }


def run_ticks(
    invoke: Invoker, every_s: float, stop: Callable[[], bool], group: tuple[int, int] | None = None
) -> None:
    """Invoke on a schedule: EventBridge's scheduled event, or with ``group`` (g, K) the event a
    fan-out tick sends group g of K (docs/design.md, "Trigger fan-out"), one process per group."""
    next_at = time.monotonic()
    while not stop():
        try:
            invoke(
                scheduled_event(invoke.function) if group is None else {"group": group[0], "groups": group[1]}
            )
        except Exception as exc:  # a failed invocation is retried by the next tick, as in AWS
            _report_error(invoke.name, exc)
        next_at += every_s
        delay = next_at - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        else:
            next_at = time.monotonic()


def sqs_event(messages: list[dict[str, Any]], queue_arn: str) -> dict[str, Any]:
    region = os.environ.get("AWS_DEFAULT_REGION", "us-east-1")
    records = []
    for message in messages:
        attributes = {
            name: {
                "stringValue": value.get("StringValue"),
                "binaryValue": value.get("BinaryValue"),
                "stringListValues": [],
                "binaryListValues": [],
                "dataType": value.get("DataType", "String"),
            }
            for name, value in message.get("MessageAttributes", {}).items()
        }
        records.append(
            {
                "messageId": message["MessageId"],
                "receiptHandle": message["ReceiptHandle"],
                "body": message["Body"],
                "attributes": message.get("Attributes", {}),
                "messageAttributes": attributes,
                "md5OfBody": message.get("MD5OfBody", ""),
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": region,
            }
        )
    return {"Records": records}


def run_worker(invoke: Invoker, stop: Callable[[], bool], wait_s: int = 5) -> None:
    """The SQS event source mapping: long-poll up to 10 messages, invoke, delete the records that
    are not reported in ``batchItemFailures`` (those become visible again after the timeout)."""
    sqs = make_client("sqs", read_timeout=wait_s + 10)  # a long poll outlasts the default read timeout
    queue_url = os.environ["WORK_QUEUE_URL"]
    attributes = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn", "RedrivePolicy"])[
        "Attributes"
    ]
    queue_arn = attributes["QueueArn"]
    max_receives = int(json.loads(attributes.get("RedrivePolicy") or "{}").get("maxReceiveCount", 0))
    while not stop():
        try:
            response = sqs.receive_message(
                QueueUrl=queue_url,
                MaxNumberOfMessages=10,
                WaitTimeSeconds=wait_s,
                AttributeNames=["All"],
                MessageAttributeNames=["All"],
            )
        except Exception as exc:
            _report_error(invoke.name, exc)
            time.sleep(1)
            continue
        messages: list[dict[str, Any]] = [dict(m) for m in response.get("Messages", [])]
        if not messages:
            continue
        try:
            result = invoke(sqs_event(messages, queue_arn)) or {}
        except Exception as exc:  # the whole batch failed: every message comes back
            _report_error(invoke.name, exc)
            _dead_lettered(invoke.name, messages, max_receives)
            continue
        failed = {item["itemIdentifier"] for item in result.get("batchItemFailures", [])}
        _dead_lettered(invoke.name, [m for m in messages if m["MessageId"] in failed], max_receives)
        done = [
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
            for i, m in enumerate(messages)
            if m["MessageId"] not in failed
        ]
        if done:
            try:
                sqs.delete_message_batch(QueueUrl=queue_url, Entries=done)  # type: ignore[arg-type]
            except Exception as exc:
                _report_error(invoke.name, exc)


def run_registrar(
    invoke: Invoker,
    stop: Callable[[], bool],
    *,
    batch_size: int,
    max_retries: int,
    checkpoint: Path | None,
    poll_s: float = 1.0,
) -> None:
    """The DynamoDB stream event source mapping (``jobsched_tools.local.streams``): batches in order
    per shard, ``batchItemFailures`` retried, checkpointed in ``checkpoint``."""
    import json

    from jobsched_tools.local.streams import Checkpoints, StreamMapping, run

    streams = make_client("dynamodbstreams")
    stream_arn = os.environ["JOBS_STREAM_ARN"]
    failure_queue = os.environ.get("REGISTRAR_FAILURE_QUEUE_URL")
    sqs = make_client("sqs") if failure_queue else None

    def to_failure_queue(description: dict[str, Any]) -> None:
        if sqs is not None and failure_queue:
            sqs.send_message(QueueUrl=failure_queue, MessageBody=json.dumps(description))

    def report(name: str, fields: dict[str, Any]) -> None:
        _print_event(invoke.name, name, "WARNING", **fields)

    mapping = StreamMapping(
        streams,
        stream_arn,
        invoke,
        Checkpoints(stream_arn, checkpoint),
        batch_size=batch_size,
        max_retries=max_retries,
        failure_destination=to_failure_queue,
        report=report,
        region=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
    )
    run(mapping, stop, poll_s, lambda exc: _report_error(invoke.name, exc))


def run_publisher(
    invoke: Invoker, stop: Callable[[], bool], *, checkpoint: Path | None, poll_s: float = 1.0
) -> None:
    """The outcome publisher's mapping on the runs stream (OutcomePublisherFunctionRunChanges in
    template.yaml): its filter, its batch size, and retries until the record expires (-1; here:
    until the stack stops, as moto keeps stream records for as long as it runs)."""
    import json

    from jobsched_tools.local.stack import PUBLISHER_MAPPING_ID, mapping_properties
    from jobsched_tools.local.streams import Checkpoints, StreamMapping, filtered, run

    props = mapping_properties(PUBLISHER_MAPPING_ID)
    patterns = [json.loads(f["Pattern"]) for f in props.get("FilterCriteria", {}).get("Filters", [])]
    stream_arn = os.environ["RUNS_STREAM_ARN"]

    def report(name: str, fields: dict[str, Any]) -> None:
        _print_event(invoke.name, name, "WARNING", **fields)

    mapping = StreamMapping(
        make_client("dynamodbstreams"),
        stream_arn,
        filtered(invoke, patterns),
        Checkpoints(stream_arn, checkpoint),
        batch_size=int(props.get("BatchSize", 100)),
        max_retries=sys.maxsize,
        report=report,
        region=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
    )
    run(mapping, stop, poll_s, lambda exc: _report_error(invoke.name, exc))


def _dead_lettered(name: str, failed: list[dict[str, Any]], max_receives: int) -> None:
    """SQS moves a message to the dead-letter queue silently, on the receive after its
    ``maxReceiveCount``-th: say so when a message's last receive failed (``dlq.dead_lettered``;
    ``jobsched local --view`` shows it), with the run its body names where it names one."""
    if max_receives <= 0:
        return
    for message in failed:
        receives = int(message.get("Attributes", {}).get("ApproximateReceiveCount", 0))
        if receives < max_receives:
            continue
        try:
            body = json.loads(message.get("Body", ""))
        except ValueError:
            body = None
        run_id = str(body["run_id"]) if isinstance(body, dict) and body.get("run_id") else None
        _print_event(
            name,
            "dlq.dead_lettered",
            "WARNING",
            correlation_id=run_id or message["MessageId"],
            message_id=message["MessageId"],
            receive_count=receives,
            timestamp=datetime.now(UTC).isoformat(),
        )


def _report_error(name: str, exc: BaseException) -> None:
    _print_event(name, "local.invocation_failed", "ERROR", error=f"{type(exc).__name__}: {exc}")


def _print_event(name: str, event: str, level: str, **fields: Any) -> None:
    line = {"level": level, "message": event, "event": event, "proc": name, **fields}
    print(json.dumps(line, default=str), flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m jobsched_tools.local.proc")
    parser.add_argument("role", choices=sorted(FUNCTION_DIRS))
    parser.add_argument("--name", default=None, help="process name (request ids start with it)")
    parser.add_argument("--every", type=float, default=5.0, help="seconds between scheduled events")
    parser.add_argument("--timeout", type=float, default=60.0, help="invocation deadline, seconds")
    parser.add_argument("--group", type=int, default=None, help="trigger: claim this shard group only")
    parser.add_argument("--groups", type=int, default=None, help="trigger: of this many groups")
    parser.add_argument("--batch-size", type=int, default=100, help="registrar: records per batch")
    parser.add_argument("--max-retries", type=int, default=10, help="registrar: MaximumRetryAttempts")
    parser.add_argument("--checkpoint", type=Path, default=None, help="registrar, publisher: checkpoint file")
    args = parser.parse_args(argv)

    stopping = False

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        if args.role == "detector":
            # A detector invocation naps between sweeps for most of its minute: stop now rather
            # than at its deadline. Every step is one conditional write, so cutting it anywhere
            # leaves state the next invocation continues from.
            raise SystemExit(0)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    invoke = Invoker(args.name or args.role, FUNCTION_DIRS[args.role], args.timeout)

    def stop() -> bool:
        return stopping

    print(f'{{"event": "local.ready", "message": "local.ready", "role": "{args.role}"}}', flush=True)

    if args.role in ("trigger", "detector"):
        group = (args.group, args.groups) if args.group is not None and args.groups is not None else None
        run_ticks(invoke, args.every, stop, group)
    elif args.role == "worker":
        run_worker(invoke, stop)
    elif args.role == "publisher":
        run_publisher(invoke, stop, checkpoint=args.checkpoint)
    else:
        run_registrar(
            invoke, stop, batch_size=args.batch_size, max_retries=args.max_retries, checkpoint=args.checkpoint
        )


if __name__ == "__main__":
    main()
