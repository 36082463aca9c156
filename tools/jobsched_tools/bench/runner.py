"""``jobsched bench``: throughput, exact request counts, cost, start lag and crash recovery on the
local stack (a moto server with serialised DynamoDB), in one run.

Phases, each on its own freshly provisioned tables and queue so that none slows another (moto's
GSI queries scan the whole table and its SQS slows with depth):

1. raw: bare conditional ``UpdateItem``s on one item, one client, sequential;
2. dispatch: N jobs due in the window, one timed ``Trigger.tick`` (a purger keeps the queue shallow),
   then the same N claim transactions alone, from as many threads (the claim's own ceiling);
3. counts: full runs (claim, dispatch, start, complete) with a ``RequestCounter`` on every client,
   the worker fed the way the Lambda event source mapping does it (receive 10, process, delete batch);
4. lag (real time): a trigger thread ticking with lookahead, a detector thread sweeping as the
   Lambda does, worker pollers; the start lag of occurrences spread over ``lag_seconds``;
5. recovery (real time, the same threads on fresh tables): injected crashes (a worker starts a
   run and vanishes holding its lease) and the time until each occurrence runs again.
"""

from __future__ import annotations

import logging
import statistics
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, cast

from jobsched.adapters.aws import RequestCounter
from jobsched.core.clock import dt_to_ms, ms_to_dt
from jobsched.core.config import SchedulerConfig
from jobsched.core.job import JobDefinition
from jobsched.core.limits import item_size
from jobsched.core.run import RunKind, run_id_for
from jobsched.core.state import state_schedule
from jobsched.core.transitions import claim_ops, new_run_item
from jobsched.core.writes import STATE
from jobsched.runtime.clock import SystemClock
from jobsched.services.detector import MissDetector
from jobsched.services.messages import parse_run_message
from jobsched.services.trigger import Trigger
from jobsched.services.worker import Started, Worker
from jobsched.targets.registry import HandlerRegistry, RunContext, RunLogger

from jobsched_tools.bench import (
    baseline,
    cold_import,
    cpu,
    fanout,
    first_lag,
    idle,
    memory,
    read_units,
    units,
    write_units,
)
from jobsched_tools.bench.stack import (
    CRASH,
    NOOP,
    BenchSettings,
    BenchStack,
    Servers,
    bench_config,
    draining,
    now_ms,
    percentile,
    scheduled_job,
)
from jobsched_tools.emulator.local_moto import start_moto_process
from jobsched_tools.fakes.memory_telemetry import MemoryTelemetry

# The policy a job gets when it names none: the cost a user meets by default.
DEFAULT_OVERLAP = JobDefinition.model_fields["overlap"].default.value

if TYPE_CHECKING:
    pass

ESM_BATCH = 10
DDB_WRITES = frozenset(
    f"dynamodb:{op}" for op in ("PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem")
)
DDB_READS = frozenset(
    f"dynamodb:{op}" for op in ("GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems")
)

TARGETS = {
    "dispatch_efficiency": ">= 0.8",
    "ddb_write_requests_per_run": "<= 3 (jobs finishing within one lease)",
    "usd_per_million_runs": "<= 6.00 on-demand (issue 37)",
    "usd_per_million_runs_provisioned": "<= 2.45 at 70% utilisation (the baseline, on-demand)",
    "lag_ms_p99": "<= 1000",
    "recovery_s_max": "<= lease + detector period",
    "recovery_s_p50": "<= 1.5 x lease",
    "idle_usd_per_month": "<= 2 (a stack with no jobs, at the template's defaults)",
    "idle_usd_per_month_all_in": "<= 5 (the same, with its alarms, dashboard and custom metrics)",
}


def _registry() -> HandlerRegistry:
    registry = HandlerRegistry()

    def noop(_context: RunContext) -> None:
        return None

    registry.add(NOOP, noop)
    registry.add(CRASH, noop)
    return registry


def _run_logger(run_id: str) -> RunLogger:
    return cast(RunLogger, logging.getLogger(f"jobsched_tools.bench.{run_id}"))


