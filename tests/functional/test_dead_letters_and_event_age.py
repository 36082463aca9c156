"""Issue 38, items 2 and 3, on the in-memory store and on DynamoDB and SQS on moto:

- a job's own dead-letter queue (``dead_letter_queue_arn``, EventBridge's ``DeadLetterConfig``):
  a run that fails for good sends its outcome there at least once, from the worker or, when the
  worker's send is lost or it died, from the miss detector's lease sweep; the run stays ``failed``;
- a maximum event age (``max_event_age_seconds``, ``RetryPolicy.MaximumEventAgeInSeconds``): no
  retry starts once the run is older than the limit, and the run fails with that reason.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from harness import KINDS, MINUTE, T0, Env, build, job, register_raw
from jobsched.adapters.dead_letter_queue import SqsDeadLetterSender
from jobsched.core.dead_letter import RETRY_MS
from jobsched.core.job import RetryPolicy
from jobsched.ports import DeadLetterRefused
from jobsched.services.dead_letters import REFUSED_FOR_GOOD_AFTER_MS
from jobsched.services.detector import MissDetector
from jobsched.services.messages import parse_run_message
from jobsched.services.worker import Outcome, Started, Worker
from jobsched_tools.fakes.memory_dead_letters import MemoryDeadLetters

DEADLINE = 900_000
DLQ = "arn:aws:sqs:us-east-1:123456789012:job-failures"
NOT_LISTED = "arn:aws:sqs:us-east-1:123456789012:somewhere-else"


def _fail(_ctx: Any) -> None:
    raise RuntimeError("boom")


class FlakySender:
    """Wraps a sender; the next ``failures_left`` sends raise, as a lost or refused send."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.failures_left = 0

    def send(self, queue_arn: str, body: str, deduplication_id: str) -> None:
        if self.failures_left > 0:
            self.failures_left -= 1
            raise ConnectionError("no answer")
        self.inner.send(queue_arn, body, deduplication_id)


@pytest.fixture(params=KINDS)
def env(request: pytest.FixtureRequest) -> Iterator[Env]:
    with build(request.param) as built:
        built.registry.add("t", _fail)
        yield built


def _dead_letters(env: Env) -> tuple[FlakySender, Callable[[], list[dict[str, Any]]]]:
    """A sender for the environment's kind and a way to read what reached the queue."""
    if env.kind == "memory":
        memory = MemoryDeadLetters()

        def taken() -> list[dict[str, Any]]:  # as a receive from SQS: each message once
            bodies = [body for _, body, _ in memory.sent]
            memory.sent.clear()
            return bodies

        return FlakySender(memory), taken
    url = env.sqs.create_queue(QueueName=DLQ.rsplit(":", 1)[1])["QueueUrl"]

    def received() -> list[dict[str, Any]]:
        messages = env.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        return [json.loads(m["Body"]) for m in messages]

    return FlakySender(SqsDeadLetterSender(env.sqs)), received


def _worker(env: Env, sender: Any, allowed: list[str] | None = None) -> Worker:
    return env.worker(dead_letter_sender=sender, dead_letter_queues=allowed)


def _detector(env: Env, sender: Any, allowed: list[str] | None = None) -> MissDetector:
    return env.detector(dead_letter_sender=sender, dead_letter_queues=allowed or [DLQ])


def _register(env: Env, **fields: Any) -> None:
    env.clock.set(T0)
    register_raw(env, job("j", "rate(1 minute)", **fields).to_item())


def _first_message(env: Env) -> Any:
    env.clock.set(T0 + 50_000)
    env.trigger().tick("tick")
    body = env.queue.sent[0].body
    env.clock.set(int(body["scheduled_at"]))
    return parse_run_message(body)


# --- the dead-letter queue -------------------------------------------------------------------


def test_a_final_failure_sends_its_outcome_to_the_job_s_queue(env: Env) -> None:
    sender, received = _dead_letters(env)
    _register(env, dead_letter_queue_arn=DLQ, retry=RetryPolicy(max_attempts=1))
    message = _first_message(env)
    assert _worker(env, sender, [DLQ]).process(message, env.clock.now_ms() + DEADLINE) is Outcome.FAILED
    (letter,) = received()
    assert letter["run_id"] == message.run_id and letter["job_id"] == "j"
    assert letter["attempts"] == 1 and letter["error"].startswith("RuntimeError: boom")
    assert letter["scheduled_at"] == message.scheduled_at
    run = env.run(message.run_id)
    assert run["status"] == "failed"  # stays failed in the history
    assert run["dead_letter"] == "sent" and "check_at" not in run and "lease_shard" not in run


