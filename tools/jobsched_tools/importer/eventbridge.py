"""EventBridge Scheduler schedules as jobsched jobs (``jobsched import``).

Reads schedules as ``aws scheduler get-schedule`` returns them (the GetSchedule response:
https://docs.aws.amazon.com/scheduler/latest/APIReference/API_GetSchedule.html) and plans one job
per schedule, through ``JobDefinition`` (so through the one schedule parser, core/schedule): the
expression and its zone, the start and end dates, the state, the target (by its ARN's service,
onto a built-in handler) and the retry policy. What cannot be carried over is said, per schedule:

- ``blockers``: the schedule is not imported (a target type jobsched has no handler for, an
  expression or name jobsched refuses);
- ``notes``: imported, but it behaves differently in a way a person should know (a flexible time
  window, which jobsched does not have yet; the role; the allow-list a target, an AWS API call or
  a dead-letter queue needs; when a schedule's ``ActionAfterCompletion: DELETE`` takes effect).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from jobsched.core.job import InvalidJob, JobDefinition, OverlapPolicy

DEFAULT_GROUP = "default"
# jobsched's own bound on attempts (RetryPolicy.max_attempts); EventBridge retries up to 185 times.
MAX_ATTEMPTS = 20
# EcsParameters (PascalCase) to RunTask's (camelCase) where the name is not the lower-cased first
# letter: https://docs.aws.amazon.com/scheduler/latest/APIReference/API_EcsParameters.html
_ECS_RENAMED = {"TaskCount": "count"}


@dataclass
class PlannedImport:
    source: str  # GROUP/NAME
    job: JobDefinition | None = None
    blockers: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "job_id": self.job.job_id if self.job else None,
            "job": self.job.to_item() if self.job else None,
            "importable": self.job is not None,
            "blockers": self.blockers,
            "notes": self.notes,
        }


def read_schedules(path: Path) -> list[dict[str, Any]]:
    """One get-schedule output per file (an object), or a list of them; a directory: each of its
    ``*.json`` files, in name order."""
    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    schedules: list[dict[str, Any]] = []
    for file in files:
        document = json.loads(file.read_text())
        for schedule in document if isinstance(document, list) else [document]:
            if not isinstance(schedule, dict):
                raise ValueError(
                    f"{file}: expected get-schedule output (a JSON object), got {schedule!r:.80}"
                )
            schedules.append(schedule)
    return schedules


def job_id_for(group: str, name: str) -> str:
    """``NAME`` in the default group, else ``GROUP:NAME``: schedule and group names are
    ``[0-9a-zA-Z-_.]+``, so the ``:`` cannot be part of either."""
    return name if group == DEFAULT_GROUP else f"{group}:{name}"


def _instant(value: Any) -> str | None:
    """A get-schedule date: ISO 8601 text (the CLI's output) or epoch seconds (a number)."""
    if value is None:
        return None
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value, UTC).isoformat()
    text = str(value)
    parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if parsed.tzinfo is None:  # the API's dates are UTC
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.isoformat()


def _input(target: dict[str, Any], plan: PlannedImport) -> Any:
    raw = target.get("Input")
    if raw is None:
        return {}
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        plan.notes.append("Input is not JSON: it is passed as a JSON string")
        return raw


def _lower_first(value: Any) -> Any:
    if isinstance(value, list):
        return [_lower_first(item) for item in value]
    if isinstance(value, dict):
        return {_ECS_RENAMED.get(k, k[:1].lower() + k[1:]): _lower_first(v) for k, v in value.items()}
    return value


def _target(target: dict[str, Any], plan: PlannedImport) -> tuple[str, dict[str, Any]] | None:
    """The built-in handler and its payload for a schedule's target, or None (a blocker said why)."""
    arn = str(target.get("Arn", ""))
    parts = arn.split(":", 5)
    if len(parts) < 6 or parts[0] != "arn":
        plan.blockers.append(f"target {arn!r} is not an ARN")
        return None
    partition, service, region, account, resource = parts[1], parts[2], parts[3], parts[4], parts[5]
    if service == "scheduler" and resource.startswith("aws-sdk:"):
        return _universal_target(arn, target, plan)
    if service == "sns":
        return _sns_target(arn, target, plan)
    if service == "kinesis":
        return _kinesis_target(arn, target, plan)
    if service == "sqs":
        if target.get("SqsParameters", {}).get("MessageGroupId"):
            plan.blockers.append("SQS FIFO target (MessageGroupId): sqs_send sets no message group")
            return None
        suffix = "amazonaws.com.cn" if partition == "aws-cn" else "amazonaws.com"
        url = f"https://sqs.{region}.{suffix}/{account}/{resource}"
        return "sqs_send", {"queue_url": url, "message": _input(target, plan)}
    if service == "lambda":
        plan.notes.append(
            "Lambda target: the function receives {input, idempotency_key, run_id}, "
            "the schedule's Input under input (EventBridge passes the Input alone)"
        )
        return "lambda_invoke", {"function": arn, "input": _input(target, plan)}
    if service == "states":
        return "sfn_start_execution", {"state_machine": arn, "input": _input(target, plan)}
    if service == "events":
        return _eventbridge_target(arn, target, plan)
    if service == "ecs":
        return _ecs_target(arn, target, plan)
    plan.blockers.append(f"target type {service}: jobsched has no built-in handler for it")
    return None