def _worker(stack: BenchStack, cfg: SchedulerConfig, name: str) -> Worker:
    def sleep(ms: int) -> None:
        time.sleep(ms / 1000)

    return Worker(
        stack.store,
        stack.queue,
        MemoryTelemetry(),
        SystemClock(),
        cfg,
        _registry(),
        name,
        logger_for=_run_logger,
        sleep_ms=sleep,
    )


# --- phase 1 ------------------------------------------------------------------------------------


def measure_raw(moto: Servers, n: int) -> float:
    stack = BenchStack(moto, "raw")
    table = stack.res.jobs_table
    stack.ddb.put_item(TableName=table, Item={"job_id": {"S": "raw"}, "version": {"N": "0"}})
    started = time.perf_counter()
    for version in range(n):
        stack.ddb.update_item(
            TableName=table,
            Key={"job_id": {"S": "raw"}},
            UpdateExpression="SET #v = :n",
            ConditionExpression="#v = :v",
            ExpressionAttributeNames={"#v": "version"},
            ExpressionAttributeValues={":v": {"N": str(version)}, ":n": {"N": str(version + 1)}},
        )
    return n / (time.perf_counter() - started)


# --- phase 2 ------------------------------------------------------------------------------------


def measure_dispatch(moto: Servers, settings: BenchSettings, cfg: SchedulerConfig) -> dict[str, Any]:
    stack = BenchStack(moto, "dispatch")
    # Due within the second: sent without delay, so the drainer keeps the queue shallow.
    due = now_ms() + 500
    stack.put_jobs(
        [scheduled_job(f"d{i:06d}", due + i % 100, cfg, at=False) for i in range(settings.dispatch_runs)]
    )
    trigger = Trigger(stack.store, stack.queue, MemoryTelemetry(), SystemClock(), cfg)
    with draining(stack):
        started = time.perf_counter()
        result = trigger.tick("bench-dispatch")
        elapsed = time.perf_counter() - started
    return {
        "claimed": result.claimed,
        "dispatched": result.dispatched,
        "seconds": round(elapsed, 3),
        "runs_per_s": result.dispatched / elapsed if elapsed else 0.0,
    }


def _prepared_claims(stack: BenchStack, n: int, cfg: SchedulerConfig) -> list[list[Any]]:
    """``n`` due jobs on ``stack``, and the claim of each as the trigger makes it (``claim_ops``)."""
    due = now_ms() + 500
    items = [scheduled_job(f"c{i:06d}", due + i % 100, cfg, at=False) for i in range(n)]
    stack.put_jobs(items)
    now = now_ms()
    prepared = []
    for item, state in items:
        definition = JobDefinition.from_item(item)
        occurrence = int(state["next_run_at"])
        following = state_schedule(state).next_after(ms_to_dt(occurrence))
        next_occurrence = dt_to_ms(following) if following is not None else None
        run_id = run_id_for(item["job_id"], occurrence)
        run = new_run_item(
            item["job_id"],
            run_id,
            occurrence,
            definition.to_item(),
            definition.definition_hash(),
            RunKind.SCHEDULED,
            now,
            cfg,
        )
        prepared.append(claim_ops(state, run, next_occurrence, now))
    return prepared


def measure_claim_ceiling(moto: Servers, n: int, cfg: SchedulerConfig) -> float:
    """The trigger's claim writes alone (one transaction: create the run, advance the job): ``n``
    claims prepared with the trigger's own ``claim_ops`` for ``n`` due jobs, sent from as
    many threads as the trigger claims with. The dispatch rate over this is what the trigger's
    own work (index reads, schedule maths, sends) costs; this over raw writes is what the server
    charges for a claim against a bare conditional update."""
    stack = BenchStack(moto, "ceiling")
    prepared = _prepared_claims(stack, n, cfg)
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=cfg.claim_concurrency) as claimers:

        def claim(writes: list[Any]) -> None:
            stack.store.write(writes)

        list(claimers.map(claim, prepared))
    return n / (time.perf_counter() - started)


