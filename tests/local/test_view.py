"""``jobsched local --view`` shows failed batch records and stream records passed over, with why."""

from __future__ import annotations

from jobsched_tools.local.demo import describe


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
    assert "next_run_at=T+5.0s" in registered
    paused = describe({"event": "job.paused", "correlation_id": "nightly"}, t0)
    deleted = describe({"event": "job.deleted", "correlation_id": "nightly"}, t0)
    assert paused is not None and "PAUSED" in paused and deleted is not None and "deleted" in deleted
    invalid = describe(
        {
            "event": "job.invalid",
            "correlation_id": "typo",
            "reasons": ["timezone: unknown time zone 'Europe/Berln'"],
        },
        t0,
    )
    assert invalid is not None and "INVALID" in invalid and "Europe/Berln" in invalid