def _universal_target(
    arn: str, target: dict[str, Any], plan: PlannedImport
) -> tuple[str, dict[str, Any]] | None:
    """A universal target (``arn:aws:scheduler:::aws-sdk:SERVICE:apiAction``) as ``aws_sdk``, with
    the schedule's Input as the request (issue 38)."""
    from jobsched.targets.universal import boto3_service, iam_action, parse_universal_arn

    try:
        service, action = parse_universal_arn(arn)
    except ValueError as exc:
        plan.blockers.append(str(exc))
        return None
    request = _input(target, plan)
    if not isinstance(request, dict):
        plan.blockers.append(
            f"universal target {service}:{action}: its Input (the request) must be a JSON object"
        )
        return None
    allowed = iam_action(boto3_service(service), action[:1].upper() + action[1:])
    plan.notes.append(f"AWS API call: list {allowed} in the stack's AllowedSdkActions (the worker's grant)")
    return "aws_sdk", {"target_arn": arn, "input": request}


def _sns_target(arn: str, target: dict[str, Any], plan: PlannedImport) -> tuple[str, dict[str, Any]]:
    """An SNS topic (EventBridge's templated Publish target) as ``sns_publish``."""
    plan.notes.append("SNS target: list the topic in the stack's AllowedTopicArns")
    payload: dict[str, Any] = {"topic_arn": arn, "message": target.get("Input") or ""}
    return "sns_publish", payload


def _kinesis_target(arn: str, target: dict[str, Any], plan: PlannedImport) -> tuple[str, dict[str, Any]]:
    """A Kinesis stream (EventBridge's templated PutRecord target) as ``kinesis_put_record``,
    with KinesisParameters.PartitionKey."""
    plan.notes.append("Kinesis target: list the stream in the stack's AllowedStreamArns")
    payload: dict[str, Any] = {"stream_arn": arn, "data": target.get("Input") or ""}
    key = (target.get("KinesisParameters") or {}).get("PartitionKey")
    if key:
        payload["partition_key"] = key
    return "kinesis_put_record", payload


def _eventbridge_target(
    arn: str, target: dict[str, Any], plan: PlannedImport
) -> tuple[str, dict[str, Any]] | None:
    detail = _input(target, plan)
    if not isinstance(detail, dict):
        plan.blockers.append("EventBridge target: its Input (the event's detail) must be a JSON object")
        return None
    parameters = target.get("EventBridgeParameters", {})
    payload = {"event_bus": arn, "detail": detail}
    if "DetailType" in parameters:
        payload["detail_type"] = parameters["DetailType"]
    if "Source" in parameters:
        payload["source"] = parameters["Source"]
    plan.notes.append("EventBridge target: the detail gains an idempotency_key field")
    return "eventbridge_put", payload


def _ecs_target(arn: str, target: dict[str, Any], plan: PlannedImport) -> tuple[str, dict[str, Any]] | None:
    parameters = dict(target.get("EcsParameters", {}))
    definition = parameters.pop("TaskDefinitionArn", None)
    if not definition:
        plan.blockers.append("ECS target without EcsParameters.TaskDefinitionArn")
        return None
    run_task = _lower_first(parameters)
    if "tags" in run_task:  # Scheduler: [{key: value}]; RunTask: [{key, value}]
        run_task["tags"] = [{"key": k, "value": v} for tag in parameters["Tags"] for k, v in tag.items()]
    if target.get("Input"):
        plan.notes.append("ECS target: Input is not passed (set overrides in the job's run_task)")
    return "ecs_run_task", {"cluster": arn, "task_definition": definition, "run_task": run_task}


def _retry(target: dict[str, Any], plan: PlannedImport) -> dict[str, int]:
    policy = target.get("RetryPolicy") or {}
    retries = int(policy.get("MaximumRetryAttempts", 185))  # EventBridge Scheduler's default
    attempts = retries + 1
    if attempts > MAX_ATTEMPTS:
        plan.notes.append(f"MaximumRetryAttempts {retries}: jobsched makes at most {MAX_ATTEMPTS} attempts")
        attempts = MAX_ATTEMPTS
    return {"max_attempts": attempts}


