"""Client CPU per dispatched run, and what it costs as Lambda compute (issue 18, part 2).

The moto servers run in their own processes (``stack.Servers``), so ``time.process_time`` in this
process counts only the client: the trigger's own work, botocore's serialising, signing and
parsing, the claimers' and senders' threads (process time sums every thread). Nothing else runs in
this process while a measurement is taken (no drainer thread; the queue is left to fill).

- ``trigger_cpu_ms_per_run``: one real ``Trigger.tick`` over ``runs`` due jobs (query, claim: two
  conditional writes, send), with the telemetry the Lambda uses (Powertools' JSON log lines, written
  to a null stream), CPU divided by the runs dispatched.
- ``bare_write_cpu_ms``: one bare conditional ``PutItem`` through the same kind of client, in the
  same run: the unit botocore charges per request.
- ``worker_cpu_ms_per_run``: the worker's start and commit of those runs (the handler is a no-op;
  receiving and deleting is the event source mapping's work, not the function's).

Pricing (``lambda_compute``): Lambda bills the wall time of an invocation at its memory. A Python
process gets ``memory / 1,769 MB`` of a vCPU (one vCPU at 1,769 MB; the GIL keeps one process on
one core above that), so CPU-bound work of ``c`` ms takes ``c / vcpu`` ms of billed time. The
worker's billed time per run adds its wait for the exact second (``worker_wait_s_per_batch``, see
services/worker.py) and its two in-region write latencies, per batch. CPU here is this machine's,
not a Graviton core's: the figure is an estimate of the order, said as such in docs/benchmarks.md.
"""

from __future__ import annotations

import io
import logging
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger
from jobsched.core.claim_shape import DeployedShape
from jobsched.core.config import SchedulerConfig
from jobsched.core.run import RunMessage
from jobsched.runtime.clock import SystemClock
from jobsched.runtime.telemetry import PowertoolsTelemetry
from jobsched.services.messages import parse_run_message
from jobsched.services.trigger import Trigger
from jobsched.services.worker import HandlerResult, Started, Worker
from jobsched.targets.registry import HandlerRegistry, RunLogger

if TYPE_CHECKING:
    from jobsched_tools.bench.stack import Servers

# Lambda: one vCPU at 1,769 MB, proportional below (docs.aws.amazon.com/lambda/latest/dg/
# configuration-memory.html); a Python process with the GIL uses about one core above it.
MB_PER_VCPU = 1_769
# A function's MemorySize when the template gives it no parameter of its own (Globals), and the
# worker's batch (WorkerBatchSize).
FUNCTION_MEMORY_MB = 512
WORKER_BATCH = 10


def template_memory_mb(parameter: str) -> int:
    """The default of a function's memory parameter (TriggerMemorySize, WorkerMemorySize)."""
    from jobsched_tools.bench import scale

    spec = scale.load_template()["Parameters"].get(parameter)
    return int(spec["Default"]) if spec else FUNCTION_MEMORY_MB


# In-region DynamoDB single-write latency assumed (scripts/scale_model.py uses the same figure).
WRITE_LATENCY_S = 0.006
# The worker's mean wait per batch for the exact second, before issue 18 part 4 (SQS delays are
# rounded down to whole seconds; a message arrives up to a second early, on average half).
WORKER_WAIT_S_PER_BATCH_FLOOR = 0.5


def vcpu(memory_mb: int) -> float:
    """The share of a core one Python process gets at ``memory_mb``."""
    return min(1.0, memory_mb / MB_PER_VCPU)


@dataclass(frozen=True)
class CpuFigures:
    runs: int
    dispatched: int
    trigger_cpu_ms_per_run: float
    trigger_wall_ms_per_run: float
    bare_write_cpu_ms: float
    worker_cpu_ms_per_run: float

    def as_json(self) -> dict[str, Any]:
        return {
            name: round(value, 4) if isinstance(value, float) else value
            for name, value in self.__dict__.items()
        }


