"""Registration reports every reason at once, and treats every kind of problem one way (issue 36,
items 2 and 6): a job item with a bad time zone and an unknown target, or a destination the stack's
allow-lists do not name, is written and marked invalid with all its reasons, whether it came by
put-item (the registrar), ``jobsched register``, ``jobsched import`` or the Python API."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from harness import T0, checking_operations
from jobsched.core.clock import ManualClock
from jobsched.core.config import SchedulerConfig
from jobsched.core.job import InvalidJob
from jobsched.core.state import Registration
from jobsched.core.writes import JOBS, Put
from jobsched.services.registrar import Registrar
from jobsched_tools.deployment import AllowListValues
from jobsched_tools.emulator.provision import Resources
from jobsched_tools.fakes.memory_store import MemoryStore
from jobsched_tools.fakes.memory_telemetry import MemoryTelemetry
from test_cli_ops import run_cli, with_allow_lists

TWO_PROBLEMS = {
    "job_id": "two-problems",
    "schedule": "cron(0 3 * * ? *)",
    "timezone": "Europe/Berln",
    "target": "lgo",
}
ZONE = "timezone: unknown time zone 'Europe/Berln'"
HANDLER = "target: no handler named 'lgo' in this deployment (it has: log, sqs_send)"
QUEUE_URL = "https://sqs.eu-central-1.amazonaws.com/123456789012/reports"
QUEUE_ARN = "arn:aws:sqs:eu-central-1:123456789012:reports"
ALLOWED = AllowListValues(allowed_queue_arns=["arn:aws:sqs:eu-central-1:123456789012:other"])
TO_QUEUE = {
    "job_id": "to-queue",
    "schedule": "rate(1 hour)",
    "target": "sqs_send",
    "payload": json.dumps({"queue_url": QUEUE_URL, "message": {}}),
}
NOT_ALLOWED = (
    f"target: sqs_send: queue {QUEUE_ARN} is not allowed: add it to the stack's AllowedTargetQueueArns "
    "parameter (now arn:aws:sqs:eu-central-1:123456789012:other), which also grants the worker's role "
    "the call"
)


def registrar(store: MemoryStore) -> Registrar:
    return Registrar(
        store,
        MemoryTelemetry(),
        ManualClock(T0),
        SchedulerConfig(),
        known_targets={"log", "sqs_send"},
        allow_lists=ALLOWED,
    )


def reasons(store: MemoryStore, job_id: str) -> list[str]:
    item = store.get(JOBS, {"job_id": job_id})
    assert item is not None and item["status"] == "invalid", item
    return list(item["invalid_reasons"])


@pytest.mark.parametrize(("item", "expected"), [(TWO_PROBLEMS, [ZONE, HANDLER]), (TO_QUEUE, [NOT_ALLOWED])])
def test_put_item_gets_every_reason(item: dict[str, Any], expected: list[str]) -> None:
    store = MemoryStore()
    store.write([Put(JOBS, item, condition=(), label="a person's put-item")])
    assert registrar(store).apply(item["job_id"]) is Registration.INVALID
    assert reasons(store, item["job_id"]) == expected


@pytest.mark.parametrize(("item", "expected"), [(TWO_PROBLEMS, [ZONE, HANDLER]), (TO_QUEUE, [NOT_ALLOWED])])
def test_the_api_writes_and_marks_the_same_item_the_same_way(
    item: dict[str, Any], expected: list[str]
) -> None:
    store = MemoryStore()
    ops = checking_operations(store, ALLOWED)
    assert ops.register(item) is Registration.INVALID
    assert reasons(store, item["job_id"]) == expected
    with pytest.raises(InvalidJob, match="job_id"):  # no job to mark: nothing written
        ops.register({**item, "job_id": "_no"})
    assert store.get(JOBS, {"job_id": "_no"}) is None


def test_register_prints_every_reason_and_writes_the_job_marked_invalid(
    capsys: pytest.CaptureFixture[str],
    resources: Resources,
    tmp_path: Path,
) -> None:
    spec = tmp_path / "jobs.json"
    good = {"job_id": "fine", "schedule": "rate(1 hour)", "target": "log"}
    spec.write_text(json.dumps([TWO_PROBLEMS, good]))
    code, out, err = run_cli(capsys, resources, "register", str(spec))
    lines = out.splitlines()
    assert (code, err) == (2, "")
    assert lines[:3] == [
        "two-problems: invalid",
        f"  - {ZONE}",
        "  - target: no handler named 'lgo' in this deployment (it has: aws_sdk, ecs_run_task, "
        "eventbridge_put, example.flaky, example.ledger, example.sleep, kinesis_put_record, "
        "lambda_invoke, log, sfn_start_execution, sns_publish, sqs_send)",
    ]
    assert lines[3:] == ["fine: scheduled"]  # the next job is registered all the same
    code, out, _ = run_cli(capsys, resources, "show", "two-problems", "--json")
    shown = json.loads(out)
    assert shown["status"] == "invalid" and shown["invalid_reasons"] == [line[4:] for line in lines[1:3]]


def test_import_and_register_check_the_stack_s_allow_lists(
    capsys: pytest.CaptureFixture[str],
    resources: Resources,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the deployment's allow-lists known (a stack's parameters, the local stack's state),
    a destination missing from them makes the job invalid, naming the parameter and the value."""
    target = with_allow_lists(resources, monkeypatch, ALLOWED)
    fixtures = Path(__file__).parents[1] / "unit" / "eventbridge_schedules"
    code, out, _ = run_cli(capsys, resources, "import", str(fixtures / "nightly-sqs.json"), "--dry-run")
    lines = out.splitlines()
    assert code == 2 and lines[0].startswith("default/nightly-report -> nightly-report: would be invalid (")
    assert f"  - cannot: {NOT_ALLOWED}" in lines
    code, out, _ = run_cli(capsys, resources, "import", str(fixtures / "nightly-sqs.json"))
    lines = out.splitlines()
    assert code == 2
    assert lines[0].startswith("default/nightly-report -> nightly-report: invalid (")
    assert f"  - cannot: {NOT_ALLOWED}" in lines
    assert lines[-1] == "1 schedule: 1 invalid"

    spec = tmp_path / "to-queue.json"
    spec.write_text(json.dumps(TO_QUEUE))
    code, out, _ = run_cli(capsys, resources, "register", str(spec))
    assert (code, out.splitlines()) == (2, ["to-queue: invalid", f"  - {NOT_ALLOWED}"])
    # Once the queue is on the list, registering again schedules the job.
    target.allow_lists.allowed_queue_arns.append(QUEUE_ARN)  # type: ignore[union-attr]
    code, out, _ = run_cli(capsys, resources, "register", str(spec))
    assert (code, out) == (0, "to-queue: scheduled\n")
