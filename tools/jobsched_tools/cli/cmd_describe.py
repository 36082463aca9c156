"""``jobsched describe JOB``: one view of a job's past and future (issue 38), as Temporal's
``schedule describe``: the definition as registered with its defaults; the state (status,
position, the chain's end, why it is paused); the last N runs (outcome, lag, attempts, reason);
and the next N instants, in UTC and in the job's zone, with the start window (``jitter_seconds``)
applied. ``--json`` gives the same data. Reads: the job item, its state, its runs partition.
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from jobsched.core.job import InvalidJob, JobDefinition
from jobsched.core.occurrences import CLAIM, SHOWN_EPOCH, Claim
from jobsched.core.run import parse_run_id, run_id_for
from jobsched.core.timing import start_at_ms

from jobsched_tools.deployment import add_target_options

# The states a job's scheduling can be in that stop it, and what each means to a person.
STOPPED = {
    "paused": "paused: enabled is false",
    "invalid": "invalid: the item cannot be scheduled",
    "finished": "finished: the schedule has no more occurrences (or max_runs was reached)",
    "deleted": "deleted",
}


def _iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat().replace("+00:00", "Z")


def _local(ms: int, zone: str) -> str:
    return datetime.fromtimestamp(ms / 1000, ZoneInfo(zone)).isoformat()


def _first_line(text: Any) -> str | None:
    return str(text).strip().splitlines()[0] if text else None


def pause_reasons(view: dict[str, Any]) -> list[str]:
    """Why the job is not scheduling, each reason a sentence (none when it is active)."""
    reasons = []
    if view.get("enabled") is False or str(view.get("enabled")).lower() == "false":
        reasons.append("enabled is false")
    if view.get("paused_reason"):
        reasons.append(f"paused by pause_on_failure: {view['paused_reason']}")
    status = str(view.get("status", ""))
    if status in STOPPED and status != "paused":
        reasons.append(STOPPED[status])
    reasons += [f"invalid: {reason}" for reason in view.get("invalid_reasons") or []]
    return reasons


def run_summary(run: dict[str, Any], jitter_seconds: int = 0) -> dict[str, Any]:
    """One run as describe shows it: its outcome, its lag (its first start against its start:
    the instant plus its offset in the job's ``jitter_seconds``, as the worker's StartLag counts
    it), its attempts and its reason (the reason it was recorded with, else its last error), and
    what became of its dead letter, if it owed one."""
    started = run.get("first_started_at")
    window = {"jitter_seconds": jitter_seconds}
    start = start_at_ms(str(run["run_id"]), int(run["scheduled_at"]), window)
    summary = {
        "run_id": run["run_id"],
        "kind": run.get("kind"),
        "scheduled_at": _iso(int(run["scheduled_at"])),
        "outcome": run.get("status"),
        "lag_ms": int(started) - start if started is not None else None,
        "attempts": run.get("attempt"),
        "reason": _first_line(run.get("reason") or run.get("last_error")),
        "finished_at": _iso(run.get("finished_at")),
    }
    if run.get("dead_letter"):
        summary["dead_letter"] = run["dead_letter"]
    # Under the successor claim (Operations.runs, core/occurrences.py): the epoch where the run's
    # instant holds items of two, and whether a scheduled run is claimed or the job's next.
    if SHOWN_EPOCH in run:
        summary["epoch"] = run[SHOWN_EPOCH]
    if CLAIM in run:
        summary["claim"] = run[CLAIM]
    return summary


def head_epoch(runs: list[dict[str, Any]]) -> int | None:
    """The epoch of a successor job's head among its runs as ``Operations.runs`` lists them (the
    ``scheduled`` run not claimed yet; None: no head listed, a job on today's claim). Every
    occurrence from the head on is claimed in its epoch, so its run id, and the offset in
    ``jitter_seconds`` hashed from that id, carry it (core/run.py ``run_id_for``)."""
    for run in runs:
        if run.get(CLAIM) == Claim.NEXT.value:
            return parse_run_id(str(run["run_id"])).epoch
    return None


def upcoming(
    definition: JobDefinition, view: dict[str, Any], now_ms: int, count: int, epoch: int | None = None
) -> list[dict[str, Any]]:
    """The next ``count`` occurrences from the job's position (its next unclaimed instant), or
    from now when it has none: each instant, its run's start (the instant plus the run's offset
    in ``jitter_seconds``, from the run's id: in ``epoch``, a successor job's head's), in UTC and
    in the job's zone. None when the job is not scheduling."""
    if str(view.get("status", "active")) not in ("active", "unregistered") or not definition.enabled:
        return []
    schedule = definition.compiled_schedule()
    position = view.get("next_run_at")
    after_ms = int(position) - 1000 if position is not None else now_ms
    after = datetime.fromtimestamp(after_ms / 1000, UTC)
    found = []
    item = definition.to_item()
    for instant in schedule.occurrences(after, datetime(2200, 1, 1, tzinfo=UTC), count):
        ms = int(instant.timestamp() * 1000)
        start = start_at_ms(run_id_for(definition.job_id, ms, epoch), ms, item)
        found.append(
            {
                "instant": _iso(ms),
                "instant_local": _local(ms, definition.timezone),
                "starts_at": _iso(start),
                "starts_at_local": _local(start, definition.timezone),
                "jitter_ms": start - ms,
            }
        )
    return found


