"""``jobsched top``: a live status view of a stack, refreshed in place (ops/top.py)."""

from __future__ import annotations

import argparse
import json

from jobsched_tools.cli.common import Subparsers, add_command
from jobsched_tools.deployment import TargetError, resolve_target


def _cmd_top(args: argparse.Namespace) -> int:
    """Refreshes in place until Ctrl-C (``--once``: one view). Each refresh's reads are bounded
    (ops/top.py says how many)."""
    import time

    from jobsched.runtime.clock import SystemClock

    from jobsched_tools.api import claim_shape_of, store_for
    from jobsched_tools.ops.top import render, snapshot

    target = resolve_target(args)
    shards = args.shard_count or target.shard_count
    if shards is None:
        raise TargetError("the shard count (the stack's ShardCount) is needed for this deployment")
    store, clock = store_for(target), SystemClock()
    shape = claim_shape_of(target)
    while True:
        status = snapshot(store, shards, clock.now_ms(), args.horizon, shape)
        if args.json:
            print(json.dumps(status.__dict__, default=str, sort_keys=True), flush=True)
        else:
            print(("" if args.once else "\x1b[H\x1b[2J") + render(status), flush=True)
        if args.once:
            return 0
        try:
            time.sleep(args.interval)
        except KeyboardInterrupt:
            return 0


def register(subparsers: Subparsers) -> None:
    top = add_command(
        subparsers, "top", _cmd_top, "a live status view, refreshed in place (bounded reads a refresh)"
    )
    top.add_argument("--interval", type=float, default=5.0, help="seconds between refreshes (default 5)")
    top.add_argument("--once", action="store_true", help="print one view and stop")
    top.add_argument("--horizon", type=int, default=600, help="show occurrences due within this many seconds")
