"""Issue 27, item 5: a work message reported as a batch item failure comes back in seconds to
minutes, not after the queue's visibility timeout (six worker timeouts: 5,400 s at the defaults).

The worker shortens a failed record's visibility with ChangeMessageVisibility: 10 s after the
first receive, doubling per receive up to 300 s; a poison record (not a run message) at once. So a
message that keeps failing reaches the dead-letter queue (DlqMaxReceiveCount 5) about 5 minutes
after its first receive, where it took 5 x 5,400 s = 7.5 hours."""

from __future__ import annotations

from typing import Any

import pytest
from jobsched.runtime import wiring
from jobsched.runtime.records import RETRY_VISIBILITY_MAX_S, retry_visibility_seconds
from jobsched.services.worker import Worker
from jobsched_tools.emulator.provision import find_template, load_template
from lambda_apps import FakeContext, event, load_app


def test_the_retry_visibility_doubles_from_10_s_up_to_300_s() -> None:
    assert [retry_visibility_seconds(n) for n in range(1, 8)] == [10, 20, 40, 80, 160, 300, 300]
    assert retry_visibility_seconds(0) == 10  # a missing count reads as the first receive
    assert retry_visibility_seconds(10**6) == RETRY_VISIBILITY_MAX_S
    assert retry_visibility_seconds(3, poison=True) == 0


@pytest.mark.parametrize("max_receives", [5, 10])
def test_a_failing_message_reaches_the_dlq_within_minutes(max_receives: int) -> None:
    """Receives 1..max_receives each fail and set the next visibility; SQS moves the message to
    the DLQ at the receive after the last. The template's default count, and a larger one."""
    default = int(load_template()["Parameters"]["DlqMaxReceiveCount"]["Default"])
    assert default == 5
    to_dlq_s = sum(retry_visibility_seconds(n) for n in range(1, max_receives + 1))
    assert to_dlq_s <= {5: 310, 10: 1810}[max_receives]  # ~5 min at the default, ~30 min at 10
    assert find_template().is_file()


def _received_batch(sqs: Any, queue_url: str, bodies: list[str]) -> dict[str, Any]:
    """An SQS event of real messages (real receipt handles), as the event source mapping builds it."""
    for body in bodies:
        sqs.send_message(QueueUrl=queue_url, MessageBody=body)
    got = sqs.receive_message(
        QueueUrl=queue_url, MaxNumberOfMessages=10, AttributeNames=["All"], WaitTimeSeconds=0
    )["Messages"]
    assert len(got) == len(bodies)
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": m["Attributes"],
                "messageAttributes": {},
                "md5OfBody": m["MD5OfBody"],
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:work",
                "awsRegion": "us-east-1",
            }
            for m in got
        ]
    }


def test_the_worker_shortens_a_failed_record_s_visibility(
    aws: tuple[Any, Any, Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    resources, _dynamodb, sqs, _clock = aws
    url = resources.work_queue_url
    run = event("worker_sqs_batch.json")["Records"][0]["body"]  # a valid run message

    def store_down(*_args: Any) -> Any:
        raise RuntimeError("DynamoDB is unreachable")

    monkeypatch.setattr(Worker, "process", store_down)
    batch = _received_batch(sqs, url, ["not json", run])
    seen: list[dict[str, Any]] = []
    client = wiring.app().queue.client
    client.meta.events.register(
        "provide-client-params.sqs.ChangeMessageVisibility", lambda params, **_: seen.append(dict(params))
    )

    result = load_app("worker").lambda_handler(batch, FakeContext("work-retry"))

    assert len(result["batchItemFailures"]) == 2
    by_handle = {r["receiptHandle"]: r["body"] for r in batch["Records"]}
    assert {by_handle[c["ReceiptHandle"]]: c["VisibilityTimeout"] for c in seen} == {
        "not json": 0,  # poison: straight back, so it reaches the DLQ within seconds
        run: 10,  # the first receive of a message that failed: 10 s
    }
    # The poison message is visible again at once (the queue's own visibility is 6 worker timeouts).
    again = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0).get("Messages", [])
    assert [m["Body"] for m in again] == ["not json"]
