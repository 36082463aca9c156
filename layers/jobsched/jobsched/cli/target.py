"""Finding the deployment the CLI talks to: explicit options, environment, a CloudFormation stack's
outputs, or the local stack's state file. boto3 honours ``AWS_ENDPOINT_URL`` for all of them."""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass
from pathlib import Path

LOCAL_STATE_FILE = ".jobsched-local.json"


class TargetError(RuntimeError):
    pass


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


def add_target_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("deployment (first match wins)")
    group.add_argument("--jobs-table", default=os.environ.get("JOBSCHED_JOBS_TABLE"))
    group.add_argument("--state-table", default=os.environ.get("JOBSCHED_STATE_TABLE"))
    group.add_argument("--runs-table", default=os.environ.get("JOBSCHED_RUNS_TABLE"))
    group.add_argument("--queue-url", default=os.environ.get("JOBSCHED_QUEUE_URL"))
    group.add_argument(
        "--stack-name", default=os.environ.get("JOBSCHED_STACK_NAME"), help="read the stack outputs"
    )
    group.add_argument("--local", action="store_true", help=f"the local stack ({LOCAL_STATE_FILE})")


def resolve_target(args: argparse.Namespace) -> Target:
    if args.jobs_table and args.state_table and args.runs_table and args.queue_url:
        return Target(
            args.jobs_table,
            args.state_table,
            args.runs_table,
            args.queue_url,
            os.environ.get("AWS_ENDPOINT_URL"),
        )
    if args.stack_name:
        return stack_target(args.stack_name)
    state = Path(LOCAL_STATE_FILE)
    if args.local or (state.exists() and not args.jobs_table):
        if not state.exists():
            raise TargetError(f"no {LOCAL_STATE_FILE} here: start the local stack with `jobsched local`")
        data = json.loads(state.read_text())
        return Target(
            data["jobs_table"],
            data["state_table"],
            data["runs_table"],
            data["work_queue_url"],
            data.get("endpoint_url"),
        )
    raise TargetError(
        "which deployment? give --stack-name, or --jobs-table/--state-table/--runs-table/--queue-url "
        "(or JOBSCHED_* variables), or --local"
    )


def stack_target(stack_name: str) -> Target:
    """The deployment a CloudFormation stack's outputs and parameters describe."""
    from jobsched.adapters.aws import make_client

    stacks = make_client("cloudformation").describe_stacks(StackName=stack_name)["Stacks"]
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
        )
    except KeyError as exc:
        raise TargetError(f"stack {stack_name} has no output {exc}") from exc
