"""Issue 28: the CLI's output says what happened, read back from the tables, in the words a
person acts on."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
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
from jobsched_tools.emulator.provision import Resources
from test_cli_ops import JOB, run_cli

CFG = SchedulerConfig(shard_count=4)


# The CLI against in-process moto, as tests/functional/test_cli_ops.py drives it.


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
    assert (code, out) == (0, "nightly-report@manual:abc: dispatched\n")
    code, out, _ = run_cli(capsys, resources, "trigger", "nightly-report", "--request-id", "abc")
    assert (code, out) == (
        0,
        "nightly-report@manual:abc: already requested (its status: pending); nothing new dispatched\n",
    )
    code, out, _ = run_cli(capsys, resources, "trigger", "nightly-report", "--request-id", "abc", "--json")
    assert json.loads(out) == {
        "run_id": "nightly-report@manual:abc",
        "already_requested": True,
        "status": "pending",
    }


def test_trigger_prints_one_form_with_and_without_a_request_id(
    capsys: pytest.CaptureFixture[str], resources: Resources, tmp_path: Path
) -> None:
    """Issue 36 item 8: ``RUN: what happened`` both ways (it was ``dispatched RUN`` with a request
    id and ``RUN: running`` without, depending on the run's state when it was read back)."""
    register(capsys, resources, tmp_path, JOB)
    outputs = [
        run_cli(capsys, resources, "trigger", "nightly-report", *request)[1]
        for request in ([], ["--request-id", "abc"])
    ]
    assert re.fullmatch(r"nightly-report@manual:[0-9a-f]{12}: dispatched\n", outputs[0]), outputs[0]
    assert outputs[1] == "nightly-report@manual:abc: dispatched\n"


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
    # Three days a week ago: in the past, and after the retention horizon (the CLI's real clock).
    base = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=7)
    day1, day2, day3 = (f"{(base + timedelta(days=d)).date().isoformat()}T02:00:00" for d in range(3))
    missed, skipped, new = (f"nightly-report@{day}Z" for day in (day1, day2, day3))
    record(resources, missed, f"{day1}+00:00", RunStatus.MISSED, "trigger down past the grace")
    record(resources, skipped, f"{day2}+00:00", RunStatus.SKIPPED, "overlap skip: the run before ran")
    window = ("--from", base.isoformat(), "--to", (base + timedelta(days=3)).isoformat())
    code, out, _ = run_cli(capsys, resources, "backfill", "nightly-report", *window)
    assert code == 0
    assert out.splitlines() == [
        f"{missed}  dispatched: re-run of a missed occurrence (it was missed: trigger down past the grace)",
        f"{skipped}  already recorded: skipped (overlap skip: the run before ran); left alone",
        f"{new}  dispatched: new run",
        "3 occurrences: 1 new run, 1 re-run of a missed one, 1 already recorded",
    ]
    code, out, _ = run_cli(capsys, resources, "backfill", "nightly-report", *window, "--json")
    again = json.loads(out)
    assert [(o["run_id"], o["action"], o["status"]) for o in again["occurrences"]] == [
        (missed, "already recorded", "pending"),
        (skipped, "already recorded", "skipped"),
        (new, "already recorded", "pending"),
    ]


def test_show_prints_readable_times_json_values_and_the_reasons_once(
    capsys: pytest.CaptureFixture[str], resources: Resources, tmp_path: Path
) -> None:
    register(capsys, resources, tmp_path, {**JOB, "job_id": "bad-target", "target": "lgo"})
    code, out, _ = run_cli(capsys, resources, "show", "bad-target")
    lines = out.splitlines()
    assert code == 0
    assert "enabled: true" in lines and "overlap: allow" in lines
    assert 'misfire: {"grace_seconds": 60, "max_catchup": 10, "policy": "run_once"}' in lines
    assert 'payload: {"report":"daily"}' in lines
    (registered,) = (line for line in lines if line.startswith("registered_at: "))
    assert re.fullmatch(
        r"registered_at: \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(.*\d\d:\d\d:\d\d CES?T in Europe/Berlin\)",
        registered,
    )
    assert sum("no handler named 'lgo'" in line for line in lines) == 1
    assert lines[-2:] == [
        "why it is invalid:",
        "  - target: no handler named 'lgo' in this deployment (it has: aws_sdk, ecs_run_task, "
        "eventbridge_put, example.flaky, example.ledger, example.sleep, kinesis_put_record, "
        "lambda_invoke, log, sfn_start_execution, sns_publish, sqs_send)",
    ]
    assert not any("{'" in line or re.search(r"\b1\d{12}\b", line) for line in lines)


LONG_REASON = (
    "overlap skip: the run before it, nightly-report@2026-11-01T02:00:00Z, was still running "
    "when this one came due"
)


