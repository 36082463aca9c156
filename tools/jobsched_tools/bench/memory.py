"""Peak memory of each function's service at the largest values its template parameters allow
(issue 18, part 3): ``peak_rss_mb`` per function, each in a fresh subprocess, the kernel's
high-water mark of its resident memory (``VmHWM``; see ``rss_mb`` for why not ``ru_maxrss``);
nothing subtracted. Beside it ``baseline_mb``: the
same reading after the imports and the store's setup, before the service runs.

The trigger and the miss detector run against a *generating* store, not the moto server: at
ShardCount 256 a full first page from every shard is 256,000 due jobs, which moto cannot serve in
any reasonable time, and an in-memory store holding them would put its own data into the very
figure being measured. The generating store makes each page's items when it is queried (state
items as the registrar leaves them, job items to match) and accepts every write without keeping
it, so the process holds only what the service holds. Work is bounded by a deadline (``seconds``),
as a Lambda's is. The worker (a batch of 10) and the registrar (a stream batch of 100, the
template's BatchSize) run on the in-memory store and queue at their largest settings.

    python -m jobsched_tools.bench.memory --function trigger [--per-shard 1000] [--seconds 20]
"""

# The null store, queue and telemetry below implement the ports' signatures and ignore most of
# their arguments on purpose.
# ruff: noqa: ARG002

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

from jobsched.core.config import SchedulerConfig
from jobsched.core.writes import JOBS, STATE, Item, WriteOp
from jobsched.ports import OutgoingMessage, Page, SendResult

FUNCTIONS = ("trigger", "worker", "miss_detector", "registrar")
HOUR = 3_600_000


def largest_config() -> SchedulerConfig:
    """The template's largest values for what bounds memory (ShardCount, ClaimConcurrency,
    MaxClaimsPerTick, DetectorMaxItems, DetectorDegradeBacklog)."""
    return SchedulerConfig(
        shard_count=256,
        claim_concurrency=64,
        max_claims_per_tick=1_000_000,
        detector_max_items=100_000,
        detector_degrade_backlog=10_000_000,
    )


