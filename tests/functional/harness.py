"""A small builder for functional tests: store, queue, telemetry, a ManualClock and the services.

``build(kind)`` assembles one environment, its tables with the claim indexes of one deployed shape
(``shape``: template.yaml's ``ClaimShape``, ``ports.DEPLOYED_INDEXES``; legacy by default) and its
services wired with it, as runtime/wiring.py wires them from ``CLAIM_SHAPE``:

- ``memory``: MemoryStore + MemoryWorkQueue (SQS semantics on the manual clock);
- ``dynamodb``: DynamoStore + SqsWorkQueue on in-process moto (``mock_aws`` + ``provision``);
- ``server``: the same on a local moto *server* whose DynamoDB requests are serialised
  (``jobsched_tools.emulator.local_moto``), the only moto setup under which racing conditional writes
  are atomic, as on DynamoDB. Use it for every test with threads or processes.

Time is the manual clock's everywhere. SQS delays and visibility timeouts run on real time in
moto, so on the SQS side the queue records each requested delay and sends with none: a test
reads what the services asked SQS for (``env.sent``) and receives at once, moving the manual
clock itself. Tests with a staged-effects table use ``EFFECTS`` (key ``pk``).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import boto3
from jobsched.adapters.dynamodb_store import DynamoStore
from jobsched.adapters.sqs_queue import SqsWorkQueue
from jobsched.core.claim_shape import CLAIM_SHAPE_ATTRIBUTE, ClaimShape, DeployedShape
from jobsched.core.clock import ManualClock, Waiter
from jobsched.core.config import SchedulerConfig
from jobsched.core.job import JobDefinition
from jobsched.core.run import run_key
from jobsched.core.state import registered_state
from jobsched.core.transitions.bookkeeping import BOOKKEEPING_KEY, bookkeeping_op
from jobsched.core.writes import JOBS, RUNS, STATE
from jobsched.ports import DEPLOYED_INDEXES, OutgoingMessage, SendResult, Store, WorkQueue
from jobsched.services.detector import MissDetector
from jobsched.services.messages import parse_run_message
from jobsched.services.operations import Operations
from jobsched.services.registrar import Registrar
from jobsched.services.trigger import Trigger
from jobsched.services.worker import Outcome, Worker
from jobsched.targets.registry import HandlerRegistry
from jobsched_tools.deployment import AllowListValues
from jobsched_tools.emulator.claim_indexes import deploy_claim_indexes
from jobsched_tools.emulator.local_moto import LocalMoto
from jobsched_tools.emulator.provision import provision
from jobsched_tools.fakes.memory_queue import MemoryWorkQueue
from jobsched_tools.fakes.memory_store import MemoryStore
from jobsched_tools.fakes.memory_telemetry import MemoryTelemetry
from moto import mock_aws

EFFECTS = "effects"
# 2026-12-01T00:00:00Z: a whole minute, so per-minute schedules fall on round offsets.
T0 = 1_796_083_200_000
MINUTE = 60_000
KINDS = ("memory", "dynamodb")


class RecordingQueue:
    """A WorkQueue that records what was asked of it. ``zero_delay`` sends with no delay (SQS
    delays are real time in moto; the test moves the manual clock instead)."""

    def __init__(self, inner: WorkQueue, zero_delay: bool) -> None:
        self.inner = inner
        self.zero_delay = zero_delay
        self.sent: list[OutgoingMessage] = []

    def send(self, messages: Sequence[OutgoingMessage]) -> SendResult:
        forwarded = [replace(m, delay_seconds=0) for m in messages] if self.zero_delay else list(messages)
        by_id = {m.id: m for m in messages}
        result = self.inner.send(forwarded)
        failed = {m.id for m in result.failed}
        self.sent += [m for m in messages if m.id not in failed]
        return SendResult(failed=[by_id[m.id] for m in result.failed])


@dataclass
class Env:
    kind: str
    clock: ManualClock
    store: Store
    queue: RecordingQueue
    telemetry: MemoryTelemetry
    cfg: SchedulerConfig
    registry: HandlerRegistry = field(default_factory=HandlerRegistry)
    memory_queue: MemoryWorkQueue | None = None
    sqs: Any = None
    queue_url: str = ""
    dynamodb: Any = None
    # The stack's claim indexes (template.yaml's ClaimShape): the tables have them, and every
    # service is wired with it.
    shape: DeployedShape = DeployedShape.LEGACY
    tables: dict[str, str] = field(default_factory=dict)  # moto: each logical table's name

    # --- services ----------------------------------------------------------------------------
    # Each wired on this environment; ``options`` are the service's own keyword arguments (a
    # dead-letter sender, a registrar for the reconcile pass, ...).

    def ops(self) -> Operations:
        return Operations(self.store, self.queue, self.telemetry, self.clock, self.cfg, deployed=self.shape)

    def trigger(self) -> Trigger:
        return Trigger(
            self.store,
            self.queue,
            self.telemetry,
            self.clock,
            self.cfg,
            parallel_queries=False,
            deployed=self.shape,  # as the trigger function wires it (runtime/wiring.py)
        )

    def detector(self, **options: Any) -> MissDetector:
        return MissDetector(
            self.store,
            self.queue,
            self.telemetry,
            self.clock,
            self.cfg,
            parallel_queries=False,
            **{"deployed": self.shape, **options},
        )

    def registrar(self, **options: Any) -> Registrar:
        options = {"deployed": self.shape, **options}
        return Registrar(self.store, self.telemetry, self.clock, self.cfg, self.queue, **options)

    def redeploy(self, shape: DeployedShape | str) -> list[str]:
        """Deploy the stack again with ``ClaimShape`` = ``shape`` (moto: its indexes created and
        deleted as CloudFormation would, one UpdateTable each; the services wired with it from
        then on). The memory kind's store is rebuilt with the same items and the new indexes."""
        self.shape = DeployedShape(shape)
        if isinstance(self.store, MemoryStore):
            before = self.store
            after = MemoryStore(extra_keys={EFFECTS: ("pk",)}, indexes=DEPLOYED_INDEXES[self.shape.value])
            after.tables = before.tables
            self.store = after
            return []
        return deploy_claim_indexes(self.dynamodb, self.tables, self.shape)

    def claiming_registrar(self, **options: Any) -> Registrar:
        """The registrar as the registrar function wires it (runtime/wiring.py): it claims a job's
        first occurrences at once, through the trigger's own claim."""
        trigger = self.trigger()
        return self.registrar(claim_now=lambda job_id: trigger.claim_now(job_id, "registrar"), **options)

    def worker(self, worker_id: str = "w1", waiter: Waiter | None = None, **options: Any) -> Worker:
        return Worker(
            self.store,
            self.queue,
            self.telemetry,
            self.clock,
            self.cfg,
            self.registry,
            worker_id,
            waiter=waiter,
            **{"logger_for": logging.getLogger, **options},
        )

    # --- the queue's consumer side -----------------------------------------------------------

    def receive(self, max_n: int = 10) -> list[tuple[str, dict[str, Any]]]:
        if self.memory_queue is not None:
            return self.memory_queue.receive(max_n)
        response = self.sqs.receive_message(
            QueueUrl=self.queue_url, MaxNumberOfMessages=min(10, max_n), VisibilityTimeout=600
        )
        return [(m["ReceiptHandle"], json.loads(m["Body"])) for m in response.get("Messages", [])]

    def delete(self, receipt: str) -> None:
        if self.memory_queue is not None:
            self.memory_queue.delete(receipt)
        else:
            self.sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=receipt)

    def receive_all(self) -> list[dict[str, Any]]:
        """Every visible message, deleted from the queue (bodies)."""
        bodies: list[dict[str, Any]] = []
        while True:
            batch = self.receive(10)
            if not batch:
                return bodies
            for receipt, body in batch:
                self.delete(receipt)
                bodies.append(body)

    def drain(self, worker: Worker, rounds: int = 1) -> list[Outcome]:
        """Process every visible message, as a Lambda would (deleting what it acknowledged)."""
        outcomes: list[Outcome] = []
        for _ in range(rounds):
            for body in self.receive_all():
                outcomes.append(worker.process(parse_run_message(body), self.clock.now_ms() + 900_000))
        return outcomes

    # --- reads -------------------------------------------------------------------------------

    def job(self, job_id: str) -> dict[str, Any]:
        """The job as `jobsched show` sees it: the job item with its state item merged in."""
        item = self.store.get(JOBS, {"job_id": job_id})
        state = self.store.get(STATE, {"job_id": job_id})
        assert item is not None or state is not None, job_id
        return {**(item or {}), **(state or {})}

    def state(self, job_id: str) -> dict[str, Any]:
        item = self.store.get(STATE, {"job_id": job_id})
        assert item is not None, job_id
        return item

    def job_item(self, job_id: str) -> dict[str, Any] | None:
        return self.store.get(JOBS, {"job_id": job_id})

    def run(self, run_id: str) -> dict[str, Any]:
        item = self.store.get(RUNS, run_key(run_id))
        assert item is not None, run_id
        return item

    def runs_of(self, job_id: str) -> list[dict[str, Any]]:
        return self.ops().runs(job_id, limit=100_000)

    def effects(self) -> list[dict[str, Any]]:
        return scan_all(self.store, EFFECTS)


