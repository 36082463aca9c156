"""The SQS side of a job's dead-letter queue (services/dead_letters.py)."""

from __future__ import annotations

from typing import Any

from jobsched.core.limits import DEDUPLICATION_ID_MAX, fit


def queue_url(queue_arn: str) -> str:
    """The queue URL of an SQS queue ARN (``arn:PARTITION:sqs:REGION:ACCOUNT:NAME``). SQS's JSON
    protocol sends every request to the client's endpoint and reads the queue from the URL, so
    this form serves the local stack too."""
    parts = queue_arn.split(":")
    if len(parts) != 6 or parts[2] != "sqs":
        raise ValueError(f"{queue_arn!r} is not an SQS queue ARN")
    _, partition, _, region, account, name = parts
    suffix = "amazonaws.com.cn" if partition == "aws-cn" else "amazonaws.com"
    return f"https://sqs.{region}.{suffix}/{account}/{name}"


class SqsDeadLetterSender:
    def __init__(self, sqs: Any) -> None:
        self._sqs = sqs

    def send(self, queue_arn: str, body: str, deduplication_id: str) -> None:
        request: dict[str, Any] = {"QueueUrl": queue_url(queue_arn), "MessageBody": body}
        if queue_arn.endswith(".fifo"):
            # A FIFO queue deduplicates on this for 5 minutes; one group per job keeps its order.
            request["MessageDeduplicationId"] = fit(deduplication_id, DEDUPLICATION_ID_MAX)
            request["MessageGroupId"] = deduplication_id.split("@", 1)[0]
        self._sqs.send_message(**request)
