"""One send contract for every WorkQueue: MemoryWorkQueue and SqsWorkQueue (on moto) agree.

Then the consumer semantics the simulation relies on, for MemoryWorkQueue with a ManualClock:
delays, visibility timeouts, redelivery with fresh receipts, dead letters, determinism.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from botocore.stub import Stubber
from jobsched.adapters.aws import RequestCounter, make_client
from jobsched.adapters.sqs_queue import SqsWorkQueue
from jobsched.core.clock import ManualClock
from jobsched.core.errors import QueueError
from jobsched.ports import OutgoingMessage, SendResult, WorkQueue
from jobsched_tools.emulator.provision import provision
from jobsched_tools.fakes.memory_queue import MemoryWorkQueue
from moto import mock_aws

Receive = Callable[[], list[dict[str, Any]]]


class Harness:
    """A queue under test, how to read what is visible now, and how far delays reach."""

    def __init__(self, queue: WorkQueue, receive: Receive, advance: Callable[[int], None] | None) -> None:
        self.queue = queue
        self.receive = receive
        self.advance = advance


@pytest.fixture(scope="module")
def sqs_client() -> Iterator[Any]:
    with mock_aws():
        sqs = make_client("sqs", region="us-east-1")
        # The template's queues exist and are usable (schema from template.yaml via provision).
        provision(make_client("dynamodb", region="us-east-1"), sqs, prefix="queue-contract")
        yield sqs


_queues = iter(range(10**6))


@pytest.fixture
def sqs_queue_url(sqs_client: Any) -> str:
    """A fresh queue per test (moto, like SQS, allows one PurgeQueue a minute)."""
    return str(sqs_client.create_queue(QueueName=f"contract-{next(_queues)}")["QueueUrl"])


@pytest.fixture(params=["memory", "sqs"])
def harness(request: pytest.FixtureRequest) -> Harness:
    if request.param == "memory":
        clock = ManualClock(1_000_000)
        memory = MemoryWorkQueue(clock, visibility_timeout_seconds=30)

        def receive_memory() -> list[dict[str, Any]]:
            got = memory.receive(100)
            for receipt, _ in got:
                memory.delete(receipt)
            return [body for _, body in got]

        return Harness(memory, receive_memory, lambda seconds: clock.advance(seconds * 1000))
    sqs = request.getfixturevalue("sqs_client")
    url = request.getfixturevalue("sqs_queue_url")

    def receive() -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        while True:
            got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0).get(
                "Messages", []
            )
            if not got:
                return out
            out += [json.loads(m["Body"]) for m in got]
            sqs.delete_message_batch(
                QueueUrl=url,
                Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)],
            )

    return Harness(SqsWorkQueue(sqs, url), receive, None)


def message(i: int, delay: int = 0) -> OutgoingMessage:
    # Run ids contain "@" and ":", which SQS does not accept as batch entry ids.
    return OutgoingMessage(
        id=f"job-{i}@2026-01-01T00:00:00Z",
        body={"run_id": f"job-{i}", "version": i, "n": [i]},
        delay_seconds=delay,
    )


def test_send_a_full_batch(harness: Harness) -> None:
    result = harness.queue.send([message(i) for i in range(10)])
    assert result == SendResult(failed=[])
    bodies = harness.receive()
    assert sorted(bodies, key=lambda b: b["version"]) == [message(i).body for i in range(10)]


def test_empty_batch_sends_nothing(harness: Harness) -> None:
    assert harness.queue.send([]) == SendResult(failed=[])
    assert harness.receive() == []


def test_batch_limits(harness: Harness) -> None:
    with pytest.raises(ValueError):
        harness.queue.send([message(i) for i in range(11)])
    with pytest.raises(ValueError):
        harness.queue.send([message(1), message(1)])


def test_delays_are_clamped(harness: Harness) -> None:
    result = harness.queue.send([message(1, delay=-30), message(2, delay=5000), message(3, delay=2)])
    assert result.failed == []
    assert [b["version"] for b in harness.receive()] == [1]  # a negative delay is no delay
    if harness.advance is None:
        return  # moto's clock is the wall clock; the clamping of the request is checked below
    harness.advance(2)
    assert [b["version"] for b in harness.receive()] == [3]
    harness.advance(900 - 2 - 1)
    assert harness.receive() == []
    harness.advance(1)
    assert [b["version"] for b in harness.receive()] == [2]  # 5000 s became SQS's maximum, 900 s


def test_sqs_request_is_compact_and_clamped(sqs_client: Any, sqs_queue_url: str) -> None:
    sqs, url = sqs_client, sqs_queue_url
    captured: list[dict[str, Any]] = []
    handler_id = "capture-send"

    def capture(params: dict[str, Any], **kwargs: Any) -> None:
        captured.append(params)

    sqs.meta.events.register("provide-client-params.sqs.SendMessageBatch", capture, unique_id=handler_id)
    try:
        SqsWorkQueue(sqs, url).send([message(1, delay=-1), message(2, delay=901), message(3, delay=7)])
    finally:
        sqs.meta.events.unregister("provide-client-params.sqs.SendMessageBatch", unique_id=handler_id)
    entries = captured[-1]["Entries"]
    assert [e["DelaySeconds"] for e in entries] == [0, 900, 7]
    assert [e["Id"] for e in entries] == ["m0", "m1", "m2"]
    assert entries[0]["MessageBody"] == '{"n":[1],"run_id":"job-1","version":1}'


def test_sqs_reports_failed_entries_as_the_callers_messages() -> None:
    sqs = make_client("sqs", region="us-east-1")
    queue = SqsWorkQueue(sqs, "https://sqs.us-east-1.amazonaws.com/123456789012/q")
    messages = [message(i) for i in range(4)]
    with Stubber(sqs) as stub:
        stub.add_response(
            "send_message_batch",
            {
                "Successful": [
                    {"Id": "m0", "MessageId": "a", "MD5OfMessageBody": "x"},
                    {"Id": "m2", "MessageId": "c", "MD5OfMessageBody": "x"},
                ],
                "Failed": [{"Id": "m1", "SenderFault": False, "Code": "InternalError"}],
            },
        )
        # m3 is in neither list: treated as failed (a duplicate is harmless, a loss is not).
        assert queue.send(messages).failed == [messages[1], messages[3]]
        stub.add_client_error(
            "send_message_batch", service_error_code="AWS.SimpleQueueService.NonExistentQueue"
        )
        with pytest.raises(QueueError):
            queue.send(messages)


def test_sqs_connection_failure_is_a_queue_error() -> None:
    sqs = make_client(
        "sqs", endpoint_url="http://127.0.0.1:9", region="us-east-1", max_attempts=1, connect_timeout=0.5
    )
    with pytest.raises(QueueError):
        SqsWorkQueue(sqs, "http://127.0.0.1:9/123456789012/q").send([message(1)])


def test_request_counter_counts_sqs_calls(sqs_client: Any, sqs_queue_url: str) -> None:
    sqs, url = sqs_client, sqs_queue_url
    counter = RequestCounter().attach(sqs)
    try:
        queue = SqsWorkQueue(sqs, url)
        queue.send([message(1)])
        queue.send([message(i) for i in range(10)])
        assert counter.snapshot()["calls"] == {"sqs:SendMessageBatch": 2}
        assert counter.total("sqs", attempts=True) == 2
    finally:
        counter.detach(sqs)


# ------------------------------------------------------------------ MemoryWorkQueue only


def test_memory_failure_injection() -> None:
    clock = ManualClock(0)
    queue = MemoryWorkQueue(clock, fail_message=lambda m: m.body["version"] % 2 == 1)
    messages = [message(i) for i in range(6)]
    assert queue.send(messages).failed == [messages[1], messages[3], messages[5]]
    assert queue.pending() == 3
    queue.fail_request = lambda batch: len(batch) > 1
    with pytest.raises(QueueError):
        queue.send(messages[:2])
    assert queue.pending() == 3  # a failed request queues nothing
    queue.send([messages[0]])
    assert queue.pending() == 4


def test_memory_visibility_redelivery_and_receipts() -> None:
    clock = ManualClock(0)
    queue = MemoryWorkQueue(clock, visibility_timeout_seconds=30)
    queue.send([message(1), message(2, delay=10)])
    first = queue.receive(10)
    assert [body["version"] for _, body in first] == [1]
    assert queue.receive(10) == []  # in flight: hidden
    clock.advance(10_000)
    assert [body["version"] for _, body in queue.receive(10)] == [2]
    clock.advance(20_000)  # message 1's visibility timeout ends
    again = queue.receive(10)
    assert [body["version"] for _, body in again] == [1]
    assert again[0][0] != first[0][0]
    assert queue.delete(first[0][0]) is False  # a stale receipt deletes nothing
    assert queue.delete(again[0][0]) is True
    assert queue.delete(again[0][0]) is False
    assert queue.pending() == 1  # message 2, in flight


def test_memory_receive_oldest_first_and_max_n() -> None:
    clock = ManualClock(0)
    queue = MemoryWorkQueue(clock)
    queue.send([message(i) for i in range(10)])
    queue.send([message(i) for i in range(10, 15)])
    got = queue.receive(4)
    assert [body["version"] for _, body in got] == [0, 1, 2, 3]
    assert [body["version"] for _, body in queue.receive(100)] == list(range(4, 15))
    assert queue.visible() == 0
    assert queue.pending() == 15


def test_memory_change_visibility() -> None:
    clock = ManualClock(0)
    queue = MemoryWorkQueue(clock, visibility_timeout_seconds=30)
    queue.send([message(1)])
    ((receipt, _),) = queue.receive(1)
    assert queue.change_visibility(receipt, 0)
    assert len(queue.receive(1)) == 1
    assert queue.next_visible_at_ms() == 30_000


def test_memory_dead_letters_after_max_receives() -> None:
    clock = ManualClock(0)
    queue = MemoryWorkQueue(clock, visibility_timeout_seconds=1, max_receives=2)
    queue.send([message(1)])
    assert len(queue.receive(1)) == 1
    clock.advance(1000)
    assert len(queue.receive(1)) == 1
    clock.advance(1000)
    assert queue.receive(1) == []
    assert queue.pending() == 0
    assert [m.body["version"] for m in queue.dead_letters] == [1]


def test_memory_bodies_are_copies_through_json() -> None:
    queue = MemoryWorkQueue(ManualClock(0))
    body: dict[str, Any] = {"run_id": "r", "t": (1, 2)}
    queue.send([OutgoingMessage("a", body)])
    body["run_id"] = "changed"
    ((_, got),) = queue.receive(1)
    assert got == {"run_id": "r", "t": [1, 2]}  # as SQS would deliver it


def test_memory_queue_is_deterministic() -> None:
    def run() -> list[Any]:
        clock = ManualClock(5)
        queue = MemoryWorkQueue(clock, visibility_timeout_seconds=3)
        trace: list[Any] = []
        for step in range(20):
            queue.send([message(step * 3 + k, delay=(step * 7 + k) % 5) for k in range(3)])
            clock.advance(1000)
            got = queue.receive(4)
            trace.append(got)
            for receipt, body in got:
                if body["version"] % 3 == 0:
                    queue.delete(receipt)
        trace.append(queue.pending())
        return trace

    assert run() == run()
