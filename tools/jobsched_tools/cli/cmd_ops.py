"""Operations commands: register, list, show, runs, pause, resume, trigger, backfill, delete.

Human-readable tables by default, ``--json`` for scripts.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeAlias
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from jobsched.core.errors import QueueError, StoreError
from jobsched.core.job import InvalidJob
from jobsched.core.state import Registration
from jobsched.services.operations import JobNotFound, Operations, describe_time

from jobsched_tools.deployment import TargetError, add_target_options, resolve_target


def _operations(args: argparse.Namespace) -> Operations:
    from jobsched_tools.api import operations_for

    return operations_for(resolve_target(args), args.shard_count)


def _table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> str:
    cells = [list(map(str, headers))] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _emit(args: argparse.Namespace, data: Any, human: Callable[[Any], str]) -> int:
    print(json.dumps(data, default=str, sort_keys=True) if args.json else human(data))
    return 0


def _cmd_register(args: argparse.Namespace) -> int:
    """Each job's registration as the registrar makes it (the same checks, the target's and its
    destination's too): ``JOB: scheduled``, or ``JOB: invalid`` with every reason at once. An
    invalid job is written and marked invalid, as put-item's would be; only an item without a
    valid job id is not written. Each job on its own; exit status 2 when any job is invalid."""
    raw = sys.stdin.read() if args.file == "-" else Path(args.file).read_text()
    items = json.loads(raw)
    results: dict[str, str] = {}
    reasons: dict[str, list[str]] = {}
    ops = _operations(args)
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

    _emit(args, results, human)
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


def _cmd_list(args: argparse.Namespace) -> int:
    ops = _operations(args)
    if args.group is not None or args.tag:
        # A group's or a tag's jobs: the job items matched by a paged scan, with their state.
        jobs = [ops.get(str(item["job_id"])) for item in ops.select(args.group, _tags(args))]
    else:
        jobs = ops.list_jobs()
    return _emit(
        args,
        jobs,
        lambda js: _table(
            [_job_row(j) for j in js], ["JOB", "SCHEDULE", "ZONE", "STATUS", "NEXT RUN", "TARGET"]
        ),
    )


def _cmd_show(args: argparse.Namespace) -> int:
    item = _operations(args).get(args.job_id)
    return _emit(args, item, _show_job)


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


NOTE_WIDTH = 60


def _note(text: str, width: int = NOTE_WIDTH) -> str:
    """The first line of a run's error or reason, at most ``width`` characters: cut at a word
    boundary and ended with an ellipsis when longer (``--json`` has the whole text)."""
    line = _first_line(text.strip())
    if len(line) <= width:
        return line
    head = line[: width - 1]
    if " " in head:
        head = head[: head.rindex(" ")]
    return head.rstrip(" ,;:.-") + "…"


def _cmd_top(args: argparse.Namespace) -> int:
    """Refreshes in place until Ctrl-C (``--once``: one view). Each refresh's reads are bounded
    (ops/top.py says how many)."""
    import time

    from jobsched.runtime.clock import SystemClock

    from jobsched_tools.api import store_for
    from jobsched_tools.ops.top import render, snapshot

    target = resolve_target(args)
    shards = args.shard_count or target.shard_count
    if shards is None:
        raise TargetError("the shard count (the stack's ShardCount) is needed for this deployment")
    store, clock = store_for(target), SystemClock()
    while True:
        status = snapshot(store, shards, clock.now_ms(), args.horizon)
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


def _cmd_runs(args: argparse.Namespace) -> int:
    runs = _operations(args).runs(args.job_id, args.limit)
    for run in runs:
        run.pop("definition", None)

    def human(rs: list[dict[str, Any]]) -> str:
        rows = [
            [
                describe_time(r["scheduled_at"]),
                r.get("kind", ""),
                r["status"],
                r.get("attempt", ""),
                describe_time(r.get("started_at")),
                describe_time(r.get("finished_at")),
                _note(str(r.get("last_error") or r.get("reason") or "")),
            ]
            for r in rs
        ]
        return _table(rows, ["SCHEDULED", "KIND", "STATUS", "ATTEMPT", "STARTED", "FINISHED", "NOTE"])

    return _emit(args, runs, human)


def _cmd_pause(args: argparse.Namespace) -> int:
    enabled = args.command == "resume"
    if args.group is not None or args.tag:
        if args.job_id is not None:
            raise ValueError("name a JOB or a --group/--tag, not both")
        done = _operations(args).set_enabled_where(enabled, args.group, _tags(args), args.max)
        report = {"jobs": done.jobs, "more": done.more}

        def human(d: dict[str, Any]) -> str:
            lines = [f"{job_id}: {outcome}" for job_id, outcome in d["jobs"].items()] or ["no job matched"]
            if d["more"]:
                lines.append(f"more jobs match: stopped at --max {args.max}; run it again to go on")
            return "\n".join(lines)

        return _emit(args, report, human)
    if args.job_id is None:
        raise ValueError("name a JOB, or a --group or --tag")
    outcome = _operations(args).set_enabled(args.job_id, enabled)
    return _emit(
        args,
        {"job_id": args.job_id, "registration": outcome.value},
        lambda d: f"{d['job_id']}: {d['registration']}",
    )


def _run_outcome(run: dict[str, Any] | None) -> str:
    """What a run record says happened to its occurrence, in a few words."""
    if run is None:
        return "no record (look again with `jobsched runs`)"
    status = str(run.get("status", "?"))
    why = run.get("reason") or run.get("last_error")
    if status == "pending":
        return "dispatched"
    return f"{status} ({_first_line(str(why))})" if why and status != "succeeded" else status


def _first_line(text: str) -> str:
    return text.splitlines()[0] if text else ""


def _cmd_trigger(args: argparse.Namespace) -> int:
    ops = _operations(args)
    run_id = ops.trigger(args.job_id, args.request_id)
    requested = getattr(run_id, "already_requested", False)
    run = ops.get_run(run_id)  # read back: what is true of it now
    data = {
        "run_id": str(run_id),
        "already_requested": bool(requested),
        "status": run.get("status") if run else None,
    }

    def human(d: dict[str, Any]) -> str:
        if d["already_requested"]:
            why = f": {_first_line(str(run['reason']))}" if run and run.get("reason") else ""
            status = f"its status: {d['status']}{why}"
            return f"already requested: {d['run_id']} ({status}); nothing new dispatched"
        if d["status"] == "pending":
            return f"dispatched {d['run_id']}"
        return f"{d['run_id']}: {_run_outcome(run)}"

    return _emit(args, data, human)


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


def _parse_instant(value: str) -> datetime:
    moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _cmd_backfill(args: argparse.Namespace) -> int:
    """Each occurrence in the range and what happened to it, read back from its run record after
    the backfill: dispatched (a new run, or the re-run of one recorded missed), or already
    recorded, with the record's status (and its reason when it did not run)."""
    ops = _operations(args)
    result = ops.backfill(args.job_id, _parse_instant(args.start), _parse_instant(args.end))
    how = {
        **{run_id: "new run" for run_id in result.created},
        **{run_id: "re-run of a missed occurrence" for run_id in result.rerun},
        **{run_id: "already recorded" for run_id in result.already_existed},
    }
    occurrences = []
    for run_id in sorted(how, key=lambda r: r.split("@", 1)[1]):
        run = ops.get_run(run_id)
        occurrences.append(
            {
                "run_id": run_id,
                "action": how[run_id],
                "status": run.get("status") if run else None,
                "reason": (run.get("reason") or run.get("missed_reason")) if run else None,
                "outcome": _run_outcome(run),
            }
        )
    data = {
        "created": result.created,
        "rerun": result.rerun,
        "already_existed": result.already_existed,
        "occurrences": occurrences,
    }

    def human(d: dict[str, Any]) -> str:
        if not d["occurrences"]:
            return f"no occurrences of {args.job_id} in ({args.start}, {args.end}]"
        width = max(len(o["run_id"]) for o in d["occurrences"])
        lines = []
        for o in d["occurrences"]:
            if o["action"] == "already recorded":
                what = f"already recorded: {o['outcome']}; left alone"
            else:
                what = f"{o['outcome']}: {o['action']}"
                if o["action"].startswith("re-run") and o["reason"]:
                    what += f" (it was missed: {_first_line(str(o['reason']))})"
            lines.append(f"{o['run_id'].ljust(width)}  {what}")
        lines.append(
            f"{_count(len(d['occurrences']), 'occurrence')}: {_count(len(d['created']), 'new run')}, "
            f"{_count(len(d['rerun']), 're-run of a missed one', 're-runs of missed ones')}, "
            f"{len(d['already_existed'])} already recorded"
        )
        return "\n".join(lines)

    return _emit(args, data, human)