def _quiet_telemetry() -> PowertoolsTelemetry:
    """What the Lambda logs, through Powertools, into a null stream: its cost is in the figure."""
    logger = Logger(
        service=f"jobsched-bench-{uuid.uuid4().hex[:6]}", logger_handler=logging.StreamHandler(io.StringIO())
    )
    return PowertoolsTelemetry(logger, None)


def _noop_logger(run_id: str) -> RunLogger:
    return logging.getLogger(f"jobsched_tools.bench.cpu.{run_id}")  # type: ignore[return-value]


def measure(
    moto: Servers,
    runs: int = 400,
    bare_writes: int = 200,
    cfg: SchedulerConfig | None = None,
    shape: DeployedShape = DeployedShape.LEGACY,
) -> CpuFigures:
    """``shape``: the claim indexes of the tables, and the claim made (a successor stack's jobs
    are seeded as heads, its trigger claims each with a put of the next head)."""
    from jobsched_tools.bench.stack import NOOP, BenchStack, now_ms, registered_head, scheduled_job

    cfg = cfg or SchedulerConfig(shard_count=8, max_claims_per_tick=1_000_000)
    stack = BenchStack(moto, "cpu", shape=shape)
    if shape is DeployedShape.SUCCESSOR:
        now = now_ms()
        due = (now // 1000 + 2) * 1000  # a whole second ahead: the heads' instant
        stack.put_heads([registered_head(f"p{i:06d}", due, now, cfg) for i in range(runs)], now, cfg)
    else:
        due = now_ms() + 500
        stack.put_jobs([scheduled_job(f"p{i:06d}", due + i % 100, cfg, at=False) for i in range(runs)])
    trigger = Trigger(stack.store, stack.queue, _quiet_telemetry(), SystemClock(), cfg, deployed=shape)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    result = trigger.tick("bench-cpu")
    trigger_cpu, trigger_wall = time.process_time() - cpu0, time.perf_counter() - wall0
    dispatched = max(1, result.dispatched)

    table = stack.res.jobs_table
    cpu0 = time.process_time()
    for index in range(bare_writes):
        stack.ddb.put_item(
            TableName=table,
            Item={"job_id": {"S": f"bare{index:06d}"}, "version": {"N": "0"}},
            ConditionExpression="attribute_not_exists(job_id)",
        )
    bare_cpu = time.process_time() - cpu0

    registry = HandlerRegistry()
    registry.add(NOOP, lambda _ctx: None)
    worker = Worker(
        stack.store,
        stack.queue,
        _quiet_telemetry(),
        SystemClock(),
        cfg,
        registry,
        "cpu",
        logger_for=_noop_logger,
    )
    messages: list[RunMessage] = []
    deadline = time.monotonic() + 60
    while len(messages) < result.dispatched and time.monotonic() < deadline:
        got = stack.sqs.receive_message(
            QueueUrl=stack.res.work_queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=1
        )
        messages += [parse_run_message(m["Body"]) for m in got.get("Messages", [])]
    while now_ms() < due + 200:  # every run due: the worker does not wait (its wait is priced apart)
        time.sleep(0.05)
    cpu0 = time.process_time()
    for message in messages:
        begun = worker.begin(message, now_ms() + 60_000)
        if isinstance(begun, Started):
            worker.finish(begun, HandlerResult(True))
    worker_cpu = time.process_time() - cpu0
    return CpuFigures(
        runs=runs,
        dispatched=result.dispatched,
        trigger_cpu_ms_per_run=trigger_cpu * 1000 / dispatched,
        trigger_wall_ms_per_run=trigger_wall * 1000 / dispatched,
        bare_write_cpu_ms=bare_cpu * 1000 / bare_writes,
        worker_cpu_ms_per_run=worker_cpu * 1000 / max(1, len(messages)),
    )


def lambda_compute(
    figures: CpuFigures,
    prices: dict[str, dict[str, Any]],
    worker_wait_s_per_batch: float,
    trigger_memory_mb: int = FUNCTION_MEMORY_MB,
    worker_memory_mb: int = FUNCTION_MEMORY_MB,
    batch: int = WORKER_BATCH,
) -> dict[str, float]:
    """Lambda compute (GB-seconds at each function's memory, arm64) per million runs."""
    usd_per_gb_s = float(prices["lambda"]["arm64_gb_second_usd"])
    trigger_s = figures.trigger_cpu_ms_per_run / 1000 / vcpu(trigger_memory_mb)
    worker_batch_s = (
        worker_wait_s_per_batch
        + 2 * WRITE_LATENCY_S
        + batch * figures.worker_cpu_ms_per_run / 1000 / vcpu(worker_memory_mb)
    )
    worker_s = worker_batch_s / batch
    return {
        "trigger_billed_ms_per_run": round(trigger_s * 1000, 4),
        "worker_billed_ms_per_run": round(worker_s * 1000, 4),
        "lambda_compute_trigger": round(trigger_s * trigger_memory_mb / 1024 * usd_per_gb_s * 1e6, 4),
        "lambda_compute_worker": round(worker_s * worker_memory_mb / 1024 * usd_per_gb_s * 1e6, 4),
    }


def batching_tradeoff(
    figures: CpuFigures, prices: dict[str, dict[str, Any]], memory_mb: int = FUNCTION_MEMORY_MB
) -> dict[str, float]:
    """What claiming in transactions would save and cost, per million runs: a claim is two
    requests today; in a 20-item transaction (10 claims) botocore's per-request cost is paid once
    for ten, so about (2 - 0.1) bare writes of CPU are saved per run, while every item written in a
    transaction costs two write units instead of one (the claim writes the run and the state item:
    at least two more units per run)."""
    saved_cpu_ms = 1.9 * figures.bare_write_cpu_ms
    gb = memory_mb / 1024
    saved_usd = (
        saved_cpu_ms / 1000 / vcpu(memory_mb) * gb * float(prices["lambda"]["arm64_gb_second_usd"]) * 1e6
    )
    extra_units = 2.0
    cost_usd = extra_units * float(prices["dynamodb"]["write_request_unit_usd_per_million"])
    return {
        "cpu_ms_saved_per_run": round(saved_cpu_ms, 3),
        "usd_saved_per_million_runs": round(saved_usd, 4),
        "write_units_added_per_run": extra_units,
        "usd_added_per_million_runs": round(cost_usd, 4),
    }


def bench_keys(
    figures: CpuFigures, cost: dict[str, float], prices: dict[str, dict[str, Any]], read_units_per_run: float
) -> tuple[dict[str, float], dict[str, Any]]:
    """``cost`` with the trigger's and the worker's Lambda compute added (and its total), and the
    bench JSON's CPU, compute, worker-wait, batching and scale-model keys."""
    from jobsched_tools.bench import scale, worker_wait

    wait = worker_wait.measure()
    worker_mb = template_memory_mb("WorkerMemorySize")
    compute = lambda_compute(
        figures, prices, wait["worker_wait_s_per_batch"], template_memory_mb("TriggerMemorySize"), worker_mb
    )
    parts = {k: v for k, v in cost.items() if k != "total"}
    parts["lambda_compute_trigger"] = compute["lambda_compute_trigger"]
    parts["lambda_compute_worker"] = compute["lambda_compute_worker"]
    priced = parts | {"total": round(sum(parts.values()), 4)}
    extra: dict[str, Any] = {
        **figures.as_json(),
        **{k: v for k, v in compute.items() if k.endswith("_ms_per_run")},
        **wait,
        "worker_wait_usd_per_million_runs": worker_wait.priced(
            wait["worker_wait_s_per_batch"], prices, worker_mb, WORKER_BATCH
        ),
        "worker_wait_usd_per_million_runs_round_down": worker_wait.priced(
            WORKER_WAIT_S_PER_BATCH_FLOOR, prices, worker_mb, WORKER_BATCH
        ),
        "batching_claims_into_transactions": batching_tradeoff(figures, prices),
        **scale.bench_keys(figures.as_json(), read_units_per_run),
    }
    return priced, extra
