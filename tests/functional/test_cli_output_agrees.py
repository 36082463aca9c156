"""Issue 36 items 3, 4, 5 and 9: output that agrees with itself. The NOTE column of `runs` uses the
terminal's width and keeps the resource an error names; `top` shows no earlier attempt's error
beside a run that succeeded, and prints times as `list`, `show` and `runs` do; a bulk pause run
again says the jobs are already paused; `show` prints the same fields for a job registered with
the CLI and one written with put-item."""

from __future__ import annotations

import re
from pathlib import Path

import boto3
import pytest
from jobsched.adapters.dynamodb_store import DynamoStore
from jobsched.core.config import SchedulerConfig
from jobsched.core.job import DEFINITION_FIELDS
from jobsched.core.run import RunStatus, run_key
from jobsched.core.writes import JOBS, Put
from jobsched.runtime.clock import SystemClock
from jobsched.services.registrar import Registrar
from jobsched_tools.emulator.provision import Resources
from jobsched_tools.fakes.memory_telemetry import MemoryTelemetry
from test_cli_honest_output import JOB, record, register, run_cli

ARN = "arn:aws:sqs:us-east-1:123456789012:billing-invoices-to-accounting"
NOT_ALLOWED = f"NotAllowed: queue {ARN} is not in the allowed list; add it to the stack's parameters"
TIME = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"


def store(resources: Resources) -> DynamoStore:
    client = boto3.client("dynamodb", region_name="us-east-1")
    return DynamoStore(client, resources.jobs_table, resources.state_table, resources.runs_table)


@pytest.mark.parametrize("columns", [200, 140])
def test_runs_note_uses_the_terminals_width_and_keeps_the_resource(
    capsys: pytest.CaptureFixture[str],
    resources: Resources,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    columns: int,
) -> None:
    """It cut at 60 characters whatever the width: "NotAllowed: queue…", even with COLUMNS=200."""
    monkeypatch.setenv("COLUMNS", str(columns))
    register(capsys, resources, tmp_path, JOB)
    record(
        resources,
        "nightly-report@2026-11-02T02:00:00Z",
        "2026-11-02T02:00:00+00:00",
        RunStatus.FAILED,
        NOT_ALLOWED,
    )
    code, out, _ = run_cli(capsys, resources, "runs", "nightly-report")
    row = out.splitlines()[2]
    assert code == 0 and len(row) <= columns
    assert "NotAllowed: queue …:billing-invoices-to-accounting" in row
    if columns == 200:
        assert row.endswith("add it to the stack's parameters") or row.endswith("…")
        assert len(row) > 150  # the width is used


def test_top_shows_no_earlier_error_beside_a_run_that_succeeded_and_times_as_list_does(
    capsys: pytest.CaptureFixture[str], resources: Resources, tmp_path: Path
) -> None:
    register(capsys, resources, tmp_path, {**JOB, "job_id": "hourly", "schedule": "rate(1 hour)"})
    run_cli(capsys, resources, "trigger", "hourly", "--request-id", "now")
    # Its first attempt failed, its second succeeded: the record keeps the first one's error.
    boto3.client("dynamodb", region_name="us-east-1").update_item(
        TableName=resources.runs_table,
        Key={name: {"S": value} for name, value in run_key("hourly@manual:now").items()},
        UpdateExpression="SET #s = :s, attempt = :a, last_error = :e REMOVE lease_expires_at",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={
            ":s": {"S": "succeeded"},
            ":a": {"N": "2"},
            ":e": {"S": "RuntimeError: failing attempt 1"},
        },
    )
    code, out, _ = run_cli(capsys, resources, "top", "--once", "--horizon", "7200")
    lines = out.splitlines()
    assert code == 0
    (chain_line,) = (line for line in lines if line.strip().startswith("hourly@manual:now"))
    assert chain_line.split()[1:] == ["succeeded"]
    assert "RuntimeError" not in out
    assert re.fullmatch(rf"jobsched top  {TIME}  \(\d+ reads this refresh\)", lines[0]), lines[0]
    due = next(line for line in lines if line.split()[:1] == ["hourly"] and line.endswith(")"))
    assert re.search(rf"  {TIME} \((in \d+ s|\d+ s ago)\)$", due), due
    # The same format as `list` and `runs`.
    listed = run_cli(capsys, resources, "list")[1].splitlines()[2]
    assert re.search(TIME, listed)
    assert not re.search(r"\d\d:\d\d:\d\dZ", run_cli(capsys, resources, "runs", "hourly")[1])


