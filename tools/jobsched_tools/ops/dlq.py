"""The work queue's dead-letter queue: look at its messages (``jobsched dlq list``) and move them
back to the work queue (``jobsched dlq redrive``), both bounded by what the DLQ held at the start.

What this relies on (Amazon SQS documentation):

- ``GetQueueAttributes`` ``ApproximateNumberOfMessages``: "the approximate number of messages
  available for retrieval from the queue". Read once at the start, it bounds the work: an empty
  DLQ costs one request and no receive at all, and a redrive moves at most that many messages,
  so a message that bounces back (a poison message dead-lettered again while the redrive is
  still going) is not moved a second time. The count is approximate: a message it did not count
  is left for the next run, and the report says how many are left.
- ``ReceiveMessage`` ``WaitTimeSeconds``: 0 is short polling, which answers at once but samples
  a subset of servers, so it can answer empty while messages wait; a wait of 1 s or more is long
  polling, which does not give false empties. A receive is made only when messages are expected,
  with a 1 s wait: an empty DLQ never waits.
- ``Message.MessageId``: "considered unique across all AWS accounts for an extended period of
  time", and a message moved to a dead-letter queue is the same message (its enqueue timestamp is
  unchanged, "Setting-up dead-letter queue retention"). A redrive remembers the ids it received
  and the ids the work queue gave what it sent: a message received again is not moved again.
- ``ApproximateReceiveCount``: "the number of times a message has been received across all
  queues but not deleted" (the work queue's receives included). A listing shows it less its own
  receive; an earlier listing's receive counts.

A listing receives each message (bounded by the count read first) with a visibility timeout,
then makes every received message visible again at once (``ChangeMessageVisibility`` to 0): it
moves nothing. A redrive sends a batch to the work queue, then deletes from the DLQ what the work
queue took: at least once (a message sent and not deleted when it stops is sent again next time,
and the worker drops the duplicate: its run record is fenced).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

BATCH = 10  # SQS's most per receive and per batch send or delete
# While a listing or a redrive holds a message, no one else receives it.
HOLD_SECONDS = 60
LONG_POLL_SECONDS = 1


@dataclass
class DeadLetter:
    """One message on the DLQ, as a person reads it."""

    message_id: str
    job_id: str | None
    run_id: str | None
    receive_count: int | None
    sent_at: int | None  # epoch ms: when it was first sent to the work queue (kept by the DLQ)
    reason: str  # why it is here, where known


@dataclass
class Redrive:
    at_start: int  # the DLQ's visible messages when it began
    moved: list[DeadLetter] = field(default_factory=list)
    refused: int = 0  # sent, and refused by the work queue: they stay on the DLQ
    came_back: int = 0  # received again during this redrive (a bounce): not moved twice
    left: int = 0  # visible on the DLQ at the end


def depth(sqs: Any, queue_url: str) -> int:
    attributes = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["ApproximateNumberOfMessages"])[
        "Attributes"
    ]
    return int(attributes.get("ApproximateNumberOfMessages", 0))


def _receive(sqs: Any, queue_url: str, count: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = sqs.receive_message(
        QueueUrl=queue_url,
        MaxNumberOfMessages=count,
        WaitTimeSeconds=LONG_POLL_SECONDS,
        VisibilityTimeout=HOLD_SECONDS,
        AttributeNames=["All"],
        MessageAttributeNames=["All"],
    ).get("Messages", [])
    return messages


Explain = Callable[[str | None], str]  # a run id -> what its record says, where known


def describe(message: dict[str, Any], explain: Explain) -> DeadLetter:
    """The job and run a message names (a jobsched run message's body), its receive count before
    the receive that read it, and why it is here: a body that is not a run message is poison (the
    worker refused it); otherwise what the run's record says."""
    from jobsched.core.run import RunMessage
    from pydantic import ValidationError

    attributes = message.get("Attributes", {})
    receives = attributes.get("ApproximateReceiveCount")
    sent = attributes.get("SentTimestamp")
    job_id = run_id = None
    try:
        run = RunMessage.model_validate_json(message.get("Body", ""))
        job_id, run_id = run.job_id, run.run_id
        reason = explain(run_id)
    except ValidationError as exc:
        try:
            body = json.loads(message.get("Body", ""))
        except ValueError:
            body = None
        if isinstance(body, dict):
            job_id = str(body["job_id"]) if body.get("job_id") else None
            run_id = str(body["run_id"]) if body.get("run_id") else None
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ())) or "body"
        reason = f"not a run message the worker accepts ({where}: {first.get('msg', 'invalid')})"
    return DeadLetter(
        str(message.get("MessageId")),
        job_id,
        run_id,
        int(receives) - 1 if receives is not None else None,
        int(sent) if sent is not None else None,
        reason,
    )