def scan_all(store: Store, table: str, page_size: int = 100) -> list[dict[str, Any]]:
    """Every item of ``table``, page by page."""
    items: list[dict[str, Any]] = []
    cursor = None
    while True:
        page = store.scan(table, page_size, cursor)
        items += page.items
        if page.cursor is None:
            return items
        cursor = page.cursor


def job(job_id: str = "j1", schedule: str = "rate(1 minute)", **fields: Any) -> JobDefinition:
    return JobDefinition(job_id=job_id, schedule=schedule, target=fields.pop("target", "t"), **fields)


def checking_operations(store: Store, allow: AllowListValues) -> Operations:
    """The Python API's Operations on a memory queue at T0, checking a job as a deployed stack's
    does (jobsched_tools.api): its target among the handlers ``log`` and ``sqs_send``, its
    destination and its dead-letter queue against the stack's allow-lists ``allow``."""
    return Operations(
        store,
        MemoryWorkQueue(ManualClock(T0)),
        MemoryTelemetry(),
        ManualClock(T0),
        SchedulerConfig(),
        known_targets={"log", "sqs_send"},
        allow_lists=allow,
    )


def default_cfg(**overrides: Any) -> SchedulerConfig:
    # Two shards keep moto's scanning GSI queries few yet exercise the merge;
    # heartbeat 1 s keeps execute()'s real-time wait short.
    values: dict[str, Any] = {"shard_count": 2, "lease_seconds": 30, "heartbeat_seconds": 1}
    values.update(overrides)
    return SchedulerConfig(**values)


