"""Finding the deployment the CLI talks to: explicit options, environment, a CloudFormation stack's
outputs, or the local stack's state file. boto3 honours ``AWS_ENDPOINT_URL`` for all of them."""

from __future__ import annotations

import argparse
import json
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from jobsched_tools.emulator.credentials import DUMMY_ACCESS_KEY_ID, DUMMY_SECRET_ACCESS_KEY, LOCAL_REGION

LOCAL_STATE_FILE = ".jobsched-local.json"


class TargetError(RuntimeError):
    pass


# The stack's allow-list parameters, as the functions' settings name them (ALLOWED_QUEUE_ARNS is
# AllowedTargetQueueArns: template.yaml's Globals).
ALLOW_LIST_PARAMETERS = {
    "AllowedTargetQueueArns": "allowed_queue_arns",
    "AllowedEventBusArns": "allowed_event_bus_arns",
    "AllowedFunctionArns": "allowed_function_arns",
    "AllowedStateMachineArns": "allowed_state_machine_arns",
    "AllowedTaskDefinitionArns": "allowed_task_definition_arns",
    "AllowedTaskRoleArns": "allowed_task_role_arns",
    "AllowedSdkActions": "allowed_sdk_actions",
    "AllowedTopicArns": "allowed_topic_arns",
    "AllowedStreamArns": "allowed_stream_arns",
    "AllowedDeadLetterQueueArns": "allowed_dead_letter_queue_arns",
}


@dataclass(eq=False)
class AllowListValues:
    """A deployment's allow-lists (targets/builtin.py ``AllowLists``), so the CLI and the Python API
    check a job's destination at registration as the registrar function does
    (services/allow_lists.py)."""

    allowed_queue_arns: list[str] = field(default_factory=list)
    allowed_event_bus_arns: list[str] = field(default_factory=list)
    allowed_function_arns: list[str] = field(default_factory=list)
    allowed_state_machine_arns: list[str] = field(default_factory=list)
    allowed_task_definition_arns: list[str] = field(default_factory=list)
    allowed_task_role_arns: list[str] = field(default_factory=list)
    # aws_sdk's IAM actions, sns_publish's topics, kinesis_put_record's streams (issue 38).
    allowed_sdk_actions: list[str] = field(default_factory=list)
    allowed_topic_arns: list[str] = field(default_factory=list)
    allowed_stream_arns: list[str] = field(default_factory=list)
    # The queues a job may name as its dead_letter_queue_arn (services/dead_letters.py).
    allowed_dead_letter_queue_arns: list[str] = field(default_factory=list)

    @classmethod
    def from_lists(cls, lists: dict[str, Any]) -> AllowListValues:
        """From ``{attribute: list or comma-separated text}``; other keys are ignored."""

        def entries(value: Any) -> list[str]:
            items = value.split(",") if isinstance(value, str) else list(value or [])
            return [str(item).strip() for item in items if str(item).strip()]

        names = set(ALLOW_LIST_PARAMETERS.values())
        return cls(**{name: entries(value) for name, value in lists.items() if name in names})


@dataclass(frozen=True)
class Target:
    jobs_table: str
    state_table: str
    runs_table: str
    queue_url: str
    endpoint_url: str | None = None
    # Must equal the stack's ShardCount: a job written to a shard the trigger does not query
    # would never run. Read from the stack or the local state; explicit otherwise.
    shard_count: int | None = None
    # The local stack's region and (dummy) credentials, so that --local needs no AWS settings.
    # None: boto3's own (environment, profile, ...).
    region: str | None = None
    credentials: tuple[str, str] | None = None
    # The work queue's dead-letter queue (`jobsched dlq redrive`); None when not known.
    dlq_url: str | None = None
    # The stack's allow-lists (from its parameters or the local stack's state); None when not known
    # (then only the registrar function checks destinations).
    allow_lists: AllowListValues | None = None
    # The miss detector's function, which a manual run or a backfill wakes (its `live` alias,
    # services/waking.py); None: nothing is woken (the local stack's detector always sweeps).
    detector_function: str | None = None
    # The stack's claim indexes (its ClaimShape parameter; core/claim_shape.py DeployedShape):
    # from the stack's parameters or the local stack's state; None: read from the tables
    # (api.claim_shape_of).
    claim_shape: str | None = None


def add_target_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("deployment (first match wins)")
    group.add_argument("--jobs-table", default=os.environ.get("JOBSCHED_JOBS_TABLE"))
    group.add_argument("--state-table", default=os.environ.get("JOBSCHED_STATE_TABLE"))
    group.add_argument("--runs-table", default=os.environ.get("JOBSCHED_RUNS_TABLE"))
    group.add_argument("--queue-url", default=os.environ.get("JOBSCHED_QUEUE_URL"))
    group.add_argument(
        "--dlq-url", default=os.environ.get("JOBSCHED_DLQ_URL"), help="the work queue's dead-letter queue"
    )
    group.add_argument(
        "--stack-name", default=os.environ.get("JOBSCHED_STACK_NAME"), help="read the stack outputs"
    )
    group.add_argument("--local", action="store_true", help=f"the local stack ({LOCAL_STATE_FILE})")


