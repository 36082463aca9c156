"""EventBridge Scheduler schedules as jobsched jobs (``jobsched import``).

Reads schedules as ``aws scheduler get-schedule`` returns them (the GetSchedule response:
https://docs.aws.amazon.com/scheduler/latest/APIReference/API_GetSchedule.html) and plans one job
per schedule, through ``JobDefinition`` (so through the one schedule parser, core/schedule): the
expression and its zone, the start and end dates, the state, the target (by its ARN's service,
onto a built-in handler) and the retry policy. What cannot be carried over is said, per schedule:

- ``blockers``: the schedule is not imported (a target type jobsched has no handler for, an
  expression or name jobsched refuses);
- ``notes``: imported, but it behaves differently in a way a person should know (a flexible time
  window as ``jitter_seconds``, cut to 10 minutes; a dead-letter queue; the maximum event age;
  the role; when a schedule's ``ActionAfterCompletion: DELETE`` takes effect).

Each get-schedule field has its mapper (``FIELD_MAPPERS``); ``plan_schedule`` runs them all, so a
schedule is refused with every reason at once, and never raises: one malformed schedule never
stops an import.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from jobsched.core.job import MAX_JITTER_SECONDS, InvalidJob, JobDefinition, OverlapPolicy, is_job_id

MAX_JOB_ID_CHARS = 128  # core/job/fields.py JOB_ID_PATTERN

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


class Refused(ValueError):
    """A get-schedule field jobsched cannot read: the schedule is not imported, with this reason."""


def read_schedules(path: Path) -> list[dict[str, Any]]:
    """One get-schedule output per file (an object), or a list of them; a directory: each of its
    ``*.json`` files, in name order. Raises on the first file that is not such JSON
    (``load_plans`` refuses it alone instead)."""
    schedules: list[dict[str, Any]] = []
    for file in _files(path):
        for schedule in _documents(file):
            if not isinstance(schedule, dict):
                raise ValueError(
                    f"{file}: expected get-schedule output (a JSON object), got {schedule!r:.80}"
                )
            schedules.append(schedule)
    return schedules


def load_plans(path: Path) -> list[PlannedImport]:
    """Every schedule under ``path`` planned (``plan_schedule``), each on its own: a file that is
    not JSON, or an entry that is not an object, is one refused plan with the reason, and the
    other files and entries are planned as usual. Only a path that cannot be read at all raises
    (``OSError``)."""
    plans: list[PlannedImport] = []
    for file in _files(path):
        try:
            documents = _documents(file)
        except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError is a ValueError
            plans.append(PlannedImport(str(file), blockers=[f"not get-schedule JSON: {exc}"]))
            continue
        for index, schedule in enumerate(documents):
            if isinstance(schedule, dict):
                plans.append(plan_schedule(schedule))
            else:
                where = f"{file}[{index}]" if len(documents) > 1 else str(file)
                plans.append(
                    PlannedImport(
                        where,
                        blockers=[f"expected get-schedule output (a JSON object), got {schedule!r:.80}"],
                    )
                )
    return plans


def refuse_shared_job_ids(plans: list[PlannedImport]) -> list[PlannedImport]:
    """A job id planned for two different schedules in one import (only a 64-bit digest collision
    of ``job_id_for``'s last form could do it) is refused for all but the first, so one job is
    never both. The same schedule listed twice is imported twice: the second is ``unchanged``."""
    first: dict[str, str] = {}
    for plan in plans:
        if plan.job is None:
            continue
        taken = first.setdefault(plan.job.job_id, plan.source)
        if taken != plan.source:
            plan.blockers.append(f"job id {plan.job.job_id} is already {taken}'s in this import")
            plan.job = None
    return plans


def _files(path: Path) -> list[Path]:
    return sorted(path.glob("*.json")) if path.is_dir() else [path]


def _documents(file: Path) -> list[Any]:
    document = json.loads(file.read_text(encoding="utf-8"))
    return document if isinstance(document, list) else [document]


# --- names ----------------------------------------------------------------------------------------
# EventBridge Scheduler's schedule and group names (CreateSchedule's Name and GroupName, and
# CreateScheduleGroup's Name): 1-64 characters of [0-9a-zA-Z-_.], so they may start with "-", "_"
# or "." and a group and a name together reach 129 characters as GROUP:NAME
# (https://docs.aws.amazon.com/scheduler/latest/APIReference/API_CreateSchedule.html,
# https://docs.aws.amazon.com/scheduler/latest/APIReference/API_CreateScheduleGroup.html; the
# same constraints are in botocore's scheduler model). A job id is 1-128 of [A-Za-z0-9_.:-]
# starting with a letter or digit (core/job/fields.py JOB_ID_PATTERN).
EVENTBRIDGE_NAME = re.compile(r"^[0-9a-zA-Z_.-]{1,64}$")
# What marks a job id (or group) that is not the schedule's readable name: "::" is in no readable
# id, as ":" is in no EventBridge name and neither part is empty.
ESCAPE = "eb::"
_DIGEST_HEX = 16


def job_id_for(group: str, name: str) -> str:
    """The job id of the schedule ``name`` in ``group``: deterministic and one-to-one, every pair
    of EventBridge names giving a valid job id of its own.

    - ``NAME`` in the default group, else ``GROUP:NAME`` (readable: no ``::``), when that is a
      valid job id;
    - else, when it is too long (a 64-character group with a 64-character name: 129 characters)
      and starts with a letter or digit: ``GROUPNAME``, the two run together (128 characters, no
      ``:``; a colon-free readable id is a default-group name, at most 64 characters);
    - else ``eb::`` and the readable form (``eb::_nightly``, ``eb::_billing:run``), when that
      fits in 128 characters: the one ``::`` is at the start;
    - else (a group starting with ``-``, ``_`` or ``.`` whose name and group are at least 124
      characters together) ``eb::``, the readable form cut, ``::`` and 16 hex digits of the
      SHA-256 of ``GROUP/NAME``: two ``::``, unique up to a 64-bit digest.

    Raises ``Refused`` for names EventBridge Scheduler does not accept."""
    group, name = eventbridge_name(group, "GroupName"), eventbridge_name(name, "Name")
    readable = name if group == DEFAULT_GROUP else f"{group}:{name}"
    if is_job_id(readable):
        return readable
    if readable[0].isalnum() and group != DEFAULT_GROUP:
        return group + name  # only a 129-character GROUP:NAME reaches here
    if len(ESCAPE) + len(readable) <= MAX_JOB_ID_CHARS:
        return ESCAPE + readable
    digest = hashlib.sha256(f"{group}/{name}".encode()).hexdigest()[:_DIGEST_HEX]
    keep = MAX_JOB_ID_CHARS - len(ESCAPE) - 2 - _DIGEST_HEX
    return f"{ESCAPE}{readable[:keep]}::{digest}"


def eventbridge_name(value: object, what: str) -> str:
    """``value`` when it is a name EventBridge Scheduler accepts, else ``Refused``."""
    if not isinstance(value, str) or not EVENTBRIDGE_NAME.fullmatch(value):
        rule = "1-64 of 0-9 a-z A-Z - _ ."
        raise Refused(f"{what} {value!r:.80} is not an EventBridge Scheduler name ({rule})")
    return value


def group_for(group: str) -> str:
    """The job's ``group``: the schedule group's name, or ``eb::`` and it when it starts with
    ``-``, ``_`` or ``.`` (a jobsched group starts with a letter or digit)."""
    return group if group[:1].isalnum() else ESCAPE + group


def _instant(value: Any, field_name: str) -> str:
    """A get-schedule date: ISO 8601 text (the CLI's output) or epoch seconds (a number)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise Refused(f"{field_name} {value!r:.80}: not a date (ISO 8601 text or epoch seconds)")
    try:
        if isinstance(value, int | float):
            return datetime.fromtimestamp(value, UTC).isoformat()
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except (ValueError, OverflowError, OSError) as exc:
        raise Refused(f"{field_name} {value!r:.80}: not a date jobsched can read ({exc})") from None
    if parsed.tzinfo is None:  # the API's dates are UTC
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.isoformat()


def _mapping(value: Any, field_name: str) -> dict[str, Any]:
    """An object field (``Target``, ``RetryPolicy``, ...); absent or null is empty."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise Refused(f"{field_name} {value!r:.80}: expected an object")
    return value


def _whole_number(value: Any, field_name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise Refused(f"{field_name} {value!r:.80}: expected a whole number {low}-{high}")
    try:
        number = float(value)
    except ValueError:
        raise Refused(f"{field_name} {value!r:.80}: expected a whole number {low}-{high}") from None
    if not number.is_integer() or not low <= number <= high:
        raise Refused(f"{field_name} {value!r:.80}: expected a whole number {low}-{high}")
    return int(number)


def _input(target: dict[str, Any], plan: PlannedImport) -> Any:
    raw = target.get("Input")
    if raw is None:
        return {}
    if not isinstance(raw, str):
        raise Refused(f"Target.Input {raw!r:.80}: expected a string (the JSON text get-schedule returns)")
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


def _target(target: dict[str, Any], plan: PlannedImport) -> tuple[str, dict[str, Any]]:
    """The built-in handler and its payload for a schedule's target (``Refused`` says why not)."""
    arn = target.get("Arn", "")
    parts = arn.split(":", 5) if isinstance(arn, str) else []
    if len(parts) < 6 or parts[0] != "arn":
        raise Refused(f"target {arn!r:.120} is not an ARN")
    partition, service, region, account, resource = parts[1], parts[2], parts[3], parts[4], parts[5]
    if service == "scheduler" and resource.startswith("aws-sdk:"):
        return _universal_target(arn, target, plan)
    if service == "sns":
        return _sns_target(arn, target, plan)
    if service == "kinesis":
        return _kinesis_target(arn, target, plan)
    if service == "sqs":
        if _mapping(target.get("SqsParameters"), "Target.SqsParameters").get("MessageGroupId"):
            raise Refused("SQS FIFO target (MessageGroupId): sqs_send sets no message group")
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
    raise Refused(f"target type {service}: jobsched has no built-in handler for it")


def _universal_target(arn: str, target: dict[str, Any], plan: PlannedImport) -> tuple[str, dict[str, Any]]:
    """A universal target (``arn:aws:scheduler:::aws-sdk:SERVICE:apiAction``) as ``aws_sdk``, with
    the schedule's Input as the request (issue 38)."""
    from jobsched.targets.universal import boto3_service, iam_action, parse_universal_arn

    try:
        service, action = parse_universal_arn(arn)
    except ValueError as exc:
        raise Refused(str(exc)) from None
    request = _input(target, plan)
    if not isinstance(request, dict):
        raise Refused(f"universal target {service}:{action}: its Input (the request) must be a JSON object")
    allowed = iam_action(boto3_service(service), action[:1].upper() + action[1:])
    plan.notes.append(f"AWS API call: list {allowed} in the stack's AllowedSdkActions (the worker's grant)")
    return "aws_sdk", {"target_arn": arn, "input": request}


def _sns_target(arn: str, target: dict[str, Any], plan: PlannedImport) -> tuple[str, dict[str, Any]]:
    """An SNS topic (EventBridge's templated Publish target) as ``sns_publish``."""
    plan.notes.append("SNS target: list the topic in the stack's AllowedTopicArns")
    message = target.get("Input") or ""
    if not isinstance(message, str):
        raise Refused(f"Target.Input {message!r:.80}: expected a string (the JSON text get-schedule returns)")
    return "sns_publish", {"topic_arn": arn, "message": message}


def _kinesis_target(arn: str, target: dict[str, Any], plan: PlannedImport) -> tuple[str, dict[str, Any]]:
    """A Kinesis stream (EventBridge's templated PutRecord target) as ``kinesis_put_record``,
    with KinesisParameters.PartitionKey."""
    plan.notes.append("Kinesis target: list the stream in the stack's AllowedStreamArns")
    data = target.get("Input") or ""
    if not isinstance(data, str):
        raise Refused(f"Target.Input {data!r:.80}: expected a string (the JSON text get-schedule returns)")
    payload: dict[str, Any] = {"stream_arn": arn, "data": data}
    key = _mapping(target.get("KinesisParameters"), "Target.KinesisParameters").get("PartitionKey")
    if key is not None:
        if not isinstance(key, str):
            raise Refused(f"Target.KinesisParameters.PartitionKey {key!r:.80}: expected text")
        payload["partition_key"] = key
    return "kinesis_put_record", payload


def _eventbridge_target(arn: str, target: dict[str, Any], plan: PlannedImport) -> tuple[str, dict[str, Any]]:
    detail = _input(target, plan)
    if not isinstance(detail, dict):
        raise Refused("EventBridge target: its Input (the event's detail) must be a JSON object")
    parameters = _mapping(target.get("EventBridgeParameters"), "Target.EventBridgeParameters")
    payload = {"event_bus": arn, "detail": detail}
    for source, name in (("DetailType", "detail_type"), ("Source", "source")):
        if source in parameters:
            if not isinstance(parameters[source], str):
                what = f"Target.EventBridgeParameters.{source}"
                raise Refused(f"{what} {parameters[source]!r:.80}: expected text")
            payload[name] = parameters[source]
    plan.notes.append("EventBridge target: the detail gains an idempotency_key field")
    return "eventbridge_put", payload


def _ecs_target(arn: str, target: dict[str, Any], plan: PlannedImport) -> tuple[str, dict[str, Any]]:
    parameters = dict(_mapping(target.get("EcsParameters"), "Target.EcsParameters"))
    definition = parameters.pop("TaskDefinitionArn", None)
    if not definition or not isinstance(definition, str):
        raise Refused("ECS target without EcsParameters.TaskDefinitionArn")
    run_task = _lower_first(parameters)
    if "tags" in run_task:  # Scheduler: [{key: value}]; RunTask: [{key, value}]
        tags = parameters["Tags"]
        if not isinstance(tags, list) or not all(isinstance(tag, dict) for tag in tags):
            raise Refused(f"Target.EcsParameters.Tags {tags!r:.80}: expected a list of objects")
        run_task["tags"] = [{"key": k, "value": v} for tag in tags for k, v in tag.items()]
    if target.get("Input"):
        plan.notes.append("ECS target: Input is not passed (set overrides in the job's run_task)")
    return "ecs_run_task", {"cluster": arn, "task_definition": definition, "run_task": run_task}


# --- one mapper per get-schedule field ------------------------------------------------------------
# Each reads its field(s) of the schedule, writes its part of the job item and adds notes; a value
# it cannot read raises ``Refused`` with the reason. ``plan_schedule`` runs every one, so a schedule
# is refused with all its reasons at once, and one schedule's bad value never stops another's.
FieldMapper = Callable[[dict[str, Any], dict[str, Any], PlannedImport], None]


def _text(schedule: dict[str, Any], field_name: str, default: str) -> str:
    value = schedule.get(field_name)
    if value is None:
        return default
    if not isinstance(value, str):
        raise Refused(f"{field_name} {value!r:.80}: expected text")
    return value


def _one_time(schedule: dict[str, Any]) -> bool:
    expression = schedule.get("ScheduleExpression")
    return isinstance(expression, str) and expression.startswith("at(")


def map_names(schedule: dict[str, Any], item: dict[str, Any], plan: PlannedImport) -> None:
    """``Name`` and ``GroupName``: the job id (``job_id_for``) and the job's ``group``, so that
    ``jobsched list --group G`` finds the schedules of group G."""
    found = schedule.get("GroupName")
    group = eventbridge_name(DEFAULT_GROUP if found is None else found, "GroupName")
    item["job_id"] = job_id_for(group, eventbridge_name(schedule.get("Name"), "Name"))
    item["group"] = group_for(group)
    if item["group"] != group:
        plan.notes.append(f"group {group!r} starts with {group[0]!r}: the job's group is {item['group']!r}")


def map_expression(schedule: dict[str, Any], item: dict[str, Any], plan: PlannedImport) -> None:  # noqa: ARG001
    """``ScheduleExpression`` and ``ScheduleExpressionTimezone`` (the schedule parser judges them
    when the job is built)."""
    expression = schedule.get("ScheduleExpression")
    if not isinstance(expression, str):
        raise Refused(f"ScheduleExpression {expression!r:.80}: expected text such as cron(...)")
    item["schedule"] = expression
    item["timezone"] = _text(schedule, "ScheduleExpressionTimezone", "UTC") or "UTC"


def map_dates(schedule: dict[str, Any], item: dict[str, Any], plan: PlannedImport) -> None:
    """``StartDate`` and ``EndDate``; EventBridge ignores ``StartDate`` for ``at(...)``, so does the job."""
    for source, name in (("StartDate", "start"), ("EndDate", "end")):
        if schedule.get(source) is None:
            continue
        if source == "StartDate" and _one_time(schedule):
            plan.notes.append("StartDate is ignored for a one-time at(...) schedule, as EventBridge does")
            continue
        item[name] = _instant(schedule[source], source)


def map_state(schedule: dict[str, Any], item: dict[str, Any], plan: PlannedImport) -> None:  # noqa: ARG001
    state = _text(schedule, "State", "ENABLED")
    if state not in ("ENABLED", "DISABLED"):
        raise Refused(f"State {state!r:.80}: expected ENABLED or DISABLED")
    item["enabled"] = state == "ENABLED"


def map_description(schedule: dict[str, Any], item: dict[str, Any], plan: PlannedImport) -> None:  # noqa: ARG001
    item["description"] = _text(schedule, "Description", "")


# EventBridge invokes the target within MaximumWindowInMinutes (1-1440) after the scheduled time
# (https://docs.aws.amazon.com/scheduler/latest/UserGuide/managing-schedule-flexible-time-windows.html);
# jobsched's start window is jitter_seconds, at most MAX_JITTER_SECONDS.
MAX_WINDOW_MINUTES = 1440


def map_flexible_time_window(schedule: dict[str, Any], item: dict[str, Any], plan: PlannedImport) -> None:
    """``FlexibleTimeWindow``: ``OFF`` (or absent) starts at the instant; ``FLEXIBLE`` up to 10
    minutes is ``jitter_seconds``; a longer window is cut to 10 minutes, with a note (every start
    still lies inside the window EventBridge promised)."""
    window = _mapping(schedule.get("FlexibleTimeWindow"), "FlexibleTimeWindow")
    mode = window.get("Mode", "OFF")
    if mode == "OFF":
        return
    if mode != "FLEXIBLE":
        raise Refused(f"FlexibleTimeWindow.Mode {mode!r:.80}: expected OFF or FLEXIBLE")
    if window.get("MaximumWindowInMinutes") is None:
        raise Refused("FlexibleTimeWindow FLEXIBLE without MaximumWindowInMinutes (EventBridge requires it)")
    minutes = _whole_number(
        window["MaximumWindowInMinutes"], "FlexibleTimeWindow.MaximumWindowInMinutes", 1, MAX_WINDOW_MINUTES
    )
    seconds = minutes * 60
    if seconds > MAX_JITTER_SECONDS:
        plan.notes.append(
            f"FlexibleTimeWindow FLEXIBLE ({minutes} min): jitter_seconds {MAX_JITTER_SECONDS}, "
            f"jobsched's longest start window (runs are spread over {MAX_JITTER_SECONDS // 60} minutes, "
            f"not {minutes}; each still starts inside the schedule's window)"
        )
        seconds = MAX_JITTER_SECONDS
    else:
        plan.notes.append(
            f"FlexibleTimeWindow FLEXIBLE ({minutes} min): jitter_seconds {seconds}; each "
            "occurrence's offset in the window is fixed (a digest of its run id), not drawn anew"
        )
    item["jitter_seconds"] = seconds


def map_target(schedule: dict[str, Any], item: dict[str, Any], plan: PlannedImport) -> None:
    """``Target.Arn`` (and its service's parameters, ``Input``): the built-in handler and payload."""
    target = _mapping(schedule.get("Target"), "Target")
    item["target"], item["payload"] = _target(target, plan)
    if target.get("RoleArn"):
        plan.notes.append(
            "RoleArn is not used: the worker's role calls the target; list it in the stack's "
            "allow-list parameter for this target type"
        )


def map_retry_policy(schedule: dict[str, Any], item: dict[str, Any], plan: PlannedImport) -> None:
    """``Target.RetryPolicy.MaximumRetryAttempts`` (0-185, 185 by default): ``retry.max_attempts``
    is the retries plus one, at most ``MAX_ATTEMPTS``."""
    target = _mapping(schedule.get("Target"), "Target")
    policy = _mapping(target.get("RetryPolicy"), "Target.RetryPolicy")
    retries = _whole_number(
        policy.get("MaximumRetryAttempts", 185), "Target.RetryPolicy.MaximumRetryAttempts", 0, 185
    )
    attempts = retries + 1
    if attempts > MAX_ATTEMPTS:
        plan.notes.append(f"MaximumRetryAttempts {retries}: jobsched makes at most {MAX_ATTEMPTS} attempts")
        attempts = MAX_ATTEMPTS
    item["retry"] = {"max_attempts": attempts}


def map_event_age(schedule: dict[str, Any], item: dict[str, Any], plan: PlannedImport) -> None:  # noqa: ARG001
    """``Target.RetryPolicy.MaximumEventAgeInSeconds`` (60-86,400, ``max_event_age_seconds``'s own
    bounds) as the job's ``max_event_age_seconds`` (issue 38); EventBridge's default, 86,400, too."""
    policy = _mapping(_mapping(schedule.get("Target"), "Target").get("RetryPolicy"), "Target.RetryPolicy")
    if policy.get("MaximumEventAgeInSeconds") is not None:
        item["max_event_age_seconds"] = _whole_number(
            policy["MaximumEventAgeInSeconds"], "Target.RetryPolicy.MaximumEventAgeInSeconds", 60, 86_400
        )


def map_dead_letter(schedule: dict[str, Any], item: dict[str, Any], plan: PlannedImport) -> None:
    """``Target.DeadLetterConfig.Arn`` (an SQS queue) as the job's ``dead_letter_queue_arn`` (issue 38)."""
    target = _mapping(schedule.get("Target"), "Target")
    arn = _mapping(target.get("DeadLetterConfig"), "Target.DeadLetterConfig").get("Arn")
    if not arn:
        return
    if not isinstance(arn, str):
        raise Refused(f"Target.DeadLetterConfig.Arn {arn!r:.80}: expected text")
    item["dead_letter_queue_arn"] = arn
    plan.notes.append(
        f"DeadLetterConfig {arn:.200}: dead_letter_queue_arn; list the queue in the stack's "
        "AllowedDeadLetterQueueArns. The message is jobsched's ({job_id, run_id, scheduled_at, "
        "failed_at, attempts, error}), not EventBridge's"
    )


def map_action_after_completion(schedule: dict[str, Any], item: dict[str, Any], plan: PlannedImport) -> None:
    """``ActionAfterCompletion`` (``NONE``, the default, or ``DELETE``) as the job's
    ``action_after_completion``. EventBridge deletes a recurring schedule only when it has an
    ``EndDate``; a job without ``end`` (and without ``max_runs``, which no schedule has) never
    completes either, so both keep it: said in a note, as the difference a person may not expect
    is the time of the delete, not whether."""
    action = _text(schedule, "ActionAfterCompletion", "NONE").upper() or "NONE"
    if action not in ("NONE", "DELETE"):
        raise Refused(f"ActionAfterCompletion {action!r:.80}: expected NONE or DELETE")
    if action == "NONE":
        item["action_after_completion"] = "none"
        return
    if not _one_time(schedule) and schedule.get("EndDate") is None:
        plan.notes.append(
            "ActionAfterCompletion DELETE without an EndDate: never applies (as in EventBridge): "
            "a recurring job without end never completes"
        )
    plan.notes.append(
        "ActionAfterCompletion DELETE: action_after_completion delete; the job item is deleted "
        "by the miss detector's reconcile pass once its last run has ended (within a pass, not at once)"
    )
    item["action_after_completion"] = "delete"


def map_kms_key(schedule: dict[str, Any], item: dict[str, Any], plan: PlannedImport) -> None:  # noqa: ARG001
    if schedule.get("KmsKeyArn"):
        plan.notes.append("KmsKeyArn: not used; the jobs table is encrypted with its own key")


def map_tags(schedule: dict[str, Any], item: dict[str, Any], plan: PlannedImport) -> None:  # noqa: ARG001
    """``Tags``, where the output has them. GetSchedule returns none (EventBridge Scheduler tags
    schedule groups, not schedules); a ``Tags`` key added to the JSON, as
    ``aws scheduler list-tags-for-resource`` prints it (``[{"Key": k, "Value": v}]``) or as a map,
    becomes the job's ``tags``."""
    tags = schedule.get("Tags")
    if tags is None:
        return
    pairs: list[tuple[Any, Any]]
    if isinstance(tags, dict):
        pairs = list(tags.items())
    elif isinstance(tags, list) and all(isinstance(t, dict) and set(t) == {"Key", "Value"} for t in tags):
        pairs = [(tag["Key"], tag["Value"]) for tag in tags]
    else:
        raise Refused(f'Tags {tags!r:.80}: expected [{{"Key": k, "Value": v}}, ...] or a map')
    if not all(isinstance(key, str) and isinstance(value, str) for key, value in pairs):
        raise Refused(f"Tags {tags!r:.80}: keys and values must be text")
    item["tags"] = dict(pairs)


FIELD_MAPPERS: tuple[FieldMapper, ...] = (
    map_names,
    map_expression,
    map_dates,
    map_state,
    map_description,
    map_flexible_time_window,
    map_target,
    map_retry_policy,
    map_event_age,
    map_dead_letter,
    map_action_after_completion,
    map_kms_key,
    map_tags,
)


def _source(schedule: Any) -> str:
    if not isinstance(schedule, dict):
        return "?"
    group = schedule.get("GroupName")
    return f"{DEFAULT_GROUP if group is None else group!s:.80}/{schedule.get('Name', '?')!s:.80}"


def plan_schedule(schedule: Any) -> PlannedImport:
    """One schedule's job, or the reasons it is not imported: every field's, at once. Never
    raises: whatever the JSON holds, the schedule is planned or refused on its own."""
    plan = PlannedImport(_source(schedule))
    if not isinstance(schedule, dict):
        plan.blockers.append(f"expected get-schedule output (a JSON object), got {schedule!r:.80}")
        return plan
    # EventBridge Scheduler starts each invocation whether the last one finished or not.
    item: dict[str, Any] = {"overlap": OverlapPolicy.ALLOW.value}
    for mapper in FIELD_MAPPERS:
        try:
            mapper(schedule, item, plan)
        except Refused as refused:
            plan.blockers.append(str(refused))
        except Exception as exc:  # a shape no mapper foresaw: this schedule alone is refused
            field_name = mapper.__name__.removeprefix("map_")
            plan.blockers.append(f"{field_name}: cannot read it ({type(exc).__name__}: {exc!s:.200})")
    if plan.blockers:
        return plan
    try:
        plan.job = JobDefinition.from_item(item)  # the registrar's own checks, the schedule's too
    except InvalidJob as exc:
        plan.blockers += [f"not a valid job: {reason}" for reason in exc.reasons]
    return plan