def create_effects_table(dynamodb: Any) -> None:
    dynamodb.create_table(
        TableName=EFFECTS,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )


def aws_env(
    dynamodb: Any,
    sqs: Any,
    clock: ManualClock,
    cfg: SchedulerConfig,
    kind: str,
    shape: DeployedShape = DeployedShape.LEGACY,
) -> Env:
    resources = provision(dynamodb, sqs, prefix="t")
    tables = {"state": resources.state_table, "runs": resources.runs_table}
    deploy_claim_indexes(dynamodb, tables, shape)  # whatever the template's default gave
    create_effects_table(dynamodb)
    store = DynamoStore(
        dynamodb,
        resources.jobs_table,
        resources.state_table,
        resources.runs_table,
        table_keys={EFFECTS: ("pk",)},
    )
    queue = RecordingQueue(SqsWorkQueue(sqs, resources.work_queue_url), zero_delay=True)
    return Env(
        kind,
        clock,
        store,
        queue,
        MemoryTelemetry(),
        cfg,
        sqs=sqs,
        queue_url=resources.work_queue_url,
        dynamodb=dynamodb,
        shape=shape,
        tables=tables,
    )


@contextmanager
def build(
    kind: str,
    cfg: SchedulerConfig | None = None,
    moto: LocalMoto | None = None,
    start_ms: int = T0,
    successor: bool = False,
    shape: DeployedShape | str | None = None,
) -> Iterator[Env]:
    """``shape``: the stack's deployed claim indexes (template.yaml's ``ClaimShape``; legacy by
    default). ``successor``: a stack migrating to the successor claim (issue 37): deployed
    ``migrating`` (the runs table has ``due`` beside ``next-run`` and ``lease``) with the migration
    switch on (``switch_to_successor``)."""
    clock = ManualClock(start_ms)
    cfg = cfg or default_cfg()
    if shape is None:
        shape = DeployedShape.MIGRATING if successor else DeployedShape.LEGACY
    shape = DeployedShape(shape)
    if kind == "memory":
        memory_queue = MemoryWorkQueue(clock, visibility_timeout_seconds=900)
        store = MemoryStore(extra_keys={EFFECTS: ("pk",)}, indexes=DEPLOYED_INDEXES[shape.value])
        queue = RecordingQueue(memory_queue, zero_delay=False)
        built = Env(kind, clock, store, queue, MemoryTelemetry(), cfg, memory_queue=memory_queue, shape=shape)
        yield switch_to_successor(built) if successor else built
    elif kind == "dynamodb":
        with mock_aws():
            dynamodb = boto3.client("dynamodb", region_name="us-east-1")
            sqs = boto3.client("sqs", region_name="us-east-1")
            built = aws_env(dynamodb, sqs, clock, cfg, kind, shape)
            yield switch_to_successor(built) if successor else built
    elif kind == "server":
        assert moto is not None, "the server kind needs a running LocalMoto"
        moto.reset()
        built = aws_env(*server_clients(moto.endpoint_url), clock, cfg, kind, shape)
        yield switch_to_successor(built) if successor else built
    else:
        raise ValueError(kind)


