"""``jobsched import PATH [--dry-run]``: EventBridge Scheduler schedules (``aws scheduler
get-schedule`` output: a JSON file, a list of them, or a directory of them) registered as jobs
through the Operations API, with what cannot be carried over said per schedule
(jobsched_tools/importer/eventbridge.py)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from jobsched.core.state import Registration

from jobsched_tools.cli.common import add_shard_count_option, guarded, operations
from jobsched_tools.deployment import TargetError, add_target_options, resolve_target


def _cmd_import(args: argparse.Namespace) -> int:
    """Exit status 2 when a schedule could not be imported (or its job was marked invalid)."""
    from jobsched.services.allow_lists import allow_list_problems

    from jobsched_tools.importer.eventbridge import load_plans, refuse_shared_job_ids

    plans = refuse_shared_job_ids(load_plans(Path(args.path)))
    results: list[dict[str, Any]] = []
    ops = None if args.dry_run else operations(args)
    allow = _allow_lists_if_named(args) if args.dry_run else None
    failed = False
    for plan in plans:
        entry = plan.as_dict()
        if plan.job is None:
            entry["action"] = "not imported"
            failed = True
        elif ops is None:
            # The check every registration path makes (services/allow_lists.py), without a write.
            problems = allow_list_problems(plan.job, allow) if allow is not None else []
            entry["action"] = "would be invalid" if problems else "would register"
            entry["blockers"] = problems
            failed = failed or bool(problems)
        else:
            try:
                entry["action"] = ops.register(plan.job).value
                job = ops.get(plan.job.job_id)
            except BrokenPipeError:
                raise
            except Exception as exc:  # this schedule's write failed: said, and the others go on
                entry["action"] = "not imported"
                entry["blockers"] = [f"the write failed: {type(exc).__name__}: {exc!s:.300}"]
                failed = True
                results.append(entry)
                continue
            if job.get("status") == Registration.INVALID.value:
                entry["action"] = Registration.INVALID.value
                entry["blockers"] = list(job.get("invalid_reasons") or [])
                failed = True
        results.append(entry)
    if args.json:
        print(json.dumps({"dry_run": args.dry_run, "schedules": results}, sort_keys=True, default=str))
    else:
        print(_human(results, args.dry_run))
    return 2 if failed else 0


def _allow_lists_if_named(args: argparse.Namespace) -> Any:
    """The allow-lists of the deployment the options name, for a dry run to check destinations
    against; None when no deployment is named or its lists are not known (nothing is checked)."""
    try:
        return resolve_target(args).allow_lists
    except TargetError:
        return None


def _human(results: list[dict[str, Any]], dry_run: bool) -> str:
    lines = []
    for entry in results:
        if entry["job"] is None:
            lines.append(f"{entry['source']}: not imported")
        else:
            job = entry["job"]
            what = f"{job['schedule']} in {job.get('timezone', 'UTC')}, target {job['target']}"
            if job.get("enabled") is False:
                what += ", paused"
            lines.append(f"{entry['source']} -> {entry['job_id']}: {entry['action']} ({what})")
        lines += [f"  - cannot: {reason}" for reason in entry["blockers"]]
        lines += [f"  - note: {note}" for note in entry["notes"]]
    counts: dict[str, int] = {}
    for entry in results:
        counts[entry["action"]] = counts.get(entry["action"], 0) + 1
    summary = ", ".join(f"{count} {action}" for action, count in sorted(counts.items()))
    noun = "schedule" if len(results) == 1 else "schedules"
    lines.append(f"{len(results)} {noun}: {summary}" + (" (dry run: nothing written)" if dry_run else ""))
    return "\n".join(lines)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    text = "register EventBridge Scheduler schedules (get-schedule JSON: a file or a directory) as jobs"
    parser = subparsers.add_parser("import", help=text, description=text)
    add_target_options(parser)
    parser.add_argument(
        "path", metavar="PATH", help="a get-schedule JSON file (or a list), or a directory of them"
    )
    parser.add_argument("--dry-run", action="store_true", help="show the plan; write nothing")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    add_shard_count_option(parser)
    parser.set_defaults(func=guarded(_cmd_import))
