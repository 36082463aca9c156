"""The commands on runs: runs (a job's recent runs), trigger (a run now) and backfill (the past
occurrences of a range), each saying what happened to the runs it names.

Human-readable tables by default, ``--json`` for scripts.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from jobsched.core.occurrences import CLAIM, SHOWN_EPOCH
from jobsched.services.operations import describe_time

from jobsched_tools.cli.common import (
    Subparsers,
    add_command,
    count,
    emit,
    first_line,
    operations,
    parse_instant,
    table,
)


def _cmd_runs(args: argparse.Namespace) -> int:
    ops = operations(args)
    if args.at is not None:  # an instant alone: its live record, whatever its epoch
        found = ops.run_at(args.job_id, parse_instant(args.at))
        runs = [found] if found is not None else []
    else:
        runs = ops.runs(args.job_id, args.limit)
    for run in runs:
        run.pop("definition", None)

    def human(rs: list[dict[str, Any]]) -> str:
        if not rs and args.at is not None:
            return f"no run of {args.job_id} at {args.at} (its runs: jobsched runs {args.job_id})"
        headers = ["SCHEDULED", "KIND", "STATUS", "ATTEMPT", "STARTED", "FINISHED"]
        rows = [
            [
                _instant(r),
                r.get("kind", ""),
                r.get(CLAIM) or r["status"],  # a scheduled run: claimed, or the job's next
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
        return table(rows, [*headers, "NOTE"])

    return emit(args, runs, human)


def _instant(run: dict[str, Any]) -> str:
    """A run's instant; with its epoch (``#2``) where its instant holds items of two epochs (a
    change's cancelled head or marker beside it: core/occurrences.py)."""
    shown = describe_time(run["scheduled_at"])
    return f"{shown} #{run[SHOWN_EPOCH]}" if SHOWN_EPOCH in run else shown


NOTE_MIN_WIDTH = 40  # on a narrow terminal the row wraps rather than lose the note
_ARN = re.compile(r"\barn:[^\s:]+:[^\s:]+:[^\s:]*:[^\s:]*:(\S+)")


def _note(text: str, width: int) -> str:
    """The first line of a run's error or reason in at most ``width`` characters, keeping what a
    person acts on: an ARN is cut to its tail (``…:orders`` names the resource; the partition,
    region and account rarely matter), and only then is the line cut at a word, with an
    ellipsis; where even that would lose the resource, the words before it go first (``--json``
    has the whole text)."""
    line = first_line(text.strip())
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


def _run_note(run: dict[str, Any]) -> str:
    """A run's note: why it did not run, or its error; none for a run that succeeded (an earlier
    attempt's error stays on the record, and is not why it ended)."""
    if run.get("status") == "succeeded":
        return ""
    return str(run.get("last_error") or run.get("reason") or "")


def _cmd_trigger(args: argparse.Namespace) -> int:
    ops = operations(args)
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
            why = f": {first_line(str(run['reason']))}" if run and run.get("reason") else ""
            status = f"its status: {d['status']}{why}"
            return f"{d['run_id']}: already requested ({status}); nothing new dispatched"
        return f"{d['run_id']}: {_run_outcome(run)}"

    return emit(args, data, human)


def _run_outcome(run: dict[str, Any] | None) -> str:
    """What a run record says happened to its occurrence, in a few words."""
    if run is None:
        return "no record (look again with `jobsched runs`)"
    status = str(run.get("status", "?"))
    why = run.get("reason") or run.get("last_error")
    if status == "pending":
        return "dispatched"
    return f"{status} ({first_line(str(why))})" if why and status != "succeeded" else status


def _cmd_backfill(args: argparse.Namespace) -> int:
    """Each occurrence in the range and what happened to it, read back from its run record after
    the backfill: dispatched (a new run, or the re-run of one recorded missed), or already
    recorded, with the record's status (and its reason when it did not run)."""
    ops = operations(args)
    result = ops.backfill(args.job_id, parse_instant(args.start), parse_instant(args.end))
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
                    what += f" (it was missed: {first_line(str(o['reason']))})"
            lines.append(f"{o['run_id'].ljust(width)}  {what}")
        lines.append(
            f"{count(len(d['occurrences']), 'occurrence')}: {count(len(d['created']), 'new run')}, "
            f"{count(len(d['rerun']), 're-run of a missed one', 're-runs of missed ones')}, "
            f"{len(d['already_existed'])} already recorded"
        )
        return "\n".join(lines)

    return emit(args, data, human)


def register(subparsers: Subparsers) -> None:
    runs = add_command(subparsers, "runs", _cmd_runs, "a job's recent runs, newest first")
    runs.add_argument("job_id", metavar="JOB")
    runs.add_argument("--limit", type=int, default=20)
    runs.add_argument("--at", metavar="ISO8601", help="only the run at this instant (its scheduled time)")
    trigger = add_command(subparsers, "trigger", _cmd_trigger, "run a job now, outside its schedule")
    trigger.add_argument("job_id", metavar="JOB")
    trigger.add_argument("--request-id", help="idempotency: the same id runs once")
    backfill = add_command(
        subparsers,
        "backfill",
        _cmd_backfill,
        "run the past occurrences in (FROM, TO], missed ones too, each at most once",
    )
    backfill.add_argument("job_id", metavar="JOB")
    backfill.add_argument("--from", dest="start", required=True, metavar="ISO8601")
    backfill.add_argument("--to", dest="end", required=True, metavar="ISO8601")
