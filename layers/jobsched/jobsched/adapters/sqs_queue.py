"""The WorkQueue on SQS: one SendMessageBatch per call."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from botocore.exceptions import BotoCoreError, ClientError

from jobsched.core.errors import QueueError
from jobsched.core.limits import check_sqs_batch
from jobsched.core.run import encode_body
from jobsched.ports import OutgoingMessage, SendResult

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

MAX_DELAY_SECONDS = 900  # SQS's per-message delay stops at 15 minutes


def clamp_delay(seconds: int) -> int:
    return max(0, min(MAX_DELAY_SECONDS, int(seconds)))


def check_batch(messages: Sequence[OutgoingMessage]) -> None:
    """SQS's limits on one SendMessageBatch (core/limits.py): entries, message and batch bytes."""
    check_sqs_batch([encode_body(m.body) for m in messages])
    ids = [m.id for m in messages]
    if len(set(ids)) != len(ids):
        raise ValueError("message ids must be unique within a batch")


class SqsWorkQueue:
    """``WorkQueue`` on one SQS queue.

    Entries are sent under positional batch ids (``m0`` .. ``m9``) because SQS accepts only
    ``[A-Za-z0-9_-]{1,80}`` as an entry id and callers' ids (run ids) contain ``@`` and ``:``;
    ``SendResult.failed`` hands back the caller's own messages. An entry SQS rejects is returned
    in ``failed`` (the caller retries it); a failure of the whole request raises ``QueueError``.
    """

    def __init__(self, client: SQSClient, queue_url: str) -> None:
        self.client = client
        self.queue_url = queue_url

    def send(self, messages: Sequence[OutgoingMessage]) -> SendResult:
        check_batch(messages)
        if not messages:
            return SendResult()
        entries = [
            {
                "Id": f"m{index}",
                "MessageBody": encode_body(message.body),
                "DelaySeconds": clamp_delay(message.delay_seconds),
            }
            for index, message in enumerate(messages)
        ]
        try:
            response = self.client.send_message_batch(QueueUrl=self.queue_url, Entries=cast(Any, entries))
        except (ClientError, BotoCoreError) as error:
            raise QueueError(f"SendMessageBatch failed: {error}") from error
        failed_ids = {entry["Id"] for entry in response.get("Failed", [])}
        # An entry in neither list is treated as failed too: a duplicate send is harmless (the
        # worker's fencing makes delivery idempotent), a lost one is not.
        succeeded_ids = {entry["Id"] for entry in response.get("Successful", [])}
        return SendResult(
            failed=[
                message
                for index, message in enumerate(messages)
                if f"m{index}" in failed_ids or f"m{index}" not in succeeded_ids
            ]
        )

    def retry_after(self, receipt_handle: str, seconds: int) -> None:
        """Make a received message visible again in ``seconds`` (ChangeMessageVisibility), instead
        of after the queue's visibility timeout: a record reported as a batch item failure is
        then redelivered, and a poison one reaches the dead-letter queue, within minutes."""
        try:
            self.client.change_message_visibility(
                QueueUrl=self.queue_url, ReceiptHandle=receipt_handle, VisibilityTimeout=seconds
            )
        except (ClientError, BotoCoreError) as error:
            raise QueueError(f"ChangeMessageVisibility failed: {error}") from error