def test_a_success_or_a_failure_with_attempts_left_sends_nothing(env: Env) -> None:
    sender, received = _dead_letters(env)
    _register(env, dead_letter_queue_arn=DLQ, retry=RetryPolicy(max_attempts=2))
    message = _first_message(env)
    worker = _worker(env, sender, [DLQ])
    assert worker.process(message, env.clock.now_ms() + DEADLINE) is Outcome.RETRY_SCHEDULED
    assert received() == []
    assert "dead_letter" not in env.run(message.run_id)


def test_a_lost_send_is_sent_by_the_detector_s_sweep(env: Env) -> None:
    sender, received = _dead_letters(env)
    _register(env, dead_letter_queue_arn=DLQ, retry=RetryPolicy(max_attempts=1))
    message = _first_message(env)
    sender.failures_left = 1  # the worker's send is lost
    assert _worker(env, sender, [DLQ]).process(message, env.clock.now_ms() + DEADLINE) is Outcome.FAILED
    assert received() == []
    run = env.run(message.run_id)
    assert run["dead_letter"] == "pending" and "ConnectionError" in run["dead_letter_error"]
    assert run["status"] == "failed"
    # The detector looks at it when its check_at comes (a retry delay later), not before.
    _detector(env, sender).run("early")
    assert received() == []
    env.clock.set(env.clock.now_ms() + RETRY_MS + env.cfg.clock_skew_allowance_ms + 1)
    _detector(env, sender).run("sweep")
    (letter,) = received()
    assert letter["run_id"] == message.run_id
    run = env.run(message.run_id)
    assert run["dead_letter"] == "sent" and "check_at" not in run
    _detector(env, sender).run("again")  # settled: not sent twice
    assert received() == []


def test_a_worker_that_dies_after_its_failure_commit_leaves_the_send_to_the_detector(env: Env) -> None:
    sender, received = _dead_letters(env)
    _register(env, dead_letter_queue_arn=DLQ, retry=RetryPolicy(max_attempts=1))
    message = _first_message(env)
    # A worker without a sender stands for one that died between its commit and its send.
    assert _worker(env, None).process(message, env.clock.now_ms() + DEADLINE) is Outcome.FAILED
    assert env.run(message.run_id)["dead_letter"] == "pending"
    env.clock.set(
        env.clock.now_ms() + env.cfg.dispatch_lease_seconds * 1000 + env.cfg.clock_skew_allowance_ms + 1
    )
    _detector(env, sender).run("sweep")
    assert [letter["run_id"] for letter in received()] == [message.run_id]


def test_a_run_the_detector_fails_for_good_is_dead_lettered(env: Env) -> None:
    sender, received = _dead_letters(env)
    _register(env, dead_letter_queue_arn=DLQ, retry=RetryPolicy(max_attempts=1))
    message = _first_message(env)
    started = _worker(env, sender, [DLQ]).begin(message, env.clock.now_ms() + MINUTE)  # then it dies
    assert isinstance(started, Started)
    env.clock.set(env.clock.now_ms() + 5 * MINUTE)
    _detector(env, sender).run("sweep")
    run = env.run(message.run_id)
    assert run["status"] == "failed" and run["dead_letter"] == "sent"
    (letter,) = received()
    assert letter["run_id"] == message.run_id and "lease expired" in letter["error"]


def test_a_queue_not_on_the_allow_list_is_refused_and_logged(env: Env) -> None:
    sender, received = _dead_letters(env)
    _register(env, dead_letter_queue_arn=NOT_LISTED, retry=RetryPolicy(max_attempts=1))
    message = _first_message(env)
    assert _worker(env, sender, [DLQ]).process(message, env.clock.now_ms() + DEADLINE) is Outcome.FAILED
    assert received() == []
    run = env.run(message.run_id)
    assert run["dead_letter"] == "refused" and "AllowedDeadLetterQueueArns" in run["dead_letter_error"]
    assert "check_at" not in run  # settled: the detector does not try it again and again
    (event,) = env.telemetry.named("run.dead_letter_refused")
    assert event.correlation_id == message.run_id


MISSING = "arn:aws:sqs:us-east-1:123456789012:deleted-queue"


class MissingQueueSender:
    """The in-memory stand-in for SQS's answer to a send to a queue that does not exist (on moto
    the real sender meets the real answer), counting the attempts."""

    def __init__(self) -> None:
        self.attempts = 0

    def send(self, queue_arn: str, body: str, deduplication_id: str) -> None:  # noqa: ARG002
        self.attempts += 1
        raise DeadLetterRefused(f"QueueDoesNotExist: The specified queue does not exist.; {queue_arn}")


class CountingSender:
    def __init__(self, inner: Any) -> None:
        self.inner, self.attempts = inner, 0

    def send(self, queue_arn: str, body: str, deduplication_id: str) -> None:
        self.attempts += 1
        self.inner.send(queue_arn, body, deduplication_id)


