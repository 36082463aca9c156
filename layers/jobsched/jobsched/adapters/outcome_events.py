"""Outcome events on an EventBridge bus (PutEvents): one event per terminal outcome.

The event (docs/operations.md, "Outcome events"): source ``jobsched``, detail-type ``Run
Succeeded``, ``Run Failed``, ``Run Missed`` or ``Run Skipped``, and a detail carrying the run id,
the job id, the status, the record's version, the instants, the reason and ``outcome_id``, the
deduplication key.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from jobsched.core.clock import iso_z
from jobsched.ports import OutcomeRejection, RunOutcome

SOURCE = "jobsched"
DETAIL_TYPES = {
    "succeeded": "Run Succeeded",
    "failed": "Run Failed",
    "missed": "Run Missed",
    "skipped": "Run Skipped",
}
# A failure's error carries a traceback; the event keeps its start (an entry is at most 256 KB).
REASON_MAX_CHARS = 4_000


# PutEvents takes at most 10 entries a request
# (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-quota.html). Each outcome's detail
# is a few hundred bytes plus its reason (at most REASON_MAX_CHARS), far under the request's size
# limit.
ENTRIES_PER_REQUEST = 10

# A failed entry's ErrorCode, as AWS classes them
# (https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_PutEventsResultEntry.html):
# these two concern the event itself, so no later attempt can succeed. AWS also calls
# AccessDeniedException and the NotAuthorized* codes non-retryable; jobsched retries them, since
# fixing the role or the bus's policy makes the same event succeed, and an outcome must not be
# dropped for a permission that is being repaired.
REFUSED_EVENT = frozenset({"InvalidArgument", "MalformedDetail"})


def outcome_detail(outcome: RunOutcome) -> dict[str, Any]:
    reason = outcome.reason[:REASON_MAX_CHARS] if outcome.reason is not None else None
    return {
        "outcome_id": outcome.outcome_id,
        "run_id": outcome.run_id,
        "job_id": outcome.job_id,
        "status": outcome.status,
        "version": outcome.version,
        "scheduled_at": iso_z(outcome.scheduled_at) if outcome.scheduled_at is not None else None,
        "recorded_at": iso_z(outcome.recorded_at),
        "attempt": outcome.attempt,
        "reason": reason,
    }


class EventBridgeOutcomeSink:
    def __init__(self, events_client: Any, bus_name: str) -> None:
        self._client = events_client
        self._bus = bus_name

    def entry(self, outcome: RunOutcome) -> dict[str, Any]:
        return {
            "EventBusName": self._bus,
            "Source": SOURCE,
            "DetailType": DETAIL_TYPES[outcome.status],
            "Detail": json.dumps(outcome_detail(outcome)),
            "Resources": [],
        }

    def publish(self, outcomes: Sequence[RunOutcome]) -> list[OutcomeRejection]:
        """One PutEvents per ten outcomes; the entries EventBridge did not accept, by index. A
        request that fails whole raises (botocore has retried it by then)."""
        rejections: list[OutcomeRejection] = []
        for first in range(0, len(outcomes), ENTRIES_PER_REQUEST):
            chunk = outcomes[first : first + ENTRIES_PER_REQUEST]
            response = self._client.put_events(Entries=[self.entry(outcome) for outcome in chunk])
            if not response.get("FailedEntryCount"):
                continue
            for offset, result in enumerate(response.get("Entries", [])):
                code = result.get("ErrorCode")
                if code:
                    error = f"{code}: {result.get('ErrorMessage', '')}"
                    rejections.append(OutcomeRejection(first + offset, error, code not in REFUSED_EVENT))
        return rejections