def describe(
    view: dict[str, Any],
    runs: list[dict[str, Any]],
    now_ms: int,
    next_count: int,
    epoch: int | None = None,
) -> dict[str, Any]:
    """The describe data of one job: ``view`` as ``Operations.get`` gives it (the job item with
    its state merged in), ``runs`` newest first. ``epoch``: a successor job's head's (default: as
    ``runs`` lists it, ``head_epoch``)."""
    epoch = epoch if epoch is not None else head_epoch(runs)
    try:
        definition: JobDefinition | None = JobDefinition.from_item(view)
    except InvalidJob:
        definition = None
    state = {
        "status": view.get("status"),
        "position": _iso(view.get("next_run_at")),
        "chain_end": view.get("latest_run_id"),
        "last_scheduled_at": _iso(view.get("last_scheduled_at")),
        "pause_reasons": pause_reasons(view),
    }
    return {
        "job_id": view.get("job_id"),
        "definition": definition.model_dump(mode="json") if definition is not None else None,
        "state": state,
        "recent_runs": [run_summary(run, definition.jitter_seconds if definition else 0) for run in runs],
        "next": upcoming(definition, view, now_ms, next_count, epoch) if definition is not None else [],
        "timezone": definition.timezone if definition is not None else view.get("timezone"),
    }


def render(data: dict[str, Any]) -> str:
    """The human screen: four sections."""
    lines = [f"job {data['job_id']}", "", "definition (as registered, with defaults):"]
    definition = data["definition"]
    if definition is None:
        lines.append("  (invalid: see the state's reasons)")
    else:
        for name in sorted(definition):
            value = definition[name]
            text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
            lines.append(f"  {name}: {text}")
    state = data["state"]
    lines += ["", "state:"]
    lines.append(f"  status: {state['status']}")
    lines.append(f"  position (next unclaimed instant): {state['position'] or '-'}")
    lines.append(f"  chain end (latest run): {state['chain_end'] or '-'}")
    lines.append(f"  last scheduled: {state['last_scheduled_at'] or '-'}")
    reasons = "; ".join(state["pause_reasons"]) or "-"
    lines.append(f"  paused because: {reasons}")
    lines += ["", f"last {len(data['recent_runs'])} runs (newest first):"]
    if not data["recent_runs"]:
        lines.append("  none")
    for run in data["recent_runs"]:
        lag = f"{run['lag_ms']} ms" if run["lag_ms"] is not None else "-"
        reason = f"  {run['reason'][:60]}" if run["reason"] else ""
        attempts = run["attempts"] or "-"
        instant = f"{run['scheduled_at']} #{run['epoch']}" if "epoch" in run else run["scheduled_at"]
        outcome = run.get("claim") or run["outcome"]
        lines.append(f"  {instant}  {outcome:<9} lag {lag:<9} attempts {attempts}{reason}")
    zone = data.get("timezone") or "UTC"
    lines += ["", f"next {len(data['next'])} instants (UTC | {zone}; start with jitter):"]
    if not data["next"]:
        lines.append("  none (the job is not scheduling)")
    for upcoming_run in data["next"]:
        jitter = f"  starts {upcoming_run['starts_at']} (+{upcoming_run['jitter_ms'] // 1000} s)"
        lines.append(
            f"  {upcoming_run['instant']}  {upcoming_run['instant_local']}"
            + (jitter if upcoming_run["jitter_ms"] else "")
        )
    return "\n".join(lines)


def _cmd_describe(args: argparse.Namespace) -> int:
    from jobsched.runtime.clock import SystemClock

    from jobsched_tools.cli.common import operations

    ops = operations(args)
    view = ops.get(args.job_id)
    # At least one run is read: a successor job's head is its newest (its epoch keys the next runs).
    runs = ops.runs(args.job_id, max(args.runs, 1))
    data = describe(view, runs[: max(args.runs, 0)], SystemClock().now_ms(), args.next, head_epoch(runs))
    print(json.dumps(data, default=str, sort_keys=True) if args.json else render(data))
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from jobsched_tools.cli.common import add_shard_count_option, guarded

    help_text = "one view of a job: its definition, state, last runs and next instants"
    parser = subparsers.add_parser("describe", help=help_text, description=help_text)
    add_target_options(parser)
    parser.add_argument("job_id", metavar="JOB")
    parser.add_argument("--runs", type=int, default=10, help="how many recent runs (default 10)")
    parser.add_argument("--next", type=int, default=5, help="how many next instants (default 5)")
    parser.add_argument("--json", action="store_true", help="the same data as JSON")
    add_shard_count_option(parser)
    parser.set_defaults(func=guarded(_cmd_describe))
