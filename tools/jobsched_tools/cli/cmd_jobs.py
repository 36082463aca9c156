"""The commands on job definitions: register, list, show, pause, resume, delete.

Human-readable tables by default, ``--json`` for scripts.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from jobsched.core.job import InvalidJob, JobDefinition
from jobsched.core.state import Registration
from jobsched.services.operations import Operations, describe_time

from jobsched_tools.cli.common import Subparsers, add_command, emit, operations, table


def _cmd_register(args: argparse.Namespace) -> int:
    """Each job's registration as the registrar makes it (the same checks, the target's and its
    destination's too): ``JOB: scheduled``, or ``JOB: invalid`` with every reason at once. An
    invalid job is written and marked invalid, as put-item's would be; only an item without a
    valid job id is not written. Each job on its own; exit status 2 when any job is invalid."""
    raw = sys.stdin.read() if args.file == "-" else Path(args.file).read_text()
    items = json.loads(raw)
    results: dict[str, str] = {}
    reasons: dict[str, list[str]] = {}
    ops = operations(args)
    for index, item in enumerate(items if isinstance(items, list) else [items]):
        if not isinstance(item, dict):
            results[f"#{index + 1}"] = Registration.INVALID.value
            reasons[f"#{index + 1}"] = [f"not a job item (a JSON object): {item!r:.80}"]
            continue
        if isinstance(item.get("payload"), dict):
            item = {**item, "payload": json.dumps(item["payload"])}
        job_id = str(item.get("job_id", f"#{index + 1}"))
        try:
            outcome = ops.register(item).value
        except InvalidJob as exc:  # no valid job id: nothing written
            results[job_id], reasons[job_id] = Registration.INVALID.value, [*exc.reasons, "(nothing written)"]
            continue
        job = ops.get(job_id)
        if job.get("status") == Registration.INVALID.value:
            outcome = Registration.INVALID.value
            reasons[job_id] = list(job.get("invalid_reasons") or [])
        results[job_id] = outcome

    def human(r: dict[str, str]) -> str:
        lines = []
        for job_id, outcome in r.items():
            lines.append(f"{job_id}: {outcome}")
            lines += [f"  - {reason}" for reason in reasons.get(job_id, [])]
        return "\n".join(lines)

    emit(args, results, human)
    return 2 if reasons else 0


def _job_row(item: dict[str, Any]) -> list[Any]:
    return [
        item["job_id"],
        item.get("schedule", "?"),
        item.get("timezone", "UTC"),
        item.get("status", "unregistered"),
        describe_time(item.get("next_run_at")),
        item.get("target", "?"),
    ]


def _tags(args: argparse.Namespace) -> dict[str, str]:
    tags: dict[str, str] = {}
    for text in getattr(args, "tag", None) or []:
        key, sep, value = text.partition("=")
        if not sep or not key:
            raise ValueError(f"--tag {text!r}: write it as key=value")
        tags[key] = value
    return tags


def _selection(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--group", help="the jobs whose group is this")
    parser.add_argument(
        "--tag", action="append", metavar="KEY=VALUE", help="the jobs with this tag (repeatable)"
    )


def _cmd_list(args: argparse.Namespace) -> int:
    ops = operations(args)
    if args.group is not None or args.tag:
        # A group's or a tag's jobs: the job items matched by a paged scan, with their state.
        jobs = [ops.get(str(item["job_id"])) for item in ops.select(args.group, _tags(args))]
    else:
        jobs = ops.list_jobs()
    return emit(
        args,
        jobs,
        lambda js: table(
            [_job_row(j) for j in js], ["JOB", "SCHEDULE", "ZONE", "STATUS", "NEXT RUN", "TARGET"]
        ),
    )


def _cmd_show(args: argparse.Namespace) -> int:
    item = _with_defaults(operations(args).get(args.job_id))
    return emit(args, item, _show_job)


def _with_defaults(item: dict[str, Any]) -> dict[str, Any]:
    """The job as jobsched reads it: every definition field with its value in effect (defaults
    included, in their canonical form), so that ``show`` prints the same fields whether the job
    was written by ``register`` (which stores the defaults) or by a bare put-item (which may
    hold only a schedule and a target). The item's other attributes (status, next run, ...) as
    they are. A definition that does not parse is shown as stored, with its reasons."""
    from jobsched.core.job import DEFINITION_FIELDS, OPTIONAL_FIELDS

    try:
        definition = JobDefinition.from_item(item)
    except InvalidJob:
        return item
    fields = {**OPTIONAL_FIELDS, **definition.to_item()}
    return {**{k: v for k, v in item.items() if k not in DEFINITION_FIELDS}, **fields}


def _show_job(job: dict[str, Any]) -> str:
    """One ``name: value`` line per attribute: instants (``*_at``, epoch milliseconds) as
    ``list`` shows them, with the wall time in the job's zone beside them; maps and lists as
    JSON; the invalid reasons once, as a list, at the end."""
    zone = str(job.get("timezone") or "UTC")
    lines = []
    for name in sorted(job):
        value = job[name]
        if name == "invalid_reasons":
            continue
        if name.endswith("_at") and isinstance(value, int | float) and not isinstance(value, bool):
            text = _describe_instant(int(value), zone)
        elif value is None:
            text = "-"
        elif isinstance(value, str):
            text = value
        else:
            text = json.dumps(value, default=str, sort_keys=True)
        lines.append(f"{name}: {text}")
    if job.get("invalid_reasons"):
        lines.append("why it is invalid:")
        lines += [f"  - {r}" for r in job["invalid_reasons"]]
    return "\n".join(lines)


def _describe_instant(ms: int, zone: str) -> str:
    """``2026-12-04 02:00:00 UTC (03:00:00 CET in Europe/Berlin)``; UTC alone for a UTC job."""
    text = describe_time(ms)
    if zone == "UTC":
        return text
    try:
        local = datetime.fromtimestamp(ms / 1000, ZoneInfo(zone))
    except (ZoneInfoNotFoundError, ValueError):
        return text
    same_day = local.date() == datetime.fromtimestamp(ms / 1000, UTC).date()
    wall = local.strftime("%H:%M:%S %Z" if same_day else "%Y-%m-%d %H:%M:%S %Z")
    return f"{text} ({wall} in {zone})"


def _cmd_pause(args: argparse.Namespace) -> int:
    enabled = args.command == "resume"
    if args.group is not None or args.tag:
        if args.job_id is not None:
            raise ValueError("name a JOB or a --group/--tag, not both")
        ops = operations(args)
        done = ops.set_enabled_where(enabled, args.group, _tags(args), args.max)
        # Every job here needed the change (the operation passes over those already as asked):
        # "unchanged" means the stack's registrar applied our write first.
        done.jobs = {job_id: _applied(ops, job_id, outcome) for job_id, outcome in done.jobs.items()}
        # The jobs that match but were not changed: already as asked (the operation passes them
        # over). One more bounded scan, so that a second run says so instead of "no job matched".
        matched = [str(item["job_id"]) for item in ops.select(args.group, _tags(args), args.max)]
        already = [job_id for job_id in matched if job_id not in done.jobs]
        report = {"jobs": done.jobs, "already": already, "more": done.more}
        as_asked = "already enabled" if enabled else "already paused"

        def human(d: dict[str, Any]) -> str:
            lines = [f"{job_id}: {outcome}" for job_id, outcome in d["jobs"].items()]
            lines += [f"{job_id}: {as_asked}" for job_id in d["already"]]
            lines = lines or ["no job matched"]
            if d["more"]:
                lines.append(f"more jobs match: stopped at --max {args.max}; run it again to go on")
            return "\n".join(lines)

        return emit(args, report, human)
    if args.job_id is None:
        raise ValueError("name a JOB, or a --group or --tag")
    ops = operations(args)
    was_paused = ops.get(args.job_id).get("status") == "paused"
    outcome = ops.set_enabled(args.job_id, enabled).value
    if outcome == Registration.UNCHANGED.value and was_paused != enabled:
        outcome = "already enabled" if enabled else "already paused"
    else:
        outcome = _applied(ops, args.job_id, outcome)
    return emit(
        args,
        {"job_id": args.job_id, "registration": outcome},
        lambda d: f"{d['job_id']}: {d['registration']}",
    )


def _applied(ops: Operations, job_id: str, outcome: str) -> str:
    """A pause's or resume's outcome as the job now is. The CLI writes ``enabled`` and then
    applies it with the registrar, as the stack's registrar does from the stream: when that one
    got there first, ours finds nothing to do (``unchanged``), although the change was made. Say
    what the job is now (``paused``, ``scheduled`` for an active one) instead."""
    if outcome != Registration.UNCHANGED.value:
        return outcome
    status = str(ops.get(job_id).get("status", outcome))
    return Registration.SCHEDULED.value if status == "active" else status


def _cmd_delete(args: argparse.Namespace) -> int:
    operations(args).delete(args.job_id)
    return emit(
        args, {"deleted": args.job_id}, lambda d: f"deleted {d['deleted']} (its runs stay as history)"
    )


def register(subparsers: Subparsers) -> None:
    add_command(
        subparsers, "register", _cmd_register, "create or update jobs from a JSON file (object or list)"
    ).add_argument("file", help="path, or - for stdin")
    listing = add_command(subparsers, "list", _cmd_list, "list jobs")
    _selection(listing)
    for name, func, text in (
        ("show", _cmd_show, "show a job and its scheduler state"),
        ("delete", _cmd_delete, "delete a job; its run history stays"),
    ):
        add_command(subparsers, name, func, text).add_argument("job_id", metavar="JOB")
    for name, text in (
        ("pause", "stop scheduling a job (in-flight runs finish)"),
        ("resume", "resume a paused job from its next occurrence"),
    ):
        parser = add_command(subparsers, name, _cmd_pause, text)
        parser.add_argument("job_id", metavar="JOB", nargs="?")
        _selection(parser)
        parser.add_argument("--max", type=int, default=100, help="most jobs one group operation changes")
