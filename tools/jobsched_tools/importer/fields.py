"""One mapper per get-schedule field (``FIELD_MAPPERS``): each reads its field(s), writes its part
of the job item and adds notes; ``plan_schedule`` (importer/eventbridge.py) runs them all."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jobsched.core.job import MAX_JITTER_SECONDS

from jobsched_tools.importer.names import DEFAULT_GROUP, eventbridge_name, group_for, job_id_for
from jobsched_tools.importer.plan import PlannedImport, Refused
from jobsched_tools.importer.targets import target_for
from jobsched_tools.importer.values import instant, mapping, whole_number

# jobsched's own bound on attempts (RetryPolicy.max_attempts); EventBridge retries up to 185 times.
MAX_ATTEMPTS = 20


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
        item[name] = instant(schedule[source], source)


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
    window = mapping(schedule.get("FlexibleTimeWindow"), "FlexibleTimeWindow")
    mode = window.get("Mode", "OFF")
    if mode == "OFF":
        return
    if mode != "FLEXIBLE":
        raise Refused(f"FlexibleTimeWindow.Mode {mode!r:.80}: expected OFF or FLEXIBLE")
    if window.get("MaximumWindowInMinutes") is None:
        raise Refused("FlexibleTimeWindow FLEXIBLE without MaximumWindowInMinutes (EventBridge requires it)")
    minutes = whole_number(
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
    target = mapping(schedule.get("Target"), "Target")
    item["target"], item["payload"] = target_for(target, plan)
    if target.get("RoleArn"):
        plan.notes.append(
            "RoleArn is not used: the worker's role calls the target; list it in the stack's "
            "allow-list parameter for this target type"
        )


def map_retry_policy(schedule: dict[str, Any], item: dict[str, Any], plan: PlannedImport) -> None:
    """``Target.RetryPolicy.MaximumRetryAttempts`` (0-185, 185 by default): ``retry.max_attempts``
    is the retries plus one, at most ``MAX_ATTEMPTS``."""
    target = mapping(schedule.get("Target"), "Target")
    policy = mapping(target.get("RetryPolicy"), "Target.RetryPolicy")
    retries = whole_number(
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
    policy = mapping(mapping(schedule.get("Target"), "Target").get("RetryPolicy"), "Target.RetryPolicy")
    if policy.get("MaximumEventAgeInSeconds") is not None:
        item["max_event_age_seconds"] = whole_number(
            policy["MaximumEventAgeInSeconds"], "Target.RetryPolicy.MaximumEventAgeInSeconds", 60, 86_400
        )


def map_dead_letter(schedule: dict[str, Any], item: dict[str, Any], plan: PlannedImport) -> None:
    """``Target.DeadLetterConfig.Arn`` (an SQS queue) as the job's ``dead_letter_queue_arn`` (issue 38)."""
    target = mapping(schedule.get("Target"), "Target")
    arn = mapping(target.get("DeadLetterConfig"), "Target.DeadLetterConfig").get("Arn")
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
