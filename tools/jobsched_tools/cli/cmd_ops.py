"""Operations commands: register, list, show, runs, pause, resume, trigger, backfill, delete.

Human-readable tables by default, ``--json`` for scripts.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeAlias
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from jobsched.core.job import InvalidJob, JobDefinition
from jobsched.core.state import Registration
from jobsched.services.operations import Operations, describe_time

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
    item = _with_defaults(_operations(args).get(args.job_id))
    return _emit(args, item, _show_job)


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


NOTE_MIN_WIDTH = 40  # on a narrow terminal the row wraps rather than lose the note
_ARN = re.compile(r"\barn:[^\s:]+:[^\s:]+:[^\s:]*:[^\s:]*:(\S+)")


def _note(text: str, width: int) -> str:
    """The first line of a run's error or reason in at most ``width`` characters, keeping what a
    person acts on: an ARN is cut to its tail (``…:orders`` names the resource; the partition,
    region and account rarely matter), and only then is the line cut at a word, with an
    ellipsis; where even that would lose the resource, the words before it go first (``--json``
    has the whole text)."""
    line = _first_line(text.strip())
    if len(line) <= width:
        return line
    line = _ARN.sub(r"…:\1", line)
    if len(line) <= width:
        return line
    cut = _cut_at_word(line, width)
    tail = next((word for word in line.split() if word.startswith("…:")), None)
    if tail is None or tail in cut:
        return cut
    first = line.split()[0]
    if len(first) + 1 + len(tail) > width:  # even the tail is too long: keep its end
        return f"{first} …{tail[len(first) + 3 - width :]}"
    return _cut_at_word(f"{first} {tail} {line[line.index(tail) + len(tail) :].strip()}", width)


def _cut_at_word(line: str, width: int) -> str:
    if len(line) <= width:
        return line
    head = line[: width - 1]
    if " " in head:
        head = head[: head.rindex(" ")]
    return head.rstrip(" ,;:.-") + "…"


def _terminal_width() -> int:
    """The terminal's width: ``COLUMNS`` when set, else the terminal's own, else 80 (a pipe)."""
    import shutil

    return shutil.get_terminal_size().columns


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
        headers = ["SCHEDULED", "KIND", "STATUS", "ATTEMPT", "STARTED", "FINISHED"]
        rows = [
            [
                describe_time(r["scheduled_at"]),
                r.get("kind", ""),
                r["status"],
                r.get("attempt", ""),
                describe_time(r.get("started_at")),
                describe_time(r.get("finished_at")),
            ]
            for r in rs
        ]
        # The NOTE column gets what the terminal has left after the others (at least a few words).
        widths = [max(len(str(row[i])) for row in [headers, *rows]) for i in range(len(headers))]
        room = max(NOTE_MIN_WIDTH, _terminal_width() - sum(widths) - 2 * len(widths))
        for row, r in zip(rows, rs, strict=True):
            row.append(_note(_run_note(r), room))
        return _table(rows, [*headers, "NOTE"])

    return _emit(args, runs, human)


def _cmd_pause(args: argparse.Namespace) -> int:
    enabled = args.command == "resume"
    if args.group is not None or args.tag:
        if args.job_id is not None:
            raise ValueError("name a JOB or a --group/--tag, not both")
        ops = _operations(args)
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

        return _emit(args, report, human)
    if args.job_id is None:
        raise ValueError("name a JOB, or a --group or --tag")
    ops = _operations(args)
    was_paused = ops.get(args.job_id).get("status") == "paused"
    outcome = ops.set_enabled(args.job_id, enabled).value
    if outcome == Registration.UNCHANGED.value and was_paused != enabled:
        outcome = "already enabled" if enabled else "already paused"
    else:
        outcome = _applied(ops, args.job_id, outcome)
    return _emit(
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


def _run_note(run: dict[str, Any]) -> str:
    """A run's note: why it did not run, or its error; none for a run that succeeded (an earlier
    attempt's error stays on the record, and is not why it ended)."""
    if run.get("status") == "succeeded":
        return ""
    return str(run.get("last_error") or run.get("reason") or "")


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
        # One form, whatever the run's state when it is read back: ``RUN: what happened``.
        if d["already_requested"]:
            why = f": {_first_line(str(run['reason']))}" if run and run.get("reason") else ""
            status = f"its status: {d['status']}{why}"
            return f"{d['run_id']}: already requested ({status}); nothing new dispatched"
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


def _dlq(args: argparse.Namespace) -> tuple[Any, str, str, Callable[[str | None], str]]:
    """The SQS client, the DLQ's and the work queue's URLs, and what a run's record says (the
    reason a message is on the DLQ, where the record knows it)."""
    from jobsched.core.run import run_key
    from jobsched.core.writes import RUNS

    from jobsched_tools.api import _client, store_for

    target = resolve_target(args)
    if not target.dlq_url:
        raise TargetError(
            "the dead-letter queue is not known: "
            "give --dlq-url (or JOBSCHED_DLQ_URL), --stack-name or --local"
        )
    stores: list[Any] = []  # made at the first message: an empty DLQ needs no DynamoDB client

    def explain(run_id: str | None) -> str:
        if run_id and not stores:
            stores.append(store_for(target))
        run = stores[0].get(RUNS, run_key(run_id)) if run_id else None
        if run is None:
            return "no run record (never claimed, or expired from the runs table)"
        status = str(run.get("status", "?"))
        why = run.get("last_error") or run.get("reason")
        if status == "succeeded":
            return "its run succeeded: a leftover message (moving it back does nothing)"
        attempt = f", attempt {run['attempt']}" if run.get("attempt") else ""
        return f"its run: {status}{attempt}" + (f": {_first_line(str(why))}" if why else "")

    return _client("sqs", target), target.dlq_url, target.queue_url, explain


