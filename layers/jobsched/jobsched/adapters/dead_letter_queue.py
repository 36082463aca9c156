"""The SQS side of a job's dead-letter queue (services/dead_letters.py)."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from jobsched.core.limits import DEDUPLICATION_ID_MAX, fit
from jobsched.ports import DeadLetterRefused

# SendMessage's errors that no retry mends until a person changes something (the queue, the
# caller's grants or the queue's KMS key), by the error shapes of SendMessage in SQS's API model
# (botocore's sqs service-2.json; the SendMessage API reference lists the same), each with what to
# do. Throttling (RequestThrottled, KmsThrottled), server errors and lost answers are retried.
_REFUSALS = {
    "QueueDoesNotExist": "the queue does not exist (deleted, or in another account or region): create "
    "it, or change the job's dead_letter_queue_arn",
    "AccessDenied": "the function's role may not send to it: is it in the stack's "
    "AllowedDeadLetterQueueArns, and does the queue's own policy allow the account?",
    "KmsAccessDenied": "the queue is encrypted with a customer-managed KMS key the function may not "
    "use: add the key's ARN to the stack's TargetKmsKeyArns (and let the key's policy allow the "
    "account's IAM policies)",
    "KmsDisabled": "the queue's KMS key is disabled: enable it",
    "KmsNotFound": "the queue's KMS key does not exist: give the queue a key that does",
    "KmsInvalidState": "the queue's KMS key cannot be used in its state (pending deletion?): cancel its "
    "deletion, or give the queue another key",
    "KmsInvalidKeyUsage": "the queue's KMS key cannot encrypt: give the queue a symmetric encryption key",
    "KmsOptInRequired": "the queue's KMS key needs an opt-in in this account",
    "InvalidAddress": "the queue's account id is not valid: change the job's dead_letter_queue_arn",
    "InvalidSecurity": "the queue refuses the request (HTTPS and SigV4 are required)",
    "UnsupportedOperation": "the queue does not support this send",
    "InvalidMessageContents": "the message holds characters SQS does not allow",
}
# SQS answers in its JSON protocol with query-compatible codes: botocore reports the modelled
# shape's name as ``QueryErrorCode`` and the older code as ``Code`` (moto 5.2 answers a missing
# queue with Code AWS.SimpleQueueService.NonExistentQueue, QueryErrorCode QueueDoesNotExist). An
# IAM refusal has no shape in the model: AccessDenied (or AccessDeniedException).
_QUERY_CODES = {
    "AWS.SimpleQueueService.NonExistentQueue": "QueueDoesNotExist",
    "AccessDeniedException": "AccessDenied",
    "KMS.AccessDeniedException": "KmsAccessDenied",
    "KMS.DisabledException": "KmsDisabled",
    "KMS.NotFoundException": "KmsNotFound",
    "KMS.InvalidStateException": "KmsInvalidState",
    "KMS.InvalidKeyUsageException": "KmsInvalidKeyUsage",
    "KMS.OptInRequired": "KmsOptInRequired",
    "AWS.SimpleQueueService.UnsupportedOperation": "UnsupportedOperation",
}


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


def refusal(error: ClientError) -> str | None:
    """What to do about a SendMessage error that no retry mends, after SQS's own words; None for
    an error worth retrying."""
    details = error.response.get("Error", {})
    codes = [str(details.get(name) or "") for name in ("QueryErrorCode", "Code")]
    for code in codes:
        shape = _QUERY_CODES.get(code, code)
        if shape in _REFUSALS:
            return f"{shape}: {details.get('Message') or error}; {_REFUSALS[shape]}"
    return None


class SqsDeadLetterSender:
    def __init__(self, sqs: Any) -> None:
        self._sqs = sqs

    def send(self, queue_arn: str, body: str, deduplication_id: str) -> None:
        request: dict[str, Any] = {"QueueUrl": queue_url(queue_arn), "MessageBody": body}
        if queue_arn.endswith(".fifo"):
            # A FIFO queue deduplicates on this for 5 minutes; one group per job keeps its order.
            request["MessageDeduplicationId"] = fit(deduplication_id, DEDUPLICATION_ID_MAX)
            request["MessageGroupId"] = deduplication_id.split("@", 1)[0]
        try:
            self._sqs.send_message(**request)
        except ClientError as exc:
            why = refusal(exc)
            if why is None:
                raise
            raise DeadLetterRefused(why) from exc
