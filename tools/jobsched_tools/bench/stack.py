"""The bench's shared pieces: its settings, the moto servers, one phase's stack and the jobs it
schedules. Every phase module (throughput, counts, live, esm, cpu, fanout, memory, idle) imports
them from here, so the dependencies point one way: runner -> phase modules -> stack.
"""

from __future__ import annotations

import math
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from jobsched.adapters.aws import RequestCounter, make_client
from jobsched.adapters.dynamodb_store import DynamoStore, serialize_item
from jobsched.adapters.sqs_queue import SqsWorkQueue
from jobsched.core.claim_shape import DeployedShape
from jobsched.core.clock import iso_z
from jobsched.core.config import SchedulerConfig
from jobsched.core.head_change import HeadChangePlan, plan_head_change
from jobsched.core.job import JobDefinition, OverlapPolicy
from jobsched.core.state import registered_state
from jobsched.core.transitions.head_change import head_change_ops
from jobsched.core.writes import JOBS, RUNS, STATE, Put, Update

from jobsched_tools.emulator.claim_indexes import deploy_claim_indexes
from jobsched_tools.emulator.local_moto import MotoProcess
from jobsched_tools.emulator.provision import Resources, load_template, provision

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient

NOOP = "bench.noop"
CRASH = "bench.crash"


@dataclass(frozen=True)
class BenchSettings:
    raw_writes: int = 1500
    dispatch_runs: int = 800
    count_runs: int = 100
    lag_seconds: float = 90.0
    lag_occurrences_per_s: float = 3.0
    crashes: int = 12
    shard_count: int = 8
    lease_seconds: int = 5
    heartbeat_seconds: int = 2
    detector_period_s: float = 1.0
    tick_period_s: float = 2.0
    lookahead_seconds: int = 10
    clock_skew_allowance_ms: int = 500
    pollers: int = 4
    claim_concurrency: int = 16  # the trigger's parallel claimers (ClaimConcurrency)
    fast_transactions: bool = True  # see emulator/moto_fast.py
    cold_import_runs: int = 7  # fresh interpreters per function (bench/cold_import.py); the median

    @classmethod
    def quick(cls) -> BenchSettings:
        return cls(
            raw_writes=200,
            dispatch_runs=150,
            count_runs=20,
            lag_seconds=12.0,
            lag_occurrences_per_s=3.0,
            crashes=3,
            cold_import_runs=3,
        )


def legacy_tables() -> dict[str, str]:
    """The template parameters that give a phase legacy tables (``next-run`` and ``lease``): the
    moto phases seed their jobs as legacy states (``scheduled_job``) and run today's claim, so
    their request counts, CPU, lag and recovery are the legacy claim's. What the shipped shape
    writes and reads, and its price, is metered on the product's services
    (bench/stack_shapes.py, bench/shape_figures.py). Empty for a template without ``ClaimShape``,
    whose tables are legacy's."""
    return {"ClaimShape": "legacy"} if "ClaimShape" in load_template()["Parameters"] else {}


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


@dataclass(frozen=True)
class Servers:
    """DynamoDB and SQS on separate moto server processes, as they are separate services on AWS:
    on one server, every message the trigger sends and the drainer receives would take server
    time from the DynamoDB writes whose rate the dispatch efficiency compares against."""

    dynamodb: MotoProcess
    sqs: MotoProcess

    def stop(self) -> None:
        self.dynamodb.stop()
        self.sqs.stop()


