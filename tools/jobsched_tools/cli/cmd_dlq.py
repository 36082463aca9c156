"""``jobsched dlq list`` and ``jobsched dlq redrive``: the work queue's dead-letter queue, each
message with why it is there (ops/dlq.py).

Human-readable tables by default, ``--json`` for scripts.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from jobsched.services.operations import describe_time

from jobsched_tools.cli.common import Subparsers, action_command, count, emit, first_line, guarded, table
from jobsched_tools.deployment import TargetError, add_target_options, resolve_target


def _dlq(args: argparse.Namespace) -> tuple[Any, str, str, Callable[[str | None], str]]:
    """The SQS client, the DLQ's and the work queue's URLs, and what a run's record says (the
    reason a message is on the DLQ, where the record knows it)."""
    from jobsched.core.run import run_key
    from jobsched.core.writes import RUNS

    from jobsched_tools.api import client_for, store_for

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
        return f"its run: {status}{attempt}" + (f": {first_line(str(why))}" if why else "")

    return client_for("sqs", target), target.dlq_url, target.queue_url, explain


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
        head = f"{count(d['at_start'], 'message')} on the dead-letter queue"
        if shown < d["at_start"]:
            head += f" ({shown} shown)"
        listed = table(rows, ["JOB", "RUN", "RECEIVES", "FIRST SENT", "WHY IT IS HERE"])
        return f"{head}\n{listed}\nmove them back with `jobsched dlq redrive`"

    return emit(args, data, human)


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
        lines = [f"moved {count(d['moved'], 'message')} from the dead-letter queue to the work queue"]
        lines += [f"  {run}" for run in d["moved_runs"]]
        if d["failed"]:
            lines.append(f"{count(d['failed'], 'message')} refused by the work queue stay on the DLQ")
        if d["came_back"]:
            lines.append(
                f"{count(d['came_back'], 'message')} came back to the DLQ while this ran (it failed "
                "again): left there, not moved twice; `jobsched dlq list` says why"
            )
        if d["left"]:
            lines.append(
                f"{count(d['left'], 'message')} on the DLQ now (it failed again, or came since): "
                "`jobsched dlq list` says why"
            )
        return "\n".join(lines)

    emit(args, data, human)
    return 1 if done.refused else 0


def register(subparsers: Subparsers) -> None:
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
        action.set_defaults(func=guarded(func))
