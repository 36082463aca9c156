"""Phases 4 and 5 of ``jobsched bench``, in real time on the live stack: a trigger thread ticking
with lookahead, a detector thread sweeping as the Lambda does and worker pollers; the start lag of
occurrences spread over ``lag_seconds``, then injected worker crashes and the time until each
occurrence runs again (each on fresh tables)."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from jobsched.core.claim_shape import DeployedShape
from jobsched.core.config import SchedulerConfig
from jobsched.core.head import head_check_delay_ms
from jobsched.runtime.clock import SystemClock
from jobsched.services.detector import MissDetector
from jobsched.services.messages import parse_run_message
from jobsched.services.trigger import Trigger
from jobsched.services.worker import Started

from jobsched_tools.bench.esm import ESM_BATCH, bench_worker
from jobsched_tools.bench.stack import CRASH, NOOP, BenchSettings, BenchStack, Servers, now_ms, seed_due
from jobsched_tools.fakes.memory_telemetry import MemoryTelemetry

# The template's DetectorRate default, rate(1 minute): how often the detector function is invoked.
DETECTOR_RATE_S = 60.0


class _Live:
    """Trigger, detector and worker pollers running in threads against one stack, in real time."""

    def __init__(self, stack: BenchStack, cfg: SchedulerConfig, settings: BenchSettings) -> None:
        self.stack = stack
        self.cfg = cfg
        self.settings = settings
        self.stop = threading.Event()
        self.crashed: dict[str, int] = {}  # run id -> crash time (epoch ms)
        # Run ids (with their attempt) whose message a worker has handled. A phase waits on these
        # in memory and reads the runs table only once they say it may be done: the tables are on
        # one serialised moto server, and a scan of the whole runs table every half second (twice
        # the items on a successor stack: heads and their successors) was most of that server's
        # work in the lag phase, delaying every write the lag measures (docs/benchmarks.md).
        self.handled: set[tuple[str, int]] = set()
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
        worker = bench_worker(self.stack, self.cfg, f"poller{index}")

        def handle(body: str) -> None:
            run_message = parse_run_message(body)
            if run_message.definition.get("target") == CRASH and run_message.attempt == 1:
                begun = worker.begin(run_message, now_ms() + 60_000)
                if isinstance(begun, Started):
                    with self._lock:
                        self.crashed[run_message.run_id] = now_ms()
                return  # the worker is gone: no heartbeat, no commit
            worker.process(run_message, now_ms() + 60_000)
            with self._lock:
                self.handled.add((run_message.run_id, run_message.attempt))

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

    def handled_count(self, prefix: str, attempt: int) -> int:
        """How many runs named ``prefix...`` a worker has handled a message of, at ``attempt`` or
        later."""
        with self._lock:
            return len(
                {run_id for run_id, tried in self.handled if run_id.startswith(prefix) and tried >= attempt}
            )

    def start(self) -> None:
        clock = SystemClock()
        shape = self.stack.shape  # wired as the functions are for the stack's ClaimShape
        trigger = Trigger(
            self.stack.store, self.stack.queue, MemoryTelemetry(), clock, self.cfg, deployed=shape
        )
        detector = MissDetector(
            self.stack.store, self.stack.queue, MemoryTelemetry(), clock, self.cfg, deployed=shape
        )
        # Each tick is its own invocation, with its own id, as each Lambda invocation has its own
        # request id: a claim names its claimer and invocation, and a tick that meets a claimed run
        # naming itself takes it for its own retried claim and sends it again (on a successor
        # stack a claimed run stays in `due` until it ends).
        invocations = itertools.count()
        self._every(
            self.settings.tick_period_s, lambda: trigger.tick(f"live-{next(invocations)}"), "bench-trigger"
        )
        period_ms = int(self.settings.detector_period_s * 1000)

        def detect() -> None:
            # As the Lambda does: one invocation sweeps every period until its deadline and wakes
            # early for a lapsing lease; a stop ends the nap and, with it, the invocation.
            def nap(ms: int) -> None:
                self.stop.wait(ms / 1000)

            detector.sweep("live", clock.now_ms() + 60_000, period_ms, nap)

        # Invoked as the template's schedule invokes the function (DetectorRate, rate(1 minute)):
        # an invocation sweeps every ``detector_period_s`` until its deadline, or returns early when
        # idle, and the next comes a minute after the last began. Re-invoked every second instead,
        # an idle successor detector ran its first sweep's reconcile slice (a jobs-table Scan and a
        # read of their states) sixty times a minute, half of the moto server's work in the lag
        # phase (docs/benchmarks.md, "Start lag and the emulator").
        self._every(DETECTOR_RATE_S, detect, "bench-detector")
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


def check_after_s(settings: BenchSettings, shape: DeployedShape, cfg: SchedulerConfig) -> float:
    """How long after a crash the detector first meets the run: its lease, or on a successor
    stack at least the head's check delay (a claimed run keeps its head's `check_at`, the instant
    plus the dispatch lease, ``head_check_delay_ms``, through its start: the build plan's HC7)."""
    if shape is DeployedShape.SUCCESSOR:
        return max(settings.lease_seconds, head_check_delay_ms(cfg) / 1000)
    return float(settings.lease_seconds)


