"""Phases 1 and 2 of ``jobsched bench``: the server's bare conditional-write rate, the trigger's
dispatch rate, the claim's own ceiling, and the claim as one transaction against two plain writes.
Each on its own freshly provisioned tables (bench/stack.py)."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from jobsched.core.clock import dt_to_ms, ms_to_dt
from jobsched.core.config import SchedulerConfig
from jobsched.core.job import JobDefinition
from jobsched.core.run import RunKind, run_id_for
from jobsched.core.state import state_schedule
from jobsched.core.transitions import claim_ops, new_run_item
from jobsched.runtime.clock import SystemClock
from jobsched.services.trigger import Trigger

from jobsched_tools.bench.stack import BenchSettings, BenchStack, Servers, draining, now_ms, scheduled_job
from jobsched_tools.fakes.memory_telemetry import MemoryTelemetry

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
