"""The worker Lambda runs the records of one SQS batch concurrently: a long job does not hold up
the other occurrences that arrived in its batch. Against the serialised moto server (in-process
moto is not thread-safe; DynamoDB is)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from jobsched.core.job import JobDefinition
from jobsched.runtime import wiring
from jobsched_tools.emulator.local_moto import start_moto_server
from jobsched_tools.emulator.provision import Resources, provision
from lambda_apps import ROOT, FakeContext, load_app

fast_done = threading.Event()
seen: dict[str, bool] = {}


def slow(_ctx: Any) -> dict[str, Any]:
    # Finishes only once the fast record of the same batch has run: a worker that processed the
    # batch one record after another would time out here and record a failure.
    seen["fast_ran_first"] = fast_done.wait(timeout=20)
    if not seen["fast_ran_first"]:
        raise RuntimeError("the fast record never ran while this one was running")
    return {}


def fast(_ctx: Any) -> dict[str, Any]:
    fast_done.set()
    return {}


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Resources, Any]]:
    with start_moto_server() as moto:
        dynamodb = boto3.client("dynamodb", region_name="us-east-1", endpoint_url=moto.endpoint_url)
        sqs = boto3.client("sqs", region_name="us-east-1", endpoint_url=moto.endpoint_url)
        resources = provision(dynamodb, sqs, prefix="batch", parameters={"ClaimShape": "legacy"})
        for name, value in {
            "AWS_ENDPOINT_URL": moto.endpoint_url,
            "JOBS_TABLE": resources.jobs_table,
            "STATE_TABLE": resources.state_table,
            "RUNS_TABLE": resources.runs_table,
            "WORK_QUEUE_URL": resources.work_queue_url,
            "POWERTOOLS_TRACE_DISABLED": "true",
            "POWERTOOLS_METRICS_NAMESPACE": "Jobsched",
        }.items():
            monkeypatch.setenv(name, value)
        monkeypatch.delenv("WORKER_RECORD_CONCURRENCY", raising=False)
        monkeypatch.syspath_prepend(str(ROOT / "layers" / "handlers"))
        for name, handler in (("test.slow", slow), ("test.fast", fast)):
            if wiring.registry.get(name) is None:
                wiring.registry.add(name, handler)
        wiring.reset_app()
        fast_done.clear()
        seen.clear()
        yield resources, sqs
        wiring.reset_app()


def test_a_slow_record_does_not_hold_up_the_rest_of_its_batch(stack: tuple[Resources, Any]) -> None:
    resources, sqs = stack
    ops = wiring.app().operations()
    for job_id, target in (("slow-job", "test.slow"), ("fast-job", "test.fast")):
        ops.register(JobDefinition(job_id=job_id, schedule="rate(1 hour)", target=target, overlap="allow"))
    slow_run = ops.trigger("slow-job", "r1")
    fast_run = ops.trigger("fast-job", "r1")
    messages: list[dict[str, Any]] = []
    while len(messages) < 2:
        messages += sqs.receive_message(QueueUrl=resources.work_queue_url, MaxNumberOfMessages=10).get(
            "Messages", []
        )
    by_run = {json.loads(m["Body"])["run_id"]: m for m in messages}
    records = [  # the slow one first: processed in order, the fast one would wait behind it
        {
            "messageId": by_run[run_id]["MessageId"],
            "receiptHandle": by_run[run_id]["ReceiptHandle"],
            "body": by_run[run_id]["Body"],
            "attributes": {"ApproximateReceiveCount": "1"},
            "messageAttributes": {},
            "md5OfBody": by_run[run_id]["MD5OfBody"],
            "eventSource": "aws:sqs",
            "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:work",
            "awsRegion": "us-east-1",
        }
        for run_id in (slow_run, fast_run)
    ]
    result = load_app("worker").lambda_handler({"Records": records}, FakeContext("batch-1"))
    assert result == {"batchItemFailures": []}
    assert seen == {"fast_ran_first": True}
    assert ops.get_run(slow_run)["status"] == ops.get_run(fast_run)["status"] == "succeeded"  # type: ignore[index]
