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
