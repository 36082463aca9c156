"""Records that are not what a function consumes, fed as AWS's own generator makes them
(``sam local generate-event``): each is reported as a batch item failure, logged with its message
id and the reason, and counted; the invocation succeeds and the rest of the batch is processed."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from jobsched.core.clock import ManualClock
from jobsched_tools.emulator.provision import Resources
from lambda_apps import FakeContext, event, load_app

SAM = Path(sys.executable).with_name("sam")


def generate_event(*args: str) -> dict[str, Any]:
    done = subprocess.run(
        [str(SAM), "local", "generate-event", *args],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "SAM_CLI_TELEMETRY": "0"},
        timeout=60,
    )
    loaded: dict[str, Any] = json.loads(done.stdout)
    return loaded


@pytest.fixture(scope="module")
def aws_samples() -> dict[str, dict[str, Any]]:
    return {
        "sqs": generate_event("sqs", "receive-message"),
        "sqs_test": generate_event("sqs", "receive-message", "--body", "Test message."),
        "dynamodb": generate_event("dynamodb", "update"),
    }


def failed_lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    """The ``batch.record_failed`` lines' fields. (Read from the log records: the Powertools
    logger holds the stdout of the moment it was created, which output capture cannot swap.)"""
    return [
        {**vars(record), "level": record.levelname}
        for record in caplog.records
        if record.getMessage() == "batch.record_failed"
    ]


def metric_total(output: str, name: str) -> float:
    total = 0.0
    for line in output.splitlines():
        if line.startswith("{") and '"_aws"' in line:
            value = json.loads(line).get(name)
            if value is not None:
                total += sum(value) if isinstance(value, list) else value
    return total


@pytest.mark.parametrize("sample", ["sqs", "sqs_test"])
@pytest.mark.usefixtures("aws")
def test_a_worker_batch_of_only_foreign_messages_succeeds_with_each_reported(
    aws_samples: dict[str, dict[str, Any]],
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    sample: str,
) -> None:
    batch = aws_samples[sample]
    ids = [r["messageId"] for r in batch["Records"]]

    result = load_app("worker").lambda_handler(batch, FakeContext("work-foreign"))  # does not raise

    assert result == {"batchItemFailures": [{"itemIdentifier": i} for i in ids]}
    out = capfd.readouterr().out
    logged = failed_lines(caplog)
    assert [line["message_id"] for line in logged] == ids
    assert all(line["poison"] is True and "not a run message" in line["reason"] for line in logged)
    assert all(line["level"] == "WARNING" for line in logged)
    assert metric_total(out, "FailedRecords") == len(ids)
    assert metric_total(out, "PoisonRecords") == len(ids)


@pytest.mark.usefixtures("aws")
def test_a_mixed_worker_batch_processes_the_run_messages_and_reports_the_foreign_ones(
    aws_samples: dict[str, dict[str, Any]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    ours = event("worker_sqs_batch.json")["Records"]
    foreign = copy.deepcopy(aws_samples["sqs_test"]["Records"])
    batch = {"Records": [ours[0], *foreign, ours[1], ours[2]]}
    expected = [r["messageId"] for r in batch["Records"] if r["body"] in ("Test message.", "not json")]

    result = load_app("worker").lambda_handler(batch, FakeContext("work-mixed"))

    assert result == {"batchItemFailures": [{"itemIdentifier": i} for i in expected]}
    logged = failed_lines(caplog)
    assert sorted(line["message_id"] for line in logged) == sorted(expected)


@pytest.mark.usefixtures("aws")
def test_a_registrar_batch_of_only_foreign_stream_records_succeeds_with_each_reported(
    aws_samples: dict[str, dict[str, Any]],
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    batch = aws_samples["dynamodb"]  # INSERT, MODIFY and REMOVE of a table keyed by "Id"
    sequence_numbers = [r["dynamodb"]["SequenceNumber"] for r in batch["Records"]]

    result = load_app("registrar").lambda_handler(batch, FakeContext("reg-foreign"))  # does not raise

    assert result == {"batchItemFailures": [{"itemIdentifier": s} for s in sequence_numbers]}
    out = capfd.readouterr().out
    logged = failed_lines(caplog)
    assert [line["message_id"] for line in logged] == sequence_numbers
    assert all(line["poison"] is True and "job_id" in line["reason"] for line in logged)
    assert metric_total(out, "PoisonRecords") == len(sequence_numbers)


def test_a_mixed_registrar_batch_registers_the_job_and_reports_the_foreign_records(
    aws: tuple[Resources, Any, Any, ManualClock],
    aws_samples: dict[str, dict[str, Any]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    resources, dynamodb, _, _ = aws
    ours = copy.deepcopy(event("registrar_stream.json")["Records"][0])
    dynamodb.put_item(TableName=resources.jobs_table, Item=ours["dynamodb"]["NewImage"])
    foreign = aws_samples["dynamodb"]["Records"]
    batch = {"Records": [foreign[0], ours, *foreign[1:]]}

    result = load_app("registrar").lambda_handler(batch, FakeContext("reg-mixed"))

    failed = [r["dynamodb"]["SequenceNumber"] for r in foreign]
    assert result == {"batchItemFailures": [{"itemIdentifier": s} for s in failed]}
    job_id = ours["dynamodb"]["Keys"]["job_id"]["S"]
    item = dynamodb.get_item(TableName=resources.jobs_table, Key={"job_id": {"S": job_id}})["Item"]
    assert item["status"]["S"] == "active"
    assert sorted(line["message_id"] for line in failed_lines(caplog)) == sorted(failed)