def resolve_target(args: argparse.Namespace) -> Target:
    """The deployment the options name. The local stack only with ``--local``: a state file in
    the folder is never used unasked (it may be another terminal's, and an AWS deployment's
    names in JOBSCHED_* variables must not be overridden by it)."""
    if args.local:
        return local_target(Path(LOCAL_STATE_FILE))
    if args.jobs_table and args.state_table and args.runs_table and args.queue_url:
        return Target(
            args.jobs_table,
            args.state_table,
            args.runs_table,
            args.queue_url,
            os.environ.get("AWS_ENDPOINT_URL"),
            dlq_url=getattr(args, "dlq_url", None),
        )
    if args.stack_name:
        return stack_target(args.stack_name)
    hint = (
        f" ({LOCAL_STATE_FILE} is here: add --local to use the local stack)"
        if Path(LOCAL_STATE_FILE).exists()
        else ""
    )
    raise TargetError(
        "which deployment? give --stack-name, or --jobs-table/--state-table/--runs-table/--queue-url "
        f"(or JOBSCHED_* variables), or --local{hint}"
    )


def local_target(path: Path | str = LOCAL_STATE_FILE) -> Target:
    """The running local stack that wrote ``path`` (``jobsched local``): its endpoint, names,
    shard count, region and credentials."""
    path = Path(path)
    start = "start the local stack with `jobsched local` (in this folder) first"
    if not path.exists():
        raise TargetError(f"no {path} here: {start}")
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        endpoint = str(data["endpoint_url"])
        target = Target(
            str(data["jobs_table"]),
            str(data["state_table"]),
            str(data["runs_table"]),
            str(data["work_queue_url"]),
            endpoint,
            int(data["shard_count"]) if data.get("shard_count") is not None else None,
            str(data.get("region") or LOCAL_REGION),
            (
                str(data.get("aws_access_key_id") or DUMMY_ACCESS_KEY_ID),
                str(data.get("aws_secret_access_key") or DUMMY_SECRET_ACCESS_KEY),
            ),
            str(data["dead_letter_queue_url"]) if data.get("dead_letter_queue_url") else None,
            _allow_lists(data.get("allow_lists")),
            claim_shape=str(data["claim_shape"]) if data.get("claim_shape") else None,
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise TargetError(f"{path} is not a local stack's state file ({exc}): {start}") from exc
    if not is_listening(endpoint):
        raise TargetError(f"the local stack in {path} ({endpoint}) is not running: {start}")
    return target


def _allow_lists(value: Any) -> AllowListValues | None:
    """The local stack's allow-lists from its state file (None from a file written before they were)."""
    return AllowListValues.from_lists(value) if isinstance(value, dict) else None


def is_listening(endpoint: str) -> bool:
    """Whether something accepts a TCP connection at ``endpoint`` (a local stack's moto server)."""
    parts = urlsplit(endpoint)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), timeout=2):
            return True
    except OSError:
        return False


def stack_target(stack_name: str) -> Target:
    """The deployment a CloudFormation stack's outputs and parameters describe."""
    from botocore.exceptions import ClientError, NoCredentialsError, NoRegionError
    from jobsched.adapters.aws import make_client

    try:
        client = make_client("cloudformation")
        stacks = client.describe_stacks(StackName=stack_name)["Stacks"]
    except NoRegionError:
        raise TargetError(
            f"no AWS region to look for the stack {stack_name!r} in: set AWS_DEFAULT_REGION (or AWS_REGION)"
        ) from None
    except NoCredentialsError:
        raise TargetError(
            f"no AWS credentials to read the stack {stack_name!r}: configure them "
            "(aws configure, AWS_PROFILE, ...)"
        ) from None
    except ClientError as exc:
        error = exc.response.get("Error", {})
        region = client.meta.region_name
        if error.get("Code") == "ValidationError" and "does not exist" in str(error.get("Message", "")):
            raise TargetError(
                f"there is no CloudFormation stack named {stack_name!r} in {region}: check the name "
                "and the region (AWS_DEFAULT_REGION), or deploy it first (sam deploy)"
            ) from None
        raise TargetError(
            f"could not read the CloudFormation stack {stack_name!r} in {region}: "
            f"{error.get('Code', 'error')}: {error.get('Message', exc)}"
        ) from None
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stacks[0].get("Outputs", [])}
    parameters = {p["ParameterKey"]: p["ParameterValue"] for p in stacks[0].get("Parameters", [])}
    shards = int(parameters["ShardCount"]) if "ShardCount" in parameters else None
    try:
        return Target(
            outputs["JobsTableName"],
            outputs["StateTableName"],
            outputs["RunsTableName"],
            outputs["WorkQueueUrl"],
            None,
            shards,
            dlq_url=outputs.get("DeadLetterQueueUrl"),
            allow_lists=AllowListValues.from_lists(
                {name: parameters[key] for key, name in ALLOW_LIST_PARAMETERS.items() if key in parameters}
            )
            if any(key in parameters for key in ALLOW_LIST_PARAMETERS)
            else None,
            detector_function=outputs.get("MissDetectorFunctionName"),
            # A stack deployed before the parameter existed has legacy's indexes.
            claim_shape=parameters.get("ClaimShape") or "legacy",
        )
    except KeyError as exc:
        raise TargetError(f"stack {stack_name} has no output {exc}: is it a jobsched stack?") from exc
