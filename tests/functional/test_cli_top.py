"""``jobsched top`` (issue 28 item 15): one refresh reads a bounded number of items and shows what
is due, what holds a lease, and each job's health with its recent runs and their reasons."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest
from jobsched.adapters.dynamodb_store import DynamoStore
from jobsched.core.config import SchedulerConfig
from jobsched.core.writes import JOBS, Put
from jobsched.runtime.clock import SystemClock
from jobsched.services.registrar import Registrar
from jobsched_tools.emulator.provision import Resources
from jobsched_tools.fakes.memory_telemetry import MemoryTelemetry
from jobsched_tools.ops.top import CHAIN_STEPS, JOBS_SHOWN, RUNS_SHOWN
from test_cli_honest_output import JOB, register, run_cli


def test_top_shows_due_runs_lapsed_leases_and_job_health(
    capsys: pytest.CaptureFixture[str], resources: Resources, tmp_path: Path
) -> None:
    register(capsys, resources, tmp_path, {**JOB, "job_id": "hourly", "schedule": "rate(1 minute)"})
    # A typo written with put-item (the CLI refuses it), then applied by the registrar.
    store = DynamoStore(
        boto3.client("dynamodb", region_name="us-east-1"),
        resources.jobs_table,
        resources.state_table,
        resources.runs_table,
    )
    store.write([Put(JOBS, {**JOB, "job_id": "typo", "timezone": "Europe/Berln"}, (), "person puts job")])
    Registrar(store, MemoryTelemetry(), SystemClock(), SchedulerConfig(shard_count=4)).apply("typo")
    code, out, _ = run_cli(capsys, resources, "trigger", "hourly", "--request-id", "now")
    assert code == 0
    code, out, _ = run_cli(capsys, resources, "top", "--once")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("jobsched top ") and "reads this refresh" in lines[0]
    # Its next occurrence: due soon, or just past when a minute turned since it was registered.
    heading = next(
        i for i, line in enumerate(lines) if line.startswith(("DUE SOON (1)", "BEHIND")) and "(1)" in line
    )
    assert lines[heading + 1].split()[0] == "hourly"
    assert any("hourly@manual:now" in line and "pending" in line for line in lines)
    assert any(line.split()[:1] == ["typo"] and "invalid: timezone" in line for line in lines)
    assert any("hourly@manual:now" in line and line.startswith("      ") for line in lines)  # its chain


def test_top_reads_are_bounded_and_reported(
    capsys: pytest.CaptureFixture[str], resources: Resources, tmp_path: Path
) -> None:
    for n in range(3):
        register(capsys, resources, tmp_path, {**JOB, "job_id": f"j{n}", "schedule": "rate(1 minute)"})
    code, out, _ = run_cli(capsys, resources, "top", "--once", "--json")
    status = json.loads(out)
    assert code == 0
    shards = 4
    assert status["requests"] <= 2 * shards + RUNS_SHOWN + 1 + JOBS_SHOWN * (1 + CHAIN_STEPS)
    assert status["requests"] == 2 * shards + 1 + 3  # two index queries a shard, a jobs page, 3 states
    # Due within the horizon, or just past it when a minute turned between registering and reading.
    assert len(status["due_soon"]) + len(status["behind"]) == 3
