"""Issue 28: the CLI's output says what happened, read back from the tables, in the words a
person acts on."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from jobsched.adapters.dynamodb_store import DynamoStore
from jobsched.core.config import SchedulerConfig
from jobsched.core.run import RunKind, RunStatus
from jobsched.core.transitions import new_run_item
from jobsched.core.writes import RUNS, Put
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
CFG = SchedulerConfig(shard_count=4)


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


def test_trigger_again_with_one_request_id_says_it_was_already_requested(
    capsys: pytest.CaptureFixture[str], resources: Resources, tmp_path: Path
) -> None:
    register(capsys, resources, tmp_path, JOB)
    code, out, _ = run_cli(capsys, resources, "trigger", "nightly-report", "--request-id", "abc")
    assert (code, out) == (0, "dispatched nightly-report@manual:abc\n")
    code, out, _ = run_cli(capsys, resources, "trigger", "nightly-report", "--request-id", "abc")
    assert (code, out) == (
        0,
        "already requested: nightly-report@manual:abc (its status: pending); nothing new dispatched\n",
    )
    code, out, _ = run_cli(capsys, resources, "trigger", "nightly-report", "--request-id", "abc", "--json")
    assert json.loads(out) == {
        "run_id": "nightly-report@manual:abc",
        "already_requested": True,
        "status": "pending",
    }


def record(resources: Resources, run_id: str, at: str, status: RunStatus, reason: str) -> None:
    """A run record as the trigger or the detector writes one for an occurrence that did not run."""
    store = DynamoStore(
        boto3.client("dynamodb", region_name="us-east-1"),
        resources.jobs_table,
        resources.state_table,
        resources.runs_table,
    )
    scheduled = int(datetime.fromisoformat(at).timestamp() * 1000)
    item = new_run_item(
        "nightly-report", run_id, scheduled, None, "digest", RunKind.SCHEDULED, scheduled, CFG, status, reason
    )
    store.write([Put(RUNS, item, (), "test record")])


def test_backfill_lists_each_occurrence_and_what_happened_to_it(
    capsys: pytest.CaptureFixture[str], resources: Resources, tmp_path: Path
) -> None:
    register(capsys, resources, tmp_path, JOB)
    missed = "nightly-report@2026-11-01T02:00:00Z"
    skipped = "nightly-report@2026-11-02T02:00:00Z"
    record(resources, missed, "2026-11-01T02:00:00+00:00", RunStatus.MISSED, "trigger down past the grace")
    record(resources, skipped, "2026-11-02T02:00:00+00:00", RunStatus.SKIPPED, "overlap skip: the run before ran")
    window = ("--from", "2026-11-01T00:00:00Z", "--to", "2026-11-04T00:00:00Z")
    code, out, _ = run_cli(capsys, resources, "backfill", "nightly-report", *window)
    assert code == 0
    assert out.splitlines() == [
        "nightly-report@2026-11-01T02:00:00Z  dispatched: re-run of a missed occurrence "
        "(it was missed: trigger down past the grace)",
        "nightly-report@2026-11-02T02:00:00Z  already recorded: skipped (overlap skip: the run before ran); "
        "left alone",
        "nightly-report@2026-11-03T02:00:00Z  dispatched: new run",
        "3 occurrences: 1 new run, 1 re-run of a missed one, 1 already recorded",
    ]
    code, out, _ = run_cli(capsys, resources, "backfill", "nightly-report", *window, "--json")
    again = json.loads(out)
    assert [(o["run_id"], o["action"], o["status"]) for o in again["occurrences"]] == [
        (missed, "already recorded", "pending"),
        (skipped, "already recorded", "skipped"),
        ("nightly-report@2026-11-03T02:00:00Z", "already recorded", "pending"),
    ]