def measure_live(
    moto: Servers, settings: BenchSettings, cfg: SchedulerConfig, shape: DeployedShape = DeployedShape.LEGACY
) -> dict[str, Any]:
    """Start lag, then crash recovery, each on fresh tables of ``shape``'s claim indexes."""
    lag = measure_lag(moto, settings, cfg, shape)
    recovery = measure_recovery(moto, settings, cfg, shape)
    return {**lag, **recovery, "errors": (lag["errors"] + recovery["errors"])[:10]}


def measure_lag(
    moto: Servers, settings: BenchSettings, cfg: SchedulerConfig, shape: DeployedShape = DeployedShape.LEGACY
) -> dict[str, Any]:
    """Start lag of occurrences spread over ``lag_seconds``, on the live stack."""
    stack = BenchStack(moto, "lag", shape=shape)
    live = _Live(stack, cfg, settings)
    # Occurrences on whole seconds (at() has second precision), spread over the lag window.
    first = (now_ms() // 1000 + 3) * 1000
    count = max(1, int(settings.lag_seconds * settings.lag_occurrences_per_s))
    span_s = max(1, int(settings.lag_seconds))
    seed_due(stack, [(f"lag{i:05d}", first + (i * span_s // count) * 1000, NOOP) for i in range(count)], cfg)
    live.start()
    try:

        def lag_done() -> bool:
            if live.handled_count("lag", attempt=1) < count:
                return False
            # Started runs only: on a successor stack each claim also writes its job's next head
            # (an hour on, never started here), and waiting for every run item to start waited
            # out the whole timeout. One occurrence a job in the window: ``count`` is all of them.
            return sum("first_started_at" in r for r in stack.runs("lag")) >= count

        _wait_until(lag_done, settings.lag_seconds + 30)
        lag_runs = [r for r in stack.runs("lag") if "first_started_at" in r]
        lags = [int(r["first_started_at"]) - int(r["scheduled_at"]) for r in lag_runs]
    finally:
        live.close()
    return {"lag_occurrences": count, "lag_started": len(lags), "lag_ms": lags, "errors": live.errors}


def measure_recovery(
    moto: Servers, settings: BenchSettings, cfg: SchedulerConfig, shape: DeployedShape = DeployedShape.LEGACY
) -> dict[str, Any]:
    """Injected worker crashes holding a lease, and the time until each occurrence runs again.
    On its own tables: moto's index queries read the whole table, so the lag phase's runs would
    slow every detector sweep here (DynamoDB's read only what they return)."""
    stack = BenchStack(moto, "recovery", shape=shape)
    live = _Live(stack, cfg, settings)
    crash_first = (now_ms() // 1000 + 3) * 1000
    seed_due(
        stack, [(f"crash{i:03d}", crash_first + (i % 4) * 1000, CRASH) for i in range(settings.crashes)], cfg
    )
    live.start()
    try:

        def recovered() -> list[dict[str, Any]]:
            if live.handled_count("crash", attempt=2) < settings.crashes:
                return []
            return [
                r for r in stack.runs("crash") if int(r.get("attempt", 1)) >= 2 and r["status"] == "succeeded"
            ]

        _wait_until(
            lambda: len(recovered()) >= settings.crashes,
            timeout_s=10 + 4 * (check_after_s(settings, shape, cfg) + settings.detector_period_s),
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
