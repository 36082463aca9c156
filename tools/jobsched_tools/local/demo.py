"""``jobsched demo``: the local stack for a minute, with a worker SIGKILLed in the middle of a run.

The demo registers a handful of jobs (cron, rate and at schedules in several time zones, each
overlap and misfire policy), lets the real handlers run them in separate processes, kills the
worker running a sleep job with SIGKILL (so its lease stays held), shows the lease lapse and the
miss detector recovering the run for another worker, drains, and measures everything from the
run records, the ledger table and the processes' events.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from jobsched.core.job import JobDefinition

from jobsched_tools.local.measure import Report
from jobsched_tools.local.session import Session, SessionOptions, now_ms
from jobsched_tools.local.stack import Event, StackOptions

SLEEP_JOB = "demo.sleep"


def demo_jobs(ledger_table: str, window_from_ms: int, window_to_ms: int) -> list[JobDefinition]:
    start = datetime.fromtimestamp(window_from_ms / 1000, UTC)
    end = datetime.fromtimestamp(window_to_ms / 1000, UTC)
    once_at = datetime.fromtimestamp((window_from_ms + 12_000) / 1000, ZoneInfo("Asia/Tokyo"))
    common: dict[str, Any] = {"start": start, "end": end}
    return [
        JobDefinition(
            job_id=SLEEP_JOB,
            schedule="rate(20 seconds)",
            target="example.sleep",
            payload={"seconds": 5},
            overlap="skip",
            timeout_seconds=30,
            description="the crash target: a worker running it is SIGKILLed",
            **common,
        ),
        JobDefinition(
            job_id="demo.ledger",
            schedule="rate(10 seconds)",
            timezone="Europe/Paris",
            target="example.ledger",
            payload={"table": ledger_table},
            overlap="buffer_one",
            description="exactly-once effect: one ledger row per occurrence",
            **common,
        ),
        JobDefinition(
            job_id="demo.log",
            schedule="rate(10 seconds)",
            target="log",
            payload={"hello": "world"},
            overlap="allow",
            **common,
        ),
        JobDefinition(
            job_id="demo.flaky",
            schedule="rate(15 seconds)",
            target="example.flaky",
            payload={"fail_attempts": 1},
            retry={"max_attempts": 3, "backoff_seconds": 1, "max_backoff_seconds": 2},
            misfire={"policy": "run_all", "grace_seconds": 30},
            overlap="allow",
            **common,
        ),
        JobDefinition(
            job_id="demo.cron-ny",
            schedule="cron(* * * * ? *)",
            timezone="America/New_York",
            target="example.ledger",
            payload={"table": ledger_table},
            misfire={"policy": "skip", "grace_seconds": 30},
            **common,
        ),
        JobDefinition(
            job_id="demo.once-tokyo",
            schedule=f"at({once_at.strftime('%Y-%m-%dT%H:%M:%S')})",
            timezone="Asia/Tokyo",
            target="log",
            payload={"once": True},
            **common,
        ),
    ]


# ---------------------------------------------------------------------------- the view

_SHOWN = {
    "run.started": "started",
    "run.succeeded": "succeeded",
    "run.failed": "FAILED",
    "run.retry_scheduled": "retry scheduled",
    "run.skipped": "skipped (overlap)",
    "run.buffered": "buffered (overlap)",
    "run.promoted": "promoted from buffer",
    "run.fenced_out": "fenced out (stale token)",
    "run.duplicate_dropped": "duplicate message dropped",
    "run.heartbeat_lost": "heartbeat lost",
    "lease.recovered": "LEASE RECOVERED by miss detector",
    "run.catchup": "catch-up",
    "local.invocation_failed": "invocation failed",
    "batch.record_failed": "RECORD FAILED (reported to the event source)",
    "local.stream_record_discarded": "stream record passed over after its retries",
    # What people do to their jobs, as the registrar applies it (issue 28: the view used to show
    # run events only, so a registration, a pause or a typo in a time zone showed nothing).
    "job.scheduled": "job registered (scheduled)",
    # A person's pause (enabled: false written by anyone) and jobsched's pause on failure read
    # apart: the registrar applies both as job.paused, so the view remembers which jobs the
    # worker or the detector paused (``View``).
    "job.paused": "job paused (enabled: false on the job item)",
    "job.paused_on_failure": "job PAUSED ON FAILURE (pause_on_failure; `jobsched resume` clears it)",
    "job.pause_skipped": "pause on failure not applied (the job was edited since the run)",
    "job.finished": "job finished (its schedule has ended)",
    "job.invalid": "job INVALID",
    "job.deleted": "job deleted",
    "job.registration_conflict": "job registration lost a race, retried by the stream",
    "job.report_too_large": "job too large for its report",
    "job.reconciled": "job change applied by the reconciler",
    "job.error": "JOB ERROR",
    "claim.early_failed": "first claim failed (left to the next tick)",
    # `jobsched local --outcomes`: the outcome publisher's puts (docs/operations.md).
    "outcome.published": "outcome event on the bus",
    "outcome.publish_failed": "outcome event not taken (delivered again)",
    "outcome.rejected": "outcome event REFUSED by the bus",
    # The local SQS poller's word for what SQS does silently (local/proc.py ``_dead_lettered``).
    "dlq.dead_lettered": (
        "its last receive failed: TO THE DEAD-LETTER QUEUE (`jobsched dlq list --local` says why)"
    ),
}


_DETAILS = (
    "attempt",
    "lag_ms",
    "owner",
    "duration_ms",
    "error",
    "reason",
    "reasons",
    "was",
    "lease_expired_at",
    "next_run_at",
    "status",
    "run_id",
    "receive_count",
    "message_id",
)


class View:
    """``describe`` with a memory: the jobs paused on failure, so that the registrar's applying
    of that pause (``job.paused``, as for a person's) is shown as what it is."""

    def __init__(self, t0_ms: int) -> None:
        self.t0_ms = t0_ms
        self.paused_on_failure: set[str] = set()

    def line(self, event: Event) -> str | None:
        name, job_id = event.get("event"), str(event.get("correlation_id", ""))
        if name == "job.paused_on_failure":
            self.paused_on_failure.add(job_id)
        elif name == "job.paused" and job_id in self.paused_on_failure:
            self.paused_on_failure.discard(job_id)
            return describe(event, self.t0_ms, "job paused: the pause on failure above, applied")
        elif name == "job.paused":
            return describe(event, self.t0_ms, "job paused by a person (enabled: false on the job item)")
        return describe(event, self.t0_ms)


def describe(event: Event, t0_ms: int, label: str | None = None) -> str | None:
    """One readable line for a process's event, or None for an event the view leaves out. Times
    of events are offsets from ``t0_ms``; an instant such as ``next_run_at`` is a time, as the
    CLI prints it (``describe_time``), since it may be hours out."""
    from jobsched.services.operations import describe_time

    name = str(event.get("event") or "")
    label = label or _SHOWN.get(name)
    if (
        label is None
        and name.startswith("run.")
        and name not in ("run.heartbeat", "run.deferred", "run.claimed")
    ):
        label = name
    if label is None or (name == "run.dispatched" and event.get("attempt") == 1):
        return None
    subject = str(event.get("correlation_id", ""))
    details = []
    for key in _DETAILS:
        if key in event and event[key] not in (None, ""):
            value = event[key]
            if key == "error":
                value = str(value).splitlines()[0]  # the traceback stays in the JSON logs
            if key == "lease_expired_at":
                value = f"T{(int(value) - t0_ms) / 1000:+.1f}s"
            if key == "next_run_at":
                value = describe_time(int(value))
            if key in ("run_id", "message_id") and value == subject:
                continue
            if key == "reasons" and isinstance(value, list):
                value = "; ".join(str(reason) for reason in value)
            details.append(f"{key}={value}")
    at = _event_ms(event)
    stamp = f"T{(at - t0_ms) / 1000:+6.1f}s" if at else "        "
    return f"{stamp} {event.get('proc', '')!s:<11} {subject:<40} {label} {' '.join(details)}".rstrip()


def _event_ms(event: Event) -> int | None:
    text = event.get("timestamp")
    if not isinstance(text, str):
        return None
    try:
        return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None


# ---------------------------------------------------------------------------- the crash


class CrashPlan:
    """Kill the worker process that is running a sleep run, once, a moment after it started."""

    def __init__(self, kills: int = 1, after_s: float = 1.5) -> None:
        self.kills = kills
        self.after_s = after_s
        self.candidates: list[tuple[float, str]] = []  # (kill at, run id)

    def on_event(self, _session: Session, _name: str, event: Event) -> None:
        if event.get("event") == "run.started" and str(event.get("correlation_id", "")).startswith(
            SLEEP_JOB + "@"
        ):
            self.candidates.append((time.monotonic() + self.after_s, str(event["correlation_id"])))

    def on_step(self, session: Session) -> None:
        if len(session.crashes) >= self.kills or session.phase != "window":
            return
        ready = [c for c in self.candidates if c[0] <= time.monotonic()]
        for candidate in ready:
            self.candidates.remove(candidate)
            run_id = candidate[1]
            run = session.stack.operations().get_run(run_id)
            if run is None or run.get("status") != "running":
                continue
            proc = session.stack.owner_proc(str(run.get("owner", "")))
            if proc is None or not session.stack.procs[proc].alive():
                continue
            lease = int(run.get("lease_expires_at", 0))
            crash = session.kill(proc, run_id)
            if crash is None:
                continue
            session.say(
                f"T{(crash.at_ms - session.window_from_ms) / 1000:+6.1f}s *** SIGKILL {proc} "
                f"(pid {crash.pid}) while it runs {run_id} "
                f"(owner {run.get('owner')}, token {run.get('version')}); its lease stays held "
                f"until T{(lease - session.window_from_ms) / 1000:+.1f}s"
            )
            session.stack.restart(proc)
            session.say(f"         restarted {proc} as a fresh process (pid {session.stack.procs[proc].pid})")
            return


# ---------------------------------------------------------------------------- the summary


def summary_json(report: Report, seconds: float) -> dict[str, Any]:
    return {
        "demo_seconds": seconds,
        "occurrences_due": report.occurrences_due,
        "runs_total": report.runs_total,
        "runs_succeeded": report.runs_succeeded,
        "runs_failed": report.runs_failed,
        "runs_skipped": report.runs_skipped,
        "runs_missed": report.runs_missed,
        "runs_unfinished": report.runs_unfinished,
        "duplicate_runs": report.duplicate_runs,
        "lost_occurrences": report.lost_occurrences,
        "crashes_injected": report.crashes_injected,
        "crashes_recovered": report.crashes_recovered,
        "leases_recovered": report.leases_recovered,
        "retries": report.retries,
        "ledger_rows": report.ledger_rows,
        "ledger_runs_succeeded": report.ledger_runs_succeeded,
        "lag_ms_p50": report.lag_ms_p50,
        "lag_ms_p99": report.lag_ms_p99,
        "recovery_s_max": report.recovery_s_max,
        "violations": report.violations[:20],
        "verdict": "PASS" if passed(report) else "FAIL",
    }


def passed(report: Report) -> bool:
    """Exactly once held (nothing duplicated, lost or left unfinished; one ledger row per
    succeeded ledger run) and the failover was shown: a worker was killed mid-run and every
    killed run was recovered and finished."""
    return (
        report.duplicate_runs == 0
        and report.lost_occurrences == 0
        and report.runs_unfinished == 0
        and report.ledger_mismatches == 0
        and report.crashes_injected > 0
        and report.crashes_recovered == report.crashes_injected
    )


def verdict_line(report: Report) -> str:
    """The demo's last word (before the JSON object with --json)."""
    return (
        f"demo: {'PASS' if passed(report) else 'FAIL'} - {report.occurrences_due} occurrences due, "
        f"{report.duplicate_runs} duplicated, {report.lost_occurrences} lost, "
        f"{report.runs_unfinished} unfinished, "
        f"{report.crashes_recovered} of {report.crashes_injected} killed runs recovered"
    )


def summary_table(report: Report) -> str:
    lines = [
        f"{'job':<18} {'due':>4} {'succeeded':>9} {'failed':>6} {'skipped':>7} {'missed':>6} {'lost':>4}"
    ]
    for job_id, row in sorted(report.per_job.items()):
        lines.append(
            f"{job_id:<18} {row['due']:>4} {row.get('succeeded', 0):>9} {row.get('failed', 0):>6} "
            f"{row.get('skipped', 0):>7} {row.get('missed', 0):>6} {row['lost']:>4}"
        )
    lines += [
        "",
        f"occurrences due        {report.occurrences_due}",
        f"runs succeeded         {report.runs_succeeded}",
        f"duplicate runs         {report.duplicate_runs}",
        f"lost occurrences       {report.lost_occurrences}",
        f"crashes injected       {report.crashes_injected}",
        f"leases recovered       {report.leases_recovered}",
        f"ledger rows / runs     {report.ledger_rows} / {report.ledger_runs_succeeded}",
        f"start lag p50 / p99    {report.lag_ms_p50} / {report.lag_ms_p99} ms",
        f"recovery (max)         {report.recovery_s_max} s (crash -> recovered run starting again)",
    ]
    if report.violations:
        lines += ["", "VIOLATIONS:", *("  " + v for v in report.violations[:20])]
    return "\n".join(lines)


def run_demo(seconds: float = 75, as_json: bool = False, workers: int = 3) -> int:
    def say(text: str) -> None:
        print(text, flush=True)

    plan = CrashPlan()
    views: dict[int, View] = {}

    def on_event(session: Session, name: str, event: Event) -> None:
        plan.on_event(session, name, event)
        if session.window_from_ms:
            view = views.setdefault(session.window_from_ms, View(session.window_from_ms))
            line = view.line(event)
            if line:
                say(line)

    options = SessionOptions(seconds=seconds, stack=StackOptions(workers=workers))
    session = Session(options, demo_jobs, on_event=on_event, on_step=plan.on_step, say=say)
    say(f"jobsched demo: local stack (moto, {workers} worker processes, 1 trigger, miss detector, registrar)")
    started = now_ms()
    report = session.run()
    say("")
    say(summary_table(report))
    say(f"(took {(now_ms() - started) / 1000:.0f} s)")
    say(verdict_line(report))
    if as_json:
        sys.stdout.write(json.dumps(summary_json(report, seconds), sort_keys=True) + "\n")
        sys.stdout.flush()
    return 0 if passed(report) else 1