def test_runs_cuts_a_long_note_at_a_word_with_an_ellipsis(
    capsys: pytest.CaptureFixture[str], resources: Resources, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")  # the note gets its least, 40 characters
    register(capsys, resources, tmp_path, JOB)
    record(
        resources,
        "nightly-report@2026-11-02T02:00:00Z",
        "2026-11-02T02:00:00+00:00",
        RunStatus.SKIPPED,
        LONG_REASON,
    )
    code, out, _ = run_cli(capsys, resources, "runs", "nightly-report")
    row = out.splitlines()[2]
    assert code == 0
    assert row.endswith("UTC  overlap skip: the run before it\u2026")
    code, out, _ = run_cli(capsys, resources, "runs", "nightly-report", "--json")
    assert json.loads(out)[0]["reason"] == LONG_REASON


class ClosedPipe(io.StringIO):
    """stdout whose reader went away (`| head -3` after its lines)."""

    def write(self, _text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")


def test_runs_into_a_closed_pipe_exits_quietly(
    capsys: pytest.CaptureFixture[str], resources: Resources, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    register(capsys, resources, tmp_path, JOB)
    capsys.readouterr()
    with capsys.disabled():
        monkeypatch.setattr(sys, "stdout", ClosedPipe())
        monkeypatch.setattr(sys, "stderr", io.StringIO())
        target = ["--jobs-table", resources.jobs_table, "--state-table", resources.state_table]
        target += ["--runs-table", resources.runs_table, "--queue-url", resources.work_queue_url]
        with pytest.raises(SystemExit) as exited:
            main(["runs", "nightly-report", *target, "--shard-count", "4"])
        stderr = sys.stderr.getvalue()  # type: ignore[attr-defined]
    assert exited.value.code == 141 and stderr == ""


def test_a_real_pipe_closed_by_head_ends_the_cli_without_a_word() -> None:
    done = subprocess.run(
        f"{sys.executable} -m jobsched_tools.cli.main next 'rate(1 minute)' --count 100000 | head -3; "
        'echo "status ${PIPESTATUS[0]}" >&2',
        shell=True,
        executable="/bin/bash",
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert len(done.stdout.splitlines()) == 3
    assert done.stderr == "status 141\n"


def test_dlq_redrive_moves_the_dead_letters_back_to_the_work_queue(
    capsys: pytest.CaptureFixture[str], resources: Resources
) -> None:
    sqs = boto3.client("sqs", region_name="us-east-1")
    attribute = {"kind": {"DataType": "String", "StringValue": "run"}}
    for i in range(12):
        sqs.send_message(
            QueueUrl=resources.dead_letter_queue_url, MessageBody=f"m{i}", MessageAttributes=attribute
        )
    messages = [m["MessageId"] for m in _peek(sqs, resources.dead_letter_queue_url)]
    target = ["--jobs-table", resources.jobs_table, "--state-table", resources.state_table]
    target += ["--runs-table", resources.runs_table, "--queue-url", resources.work_queue_url]
    with pytest.raises(SystemExit) as exited:
        main(["dlq", "redrive", *target, "--dlq-url", resources.dead_letter_queue_url])
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert (exited.value.code, lines[0], err) == (
        0,
        "moved 12 messages from the dead-letter queue to the work queue",
        "",
    )
    # Each moved message named: its run, or its message id when it is no run message.
    assert sorted(line.strip() for line in lines[1:]) == sorted(messages)
    moved = []
    while batch := sqs.receive_message(
        QueueUrl=resources.work_queue_url, MaxNumberOfMessages=10, MessageAttributeNames=["All"]
    ).get("Messages", []):
        moved += [(m["Body"], m["MessageAttributes"]["kind"]["StringValue"]) for m in batch]
    assert sorted(moved) == sorted((f"m{i}", "run") for i in range(12))
    left = sqs.get_queue_attributes(
        QueueUrl=resources.dead_letter_queue_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    assert left == {"ApproximateNumberOfMessages": "0", "ApproximateNumberOfMessagesNotVisible": "0"}

    with pytest.raises(SystemExit) as exited:
        main(["dlq", "redrive", *target])
    assert exited.value.code == 2 and capsys.readouterr().err == (
        "error: the dead-letter queue is not known: "
        "give --dlq-url (or JOBSCHED_DLQ_URL), --stack-name or --local\n"
    )


def _peek(sqs: Any, url: str) -> list[dict[str, Any]]:
    """The queue's messages, received and made visible again."""
    seen: dict[str, dict[str, Any]] = {}
    while batch := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=30).get(
        "Messages"
    ):
        seen.update((m["MessageId"], m) for m in batch)
    for m in seen.values():
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"], VisibilityTimeout=0)
    return list(seen.values())
