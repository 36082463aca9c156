"""The Python API: an ``Operations`` object bound to a deployment.

    from jobsched_tools.api import connect
    from jobsched.core.job import JobDefinition

    ops = connect(stack_name="jobsched")  # or connect(local=True), or the four resource names
    ops.register(JobDefinition(job_id="nightly-report", schedule="cron(0 3 * * ? *)",
                               timezone="Europe/Berlin", target="log", payload={"report": "daily"}))
    ops.runs("nightly-report")
    # A one-time job whose item is deleted once its run has ended (the runs stay):
    ops.register(JobDefinition(job_id="migrate-once", schedule="at(2026-12-24T18:00:00)",
                               target="log", action_after_completion="delete"))

The CLI's commands are thin wrappers over the same object.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jobsched.services.operations import Operations

from jobsched_tools.deployment import LOCAL_STATE_FILE, Target, TargetError, local_target, stack_target


def connect(
    *,
    local: bool = False,
    state_file: Path | str = LOCAL_STATE_FILE,
    stack_name: str | None = None,
    jobs_table: str | None = None,
    state_table: str | None = None,
    runs_table: str | None = None,
    queue_url: str | None = None,
    shard_count: int | None = None,
    endpoint_url: str | None = None,
) -> Operations:
    """Operations on a deployment: the local stack (``local=True``: the running ``jobsched local``
    that wrote ``state_file``), a CloudFormation stack, or its resources. The shard count must be
    the stack's ShardCount (read from the stack or the state file when omitted). A deployment that
    cannot be reached raises ``TargetError`` saying why. ``register`` checks a job's target against
    the handlers of this checkout, as the registrar does (``jobsched_tools.handlers``)."""
    if local:
        target = local_target(state_file)
    elif stack_name is not None:
        target = stack_target(stack_name)
    elif jobs_table and state_table and runs_table and queue_url:
        target = Target(jobs_table, state_table, runs_table, queue_url, endpoint_url, shard_count)
    else:
        raise TargetError(
            "which deployment? pass local=True, stack_name=, or jobs_table, state_table, runs_table "
            "and queue_url"
        )
    return operations_for(target, shard_count)


def operations_for(target: Target, shard_count: int | None = None) -> Operations:
    from jobsched.adapters.sqs_queue import SqsWorkQueue
    from jobsched.core.config import SchedulerConfig
    from jobsched.runtime.clock import SystemClock

    from jobsched_tools.fakes.memory_telemetry import MemoryTelemetry
    from jobsched_tools.handlers import checkout_targets

    shards = shard_count or target.shard_count
    if shards is None:
        # A job written to a shard the trigger does not query would never run: never guess.
        raise TargetError("the shard count (the stack's ShardCount) is needed for this deployment")
    store = store_for(target)
    queue = SqsWorkQueue(_client("sqs", target), target.queue_url)
    wake = None
    if target.detector_function:
        from jobsched.adapters.lambda_invoker import LambdaDetectorWaker

        # A manual run or a backfill wakes an idle miss detector (services/waking.py).
        wake = LambdaDetectorWaker(_client("lambda", target), target.detector_function, qualifier="live")
    return Operations(
        store,
        queue,
        MemoryTelemetry(),
        SystemClock(),
        SchedulerConfig(shard_count=shards),
        known_targets=checkout_targets(),
        wake_detector=wake,
    )


def store_for(target: Target) -> Any:
    """The deployment's tables, as the services read them (``jobsched top`` reads them directly)."""
    from jobsched.adapters.dynamodb_store import DynamoStore

    return DynamoStore(_client("dynamodb", target), target.jobs_table, target.state_table, target.runs_table)


def _client(service: str, target: Target) -> Any:
    """A client for the target: with its own region and credentials when it has them (the local
    stack), else as boto3 finds them."""
    from jobsched.adapters.aws import client_config, make_client

    if target.credentials is None and target.region is None:
        return make_client(service, target.endpoint_url)
    import boto3

    key_id, secret = target.credentials or (None, None)
    session = boto3.session.Session(
        aws_access_key_id=key_id, aws_secret_access_key=secret, region_name=target.region
    )
    return session.client(service, endpoint_url=target.endpoint_url, config=client_config())  # type: ignore[call-overload]
