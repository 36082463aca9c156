"""Outcome events on an EventBridge bus (PutEvents): one event per terminal outcome.

The event (docs/operations.md, "Outcome events"): source ``jobsched``, detail-type ``Run
Succeeded``, ``Run Failed``, ``Run Missed`` or ``Run Skipped``, and a detail carrying the run id,
the job id, the status, the instants, the reason and ``outcome_id``, the deduplication key.
"""

from __future__ import annotations

import json
from typing import Any

from jobsched.core.clock import iso_z
from jobsched.ports import RunOutcome

SOURCE = "jobsched"
DETAIL_TYPES = {
    "succeeded": "Run Succeeded",
    "failed": "Run Failed",
    "missed": "Run Missed",
    "skipped": "Run Skipped",
}
# A failure's error carries a traceback; the event keeps its start (an entry is at most 256 KB).
REASON_MAX_CHARS = 4_000


class OutcomePublishError(RuntimeError):
    pass


def outcome_detail(outcome: RunOutcome) -> dict[str, Any]:
    reason = outcome.reason[:REASON_MAX_CHARS] if outcome.reason is not None else None
    return {
        "outcome_id": outcome.outcome_id,
        "run_id": outcome.run_id,
        "job_id": outcome.job_id,
        "status": outcome.status,
        "scheduled_at": iso_z(outcome.scheduled_at) if outcome.scheduled_at is not None else None,
        "recorded_at": iso_z(outcome.recorded_at),
        "attempt": outcome.attempt,
        "reason": reason,
    }


class EventBridgeOutcomeSink:
    def __init__(self, events_client: Any, bus_name: str) -> None:
        self._client = events_client
        self._bus = bus_name

    def publish(self, outcome: RunOutcome) -> None:
        entry = {
            "EventBusName": self._bus,
            "Source": SOURCE,
            "DetailType": DETAIL_TYPES[outcome.status],
            "Detail": json.dumps(outcome_detail(outcome)),
            "Resources": [],
        }
        response = self._client.put_events(Entries=[entry])
        if response.get("FailedEntryCount"):
            failed = response["Entries"][0]
            raise OutcomePublishError(f"{failed.get('ErrorCode')}: {failed.get('ErrorMessage')}")
