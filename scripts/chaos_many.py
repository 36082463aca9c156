"""Run the chaos simulation for seeds 1..N at a small size and summarise.

    .venv/bin/python scripts/chaos_many.py [--seeds 200] [--jobs 30] [--hours 2] [--processes 2]

Prints one line per failing seed (with the command that reproduces it) and a total; exits 1 if
any seed violated an invariant.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from jobsched_tools.sim import ChaosConfig, run_chaos


def one(args: tuple[int, int, float]) -> dict[str, Any]:
    seed, jobs, hours = args
    return run_chaos(ChaosConfig(seed=seed, jobs=jobs, hours=hours)).to_json()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=200, help="run seeds 1..N (default 200)")
    parser.add_argument("--jobs", type=int, default=30)
    parser.add_argument("--hours", type=float, default=2.0)
    parser.add_argument("--processes", type=int, default=2)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    totals: Counter[str] = Counter()
    faults: Counter[str] = Counter()
    failing: list[int] = []
    work = [(seed, args.jobs, args.hours) for seed in range(1, args.seeds + 1)]
    with ProcessPoolExecutor(max_workers=args.processes) as pool:
        for report in pool.map(one, work):
            for key in (
                "occurrences_due",
                "committed_runs",
                "policy_misses",
                "duplicate_commits",
                "duplicate_effects",
                "lost_occurrences",
                "leases_recovered",
            ):
                totals[key] += report[key]
            faults.update(report["faults_injected"])
            if report["invariant_violations"]:
                failing.append(report["seed"])
                seed, violations = report["seed"], report["invariant_violations"]
                print(f"seed {seed}: {len(violations)} violation(s), e.g. {violations[0]}", flush=True)
                print(f"  reproduce: jobsched chaos --seed {seed} --jobs {args.jobs} --hours {args.hours:g}")
    elapsed = time.perf_counter() - started
    print(f"{args.seeds} seeds ({args.jobs} jobs, {args.hours:g} h each) in {elapsed:.0f} s")
    print("  " + ", ".join(f"{key} {value}" for key, value in totals.items()))
    print("  faults: " + ", ".join(f"{key} {value}" for key, value in sorted(faults.items())))
    print(f"  seeds with violations: {len(failing)}" + (f" {failing}" if failing else ""))
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
