"""Trigger fan-out measured here (issue 18 part 6): the dispatch phase with 1, 2 and 4 trigger
processes, side by side in one run.

Each process is one group invocation (``TriggerInvocation.handle`` with ``{"group": g, "groups":
K}``, as a fan-out tick starts them), with its own clients, over its own shards; the K processes
start together (after their imports) on the same N due jobs as the dispatch phase (throughput.py's
``measure_dispatch``: its tables, jobs and queue drainer are reused). A rate is every dispatched
run over the time from the first start to the last finish.

What stops the scaling on this machine is named, not guessed: beside each rate, the CPU the moto
DynamoDB server process used over the phase's wall time (``moto_ddb_cpu_share``; 1.0 is one core,
all a serialised Python server can use) and the CPU of the trigger processes together.

    python -m jobsched_tools.bench.fanout [--runs 800] [--json]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jobsched.core.config import SchedulerConfig

if TYPE_CHECKING:
    from multiprocessing.queues import Queue as MpQueue
    from multiprocessing.synchronize import Barrier as MpBarrier

    from jobsched_tools.bench.stack import BenchSettings, Servers

PROCESS_COUNTS = (1, 2, 4)
CPU_CORES = os.cpu_count() or 1


@dataclass(frozen=True)
class _Target:
    """What a trigger process needs to reach the phase's tables and queue."""

    ddb_endpoint: str
    sqs_endpoint: str
    jobs_table: str
    state_table: str
    runs_table: str
    queue_url: str
    cfg: dict[str, Any]


def _trigger_process(target: _Target, group: int, groups: int, start: MpBarrier, out: MpQueue[Any]) -> None:
    """One group invocation in a fresh process: build, wait for the others, tick, report."""
    from jobsched.adapters.aws import make_client
    from jobsched.adapters.dynamodb_store import DynamoStore
    from jobsched.adapters.sqs_queue import SqsWorkQueue
    from jobsched.ports import GroupInvoker
    from jobsched.runtime.clock import SystemClock
    from jobsched.services.fanout import TriggerInvocation
    from jobsched.services.trigger import Trigger

    from jobsched_tools.emulator.credentials import DUMMY_AWS_ENV
    from jobsched_tools.fakes.memory_telemetry import MemoryTelemetry

    os.environ.update(DUMMY_AWS_ENV)
    cfg = SchedulerConfig(**target.cfg)
    ddb = make_client("dynamodb", target.ddb_endpoint, "us-east-1")
    store = DynamoStore(ddb, target.jobs_table, target.state_table, target.runs_table)
    queue = SqsWorkQueue(make_client("sqs", target.sqs_endpoint, "us-east-1"), target.queue_url)
    telemetry = MemoryTelemetry()

    def no_invoker() -> GroupInvoker:
        raise RuntimeError("a group invocation invokes nothing")

    invocation = TriggerInvocation(
        Trigger(store, queue, telemetry, SystemClock(), cfg), no_invoker, telemetry, cfg
    )
    ddb.describe_table(TableName=target.state_table)  # connections up before the clock starts
    start.wait()
    began, cpu = time.time(), time.process_time()
    summary = invocation.handle({"group": group, "groups": groups}, f"bench-fanout-{groups}-{group}", None)
    out.put(
        {
            "began": began,
            "ended": time.time(),
            "cpu_s": time.process_time() - cpu,
            "claimed": summary["claimed"],
            "dispatched": summary["dispatched"],
        }
    )


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU of a process so far (Linux /proc), or None where that is not readable."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _machine_cpu() -> tuple[float, float] | None:
    """(busy, total) CPU seconds of every core so far (Linux /proc/stat), or None."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            values = [int(v) for v in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    tick = os.sysconf("SC_CLK_TCK")
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    return (sum(values) - idle) / tick, sum(values) / tick


class _CpuWatch:
    """CPU used over one phase: by a few processes (a share of one core) and by the machine (a
    share of all its cores)."""

    def __init__(self, pids: dict[str, int]) -> None:
        self._pids = pids
        self._before = {name: _cpu_seconds(pid) for name, pid in pids.items()}
        self._machine = _machine_cpu()
        self._began = time.time()

    def shares(self) -> dict[str, float | None]:
        elapsed = max(1e-9, time.time() - self._began)
        out: dict[str, float | None] = {}
        for name, pid in self._pids.items():
            before, after = self._before[name], _cpu_seconds(pid)
            out[f"{name}_cpu_share"] = (
                None if before is None or after is None else round((after - before) / elapsed, 3)
            )
        machine = _machine_cpu()
        if self._machine is not None and machine is not None:
            busy, total = machine[0] - self._machine[0], machine[1] - self._machine[1]
            out["machine_cpu_busy"] = round(busy / total, 3) if total > 0 else None
        else:
            out["machine_cpu_busy"] = None
        return out


def measure_processes(
    moto: Servers, settings: BenchSettings, cfg: SchedulerConfig, processes: int
) -> dict[str, Any]:
    """The dispatch phase with ``processes`` trigger processes, one shard group each."""
    from jobsched_tools.bench.stack import BenchStack, draining, now_ms, scheduled_job

    stack = BenchStack(moto, f"fanout{processes}")
    due = now_ms() + 500
    stack.put_jobs(
        [scheduled_job(f"f{i:06d}", due + i % 100, cfg, at=False) for i in range(settings.dispatch_runs)]
    )
    target = _Target(
        moto.dynamodb.endpoint_url,
        moto.sqs.endpoint_url,
        stack.res.jobs_table,
        stack.res.state_table,
        stack.res.runs_table,
        stack.res.work_queue_url,
        cfg.model_dump(),
    )
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(processes + 1)
    out: MpQueue[Any] = context.Queue()
    children = [
        context.Process(
            target=_trigger_process, args=(target, g, processes, start, out), name=f"trigger-g{g}"
        )
        for g in range(processes)
    ]
    for child in children:
        child.start()
    with draining(stack):
        start.wait(timeout=120)
        watch = _CpuWatch({"moto_ddb": moto.dynamodb.pid, "moto_sqs": moto.sqs.pid})
        reports = [out.get(timeout=600) for _ in children]
        shares = watch.shares()
    for child in children:
        child.join(timeout=30)
    wall = max(r["ended"] for r in reports) - min(r["began"] for r in reports)
    dispatched = sum(r["dispatched"] for r in reports)
    trigger_cpu = sum(r["cpu_s"] for r in reports)
    figures: dict[str, Any] = {
        "processes": processes,
        "claimed": sum(r["claimed"] for r in reports),
        "dispatched": dispatched,
        "seconds": round(wall, 3),
        "runs_per_s": round(dispatched / wall, 1) if wall > 0 else 0.0,
        "trigger_cpu_ms_per_run": round(trigger_cpu * 1000 / dispatched, 2) if dispatched else None,
        "trigger_cpu_share": round(trigger_cpu / wall, 3) if wall > 0 else None,
        **shares,
    }
    ddb_share = figures["moto_ddb_cpu_share"]
    if ddb_share is not None and dispatched:
        # moto's server CPU per dispatched run, and so the most it can serve on one whole core
        # however many triggers send to it (it serialises DynamoDB requests in one process).
        per_run_ms = ddb_share * wall * 1000 / dispatched
        figures["moto_ddb_cpu_ms_per_run"] = round(per_run_ms, 2)
        figures["moto_ddb_ceiling_runs_per_s"] = round(1000 / per_run_ms, 1) if per_run_ms > 0 else None
    return figures


def measure(moto: Servers, settings: BenchSettings, cfg: SchedulerConfig) -> dict[str, Any]:
    """The bench JSON's fan-out keys: each rate, the ratio of 4 to 1, and what limits it here."""
    phases = {str(k): measure_processes(moto, settings, cfg, k) for k in PROCESS_COUNTS}
    rates = {k: phase["runs_per_s"] for k, phase in phases.items()}
    one, most = rates[str(PROCESS_COUNTS[0])], rates[str(PROCESS_COUNTS[-1])]
    return {
        "fanout_runs_per_s": rates,
        "fanout_scaling_ratio": round(most / one, 3) if one else None,
        "fanout_limit": limit(phases[str(PROCESS_COUNTS[-1])]),
        "fanout_phases": phases,
    }


