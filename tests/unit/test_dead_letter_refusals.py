"""Which SQS answers to a dead-letter send are refusals no retry mends (adapters/dead_letter_queue.py),
by the codes botocore reports for SendMessage's modelled errors (SQS's JSON protocol with its
query-compatible codes), and an IAM refusal. moto checks no IAM and encrypts nothing, so the KMS
and IAM answers are built here as botocore builds them."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError
from jobsched.adapters.dead_letter_queue import SqsDeadLetterSender, refusal
from jobsched.ports import DeadLetterRefused

QUEUE = "arn:aws:sqs:us-east-1:123456789012:job-failures"


def error(code: str, message: str = "refused", query_code: str | None = None) -> ClientError:
    details: dict[str, Any] = {"Code": code, "Message": message}
    if query_code is not None:
        details["QueryErrorCode"] = query_code
    return ClientError({"Error": details}, "SendMessage")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        # moto 5.2's (and SQS's) answer for a missing queue.
        (error("AWS.SimpleQueueService.NonExistentQueue", "gone", "QueueDoesNotExist"), "does not exist"),
        # A queue under a customer-managed key the role may not use (the re:Post knowledge
        # center's example names KMS.AccessDeniedException on SendMessage).
        (
            error("KMS.AccessDeniedException", "not authorized to perform: kms:GenerateDataKey"),
            "TargetKmsKeyArns",
        ),
        (error("KmsAccessDenied"), "TargetKmsKeyArns"),
        (error("KMS.DisabledException"), "disabled: enable it"),
        (error("AccessDenied"), "AllowedDeadLetterQueueArns"),
    ],
)
def test_a_refusal_says_what_to_change(answer: ClientError, says: str) -> None:
    why = refusal(answer)
    assert why is not None and says in why
    assert str(answer.response["Error"]["Message"]) in why  # SQS's own words too


@pytest.mark.parametrize(
    "code", ["RequestThrottled", "KMS.ThrottlingException", "KmsThrottled", "InternalError"]
)
def test_throttling_and_server_errors_are_retried(code: str) -> None:
    assert refusal(error(code)) is None


class FakeSqs:
    def __init__(self, answer: Exception) -> None:
        self.answer = answer

    def send_message(self, **_request: Any) -> None:
        raise self.answer


def test_the_sender_raises_a_refusal_as_such_and_anything_else_as_it_came() -> None:
    with pytest.raises(DeadLetterRefused, match="TargetKmsKeyArns"):
        SqsDeadLetterSender(FakeSqs(error("KMS.AccessDeniedException"))).send(QUEUE, "{}", "j@1")
    throttled = error("RequestThrottled")
    with pytest.raises(ClientError) as raised:
        SqsDeadLetterSender(FakeSqs(throttled)).send(QUEUE, "{}", "j@1")
    assert raised.value is throttled