def look(sqs: Any, dlq_url: str, explain: Explain, limit: int | None = None) -> tuple[int, list[DeadLetter]]:
    """The DLQ's messages, at most ``limit``, moved nowhere: ``(count at the start, messages)``."""
    at_start = depth(sqs, dlq_url)
    want = at_start if limit is None else min(at_start, limit)
    seen: dict[str, dict[str, Any]] = {}
    try:
        while len(seen) < want:
            received = _receive(sqs, dlq_url, min(BATCH, want - len(seen)))
            fresh = [m for m in received if m["MessageId"] not in seen]
            seen.update((m["MessageId"], m) for m in received)
            if not fresh:
                break
    finally:
        _release(sqs, dlq_url, list(seen.values()))
    return at_start, [describe(m, explain) for m in seen.values()]


def _release(sqs: Any, queue_url: str, messages: list[dict[str, Any]]) -> None:
    """Make received messages visible again now, as they were."""
    for start in range(0, len(messages), BATCH):
        batch = messages[start : start + BATCH]
        sqs.change_message_visibility_batch(
            QueueUrl=queue_url,
            Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0}
                for i, m in enumerate(batch)
            ],
        )


def redrive(sqs: Any, dlq_url: str, queue_url: str, explain: Explain, limit: int | None = None) -> Redrive:
    """Move the messages the DLQ held at the start to the work queue, each at most once, at most
    ``limit`` of them."""
    done = Redrive(at_start=depth(sqs, dlq_url))
    budget = done.at_start if limit is None else min(done.at_start, limit)
    received_ids: set[str] = set()  # received from the DLQ by this redrive
    sent_ids: set[str] = set()  # the work queue's ids of what this redrive sent
    while len(done.moved) < budget:
        received = _receive(sqs, dlq_url, min(BATCH, budget - len(done.moved)))
        if not received:
            break
        fresh = [m for m in received if m["MessageId"] not in received_ids | sent_ids]
        again = [m for m in received if m not in fresh]
        received_ids.update(m["MessageId"] for m in received)
        if again:  # it bounced back: leave it on the DLQ (visible again at once) and stop
            done.came_back += len(again)
            _release(sqs, dlq_url, again)
        if fresh:
            moved, refused = _move(sqs, dlq_url, queue_url, fresh, sent_ids)
            done.moved += [describe(m, explain) for m in moved]
            done.refused += len(refused)
            if refused:
                _release(sqs, dlq_url, refused)
                break  # the work queue refused some: they stay on the DLQ (visible again later)
        if again:
            break
    done.left = depth(sqs, dlq_url)
    return done


def _move(
    sqs: Any, dlq_url: str, queue_url: str, messages: list[dict[str, Any]], sent_ids: set[str]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    entries = [
        {
            "Id": str(i),
            "MessageBody": m["Body"],
            **(
                {"MessageAttributes": _attributes(m["MessageAttributes"])}
                if m.get("MessageAttributes")
                else {}
            ),
        }
        for i, m in enumerate(messages)
    ]
    sent = sqs.send_message_batch(QueueUrl=queue_url, Entries=entries)
    taken = {entry["Id"]: entry.get("MessageId") for entry in sent.get("Successful", [])}
    sent_ids.update(str(message_id) for message_id in taken.values() if message_id)
    moved = [m for i, m in enumerate(messages) if str(i) in taken]
    if moved:
        sqs.delete_message_batch(
            QueueUrl=dlq_url,
            Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(moved)],
        )
    return moved, [m for i, m in enumerate(messages) if str(i) not in taken]


def _attributes(attributes: dict[str, Any]) -> dict[str, Any]:
    """A received message's attributes as SendMessage takes them."""
    keep = ("DataType", "StringValue", "BinaryValue")
    return {name: {k: v for k, v in value.items() if k in keep} for name, value in attributes.items()}