def limit(phase: dict[str, Any]) -> str:
    """What stopped the widest phase, from its measured CPU shares."""
    ddb, machine = phase.get("moto_ddb_cpu_share"), phase.get("machine_cpu_busy")
    parts = (
        f"moto DynamoDB server {ddb} of one core, moto SQS server {phase.get('moto_sqs_cpu_share')}, "
        f"the {phase['processes']} trigger processes {phase.get('trigger_cpu_share')} together; "
        f"all {CPU_CORES} cores {machine} busy"
    )
    ceiling = phase.get("moto_ddb_cpu_ms_per_run"), phase.get("moto_ddb_ceiling_runs_per_s")
    moto = (
        f"moto's CPU: its DynamoDB server serialises every request in one Python process and spent "
        f"{ceiling[0]} ms of CPU per dispatched run, so it serves at most {ceiling[1]} runs/s on a "
        "whole core however many trigger processes send to it"
        if ceiling[0] is not None
        else "moto's CPU: its DynamoDB server serialises every request in one Python process"
    )
    if ddb is not None and ddb >= 0.85:
        return f"{moto} ({parts})"
    if machine is not None and machine >= 0.85:
        return (
            f"{moto}; and it did not get that core: this machine's {CPU_CORES} cores were busy, shared "
            f"by moto's servers, the drainer, the trigger processes and other jobs ({parts})"
        )
    return f"neither moto nor the machine was CPU-bound: request latency ({parts})"


def main(argv: list[str] | None = None) -> None:
    from jobsched_tools.bench.stack import BenchSettings, Servers, bench_config
    from jobsched_tools.emulator.credentials import DUMMY_AWS_ENV
    from jobsched_tools.emulator.local_moto import start_moto_process

    for key, value in DUMMY_AWS_ENV.items():
        os.environ.setdefault(key, value)

    parser = argparse.ArgumentParser(prog="python -m jobsched_tools.bench.fanout", description=__doc__)
    parser.add_argument("--runs", type=int, default=BenchSettings().dispatch_runs, help="due jobs per phase")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    settings = BenchSettings(dispatch_runs=args.runs)
    moto = Servers(start_moto_process(fast_transactions=settings.fast_transactions), start_moto_process())
    try:
        figures = measure(moto, settings, bench_config(settings))
    finally:
        moto.stop()
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    for k, phase in figures["fanout_phases"].items():
        print(
            f"{k} trigger process(es): {phase['runs_per_s']} runs/s ({phase['dispatched']} in "
            f"{phase['seconds']} s; trigger CPU {phase['trigger_cpu_ms_per_run']} ms/run; CPU shares: "
            f"moto DynamoDB {phase['moto_ddb_cpu_share']}, moto SQS {phase['moto_sqs_cpu_share']}, "
            f"triggers {phase['trigger_cpu_share']}, machine busy {phase['machine_cpu_busy']}; moto "
            f"DynamoDB CPU {phase.get('moto_ddb_cpu_ms_per_run')} ms/run)"
        )
    print(f"fanout_scaling_ratio (4 over 1): {figures['fanout_scaling_ratio']}")
    print(f"limit: {figures['fanout_limit']}")


if __name__ == "__main__":
    main()
