"""Every path a job is registered by checks the stack's allow-lists, through one function
(services/allow_lists.py ``allow_list_problems``), for every kind of destination:

- the trigger's inline registrar, which applies a job item's change it meets before the
  registrar function does (a lost or late stream record), on the Lambda wiring;
- ``sns_publish``'s topic (``AllowedTopicArns``), ``kinesis_put_record``'s stream
  (``AllowedStreamArns``) and ``aws_sdk``'s action (``AllowedSdkActions``) are refused at
  registration, as the other built-ins' destinations are, not only when a run calls them; a job so
  refused is registered by the reconcile pass once the stack lists the value (issue 38), and the
  detector reports how many (``jobs_revalidated``, ``JobsRevalidated``);
- ``jobsched import --dry-run`` says the same as the registration would.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from harness import T0, Env, job
from jobsched.core.clock import ManualClock
from jobsched.core.config import SchedulerConfig
from jobsched.core.job import JobDefinition
from jobsched.core.run import run_id_for, run_key
from jobsched.core.state import Registration
from jobsched.core.writes import JOBS, RUNS, STATE, Put
from jobsched.runtime import wiring
from jobsched.services.detector import MissDetector
from jobsched.services.reconciler import ALLOWED_NOW
from jobsched.services.registrar import Registrar, refused_only_by_allow_lists
from jobsched.targets.builtin import DESTINATION_CHECKS, register_builtins
from jobsched.targets.registry import HandlerRegistry
from jobsched_tools.deployment import ALLOW_LIST_PARAMETERS, AllowListValues, Target
from jobsched_tools.emulator.provision import Resources, load_template
from jobsched_tools.fakes.memory_store import MemoryStore
from jobsched_tools.fakes.memory_telemetry import MemoryTelemetry
from lambda_apps import FakeContext, event, load_app
from test_cli_ops import run_cli

TOPIC = "arn:aws:sns:eu-central-1:123456789012:reports"
STREAM = "arn:aws:kinesis:eu-central-1:123456789012:stream/beats"


def _refused(what: str, parameter: str, now: str = "empty: none is allowed", grants: str = "call") -> str:
    return (
        f"{what} is not allowed: add it to the stack's {parameter} parameter (now {now}), which also "
        f"grants the worker's role the {grants}"
    )


# (target, payload, the allow-list's attribute, the value to list, the reason when it is not listed)
NEW_KINDS = [
    pytest.param(
        "sns_publish",
        {"topic_arn": TOPIC, "message": "hi"},
        "allowed_topic_arns",
        TOPIC,
        f"target: sns_publish: {_refused(f'topic {TOPIC}', 'AllowedTopicArns')}",
        id="sns_publish",
    ),
    pytest.param(
        "kinesis_put_record",
        {"stream_arn": STREAM, "data": {"beat": 1}},
        "allowed_stream_arns",
        STREAM,
        f"target: kinesis_put_record: {_refused(f'stream {STREAM}', 'AllowedStreamArns')}",
        id="kinesis_put_record",
    ),
    pytest.param(
        "aws_sdk",
        {"target_arn": "arn:aws:scheduler:::aws-sdk:ec2:stopInstances", "input": {"InstanceIds": ["i-0"]}},
        "allowed_sdk_actions",
        "ec2:StopInstances",
        f"target: aws_sdk: {_refused('ec2:StopInstances', 'AllowedSdkActions', grants='action')}",
        id="aws_sdk-target_arn",
    ),
    pytest.param(
        "aws_sdk",
        {"service": "ec2", "action": "stopInstances", "input": {"InstanceIds": ["i-0"]}},
        "allowed_sdk_actions",
        "ec2:StopInstances",
        f"target: aws_sdk: {_refused('ec2:StopInstances', 'AllowedSdkActions', grants='action')}",
        id="aws_sdk-service-action",
    ),
]


def _registrar(store: Any, clock: Any, allow: AllowListValues, cfg: Any = None, **kw: Any) -> Registrar:
    return Registrar(
        store, MemoryTelemetry(), clock, cfg or SchedulerConfig(shard_count=2), allow_lists=allow, **kw
    )


def test_every_built_in_that_calls_out_has_its_destination_checked_at_registration() -> None:
    """A built-in without an entry in DESTINATION_CHECKS would be refused only when a run calls
    it; ``log`` is the one built-in that calls nothing."""
    builtins = HandlerRegistry()
    register_builtins(builtins, AllowListValues())
    assert set(builtins.names()) - {"log"} == set(DESTINATION_CHECKS)


def test_the_cli_reads_every_allow_list_the_stack_has() -> None:
    """``--stack-name`` and ``--local`` read the lists named here: a parameter missing would leave
    its kind unchecked by ``jobsched register`` and ``import``."""
    allow_lists = {name for name in load_template()["Parameters"] if name.startswith("Allowed")}
    assert allow_lists == set(ALLOW_LIST_PARAMETERS)


@pytest.mark.parametrize(("target", "payload", "attribute", "value", "reason"), NEW_KINDS)
def test_a_destination_the_stack_does_not_list_is_invalid_at_registration(
    target: str, payload: dict[str, Any], attribute: str, value: str, reason: str
) -> None:
    store = MemoryStore()
    item = job("x", "rate(1 hour)", target=target, payload=payload).to_item()
    store.write([Put(JOBS, item, condition=(), label="a person's put-item")])
    assert _registrar(store, ManualClock(T0), AllowListValues()).apply("x") is Registration.INVALID
    report = store.get(JOBS, {"job_id": "x"})
    assert report is not None and report["invalid_reasons"] == [reason]
    # An allow-list reason: the reconcile pass looks at the job again when the stack changes.
    assert refused_only_by_allow_lists(report, store.get(STATE, {"job_id": "x"}))
    listed = AllowListValues(**{attribute: [value]})
    assert _registrar(store, ManualClock(T0), listed).apply("x") is Registration.SCHEDULED


@pytest.mark.parametrize(("target", "payload", "attribute", "value", "reason"), NEW_KINDS)
def test_a_job_refused_so_is_registered_once_the_stack_lists_its_destination(
    env: Env, target: str, payload: dict[str, Any], attribute: str, value: str, reason: str
) -> None:
    item = job("x", "rate(1 hour)", target=target, payload=payload).to_item()
    env.store.write([Put(JOBS, item, condition=(), label="a person's put-item")])
    assert _registrar(env.store, env.clock, AllowListValues(), env.cfg).apply("x") is Registration.INVALID
    assert env.job_item("x")["invalid_reasons"] == [reason]  # type: ignore[index]

    widened = AllowListValues(**{attribute: [value]})
    checking = _registrar(env.store, env.clock, widened, env.cfg, queue=env.queue, report=False)
    detector = MissDetector(
        env.store, env.queue, env.telemetry, env.clock, env.cfg, parallel_queries=False, registrar=checking
    )
    result = detector.run("after the stack update")
    assert (result.jobs_reconciled, result.jobs_revalidated) == (1, 1)
    assert env.state("x")["status"] == "active"
    (reconciled,) = env.telemetry.named("job.reconciled")
    assert reconciled.fields["differed"] == [ALLOWED_NOW]


def test_the_detector_reports_the_jobs_it_revalidated(env: Env) -> None:
    """``Reconciled.revalidated`` reaches the detector's result (the Lambda's return value), its
    ``detector.finished`` log line and the ``JobsRevalidated`` metric, beside ``JobsReconciled``
    (which counts them too); a pass that revalidates nothing publishes no count."""
    queue_url = "https://sqs.eu-central-1.amazonaws.com/123456789012/reports"
    queue_arn = "arn:aws:sqs:eu-central-1:123456789012:reports"
    for job_id in ("a", "b"):
        item = job(job_id, "rate(1 hour)", target="sqs_send", payload={"queue_url": queue_url}).to_item()
        env.store.write([Put(JOBS, item, condition=(), label="a person's put-item")])
        assert (
            _registrar(env.store, env.clock, AllowListValues(), env.cfg).apply(job_id) is Registration.INVALID
        )

    def detector(allow: AllowListValues) -> MissDetector:
        checking = _registrar(env.store, env.clock, allow, env.cfg, queue=env.queue, report=False)
        return MissDetector(
            env.store,
            env.queue,
            env.telemetry,
            env.clock,
            env.cfg,
            parallel_queries=False,
            registrar=checking,
        )

    still = detector(AllowListValues()).run("lists unchanged")
    assert still.jobs_revalidated == 0 and env.telemetry.metric_sum("JobsRevalidated") == 0
    result = detector(AllowListValues(allowed_queue_arns=[queue_arn])).run("widened")
    assert result.summary()["jobs_revalidated"] == 2 and result.jobs_reconciled == 2
    assert env.telemetry.metric_sum("JobsRevalidated") == 2
    finished = env.telemetry.named("detector.finished")[-1]
    assert finished.fields["jobs_revalidated"] == 2


# --- the trigger's inline registrar, as the Lambda wiring builds it -------------------------------

OTHER_QUEUE = "arn:aws:sqs:us-east-1:123456789012:other"
REPORTS_URL = "https://sqs.us-east-1.amazonaws.com/123456789012/reports"
REPORTS_REFUSED = "target: sqs_send: " + _refused(
    "queue arn:aws:sqs:us-east-1:123456789012:reports", "AllowedTargetQueueArns", OTHER_QUEUE
)


def test_the_trigger_s_inline_registrar_refuses_a_destination_the_stack_does_not_list(
    aws: tuple[Resources, Any, Any, ManualClock],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A person edits a job to send to a queue the stack does not list, and the edit's stream
    record is lost: the trigger meets the change first, when the job comes due, and applies it
    inline. The job is invalid with the reason (its ``job.invalid`` log line; the occurrence due
    under the old definition is recorded missed with it), and nothing is sent."""
    work_queue, sqs, clock = aws[0].work_queue_url, aws[2], aws[3]
    monkeypatch.setenv("ALLOWED_QUEUE_ARNS", OTHER_QUEUE)
    store = wiring.app().store
    first = JobDefinition(job_id="edited", schedule="rate(1 hour)", target="log")
    store.write([Put(JOBS, first.to_item(), condition=(), label="a person's put-item")])
    assert wiring.app().registrar().apply("edited") is Registration.SCHEDULED
    due = int(store.get(STATE, {"job_id": "edited"})["next_run_at"])  # type: ignore[index]

    edit = JobDefinition(
        job_id="edited",
        schedule="rate(1 hour)",
        target="sqs_send",
        payload={"queue_url": REPORTS_URL, "message": {}},
    )
    store.write([Put(JOBS, edit.to_item(), condition=(), label="a person's edit, its record lost")])
    clock.set(due)
    caplog.clear()
    load_app("trigger").lambda_handler(event("trigger_scheduled.json"), FakeContext("tick-1"))

    state = store.get(STATE, {"job_id": "edited"})
    assert state is not None and (state["status"], state["def_hash"]) == ("invalid", edit.definition_hash())
    (invalid,) = [record for record in caplog.records if record.getMessage() == "job.invalid"]
    assert invalid.__dict__["reasons"] == [REPORTS_REFUSED]
    missed = store.get(RUNS, run_key(run_id_for("edited", due)))
    assert missed is not None and missed["status"] == "missed"
    # The state keeps a short reason (200 characters), and the record gives it.
    assert missed["reason"] == f"job became invalid before it ran: {REPORTS_REFUSED[:200]}"
    assert sqs.receive_message(QueueUrl=work_queue, MaxNumberOfMessages=10).get("Messages", []) == []


