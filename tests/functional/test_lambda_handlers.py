"""The Lambda entry points (functions/*/app.py) on moto, with the events AWS delivers: a person's
job item goes through registrar -> trigger -> SQS -> worker to a succeeded run; the sample worker
batch reports only its malformed record as a batch item failure."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from jobsched.core.clock import ManualClock, dt_to_ms, ms_to_dt
from jobsched.core.job import JobDefinition
from jobsched.core.run import run_id_for, run_key
from jobsched_tools.emulator.provision import Resources
from lambda_apps import NOW, FakeContext, event, load_app


def test_full_cycle_from_a_raw_job_item_to_a_succeeded_run(
    aws: tuple[Resources, Any, Any, ManualClock],
) -> None:
    resources, dynamodb, sqs, clock = aws
    # A person puts a job item (README / docs/data-model.md item format).
    item = {
        "job_id": {"S": "hello"},
        "schedule": {"S": "rate(1 minute)"},
        "target": {"S": "log"},
        "payload": {"S": '{"greeting": "hi"}'},
        "retry": {"M": {"max_attempts": {"N": "2"}}},
    }
    dynamodb.put_item(TableName=resources.jobs_table, Item=item)
    # 0.4 s before the job's first occurrence: the registrar claims it and the next one (both
    # inside the lookahead) and sends them, the first with no SQS delay (issue 16: delays are
    # rounded to the nearest second, and moto holds a delayed message in real time).
    schedule = JobDefinition(job_id="hello", schedule="rate(1 minute)", target="log").compiled_schedule()
    following = schedule.next_after(ms_to_dt(NOW))
    assert following is not None
    first = dt_to_ms(following)
    clock.set(first - 400)

    # The stream delivers the INSERT to the registrar.
    stream = event("registrar_stream.json")
    record = copy.deepcopy(stream["Records"][0])
    record["eventName"] = "INSERT"
    record["dynamodb"]["Keys"] = {"job_id": {"S": "hello"}}
    record["dynamodb"]["NewImage"] = item
    record["dynamodb"].pop("OldImage", None)
    record["dynamodb"]["ApproximateCreationDateTime"] = clock.now_ms() // 1000  # put just now
    registered = load_app("registrar").lambda_handler({"Records": [record]}, FakeContext("reg-1"))
    assert registered == {"batchItemFailures": []}
    job = dynamodb.get_item(TableName=resources.jobs_table, Key={"job_id": {"S": "hello"}})["Item"]
    assert job["status"]["S"] == "active"  # the report a person reads on the job item
    state = dynamodb.get_item(TableName=resources.state_table, Key={"job_id": {"S": "hello"}})["Item"]
    due = first
    assert int(state["last_scheduled_at"]["N"]) == due + 60_000  # claimed at registration

    # The trigger's tick at the due time finds them claimed: nothing is claimed twice.
    clock.set(due)
    summary = load_app("trigger").lambda_handler(event("trigger_scheduled.json"), FakeContext("tick-1"))
    assert summary["dispatch_failed"] == 0 and summary["duplicates"] == 0

    received = sqs.receive_message(QueueUrl=resources.work_queue_url, MaxNumberOfMessages=10)["Messages"]
    bodies = [json.loads(m["Body"]) for m in received]
    run_id = run_id_for("hello", due)
    assert [b["run_id"] for b in bodies] == [run_id]  # the next minute's is still delayed

    # SQS hands the message to the worker.
    sqs_record = copy.deepcopy(event("worker_sqs_batch.json")["Records"][0])
    sqs_record.update(
        messageId=received[0]["MessageId"],
        receiptHandle=received[0]["ReceiptHandle"],
        body=received[0]["Body"],
    )
    worked = load_app("worker").lambda_handler({"Records": [sqs_record]}, FakeContext("work-1"))
    assert worked == {"batchItemFailures": []}
    run = dynamodb.get_item(
        TableName=resources.runs_table, Key={k: {"S": v} for k, v in run_key(run_id).items()}
    )["Item"]
    assert run["status"]["S"] == "succeeded" and run["attempt"]["N"] == "1"

    # The same message delivered again is acknowledged and changes nothing.
    again = load_app("worker").lambda_handler({"Records": [sqs_record]}, FakeContext("work-2"))
    assert again == {"batchItemFailures": []}
    after = dynamodb.get_item(
        TableName=resources.runs_table, Key={k: {"S": v} for k, v in run_key(run_id).items()}
    )["Item"]
    assert after == run

    # The miss detector finds nothing to do.
    detected = load_app("miss_detector").lambda_handler(
        event("miss_detector_scheduled.json"), FakeContext("d-1")
    )
    assert detected["leases_recovered"] == 0 and detected["missed_recorded"] == 0


@pytest.mark.usefixtures("aws")
def test_sample_worker_batch_fails_only_the_malformed_record() -> None:
    batch = event("worker_sqs_batch.json")
    result = load_app("worker").lambda_handler(batch, FakeContext("work-sample"))
    malformed = [r["messageId"] for r in batch["Records"] if r["body"] == "not json"]
    assert result == {"batchItemFailures": [{"itemIdentifier": malformed[0]}]}


def test_sample_registrar_stream_registers_the_job(aws: tuple[Resources, Any, Any, ManualClock]) -> None:
    resources, dynamodb, _, _ = aws
    stream = event("registrar_stream.json")
    for record in stream["Records"]:
        image = record["dynamodb"].get("NewImage")
        if image:
            dynamodb.put_item(TableName=resources.jobs_table, Item=image)
    result = load_app("registrar").lambda_handler(stream, FakeContext("reg-sample"))
    assert result == {"batchItemFailures": []}
    for record in stream["Records"]:
        job_id = record["dynamodb"]["Keys"]["job_id"]["S"]
        item = dynamodb.get_item(TableName=resources.jobs_table, Key={"job_id": {"S": job_id}}).get("Item")
        if record["dynamodb"].get("NewImage"):
            assert item is not None and item["status"]["S"] in {"active", "paused", "invalid", "finished"}