def measure_claim_shapes(moto: Servers, n: int, cfg: SchedulerConfig) -> dict[str, float]:
    """Issue 25's trade, side by side on one server: the same ``n`` claims made as one
    transaction (the product) and as the two plain conditional writes it replaced (the run's
    put, then the state's update). Client CPU per claim (``process_time``: botocore's
    serialising, signing and parsing, which Lambda bills) and claims per second from one thread,
    so that the figures are the request's cost, not the server's contention."""
    figures: dict[str, float] = {}
    for shape in ("two_writes", "transaction"):
        stack = BenchStack(moto, f"shape-{shape.replace('_', '-')}")
        prepared = _prepared_claims(stack, n, cfg)
        cpu_started, wall_started = time.process_time(), time.perf_counter()
        for writes in prepared:
            if shape == "transaction":
                stack.store.write(writes)
            else:
                for write in writes:
                    stack.store.write([write])
        figures[f"claim_cpu_ms_{shape}"] = round((time.process_time() - cpu_started) * 1000 / n, 3)
        figures[f"claims_per_s_{shape}"] = round(n / (time.perf_counter() - wall_started), 1)
    figures["claim_cpu_transaction_vs_two_writes"] = round(
        figures["claim_cpu_ms_transaction"] / figures["claim_cpu_ms_two_writes"], 3
    )
    return figures


# --- phase 3 ------------------------------------------------------------------------------------


def _esm_drain(stack: BenchStack, worker: Worker, expected: int, timeout_s: float = 60.0) -> int:
    """Feed the worker as the event source mapping does: receive 10, process, delete the batch."""
    deadline = time.monotonic() + timeout_s
    while stack.visible() < expected and time.monotonic() < deadline:
        time.sleep(0.05)
    processed = 0
    while processed < expected and time.monotonic() < deadline:
        response = stack.sqs.receive_message(
            QueueUrl=stack.res.work_queue_url, MaxNumberOfMessages=ESM_BATCH, WaitTimeSeconds=1
        )
        messages = response.get("Messages", [])
        for message in messages:
            worker.process(parse_run_message(message["Body"]), now_ms() + 60_000)
        if messages:
            stack.sqs.delete_message_batch(
                QueueUrl=stack.res.work_queue_url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": message["ReceiptHandle"]}
                    for i, message in enumerate(messages)
                ],
            )
        processed += len(messages)
    return processed