# --- jobsched import --dry-run --------------------------------------------------------------------


def test_import_dry_run_refuses_an_sdk_action_the_stack_does_not_list(
    capsys: pytest.CaptureFixture[str],
    resources: Resources,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from jobsched_tools.cli import cmd_import, common

    lists = AllowListValues(allowed_sdk_actions=["ec2:StartInstances"])
    target = Target(
        resources.jobs_table,
        resources.state_table,
        resources.runs_table,
        resources.work_queue_url,
        shard_count=4,
        allow_lists=lists,
    )
    for module in (common, cmd_import):
        monkeypatch.setattr(module, "resolve_target", lambda _args: target)
    schedule = Path(__file__).parents[1] / "unit" / "eventbridge_schedules" / "universal-target.json"
    refused = "target: aws_sdk: " + _refused(
        "ec2:StopInstances", "AllowedSdkActions", "ec2:StartInstances", "action"
    )
    code, out, _ = run_cli(capsys, resources, "import", str(schedule), "--dry-run", "--json")
    (entry,) = json.loads(out)["schedules"]
    assert (code, entry["action"], entry["blockers"]) == (2, "would be invalid", [refused])
    # The import itself (the Python API's register) gives the job the same reason.
    code, out, _ = run_cli(capsys, resources, "import", str(schedule), "--json")
    (entry,) = json.loads(out)["schedules"]
    assert (code, entry["action"], entry["blockers"]) == (2, "invalid", [refused])
    lists.allowed_sdk_actions.append("ec2:StopInstances")
    code, out, _ = run_cli(capsys, resources, "import", str(schedule), "--dry-run", "--json")
    assert (code, json.loads(out)["schedules"][0]["action"]) == (0, "would register")