def _max_event_age(target: dict[str, Any]) -> int | None:
    """``RetryPolicy.MaximumEventAgeInSeconds`` (60-86,400, as ``max_event_age_seconds``'s own
    bounds) as the job's ``max_event_age_seconds``; EventBridge's default, 86,400, too."""
    age = (target.get("RetryPolicy") or {}).get("MaximumEventAgeInSeconds")
    return int(age) if age is not None else None


def _dead_letter(target: dict[str, Any], plan: PlannedImport) -> str | None:
    """``DeadLetterConfig.Arn`` (an SQS queue) as the job's ``dead_letter_queue_arn``."""
    arn = (target.get("DeadLetterConfig") or {}).get("Arn")
    if not arn:
        return None
    plan.notes.append(
        f"DeadLetterConfig {arn}: dead_letter_queue_arn; list the queue in the stack's "
        "AllowedDeadLetterQueueArns. The message is jobsched's ({job_id, run_id, scheduled_at, "
        "failed_at, attempts, error}), not EventBridge's"
    )
    return str(arn)


def _action_after_completion(schedule: dict[str, Any], plan: PlannedImport) -> str:
    """``ActionAfterCompletion`` (``NONE``, the default, or ``DELETE``) as the job's
    ``action_after_completion``. EventBridge deletes a recurring schedule only when it has an
    ``EndDate``; a job without ``end`` (and without ``max_runs``, which no schedule has) never
    completes either, so both keep it: said in a note, as the difference a person may not expect
    is the time of the delete, not whether."""
    action = str(schedule.get("ActionAfterCompletion") or "NONE").upper()
    if action != "DELETE":
        return "none"
    one_time = str(schedule.get("ScheduleExpression", "")).startswith("at(")
    if not one_time and schedule.get("EndDate") is None:
        plan.notes.append(
            "ActionAfterCompletion DELETE without an EndDate: never applies (as in EventBridge): "
            "a recurring job without end never completes"
        )
    plan.notes.append(
        "ActionAfterCompletion DELETE: action_after_completion delete; the job item is deleted "
        "by the miss detector's reconcile pass once its last run has ended (within a pass, not at once)"
    )
    return "delete"


def plan_schedule(schedule: dict[str, Any]) -> PlannedImport:
    group = str(schedule.get("GroupName") or DEFAULT_GROUP)
    name = str(schedule.get("Name", "?"))
    plan = PlannedImport(f"{group}/{name}")
    target = dict(schedule.get("Target") or {})
    mapped = _target(target, plan)
    window = schedule.get("FlexibleTimeWindow") or {"Mode": "OFF"}
    if window.get("Mode") == "FLEXIBLE":
        plan.notes.append(
            f"FlexibleTimeWindow FLEXIBLE ({window.get('MaximumWindowInMinutes')} min): not supported "
            "yet; each occurrence runs at its instant, the window's start"
        )
    dead_letter = _dead_letter(target, plan)
    if target.get("RoleArn"):
        plan.notes.append(
            "RoleArn is not used: the worker's role calls the target; list it in the stack's "
            "allow-list parameter for this target type"
        )
    action = _action_after_completion(schedule, plan)
    if schedule.get("KmsKeyArn"):
        plan.notes.append("KmsKeyArn: not used; the jobs table is encrypted with its own key")
    if mapped is None:
        return plan
    handler, payload = mapped
    item: dict[str, Any] = {
        "job_id": job_id_for(group, name),
        "schedule": schedule.get("ScheduleExpression"),
        "timezone": schedule.get("ScheduleExpressionTimezone") or "UTC",
        "target": handler,
        "payload": payload,
        "retry": _retry(target, plan),
        # EventBridge Scheduler starts each invocation whether the last one finished or not.
        "overlap": OverlapPolicy.ALLOW.value,
        "enabled": schedule.get("State", "ENABLED") != "DISABLED",
        "description": str(schedule.get("Description") or ""),
        "action_after_completion": action,
    }
    for name_, value in (
        ("max_event_age_seconds", _max_event_age(target)),
        ("dead_letter_queue_arn", dead_letter),
    ):
        if value is not None:
            item[name_] = value
    one_time = str(schedule.get("ScheduleExpression", "")).startswith("at(")
    for source, name_ in (("StartDate", "start"), ("EndDate", "end")):
        if schedule.get(source) is None:
            continue
        if one_time and source == "StartDate":  # EventBridge ignores it for at(...); so does the job
            plan.notes.append("StartDate is ignored for a one-time at(...) schedule, as EventBridge does")
            continue
        item[name_] = _instant(schedule[source])
    try:
        plan.job = JobDefinition.from_item(item)  # the registrar's own checks, the schedule's too
    except InvalidJob as exc:
        plan.blockers += [f"not a valid job: {reason}" for reason in exc.reasons]
    return plan
