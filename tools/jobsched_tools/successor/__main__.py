"""``python -m jobsched_tools.successor [--k 2 3] [--keys instant epoch] [--sets NAME ...]
[--mutants] [--parts] [--reads | --mis | --overlap]``: explore the sets and print one line each
(schedules, states, seconds, violations); ``--mutants`` the proposal's four mutants; ``--parts``
every condition part removed alone, on the sets. The extensions' own sets: ``--reads`` lagging
reads, heartbeats, two detectors and adoption (``sets_reads.py``); ``--mis`` misfire policies,
``max_runs`` and backfill (``sets_mis.py``); ``--overlap`` the overlap policies and the chain
walk (``sets_overlap.py``)."""

from __future__ import annotations

import argparse
import json

from jobsched_tools.successor import sets_reads as reads
from jobsched_tools.successor.search import explore
from jobsched_tools.successor.sets import MUTANTS, SETS
from jobsched_tools.successor.writes import ALL_PARTS, Protocol


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--k", type=int, nargs="+", default=[2])
    parser.add_argument("--keys", nargs="+", default=["epoch"], choices=["instant", "epoch"])
    parser.add_argument("--sets", nargs="+", default=list(SETS))
    parser.add_argument("--mutants", action="store_true")
    parser.add_argument("--parts", action="store_true")
    parser.add_argument("--reads", action="store_true", help="the reads/heartbeats/adoption sets")
    parser.add_argument("--mis", action="store_true", help="the misfire/max_runs/backfill sets")
    parser.add_argument("--overlap", action="store_true", help="the overlap policies' sets (sets_overlap.py)")
    args = parser.parse_args()
    if args.reads:
        reads.main(args.k)
        return
    if args.mis:
        _mis(args.k, args.mutants, args.parts)
        return
    if args.overlap:
        from jobsched_tools.successor.sets_overlap import main_overlap

        main_overlap(args.k, args.parts)
        return
    _base(args)


def _base(args: argparse.Namespace) -> None:
    """The model's own sets, mutants and parts (``sets.py``)."""
    if args.mutants:
        for name, (proto, set_name) in MUTANTS.items():
            for k in args.k:
                result = explore(SETS[set_name], k, proto)
                print(json.dumps({"mutant": name, **result.summary()}), flush=True)
        return
    if args.parts:
        for part in ALL_PARTS:
            proto = Protocol(dropped=frozenset({part}))
            caught = {}
            for set_name in args.sets:
                result = explore(SETS[set_name], args.k[0], proto)
                if result.counts:
                    caught[set_name] = sorted(result.counts)
            print(json.dumps({"part": part, "caught_by": caught}), flush=True)
        return
    for keys in args.keys:
        for set_name in args.sets:
            for k in args.k:
                result = explore(SETS[set_name], k, Protocol(keys=keys))
                print(json.dumps({"keys": keys, **result.summary()}), flush=True)


def _mis(ks: list[int], mutants: bool, parts: bool) -> None:
    from jobsched_tools.successor.sets_mis import MUTANTS_MIS, SETS_MIS
    from jobsched_tools.successor.writes_mis import MIS_PARTS

    for k in ks:
        if mutants:
            for name, (proto, set_name) in MUTANTS_MIS.items():
                print(
                    json.dumps({"mutant": name, **explore(SETS_MIS[set_name], k, proto).summary()}),
                    flush=True,
                )
        elif parts:
            for part in MIS_PARTS:
                dropped = Protocol(dropped=frozenset({part}))
                caught = {
                    n: sorted(r.counts) for n, s in SETS_MIS.items() if (r := explore(s, k, dropped)).counts
                }
                print(json.dumps({"part": part, "caught_by": caught}), flush=True)
        else:
            for actor_set in SETS_MIS.values():
                print(json.dumps(explore(actor_set, k).summary()), flush=True)


if __name__ == "__main__":
    main()