def _dead_letter_json(letter: Any) -> dict[str, Any]:
    return {**letter.__dict__, "sent_at": describe_time(letter.sent_at) if letter.sent_at else None}


def _cmd_dlq_list(args: argparse.Namespace) -> int:
    """The DLQ's messages, moved nowhere: each one's job and run, receive count, when it was first
    sent and why it is here (ops/dlq.py)."""
    from jobsched_tools.ops.dlq import look

    sqs, dlq_url, _queue_url, explain = _dlq(args)
    at_start, letters = look(sqs, dlq_url, explain, args.max)
    data = {"at_start": at_start, "messages": [_dead_letter_json(letter) for letter in letters]}

    def human(d: dict[str, Any]) -> str:
        if not d["messages"]:
            return "the dead-letter queue is empty"
        rows = [
            [
                m["job_id"] or "?",
                m["run_id"] or "?",
                m["receive_count"] or "?",
                m["sent_at"] or "-",
                m["reason"],
            ]
            for m in d["messages"]
        ]
        shown = len(d["messages"])
        head = f"{_count(d['at_start'], 'message')} on the dead-letter queue"
        if shown < d["at_start"]:
            head += f" ({shown} shown)"
        table = _table(rows, ["JOB", "RUN", "RECEIVES", "FIRST SENT", "WHY IT IS HERE"])
        return f"{head}\n{table}\nmove them back with `jobsched dlq redrive`"

    return _emit(args, data, human)


def _cmd_dlq_redrive(args: argparse.Namespace) -> int:
    """Move the messages the DLQ holds when it starts back to the work queue, each at most once
    (ops/dlq.py: bounded by the DLQ's count read first, and by the ids it has seen). Works on AWS
    and on the local stack (moto has no StartMessageMoveTask)."""
    from jobsched_tools.ops.dlq import redrive

    sqs, dlq_url, queue_url, explain = _dlq(args)
    done = redrive(sqs, dlq_url, queue_url, explain, args.max)
    data = {
        "at_start": done.at_start,
        "moved": len(done.moved),
        "moved_runs": [letter.run_id or letter.message_id for letter in done.moved],
        "failed": done.refused,
        "came_back": done.came_back,
        "left": done.left,
        "dlq_url": dlq_url,
        "queue_url": queue_url,
    }

    def human(d: dict[str, Any]) -> str:
        if d["at_start"] == 0:
            return "the dead-letter queue is empty: nothing to move"
        lines = [f"moved {_count(d['moved'], 'message')} from the dead-letter queue to the work queue"]
        lines += [f"  {run}" for run in d["moved_runs"]]
        if d["failed"]:
            lines.append(f"{_count(d['failed'], 'message')} refused by the work queue stay on the DLQ")
        if d["came_back"]:
            lines.append(
                f"{_count(d['came_back'], 'message')} came back to the DLQ while this ran (it failed "
                "again): left there, not moved twice; `jobsched dlq list` says why"
            )
        if d["left"]:
            lines.append(
                f"{_count(d['left'], 'message')} on the DLQ now (it failed again, or came since): "
                "`jobsched dlq list` says why"
            )
        return "\n".join(lines)

    _emit(args, data, human)
    return 1 if done.refused else 0


def _guarded(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """A command's handler. Errors of setup or deployment are turned into one sentence by main()
    for every command (cli/errors.py), so nothing is caught here; kept as the commands' one
    wrapper (cmd_import and cmd_outcomes use it too)."""
    return func


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
        "the work queue's dead-letter queue: list its messages, or redrive them to the work queue",
        "The work queue's dead-letter queue.",
    )
    listing = actions.add_parser(
        "list",
        help="the DLQ's messages (job, run, receive count, why), moved nowhere",
        description=(
            "Receive the dead-letter queue's messages (at most as many as it held at the start), "
            "show each one's job and run, receive count, first send and why it is there, and make "
            "them visible again at once: nothing is moved. Quick on an empty DLQ (one request)."
        ),
    )
    redrive = actions.add_parser(
        "redrive",
        help="move the DLQ's messages back to the work queue, each at most once (works locally too)",
        description=(
            "Move the messages the dead-letter queue holds when it starts to the work queue, each at "
            "most once (a message that comes back while it runs is left on the DLQ), then delete "
            "them from the DLQ. Quick on an empty DLQ (one request). Exit status 1 when the work "
            "queue refused some."
        ),
    )
    for action, func in ((listing, _cmd_dlq_list), (redrive, _cmd_dlq_redrive)):
        add_target_options(action)
        action.add_argument("--json", action="store_true", help="machine-readable output")
        action.add_argument("--max", type=int, default=None, help="at most this many (default: all)")
        action.set_defaults(func=_guarded(func))
    backfill.add_argument("--from", dest="start", required=True, metavar="ISO8601")
    backfill.add_argument("--to", dest="end", required=True, metavar="ISO8601")
