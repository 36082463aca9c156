"""Scale model: what jobsched needs for 1,000, 10,000 and 100,000 runs per second and for 10 million
registered jobs, and where the first bottleneck appears.

Inputs are the MEASURED per-run figures from ``jobsched bench --json`` (saved as
docs/bench-latest.json): requests and estimated write units per run by step, item sizes, the
trigger's queries per tick, and the local throughput used to validate the model's shape. The
limits are DynamoDB's per-partition throughput (1,000 WCU/s and 3,000 RCU/s, for the table and
each GSI; a GSI partition key value is one partition for writes, so the next-run and lease indexes
have ``shard_count`` partitions), the default on-demand table quota, Lambda's regional concurrency
and the SQS event source mapping's scaling, and one trigger invocation's rates: claims (ClaimConcurrency
claimers, each 1 / transaction latency), sends (SendMessageBatch of 10 on the trigger's 4 sender
threads) and MaxClaimsPerTick per once-a-minute tick.

    python scripts/scale_model.py [--bench docs/bench-latest.json] [--plot docs/scaling.png]
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

# DynamoDB (developer guide, "Service, account, and table quotas"; partitions):
PARTITION_WCU = 1_000  # per partition, table or GSI
PARTITION_RCU = 3_000
TABLE_DEFAULT_WRU = 40_000  # on-demand default per-table quota (adjustable), per table and per GSI
# Lambda: 1,000 concurrent executions per region by default (adjustable); the SQS event source
# mapping scales up by up to 300 concurrent executions per minute, to at most 1,250 per mapping
# unless maximum concurrency is raised with a quota.
LAMBDA_CONCURRENCY = 1_000
ESM_MAX_CONCURRENCY = 1_250
# In-region DynamoDB latencies assumed for the projection (single-digit ms for a single-item write,
# about twice that for a two-item transaction). The local bench measures the ratio, not these.
WRITE_LATENCY_S = 0.006
TRANSACT_LATENCY_S = 0.012
SQS_SEND_LATENCY_S = 0.010
ESM_BATCH = 10
TRIGGER_TICK_S = 60  # EventBridge rate(1 minute) ticks the trigger; lookahead 90 s covers a tick
# Trigger settings (template parameters): claimers per invocation, claims per tick.
CLAIM_CONCURRENCY = 16  # ClaimConcurrency default
CLAIM_CONCURRENCY_MAX = 64
MAX_CLAIMS_PER_TICK = 50_000  # MaxClaimsPerTick default
TRIGGER_SENDERS = 4  # services/trigger.py SENDERS
MAX_CLAIMS_PER_TICK_MAX = 1_000_000
# Recovery on AWS: lease + skew allowance (template defaults); the detector wakes for a lapsing
# lease between its sweeps, so the sweep period bounds only the gap between two invocations.
LEASE_S = 30
DETECTOR_SWEEP_S = 10  # DetectorSweepSeconds
SKEW_ALLOWANCE_S = 2
# References for docs/scaling.md.
EVENTBRIDGE_SCHEDULER_INVOCATIONS_PER_S = 1_000  # default quota, 60 s precision
DB_SCHEDULER_EXECUTIONS_PER_S = (2_000, 11_000)  # PostgreSQL, four nodes


@dataclass(frozen=True)
class Measured:
    write_requests_per_run: float
    claim_units: int
    start_units: int
    commit_units: int
    job_bytes: int
    run_bytes: int
    read_units_per_run: float
    sqs_requests_per_run: float
    local_raw_writes_per_s: float
    local_dispatch_runs_per_s: float
    local_efficiency: float

    @classmethod
    def from_bench(cls, data: dict[str, Any]) -> Measured:
        allow = data["by_overlap"]["allow"]
        steps = allow["est_write_units_by_step"]
        return cls(
            write_requests_per_run=float(data["ddb_write_requests_per_run"]),
            claim_units=int(steps["claim"]),
            start_units=int(steps["start"]),
            commit_units=int(steps["commit"]),
            job_bytes=int(allow["job_item_bytes"]),
            run_bytes=int(allow["run_item_bytes"]),
            read_units_per_run=float(data["est_read_units_per_run"]),
            sqs_requests_per_run=float(data["sqs_requests_per_run"]),
            local_raw_writes_per_s=float(data["raw_conditional_writes_per_s"]),
            local_dispatch_runs_per_s=float(data["dispatch_runs_per_s"]),
            local_efficiency=float(data["dispatch_efficiency"]),
        )


def kb(size: int) -> int:
    return max(1, math.ceil(size / 1024))


@dataclass(frozen=True)
class Requirement:
    rate: float
    next_run_shards: int  # next-run GSI partitions needed (sched_shard values)
    lease_shards: int  # lease GSI partitions needed (lease_shard values)
    shard_count: int  # the one setting that sizes both
    runs_table_wru: float  # base-table write units/s (quota 40,000 by default)
    jobs_table_wru: float
    lease_gsi_wru: float
    next_run_gsi_wru: float
    job_runs_gsi_wru: float
    claim_concurrency: int  # concurrent claims needed (all trigger invocations together)
    max_claims_per_tick: int  # MaxClaimsPerTick needed (all invocations together)
    trigger_invocations: int  # 1 today; more would need a trigger per shard group (not built)
    worker_concurrency: int
    sqs_requests_per_s: float
    bottlenecks: list[str]


def trigger_limits(claim_concurrency: int, max_claims_per_tick: int) -> dict[str, float]:
    """Runs/s one trigger invocation sustains, per limit (model latencies)."""
    return {
        "claims": claim_concurrency / TRANSACT_LATENCY_S,
        "sends": TRIGGER_SENDERS * ESM_BATCH / SQS_SEND_LATENCY_S,
        "claims per tick": max_claims_per_tick / TRIGGER_TICK_S,
    }


def requirement(
    m: Measured,
    rate: float,
    handler_s: float,
    claim_concurrency: int = CLAIM_CONCURRENCY,
    max_claims_per_tick: int = MAX_CLAIMS_PER_TICK,
) -> Requirement:
    job_kb, run_kb = kb(m.job_bytes), kb(m.run_bytes)
    # Index writes per run (allow policy; see bench/units.py): next-run rekey at claim (2 writes of
    # the job entry); lease enter + rekey at start + leave at commit (4 run entries); job-runs
    # (keys only) enter once, a sub-1 KB entry.
    next_run_wru = rate * 2 * job_kb
    lease_wru = rate * 4 * run_kb
    job_runs_wru = rate * 1.0
    runs_wru = rate * (2 * run_kb + run_kb + run_kb)  # transactional put, start, commit
    jobs_wru = rate * 2 * job_kb  # transactional advance
    next_run_shards = math.ceil(next_run_wru / PARTITION_WCU)
    lease_shards = math.ceil(lease_wru / PARTITION_WCU)
    # Reads: the trigger's query pages on the next-run index, spread across its shards.
    next_run_rcu_per_shard_ok = rate * m.read_units_per_run
    shard_count = max(1, next_run_shards, lease_shards, math.ceil(next_run_rcu_per_shard_ok / PARTITION_RCU))
    # A claim is one transaction on a claimer thread; each batch of 10 is sent as it fills by one
    # of the trigger's sender threads (services/trigger.py SENDERS), while the claimers carry on.
    claims_needed = math.ceil(rate * TRANSACT_LATENCY_S)
    per_tick_needed = math.ceil(round(rate * TRIGGER_TICK_S, 6))
    # Invocations needed with the settings raised to their maximum.
    at_max = trigger_limits(CLAIM_CONCURRENCY_MAX, MAX_CLAIMS_PER_TICK_MAX)
    invocations = max(math.ceil(rate / limit) for limit in at_max.values())
    # Worker: start and commit writes plus the handler, per message, messages of a batch in turn.
    per_run_worker_s = 2 * WRITE_LATENCY_S + handler_s
    concurrency = math.ceil(rate * per_run_worker_s)
    bottlenecks = []
    if per_tick_needed > max_claims_per_tick:
        bottlenecks.append(f"MaxClaimsPerTick >= {min(per_tick_needed, MAX_CLAIMS_PER_TICK_MAX):,}")
    if claims_needed > claim_concurrency:
        bottlenecks.append(f"ClaimConcurrency >= {min(claims_needed, CLAIM_CONCURRENCY_MAX)}")
    one_invocation = min(at_max.values())
    if invocations == 1 and rate >= 0.8 * one_invocation:
        bottlenecks.append(
            f"one trigger invocation at {rate / one_invocation:.0%} of its capacity "
            f"({one_invocation:,.0f} runs/s, its sends)"
        )
    if invocations > 1:
        bottlenecks.append(
            f"one trigger invocation is not enough: {invocations} over shard groups needed (not built)"
        )
    if shard_count > 8:
        bottlenecks.append(f"index partitions: shard_count >= {shard_count} (default 8)")
    for name, wru in (("runs table", runs_wru), ("lease GSI", lease_wru), ("job-runs GSI", job_runs_wru)):
        if wru > TABLE_DEFAULT_WRU:
            bottlenecks.append(
                f"{name}: {wru:,.0f} WRU/s over the default on-demand quota {TABLE_DEFAULT_WRU:,}"
            )
    if concurrency > LAMBDA_CONCURRENCY:
        bottlenecks.append(f"Lambda concurrency {concurrency:,} > regional default {LAMBDA_CONCURRENCY:,}")
    if concurrency > ESM_MAX_CONCURRENCY:
        bottlenecks.append(
            f"one SQS event source mapping scales to {ESM_MAX_CONCURRENCY:,}: split the work queue"
        )
    return Requirement(
        rate=rate,
        next_run_shards=next_run_shards,
        lease_shards=lease_shards,
        shard_count=shard_count,
        runs_table_wru=runs_wru,
        jobs_table_wru=jobs_wru,
        lease_gsi_wru=lease_wru,
        next_run_gsi_wru=next_run_wru,
        job_runs_gsi_wru=job_runs_wru,
        claim_concurrency=claims_needed,
        max_claims_per_tick=per_tick_needed,
        trigger_invocations=invocations,
        worker_concurrency=concurrency,
        sqs_requests_per_s=rate * m.sqs_requests_per_run,
        bottlenecks=bottlenecks,
    )


def first_bottleneck(m: Measured, handler_s: float) -> list[tuple[float, str]]:
    """The rate at which each limit is first crossed (default settings), lowest first."""
    job_kb, run_kb = kb(m.job_bytes), kb(m.run_bytes)
    trig = trigger_limits(CLAIM_CONCURRENCY, MAX_CLAIMS_PER_TICK)
    limits = [
        (
            trig["claims per tick"],
            f"trigger: MaxClaimsPerTick {MAX_CLAIMS_PER_TICK:,} per 1-minute tick (a setting)",
        ),
        (
            MAX_CLAIMS_PER_TICK_MAX / TRIGGER_TICK_S,
            f"trigger: MaxClaimsPerTick at its maximum {MAX_CLAIMS_PER_TICK_MAX:,}",
        ),
        (trig["sends"], "trigger: SendMessageBatch of 10 on 4 sender threads"),
        (trig["claims"], f"trigger: ClaimConcurrency {CLAIM_CONCURRENCY} / transaction latency"),
        (
            CLAIM_CONCURRENCY_MAX / TRANSACT_LATENCY_S,
            f"trigger: ClaimConcurrency at its maximum {CLAIM_CONCURRENCY_MAX}",
        ),
        (8 * PARTITION_WCU / (4 * run_kb), "lease GSI with the default 8 shards (1,000 WCU/s each)"),
        (8 * PARTITION_WCU / (2 * job_kb), "next-run GSI with the default 8 shards"),
        (TABLE_DEFAULT_WRU / (4 * run_kb), "runs table default on-demand quota (40,000 WRU/s)"),
        (LAMBDA_CONCURRENCY / (2 * WRITE_LATENCY_S + handler_s), "Lambda regional concurrency (1,000)"),
    ]
    return sorted(limits)


def validate(m: Measured) -> dict[str, float]:
    """The local server (moto, one process, requests serialised) is CPU-bound, not latency-bound,
    so parallel claimers cannot hide a claim's cost there: dispatch runs at the raw single-write
    rate divided by what one run costs the server (claim transaction plus its share of the queries,
    sends and the drainer), which the measured efficiency gives. On DynamoDB the claim's cost is
    latency, which claimers overlap; the model's per-claim latency in single writes is shown."""
    implied = (
        m.local_raw_writes_per_s / m.local_dispatch_runs_per_s if m.local_dispatch_runs_per_s else math.inf
    )
    return {
        "local_raw_writes_per_s": m.local_raw_writes_per_s,
        "local_dispatch_runs_per_s": m.local_dispatch_runs_per_s,
        "local_claim_cost_in_single_writes": round(implied, 2),
        "model_claim_latency_in_single_writes": round(TRANSACT_LATENCY_S / WRITE_LATENCY_S, 2),
    }


