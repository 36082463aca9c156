"""``jobsched migrate successor-claim [--check]``: set, or check, the successor claim's migration
switch (issue 37; docs/proposals/successor-claim-build.md §5; ops/migrate.py), between the deploys
of ``ClaimShape=migrating`` and ``ClaimShape=successor``.

Exit status: 0 done (or every checked condition holds), 1 a condition does not hold yet, 2 the
stack is not deployed ``migrating`` with an ACTIVE ``due`` index (the switch is not set; the
message says what to deploy).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from jobsched_tools.cli.common import Subparsers, action_command, add_shard_count_option, emit, guarded
from jobsched_tools.deployment import TargetError, add_target_options, resolve_target

STEPS = (
    "An existing stack (ClaimShape=legacy) migrates in two deploys: deploy ClaimShape=migrating, "
    "set the switch, run --check until it reports ready, then deploy ClaimShape=successor "
    "(docs/deploy.md). A new stack (ClaimShape=successor, the default) needs none of this."
)


def _cmd_successor_claim(args: argparse.Namespace) -> int:
    import time

    from jobsched_tools.api import client_for, store_for
    from jobsched_tools.ops.migrate import NotMigrating, check, switch_on

    target = resolve_target(args)
    store = store_for(target)
    dynamodb = client_for("dynamodb", target)
    if args.check:
        shards = args.shard_count or target.shard_count
        if shards is None:
            raise TargetError("the shard count (the stack's ShardCount) is needed to query next-run")
        found = check(store, dynamodb, target.state_table, target.runs_table, shards)
        data: dict[str, Any] = {
            "ready": found.all_hold,
            "conditions": [c.__dict__ for c in found.conditions],
        }

        def human(d: dict[str, Any]) -> str:
            mark = {True: "ok  ", False: "NOT ", None: "?   "}
            lines = [f"{mark[c['holds']]}{c['name']}: {c['detail']}" for c in d["conditions"]]
            lines.append("ready for deploy 2" if d["ready"] else "not ready for deploy 2")
            return "\n".join(lines)

        emit(args, data, human)
        return 0 if found.all_hold else 1
    try:
        changed = switch_on(store, dynamodb, target.state_table, target.runs_table, int(time.time() * 1000))
    except NotMigrating as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    data = {"claim_shape": "successor", "changed": changed}
    emit(
        args,
        data,
        lambda d: "switch set: claim_shape = successor" if d["changed"] else "the switch was on already",
    )
    return 0


def register(subparsers: Subparsers) -> None:
    actions = action_command(
        subparsers,
        "migrate",
        "stack migrations (the successor claim: issue 37)",
        "Stack migrations. " + STEPS,
    )
    parser = actions.add_parser(
        "successor-claim",
        help="set the successor claim's switch, or --check the conditions for deploy 2",
        description=(
            "Set the migration switch of the successor claim (claim_shape on the miss detector's "
            "bookkeeping item), refusing (exit 2, saying what to deploy) unless the stack's tables "
            "are deployed ClaimShape=migrating with the 'due' index ACTIVE. --check reports each "
            "condition for deploy 2 it can verify (the shape, the switch, no state left in next-run "
            "now nor in the last whole reconcile pass, every next-run shard empty, every lease in "
            "due) and exits 1 until all hold. " + STEPS
        ),
    )
    add_target_options(parser)
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    add_shard_count_option(parser)
    parser.add_argument("--check", action="store_true", help="report the conditions; set nothing")
    parser.set_defaults(func=guarded(_cmd_successor_claim))
