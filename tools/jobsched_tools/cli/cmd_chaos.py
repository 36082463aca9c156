"""``jobsched chaos``: a seeded, deterministic simulation that checks exactly-once under faults.

With ``--json`` the last stdout line is one JSON object (a contract other tools read): ``seed``,
``occurrences_due``, ``committed_runs``, ``duplicate_commits``, ``duplicate_effects``,
``lost_occurrences``, ``policy_misses``, ``faults_injected``, ``leases_recovered``,
``invariant_violations`` and more. Exit status 1 when an invariant is violated, else 0.
"""

from __future__ import annotations

import argparse
import sys

from jobsched_tools.sim import ChaosConfig, run_chaos


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "chaos",
        help="simulate hours of scheduling under injected faults and check exactly-once",
        description="Drive the real trigger, worker, miss detector and store on a simulated clock, "
        "inject faults, and check the invariants. Reproducible from --seed.",
    )
    parser.add_argument("--seed", type=int, default=1, help="the seed every decision derives from")
    parser.add_argument("--jobs", type=int, default=150, help="number of jobs (default 150)")
    parser.add_argument("--hours", type=float, default=12.0, help="simulated hours (default 12)")
    parser.add_argument("--store", choices=("memory", "moto"), default="memory")
    parser.add_argument(
        "--mutant",
        choices=(
            "fencing",
            "lease",
            "slot",
            "claim",
            "advance",
            "heartbeat",
            "settle",
            "walk",
            "overtake",
            "completion",
            "cancel",
            "last_claim",
        ),
        help="remove one condition on purpose; the run must then report violations (sim/mutants.py)",
    )
    parser.add_argument(
        "--switch",
        metavar="FUNCTION:PART",
        action="append",
        help="switch off a condition part of core/transitions/ or core/dead_letter.py (sim/mutants.py "
        "condition_parts; docs/promises.md lists them); the run must then report violations. "
        "Repeatable: the parts are switched off together (a redundant set: tests/sim/test_switches.py "
        "PAIRS)",
    )
    parser.add_argument(
        "--successor",
        action="store_true",
        help="a successor-shaped stack (issue 37): the due index, the migration switch on, the checks "
        "read heads and markers (sim/successor.py); --switch then also takes the head_* writes' parts",
    )
    parser.add_argument(
        "--migrate-midway",
        action="store_true",
        help="a migrating stack (issue 37: the next-run, lease and due indexes, the switch off): every "
        "job starts on today's claim, and `jobsched migrate successor-claim` turns the switch on at a "
        "seeded moment with claims, runs and changes in flight (sim/migration.py); the legacy states "
        "are converted, the successor checks read the end; --switch then also takes the head_* parts",
    )
    parser.add_argument(
        "--lease-seconds",
        type=int,
        default=30,
        help="LeaseSeconds and DispatchLeaseSeconds of the simulated stack (default 30, at least 5)",
    )
    parser.add_argument("--json", action="store_true", help="end with one JSON line")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    config = ChaosConfig(
        seed=args.seed,
        jobs=args.jobs,
        hours=args.hours,
        store=args.store,
        successor=args.successor,
        lease_seconds=args.lease_seconds,
        migrate_midway=args.migrate_midway,
    )
    from contextlib import ExitStack

    with ExitStack() as removed:
        if args.mutant:
            from jobsched_tools.sim.mutants import mutant

            removed.enter_context(mutant(args.mutant))
        if args.switch:
            from jobsched_tools.sim.mutants import condition_parts, switched_off

            shaped = args.successor or args.migrate_midway
            known = condition_parts(shaped)
            unknown = [name for name in args.switch if name not in known]
            if unknown:
                print(
                    f"jobsched chaos: no condition part {unknown[0]!r}: see docs/promises.md",
                    file=sys.stderr,
                )
                return 2
            removed.enter_context(switched_off(*args.switch, successor=shaped))
        report = run_chaos(config)
    if args.json:
        if report.invariant_violations:
            print("\n".join(report.trace))
        print(report.json_line())
    else:
        print(report.summary())
    return 1 if report.invariant_violations else 0