def plot(m: Measured, handler_s: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rates = [10 ** (x / 10) for x in range(20, 51)]
    reqs = [requirement(m, r, handler_s) for r in rates]
    fig, ax = plt.subplots(figsize=(8, 5))
    ax.loglog(rates, [r.shard_count for r in reqs], label="shard_count needed (lease/next-run GSI)")
    ax.loglog(rates, [r.claim_concurrency for r in reqs], label="concurrent trigger claims needed")
    ax.loglog(rates, [r.trigger_invocations for r in reqs], label="trigger invocations needed (>1 not built)")
    ax.loglog(
        rates, [r.worker_concurrency for r in reqs], label=f"worker concurrency (handler {handler_s:g} s)"
    )
    ax.loglog(rates, [r.runs_table_wru / 1000 for r in reqs], label="runs table kWRU/s")
    ax.axhline(LAMBDA_CONCURRENCY, color="grey", linestyle="--", linewidth=0.8)
    ax.text(rates[0], LAMBDA_CONCURRENCY * 1.1, "Lambda default concurrency 1,000", fontsize=8)
    ax.axhline(TABLE_DEFAULT_WRU / 1000, color="grey", linestyle=":", linewidth=0.8)
    ax.text(rates[0], TABLE_DEFAULT_WRU / 1000 * 1.1, "table on-demand quota 40 kWRU/s", fontsize=8)
    ax.axhline(8, color="grey", linestyle="-.", linewidth=0.8)
    ax.text(rates[0], 8 * 1.1, "default shard_count 8", fontsize=8)
    ax.axhline(CLAIM_CONCURRENCY, color="red", linestyle="-.", linewidth=0.8)
    ax.text(rates[0], CLAIM_CONCURRENCY * 1.1, "ClaimConcurrency 16 (max 64)", fontsize=8, color="red")
    ax.axvline(TRIGGER_SENDERS * ESM_BATCH / SQS_SEND_LATENCY_S, color="red", linestyle=":", linewidth=0.8)
    ax.text(
        TRIGGER_SENDERS * ESM_BATCH / SQS_SEND_LATENCY_S * 1.05,
        20,
        "one trigger's 4 senders",
        fontsize=8,
        color="red",
        rotation=90,
    )
    for target in (1_000, 10_000, 100_000):
        ax.axvline(target, color="lightgrey", linewidth=0.6)
    ax.set_xlabel("runs per second")
    ax.set_ylabel("count")
    ax.set_title("jobsched scale model (from measured per-run requests and units)")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", type=Path, default=ROOT / "docs" / "bench-latest.json")
    parser.add_argument("--plot", type=Path, default=ROOT / "docs" / "scaling.png")
    parser.add_argument("--handler-seconds", type=float, default=0.1, help="worker handler duration")
    args = parser.parse_args(argv)
    data = json.loads(args.bench.read_text(encoding="utf-8"))
    m = Measured.from_bench(data)
    print(
        f"measured per run: {m.write_requests_per_run:g} DynamoDB write requests, "
        f"{m.claim_units + m.start_units + m.commit_units} write units "
        f"(claim {m.claim_units}, start {m.start_units}, commit {m.commit_units}), "
        f"{m.sqs_requests_per_run:g} SQS requests; job {m.job_bytes} B, run {m.run_bytes} B"
    )
    for rate in (1_000, 10_000, 100_000):
        r = requirement(m, rate, args.handler_seconds)
        print(f"\n{rate:,} runs/s:")
        print(f"  shard_count >= {r.shard_count} (next-run {r.next_run_shards}, lease {r.lease_shards})")
        print(
            f"  runs table {r.runs_table_wru:,.0f} WRU/s, jobs table {r.jobs_table_wru:,.0f} WRU/s, "
            f"lease GSI {r.lease_gsi_wru:,.0f}, next-run GSI {r.next_run_gsi_wru:,.0f}, "
            f"job-runs GSI {r.job_runs_gsi_wru:,.0f}"
        )
        print(
            f"  trigger: {r.claim_concurrency:,} concurrent claims, "
            f"{r.max_claims_per_tick:,} claims per tick, "
            f"{r.trigger_invocations} invocation(s); workers: {r.worker_concurrency:,} concurrent"
        )
        print(f"  SQS {r.sqs_requests_per_s:,.0f} requests/s")
        for b in r.bottlenecks:
            print(f"  limit: {b}")
    jobs = 10_000_000
    print(
        f"\n{jobs:,} registered jobs: storage {jobs * m.job_bytes / 1e9:.1f} GB in the jobs table "
        f"(and again in the next-run index); the trigger reads only due items, so what matters is the rate:"
    )
    for label, period_s in (
        ("daily", 86_400),
        ("hourly", 3_600),
        ("every 10 min", 600),
        ("every minute", 60),
    ):
        rate = jobs / period_s
        r = requirement(m, rate, args.handler_seconds)
        print(
            f"  {label:>13}: {rate:,.0f} runs/s -> shard_count {r.shard_count}, "
            f"{r.claim_concurrency:,} concurrent claims, {r.max_claims_per_tick:,} claims per tick, "
            f"{r.trigger_invocations} trigger invocation(s), {r.worker_concurrency:,} workers"
        )
    print("\nfirst bottlenecks (default settings), lowest rate first:")
    for rate, name in first_bottleneck(m, args.handler_seconds):
        print(f"  {rate:>10,.0f} runs/s  {name}")
    print(
        f"\nrecovery on AWS (defaults): lease {LEASE_S} s + skew allowance {SKEW_ALLOWANCE_S} s "
        f"= {LEASE_S + SKEW_ALLOWANCE_S} s, plus dispatch and start, while a detector invocation is "
        f"sweeping (every {DETECTOR_SWEEP_S} s, waking early for a lapsing lease)"
    )
    print("\nlocal validation:", json.dumps(validate(m)))
    plot(m, args.handler_seconds, args.plot)
    print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
