"""Outcome events on the local stack (`jobsched local --outcomes`): the outcome publisher runs
as a process behind the runs stream's mapping (its filter from template.yaml), and every run a
worker ends reaches a queue subscribed to the stack's outcome bus, as a team's rule would."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
from jobsched.adapters.aws import make_client
from jobsched.core.job import JobDefinition
from jobsched_tools.local.stack import PUBLISHER_MAPPING_ID, LocalStack, StackOptions, mapping_properties
from jobsched_tools.local.streams import matches

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


def test_the_local_mapping_applies_the_template_s_filter() -> None:
    (pattern,) = [
        json.loads(f["Pattern"])
        for f in mapping_properties(PUBLISHER_MAPPING_ID)["FilterCriteria"]["Filters"]
    ]

    def record(status: str | None) -> dict[str, Any]:
        image = {"status": {"S": status}} if status else {}
        return {"eventName": "MODIFY", "dynamodb": {"NewImage": image}}

    assert matches(pattern, record("succeeded")) and matches(pattern, record("missed"))
    assert not matches(pattern, record("running")) and not matches(pattern, record(None))
    assert not matches(pattern, {"eventName": "REMOVE", "dynamodb": {}})
    with pytest.raises(ValueError):
        matches({"dynamodb": {"NewImage": {"status": {"S": [{"prefix": "s"}]}}}}, record("succeeded"))


def test_runs_ended_on_the_local_stack_reach_the_outcome_bus() -> None:
    published: list[str] = []
    lock = threading.Lock()

    def sink(_proc: str, event: dict[str, Any]) -> None:
        if event.get("event") == "outcome.published":
            with lock:
                published.append(str(event.get("correlation_id")))

    options = StackOptions(workers=1, tick_seconds=1.0, outcomes=True, prefix="jobsched-outcomes")
    with LocalStack(options, sink=sink) as stack:
        state = stack.state()
        assert state["outcome_event_bus"] == "jobsched-outcomes-outcomes"
        ops = stack.operations()
        ops.register(JobDefinition(job_id="ping", schedule="rate(1 hour)", target="log"))
        manual = ops.trigger("ping", request_id="outcomes")  # runs now, outside its schedule
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with lock:
                if str(manual) in published:
                    break
            time.sleep(0.5)
        sqs = make_client("sqs", state["endpoint_url"], state["region"])
        received = sqs.receive_message(
            QueueUrl=state["outcome_events_queue_url"], MaxNumberOfMessages=10, WaitTimeSeconds=2
        )
    assert str(manual) in published
    details = [json.loads(m["Body"])["detail"] for m in received.get("Messages", [])]
    mine = [d for d in details if d["run_id"] == str(manual)]
    assert mine and mine[0]["status"] == "succeeded" and mine[0]["outcome_id"].startswith(str(manual))
