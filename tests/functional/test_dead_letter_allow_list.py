"""A job's dead-letter queue against the stack's allow-list, and allow-lists that change later:

- registration checks ``dead_letter_queue_arn`` against ``AllowedDeadLetterQueueArns`` as it
  checks a target's destination: a queue not listed makes the job invalid, with the parameter and
  the value to add, on every path (put-item through the registrar, the Python API, ``jobsched
  register`` and ``jobsched import``);
- a job invalid only because an allow-list refused its destination is registered by the miss
  detector's reconcile pass once the stack lists it (no stream record comes: the job item is
  unchanged), and left alone while the lists still refuse it or when anything else is wrong.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from harness import T0, Env, checking_operations, job
from jobsched.core.clock import ManualClock
from jobsched.core.config import SchedulerConfig
from jobsched.core.job import JobDefinition
from jobsched.core.state import Registration
from jobsched.core.writes import JOBS, Put
from jobsched.services import registrar as registrar_module
from jobsched.services.allow_lists import AllowLists, allow_list_problems
from jobsched.services.detector import MissDetector
from jobsched.services.reconciler import ALLOWED_NOW
from jobsched.services.registrar import Registrar
from jobsched_tools.deployment import ALLOW_LIST_PARAMETERS, AllowListValues
from jobsched_tools.emulator.provision import Resources
from jobsched_tools.fakes.memory_store import MemoryStore
from jobsched_tools.fakes.memory_telemetry import MemoryTelemetry
from test_cli_ops import run_cli, with_allow_lists

LISTED = "arn:aws:sqs:eu-central-1:123456789012:job-failures"
UNLISTED = "arn:aws:sqs:eu-central-1:123456789012:reports-dlq"
DLQ_REFUSED = (
    f"dead_letter_queue_arn: dead-letter queue {UNLISTED} is not allowed: add it to the stack's "
    f"AllowedDeadLetterQueueArns parameter (now {LISTED}), which also grants the worker and the miss "
    "detector the send"
)
TARGET_QUEUE_URL = "https://sqs.eu-central-1.amazonaws.com/123456789012/reports"
TARGET_QUEUE = "arn:aws:sqs:eu-central-1:123456789012:reports"
WITH_DLQ = {
    "job_id": "lettered",
    "schedule": "rate(1 hour)",
    "target": "log",
    "dead_letter_queue_arn": UNLISTED,
}


def lists(queues: list[str] | None = None, dead_letter_queues: list[str] | None = None) -> AllowListValues:
    return AllowListValues(
        allowed_queue_arns=queues or [], allowed_dead_letter_queue_arns=dead_letter_queues or []
    )


def registrar(
    store: Any, clock: Any, allow: AllowListValues, report: bool = True, cfg: Any = None, **kw: Any
) -> Registrar:
    """A registrar that checks both kinds of allow-list, as the registrar function's does."""
    return Registrar(
        store,
        MemoryTelemetry(),
        clock,
        cfg or SchedulerConfig(shard_count=2),
        report=report,
        allow_lists=allow,
        **kw,
    )


# --- registration ------------------------------------------------------------------------------


def test_put_item_naming_an_unlisted_dead_letter_queue_is_invalid_with_what_to_add() -> None:
    store = MemoryStore()
    store.write([Put(JOBS, WITH_DLQ, condition=(), label="a person's put-item")])
    assert registrar(store, ManualClock(T0), lists(dead_letter_queues=[LISTED])).apply("lettered") is (
        Registration.INVALID
    )
    item = store.get(JOBS, {"job_id": "lettered"})
    assert item is not None and item["status"] == "invalid"
    assert item["invalid_reasons"] == [DLQ_REFUSED]
    # Listed, the same item schedules; a job naming no queue needs nothing listed.
    listed = registrar(store, ManualClock(T0), lists(dead_letter_queues=[LISTED, UNLISTED]))
    assert listed.apply("lettered") is Registration.SCHEDULED
    store.write([Put(JOBS, {**WITH_DLQ, "job_id": "plain", "dead_letter_queue_arn": None}, (), "put")])
    assert registrar(store, ManualClock(T0), lists()).apply("plain") is Registration.SCHEDULED


