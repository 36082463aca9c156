"""``jobsched migrate successor-claim [--check]`` end to end on moto (issue 37, build plan §5): the
switch is refused without the runs table's ``due`` index; ``--check`` reports §5's conditions and
exits non-zero until the switch is on and the reconcile pass has converted every legacy state."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from jobsched.adapters.dynamodb_store import DynamoStore
from jobsched.core.claim_shape import ClaimShape, stack_shape
from jobsched.core.clock import ManualClock
from jobsched.core.config import SchedulerConfig
from jobsched.core.transitions.bookkeeping import BOOKKEEPING_KEY
from jobsched.core.writes import STATE
from jobsched.services.reconciler import Reconciler
from jobsched.services.registrar import Registrar
from jobsched_tools.cli.main import main
from jobsched_tools.emulator.provision import Resources, provision
from jobsched_tools.fakes.memory_telemetry import MemoryTelemetry
from moto import mock_aws

SHARDS = 4


@pytest.fixture
def due_resources() -> Iterator[Resources]:
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        sqs = boto3.client("sqs", region_name="us-east-1")
        yield provision(
            dynamodb, sqs, prefix="cli", parameters={"ClaimShape": "legacy"}, extra_indexes=("due",)
        )


def stack_args(resources: Resources) -> list[str]:
    return [
        "--jobs-table",
        resources.jobs_table,
        "--state-table",
        resources.state_table,
        "--runs-table",
        resources.runs_table,
        "--queue-url",
        resources.work_queue_url,
        "--shard-count",
        str(SHARDS),
    ]


def run_cli(capsys: pytest.CaptureFixture[str], resources: Resources, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main([*args, *stack_args(resources)])
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


def store(resources: Resources) -> DynamoStore:
    client = boto3.client("dynamodb", region_name="us-east-1")
    return DynamoStore(client, resources.jobs_table, resources.state_table, resources.runs_table)


def switch(resources: Resources) -> ClaimShape:
    return stack_shape(store(resources).get(STATE, dict(BOOKKEEPING_KEY)))


def conditions(out: str) -> dict[str, Any]:
    data = json.loads(out.strip().splitlines()[-1])
    return {c["name"]: c["holds"] for c in data["conditions"]} | {"ready": data["ready"]}


def test_the_switch_is_refused_without_the_due_index(
    capsys: pytest.CaptureFixture[str], resources: Resources
) -> None:
    code, _, err = run_cli(capsys, resources, "migrate", "successor-claim")
    assert code == 2
    assert err.startswith("error: ") and "no 'due' index" in err
    assert switch(resources) is ClaimShape.LEGACY  # nothing written
    code, out, _ = run_cli(capsys, resources, "migrate", "successor-claim", "--check", "--json")
    assert code == 1 and conditions(out)["due index"] is False


def test_check_before_and_after_the_switch_and_the_reconcile_pass(
    capsys: pytest.CaptureFixture[str], due_resources: Resources, tmp_path: Path
) -> None:
    spec = tmp_path / "job.json"
    spec.write_text(json.dumps({"job_id": "nightly", "schedule": "cron(0 3 * * ? *)", "target": "log"}))
    code, _, _ = run_cli(capsys, due_resources, "register", str(spec))
    assert code == 0
    # Before: the switch is off, and the job's state is in next-run.
    code, out, _ = run_cli(capsys, due_resources, "migrate", "successor-claim", "--check", "--json")
    found = conditions(out)
    assert code == 1 and found["due index"] is True and found["new code"] is None
    assert found["switch"] is False and found["legacy states"] is False and found["next-run empty"] is False
    # The switch.
    code, out, _ = run_cli(capsys, due_resources, "migrate", "successor-claim")
    assert code == 0 and "switch set" in out and switch(due_resources) is ClaimShape.SUCCESSOR
    code, out, _ = run_cli(capsys, due_resources, "migrate", "successor-claim")
    assert code == 0 and "on already" in out
    code, out, _ = run_cli(capsys, due_resources, "migrate", "successor-claim", "--check", "--json")
    found = conditions(out)
    assert code == 1 and found["switch"] is True and found["legacy states"] is False
    # A reconcile pass converts the legacy state (on moto's tables): every condition holds.
    tables = store(due_resources)
    clock = ManualClock(int(time.time() * 1000))
    cfg = SchedulerConfig(shard_count=SHARDS)
    registrar = Registrar(tables, MemoryTelemetry(), clock, cfg)
    done = Reconciler(tables, MemoryTelemetry(), clock, cfg, registrar).run(lambda: True)
    assert done.legacy_states == 1 and done.converted == 1
    code, out, _ = run_cli(capsys, due_resources, "migrate", "successor-claim", "--check")
    assert code == 0, out
    assert "ready for deploy 2" in out and "the last whole reconcile pass counted 1" in out
    assert "part of an unfinished migration" in _help(capsys).lower()


def _help(capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit):
        main(["migrate", "successor-claim", "--help"])
    return " ".join(capsys.readouterr().out.split())
