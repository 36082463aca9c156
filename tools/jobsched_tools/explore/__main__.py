"""``python -m jobsched_tools.explore``: explore actor sets, print what was found."""

from __future__ import annotations

import argparse
import json
import sys

from jobsched.core.invariants import ALL

from jobsched_tools.explore.scenarios import ACTOR_SETS, CORE
from jobsched_tools.explore.search import explore
from jobsched_tools.explore.world import Budget


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jobsched_tools.explore", description=__doc__)
    parser.add_argument(
        "--set",
        action="append",
        dest="sets",
        choices=sorted(ACTOR_SETS),
        help="actor set (repeatable; default: the core sets)",
    )
    parser.add_argument("-k", type=int, default=3, help="most preemptions per schedule (default 3)")
    parser.add_argument("--crashes", type=int, default=None, help="crashes per schedule (default: the set's)")
    parser.add_argument("--lost", type=int, default=None, help="lost write responses per schedule")
    parser.add_argument("--stale", type=int, default=None, help="stale index reads per schedule")
    parser.add_argument("--dups", type=int, default=None, help="SQS duplicates per schedule")
    parser.add_argument("--reorder", action="store_true", help="workers may take any queued message")
    parser.add_argument(
        "--offsets",
        default="0",
        help="per-actor clock offsets to try, ms, comma separated (e.g. -3000,0,3000)",
    )
    parser.add_argument(
        "--invariants",
        default=",".join(ALL),
        help="invariants checked after every write (comma separated; empty: none)",
    )
    parser.add_argument("--max-schedules", type=int, default=None)
    parser.add_argument("--traces", type=int, default=1, help="traces printed per violated check")
    parser.add_argument(
        "--switch",
        metavar="FUNCTION:PART",
        action="append",
        help="switch off a condition part of core/transitions/ or core/dead_letter.py "
        "(sim/mutants.py condition_parts); repeatable: the parts are switched off together",
    )
    parser.add_argument("--json", action="store_true", help="a JSON summary as the last line")
    args = parser.parse_args(argv)
    if args.switch:
        from jobsched_tools.sim.mutants import condition_parts, switched_off

        unknown = [name for name in args.switch if name not in condition_parts()]
        if unknown:
            parser.error(f"no condition part {unknown[0]!r}: see docs/promises.md")
        with switched_off(*args.switch):
            return _explore(args)
    return _explore(args)


def _explore(args: argparse.Namespace) -> int:
    names = args.sets or sorted(CORE)
    offsets = tuple(int(o) for o in args.offsets.split(",") if o.strip())
    invariants = tuple(i for i in args.invariants.split(",") if i)
    summaries = []
    for name in names:
        actor_set = ACTOR_SETS[name]
        base = actor_set.budget
        budget = Budget(
            crashes=base.crashes if args.crashes is None else args.crashes,
            lost=base.lost if args.lost is None else args.lost,
            stale=base.stale if args.stale is None else args.stale,
            dups=base.dups if args.dups is None else args.dups,
            reorder=base.reorder or args.reorder,
            unanswered=base.unanswered,
        )
        from dataclasses import replace

        result = explore(replace(actor_set, budget=budget), args.k, invariants, offsets, args.max_schedules)
        summary = result.summary()
        summaries.append(summary)
        print(
            f"{name}: k={args.k} schedules={result.schedules} pruned={result.pruned} "
            f"states={result.states} time={result.seconds:.1f}s violations={dict(result.counts) or 'none'}"
        )
        for finding in result.violations[: max(0, args.traces) * len(result.violations)]:
            print(f"  {finding.headline()}  (in {result.counts[finding.check]} schedules)")
            for line in finding.trace:
                print(f"      {line}")
    if args.json:
        print(json.dumps({"results": summaries}))
    return 1 if any(s["violations"] for s in summaries) else 0


if __name__ == "__main__":
    sys.exit(main())
