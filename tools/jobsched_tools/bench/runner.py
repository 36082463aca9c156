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

import statistics
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from jobsched.core.job import JobDefinition

from jobsched_tools.bench import (
    cold_import,
    cpu,
    fanout,
    first_lag,
    idle,
    memory,
    shape_figures,
    stack_shapes,
    units,
    write_units,
)
from jobsched_tools.bench.cost import capacity_modes
from jobsched_tools.bench.counts import measure_counts
from jobsched_tools.bench.live import measure_live
from jobsched_tools.bench.stack import BenchSettings, Servers, bench_config, percentile
from jobsched_tools.bench.throughput import (
    measure_claim_ceiling,
    measure_claim_shapes,
    measure_dispatch,
    measure_raw,
)
from jobsched_tools.emulator.local_moto import start_moto_process

# The policy a job gets when it names none: the cost a user meets by default.
DEFAULT_OVERLAP = JobDefinition.model_fields["overlap"].default.value

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
        claim_shapes = measure_claim_shapes(moto, min(settings.dispatch_runs, 300), cfg)
        raw_after = measure_raw(moto, settings.raw_writes - settings.raw_writes // 2)
        raw = (raw_before + raw_after) / 2
        progress("trigger fan-out: the dispatch phase with 1, 2 and 4 trigger processes")
        fanned = fanout.measure(moto, settings, cfg)
        progress("client CPU per dispatched run and per bare write")
        # At the run's own sizes: --quick and the smoke test used to time 400 runs and 200 bare
        # writes whatever they asked for (issue 35 item 15); the full bench's sizes are unchanged.
        # On the template's default shape: the claim the shipped stack makes (bench/stack_shapes.py).
        cpu_figures = cpu.measure(
            moto,
            runs=min(400, settings.dispatch_runs),
            bare_writes=min(200, settings.raw_writes),
            shape=stack_shapes.shipped().deployed,
        )
        progress("request counts per run")
        counts = {
            overlap: measure_counts(moto, settings.count_runs, overlap, cfg) for overlap in ("allow", "skip")
        }
        progress(f"live stack: start lag over {settings.lag_seconds:.0f} s, then crash recovery")
        live = measure_live(moto, settings, cfg, stack_shapes.shipped().deployed)
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
    progress("units, reads and prices of each stack shape (successor, migrating, legacy)")
    # Each shape's DynamoDB units metered, everything else a run costs as this run measured it.
    others = {name: value for name, value in cost.items() if not name.startswith(("dynamodb", "total"))}
    shapes = shape_figures.measure(DEFAULT_OVERLAP, others)
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
        **claim_shapes,
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
        # The stack shape those units and prices are metered on: template.yaml's ClaimShape
        # default (bench/stack_shapes.py), and every shape side by side, priced both ways.
        "claim_shape": shapes["shipped"],
        "by_claim_shape": shapes["shapes"],
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
