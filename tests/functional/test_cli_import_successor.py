"""``jobsched import`` on a successor stack (issue 37, HC6): the runs table has the ``due`` index
and the migration switch is on, so each imported job is registered through the successor
registrar (``Operations.register``): its state records a change's epoch and it has one head (none
when imported paused); importing again changes nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from jobsched.adapters.dynamodb_store import DynamoStore
from jobsched.core.claim_shape import CLAIM_SHAPE_ATTRIBUTE, ClaimShape
from jobsched.core.head_change import EPOCH
from jobsched.core.occurrences import find_head
from jobsched.core.transitions.bookkeeping import BOOKKEEPING_KEY, bookkeeping_op
from jobsched.core.writes import STATE
from jobsched.services.head_registrar import read_job_items
from jobsched_tools.emulator.provision import Resources, provision
from moto import mock_aws
from test_cli_ops import run_cli

FIXTURES = Path(__file__).parents[1] / "unit" / "eventbridge_schedules"


def switch_on(store: DynamoStore) -> None:
    """The migration switch, written as the detector writes its bookkeeping item (harness.py
    ``switch_to_successor``)."""
    current = store.get(STATE, dict(BOOKKEEPING_KEY))
    store.write([bookkeeping_op(current, {CLAIM_SHAPE_ATTRIBUTE: ClaimShape.SUCCESSOR.value}, (), 0)])


@pytest.fixture
def successor_stack() -> Iterator[tuple[Resources, DynamoStore]]:
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        sqs = boto3.client("sqs", region_name="us-east-1")
        resources = provision(dynamodb, sqs, prefix="cli", extra_indexes=("due",))
        store = DynamoStore(dynamodb, resources.jobs_table, resources.state_table, resources.runs_table)
        yield resources, store


def test_an_import_on_a_successor_stack_registers_each_job_with_one_head(
    capsys: pytest.CaptureFixture[str], successor_stack: tuple[Resources, DynamoStore]
) -> None:
    resources, store = successor_stack
    switch_on(store)
    code, out, _ = run_cli(capsys, resources, "import", str(FIXTURES), "--json")
    assert code == 2  # bad-cron is refused, as on today's stack
    actions = {entry["source"]: entry["action"] for entry in json.loads(out)["schedules"]}
    imported = {
        entry["source"]: entry["job"]["job_id"] for entry in json.loads(out)["schedules"] if entry["job"]
    }
    assert actions["reports/hourly-rollup"] == "paused"
    assert sorted(a for a in actions.values() if a != "not imported") == ["paused"] + ["scheduled"] * 5
    for source, job_id in imported.items():
        if actions[source] == "not imported":
            continue
        state = store.get(STATE, {"job_id": job_id})
        assert state is not None and EPOCH in state, (job_id, state)  # the successor path took it
        reading = find_head(read_job_items(store, job_id))
        if actions[source] == "paused":
            assert reading.verdict == "none", reading.describe()
        else:
            assert reading.verdict == "one", (job_id, reading.describe())
    code, out, _ = run_cli(capsys, resources, "import", str(FIXTURES / "nightly-sqs.json"))
    assert code == 0 and out.splitlines()[-1] == "1 schedule: 1 unchanged"