def _cmd_delete(args: argparse.Namespace) -> int:
    _operations(args).delete(args.job_id)
    return _emit(
        args, {"deleted": args.job_id}, lambda d: f"deleted {d['deleted']} (its runs stay as history)"
    )


REDRIVE_BATCH = 10  # SQS's most per receive and per batch send


def _cmd_dlq_redrive(args: argparse.Namespace) -> int:
    """Move the dead-letter queue's messages back to the work queue: receive a batch, send it,
    then delete from the DLQ what was sent. At least once: a message sent and not yet deleted
    when this stops is sent again next time, and the worker drops the duplicate (its run record
    is fenced). Works on AWS and on the local stack (moto has no StartMessageMoveTask)."""
    from jobsched_tools.api import _client

    target = resolve_target(args)
    if not target.dlq_url:
        raise TargetError(
            "the dead-letter queue is not known: "
            "give --dlq-url (or JOBSCHED_DLQ_URL), --stack-name or --local"
        )
    sqs = _client("sqs", target)
    moved = failed = 0
    while args.max is None or moved < args.max:
        want = REDRIVE_BATCH if args.max is None else min(REDRIVE_BATCH, args.max - moved)
        received = sqs.receive_message(
            QueueUrl=target.dlq_url,
            MaxNumberOfMessages=want,
            WaitTimeSeconds=1,
            MessageAttributeNames=["All"],
        ).get("Messages", [])
        if not received:
            break
        entries = [
            {
                "Id": str(i),
                "MessageBody": m["Body"],
                **(
                    {"MessageAttributes": _attributes(m["MessageAttributes"])}
                    if m.get("MessageAttributes")
                    else {}
                ),
            }
            for i, m in enumerate(received)
        ]
        sent = sqs.send_message_batch(QueueUrl=target.queue_url, Entries=entries)
        done = {entry["Id"] for entry in sent.get("Successful", [])}
        failed += len(sent.get("Failed", []))
        if done:
            sqs.delete_message_batch(
                QueueUrl=target.dlq_url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                    for i, m in enumerate(received)
                    if str(i) in done
                ],
            )
        moved += len(done)
        if len(done) < len(received):
            break  # the work queue refused some: they stay on the DLQ (visible again later)
    data = {"moved": moved, "failed": failed, "dlq_url": target.dlq_url, "queue_url": target.queue_url}

    def human(d: dict[str, Any]) -> str:
        text = f"moved {_count(d['moved'], 'message')} from the dead-letter queue to the work queue"
        if d["failed"]:
            text += f"; {_count(d['failed'], 'message')} refused by the work queue stay on the DLQ"
        return text

    _emit(args, data, human)
    return 1 if failed else 0


