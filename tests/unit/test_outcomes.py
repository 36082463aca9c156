"""Outcome events from run changes (services/outcomes.py) and onto the bus
(adapters/outcome_events.py): which writes are outcomes, what each carries, which failures are
delivered again, and how the adapter splits and classifies PutEvents' answers."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from jobsched.adapters.outcome_events import ENTRIES_PER_REQUEST, EventBridgeOutcomeSink
from jobsched.ports import OutcomeRejection, RunOutcome
from jobsched.services.outcomes import TERMINAL, OutcomePublisher, RunChange, outcome_of_change
from jobsched_tools.fakes.memory_telemetry import MemoryTelemetry

T0 = 1_796_083_200_000  # 2026-12-01T00:00:00Z
RUN = "nightly@2026-12-01T00:00:00Z"


def record(status: str, version: int, **fields: Any) -> dict[str, Any]:
    return {
        "job_id": "nightly",
        "run_id": RUN,
        "scheduled_at": T0,
        "status": status,
        "version": version,
        "attempt": 2,
        **fields,
    }


def change(old: dict[str, Any] | None, new: dict[str, Any] | None, identifier: str = "1") -> RunChange:
    return RunChange(identifier, old, new, changed_at=T0 + 9_000)


def test_the_write_that_ends_a_run_is_its_outcome_with_what_each_status_carries() -> None:
    running = record("running", 3)
    succeeded = outcome_of_change(change(running, record("succeeded", 4, finished_at=T0 + 5_000)))
    assert succeeded == RunOutcome(RUN, "nightly", "succeeded", 4, T0 + 5_000, T0, None, 2)
    assert succeeded.outcome_id == f"{RUN}#succeeded#4"
    failed = outcome_of_change(change(running, record("failed", 4, finished_at=T0, last_error="Boom: x")))
    assert failed is not None and (failed.reason, failed.attempt) == ("Boom: x", 2)
    # A missed occurrence is written as such (no earlier image); a skip from pending. Neither
    # ran, so neither has an attempt; each has its reason.
    missed = outcome_of_change(change(None, record("missed", 1, reason="job paused before it ran")))
    assert missed is not None and (missed.status, missed.reason, missed.attempt) == (
        "missed",
        "job paused before it ran",
        None,
    )
    skipped = outcome_of_change(
        change(record("pending", 1), record("skipped", 2, reason="overlap policy skip"))
    )
    assert skipped is not None and (skipped.reason, skipped.attempt) == ("overlap policy skip", None)
    # Without finished_at, the stream record's time stands in.
    assert outcome_of_change(change(running, record("succeeded", 4))).recorded_at == T0 + 9_000  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (None, record("pending", 1)),  # a claim
        (record("pending", 1), record("running", 2)),  # a start
        (record("running", 2), record("running", 2, lease_expires_at=T0)),  # a heartbeat
        (record("failed", 4), record("failed", 4, overtook=["x"])),  # a later write to a finished run
        (record("succeeded", 4), None),  # the TTL's removal
        (None, {"status": "succeeded", "version": 1}),  # no run id: not a run record
    ],
)
def test_a_write_that_does_not_end_a_run_is_no_outcome(
    old: dict[str, Any] | None, new: dict[str, Any] | None
) -> None:
    assert outcome_of_change(change(old, new)) is None


def test_a_missed_occurrence_rerun_and_missed_again_is_two_outcomes() -> None:
    first = outcome_of_change(change(None, record("missed", 1)))
    second = outcome_of_change(change(record("pending", 2), record("missed", 3)))
    assert first is not None and second is not None
    assert first.outcome_id != second.outcome_id  # a consumer keeps both


class ScriptedSink:
    """Answers each publish from a script: a list of rejections, or an exception to raise."""

    def __init__(self, *answers: list[OutcomeRejection] | Exception) -> None:
        self.answers = list(answers)
        self.calls: list[list[RunOutcome]] = []

    def publish(self, outcomes: Sequence[RunOutcome]) -> list[OutcomeRejection]:
        self.calls.append(list(outcomes))
        answer = self.answers.pop(0) if self.answers else []
        if isinstance(answer, Exception):
            raise answer
        return answer


def ending(identifier: str, status: str = "succeeded") -> RunChange:
    run = dict(record("running", 3), run_id=f"j@{identifier}")
    return change(run, dict(record(status, 4), run_id=f"j@{identifier}"), identifier)


def test_only_outcomes_are_published_and_only_what_may_yet_succeed_is_delivered_again() -> None:
    telemetry = MemoryTelemetry()
    sink = ScriptedSink(
        [
            OutcomeRejection(1, "ThrottlingException: slow down", retryable=True),
            OutcomeRejection(2, "MalformedDetail: bad", retryable=False),
        ]
    )
    not_an_outcome = change(record("pending", 1), record("running", 2), "9")
    retry = OutcomePublisher(sink, telemetry).publish([ending("1"), not_an_outcome, ending("2"), ending("3")])
    assert [o.run_id for o in sink.calls[0]] == ["j@1", "j@2", "j@3"]
    assert retry == ["2"]  # the throttled one; the refused one would be refused again
    assert telemetry.metric_sum("OutcomeEvents") == 1
    assert telemetry.metric_sum("OutcomeEventFailures") == 1
    assert telemetry.metric_sum("OutcomeEventsRejected") == 1
    (rejected,) = telemetry.named("outcome.rejected")
    assert (rejected.correlation_id, rejected.fields["error"]) == ("j@3", "MalformedDetail: bad")
    assert [e.correlation_id for e in telemetry.named("outcome.published")] == ["j@1"]


def test_a_call_that_fails_whole_delivers_every_outcome_again() -> None:
    telemetry = MemoryTelemetry()
    sink = ScriptedSink(ConnectionError("bus unreachable"))
    retry = OutcomePublisher(sink, telemetry).publish([ending("1"), ending("2", "failed")])
    assert retry == ["1", "2"]
    assert telemetry.metric_sum("OutcomeEventFailures") == 2
    assert "bus unreachable" in telemetry.named("outcome.publish_failed")[0].fields["error"]
    # A batch with no outcome calls nothing.
    assert OutcomePublisher(sink, telemetry).publish([change(None, record("pending", 1))]) == []
    assert len(sink.calls) == 1


class FakeEvents:
    """PutEvents that fails the entries whose detail names a run in ``codes``."""

    def __init__(self, codes: dict[str, str]) -> None:
        self.codes = codes
        self.requests: list[list[dict[str, Any]]] = []

    def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        self.requests.append(Entries)
        results = []
        for entry in Entries:
            code = self.codes.get(json.loads(entry["Detail"])["run_id"])
            results.append({"ErrorCode": code, "ErrorMessage": "no"} if code else {"EventId": "e"})
        return {"FailedEntryCount": sum(1 for r in results if "ErrorCode" in r), "Entries": results}


def test_the_adapter_puts_ten_a_request_and_names_the_failed_entries_by_index() -> None:
    outcomes = [RunOutcome(f"j@{i}", "j", "succeeded", 1, T0) for i in range(25)]
    client = FakeEvents(
        {"j@3": "ThrottlingException", "j@12": "InvalidArgument", "j@24": "AccessDeniedException"}
    )
    rejections = EventBridgeOutcomeSink(client, "ops").publish(outcomes)
    assert [len(r) for r in client.requests] == [ENTRIES_PER_REQUEST, ENTRIES_PER_REQUEST, 5]
    assert [(r.index, r.retryable) for r in rejections] == [(3, True), (12, False), (24, True)]
    assert rejections[1].error == "InvalidArgument: no"
    assert {e["EventBusName"] for request in client.requests for e in request} == {"ops"}


def test_every_terminal_status_has_a_detail_type() -> None:
    from jobsched.adapters.outcome_events import DETAIL_TYPES

    assert set(DETAIL_TYPES) == TERMINAL
