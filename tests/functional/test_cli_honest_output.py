"""Issue 28: the CLI's output says what happened, read back from the tables, in the words a
person acts on."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from jobsched_tools.cli.main import main
from jobsched_tools.emulator.provision import Resources, provision
from moto import mock_aws

JOB = {
    "job_id": "nightly-report",
    "schedule": "cron(0 3 * * ? *)",
    "timezone": "Europe/Berlin",
    "target": "log",
    "payload": {"report": "daily"},
    "overlap": "allow",
}


@pytest.fixture
def resources() -> Iterator[Resources]:
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        sqs = boto3.client("sqs", region_name="us-east-1")
        yield provision(dynamodb, sqs, prefix="cli")


def run_cli(capsys: pytest.CaptureFixture[str], resources: Resources, *args: str) -> tuple[int, str, str]:
    target = [
        "--jobs-table",
        resources.jobs_table,
        "--state-table",
        resources.state_table,
        "--runs-table",
        resources.runs_table,
        "--queue-url",
        resources.work_queue_url,
        "--shard-count",
        "4",
    ]
    with pytest.raises(SystemExit) as exited:
        main([*args, *target])
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


def register(
    capsys: pytest.CaptureFixture[str], resources: Resources, tmp_path: Path, job: dict[str, Any]
) -> tuple[int, str, str]:
    spec = tmp_path / f"{job['job_id']}.json"
    spec.write_text(json.dumps(job))
    return run_cli(capsys, resources, "register", str(spec))


def test_register_says_invalid_for_a_target_no_handler_has(
    capsys: pytest.CaptureFixture[str], resources: Resources, tmp_path: Path
) -> None:
    code, out, _ = register(capsys, resources, tmp_path, {**JOB, "job_id": "bad-target", "target": "lgo"})
    lines = out.splitlines()
    assert code == 2
    assert lines[0] == "bad-target: invalid"
    assert lines[1].startswith("  - target: no handler named 'lgo' in this deployment (it has: ")
    assert "log" in lines[1] and "example.sleep" in lines[1]
    # What the registrar reports on the job item, word for word.
    code, out, _ = run_cli(capsys, resources, "show", "bad-target", "--json")
    shown = json.loads(out)
    assert shown["status"] == "invalid" and shown["invalid_reasons"] == [lines[1][4:]]

    code, out, _ = register(capsys, resources, tmp_path, JOB)
    assert (code, out) == (0, "nightly-report: scheduled\n")
