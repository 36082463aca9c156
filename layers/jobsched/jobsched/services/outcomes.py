"""Outcome events: each terminal outcome of a run (succeeded, failed, missed, skipped), read from
the runs table's stream and put on an EventBridge bus (docs/operations.md, "Outcome events").

Why from the stream, and not by the writer after its write: the record is the outcome. A writer
that publishes after its write loses the event when it dies between the two, and every writer of
a terminal record (the worker's commit, the detector's recovery, a settle by the registrar, the
trigger or the detector) would need the bus. The stream carries every write that landed, once,
in order per item, for 24 hours, and Lambda delivers its records until the function accepts them
or they expire. So an outcome is published at least once for every terminal write, by one
function, and a fenced-out write (which did not land) is never published.

Duplicates happen (a batch retried after a partial failure, a record redelivered): a consumer
deduplicates on ``outcome_id``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from jobsched.core.run import RunStatus
from jobsched.ports import OutcomeSink, RunOutcome, Telemetry

# A run's ends. No item of the successor claim is an outcome (issue 37; core/occurrences.py): not a
# head or claimed run (``scheduled``), a closure or end marker (``closed``, ``end``), or a cancelled
# head (``cancelled``, as the legacy fence before it). Outcome replay reads through this set too.
TERMINAL = frozenset(
    {RunStatus.SUCCEEDED.value, RunStatus.FAILED.value, RunStatus.MISSED.value, RunStatus.SKIPPED.value}
)
RAN = frozenset({RunStatus.SUCCEEDED.value, RunStatus.FAILED.value})


@dataclass(frozen=True)
class RunChange:
    """One runs-table stream record: its sequence number (what a partial batch response names),
    the item before and after the write (plain values; None when absent), and when DynamoDB
    recorded it (ms), if known."""

    identifier: str
    old: dict[str, Any] | None
    new: dict[str, Any] | None
    changed_at: int | None = None


def _int(value: Any) -> int | None:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def outcome_of_change(change: RunChange) -> RunOutcome | None:
    """The outcome a write to a run record ended the run with, or None when the write did not end
    it: a removal (TTL), a write that leaves the run unfinished, or a later write to a record that
    was already in that terminal state (an ``overtook`` mark, say)."""
    new, old = change.new, change.old
    if new is None:
        return None
    status = new.get("status")
    if status not in TERMINAL:
        return None
    if old is not None and old.get("status") == status:
        return None
    run_id = str(new.get("run_id", ""))
    if not run_id:
        return None
    reason = new.get("last_error") if status == RunStatus.FAILED.value else new.get("reason")
    recorded_at = _int(new.get("finished_at")) or change.changed_at or 0
    return RunOutcome(
        run_id=run_id,
        job_id=str(new.get("job_id") or run_id.partition("@")[0]),
        status=str(status),
        version=_int(new.get("version")) or 0,
        recorded_at=recorded_at,
        scheduled_at=_int(new.get("scheduled_at")),
        reason=str(reason) if reason else None,
        attempt=_int(new.get("attempt")) if status in RAN else None,
    )


class OutcomePublisher:
    """Publishes the outcomes in a batch of run changes; returns the identifiers of the changes to
    deliver again (a partial batch response: Lambda retries the stream from the lowest)."""

    def __init__(self, sink: OutcomeSink, telemetry: Telemetry) -> None:
        self._sink = sink
        self._telemetry = telemetry

    def publish(self, changes: Sequence[RunChange]) -> list[str]:
        pending = [(change, outcome) for change in changes if (outcome := outcome_of_change(change))]
        if not pending:
            return []
        outcomes = [outcome for _, outcome in pending]
        try:
            rejections = self._sink.publish(outcomes)
        except Exception as exc:  # the call failed whole: every outcome is delivered again
            error = f"{type(exc).__name__}: {exc}"[:1000]
            for _, outcome in pending:
                self._failed(outcome, error, retryable=True)
            return [change.identifier for change, _ in pending]
        refused = {rejection.index: rejection for rejection in rejections}
        retry: list[str] = []
        for index, (change, outcome) in enumerate(pending):
            rejection = refused.get(index)
            if rejection is None:
                self._telemetry.event(
                    "outcome.published", outcome.run_id, status=outcome.status, outcome_id=outcome.outcome_id
                )
                self._telemetry.metric("OutcomeEvents", 1)
                continue
            self._failed(outcome, rejection.error, rejection.retryable)
            if rejection.retryable:
                retry.append(change.identifier)
        return retry

    def _failed(self, outcome: RunOutcome, error: str, retryable: bool) -> None:
        if retryable:
            self._telemetry.event(
                "outcome.publish_failed", outcome.run_id, status=outcome.status, error=error
            )
            self._telemetry.metric("OutcomeEventFailures", 1)
            return
        # The bus refuses the event itself (InvalidArgument, MalformedDetail): no later delivery
        # can succeed, and retrying would hold every later outcome of its stream shard for a day.
        # The run's record is unchanged in the runs table; this line and the metric's alarm say
        # which outcome was not put.
        self._telemetry.event("outcome.rejected", outcome.run_id, status=outcome.status, error=error)
        self._telemetry.metric("OutcomeEventsRejected", 1)


def recorded_outcome(record: dict[str, Any], since_ms: int, until_ms: int) -> RunOutcome | None:
    """The outcome a run record holds now, if it is terminal and was recorded in [since, until]:
    what ``jobsched outcomes replay`` puts again for a window whose stream records expired. (A
    record has only its latest outcome: an earlier one it was rerun from is not replayed.)"""
    outcome = outcome_of_change(RunChange("", None, record))
    if outcome is None or not since_ms <= outcome.recorded_at <= until_ms:
        return None
    return outcome
