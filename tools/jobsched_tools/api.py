"""The Python API: an ``Operations`` object bound to a deployment.

    from jobsched_tools.api import connect
    from jobsched.core.job import JobDefinition

    ops = connect(stack_name="jobsched")  # or connect(local=True), or the four resource names
    ops.register(JobDefinition(job_id="nightly-report", schedule="cron(0 3 * * ? *)",
                               timezone="Europe/Berlin", target="log", payload={"report": "daily"}))
    ops.runs("nightly-report")
    ops.get("nightly-report")["next_run_at"]  # a datetime (UTC), as the CLI shows it
    # A one-time job whose item is deleted once its run has ended (the runs stay):
    ops.register(JobDefinition(job_id="migrate-once", schedule="at(2026-12-24T18:00:00)",
                               target="log", action_after_completion="delete"))

The CLI's commands are thin wrappers over the same object; what the API returns gives instants
as ``datetime`` (UTC), where the tables keep epoch milliseconds.
"""

from __future__ import annotations

import contextlib
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from jobsched.core.claim_shape import DeployedShape
from jobsched.core.clock import ms_to_dt
from jobsched.services.operations import Operations

from jobsched_tools.deployment import LOCAL_STATE_FILE, Target, TargetError, local_target, stack_target

OperationsT = TypeVar("OperationsT", bound=Operations)


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
) -> Api:
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
    return _build(Api, target, shard_count)


class Api(Operations):
    """``Operations`` whose views give instants as ``datetime``: every ``*_at`` attribute (epoch
    milliseconds in the tables: ``next_run_at``, ``registered_at``, a run's ``scheduled_at``,
    ...) and a job's ``start`` and ``end`` (ISO 8601 text in the job item), as ``jobsched show``
    prints them."""

    def get(self, job_id: str) -> dict[str, Any]:
        return with_datetimes(super().get(job_id))

    def list_jobs(self, limit: int = 1000) -> list[dict[str, Any]]:
        return [with_datetimes(view) for view in super().list_jobs(limit)]

    def runs(self, job_id: str, limit: int = 50) -> list[dict[str, Any]]:
        return [with_datetimes(run) for run in super().runs(job_id, limit)]

    def run_at(self, job_id: str, at: datetime) -> dict[str, Any] | None:
        run = super().run_at(job_id, at)
        return None if run is None else with_datetimes(run)

    def get_run(self, run_id: str) -> dict[str, Any] | None:
        run = super().get_run(run_id)
        return None if run is None else with_datetimes(run)


def with_datetimes(view: dict[str, Any]) -> dict[str, Any]:
    """``view`` with its instants as aware ``datetime``s (UTC); every other value as it was."""
    converted = dict(view)
    for name, value in view.items():
        if name.endswith("_at") and isinstance(value, int | float) and not isinstance(value, bool):
            converted[name] = ms_to_dt(int(value))
        elif name in ("start", "end") and isinstance(value, str):
            with contextlib.suppress(ValueError):  # an invalid job's text stays, beside its reasons
                converted[name] = datetime.fromisoformat(value)
    return converted


def operations_for(target: Target, shard_count: int | None = None) -> Operations:
    """The Operations the CLI uses (the tables' own values: epoch milliseconds)."""
    return _build(Operations, target, shard_count)


def _build(kind: type[OperationsT], target: Target, shard_count: int | None) -> OperationsT:
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
    queue = SqsWorkQueue(client_for("sqs", target), target.queue_url)
    wake = None
    if target.detector_function:
        from jobsched.adapters.lambda_invoker import LambdaDetectorWaker

        # A manual run or a backfill wakes an idle miss detector (services/waking.py).
        wake = LambdaDetectorWaker(client_for("lambda", target), target.detector_function, qualifier="live")
    return kind(
        store,
        queue,
        MemoryTelemetry(),
        SystemClock(),
        SchedulerConfig(shard_count=shards),
        known_targets=checkout_targets(),
        wake_detector=wake,
        allow_lists=target.allow_lists,
        deployed=claim_shape_of(target),
    )


def claim_shape_of(target: Target) -> DeployedShape:
    """The deployment's claim indexes (template.yaml's ClaimShape), so that a registration here
    takes the claim the stack's functions take: the target's (the stack's parameter, the local
    stack's state), else the tables' own (DescribeTable; ops/migrate.py ``deployed_shape``). A
    stack whose tables cannot be described, or are between two deploys, reads as ``migrating``:
    the switch decides, as before the parameter existed."""
    if target.claim_shape:
        return DeployedShape(target.claim_shape)
    from botocore.exceptions import BotoCoreError, ClientError

    from jobsched_tools.ops.migrate import deployed_shape

    try:
        shape = deployed_shape(client_for("dynamodb", target), target.state_table, target.runs_table).shape
    except (BotoCoreError, ClientError):
        return DeployedShape.MIGRATING
    return shape or DeployedShape.MIGRATING


def store_for(target: Target) -> Any:
    """The deployment's tables, as the services read them (``jobsched top`` reads them directly)."""
    from jobsched.adapters.dynamodb_store import DynamoStore

    return DynamoStore(
        client_for("dynamodb", target), target.jobs_table, target.state_table, target.runs_table
    )


def client_for(service: str, target: Target) -> Any:
    """A boto3 client of ``service`` for the target: with its own region and credentials when it
    has them (the local stack), else as boto3 finds them. For the commands that reach past
    ``Operations`` (``jobsched dlq`` to the queues, ``jobsched outcomes replay`` to the bus)."""
    from jobsched.adapters.aws import client_config, make_client

    if target.credentials is None and target.region is None:
        return make_client(service, target.endpoint_url)
    import boto3

    key_id, secret = target.credentials or (None, None)
    session = boto3.session.Session(
        aws_access_key_id=key_id, aws_secret_access_key=secret, region_name=target.region
    )
    return session.client(service, endpoint_url=target.endpoint_url, config=client_config())  # type: ignore[call-overload]
