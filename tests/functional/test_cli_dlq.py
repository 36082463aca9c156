"""``jobsched dlq list`` and ``jobsched dlq redrive`` (issue 36 item 12, issue 34 item 11): look at
the dead-letter queue without moving anything, move each message the DLQ held at the start at
most once (a poison message that bounces back is not moved again and again), and answer at once
when the DLQ is empty (no long poll)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from jobsched.core.run import RunMessage, RunStatus, encode_body
from jobsched_tools.cli.main import main
from jobsched_tools.emulator.provision import Resources
from test_cli_honest_output import JOB, record, register
from test_cli_ops import stack_args

FAILED_RUN = "nightly-report@2026-11-02T02:00:00Z"


def target(resources: Resources) -> list[str]:
    return [*stack_args(resources), "--dlq-url", resources.dead_letter_queue_url]


def dlq(capsys: pytest.CaptureFixture[str], resources: Resources, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main(["dlq", *args, *target(resources)])
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


def run_body(run_id: str) -> str:
    job_id = run_id.split("@", 1)[0]
    return encode_body(
        RunMessage(
            run_id=run_id, job_id=job_id, version=1, attempt=1, scheduled_at=0, definition={}
        ).to_body()
    )


def depth(sqs: Any, url: str) -> int:
    attributes = sqs.get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(
        attributes["ApproximateNumberOfMessagesNotVisible"]
    )


class CountingSqs:
    """The real (moto) SQS client, counting the receives the CLI makes; with ``bounce``, a worker
    that fails every message sent to the work queue at once, until SQS moves it to the DLQ (its
    ``maxReceiveCount``), at most ``bounces`` times in all (so that an unbounded redrive ends)."""

    def __init__(self, client: Any, work_queue_url: str, bounces: int = 0) -> None:
        self.client = client
        self.work_queue_url = work_queue_url
        self.bounces = bounces
        self.receives: list[dict[str, Any]] = []
        self.sent_to_work_queue = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def receive_message(self, **kwargs: Any) -> Any:
        self.receives.append(kwargs)
        return self.client.receive_message(**kwargs)

    def send_message_batch(self, **kwargs: Any) -> Any:
        sent = self.client.send_message_batch(**kwargs)
        if kwargs["QueueUrl"] != self.work_queue_url:
            return sent
        self.sent_to_work_queue += len(sent.get("Successful", []))
        if self.bounces > 0:
            self.bounces -= 1
            for _ in range(100):  # received and never deleted: SQS dead-letters it
                if not self.client.receive_message(
                    QueueUrl=self.work_queue_url, MaxNumberOfMessages=10, VisibilityTimeout=0
                ).get("Messages"):
                    break
        return sent


@pytest.fixture
def sqs(resources: Resources, monkeypatch: pytest.MonkeyPatch) -> CountingSqs:
    import jobsched_tools.api

    counting = CountingSqs(boto3.client("sqs", region_name="us-east-1"), resources.work_queue_url)
    real_client = jobsched_tools.api.client_for
    monkeypatch.setattr(
        jobsched_tools.api,
        "client_for",
        lambda service, where: counting if service == "sqs" else real_client(service, where),
    )
    return counting


def test_list_names_each_messages_job_run_receives_and_reason_and_moves_nothing(
    capsys: pytest.CaptureFixture[str], resources: Resources, tmp_path: Path, sqs: CountingSqs
) -> None:
    register(capsys, resources, tmp_path, JOB)
    record(resources, FAILED_RUN, "2026-11-02T02:00:00+00:00", RunStatus.FAILED, "RuntimeError: boom")
    sqs.client.send_message(QueueUrl=resources.dead_letter_queue_url, MessageBody=run_body(FAILED_RUN))
    sqs.client.send_message(QueueUrl=resources.dead_letter_queue_url, MessageBody="not json")

    code, out, err = dlq(capsys, resources, "list")
    lines = out.splitlines()
    assert (code, err) == (0, "")
    assert lines[0] == "2 messages on the dead-letter queue"
    assert lines[1].split() == ["JOB", "RUN", "RECEIVES", "FIRST", "SENT", "WHY", "IT", "IS", "HERE"]
    (run_row,) = (line for line in lines if FAILED_RUN in line)
    assert run_row.startswith("nightly-report  " + FAILED_RUN)
    assert run_row.endswith("its run: failed, attempt 1: RuntimeError: boom")
    (poison_row,) = (line for line in lines if line.startswith("?"))
    assert "not a run message the worker accepts" in poison_row
    assert lines[-1] == "move them back with `jobsched dlq redrive`"
    # Nothing moved: both are on the DLQ, visible again at once; the work queue is empty.
    assert depth(sqs.client, resources.dead_letter_queue_url) == 2
    attributes = sqs.client.get_queue_attributes(
        QueueUrl=resources.dead_letter_queue_url, AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]
    assert attributes["ApproximateNumberOfMessages"] == "2"
    assert depth(sqs.client, resources.work_queue_url) == 0

    code, out, _ = dlq(capsys, resources, "list", "--json")
    listed = json.loads(out)
    assert listed["at_start"] == 2
    (failed,) = (m for m in listed["messages"] if m["run_id"] == FAILED_RUN)
    assert failed["job_id"] == "nightly-report"
    assert failed["receive_count"] == 1  # the first listing's receive, not this one's


def test_redrive_moves_a_message_that_bounces_back_once(
    capsys: pytest.CaptureFixture[str], resources: Resources, sqs: CountingSqs
) -> None:
    """Issue 34 item 11: one poison message, failed again as soon as it is moved, was moved 35
    times by one redrive."""
    sqs.client.send_message(QueueUrl=resources.dead_letter_queue_url, MessageBody=run_body(FAILED_RUN))
    sqs.bounces = 20
    code, out, err = dlq(capsys, resources, "redrive")
    lines = out.splitlines()
    assert (code, err) == (0, "")
    assert lines[:2] == [
        "moved 1 message from the dead-letter queue to the work queue",
        f"  {FAILED_RUN}",
    ]
    assert sqs.sent_to_work_queue == 1 and sqs.bounces == 19
    assert lines[2:] == [
        "1 message on the DLQ now (it failed again, or came since): `jobsched dlq list` says why"
    ]
    assert depth(sqs.client, resources.dead_letter_queue_url) == 1


def test_redrive_moves_only_what_the_dlq_held_at_the_start(
    capsys: pytest.CaptureFixture[str], resources: Resources, sqs: CountingSqs
) -> None:
    for n in range(12):
        sqs.client.send_message(
            QueueUrl=resources.dead_letter_queue_url,
            MessageBody=run_body(f"j{n}@manual:x"),
            MessageAttributes={"kind": {"DataType": "String", "StringValue": "run"}},
        )
    sqs.bounces = 100  # every message moved fails again at once
    code, out, _ = dlq(capsys, resources, "redrive", "--json")
    done = json.loads(out)
    assert code == 0
    assert done["at_start"] == 12 and done["moved"] == 12
    assert sorted(done["moved_runs"]) == sorted(f"j{n}@manual:x" for n in range(12))
    assert sqs.sent_to_work_queue == 12
    assert depth(sqs.client, resources.dead_letter_queue_url) == 12  # all back: for a person to look at


def test_an_empty_dlq_is_listed_and_redriven_without_a_receive(
    capsys: pytest.CaptureFixture[str], resources: Resources, sqs: CountingSqs
) -> None:
    """Issue 36 item 12: an empty DLQ's redrive took 9.9 s. Each command now reads the queue's
    count first and makes no receive (so no long poll) when it is 0."""
    assert dlq(capsys, resources, "redrive") == (0, "the dead-letter queue is empty: nothing to move\n", "")
    assert dlq(capsys, resources, "list") == (0, "the dead-letter queue is empty\n", "")
    assert sqs.receives == []