def test_the_api_marks_the_same_job_invalid_with_every_reason() -> None:
    store = MemoryStore()
    ops = checking_operations(store, lists(dead_letter_queues=[LISTED]))
    to_queue = {
        **WITH_DLQ,
        "target": "sqs_send",
        "payload": json.dumps({"queue_url": TARGET_QUEUE_URL, "message": {}}),
    }
    assert ops.register(to_queue) is Registration.INVALID
    reasons = ops.get("lettered")["invalid_reasons"]
    assert [reason.split(":", 1)[0] for reason in reasons] == ["target", "dead_letter_queue_arn"]
    assert reasons[1] == DLQ_REFUSED


def test_the_stack_s_dead_letter_list_is_read_with_its_other_lists() -> None:
    assert ALLOW_LIST_PARAMETERS["AllowedDeadLetterQueueArns"] == "allowed_dead_letter_queue_arns"
    read = AllowListValues.from_lists({"allowed_dead_letter_queue_arns": f"{LISTED}, {UNLISTED}"})
    assert read.allowed_dead_letter_queue_arns == [LISTED, UNLISTED]


def test_register_and_import_check_the_dead_letter_queue_against_the_stack(
    capsys: pytest.CaptureFixture[str],
    resources: Resources,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    target = with_allow_lists(
        resources, monkeypatch, lists(queues=[TARGET_QUEUE], dead_letter_queues=[LISTED])
    )
    # nightly-sqs.json's DeadLetterConfig names reports-dlq, which the stack does not list.
    schedule = Path(__file__).parents[1] / "unit" / "eventbridge_schedules" / "nightly-sqs.json"
    code, out, _ = run_cli(capsys, resources, "import", str(schedule), "--dry-run")
    assert code == 2 and "would be invalid" in out.splitlines()[0]
    assert f"  - cannot: {DLQ_REFUSED}" in out.splitlines()
    code, out, _ = run_cli(capsys, resources, "import", str(schedule))
    assert code == 2 and f"  - cannot: {DLQ_REFUSED}" in out.splitlines()
    spec = tmp_path / "lettered.json"
    spec.write_text(json.dumps(WITH_DLQ))
    code, out, _ = run_cli(capsys, resources, "register", str(spec))
    assert (code, out.splitlines()) == (2, ["lettered: invalid", f"  - {DLQ_REFUSED}"])
    target.allow_lists.allowed_dead_letter_queue_arns.append(UNLISTED)  # type: ignore[union-attr]
    code, out, _ = run_cli(capsys, resources, "register", str(spec))
    assert (code, out) == (0, "lettered: scheduled\n")


# --- an allow-list widened later ---------------------------------------------------------------


def _registered_invalid(env: Env, raw: dict[str, Any] | None = None, **fields: Any) -> None:
    """The job put by a person (with ``raw`` attributes over its item) and marked invalid by the
    registrar function, whose stack lists neither its target queue nor its dead-letter queue."""
    item = {**job("x", "rate(1 hour)", **fields).to_item(), **(raw or {})}
    env.store.write([Put(JOBS, item, condition=(), label="a person's put-item")])
    other = lists(queues=["arn:aws:sqs:eu-central-1:123456789012:other"])
    refusing = registrar(env.store, env.clock, other, cfg=env.cfg)
    assert refusing.apply("x") is Registration.INVALID
    assert env.state("x")["status"] == "invalid"


def _detector(env: Env, allow: AllowListValues | None) -> MissDetector:
    """The detector as the Lambda wiring makes it: its reconcile pass's registrar checks the
    stack's lists as they are now (None: a detector without them, as in the simulations)."""
    checking = registrar(env.store, env.clock, allow, False, env.cfg, queue=env.queue) if allow else None
    return MissDetector(
        env.store, env.queue, env.telemetry, env.clock, env.cfg, parallel_queries=False, registrar=checking
    )


QUEUE_TARGET = {
    "target": "sqs_send",
    "payload": {"queue_url": TARGET_QUEUE_URL, "message": {}},
    "dead_letter_queue_arn": UNLISTED,
}


def test_a_job_the_stack_lists_later_is_registered_by_the_reconcile_pass(env: Env) -> None:
    _registered_invalid(env, **QUEUE_TARGET)
    assert len(env.job_item("x")["invalid_reasons"]) == 2  # type: ignore[index]
    widened = lists(queues=[TARGET_QUEUE], dead_letter_queues=[UNLISTED])
    result = _detector(env, widened).run("after the stack update")
    assert result.jobs_reconciled == 1
    state = env.state("x")
    assert state["status"] == "active" and state["next_run_at"] == T0 + 3_600_000
    report = env.job_item("x")
    assert report is not None and report["status"] == "active" and "invalid_reasons" not in report
    (event,) = env.telemetry.named("job.reconciled")
    assert event.correlation_id == "x" and event.fields["differed"] == [ALLOWED_NOW]
    assert _detector(env, widened).run("again").jobs_reconciled == 0  # once: the items agree now


def test_a_job_the_lists_still_refuse_is_left_invalid_without_a_write(env: Env) -> None:
    _registered_invalid(env, **QUEUE_TARGET)
    before = (env.state("x"), env.job_item("x"))
    half = lists(queues=[TARGET_QUEUE])  # the target's queue listed, the dead-letter queue not
    assert _detector(env, half).run("half").jobs_reconciled == 0
    assert (env.state("x"), env.job_item("x")) == before
    assert not env.telemetry.named("job.reconciled")


def test_only_allow_list_reasons_are_looked_at_again(env: Env) -> None:
    """A job with another reason too (a bad time zone) is not the stack's to mend; nor does a
    detector that does not check the lists make refused jobs valid."""
    _registered_invalid(env, {"timezone": "Europe/Berln"}, **QUEUE_TARGET)
    widened = lists(queues=[TARGET_QUEUE], dead_letter_queues=[UNLISTED])
    assert _detector(env, widened).run("other reason").jobs_reconciled == 0
    assert env.state("x")["status"] == "invalid"

    env.store.write([Put(JOBS, job("y", "rate(1 hour)", **QUEUE_TARGET).to_item(), (), "put")])
    registrar(env.store, env.clock, lists(), cfg=env.cfg).apply("y")
    assert _detector(env, None).run("no lists").jobs_reconciled == 0
    assert env.state("y")["status"] == "invalid"


def test_a_job_whose_check_fails_does_not_stop_the_others(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    """Loops over jobs isolate failures: a check that raises for one job is logged as its
    ``job.error`` and the pass registers the next job all the same."""
    broken = job("a-broken", "rate(1 hour)", **QUEUE_TARGET).to_item()
    broken["payload"] = json.dumps({"queue_url": TARGET_QUEUE_URL, "message": {"broken": True}})
    fine = job("b-fine", "rate(1 hour)", **QUEUE_TARGET).to_item()
    for item in (broken, fine):
        env.store.write([Put(JOBS, item, condition=(), label="a person's put-item")])
        refused = registrar(env.store, env.clock, lists(), cfg=env.cfg).apply(str(item["job_id"]))
        assert refused is Registration.INVALID
    widened = lists(queues=[TARGET_QUEUE], dead_letter_queues=[UNLISTED])

    def checks(definition: JobDefinition, allow: AllowLists) -> list[str]:
        if definition.payload.get("message") == {"broken": True}:
            raise RuntimeError("the check broke")
        return allow_list_problems(definition, allow)

    monkeypatch.setattr(registrar_module, "allow_list_problems", checks)
    checking = Registrar(
        env.store, env.telemetry, env.clock, env.cfg, env.queue, report=False, allow_lists=widened
    )
    detector = MissDetector(
        env.store, env.queue, env.telemetry, env.clock, env.cfg, parallel_queries=False, registrar=checking
    )
    assert detector.run("one breaks").jobs_reconciled == 1
    assert env.state("b-fine")["status"] == "active" and env.state("a-broken")["status"] == "invalid"
    (error,) = env.telemetry.named("job.error")
    assert error.correlation_id == "a-broken" and "the check broke" in error.fields["error"]