def measure_counts(moto: Servers, n: int, overlap: str, cfg: SchedulerConfig) -> dict[str, Any]:
    counter = RequestCounter()
    stack = BenchStack(moto, f"counts-{overlap}", counter)
    due = now_ms() + 300
    stack.put_jobs([scheduled_job(f"c{i:05d}", due, cfg, overlap=overlap, at=False) for i in range(n)])
    trigger = Trigger(stack.store, stack.queue, MemoryTelemetry(), SystemClock(), cfg)
    counter.reset()
    tick = trigger.tick("bench-counts")
    query_calls = counter.calls.get("dynamodb:Query", 0)
    processed = _esm_drain(stack, _worker(stack, cfg, "counter"), tick.dispatched)
    snapshot = counter.snapshot()
    runs = stack.runs()
    succeeded = sum(1 for run in runs if run["status"] == "succeeded")
    calls = snapshot["calls"]
    writes = sum(v for k, v in calls.items() if k in DDB_WRITES)
    reads = sum(v for k, v in calls.items() if k in DDB_READS)
    sqs = sum(v for k, v in calls.items() if k.startswith("sqs:"))
    job = stack.admin_store.get(STATE, {"job_id": "c00000"}) or {}
    run = next((r for r in runs if r["job_id"] == "c00000"), {})
    job_size, run_size = item_size(job), item_size(run)
    # Write units are metered on the in-memory store with DynamoDB's capacity rules and the
    # template's indexes (fakes/metering.py), the services running the same runs on a manual clock.
    metered = write_units.measure(overlap, payload_bytes=0, runs=20, heartbeats=1)
    # The trigger's queries as this phase made them: each page returns the due job items of one
    # shard, and is charged at least half a unit, so at this phase's size the pages' minimum is
    # most of it. What a run reads is metered apart, every reader's request counted
    # (bench/read_units.py): that is what is priced.
    query_bytes = n * job_size
    page_units = (query_calls * units.query_read_units(query_bytes // max(1, query_calls))) / max(1, n)
    metered_reads = read_units.measure(overlap)
    per_run = max(1, succeeded)
    return {
        "overlap": overlap,
        "runs": n,
        "succeeded": succeeded,
        "processed_messages": processed,
        "requests": calls,
        "ddb_write_requests_per_run": writes / per_run,
        "ddb_read_requests_per_run": reads / per_run,
        "sqs_requests_per_run": sqs / per_run,
        "trigger_queries_per_tick": query_calls,
        "job_item_bytes": job_size,
        "run_item_bytes": run_size,
        "est_write_units_per_run": metered.write_units_per_run,
        "est_write_units_per_heartbeat": metered.write_units_per_heartbeat,
        "est_write_units_by_step": write_units.by_phase(metered),
        "est_write_units_by_operation": metered.by_step,
        "registrar_records_per_run": metered.registrar_records_per_run,
        "est_read_units_per_run": metered_reads.read_units_per_run,
        "est_read_units_by_reader": metered_reads.by_reader,
        "est_read_units_by_request": metered_reads.by_request,
        "est_read_units_page_floor_per_run": metered_reads.page_floor_units_per_run,
        "trigger_page_read_units_per_run_counted": round(page_units, 4),
        # One trigger invocation for the batch, one worker invocation per ESM batch of 10.
        "lambda_requests_per_run": 1 / per_run + 1 / ESM_BATCH,
    }


# --- phase 4 ------------------------------------------------------------------------------------


class _Live:
    """Trigger, detector and worker pollers running in threads against one stack, in real time."""

    def __init__(self, stack: BenchStack, cfg: SchedulerConfig, settings: BenchSettings) -> None:
        self.stack = stack
        self.cfg = cfg
        self.settings = settings
        self.stop = threading.Event()
        self.crashed: dict[str, int] = {}  # run id -> crash time (epoch ms)
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def _every(self, period_s: float, fn: Callable[[], Any], name: str) -> None:
        def loop() -> None:
            while not self.stop.is_set():
                began = time.monotonic()
                try:
                    fn()
                except Exception as exc:  # a benchmark reports, it does not stop
                    self.errors.append(f"{name}: {type(exc).__name__}: {exc}")
                self.stop.wait(max(0.0, period_s - (time.monotonic() - began)))

        self._threads.append(threading.Thread(target=loop, name=name, daemon=True))

    def _poller(self, index: int) -> Callable[[], None]:
        """One event source mapping poller feeding a worker that runs a batch's records
        concurrently, as the deployed worker does (WORKER_RECORD_CONCURRENCY, default 10): a
        batch's third record does not wait for the first two."""
        worker = _worker(self.stack, self.cfg, f"poller{index}")

        def handle(body: str) -> None:
            run_message = parse_run_message(body)
            if run_message.definition.get("target") == CRASH and run_message.attempt == 1:
                begun = worker.begin(run_message, now_ms() + 60_000)
                if isinstance(begun, Started):
                    with self._lock:
                        self.crashed[run_message.run_id] = now_ms()
                return  # the worker is gone: no heartbeat, no commit
            worker.process(run_message, now_ms() + 60_000)

        def poll() -> None:
            response = self.stack.sqs.receive_message(
                QueueUrl=self.stack.res.work_queue_url, MaxNumberOfMessages=ESM_BATCH, WaitTimeSeconds=1
            )
            messages = response.get("Messages", [])
            if not messages:
                return
            with ThreadPoolExecutor(max_workers=len(messages)) as records:
                for outcome in [records.submit(handle, message["Body"]) for message in messages]:
                    outcome.result()
            self.stack.sqs.delete_message_batch(
                QueueUrl=self.stack.res.work_queue_url,
                Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)],
            )

        return poll

    def start(self) -> None:
        clock = SystemClock()
        trigger = Trigger(self.stack.store, self.stack.queue, MemoryTelemetry(), clock, self.cfg)
        detector = MissDetector(self.stack.store, self.stack.queue, MemoryTelemetry(), clock, self.cfg)
        self._every(self.settings.tick_period_s, lambda: trigger.tick("live"), "bench-trigger")
        period_ms = int(self.settings.detector_period_s * 1000)

        def detect() -> None:
            # As the Lambda does: one invocation sweeps every period until its deadline and wakes
            # early for a lapsing lease; a stop ends the nap and, with it, the invocation.
            def nap(ms: int) -> None:
                self.stop.wait(ms / 1000)

            detector.sweep("live", clock.now_ms() + 60_000, period_ms, nap)

        self._every(self.settings.detector_period_s, detect, "bench-detector")
        for index in range(self.settings.pollers):
            self._every(0.0, self._poller(index), f"bench-poller{index}")
        for thread in self._threads:
            thread.start()

    def close(self) -> None:
        self.stop.set()
        for thread in self._threads:
            thread.join(timeout=10)