def rss_mb() -> float:
    """This process's peak resident set, MB. Linux's ``ru_maxrss`` survives ``execve`` (it is kept
    with the process, not its memory map), so a subprocess of a large parent reports the parent's
    peak; ``VmHWM`` belongs to the new memory map and starts afresh. Both are the kernel's
    high-water mark of resident pages; ``ru_maxrss`` is the fallback where /proc is missing."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)  # kB
    except OSError:
        pass
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # Linux: KB


class NullQueue:
    def send(self, messages: Sequence[OutgoingMessage]) -> SendResult:
        return SendResult()


class GeneratingStore:
    """``per_shard`` jobs due at ``due_ms`` (+ their index) in every shard of the next-run index,
    made when queried; writes accepted and dropped."""

    def __init__(self, per_shard: int, due_ms: int, cfg: SchedulerConfig) -> None:
        self._per_shard = per_shard
        self._due = due_ms
        self._cfg = cfg

    def _job(self, job_id: str, due: int) -> tuple[Item, Item]:
        from jobsched_tools.bench.stack import scheduled_job

        return scheduled_job(job_id, due, self._cfg, at=False)

    def query(
        self,
        index: Any,
        partition: Any,
        sort_from: int | None = None,
        sort_to: int | None = None,
        limit: int = 100,
        cursor: dict[str, Any] | None = None,
        consistent: bool = False,
    ) -> Page:
        if index != "next-run":
            return Page([])
        start = int(cursor["i"]) if cursor else 0
        end = min(self._per_shard, start + limit)
        items = []
        for i in range(start, end):
            _, state = self._job(f"g{partition:03d}-{i:07d}", self._due + i)
            items.append({**state, "sched_shard": partition})
        return Page(items, {"i": end} if end < self._per_shard else None)

    def get(self, table: str, key: Item, consistent: bool = True) -> Item | None:
        if table not in (JOBS, STATE):
            return None
        job_id = str(key["job_id"])
        if not job_id.startswith("g"):
            return None  # not a generated job: the detector's bookkeeping item, say (none here)
        shard, _, i = job_id[1:].partition("-")
        item, state = self._job(job_id, self._due + int(i))
        return item if table == JOBS else {**state, "sched_shard": int(shard)}

    def write(self, ops: Sequence[WriteOp]) -> None:
        return None

    def update(self, op: Any) -> Item:
        return {}

    def delete(self, table: str, key: Item, condition: tuple[Any, ...] = (), label: str = "delete") -> None:
        return None

    def scan(self, table: str, limit: int = 100, cursor: dict[str, Any] | None = None) -> Page:
        return Page([])

    def batch_get(self, table: str, keys: Sequence[Item], consistent: bool = False) -> list[Item]:
        return [item for key in keys if (item := self.get(table, key, consistent)) is not None]


def _run_trigger(per_shard: int, seconds: float) -> dict[str, Any]:
    from jobsched.runtime.clock import SystemClock
    from jobsched.services.trigger import Trigger

    cfg = largest_config()
    now = time.time_ns() // 1_000_000
    store = GeneratingStore(per_shard, now, cfg)
    trigger = Trigger(store, NullQueue(), _NullTelemetry(), SystemClock(), cfg)
    baseline = rss_mb()
    result = trigger.tick("memory", deadline_ms=now + int(seconds * 1000) + cfg.deadline_margin_ms)
    return {"baseline_mb": baseline, "peak_rss_mb": rss_mb(), "claimed": result.claimed}


def _run_detector(per_shard: int, seconds: float) -> dict[str, Any]:
    from jobsched.runtime.clock import SystemClock
    from jobsched.services.detector import MissDetector

    cfg = largest_config()
    now = time.time_ns() // 1_000_000
    store = GeneratingStore(per_shard, now - 2 * HOUR, cfg)  # overdue past every grace
    detector = MissDetector(store, NullQueue(), _NullTelemetry(), SystemClock(), cfg)
    baseline = rss_mb()
    result = detector.run("memory", deadline_ms=now + int(seconds * 1000) + cfg.deadline_margin_ms)
    return {"baseline_mb": baseline, "peak_rss_mb": rss_mb(), "jobs_caught_up": result.jobs_caught_up}


def _run_worker_or_registrar(function: str) -> dict[str, Any]:
    from jobsched.core.clock import ManualClock
    from jobsched.core.job import JobDefinition
    from jobsched.services.messages import parse_run_message
    from jobsched.services.operations import Operations
    from jobsched.services.trigger import Trigger
    from jobsched.services.worker import Worker
    from jobsched.targets.registry import HandlerRegistry

    from jobsched_tools.bench.write_units import T0, quiet_logger
    from jobsched_tools.fakes.memory_queue import MemoryWorkQueue
    from jobsched_tools.fakes.memory_store import MemoryStore

    cfg = largest_config()
    clock = ManualClock(T0)
    store, queue = MemoryStore(), MemoryWorkQueue(clock, visibility_timeout_seconds=900)
    telemetry = _NullTelemetry()
    ops = Operations(store, queue, telemetry, clock, cfg)
    count = 100 if function == "registrar" else 10
    definitions = [
        JobDefinition(job_id=f"m{i:04d}", schedule="rate(1 hour)", target="noop") for i in range(count)
    ]
    baseline = rss_mb()
    if function == "registrar":
        for definition in definitions:  # one stream batch (BatchSize 100)
            ops.register(definition)
        return {"baseline_mb": baseline, "peak_rss_mb": rss_mb()}
    for definition in definitions:
        ops.register(definition)
    clock.set(T0 + HOUR - 5_000)
    Trigger(store, queue, telemetry, clock, cfg, parallel_queries=False).tick("memory")
    clock.set(T0 + HOUR)
    registry = HandlerRegistry()
    registry.add("noop", lambda _ctx: None)
    worker = Worker(store, queue, telemetry, clock, cfg, registry, "memory", logger_for=quiet_logger)
    baseline = rss_mb()
    for _, body in queue.receive(10):
        worker.process(parse_run_message(body), clock.now_ms() + 900_000)
    return {"baseline_mb": baseline, "peak_rss_mb": rss_mb()}


class _NullTelemetry:
    def event(self, name: str, correlation_id: str, **fields: Any) -> None:
        return None

    def metric(self, name: str, value: float, unit: str = "Count") -> None:
        return None


def run_one(function: str, per_shard: int, seconds: float) -> dict[str, Any]:
    if function == "trigger":
        return _run_trigger(per_shard, seconds)
    if function == "miss_detector":
        return _run_detector(per_shard, seconds)
    return _run_worker_or_registrar(function)


def measure(per_shard: int = 1000, seconds: float = 10.0) -> dict[str, Any]:
    """Each function in its own interpreter; the bench JSON's ``peak_rss_mb`` and ``baseline_mb``."""
    peaks: dict[str, Any] = {}
    baselines: dict[str, Any] = {}
    for function in FUNCTIONS:
        command = [
            sys.executable, "-m", "jobsched_tools.bench.memory", "--function", function,
            "--per-shard", str(per_shard), "--seconds", str(seconds),
        ]  # fmt: skip
        out = subprocess.run(command, capture_output=True, text=True, check=True, timeout=600)
        figures = json.loads(out.stdout.strip().splitlines()[-1])
        peaks[function] = figures["peak_rss_mb"]
        baselines[function] = figures["baseline_mb"]
    return {
        "peak_rss_mb": peaks,
        "baseline_rss_mb": baselines,
        "memory_conditions": f"ShardCount 256, ClaimConcurrency 64, MaxClaimsPerTick 1,000,000, "
        f"DetectorMaxItems 100,000, DetectorDegradeBacklog 10,000,000; {per_shard} due (trigger) or "
        f"overdue (detector) jobs per shard on a generating store, {seconds:g} s of work",
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m jobsched_tools.bench.memory")
    parser.add_argument("--function", choices=FUNCTIONS, required=True)
    parser.add_argument("--per-shard", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args(argv)
    print(json.dumps({"function": args.function, **run_one(args.function, args.per_shard, args.seconds)}))


if __name__ == "__main__":
    main()
