"""Outcome events: every terminal outcome (succeeded, failed, missed, skipped) handed to an
``OutcomeSink`` after its record is written (docs/operations.md, "Outcome events").

The services already report each terminal record, once it is written, as a telemetry event:
``run.succeeded`` and ``run.failed`` after the worker's fenced commit (and ``run.failed`` after the
miss detector fails a run out of attempts), ``run.skipped`` after the worker records an overlap
skip, and ``run.missed`` after a settle (the detector's, the registrar's or the trigger's) records a
missed occurrence. ``OutcomeTelemetry`` wraps the functions' telemetry and publishes those events,
so every writer of a terminal record publishes through one path without knowing the sink;
tests/functional/test_outcome_events.py holds the published outcomes equal to the terminal records
the services wrote.

A publish that fails is logged (``outcome.publish_failed``) and counted (``OutcomeEventFailures``);
it never fails the run, whose record is already written.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from jobsched.core.clock import Clock
from jobsched.ports import OutcomeSink, RunOutcome, Telemetry

# Telemetry event -> the outcome's status. Each is emitted after the record's write landed.
TERMINAL_EVENTS = {
    "run.succeeded": "succeeded",
    "run.failed": "failed",
    "run.missed": "missed",
    "run.skipped": "skipped",
}


def scheduled_at_of(run_id: str) -> int | None:
    """The instant a scheduled run's id carries (``job@2026-12-05T02:00:00Z``); None for a manual
    run (``job@manual:ID``) or anything else."""
    _, _, instant = run_id.partition("@")
    try:
        return int(datetime.fromisoformat(instant).timestamp() * 1000)
    except ValueError:
        return None


def outcome_of(name: str, run_id: str, fields: dict[str, Any], now_ms: int) -> RunOutcome | None:
    status = TERMINAL_EVENTS.get(name)
    if status is None:
        return None
    scheduled = fields.get("scheduled_at")
    reason = fields.get("error") if status == "failed" else fields.get("reason")
    attempt = fields.get("attempt")
    return RunOutcome(
        run_id=run_id,
        job_id=run_id.partition("@")[0],
        status=status,
        recorded_at=now_ms,
        scheduled_at=int(scheduled) if scheduled is not None else scheduled_at_of(run_id),
        reason=str(reason) if reason is not None else None,
        attempt=int(attempt) if attempt is not None else None,
    )


class OutcomeTelemetry:
    """A ``Telemetry`` that also publishes the terminal outcomes its events report."""

    def __init__(self, inner: Telemetry, sink: OutcomeSink, clock: Clock) -> None:
        self._inner = inner
        self._sink = sink
        self._clock = clock

    def event(self, name: str, correlation_id: str, **fields: Any) -> None:
        self._inner.event(name, correlation_id, **fields)
        outcome = outcome_of(name, correlation_id, fields, self._clock.now_ms())
        if outcome is None:
            return
        try:
            self._sink.publish(outcome)
        except Exception as exc:  # the record is written: a lost event must not fail the run
            self._inner.event(
                "outcome.publish_failed",
                correlation_id,
                status=outcome.status,
                error=f"{type(exc).__name__}: {exc}"[:1000],
            )
            self._inner.metric("OutcomeEventFailures", 1)
            return
        self._inner.metric("OutcomeEvents", 1)

    def metric(self, name: str, value: float, unit: str = "Count") -> None:
        self._inner.metric(name, value, unit)
