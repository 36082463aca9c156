"""Random SIGKILLs against the multi-process local stack (the fault test and ``scripts/soak.py``).

Several trigger processes tick concurrently and several workers poll one queue; at seeded random
moments a worker or a trigger is SIGKILLed (mid-claim, mid-run, mid-commit: wherever it happens
to be) and restarted a moment later, as Lambda would start a fresh environment. After the window
the stack drains and the invariants are checked from the run records and the ledger table.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from jobsched.core.job import JobDefinition

from jobsched_tools.local.measure import Report
from jobsched_tools.local.session import Session, SessionOptions
from jobsched_tools.local.stack import StackOptions


def fault_jobs(ledger_table: str, window_from_ms: int, window_to_ms: int) -> list[JobDefinition]:
    common: dict[str, Any] = {
        "start": datetime.fromtimestamp(window_from_ms / 1000, UTC),
        "end": datetime.fromtimestamp(window_to_ms / 1000, UTC),
        "retry": {"max_attempts": 5, "backoff_seconds": 1, "max_backoff_seconds": 2},
    }
    ledger = {"table": ledger_table}
    return [
        JobDefinition(
            job_id="f.ledger-allow",
            schedule="rate(10 seconds)",
            target="example.ledger",
            payload=ledger,
            overlap="allow",
            **common,
        ),
        JobDefinition(
            job_id="f.ledger-skip",
            schedule="rate(10 seconds)",
            timezone="Europe/Berlin",
            target="example.ledger",
            payload=ledger,
            **common,
        ),
        JobDefinition(
            job_id="f.ledger-buffer",
            schedule="rate(10 seconds)",
            target="example.ledger",
            payload=ledger,
            overlap="buffer_one",
            **common,
        ),
        JobDefinition(
            job_id="f.ledger-cron",
            schedule="cron(* * * * ? *)",
            timezone="Asia/Kolkata",
            target="example.ledger",
            payload=ledger,
            **common,
        ),
        JobDefinition(
            job_id="f.sleep",
            schedule="rate(10 seconds)",
            target="example.sleep",
            payload={"seconds": 3},
            overlap="skip",
            timeout_seconds=30,
            **common,
        ),
        JobDefinition(
            job_id="f.sleep-allow",
            schedule="rate(15 seconds)",
            target="example.sleep",
            payload={"seconds": 2},
            overlap="allow",
            timeout_seconds=30,
            **common,
        ),
        JobDefinition(job_id="f.log", schedule="rate(10 seconds)", target="log", overlap="allow", **common),
        JobDefinition(
            job_id="f.flaky",
            schedule="rate(20 seconds)",
            target="example.flaky",
            payload={"fail_attempts": 1},
            overlap="allow",
            **common,
        ),
    ]


@dataclass
class FaultPlan:
    """Kill a random worker or trigger every ``every_s`` (uniform) seconds; restart it after
    ``down_s`` (uniform). Seeded: the same seed picks the same victims at the same offsets."""

    seed: int
    every_s: tuple[float, float] = (3.0, 7.0)
    down_s: tuple[float, float] = (0.5, 3.0)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.next_kill: float | None = None
        self.restarts: dict[str, float] = {}
        self.log: list[str] = []

    def on_step(self, session: Session) -> None:
        now = time.monotonic()
        for name, at in list(self.restarts.items()):
            if at <= now:
                session.stack.restart(name)
                del self.restarts[name]
        if session.phase != "window":
            return
        if self.next_kill is None:
            self.next_kill = now + self.rng.uniform(*self.every_s)
        if now < self.next_kill:
            return
        self.next_kill = now + self.rng.uniform(*self.every_s)
        victims = sorted(p.name for p in session.stack.procs.values() if p.role in ("worker", "trigger"))
        victim = self.rng.choice(victims)
        if victim in self.restarts:
            return
        crash = session.kill(victim)
        if crash is not None:
            self.log.append(
                f"SIGKILL {victim} pid {crash.pid} at +{(crash.at_ms - session.window_from_ms) / 1000:.1f}s"
            )
            self.restarts[victim] = now + self.rng.uniform(*self.down_s)


def run_faults(
    seconds: float,
    seed: int,
    *,
    workers: int = 3,
    triggers: int = 2,
    every_s: tuple[float, float] = (3.0, 7.0),
    say: Callable[[str], None] = lambda _text: None,
) -> tuple[Report, FaultPlan]:
    plan = FaultPlan(seed, every_s)
    options = SessionOptions(
        seconds=seconds,
        drain_seconds=60,
        stack=StackOptions(workers=workers, triggers=triggers, registrar=False),
    )
    session = Session(options, fault_jobs, on_step=plan.on_step, say=say)
    report = session.run()
    return report, plan


def invariant_report(report: Report) -> list[str]:
    """The invariants, as lines: each an 'ok' or a violation."""
    checks = [
        ("each occurrence committed at most once", report.duplicate_runs == 0),
        ("every due occurrence committed or recorded skipped/missed", report.lost_occurrences == 0),
        (
            "one ledger row per succeeded ledger run",
            report.ledger_mismatches == 0 and report.ledger_rows == report.ledger_runs_succeeded,
        ),
        ("no run left pending/running", report.runs_unfinished == 0),
        ("no run left leased", report.runs_leased == 0),
    ]
    return [f"{'ok  ' if ok else 'FAIL'} {name}" for name, ok in checks]
