"""``jobsched outcomes replay``: put the terminal outcomes recorded in a window on the outcome bus
again, after records expired from the runs stream unpublished (``OutcomeFailureQueueAlarm``;
docs/operations.md, "Outcome events"). At least once, like the publisher: consumers deduplicate
on ``outcome_id``, so a replay that overlaps what was published costs only duplicates."""

from __future__ import annotations

import argparse
import os
from typing import Any

from jobsched_tools.cli.common import action_command, count, emit, guarded, parse_instant
from jobsched_tools.deployment import add_target_options, resolve_target

PAGE = 500  # records a Scan page reads


def _cmd_replay(args: argparse.Namespace) -> int:
    from jobsched.adapters.outcome_events import EventBridgeOutcomeSink
    from jobsched.core.writes import RUNS
    from jobsched.services.outcomes import recorded_outcome

    from jobsched_tools.api import client_for, store_for

    since = int(parse_instant(args.since).timestamp() * 1000)
    until = int(parse_instant(args.until).timestamp() * 1000)
    if until < since:
        raise ValueError(f"--until {args.until} is before --since {args.since}")
    if not args.dry_run and not args.bus:
        raise ValueError("which bus? give --bus (the stack's OutcomeEventBusName) or JOBSCHED_OUTCOME_BUS")
    target = resolve_target(args)
    store = store_for(target)
    sink = None if args.dry_run else EventBridgeOutcomeSink(client_for("events", target), args.bus)
    scanned = found = put = 0
    refused: list[str] = []
    cursor = None
    while True:
        page = store.scan(RUNS, PAGE, cursor)
        scanned += len(page.items)
        outcomes = [o for item in page.items if (o := recorded_outcome(item, since, until)) is not None]
        found += len(outcomes)
        if sink is not None and outcomes:
            rejections = sink.publish(outcomes)
            refused += [f"{outcomes[r.index].outcome_id}: {r.error}" for r in rejections]
            put += len(outcomes) - len(rejections)
        cursor = page.cursor
        if cursor is None:
            break
    data = {"scanned": scanned, "outcomes": found, "put": put, "refused": refused, "dry_run": args.dry_run}

    def human(d: dict[str, Any]) -> str:
        window = f"recorded from {args.since} to {args.until} (of {count(d['scanned'], 'run')} read)"
        if d["dry_run"]:
            return f"{count(d['outcomes'], 'outcome')} {window}; none put"
        lines = [f"put {count(d['put'], 'outcome')} {window} on {args.bus}"]
        lines += [f"  not taken: {line}" for line in d["refused"]]
        return "\n".join(lines)

    emit(args, data, human)
    return 1 if refused else 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    actions = action_command(
        subparsers,
        "outcomes",
        "outcome events: replay the outcomes of a window on the outcome bus",
        "Outcome events (docs/operations.md).",
    )
    replay = actions.add_parser(
        "replay",
        help="put every terminal outcome recorded in [SINCE, UNTIL] on the bus again",
        description=(
            "Scan the runs table and put every terminal outcome recorded in [SINCE, UNTIL] on the "
            "outcome bus again (at least once: consumers deduplicate on outcome_id). For records "
            "that expired from the runs stream unpublished: the failure queue's message gives the "
            "window. Exit status 1 when the bus refused some."
        ),
    )
    add_target_options(replay)
    replay.add_argument("--since", required=True, metavar="ISO8601")
    replay.add_argument("--until", required=True, metavar="ISO8601")
    replay.add_argument(
        "--bus", default=os.environ.get("JOBSCHED_OUTCOME_BUS"), help="the outcome bus's name"
    )
    replay.add_argument("--dry-run", action="store_true", help="count the outcomes; put nothing")
    replay.add_argument("--json", action="store_true", help="machine-readable output")
    replay.set_defaults(func=guarded(_cmd_replay))
