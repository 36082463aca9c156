"""Importing EventBridge Scheduler schedules (issue 29, part 8): each get-schedule output in
tests/unit/eventbridge_schedules (written from the GetSchedule response's documented shape,
https://docs.aws.amazon.com/scheduler/latest/APIReference/API_GetSchedule.html) is planned as the
equivalent job, or refused with the reason; what is carried over only approximately is noted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from jobsched_tools.importer.eventbridge import PlannedImport, job_id_for, plan_schedule, read_schedules

FIXTURES = Path(__file__).parent / "eventbridge_schedules"


def plans() -> dict[str, PlannedImport]:
    return {plan.source: plan for plan in map(plan_schedule, read_schedules(FIXTURES))}


def item(plan: PlannedImport) -> dict[str, Any]:
    assert plan.job is not None, plan.blockers
    return plan.job.to_item()


def test_a_directory_holds_each_file_s_schedules_and_a_file_may_hold_a_list() -> None:
    assert sorted(plans()) == [
        "default/bad-cron",
        "default/cleanup",
        "default/heartbeat",
        "default/new-year-greeting",
        "default/nightly-report",
        "default/stop-dev-instances",
        "reports/hourly-rollup",
    ]
    assert len(read_schedules(FIXTURES / "nightly-sqs.json")) == 1


def test_an_sqs_schedule_keeps_its_expression_zone_start_input_and_retries() -> None:
    plan = plans()["default/nightly-report"]
    job = item(plan)
    assert (job["job_id"], job["schedule"], job["timezone"], job["target"]) == (
        "nightly-report",
        "cron(0 3 * * ? *)",
        "Europe/Berlin",
        "sqs_send",
    )
    assert plan.job is not None and plan.job.payload == {
        "queue_url": "https://sqs.eu-central-1.amazonaws.com/123456789012/reports",
        "message": {"report": "daily"},
    }
    assert plan.job.start is not None and plan.job.start.isoformat() == "2026-12-01T00:00:00+00:00"
    assert plan.job.retry.max_attempts == 20  # 185 retries, capped
    assert plan.job.overlap.value == "allow" and plan.job.enabled
    assert plan.job.description == "nightly report request"
    notes = " | ".join(plan.notes)
    assert "jobsched makes at most 20 attempts" in notes
    # Issue 38: the maximum event age and the dead-letter queue are the job's own now.
    assert plan.job.max_event_age_seconds == 86400
    assert plan.job.dead_letter_queue_arn == "arn:aws:sqs:eu-central-1:123456789012:reports-dlq"
    assert "AllowedDeadLetterQueueArns" in notes and "not supported" not in notes
    assert "RoleArn is not used" in notes
    assert not plan.blockers


def test_a_grouped_disabled_flexible_step_functions_schedule() -> None:
    plan = plans()["reports/hourly-rollup"]
    assert plan.job is not None and plan.job.job_id == "reports:hourly-rollup"
    assert (plan.job.target, plan.job.enabled, plan.job.retry.max_attempts) == (
        "sfn_start_execution",
        False,
        3,
    )
    assert plan.job.payload == {
        "state_machine": "arn:aws:states:eu-central-1:123456789012:stateMachine:rollup",
        "input": {"window": "1h"},
    }
    # A 15-minute window: jobsched's longest start window, 10 minutes, said in a note.
    assert plan.job.jitter_seconds == 600
    assert any("FlexibleTimeWindow FLEXIBLE (15 min): jitter_seconds 600" in note for note in plan.notes)


@pytest.mark.parametrize(
    ("action", "schedule", "end", "expected", "note"),
    [
        (None, "rate(1 hour)", None, "none", None),
        ("NONE", "at(2027-01-01T09:00:00)", None, "none", None),
        ("DELETE", "rate(1 hour)", "2027-02-01T00:00:00Z", "delete", None),
        ("DELETE", "rate(1 hour)", None, "delete", "without an EndDate: never applies"),
    ],
)
def test_action_after_completion_is_mapped(
    action: str | None, schedule: str, end: str | None, expected: str, note: str | None
) -> None:
    source: dict[str, Any] = {
        "Name": "s",
        "ScheduleExpression": schedule,
        "Target": {"Arn": "arn:aws:states:eu-central-1:123456789012:stateMachine:rollup"},
    }
    if action is not None:
        source["ActionAfterCompletion"] = action
    if end is not None:
        source["EndDate"] = end
    plan = plan_schedule(source)
    assert plan.job is not None and plan.job.action_after_completion == expected
    assert plan.job.to_item().get("action_after_completion", "none") == expected
    notes = " | ".join(plan.notes)
    assert (note in notes) if note else "without an EndDate" not in notes
    assert "not supported" not in notes


def test_an_ecs_schedule_becomes_run_task_parameters() -> None:
    plan = plans()["default/cleanup"]
    assert plan.job is not None and plan.job.target == "ecs_run_task"
    assert plan.job.payload == {
        "cluster": "arn:aws:ecs:eu-central-1:123456789012:cluster/batch",
        "task_definition": "arn:aws:ecs:eu-central-1:123456789012:task-definition/cleanup:7",
        "run_task": {
            "count": 1,
            "launchType": "FARGATE",
            "platformVersion": "LATEST",
            "networkConfiguration": {
                "awsvpcConfiguration": {
                    "subnets": ["subnet-0abc"],
                    "securityGroups": ["sg-0abc"],
                    "assignPublicIp": "DISABLED",
                }
            },
            "tags": [{"key": "team", "value": "data"}],
        },
    }
    assert plan.job.end is not None and plan.job.timezone == "America/New_York"


def test_a_one_time_lambda_schedule_ignores_its_start_date_as_eventbridge_does() -> None:
    plan = plans()["default/new-year-greeting"]
    assert plan.job is not None and plan.job.schedule == "at(2027-01-01T09:00:00)" and plan.job.start is None
    assert plan.job.retry.max_attempts == 1
    notes = " | ".join(plan.notes)
    assert plan.job.action_after_completion == "delete"  # ActionAfterCompletion DELETE, mapped
    assert "ActionAfterCompletion DELETE: action_after_completion delete" in notes
    assert "without an EndDate" not in notes  # a one-time schedule completes
    assert "StartDate is ignored" in notes
    assert "the function receives {input, idempotency_key, run_id}" in notes


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("default/bad-cron", "not a valid job: schedule: hours 25 is out of range 0-23"),
    ],
)
def test_what_cannot_be_imported_is_refused_with_the_reason(source: str, reason: str) -> None:
    plan = plans()[source]
    assert plan.job is None
    assert any(reason in blocker for blocker in plan.blockers), plan.blockers


def test_a_universal_target_becomes_an_aws_sdk_call_with_its_input_as_the_request() -> None:
    plan = plans()["default/stop-dev-instances"]
    assert plan.job is not None and plan.job.target == "aws_sdk", plan.blockers
    assert plan.job.payload == {
        "target_arn": "arn:aws:scheduler:::aws-sdk:ec2:stopInstances",
        "input": {"InstanceIds": ["i-0abc"]},
    }
    assert plan.job.max_event_age_seconds == 86400
    assert any("list ec2:StopInstances in the stack's AllowedSdkActions" in note for note in plan.notes)


def test_sns_and_kinesis_targets_become_their_built_ins() -> None:
    plan = plans()["default/heartbeat"]
    assert plan.job is not None and plan.job.target == "kinesis_put_record", plan.blockers
    assert plan.job.payload == {
        "stream_arn": "arn:aws:kinesis:eu-central-1:123456789012:stream/beats",
        "data": "",
        "partition_key": "beat",
    }
    sns = plan_schedule(
        {
            "Name": "n",
            "ScheduleExpression": "rate(1 hour)",
            "Target": {"Arn": "arn:aws:sns:eu-central-1:123456789012:t", "Input": "hi"},
        }
    )
    assert sns.job is not None and (sns.job.target, sns.job.payload) == (
        "sns_publish",
        {"topic_arn": "arn:aws:sns:eu-central-1:123456789012:t", "message": "hi"},
    )


def test_a_universal_target_whose_input_is_not_an_object_is_refused() -> None:
    plan = plan_schedule(
        {
            "Name": "n",
            "ScheduleExpression": "rate(1 hour)",
            "Target": {"Arn": "arn:aws:scheduler:::aws-sdk:ec2:stopInstances", "Input": "[1]"},
        }
    )
    assert plan.job is None and any("must be a JSON object" in b for b in plan.blockers)


def test_job_ids_of_grouped_schedules_cannot_collide() -> None:
    assert job_id_for("default", "a") == "a"
    assert job_id_for("g", "a") == "g:a"  # ':' is in no schedule or group name
