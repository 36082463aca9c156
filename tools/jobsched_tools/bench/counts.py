"""Phase 3 of ``jobsched bench``: full runs (claim, dispatch, start, commit) with a
``RequestCounter`` on every client, the worker fed as the event source mapping feeds it; the exact
requests per run, beside the write and read units the same runs are metered at
(bench/write_units.py, bench/read_units.py)."""

from __future__ import annotations

import time
from typing import Any

from jobsched.adapters.aws import RequestCounter
from jobsched.core.claim_shape import DeployedShape
from jobsched.core.config import SchedulerConfig
from jobsched.core.limits import item_size
from jobsched.core.writes import STATE
from jobsched.runtime.clock import SystemClock
from jobsched.services.trigger import Trigger

from jobsched_tools.bench import read_units, stack_shapes, units, write_units
from jobsched_tools.bench.esm import ESM_BATCH, bench_worker, esm_drain
from jobsched_tools.bench.stack import BenchStack, Servers, now_ms, registered_head, scheduled_job
from jobsched_tools.bench.stack_shapes import StackShape
from jobsched_tools.fakes.memory_telemetry import MemoryTelemetry

DDB_WRITES = frozenset(
    f"dynamodb:{op}" for op in ("PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem")
)
DDB_READS = frozenset(
    f"dynamodb:{op}" for op in ("GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems")
)


def measure_counts(
    moto: Servers, n: int, overlap: str, cfg: SchedulerConfig, shape: StackShape | None = None
) -> dict[str, Any]:
    """``n`` jobs due at once on tables of ``shape`` (None: the template's default,
    bench/stack_shapes.py), each claimed by one tick and run by the worker: every request counted.
    A legacy stack's jobs are seeded as legacy states in ``next-run``, a successor stack's as heads
    (``registered_head``); a migrating shape is not counted here (the meter prices it)."""
    shape = shape or stack_shapes.shipped()
    counter = RequestCounter()
    stack = BenchStack(moto, f"counts-{overlap}", counter, shape.deployed)
    if shape.deployed is DeployedShape.SUCCESSOR:
        now = now_ms()
        due = (now // 1000 + 2) * 1000  # a whole second ahead: the head's instant
        stack.put_heads([registered_head(f"c{i:05d}", due, now, cfg, overlap) for i in range(n)], now, cfg)
    elif shape.deployed is DeployedShape.LEGACY:
        due = now_ms() + 300
        stack.put_jobs([scheduled_job(f"c{i:05d}", due, cfg, overlap=overlap, at=False) for i in range(n)])
    else:
        raise ValueError(f"the counts phase runs a legacy or a successor stack, not {shape.name!r}")
    trigger = Trigger(
        stack.store, stack.queue, MemoryTelemetry(), SystemClock(), cfg, deployed=shape.deployed
    )
    while now_ms() < due - cfg.lookahead_seconds * 1000:  # the heads enter the tick's window
        time.sleep(0.05)
    counter.reset()
    tick = trigger.tick("bench-counts")
    query_calls = counter.calls.get("dynamodb:Query", 0)
    processed = esm_drain(stack, bench_worker(stack, cfg, "counter"), tick.dispatched)
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
    metered = write_units.measure(overlap, payload_bytes=0, runs=20, heartbeats=1, shape=shape)
    # The trigger's queries as this phase made them: each page returns the due job items of one
    # shard, and is charged at least half a unit, so at this phase's size the pages' minimum is
    # most of it. What a run reads is metered apart, every reader's request counted
    # (bench/read_units.py): that is what is priced.
    query_bytes = n * job_size
    page_units = (query_calls * units.query_read_units(query_bytes // max(1, query_calls))) / max(1, n)
    metered_reads = read_units.measure(overlap, shape=shape)
    per_run = max(1, succeeded)
    return {
        "claim_shape": shape.name,
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