class BenchStack:
    """One phase's tables and queue on the shared server, with counted clients."""

    def __init__(
        self,
        moto: Servers,
        name: str,
        counter: RequestCounter | None = None,
        shape: DeployedShape = DeployedShape.LEGACY,
    ) -> None:
        self.ddb: DynamoDBClient = make_client("dynamodb", moto.dynamodb.endpoint_url, "us-east-1")
        self.sqs: SQSClient = make_client("sqs", moto.sqs.endpoint_url, "us-east-1")
        # Setup and inspection go through separate, uncounted clients.
        self.admin_ddb: DynamoDBClient = make_client("dynamodb", moto.dynamodb.endpoint_url, "us-east-1")
        self.admin_sqs: SQSClient = make_client("sqs", moto.sqs.endpoint_url, "us-east-1")
        self.res: Resources = provision(
            self.admin_ddb,
            self.admin_sqs,
            prefix=f"bench-{name}-{uuid.uuid4().hex[:6]}",
            parameters={"WorkerTimeoutSeconds": "120", **legacy_tables()},
        )
        # The tables brought to ``shape``'s claim indexes, as a deploy with ClaimShape set does.
        self.shape = shape
        deploy_claim_indexes(
            self.admin_ddb, {"state": self.res.state_table, "runs": self.res.runs_table}, shape
        )
        if counter is not None:
            counter.attach(self.ddb)
            counter.attach(self.sqs)
        self.store = DynamoStore(self.ddb, self.res.jobs_table, self.res.state_table, self.res.runs_table)
        self.admin_store = DynamoStore(
            self.admin_ddb, self.res.jobs_table, self.res.state_table, self.res.runs_table
        )
        self.queue = SqsWorkQueue(self.sqs, self.res.work_queue_url)

    def put_jobs(self, jobs: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
        """Job items and their state items, as the registrar leaves them (BatchWriteItem: at
        most 25 requests each)."""
        self._batch_put(self.res.jobs_table, [j for j, _ in jobs])
        self._batch_put(self.res.state_table, [s for _, s in jobs])

    def put_heads(
        self, jobs: list[tuple[dict[str, Any], HeadChangePlan]], now: int, cfg: SchedulerConfig
    ) -> None:
        """Job items and each job's first registration under the successor claim (its state and
        its head: ``registered_head``), as the registrar's transaction leaves them, written in
        batches as ``put_jobs`` writes legacy states (one transaction a job took seconds for a
        phase's jobs on moto, and an occurrence due meanwhile started late)."""
        names = {JOBS: self.res.jobs_table, STATE: self.res.state_table, RUNS: self.res.runs_table}
        items: dict[str, list[dict[str, Any]]] = {JOBS: [item for item, _ in jobs], STATE: [], RUNS: []}
        for _, plan in jobs:
            for op in head_change_ops(plan, now, cfg):
                # A first registration makes its state (an update of an absent item: its key and
                # what it sets) and puts its head; nothing else.
                if isinstance(op, Put):
                    items[op.table].append(dict(op.item))
                else:
                    assert isinstance(op, Update) and not (op.remove or op.add), op
                    items[op.table].append({**op.key, **op.set_if_missing, **op.set})
        for table, batch in items.items():
            self._batch_put(names[table], batch)

    def _batch_put(self, table: str, items: list[dict[str, Any]]) -> None:
        for start in range(0, len(items), 25):
            requests: list[Any] = [
                {"PutRequest": {"Item": serialize_item({k: v for k, v in item.items() if v is not None})}}
                for item in items[start : start + 25]
            ]
            pending: dict[str, Any] = {table: requests}
            while pending:
                done = self.admin_ddb.batch_write_item(RequestItems=pending)
                pending = dict(done.get("UnprocessedItems", {}))

    def visible(self) -> int:
        attrs = self.admin_sqs.get_queue_attributes(
            QueueUrl=self.res.work_queue_url, AttributeNames=["ApproximateNumberOfMessages"]
        )["Attributes"]
        return int(attrs.get("ApproximateNumberOfMessages", "0"))

    def runs(self, prefix: str = "") -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        cursor = None
        while True:
            page = self.admin_store.scan(RUNS, 500, cursor)
            out += [item for item in page.items if str(item["run_id"]).startswith(prefix)]
            if page.cursor is None:
                return out
            cursor = page.cursor


def scheduled_job(
    job_id: str,
    due_ms: int,
    cfg: SchedulerConfig,
    target: str = NOOP,
    overlap: str = "allow",
    at: bool = True,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A job item and its state item as the registrar leaves them: active, in the next-run
    index, due at ``due_ms``."""
    schedule = f"at({iso_z(due_ms)[:-1]})" if at else "rate(1 hour)"
    # A rate without a start is anchored at the epoch, so its next occurrence after due_ms is
    # the next full hour: a phase started within the trigger's lookahead of an hour claimed each
    # job twice in one tick (the quick bench counted 20 runs for 10 jobs at 00:59). Anchored at
    # due_ms, the next occurrence is an hour on, whenever the bench runs.
    start = None if at else datetime.fromtimestamp(due_ms // 1000, UTC)
    definition = JobDefinition(
        job_id=job_id, schedule=schedule, target=target, overlap=OverlapPolicy(overlap), start=start
    )
    item = {**definition.to_item(), "status": "active", "def_hash": definition.definition_hash()}
    return item, registered_state(definition, due_ms, cfg.shard_count, due_ms)


def registered_head(
    job_id: str, due_ms: int, now: int, cfg: SchedulerConfig, overlap: str = "allow", target: str = NOOP
) -> tuple[dict[str, Any], HeadChangePlan]:
    """A job item and its first registration under the successor claim (the state and the head
    at ``due_ms``, epoch 1), planned as the registrar plans it (``plan_head_change``): the
    successor claim's ``scheduled_job``. Hourly, anchored at ``due_ms`` (a whole second after
    ``now``), so the head is that instant."""
    definition = JobDefinition(
        job_id=job_id,
        schedule="rate(1 hour)",
        target=target,
        overlap=OverlapPolicy(overlap),
        start=datetime.fromtimestamp(due_ms // 1000, UTC),
    )
    digest = definition.definition_hash()
    item = {**definition.to_item(), "status": "active", "def_hash": digest}
    plan = plan_head_change(job_id, None, None, definition, digest, now, cfg)
    assert isinstance(plan, HeadChangePlan), plan
    return item, plan


def seed_due(stack: BenchStack, jobs: list[tuple[str, int, str]], cfg: SchedulerConfig) -> None:
    """Jobs ``(job_id, due_ms, target)``, each due once at its whole-second ``due_ms``, as the
    stack's shape holds them: legacy states in ``next-run`` (``scheduled_job``, an ``at()``), or
    heads (``registered_head``, hourly from ``due_ms``)."""
    if stack.shape is DeployedShape.SUCCESSOR:
        now = now_ms()
        stack.put_heads(
            [registered_head(job, due, now, cfg, target=target) for job, due, target in jobs], now, cfg
        )
    else:
        stack.put_jobs([scheduled_job(job, due, cfg, target=target) for job, due, target in jobs])


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@contextmanager
def draining(stack: BenchStack) -> Iterator[None]:
    """Keep the queue shallow while the trigger sends (moto's SQS slows with depth; PurgeQueue
    is allowed once a minute): receive and delete, as a worker fleet would."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            messages = stack.admin_sqs.receive_message(
                QueueUrl=stack.res.work_queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=1
            ).get("Messages", [])
            if messages:
                stack.admin_sqs.delete_message_batch(
                    QueueUrl=stack.res.work_queue_url,
                    Entries=[
                        {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)
                    ],
                )

    thread = threading.Thread(target=loop, name="bench-drainer", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def bench_config(settings: BenchSettings) -> SchedulerConfig:
    return SchedulerConfig(
        shard_count=settings.shard_count,
        lease_seconds=settings.lease_seconds,
        # The detector first looks at a run at its dispatch lease: a worker that dies before its
        # first heartbeat is recovered then (docs/design.md).
        dispatch_lease_seconds=settings.lease_seconds,
        heartbeat_seconds=settings.heartbeat_seconds,
        lookahead_seconds=settings.lookahead_seconds,
        clock_skew_allowance_ms=settings.clock_skew_allowance_ms,
        max_claims_per_tick=100_000,
        claim_concurrency=settings.claim_concurrency,
    )
