"""``jobsched local --view`` shows failed batch records and stream records passed over, with why."""

from __future__ import annotations

import json

import pytest
from jobsched_tools.local.demo import View, describe
from jobsched_tools.local.proc import _dead_lettered


def test_a_failed_record_is_shown_with_its_reason() -> None:
    line = describe(
        {
            "event": "batch.record_failed",
            "correlation_id": "19dd0b57-b21e-4ac1-bd88-01bbb068cb78",
            "reason": "not a run message: body: Invalid JSON",
            "proc": "worker-1",
        },
        0,
    )
    assert line is not None
    assert "19dd0b57-b21e-4ac1-bd88-01bbb068cb78" in line and "RECORD FAILED" in line
    assert "reason=not a run message: body: Invalid JSON" in line


def test_a_stream_record_passed_over_is_shown() -> None:
    line = describe({"event": "local.stream_record_discarded", "proc": "registrar-1"}, 0)
    assert line is not None and "passed over" in line


def test_what_people_do_to_their_jobs_is_shown() -> None:
    """Issue 28 item 13: registering, pausing, deleting and an invalid item show in the view."""
    t0 = 1_796_083_200_000
    registered = describe(
        {"event": "job.scheduled", "correlation_id": "nightly", "next_run_at": t0 + 5_000}, t0
    )
    assert registered is not None and "nightly" in registered and "registered" in registered
    assert "next_run_at=2026-12-01 00:00:05 UTC" in registered
    paused = describe({"event": "job.paused", "correlation_id": "nightly"}, t0)
    deleted = describe({"event": "job.deleted", "correlation_id": "nightly"}, t0)
    assert paused is not None and "paused" in paused and deleted is not None and "deleted" in deleted
    invalid = describe(
        {
            "event": "job.invalid",
            "correlation_id": "typo",
            "reasons": ["timezone: unknown time zone 'Europe/Berln'"],
        },
        t0,
    )
    assert invalid is not None and "INVALID" in invalid and "Europe/Berln" in invalid


def test_next_run_at_is_a_time_not_an_offset_hours_out() -> None:
    """Issue 36 item 10: it printed next_run_at=T+29036.4s for a run 8 hours out."""
    t0 = 1_796_083_200_000  # 2026-12-01 00:00:00 UTC
    line = describe(
        {"event": "job.scheduled", "correlation_id": "nightly", "next_run_at": t0 + 29_036_400}, t0
    )
    assert line is not None and "next_run_at=2026-12-01 08:03:56 UTC" in line and "T+29036" not in line


def test_a_persons_pause_and_a_pause_on_failure_read_apart() -> None:
    """Both were "job PAUSED": the registrar applies either as job.paused."""
    view = View(0)
    by_person = view.line({"event": "job.paused", "correlation_id": "etl.load", "proc": "registrar-1"})
    assert by_person is not None and "paused by a person" in by_person
    failed = view.line(
        {
            "event": "job.paused_on_failure",
            "correlation_id": "etl.extract",
            "run_id": "etl.extract@manual:x",
            "reason": "run etl.extract@manual:x failed: RuntimeError: boom",
            "proc": "worker-1",
        }
    )
    assert failed is not None and "PAUSED ON FAILURE" in failed and "RuntimeError: boom" in failed
    applied = view.line({"event": "job.paused", "correlation_id": "etl.extract", "proc": "registrar-1"})
    assert applied is not None and "the pause on failure above, applied" in applied
    assert "by a person" not in applied


def test_a_message_to_the_dead_letter_queue_is_shown(capsys: pytest.CaptureFixture[str]) -> None:
    """It showed nothing: SQS moves a message silently. The local SQS poller says so when a
    message's last receive (the queue's maxReceiveCount) failed, and the view shows it."""
    body = '{"job_id": "hello", "run_id": "hello@manual:by-hand"}'
    failed = [
        {"MessageId": "m-4", "Body": body, "Attributes": {"ApproximateReceiveCount": "4"}},
        {"MessageId": "m-5", "Body": body, "Attributes": {"ApproximateReceiveCount": "5"}},
        {"MessageId": "m-6", "Body": "not json", "Attributes": {"ApproximateReceiveCount": "6"}},
    ]
    _dead_lettered("worker-1", failed, max_receives=5)
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(e["event"], e["correlation_id"], e["receive_count"]) for e in events] == [
        ("dlq.dead_lettered", "hello@manual:by-hand", 5),
        ("dlq.dead_lettered", "m-6", 6),
    ]
    line = View(0).line(events[0])
    assert line is not None and "TO THE DEAD-LETTER QUEUE" in line and "receive_count=5" in line
    assert "hello@manual:by-hand" in line and "jobsched dlq list --local" in line
