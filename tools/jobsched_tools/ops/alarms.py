"""The template's CloudWatch alarms, one line each.

``python -m jobsched_tools.ops.alarms`` rewrites the block between the two marker lines of
template.yaml from ``ALARMS``; ``--check`` only reports whether it is current (the template tests
run the same check). Why not ``Fn::ForEach`` (AWS::LanguageExtensions): with SAM CLI 1.170.0,
plain ``sam validate`` rejects it ("All 'Resources' must be Objects") and ``sam build`` crashes
('list' object has no attribute 'get'), although cfn-lint 1.58.0 accepts it. A generated block
keeps the deployed template plain CloudFormation that every tool here reads.

No alarm watches one index: the DynamoDB ones are per table (a write an index throttles counts on
its table). An alarm on a claim index (a ``GlobalSecondaryIndexName`` dimension) would need the
index's presence under ``ClaimShape`` as its condition (capacity.SCALED's ``condition``):
tests/template/test_template_claim_shape.py fails for any resource naming an index its stack lacks.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from jobsched_tools.ops import blocks

BEGIN = "  # BEGIN generated alarms: edit ALARMS in tools/jobsched_tools/ops/alarms.py, then run"
BEGIN_2 = "  # `python -m jobsched_tools.ops.alarms` (the template tests fail while they disagree)."
END = "  # END generated alarms"

SQS, LAMBDA, JOBSCHED, DYNAMODB = "AWS/SQS", "AWS/Lambda", "Jobsched", "AWS/DynamoDB"
BREACHING, NOT_BREACHING = "breaching", "notBreaching"


def queue(logical_id: str) -> tuple[str, str]:
    return ("QueueName", f"!GetAtt {logical_id}.QueueName")


def table(logical_id: str) -> tuple[str, str]:
    return ("TableName", f"!Ref {logical_id}")


def function(logical_id: str) -> tuple[str, str]:
    return ("FunctionName", f"!Ref {logical_id}")


def executed_live_version(logical_id: str) -> tuple[tuple[str, str], ...]:
    """The function's metrics for invocations through its `live` alias that ran the version this
    deployment published (Lambda's Resource and ExecutedVersion dimensions, which it sets for alias
    invocations only: https://docs.aws.amazon.com/lambda/latest/dg/monitoring-metrics-view.html).
    Everything invokes the alias, so between deployments this is all of the function's traffic;
    during a canary or linear shift it is only the new version's, so an old version's error cannot
    roll back a good deployment. The version number is the last field of the version's ARN."""
    return (
        ("Resource", f'!Sub "${{{logical_id}}}:live"'),
        ("ExecutedVersion", f'!Select [7, !Split [":", !Ref {logical_id}.Version]]'),
    )


# The one dimension Powertools EMF metrics carry here: the stack's name (POWERTOOLS_SERVICE_NAME),
# so each stack's alarms read only its own metrics.
SERVICE = ("service", "!Ref AWS::StackName")
OUTCOMES = "HasOutcomeEventBus"
PROVISIONED = "ProvisionedCapacity"


@dataclass(frozen=True)
class Alarm:
    logical_id: str
    description: str
    namespace: str
    metric: str
    dimension: tuple[str, str]
    statistic: str = "Sum"
    threshold: str = "0"
    period: int = 60
    evaluations: int = 1  # consecutive periods that must all breach
    condition: str | None = None  # the template condition its resource exists under
    extra_dimensions: tuple[tuple[str, str], ...] = ()
    comparison: str = "GreaterThanThreshold"
    # Missing data: no datapoint means nothing to count (not breaching), except for an alarm on
    # invocations, where no datapoint is the failure it watches for (breaching).
    missing: str = NOT_BREACHING

    def yaml(self) -> str:
        name, value = self.dimension
        lines = [
            f"  {self.logical_id}:",
            "    Type: AWS::CloudWatch::Alarm",
            *([f"    Condition: {self.condition}"] if self.condition else []),
            "    Properties:",
            f"      AlarmDescription: {self.description} (docs/deploy.md, runbook).",
            f"      Namespace: {self.namespace}",
            f"      MetricName: {self.metric}",
            "      Dimensions:",
            *[
                line
                for name, value in ((name, value), *self.extra_dimensions)
                for line in (f"        - Name: {name}", f"          Value: {value}")
            ],
            f"      Statistic: {self.statistic}",
            f"      Period: {self.period}",
            f"      EvaluationPeriods: {self.evaluations}",
        ]
        if self.evaluations > 1:
            lines.append(f"      DatapointsToAlarm: {self.evaluations}")
        lines += [
            f"      Threshold: {self.threshold}",
            f"      ComparisonOperator: {self.comparison}",
            f"      TreatMissingData: {self.missing}",
            "      AlarmActions: !If [HasAlarmTopic, [!Ref AlarmTopicArn], !Ref AWS::NoValue]",
            "      OKActions: !If [HasAlarmTopic, [!Ref AlarmTopicArn], !Ref AWS::NoValue]",
        ]
        return "\n".join(lines)


# fmt: off
ALARMS = (
    Alarm("DeadLetterQueueAlarm", "Work messages reached the dead-letter queue", SQS, "ApproximateNumberOfMessagesVisible", queue("WorkDeadLetterQueue"), "Maximum"),  # noqa: E501
    Alarm("RegistrarFailureQueueAlarm", "Job stream batches the registrar gave up on", SQS, "ApproximateNumberOfMessagesVisible", queue("RegistrarFailureQueue"), "Maximum"),  # noqa: E501
    Alarm("WorkQueueAgeAlarm", "A work message has waited over 30 minutes, twice the longest SQS delay", SQS, "ApproximateAgeOfOldestMessage", queue("WorkQueue"), "Maximum", "1800", evaluations=3),  # noqa: E501
    Alarm("MissedRunsAlarm", "Occurrences were recorded as missed", JOBSCHED, "MissedRuns", SERVICE),
    Alarm("LeasesRecoveredAlarm", "The miss detector recovered more expired leases than usual", JOBSCHED, "LeasesRecovered", SERVICE, threshold="!Ref RecoveredLeasesAlarmThreshold", period=300),  # noqa: E501
    Alarm("BacklogAlarm", "The trigger has left due occurrences unclaimed for 3 minutes", JOBSCHED, "Backlog", SERVICE, "Maximum", "!Ref BacklogAlarmThreshold", evaluations=3),  # noqa: E501
    Alarm("DispatchFailuresAlarm", "Claimed runs could not be sent to the work queue", JOBSCHED, "DispatchFailures", SERVICE),  # noqa: E501
    Alarm("GroupInvokeFailuresAlarm", "The trigger's fan-out could not invoke its groups for 3 minutes", JOBSCHED, "GroupInvokeFailures", SERVICE, evaluations=3),  # noqa: E501
    Alarm("InvalidJobsAlarm", "A job item was marked invalid", JOBSCHED, "InvalidJobs", SERVICE),
    Alarm("RegistrarIteratorAgeAlarm", "The registrar is over 5 minutes behind the jobs stream", LAMBDA, "IteratorAge", function("RegistrarFunction"), "Maximum", "300000", evaluations=5),  # noqa: E501
    # Asynchronous invocations Lambda dropped without running them: a throttled tick or fan-out
    # group past MaximumEventAgeInSeconds (60), or a failed one (no retries): issue 27 item 11a.
    Alarm("TriggerAsyncEventsDroppedAlarm", "Lambda dropped trigger invocations (ticks or fan-out groups) without running them", LAMBDA, "AsyncEventsDropped", function("TriggerFunction")),  # noqa: E501
    Alarm("MissDetectorAsyncEventsDroppedAlarm", "Lambda dropped miss-detector invocations without running them", LAMBDA, "AsyncEventsDropped", function("MissDetectorFunction")),  # noqa: E501
    # The schedules stopped: a disabled rule, a broken deploy, a throttled account. Each function
    # is invoked every minute (TickRate and DetectorRate are at most 5 minutes), so two 5-minute
    # periods in a row with no invocation, or no datapoint at all, is the failure (issue 35, item 7).
    Alarm("TriggerInvocationsAlarm", "The trigger has not been invoked for 10 minutes (its schedule, a deploy, the account's concurrency)", LAMBDA, "Invocations", function("TriggerFunction"), threshold="1", period=300, evaluations=2, comparison="LessThanThreshold", missing=BREACHING),  # noqa: E501
    Alarm("MissDetectorInvocationsAlarm", "The miss detector has not been invoked for 10 minutes (its schedule, a deploy, the account's concurrency)", LAMBDA, "Invocations", function("MissDetectorFunction"), threshold="1", period=300, evaluations=2, comparison="LessThanThreshold", missing=BREACHING),  # noqa: E501
    # The deployment alarms (each function's DeploymentPreference): the errors of the version the
    # deployment published, invoked through the alias (executed_live_version).
    Alarm("TriggerErrorsAlarm", "The trigger function failed", LAMBDA, "Errors", function("TriggerFunction"), extra_dimensions=executed_live_version("TriggerFunction")),  # noqa: E501
    Alarm("WorkerErrorsAlarm", "The worker function failed a whole invocation", LAMBDA, "Errors", function("WorkerFunction"), extra_dimensions=executed_live_version("WorkerFunction")),  # noqa: E501
    Alarm("MissDetectorErrorsAlarm", "The miss detector function failed", LAMBDA, "Errors", function("MissDetectorFunction"), extra_dimensions=executed_live_version("MissDetectorFunction")),  # noqa: E501
    Alarm("RegistrarErrorsAlarm", "The registrar function failed a stream batch", LAMBDA, "Errors", function("RegistrarFunction"), extra_dimensions=executed_live_version("RegistrarFunction")),  # noqa: E501
    # Outcome events (with an OutcomeEventBusName): late, refused, or expired from the stream.
    Alarm("OutcomePublisherErrorsAlarm", "The outcome publisher function failed a stream batch", LAMBDA, "Errors", function("OutcomePublisherFunction"), condition=OUTCOMES, extra_dimensions=executed_live_version("OutcomePublisherFunction")),  # noqa: E501
    Alarm("OutcomePublisherIteratorAgeAlarm", "Outcome events are over 5 minutes late, the bus is not taking them", LAMBDA, "IteratorAge", function("OutcomePublisherFunction"), "Maximum", "300000", evaluations=5, condition=OUTCOMES),  # noqa: E501
    Alarm("OutcomeEventsRejectedAlarm", "The outcome bus refused an outcome event for its content", JOBSCHED, "OutcomeEventsRejected", SERVICE, condition=OUTCOMES),  # noqa: E501
    # Provisioned capacity (CapacityMode PROVISIONED) short for 5 minutes running: writes throttled
    # (a table's WriteThrottleEvents; a write its index refuses counts on the table too) while auto
    # scaling catches up. The functions back off and recover late (docs/deploy.md, Capacity mode);
    # this says it lasts (issue 37 item 2).
    Alarm("JobsTableWriteThrottleAlarm", "Writes to the jobs table were throttled for 5 minutes running (provisioned capacity short)", DYNAMODB, "WriteThrottleEvents", table("JobsTable"), evaluations=5, condition=PROVISIONED),  # noqa: E501
    Alarm("StateTableWriteThrottleAlarm", "Writes to the state table were throttled for 5 minutes running (provisioned capacity short)", DYNAMODB, "WriteThrottleEvents", table("StateTable"), evaluations=5, condition=PROVISIONED),  # noqa: E501
    Alarm("RunsTableWriteThrottleAlarm", "Writes to the runs table were throttled for 5 minutes running (provisioned capacity short)", DYNAMODB, "WriteThrottleEvents", table("RunsTable"), evaluations=5, condition=PROVISIONED),  # noqa: E501
    Alarm("OutcomeFailureQueueAlarm", "Outcome events expired from the runs stream unpublished", SQS, "ApproximateNumberOfMessagesVisible", queue("OutcomeFailureQueue"), "Maximum", condition=OUTCOMES),  # noqa: E501
)
# fmt: on


def render() -> str:
    return "\n".join([BEGIN, BEGIN_2, "", "\n\n".join(a.yaml() for a in ALARMS), END])


def current(text: str) -> str:
    """The generated block as it stands in ``text`` (the template)."""
    return blocks.current(text, BEGIN, END)


def main(argv: list[str]) -> int:
    return blocks.rewrite(argv, BEGIN, END, render, "alarms", "jobsched_tools.ops.alarms")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
