"""Soak: the multi-process fault session for longer, with more kills.

    .venv/bin/python scripts/soak.py --minutes 10 --seed 1

Two triggers and several workers run as separate processes against one moto server; every few
seconds a random (seeded) one is SIGKILLed and restarted. At the end the stack drains and the
invariants are checked from the run records and the ledger table. Exit status 1 on a violation.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--triggers", type=int, default=2)
    parser.add_argument("--kill-every", type=float, nargs=2, default=(1.5, 4.0), metavar=("MIN", "MAX"))
    args = parser.parse_args()
    from jobsched_tools.emulator.credentials import DUMMY_AWS_ENV

    for key, value in DUMMY_AWS_ENV.items():
        os.environ.setdefault(key, value)
    os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")

    from jobsched_tools.local.kills import invariant_report, run_faults

    report, plan = run_faults(
        args.minutes * 60,
        args.seed,
        workers=args.workers,
        triggers=args.triggers,
        every_s=tuple(args.kill_every),
        say=lambda text: print(text, flush=True),
    )
    print(f"\nsoak: {args.minutes} min, seed {args.seed}, {len(plan.log)} SIGKILLs")
    print(
        f"occurrences due {report.occurrences_due}, runs {report.runs_total} "
        f"(succeeded {report.runs_succeeded}, "
        f"failed {report.runs_failed}, skipped {report.runs_skipped}, missed {report.runs_missed}), "
        f"leases recovered {report.leases_recovered}, ledger rows {report.ledger_rows}"
    )
    lines = invariant_report(report)
    print("\n".join(lines))
    for violation in report.violations[:50]:
        print("  ", violation)
    summary = {k: v for k, v in report.as_dict().items() if k not in ("per_job", "violations")}
    summary.update(kills=len(plan.log), violations=len(report.violations))
    print(json.dumps(summary, sort_keys=True))
    return 0 if all(line.startswith("ok") for line in lines) else 1


if __name__ == "__main__":
    sys.exit(main())