def _wait_until(done: Callable[[], bool], timeout_s: float, period_s: float = 0.5) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if done():
            return True
        time.sleep(period_s)
    return done()


def measure_live(moto: Servers, settings: BenchSettings, cfg: SchedulerConfig) -> dict[str, Any]:
    lag = measure_lag(moto, settings, cfg)
    recovery = measure_recovery(moto, settings, cfg)
    return {**lag, **recovery, "errors": (lag["errors"] + recovery["errors"])[:10]}


def measure_lag(moto: Servers, settings: BenchSettings, cfg: SchedulerConfig) -> dict[str, Any]:
    """Start lag of occurrences spread over ``lag_seconds``, on the live stack."""
    stack = BenchStack(moto, "lag")
    live = _Live(stack, cfg, settings)
    # Occurrences on whole seconds (at() has second precision), spread over the lag window.
    first = (now_ms() // 1000 + 3) * 1000
    count = max(1, int(settings.lag_seconds * settings.lag_occurrences_per_s))
    span_s = max(1, int(settings.lag_seconds))
    stack.put_jobs(
        [scheduled_job(f"lag{i:05d}", first + (i * span_s // count) * 1000, cfg) for i in range(count)]
    )
    live.start()
    try:

        def lag_done() -> bool:
            runs = stack.runs("lag")
            return len(runs) >= count and all("first_started_at" in r for r in runs)

        _wait_until(lag_done, settings.lag_seconds + 30)
        lag_runs = [r for r in stack.runs("lag") if "first_started_at" in r]
        lags = [int(r["first_started_at"]) - int(r["scheduled_at"]) for r in lag_runs]
    finally:
        live.close()
    return {"lag_occurrences": count, "lag_started": len(lags), "lag_ms": lags, "errors": live.errors}


def measure_recovery(moto: Servers, settings: BenchSettings, cfg: SchedulerConfig) -> dict[str, Any]:
    """Injected worker crashes holding a lease, and the time until each occurrence runs again.
    On its own tables: moto's index queries read the whole table, so the lag phase's runs would
    slow every detector sweep here (DynamoDB's read only what they return)."""
    stack = BenchStack(moto, "recovery")
    live = _Live(stack, cfg, settings)
    crash_first = (now_ms() // 1000 + 3) * 1000
    stack.put_jobs(
        [
            scheduled_job(f"crash{i:03d}", crash_first + (i % 4) * 1000, cfg, target=CRASH)
            for i in range(settings.crashes)
        ]
    )
    live.start()
    try:

        def recovered() -> list[dict[str, Any]]:
            return [
                r for r in stack.runs("crash") if int(r.get("attempt", 1)) >= 2 and r["status"] == "succeeded"
            ]

        _wait_until(
            lambda: len(recovered()) >= settings.crashes,
            timeout_s=10 + 4 * (settings.lease_seconds + settings.detector_period_s),
        )
        recoveries = []
        for run in recovered():
            crash_ms = live.crashed.get(run["run_id"])
            if crash_ms is not None:
                recoveries.append((int(run["started_at"]) - crash_ms) / 1000)
    finally:
        live.close()
    return {
        "crashes": len(live.crashed),
        "recovered": len(recoveries),
        "recovery_s": recoveries,
        "errors": live.errors,
    }


# --- the whole bench ----------------------------------------------------------------------------


def capacity_modes(
    default: dict[str, Any], on_demand: dict[str, float], prices: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """The same metered units priced with the tables provisioned at the price table's utilisation,
    beside on-demand, and the baseline (EventBridge Scheduler, a Lambda target and Powertools'
    idempotency table, its writes measured) priced both ways (issue 37)."""
    provisioned = units.usd_per_million_runs(
        units.CostInputs(
            write_units=default["est_write_units_per_run"],
            read_units=default["est_read_units_per_run"],
            sqs_requests=default["sqs_requests_per_run"],
            lambda_requests=default["lambda_requests_per_run"],
        ),
        prices,
        mode="provisioned",
    )
    parts = {k: v for k, v in provisioned.items() if k != "total"}
    parts |= {k: v for k, v in on_demand.items() if k.startswith("lambda_compute")}
    provisioned = parts | {"total": round(sum(parts.values()), 4)}
    measured = baseline.measure()
    baselines = {
        mode: baseline.usd_per_million_runs(measured, prices, *units.unit_prices(prices, mode))
        for mode in ("on_demand", "provisioned")
    }
    return {
        "usd_per_million_runs_provisioned": provisioned["total"],
        "usd_per_million_runs_provisioned_by_service": provisioned,
        "provisioned_utilization": float(prices["dynamodb_provisioned"]["utilization"]),
        "baseline_usd_per_million_runs": baselines["on_demand"]["total"],
        "baseline_usd_per_million_runs_provisioned": baselines["provisioned"]["total"],
        "baseline_by_service": baselines,
        "baseline_measured": measured,
        "baseline_description": str(prices["baseline"]["description"]),
    }


def run_bench(settings: BenchSettings, progress: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    cfg = bench_config(settings)
    prices, price_source = units.load_prices()
    progress("cold-start imports of the four functions")
    cold = cold_import.measure(settings.cold_import_runs)  # before the moto servers load the machine
    progress("lag at the deployed defaults (manual clock): first occurrences and steady ones")
    at_defaults = first_lag.measure()
    progress("peak memory of each function at its largest settings")
    peaks = memory.measure()
    progress("idle cost: each scheduled function's invocation on a stack with no jobs")
    idle_keys = idle.bench_keys(prices)
    # The servers run in their own processes, as real endpoints would: in this process they would
    # share the GIL with the trigger's claimers and the drainer, and measure their contention.
    moto = Servers(start_moto_process(fast_transactions=settings.fast_transactions), start_moto_process())
    try:
        # Raw writes are timed just before and just after the dispatch tick and averaged, so that
        # the efficiency ratio compares like with like on a machine whose load varies.
        progress("raw conditional writes")
        raw_before = measure_raw(moto, settings.raw_writes // 2)
        progress("trigger dispatch")
        dispatch = measure_dispatch(moto, settings, cfg)
        ceiling = measure_claim_ceiling(moto, settings.dispatch_runs, cfg)
        shapes = measure_claim_shapes(moto, min(settings.dispatch_runs, 300), cfg)
        raw_after = measure_raw(moto, settings.raw_writes - settings.raw_writes // 2)
        raw = (raw_before + raw_after) / 2
        progress("trigger fan-out: the dispatch phase with 1, 2 and 4 trigger processes")
        fanned = fanout.measure(moto, settings, cfg)
        progress("client CPU per dispatched run and per bare write")
        # At the run's own sizes: --quick and the smoke test used to time 400 runs and 200 bare
        # writes whatever they asked for (issue 35 item 15); the full bench's sizes are unchanged.
        cpu_figures = cpu.measure(
            moto, runs=min(400, settings.dispatch_runs), bare_writes=min(200, settings.raw_writes)
        )
        progress("request counts per run")
        counts = {
            overlap: measure_counts(moto, settings.count_runs, overlap, cfg) for overlap in ("allow", "skip")
        }
        progress(f"live stack: start lag over {settings.lag_seconds:.0f} s, then crash recovery")
        live = measure_live(moto, settings, cfg)
    finally:
        moto.stop()

    main = counts["allow"]
    default = counts[DEFAULT_OVERLAP]  # what a job gets when it names no policy
    cost = units.usd_per_million_runs(
        units.CostInputs(
            write_units=default["est_write_units_per_run"],
            read_units=default["est_read_units_per_run"],
            sqs_requests=default["sqs_requests_per_run"],
            lambda_requests=default["lambda_requests_per_run"],
        ),
        prices,
    )
    cost, cpu_keys = cpu.bench_keys(cpu_figures, cost, prices, default["est_read_units_per_run"])
    modes = capacity_modes(default, cost, prices)
    with_payload = write_units.measure("allow", payload_bytes=4096, runs=20, heartbeats=0)
    writes_per_dispatch = 1  # the claim: one TransactWriteItems (the run's put and the state's update)
    lags = [float(v) for v in live["lag_ms"]]
    recoveries = [float(v) for v in live["recovery_s"]]
    return {
        "raw_conditional_writes_per_s": round(raw, 1),
        "dispatch_runs_per_s": round(dispatch["runs_per_s"], 1),
        "dispatch_efficiency": round(dispatch["runs_per_s"] * writes_per_dispatch / raw, 3),
        # The efficiency split in two: the trigger against its own claim request at the same
        # concurrency, and that request against a bare conditional update on the same server.
        "claim_transactions_per_s": round(ceiling, 1),
        "dispatch_vs_claim_ceiling": round(dispatch["runs_per_s"] / ceiling, 3),
        "claim_vs_raw_write": round(ceiling * writes_per_dispatch / raw, 3),
        **shapes,
        "ddb_write_requests_per_run": round(main["ddb_write_requests_per_run"], 4),
        "ddb_read_requests_per_run": round(main["ddb_read_requests_per_run"], 4),
        "sqs_requests_per_run": round(main["sqs_requests_per_run"], 4),
        "est_write_units_per_run": main["est_write_units_per_run"],
        "est_write_units_per_run_skip": counts["skip"]["est_write_units_per_run"],
        "est_write_units_per_heartbeat": main["est_write_units_per_heartbeat"],
        "est_write_units_per_run_4k_payload": with_payload.write_units_per_run,
        "registrar_records_per_run": default["registrar_records_per_run"],
        # Every read a run makes at the default policy (skip's start reads the run before it), metered
        # by reader: what usd_per_million_runs prices, in both capacity modes.
        "est_read_units_per_run": default["est_read_units_per_run"],
        "est_read_units_per_run_by_reader": default["est_read_units_by_reader"],
        "est_read_units_per_run_allow": counts["allow"]["est_read_units_per_run"],
        # Each page's half-unit minimum beyond its entries, at the meter's 20 jobs: paid per tick and
        # sweep, not per run (the idle cost prices it); not in usd_per_million_runs.
        "est_read_units_per_run_page_floor": default["est_read_units_page_floor_per_run"],
        "lambda_requests_per_run": round(main["lambda_requests_per_run"], 4),
        "usd_per_million_runs": cost["total"],  # at the default overlap policy
        "usd_per_million_runs_policy": DEFAULT_OVERLAP,
        "usd_per_million_runs_by_service": cost,
        **modes,
        "lag_ms_p50": percentile(lags, 50),
        "lag_ms_p99": percentile(lags, 99),
        "lag_ms_max": max(lags) if lags else float("nan"),
        "recovery_s_p50": round(percentile(recoveries, 50), 3),
        "recovery_s_max": round(max(recoveries), 3) if recoveries else float("nan"),
        "by_overlap": {
            name: {k: v for k, v in figures.items() if k != "requests"} | {"requests": figures["requests"]}
            for name, figures in counts.items()
        },
        "counts": {
            "raw_writes": settings.raw_writes,
            "raw_writes_per_s_before_after": [round(raw_before, 1), round(raw_after, 1)],
            "dispatch": dispatch,
            "lag_occurrences": live["lag_occurrences"],
            "lag_started": live["lag_started"],
            "crashes": live["crashes"],
            "recovered": live["recovered"],
            "live_errors": live["errors"],
        },
        "settings": asdict(settings)
        | {
            "moto_server": "separate processes for DynamoDB and SQS",
            "price_source": price_source,
        },
        "targets": TARGETS,
        "writes_per_dispatch": writes_per_dispatch,
        **cold,
        **at_defaults,
        **fanned,
        **cpu_keys,
        **peaks,
        **idle_keys,
        "statistics": {"lag_ms_mean": round(statistics.fmean(lags), 1) if lags else None},
    }