def switch_to_successor(env: Env) -> Env:
    """Turn the stack's migration switch on (core/claim_shape.py): the ``claim_shape`` attribute
    of the detector's bookkeeping item, written as the detector writes that item."""
    current = env.store.get(STATE, dict(BOOKKEEPING_KEY))
    env.store.write(
        [bookkeeping_op(current, {CLAIM_SHAPE_ATTRIBUTE: ClaimShape.SUCCESSOR.value}, (), env.clock.now_ms())]
    )
    return env


def server_clients(endpoint_url: str) -> tuple[Any, Any]:
    from botocore.config import Config

    config = Config(max_pool_connections=32, retries={"mode": "standard", "max_attempts": 4})
    session = boto3.session.Session()
    dynamodb = session.client("dynamodb", endpoint_url=endpoint_url, region_name="us-east-1", config=config)
    sqs = session.client("sqs", endpoint_url=endpoint_url, region_name="us-east-1", config=config)
    return dynamodb, sqs


def register_raw(env: Env, item: dict[str, Any]) -> None:
    """Put a job item as a person would (no scheduler state) and let the registrar apply it."""
    from jobsched.core.writes import Put

    env.store.write([Put(JOBS, item, condition=(), label="person puts job")])
    env.registrar().apply(str(item["job_id"]))


# --- the multi-process trigger race (top level, so ``spawn`` children can import it) ---------


def tick_in_process(
    endpoint_url: str, jobs_table: str, state_table: str, runs_table: str, now_ms: int, name: str
) -> list[str]:
    """Run one trigger tick against a moto server in this (child) process; return the run ids it
    claimed."""
    import os

    from jobsched_tools.emulator.credentials import DUMMY_AWS_ENV

    os.environ.update(DUMMY_AWS_ENV)
    dynamodb, _ = server_clients(endpoint_url)
    store = DynamoStore(dynamodb, jobs_table, state_table, runs_table)
    telemetry = MemoryTelemetry()

    class NullQueue:
        def send(self, _messages: Sequence[OutgoingMessage]) -> SendResult:
            return SendResult()

    trigger = Trigger(
        store, NullQueue(), telemetry, ManualClock(now_ms), default_cfg(), parallel_queries=False
    )
    trigger.tick(name)
    return [e.correlation_id for e in telemetry.named("run.claimed")]


def seed_active(env: Env, definition: JobDefinition, next_run_at: int, **state: Any) -> dict[str, Any]:
    """Write a job item and its state item as the registrar leaves them (active, in the next-run
    index), skipping the registrar's reads and writes: fast seeding for tests with many jobs.
    ``state`` overrides attributes of the state item. Returns the state item."""
    from jobsched.core.writes import Put

    item = {**definition.to_item(), "status": "active", "def_hash": definition.definition_hash()}
    seeded = {**registered_state(definition, next_run_at, env.cfg.shard_count, env.clock.now_ms()), **state}
    env.store.write([Put(JOBS, item, condition=(), label="seed job")])
    env.store.write([Put(STATE, seeded, condition=(), label="seed state")])
    return seeded


class Counter:
    """A handler that counts its calls per run id (the 'effect' an exactly-once test counts)."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, ctx: Any) -> dict[str, Any]:
        with self._lock:
            self.calls.append(ctx.run_id)
        return {"ok": True}

    def count(self, run_id: str) -> int:
        return self.calls.count(run_id)


class ClaimerDies(BaseException):
    """The trigger's process dies: not an exception any code handles (per-job isolation catches
    those)."""


class DiesAfterClaim:
    """The environment's store, through which the trigger's process dies right after a claim's
    transaction (the run and the job's advance) lands, before the run is sent."""

    def __init__(self, env: Env) -> None:
        self.env = env

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env.store, name)

    def write(self, ops: Sequence[Any]) -> None:
        self.env.store.write(ops)
        if any(op.label == "create run" for op in ops):
            raise ClaimerDies