def test_a_group_pause_run_again_says_already_paused(
    capsys: pytest.CaptureFixture[str], resources: Resources, tmp_path: Path
) -> None:
    for name in ("extract", "load"):
        register(capsys, resources, tmp_path, {**JOB, "job_id": f"etl.{name}", "group": "etl"})
    register(capsys, resources, tmp_path, {**JOB, "job_id": "other"})
    first = run_cli(capsys, resources, "pause", "--group", "etl")
    assert first == (0, "etl.extract: paused\netl.load: paused\n", "")
    second = run_cli(capsys, resources, "pause", "--group", "etl")
    assert second == (0, "etl.extract: already paused\netl.load: already paused\n", "")
    assert run_cli(capsys, resources, "resume", "--group", "etl")[1] == (
        "etl.extract: scheduled\netl.load: scheduled\n"
    )
    assert run_cli(capsys, resources, "resume", "--group", "etl")[1] == (
        "etl.extract: already enabled\netl.load: already enabled\n"
    )
    assert run_cli(capsys, resources, "pause", "--group", "nothing-here")[1] == "no job matched\n"


def test_show_prints_the_same_fields_for_a_job_registered_or_put(
    capsys: pytest.CaptureFixture[str], resources: Resources, tmp_path: Path
) -> None:
    """With put-item it showed only the attributes written; with `register`, the defaults too."""
    definition = {"schedule": "rate(1 hour)", "target": "log", "payload": '{"hi": 1}'}
    register(capsys, resources, tmp_path, {"job_id": "by-cli", **definition})
    store(resources).write([Put(JOBS, {"job_id": "by-put", **definition}, (), "person puts job")])
    Registrar(store(resources), MemoryTelemetry(), SystemClock(), SchedulerConfig(shard_count=4)).apply(
        "by-put"
    )

    def definition_lines(job_id: str) -> list[str]:
        code, out, _ = run_cli(capsys, resources, "show", job_id)
        assert code == 0
        return [
            line
            for line in out.splitlines()
            if line.split(":", 1)[0] in DEFINITION_FIELDS and not line.startswith("job_id:")
        ]

    by_cli, by_put = definition_lines("by-cli"), definition_lines("by-put")
    assert by_cli == by_put
    assert {"overlap: skip", "pause_on_failure: false", "jitter_seconds: 0", "max_runs: -"} <= set(by_put)
    assert 'payload: {"hi":1}' in by_put


def test_a_pause_the_stacks_registrar_applied_first_says_paused_not_unchanged(
    capsys: pytest.CaptureFixture[str], resources: Resources, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seen on the local stack (docs/local.md's transcript): `pause --group etl` printed
    `etl.extract: unchanged` for a job it had just paused, because the stack's registrar applied
    the write from the stream before the CLI's own apply."""
    for name in ("extract", "load"):
        register(capsys, resources, tmp_path, {**JOB, "job_id": f"etl.{name}", "group": "etl"})
    register(capsys, resources, tmp_path, {**JOB, "job_id": "solo"})
    real_apply = Registrar.apply

    def stream_first(self: Registrar, job_id: str, *args: object, **kwargs: object) -> object:
        real_apply(self, job_id)  # the stack's registrar, from the stream record
        return real_apply(self, job_id, *args, **kwargs)  # the CLI's: nothing left to do

    monkeypatch.setattr(Registrar, "apply", stream_first)
    assert (
        run_cli(capsys, resources, "pause", "--group", "etl")[1] == "etl.extract: paused\netl.load: paused\n"
    )
    assert run_cli(capsys, resources, "pause", "solo")[1] == "solo: paused\n"
    assert run_cli(capsys, resources, "pause", "solo")[1] == "solo: already paused\n"
    assert run_cli(capsys, resources, "resume", "solo")[1] == "solo: scheduled\n"
    assert run_cli(capsys, resources, "resume", "solo")[1] == "solo: already enabled\n"
