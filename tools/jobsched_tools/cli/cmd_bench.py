"""``jobsched bench``: measure the scheduler on the local stack (moto, serialised DynamoDB).

With ``--json`` the last line of stdout is one JSON object (a contract other tools read); progress
goes to stderr. ``--quick`` is a smaller, faster run. Figures are printed next to their targets.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import os
import sys
from typing import Any

from jobsched_tools.bench.runner import TARGETS, run_bench
from jobsched_tools.bench.stack import BenchSettings
from jobsched_tools.emulator.credentials import DUMMY_AWS_ENV

SUMMARY_KEYS = (
    "claim_shape",
    "raw_conditional_writes_per_s",
    "dispatch_runs_per_s",
    "dispatch_efficiency",
    "ddb_write_requests_per_run",
    "ddb_read_requests_per_run",
    "sqs_requests_per_run",
    "est_write_units_per_run",
    "est_read_units_per_run",
    "usd_per_million_runs",
    "usd_per_million_runs_provisioned",
    "lag_ms_p50",
    "lag_ms_p99",
    "recovery_s_p50",
    "recovery_s_max",
    "trigger_cpu_ms_per_run",
    "bare_write_cpu_ms",
    "worker_wait_s_per_batch",
    "modelled_runs_per_s_default",
    "modelled_runs_per_s_max",
)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="measure throughput, requests and cost per run, start lag and crash recovery locally",
        description="Run the benchmark on a local moto server and print the figures next to their targets.",
    )
    parser.add_argument("--json", action="store_true", help="end stdout with one JSON object")
    parser.add_argument("--quick", action="store_true", help="a smaller, faster run")
    parser.add_argument("--lag-seconds", type=float, default=None, help="start-lag window (default 90)")
    parser.add_argument("--dispatch-runs", type=int, default=None, help="due occurrences in the timed tick")
    parser.add_argument("--raw-writes", type=int, default=None, help="bare conditional updates to time")
    parser.add_argument("--count-runs", type=int, default=None, help="runs counted request by request")
    parser.add_argument("--crashes", type=int, default=None, help="worker crashes to inject")
    parser.add_argument("--lease-seconds", type=int, default=None, help="worker lease (default 5)")
    parser.add_argument(
        "--claim-concurrency", type=int, default=None, help="the trigger's parallel claimers (default 16)"
    )
    parser.add_argument("--output", metavar="FILE", help="also write the JSON object to FILE")
    parser.set_defaults(func=run)


def settings_from(args: argparse.Namespace) -> BenchSettings:
    settings = BenchSettings.quick() if args.quick else BenchSettings()
    overrides: dict[str, Any] = {
        "lag_seconds": args.lag_seconds,
        "dispatch_runs": args.dispatch_runs,
        "raw_writes": args.raw_writes,
        "count_runs": args.count_runs,
        "crashes": args.crashes,
        "lease_seconds": args.lease_seconds,
        "claim_concurrency": args.claim_concurrency,
    }
    overrides = {k: v for k, v in overrides.items() if v is not None}
    if "lease_seconds" in overrides:
        overrides["heartbeat_seconds"] = max(1, overrides["lease_seconds"] // 2)
    return dataclasses.replace(settings, **overrides)


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    return value


def run(args: argparse.Namespace) -> int:
    for name, value in DUMMY_AWS_ENV.items():
        os.environ.setdefault(name, value)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    settings = settings_from(args)

    def progress(text: str) -> None:
        print(f"bench: {text}", file=sys.stderr, flush=True)

    result = _json_safe(run_bench(settings, progress))
    width = max(len(key) for key in SUMMARY_KEYS)
    for key in SUMMARY_KEYS:
        target = TARGETS.get(key, "")
        print(f"{key:<{width}}  {result[key]!s:>12}  {target}")
    for mode in ("", "_provisioned"):
        key = f"baseline_usd_per_million_runs{mode}"
        print(f"{key:<{width}}  {result[key]!s:>12}  {result['baseline_description']}")
    # Every stack shape's metered units and both prices, side by side (issue 37).
    print("by claim shape: write units a run, read units a run, $ a million runs on-demand / provisioned")
    for name, shape in result["by_claim_shape"].items():
        usd = shape["usd_per_million_runs"]
        print(
            f"  {name:<20} {shape['write_units_per_run']:>5g} {shape['read_units_per_run']:>8g}"
            f"  {usd['on_demand']['total']:>7.2f} / {usd['provisioned']['total']:.2f}"
        )
    if args.output:
        with open(args.output, "w", encoding="utf-8") as handle:
            json.dump(result, handle, indent=2, sort_keys=True)
            handle.write("\n")
    if args.json:
        print(json.dumps(result, sort_keys=True, separators=(",", ":")))
    return 0