def _attributes(attributes: dict[str, Any]) -> dict[str, Any]:
    """A received message's attributes as SendMessage takes them."""
    keep = ("DataType", "StringValue", "BinaryValue")
    return {name: {k: v for k, v in value.items() if k in keep} for name, value in attributes.items()}


def _guarded(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        try:
            return func(args)
        except BrokenPipeError:
            raise  # the reader went away (`| head`): main() exits quietly
        except Exception as exc:
            what = _readable(exc)
            if what is None:
                raise
            print(f"error: {what}", file=sys.stderr)
            return 2

    return run


def _readable(exc: Exception) -> str | None:
    """What to tell a person about an error that is about their setup, not a bug; None for
    anything else (which keeps its traceback)."""
    from botocore.exceptions import NoCredentialsError, NoRegionError

    if isinstance(exc, JobNotFound):
        return f"no job {exc}"
    if isinstance(exc, NoRegionError):
        return "no AWS region: set AWS_DEFAULT_REGION (or AWS_REGION), or use --local for the local stack"
    if isinstance(exc, NoCredentialsError):
        return "no AWS credentials: configure them (aws configure, AWS_PROFILE, ...), or use --local"
    if isinstance(exc, StoreError | QueueError):
        return f"the deployment did not answer as expected: {exc}"
    if isinstance(exc, TargetError | ValueError | OSError):
        return str(exc)
    return None


def _selection(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--group", help="the jobs whose group is this")
    parser.add_argument(
        "--tag", action="append", metavar="KEY=VALUE", help="the jobs with this tag (repeatable)"
    )


Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def action_command(subparsers: Subparsers, name: str, help_text: str, description: str) -> Subparsers:
    """A command made of actions (``jobsched dlq redrive``, ``jobsched outcomes replay``): its
    parser, which requires an ACTION; returns the subparsers to add the actions to."""
    parser = subparsers.add_parser(name, help=help_text, description=description)

    def usage(_args: argparse.Namespace) -> int:  # not reached: ACTION is required
        parser.print_usage(sys.stderr)
        return 2

    parser.set_defaults(func=usage)
    return parser.add_subparsers(dest="action", required=True, metavar="ACTION")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    def command(
        name: str, func: Callable[[argparse.Namespace], int], help_text: str
    ) -> argparse.ArgumentParser:
        parser = subparsers.add_parser(name, help=help_text, description=help_text)
        add_target_options(parser)
        parser.add_argument("--json", action="store_true", help="machine-readable output")
        parser.add_argument(
            "--shard-count",
            type=int,
            default=int(os.environ["JOBSCHED_SHARD_COUNT"])
            if os.environ.get("JOBSCHED_SHARD_COUNT")
            else None,
            help="the stack's ShardCount (read from the stack or local state when omitted)",
        )
        parser.set_defaults(func=_guarded(func))
        return parser

    command(
        "register", _cmd_register, "create or update jobs from a JSON file (object or list)"
    ).add_argument("file", help="path, or - for stdin")
    listing = command("list", _cmd_list, "list jobs")
    _selection(listing)
    for name, func, text in (
        ("show", _cmd_show, "show a job and its scheduler state"),
        ("delete", _cmd_delete, "delete a job; its run history stays"),
    ):
        command(name, func, text).add_argument("job_id", metavar="JOB")
    top = command("top", _cmd_top, "a live status view, refreshed in place (bounded reads a refresh)")
    top.add_argument("--interval", type=float, default=5.0, help="seconds between refreshes (default 5)")
    top.add_argument("--once", action="store_true", help="print one view and stop")
    top.add_argument("--horizon", type=int, default=600, help="show occurrences due within this many seconds")
    for name, text in (
        ("pause", "stop scheduling a job (in-flight runs finish)"),
        ("resume", "resume a paused job from its next occurrence"),
    ):
        parser = command(name, _cmd_pause, text)
        parser.add_argument("job_id", metavar="JOB", nargs="?")
        _selection(parser)
        parser.add_argument("--max", type=int, default=100, help="most jobs one group operation changes")
    runs = command("runs", _cmd_runs, "a job's recent runs, newest first")
    runs.add_argument("job_id", metavar="JOB")
    runs.add_argument("--limit", type=int, default=20)
    trigger = command("trigger", _cmd_trigger, "run a job now, outside its schedule")
    trigger.add_argument("job_id", metavar="JOB")
    trigger.add_argument("--request-id", help="idempotency: the same id runs once")
    backfill = command(
        "backfill",
        _cmd_backfill,
        "run the past occurrences in (FROM, TO], missed ones too, each at most once",
    )
    backfill.add_argument("job_id", metavar="JOB")
    actions = action_command(
        subparsers,
        "dlq",
        "the work queue's dead-letter queue: redrive its messages to the work queue",
        "The work queue's dead-letter queue.",
    )
    redrive = actions.add_parser(
        "redrive",
        help="move the DLQ's messages back to the work queue (at least once; works locally too)",
        description=(
            "Receive the dead-letter queue's messages and send them to the work queue, then delete "
            "them from the DLQ. Exit status 1 when the work queue refused some."
        ),
    )
    add_target_options(redrive)
    redrive.add_argument("--json", action="store_true", help="machine-readable output")
    redrive.add_argument("--max", type=int, default=None, help="move at most this many (default: all)")
    redrive.set_defaults(func=_guarded(_cmd_dlq_redrive))
    backfill.add_argument("--from", dest="start", required=True, metavar="ISO8601")
    backfill.add_argument("--to", dest="end", required=True, metavar="ISO8601")