def test_a_send_sqs_refuses_is_tried_for_an_hour_then_settled_as_refused(env: Env) -> None:
    """The queue is on the stack's list but does not exist (deleted since): SQS refuses every
    send. The debt is tried again a minute apart for an hour after the failure (a grant still
    propagating, a person fixing it), then settled as refused with SQS's reason, not tried again
    every minute for ever."""
    sender = CountingSender(MissingQueueSender() if env.kind == "memory" else SqsDeadLetterSender(env.sqs))
    _register(env, dead_letter_queue_arn=MISSING, retry=RetryPolicy(max_attempts=1))
    message = _first_message(env)
    worker = _worker(env, sender, [MISSING])
    assert worker.process(message, env.clock.now_ms() + DEADLINE) is Outcome.FAILED
    failed_at = env.clock.now_ms()
    run = env.run(message.run_id)
    assert run["dead_letter"] == "pending" and "QueueDoesNotExist" in run["dead_letter_error"]
    assert "tried again for 60 minutes" in run["dead_letter_error"]
    skew = env.cfg.clock_skew_allowance_ms + 1
    env.clock.set(failed_at + RETRY_MS + skew)
    _detector(env, sender, [MISSING]).run("a minute later")
    assert env.run(message.run_id)["dead_letter"] == "pending" and sender.attempts == 2
    env.clock.set(failed_at + REFUSED_FOR_GOOD_AFTER_MS + skew)
    _detector(env, sender, [MISSING]).run("an hour later")
    run = env.run(message.run_id)
    assert run["dead_letter"] == "refused" and "check_at" not in run and run["status"] == "failed"
    assert "QueueDoesNotExist" in run["dead_letter_error"] and "does not exist" in run["dead_letter_error"]
    (event,) = env.telemetry.named("run.dead_letter_refused")
    assert event.correlation_id == message.run_id and event.fields["queue"] == MISSING
    env.clock.set(env.clock.now_ms() + 10 * RETRY_MS)
    _detector(env, sender, [MISSING]).run("later still")
    assert sender.attempts == 3  # settled: never tried again


# --- the maximum event age -------------------------------------------------------------------

RETRY_EVERY_MINUTE = RetryPolicy(max_attempts=5, backoff_seconds=60, max_backoff_seconds=60, jitter=False)


def _retry_of(env: Env, message: Any) -> Any:
    sent = env.queue.sent[-1]
    body = sent.body
    assert body["run_id"] == message.run_id and body["attempt"] == message.attempt + 1
    env.clock.set(env.clock.now_ms() + sent.delay_seconds * 1000)
    return parse_run_message(body)


def test_retries_stop_once_the_run_is_older_than_its_limit(env: Env) -> None:
    _register(env, retry=RETRY_EVERY_MINUTE, max_event_age_seconds=90)
    first = _first_message(env)
    worker = env.worker()
    assert worker.process(first, env.clock.now_ms() + DEADLINE) is Outcome.RETRY_SCHEDULED  # starts at +60 s
    second = _retry_of(env, first)
    # The next retry would start 120 s after the instant, past the 90 s limit: the run fails now.
    assert worker.process(second, env.clock.now_ms() + DEADLINE) is Outcome.FAILED
    run = env.run(first.run_id)
    assert run["status"] == "failed" and run["attempt"] == 2
    assert run["last_error"].startswith("maximum event age reached")
    assert "max_event_age_seconds 90" in run["last_error"] and "RuntimeError: boom" in run["last_error"]


def test_without_a_limit_the_same_run_retries(env: Env) -> None:
    _register(env, retry=RETRY_EVERY_MINUTE)
    first = _first_message(env)
    worker = env.worker()
    assert worker.process(first, env.clock.now_ms() + DEADLINE) is Outcome.RETRY_SCHEDULED
    second = _retry_of(env, first)
    assert worker.process(second, env.clock.now_ms() + DEADLINE) is Outcome.RETRY_SCHEDULED


def test_an_event_age_limit_and_a_dead_letter_queue_together(env: Env) -> None:
    sender, received = _dead_letters(env)
    _register(env, retry=RETRY_EVERY_MINUTE, max_event_age_seconds=60, dead_letter_queue_arn=DLQ)
    first = _first_message(env)
    # The first retry would start at +60 s: within the limit (not past it).
    assert (
        _worker(env, sender, [DLQ]).process(first, env.clock.now_ms() + DEADLINE) is Outcome.RETRY_SCHEDULED
    )
    second = _retry_of(env, first)
    assert _worker(env, sender, [DLQ]).process(second, env.clock.now_ms() + DEADLINE) is Outcome.FAILED
    (letter,) = received()
    assert letter["attempts"] == 2 and letter["error"].startswith("maximum event age reached")
