"""The IAM contract: every AWS call each function makes is allowed by the role template.yaml gives
it (issue 27). moto checks no IAM, so without this a missing grant passes every test and fails
the first deploy.

The calls are recorded (jobsched_tools.iam.policy.CallRecorder) while the four Lambda entry points
(functions/*/app.py, and the worker's runtime wiring for a buffer_one promotion) run
representative scenarios on in-process moto: registrations, a pause, a resume, a re-time that
settles, a delete and an invalid job through the registrar; a fan-out tick and a group tick of the
trigger; the worker committing a staged effect, sending to an allowed queue, starting a Step
Functions execution and an ECS task (passing its role), scheduling a retry and promoting a
buffered run, each terminal outcome put on the outcome bus; the miss detector recovering a dead
worker's lease, catching up overdue jobs, deleting a job after its completion, sending a dead
letter and registering a job the stack's allow-list refused until the stack listed it; a claim of the
trigger and one of the registrar that lose a race (the run read back, the state read again); the
promotion of a buffered run whose job changed meanwhile (its definition read from its snapshot).
The calls AWS makes with a role on its behalf are declared: the event source mappings' polling,
from the Lambda documentation, and the services' use of a customer-managed key, derived from the
recorded calls that reach an encrypted queue, table or bus (policy.key_calls). The template is
transformed offline by aws-sam-translator and each role's statements resolved for a fake account
and stack.

Every grant must be used by some recorded call (least privilege: issue 35 item 12), and the
mutation test takes each grant away in turn and checks that a recorded call is then denied, so the
contract can fail both ways.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import os
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from boto3.dynamodb.types import TypeSerializer
from jobsched.core.clock import ManualClock
from jobsched.core.writes import not_exists
from jobsched.services.messages import parse_run_message
from jobsched.services.worker import Outcome, Started
from jobsched.targets.registry import RunContext
from jobsched_tools.emulator.credentials import DUMMY_AWS_ENV
from jobsched_tools.emulator.provision import FUNCTION_IDS, load_template, provision
from jobsched_tools.iam.policy import (
    Call,
    CallRecorder,
    Grant,
    Stack,
    denied,
    evaluate,
    grants,
    key_calls,
    role_statements,
    transform,
    unused,
    without,
)
from lambda_apps import NOW, ROOT, FakeContext, event, load_app
from moto import mock_aws
from moto_patches import fast_transactions

FUNCTIONS = FUNCTION_IDS
ACCOUNT, REGION, STACK_NAME, PREFIX = "123456789012", "us-east-1", "jobsched", "iam"
EFFECTS = f"{PREFIX}-effects"  # a handler's own table, for staged effects
TARGET_QUEUE = f"{PREFIX}-target"  # a queue the built-in sqs_send may send to
STREAM_LABEL = "2026-12-04T00:00:00.000"
MINUTE = 60_000


def table_arn(name: str) -> str:
    return f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{name}"


def queue_arn(name: str) -> str:
    return f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}"


STATE_MACHINE = f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:{PREFIX}-report"
TASK_DEFINITIONS = f"arn:aws:ecs:{REGION}:{ACCOUNT}:task-definition/{PREFIX}-report:*"
TASK_ROLE = f"arn:aws:iam::{ACCOUNT}:role/{PREFIX}-task"
OUTCOME_BUS = f"{PREFIX}-outcomes"
# Issue 38: any API (aws_sdk), SNS, Kinesis, and a job's own dead-letter queue.
SDK_ACTION = "ec2:StopInstances"
TOPIC = f"arn:aws:sns:{REGION}:{ACCOUNT}:{PREFIX}-topic"
STREAM = f"arn:aws:kinesis:{REGION}:{ACCOUNT}:stream/{PREFIX}-stream"
JOB_DLQ = f"{PREFIX}-job-failures"
# A customer-managed key that encrypts the target queue, the staged-effect table and the outcome bus.
TARGET_KEY = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab"

# The stack's parameters as the scenarios configure the functions: each list non-empty, so that
# its conditional grant exists and is checked.
PARAMETERS = {
    "StagedEffectTableArns": table_arn(EFFECTS),
    "AllowedTargetQueueArns": queue_arn(TARGET_QUEUE),
    "AllowedStateMachineArns": STATE_MACHINE,
    "AllowedTaskDefinitionArns": TASK_DEFINITIONS,
    "AllowedTaskRoleArns": TASK_ROLE,
    "OutcomeEventBusName": OUTCOME_BUS,
    "AllowedSdkActions": SDK_ACTION,
    "AllowedTopicArns": TOPIC,
    "AllowedStreamArns": STREAM,
    "AllowedDeadLetterQueueArns": queue_arn(JOB_DLQ),
    "TargetKmsKeyArns": TARGET_KEY,
}
DETECTOR_ALIAS = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{STACK_NAME}-MissDetectorFunction:live"


def contract_stack(template: dict[str, Any], shape: str = "successor") -> Stack:
    """The stack as the scenarios' resources: provision() names them ``<prefix>-<suffix>``; its
    tables indexed for ``shape`` (template.yaml's ClaimShape)."""
    resources: dict[str, dict[str, str]] = {}
    for logical_id, suffix in (("JobsTable", "jobs"), ("StateTable", "state"), ("RunsTable", "runs")):
        name = f"{PREFIX}-{suffix}"
        resources[logical_id] = {"Ref": name, "Arn": table_arn(name)}
    resources["JobsTable"]["StreamArn"] = f"{table_arn(PREFIX + '-jobs')}/stream/{STREAM_LABEL}"
    resources["RunsTable"]["StreamArn"] = f"{table_arn(PREFIX + '-runs')}/stream/{STREAM_LABEL}"
    queues = (
        ("WorkQueue", "work"),
        ("WorkDeadLetterQueue", "dlq"),
        ("RegistrarFailureQueue", "registrar-failures"),
    )
    for logical_id, suffix in (*queues, ("OutcomeFailureQueue", "outcome-failures")):
        name = f"{PREFIX}-{suffix}"
        url = f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{name}"
        resources[logical_id] = {"Ref": url, "Arn": queue_arn(name), "QueueName": name}
    resources["MissDetectorFunctionAliaslive"] = {"Ref": DETECTOR_ALIAS}  # SAM's AutoPublishAlias
    parameters = {**PARAMETERS, "ClaimShape": shape}
    return Stack(template, parameters, resources, ACCOUNT, REGION, "aws", STACK_NAME)


# The stack as deployed before the successor claim (ClaimShape legacy: next-run and lease, today's
# claim) and as a new stack deploys it (successor: due only, every job claimed from its head).
# migrating grants the union of the two (each grant an Fn::If of an index's presence), which
# test_migrating_grants_what_either_shape_needs holds it to: its functions make either shape's calls.
SHAPES = ("legacy", "successor")
TEMPLATE = load_template()
STACKS = {shape: contract_stack(TEMPLATE, shape) for shape in (*SHAPES, "migrating")}
STACK = STACKS["successor"]  # the resources' names and ARNs, the same under every shape
# The trigger's own alias, named by the stack's id (template.yaml, TriggerFunction's FunctionName).
TRIGGER_ALIAS = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:jobsched-trigger-{STACK.uuid}:live"
# One transform (seconds): SAM passes the roles' Fn::If through, and each shape's Stack resolves them.
TRANSFORMED = transform(TEMPLATE, PARAMETERS, REGION)
STATEMENTS = {
    shape: {function: role_statements(TRANSFORMED, function, stack) for function in FUNCTIONS}
    for shape, stack in STACKS.items()
}
GRANTS = [
    (shape, grant)
    for shape in SHAPES
    for function in FUNCTIONS
    for grant in grants(function, STATEMENTS[shape][function])
]

# What AWS calls with a function's role on its behalf, which no code here makes. Lambda polls the
# work queue with the worker's role (ReceiveMessage, DeleteMessage, GetQueueAttributes: AWS's
# AWSLambdaSQSQueueExecutionRole) and reads the jobs stream with the registrar's (DescribeStream,
# GetRecords, GetShardIterator, ListStreams: AWSLambdaDynamoDBExecutionRole; ListStreams has no
# resource-level permissions, so it is requested on "*"), and sends a failed batch's record to the
# on-failure queue with it (SendMessage).
# https://docs.aws.amazon.com/aws-managed-policy/latest/reference/AWSLambdaSQSQueueExecutionRole.html,
# https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/iam-policy-example-lamda-process-dynamodb-streams.html,
# https://docs.aws.amazon.com/aws-managed-policy/latest/reference/AWSLambdaDynamoDBExecutionRole.html
MAPPING_CALLS = [
    ("WorkerFunction", "sqs:ReceiveMessage", STACK.attribute("WorkQueue", "Arn")),
    ("WorkerFunction", "sqs:DeleteMessage", STACK.attribute("WorkQueue", "Arn")),
    ("WorkerFunction", "sqs:GetQueueAttributes", STACK.attribute("WorkQueue", "Arn")),
    ("RegistrarFunction", "dynamodb:DescribeStream", STACK.attribute("JobsTable", "StreamArn")),
    ("RegistrarFunction", "dynamodb:GetRecords", STACK.attribute("JobsTable", "StreamArn")),
    ("RegistrarFunction", "dynamodb:GetShardIterator", STACK.attribute("JobsTable", "StreamArn")),
    ("RegistrarFunction", "dynamodb:ListStreams", "*"),
    ("RegistrarFunction", "sqs:SendMessage", STACK.attribute("RegistrarFailureQueue", "Arn")),
    # The outcome publisher's mapping reads the runs stream the same way, and describes records
    # that expired unpublished on its own failure queue.
    ("OutcomePublisherFunction", "dynamodb:DescribeStream", STACK.attribute("RunsTable", "StreamArn")),
    ("OutcomePublisherFunction", "dynamodb:GetRecords", STACK.attribute("RunsTable", "StreamArn")),
    ("OutcomePublisherFunction", "dynamodb:GetShardIterator", STACK.attribute("RunsTable", "StreamArn")),
    ("OutcomePublisherFunction", "dynamodb:ListStreams", "*"),
    ("OutcomePublisherFunction", "sqs:SendMessage", STACK.attribute("OutcomeFailureQueue", "Arn")),
]

# The resources a customer-managed key encrypts (issue 35 item 9; the job's dead-letter queue:
# issue 38's edge): what SQS, DynamoDB and EventBridge then ask of KMS with the caller's
# credentials is derived from the recorded calls that reach them (policy.key_calls, which cites
# each service's page), so every function that sends to such a queue, the miss detector's
# dead-letter sends too, is checked for the key.
ENCRYPTED = {
    queue_arn(TARGET_QUEUE): TARGET_KEY,
    queue_arn(JOB_DLQ): TARGET_KEY,
    table_arn(EFFECTS): TARGET_KEY,
    f"arn:aws:events:{REGION}:{ACCOUNT}:event-bus/{OUTCOME_BUS}": TARGET_KEY,
}

_serializer = TypeSerializer()


def job_item(job_id: str, target: str, schedule: str = "rate(1 minute)", **fields: Any) -> dict[str, Any]:
    plain = {"job_id": job_id, "schedule": schedule, "target": target, **fields}
    if "payload" in plain:
        plain["payload"] = json.dumps(plain["payload"])
    return {key: _serializer.serialize(value) for key, value in plain.items()}


def stream_record(kind: str, job_id: str, image: dict[str, Any] | None, at_ms: int = NOW) -> dict[str, Any]:
    record: dict[str, Any] = copy.deepcopy(event("registrar_stream.json")["Records"][0])
    record["dynamodb"]["ApproximateCreationDateTime"] = at_ms // 1000  # made when the item was put
    record["eventName"] = kind
    record["eventID"] = uuid.uuid4().hex
    change = record["dynamodb"]
    change["Keys"] = {"job_id": {"S": job_id}}
    change["SequenceNumber"] = str(uuid.uuid4().int)[:21]
    change.pop("OldImage", None)
    if image is None:
        change.pop("NewImage", None)
    else:
        change["NewImage"] = image
    return record


def sqs_record(body: dict[str, Any]) -> dict[str, Any]:
    record: dict[str, Any] = copy.deepcopy(event("worker_sqs_batch.json")["Records"][0])
    record.update(messageId=str(uuid.uuid4()), receiptHandle=uuid.uuid4().hex, body=json.dumps(body))
    return record


class Scenario:
    """The functions' entry points against moto, acting one at a time under the recorder."""

    def __init__(
        self, recorder: CallRecorder, clock: ManualClock, dynamodb: Any, resources: Any, shape: str
    ) -> None:
        self.recorder, self.clock, self.dynamodb, self.resources = recorder, clock, dynamodb, resources
        # Under ClaimShape successor every job claims from its head, one PutItem a claim; today's
        # claim (legacy) is one TransactWriteItems.
        self.successor = shape != "legacy"
        self.claim_operation = "PutItem" if self.successor else "TransactWriteItems"
        self.taken: set[str] = set()

    def advance_to(self, at_ms: int) -> None:
        self.clock.set(max(self.clock.now_ms(), at_ms))

    def registrar(self, *records: dict[str, Any]) -> None:
        with self.recorder.acting("RegistrarFunction"):
            result = load_app("registrar").lambda_handler({"Records": list(records)}, FakeContext("reg"))
        assert result == {"batchItemFailures": []}

    def put_job(self, item: dict[str, Any], kind: str = "INSERT") -> None:
        with self.recorder.outside():  # a person's put, whichever function acts meanwhile
            self.dynamodb.put_item(TableName=self.resources.jobs_table, Item=item)
        self.registrar(stream_record(kind, item["job_id"]["S"], item, self.clock.now_ms()))

    def trigger(self, tick: dict[str, Any]) -> dict[str, Any]:
        with self.recorder.acting("TriggerFunction"):
            summary: dict[str, Any] = load_app("trigger").lambda_handler(tick, FakeContext("tick"))
        return summary

    def sent(self, job_id: str) -> list[dict[str, Any]]:
        """Run messages sent to the work queue for ``job_id`` (delayed ones too: moto would hold
        them in real time), oldest occurrence first, not yet handed to a worker."""
        bodies = []
        for _function, service, operation, params in self.recorder.requests:
            if (service, operation) == ("sqs", "SendMessageBatch") and (
                params["QueueUrl"] == self.resources.work_queue_url
            ):
                bodies += [json.loads(entry["MessageBody"]) for entry in params["Entries"]]
        mine = [b for b in bodies if b["job_id"] == job_id and self._key(b) not in self.taken]
        return sorted(mine, key=lambda b: (b["scheduled_at"], b["version"]))

    @staticmethod
    def _key(body: dict[str, Any]) -> str:
        return f"{body['run_id']}/{body['version']}"

    def take(self, job_id: str) -> dict[str, Any]:
        body = self.sent(job_id)[0]
        self.taken.add(self._key(body))
        return body

    def worker(self, body: dict[str, Any]) -> None:
        self.advance_to(body["scheduled_at"])
        with self.recorder.acting("WorkerFunction"):
            result = load_app("worker").lambda_handler({"Records": [sqs_record(body)]}, FakeContext("work"))
        assert result == {"batchItemFailures": []}

    def job(self, job_id: str) -> dict[str, Any]:
        item: dict[str, Any] = self.dynamodb.get_item(
            TableName=self.resources.jobs_table, Key={"job_id": {"S": job_id}}
        )["Item"]
        return item

    def publish_outcomes(self) -> None:
        """The runs table's stream, read as the publisher's mapping does (moto's records, in
        Lambda's shape), handed to the outcome publisher in batches of 100."""
        from jobsched_tools.local.streams import lambda_stream_record

        streams = boto3.client("dynamodbstreams", region_name=REGION)
        arn = self.dynamodb.describe_table(TableName=self.resources.runs_table)["Table"]["LatestStreamArn"]
        records = []
        for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
            iterator = streams.get_shard_iterator(
                StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
            )["ShardIterator"]
            records += streams.get_records(ShardIterator=iterator, Limit=1000)["Records"]
        published = 0
        for first in range(0, len(records), 100):
            batch = [lambda_stream_record(dict(r), arn, REGION) for r in records[first : first + 100]]
            with self.recorder.acting("OutcomePublisherFunction"):
                result = load_app("outcome_publisher").lambda_handler({"Records": batch}, FakeContext("out"))
            assert result == {"batchItemFailures": []}
            published += 1
        assert published, "no run was written"

    @contextlib.contextmanager
    def racing(self, job_id: str) -> Iterator[list[str]]:
        """Once, just before a claim of ``job_id``, a race makes it lose its condition. Today's
        claim (a TransactWriteItems updating the job's state): another writer moves the state, as
        a racing trigger or registrar would; the claim reads its run back (did its own
        transaction land?), reads the state again and claims again. The successor claim (one
        PutItem of the head's successor, ClaimShape successor): its own put lands first, as a put
        whose answer was lost; the claim reads the successor back, finds it its own and sends.
        Yields the operations it raced (one, once it has)."""
        from botocore.client import BaseClient

        original: Any = BaseClient._make_api_call  # type: ignore[attr-defined]
        raced: list[str] = []
        state_table, runs_table = self.resources.state_table, self.resources.runs_table

        def claims_job(operation: str, params: Any) -> bool:
            if self.successor:
                return (
                    operation == "PutItem"
                    and params["TableName"] == runs_table
                    and params["Item"]["job_id"]["S"] == job_id
                    and "attribute_not_exists" in params.get("ConditionExpression", "")
                )
            updates = [item["Update"] for item in params.get("TransactItems", []) if "Update" in item]
            return operation == "TransactWriteItems" and any(
                u["TableName"] == state_table and u["Key"]["job_id"]["S"] == job_id for u in updates
            )

        def racing_call(client: Any, operation: str, params: Any) -> Any:
            if not raced and claims_job(operation, params):
                raced.append(operation)
                with self.recorder.outside():
                    if self.successor:
                        original(client, operation, params)  # its own put, answer lost
                    else:
                        self.dynamodb.update_item(
                            TableName=state_table,
                            Key={"job_id": {"S": job_id}},
                            UpdateExpression="ADD version :one",
                            ExpressionAttributeValues={":one": {"N": "1"}},
                        )
            return original(client, operation, params)

        BaseClient._make_api_call = racing_call  # type: ignore[attr-defined]
        try:
            yield raced
        finally:
            BaseClient._make_api_call = original  # type: ignore[attr-defined]

    def detector(self) -> dict[str, Any]:
        with self.recorder.acting("MissDetectorFunction"):
            summary: dict[str, Any] = load_app("miss_detector").lambda_handler(
                event("miss_detector_scheduled.json"), FakeContext("detect")
            )
        return summary


def run_scenarios(scenario: Scenario, sqs: Any) -> None:
    from jobsched.runtime import wiring

    ledger_job = job_item("ledger", "iam.ledger")
    scenario.put_job(ledger_job)
    target_url = sqs.get_queue_url(QueueName=TARGET_QUEUE)["QueueUrl"]
    scenario.put_job(job_item("sender", "sqs_send", payload={"queue_url": target_url, "message": {"a": 1}}))
    scenario.put_job(job_item("flaky", "iam.fail", retry={"max_attempts": 3, "backoff_seconds": 1}))
    scenario.put_job(job_item("workflow", "sfn_start_execution", payload={"state_machine": STATE_MACHINE}))
    task_definition = TASK_DEFINITIONS.replace("*", "1")
    container = {
        "launchType": "FARGATE",
        "networkConfiguration": {"awsvpcConfiguration": {"subnets": ["subnet-1"]}},
        "overrides": {"taskRoleArn": TASK_ROLE},
    }
    ecs_payload = {"cluster": f"{PREFIX}-cluster", "task_definition": task_definition, "run_task": container}
    scenario.put_job(job_item("container", "ecs_run_task", payload=ecs_payload))
    # Issue 38: an EC2 instance stopped through aws_sdk, an SNS publish, a Kinesis record; a
    # failure sent to its job's dead-letter queue by the worker, and one by the detector.
    ec2 = boto3.client("ec2", region_name=REGION)
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    instance = ec2.run_instances(ImageId=image, MinCount=1, MaxCount=1)["Instances"][0]["InstanceId"]
    stop = {
        "target_arn": "arn:aws:scheduler:::aws-sdk:ec2:stopInstances",
        "input": {"InstanceIds": [instance]},
    }
    scenario.put_job(job_item("stopper", "aws_sdk", payload=stop))
    scenario.put_job(job_item("notifier", "sns_publish", payload={"topic_arn": TOPIC, "message": "hi"}))
    scenario.put_job(job_item("streamer", "kinesis_put_record", payload={"stream_arn": STREAM, "data": {}}))
    dead_letter = {"dead_letter_queue_arn": queue_arn(JOB_DLQ), "retry": {"max_attempts": 1}}
    scenario.put_job(job_item("lettered", "iam.fail", **dead_letter))
    scenario.put_job(job_item("dies-lettered", "iam.noop", **dead_letter))
    scenario.put_job(job_item("buffered", "iam.noop", overlap="buffer_one", timeout_seconds=300))
    scenario.put_job(job_item("dying", "iam.noop"))
    # pause_on_failure (issue 29): a final failure in the worker, and one in the detector.
    scenario.put_job(job_item("fragile", "iam.fail", pause_on_failure=True, retry={"max_attempts": 1}))
    scenario.put_job(job_item("dies-fragile", "iam.noop", pause_on_failure=True, retry={"max_attempts": 1}))
    # action_after_completion (issue 29): deleted by the detector's reconcile pass once its one
    # run ended (a strongly consistent Query of its runs; the delete beside a check of its state).
    scenario.put_job(job_item("once", "iam.noop", max_runs=1, action_after_completion="delete"))
    changing = job_item("changing", "iam.noop")
    scenario.put_job(changing)
    # A registration whose early claim (Trigger.claim_now) loses a race: it reads its run back
    # (GetItem on the runs table) and the state again, and claims again.
    with scenario.racing("contested-early") as raced:
        scenario.put_job(job_item("contested-early", "iam.noop"))
    assert raced == [scenario.claim_operation] and scenario.sent("contested-early")
    scenario.put_job(job_item("contested", "iam.noop"))
    scenario.put_job(job_item("broken", "iam.noop", schedule="cron(61 * * * ? *)"))  # reported invalid
    # A job whose last run the tick claims (the registrar's early claim takes at most two of its
    # three, due within the lookahead): the successor claim follows the end marker with the
    # finish write on the state (HC5).
    scenario.put_job(job_item("finite", "iam.noop", max_runs=3))
    # A job item changed whose stream record is late: the tick finds the definition changed and
    # applies the registrar's rule inline (today's load_job repair; the successor claim's change).
    scenario.put_job(job_item("drifted", "iam.noop"))
    with scenario.recorder.outside():
        scenario.dynamodb.put_item(
            TableName=scenario.resources.jobs_table,
            Item=job_item("drifted", "iam.noop", schedule="rate(2 minutes)"),
        )

    # The trigger: a scheduled tick (fan-out: it invokes group 1 through its alias) and group 1's.
    scenario.advance_to(NOW + 2 * MINUTE)
    # A tick's claim that loses a race the same way: the run read back, the state read again.
    claimed_early = len(scenario.sent("contested"))
    with scenario.racing("contested") as raced:
        scenario.trigger(event("trigger_scheduled.json"))
        scenario.trigger({"group": 1, "groups": 2})
    assert raced == [scenario.claim_operation] and len(scenario.sent("contested")) > claimed_early

    # The worker: a staged effect, a send to an allowed queue, a failure that schedules a retry.
    for job_id in ("ledger", "sender", "flaky", "fragile", "workflow", "container", "once"):
        scenario.worker(scenario.take(job_id))
    for job_id in ("stopper", "notifier", "streamer", "lettered"):
        scenario.worker(scenario.take(job_id))
    state = ec2.describe_instances(InstanceIds=[instance])["Reservations"][0]["Instances"][0]["State"]
    assert state["Name"] in ("stopping", "stopped")
    dead_letters = sqs.get_queue_url(QueueName=JOB_DLQ)["QueueUrl"]
    (letter,) = sqs.receive_message(QueueUrl=dead_letters).get("Messages", [])
    assert json.loads(letter["Body"])["job_id"] == "lettered"
    # Gone, so that it cannot come back when its visibility timeout (real seconds in moto) ends
    # before the detector's letter below is received.
    sqs.delete_message(QueueUrl=dead_letters, ReceiptHandle=letter["ReceiptHandle"])
    assert scenario.job("fragile")["enabled"] == {"BOOL": False}  # the worker paused it
    effects = scenario.dynamodb.scan(TableName=EFFECTS)["Items"]
    assert len(effects) == 2, effects  # the row and the counter: committed with the run

    # A poison message: a batch item failure whose visibility the worker shortens
    # (ChangeMessageVisibility, so it reaches the DLQ in seconds: issue 27 item 5).
    poison = sqs_record({})
    poison["body"] = "not json"
    with scenario.recorder.acting("WorkerFunction"):
        failed = load_app("worker").lambda_handler({"Records": [poison]}, FakeContext("poison"))
    assert failed == {"batchItemFailures": [{"itemIdentifier": poison["messageId"]}]}

    # A buffer_one promotion, through the worker's wiring: the second run waits behind the first,
    # whose commit promotes it (reading its definition back: Definitions.load).
    first, second = (parse_run_message(scenario.take("buffered")) for _ in range(2))
    assert second.after_run_id == first.run_id
    with scenario.recorder.acting("WorkerFunction"):
        worker = wiring.app().worker("promoter")
        scenario.advance_to(first.scheduled_at)
        started = worker.begin(first, scenario.clock.now_ms() + 15 * MINUTE)
        assert isinstance(started, Started)
        scenario.advance_to(second.scheduled_at)
        assert worker.process(second, scenario.clock.now_ms() + 15 * MINUTE) is Outcome.BUFFERED
        # The job is changed while its second run waits: the promotion sends it with the
        # definition it was claimed under, read from its snapshot in the state table.
        scenario.put_job(
            job_item("buffered", "iam.noop", overlap="buffer_one", timeout_seconds=301), "MODIFY"
        )
        assert worker.finish(started, worker.execute(started)) is Outcome.SUCCEEDED
    assert [b["run_id"] for b in scenario.sent("buffered")][:1] == [second.run_id]  # promoted

    # A worker that dies after its start; the miss detector recovers its lease, and catches up
    # every job left overdue meanwhile.
    dying = parse_run_message(scenario.take("dying"))
    scenario.advance_to(dying.scheduled_at)
    with scenario.recorder.acting("WorkerFunction"):
        assert isinstance(wiring.app().worker("dies").begin(dying, scenario.clock.now_ms() + MINUTE), Started)
    fragile = parse_run_message(scenario.take("dies-fragile"))
    with scenario.recorder.acting("WorkerFunction"):
        assert isinstance(
            wiring.app().worker("dies").begin(fragile, scenario.clock.now_ms() + MINUTE), Started
        )
    lettered = parse_run_message(scenario.take("dies-lettered"))
    with scenario.recorder.acting("WorkerFunction"):
        assert isinstance(
            wiring.app().worker("dies").begin(lettered, scenario.clock.now_ms() + MINUTE), Started
        )
    scenario.advance_to(scenario.clock.now_ms() + 10 * MINUTE)
    detected = scenario.detector()
    assert detected["leases_recovered"] >= 1, detected
    assert detected["jobs_deleted_after_completion"] == 1, detected
    assert "Item" not in scenario.dynamodb.get_item(
        TableName=scenario.resources.jobs_table, Key={"job_id": {"S": "once"}}
    )
    assert scenario.job("dies-fragile")["enabled"] == {"BOOL": False}  # the detector paused it
    (letter,) = sqs.receive_message(QueueUrl=dead_letters).get("Messages", [])  # the detector sent it
    assert json.loads(letter["Body"])["run_id"] == lettered.run_id

    # A job whose stream record is lost: the detector's reconcile pass (a Scan of the jobs table,
    # BatchGetItem of the states, the bookkeeping's update) sees it, then reads it again a minute
    # later (BatchGetItem of the job items) and applies the registrar's rule inline.
    scenario.dynamodb.put_item(TableName=scenario.resources.jobs_table, Item=job_item("lost", "iam.noop"))
    scenario.detector()
    scenario.advance_to(scenario.clock.now_ms() + 2 * MINUTE)
    detected = scenario.detector()
    assert detected["jobs_reconciled"] == 1, detected

    # A job invalid because the stack did not list its dead-letter queue, which the stack lists
    # later: no record comes (the job item is unchanged); the detector's reconcile pass registers
    # it and writes its report on the job item (UpdateItem, as a pause on failure).
    late = queue_arn(f"{PREFIX}-late-dlq")
    scenario.put_job(job_item("late-listed", "iam.noop", dead_letter_queue_arn=late))
    assert scenario.job("late-listed")["status"] == {"S": "invalid"}
    listed = os.environ["ALLOWED_DEAD_LETTER_QUEUE_ARNS"]
    os.environ["ALLOWED_DEAD_LETTER_QUEUE_ARNS"] = f"{listed},{late}"  # the stack updated
    wiring.reset_app()
    try:
        scenario.advance_to(scenario.clock.now_ms() + MINUTE)
        scenario.detector()
    finally:
        os.environ["ALLOWED_DEAD_LETTER_QUEUE_ARNS"] = listed
        wiring.reset_app()
    assert scenario.job("late-listed")["status"] == {"S": "active"}

    # A person's changes through the registrar: a pause, a resume, a re-time of a job left behind
    # (settling the old schedule's occurrences), a delete.
    scenario.put_job(job_item("changing", "iam.noop", enabled=False), "MODIFY")
    scenario.advance_to(scenario.clock.now_ms() + 3 * MINUTE)
    scenario.put_job(changing, "MODIFY")
    scenario.advance_to(scenario.clock.now_ms() + 5 * MINUTE)
    scenario.put_job(job_item("changing", "iam.noop", schedule="rate(2 minutes)"), "MODIFY")
    scenario.dynamodb.delete_item(TableName=scenario.resources.jobs_table, Key={"job_id": {"S": "changing"}})
    scenario.registrar(stream_record("REMOVE", "changing", None, scenario.clock.now_ms()))

    # Every terminal write of all of the above, from the runs stream onto the outcome bus.
    scenario.publish_outcomes()


TEST_HANDLERS = ("iam.ledger", "iam.fail", "iam.noop")


def register_test_handlers() -> None:
    from jobsched.runtime.wiring import registry

    def ledger(ctx: RunContext) -> dict[str, Any]:
        ctx.stage_put(EFFECTS, {"pk": ctx.idempotency_key}, condition=(not_exists("pk", "once"),))
        ctx.stage_update(EFFECTS, {"pk": "count"}, add={"runs": 1})
        return {"staged": 2}

    def fail(_ctx: RunContext) -> None:
        raise RuntimeError("failing on purpose")

    for name, handler in (("iam.ledger", ledger), ("iam.fail", fail), ("iam.noop", lambda _ctx: None)):
        if registry.get(name) is None:
            registry.add(name, handler)


@functools.cache
def recording(shape: str) -> CallRecorder:
    """Every call of the scenarios on a stack whose tables are indexed for ``shape`` (ClaimShape),
    its functions told so (CLAIM_SHAPE), as a deploy makes it. Recorded once per shape."""
    from jobsched.runtime import lambda_context, wiring

    clock = ManualClock(NOW)
    recorder = CallRecorder(ACCOUNT)
    env = {
        **DUMMY_AWS_ENV,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
        "POWERTOOLS_TRACE_DISABLED": "true",
        "POWERTOOLS_METRICS_NAMESPACE": "Jobsched",
        "DETECTOR_SWEEP_SECONDS": "0",
        "WORKER_RECORD_CONCURRENCY": "1",  # in-process moto is not thread-safe
        "SHARD_COUNT": "2",
        "TRIGGER_GROUPS": "2",
        "TRIGGER_FUNCTION_ARN": TRIGGER_ALIAS,
        "DETECTOR_FUNCTION_ARN": DETECTOR_ALIAS,
        "STAGED_EFFECT_TABLE_ARNS": table_arn(EFFECTS),
        "ALLOWED_QUEUE_ARNS": queue_arn(TARGET_QUEUE),
        "ALLOWED_STATE_MACHINE_ARNS": STATE_MACHINE,
        "ALLOWED_TASK_DEFINITION_ARNS": TASK_DEFINITIONS,
        "ALLOWED_TASK_ROLE_ARNS": TASK_ROLE,
        "OUTCOME_EVENT_BUS_NAME": OUTCOME_BUS,
        "ALLOWED_SDK_ACTIONS": SDK_ACTION,
        "ALLOWED_TOPIC_ARNS": TOPIC,
        "ALLOWED_STREAM_ARNS": STREAM,
        "ALLOWED_DEAD_LETTER_QUEUE_ARNS": queue_arn(JOB_DLQ),
        # One claim at a time: moto in process is not thread-safe (../shared/README.md), and a
        # racing write from one claim thread while another iterates a table once failed a claim
        # with "dictionary changed size during iteration". This test checks which calls each
        # function makes, which do not depend on how many jobs are claimed at once.
        "CLAIM_CONCURRENCY": "1",
        "CLAIM_SHAPE": shape,
    }
    with pytest.MonkeyPatch.context() as patch:
        for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_SQS"):
            patch.delenv(name, raising=False)
        for name, value in env.items():
            patch.setenv(name, value)
        patch.setattr(wiring, "SystemClock", lambda: clock)
        patch.setattr(lambda_context, "SystemClock", lambda: clock)
        patch.syspath_prepend(str(ROOT / "layers" / "handlers"))
        # Item-level transaction backups (moto_patches.py): the calls moto answers are the same.
        with fast_transactions(), mock_aws():
            dynamodb = boto3.client("dynamodb", region_name=REGION)
            sqs = boto3.client("sqs", region_name=REGION)
            resources = provision(dynamodb, sqs, prefix=PREFIX, parameters={"ClaimShape": shape})
            dynamodb.create_table(
                TableName=EFFECTS,
                KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                BillingMode="PAY_PER_REQUEST",
            )
            sqs.create_queue(QueueName=TARGET_QUEUE)
            boto3.client("stepfunctions", region_name=REGION).create_state_machine(
                name=STATE_MACHINE.rsplit(":", 1)[1],
                definition=json.dumps({"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}),
                roleArn=f"arn:aws:iam::{ACCOUNT}:role/{PREFIX}-sfn",
            )
            boto3.client("events", region_name=REGION).create_event_bus(Name=OUTCOME_BUS)
            boto3.client("sns", region_name=REGION).create_topic(Name=TOPIC.rsplit(":", 1)[1])
            boto3.client("kinesis", region_name=REGION).create_stream(
                StreamName=STREAM.rsplit("/", 1)[1], ShardCount=1
            )
            sqs.create_queue(QueueName=JOB_DLQ)
            ecs = boto3.client("ecs", region_name=REGION)
            ecs.create_cluster(clusterName=f"{PREFIX}-cluster")
            ecs.register_task_definition(
                family=f"{PREFIX}-report", containerDefinitions=[{"name": "x", "image": "i", "memory": 128}]
            )
            for name, value in (
                ("JOBS_TABLE", resources.jobs_table),
                ("STATE_TABLE", resources.state_table),
                ("RUNS_TABLE", resources.runs_table),
                ("WORK_QUEUE_URL", resources.work_queue_url),
            ):
                patch.setenv(name, value)
            # Build moto's Lambda routes on this thread first (the fan-out invokes from threads;
            # CPython 3.11 can fail building them on two at once).
            with contextlib.suppress(Exception):
                boto3.client("lambda", region_name=REGION).invoke(FunctionName="absent", Payload=b"{}")
            wiring.reset_app()
            register_test_handlers()
            try:
                with recorder.installed():
                    run_scenarios(Scenario(recorder, clock, dynamodb, resources, shape), sqs)
            finally:
                # The runtime's registry outlives this module: later tests list its handlers
                # (jobsched register's "it has: ..."), which must not include these.
                for name in TEST_HANDLERS:
                    wiring.registry._handlers.pop(name, None)
            wiring.reset_app()
    for function, action, resource in MAPPING_CALLS:
        recorder.declare(function, action, resource, "event source mapping")
    for call in key_calls(recorder.calls, ENCRYPTED, REGION):
        recorder.declare(call.function, call.action, call.resource, call.origin, call.context)
    return recorder


@pytest.fixture(scope="module", params=SHAPES)
def shape(request: pytest.FixtureRequest) -> str:
    value: str = request.param
    return value


@pytest.fixture(scope="module")
def recorded(shape: str) -> CallRecorder:
    return recording(shape)


def test_each_function_s_calls_are_recorded(recorded: CallRecorder) -> None:
    lines = []
    for function in FUNCTIONS:
        calls = recorded.distinct(function)
        assert calls, function
        lines.append(f"{function}: {len(calls)} distinct calls")
        lines += [f"  {call.action} on {call.resource} ({call.origin})" for call in calls]
    print("\n".join(lines))
    # What the issue found missing is among them: the worker's read of a job item (a
    # promotion's definition), its staged effects, and the registrar's claim on the runs table.
    worker = {(c.action, c.resource) for c in recorded.distinct("WorkerFunction")}
    assert ("dynamodb:GetItem", STACK.attribute("JobsTable", "Arn")) in worker
    assert ("dynamodb:GetItem", STACK.attribute("StateTable", "Arn")) in worker  # a snapshot
    assert ("sqs:ChangeMessageVisibility", STACK.attribute("WorkQueue", "Arn")) in worker
    assert ("dynamodb:PutItem", table_arn(EFFECTS)) in worker
    assert ("dynamodb:UpdateItem", table_arn(EFFECTS)) in worker
    # The Step Functions and ECS targets: the start, the task, and the role passed to ECS only.
    assert ("states:StartExecution", STATE_MACHINE) in worker
    assert ("ecs:RunTask", TASK_DEFINITIONS.replace("*", "1")) in worker
    passes = [c for c in recorded.distinct("WorkerFunction") if c.action == "iam:PassRole"]
    assert [(c.resource, c.context) for c in passes] == [
        (TASK_ROLE, (("iam:PassedToService", "ecs-tasks.amazonaws.com"),))
    ]
    # Outcome events: put by the publisher alone, from the runs stream.
    bus = f"arn:aws:events:{REGION}:{ACCOUNT}:event-bus/{OUTCOME_BUS}"
    for function in FUNCTIONS:
        puts = ("events:PutEvents", bus) in {(c.action, c.resource) for c in recorded.distinct(function)}
        assert puts is (function == "OutcomePublisherFunction"), function
    # A customer-managed key's use through SQS: by the worker (its targets and dead letters) and
    # by the miss detector, whose dead-letter sends need it as much (issue 38's edge).
    via_sqs = (("kms:ViaService", f"sqs.{REGION}.amazonaws.com"),)
    for function in ("WorkerFunction", "MissDetectorFunction"):
        used = {(c.action, c.resource, c.context) for c in recorded.distinct(function)}
        assert ("kms:GenerateDataKey", TARGET_KEY, via_sqs) in used, function
    registrar = {(c.action, c.resource) for c in recorded.distinct("RegistrarFunction")}
    assert ("dynamodb:PutItem", STACK.attribute("RunsTable", "Arn")) in registrar
    # A claim that lost a race reads its run back, and the trigger reads the state again.
    assert ("dynamodb:GetItem", STACK.attribute("RunsTable", "Arn")) in registrar
    trigger = {(c.action, c.resource) for c in recorded.distinct("TriggerFunction")}
    assert ("dynamodb:GetItem", STACK.attribute("RunsTable", "Arn")) in trigger
    assert ("dynamodb:GetItem", STACK.attribute("StateTable", "Arn")) in trigger


@pytest.mark.parametrize("function", FUNCTIONS)
def test_every_call_is_allowed_by_the_function_s_role(
    recorded: CallRecorder, shape: str, function: str
) -> None:
    calls = recorded.distinct(function)
    statements = STATEMENTS[shape][function]
    refused = denied(calls, statements)
    assert not refused, "not allowed by the role:\n" + "\n".join(map(str, refused))
    conditional = {
        sid
        for call in calls
        for sid in evaluate(statements, call.action, call.resource, call.context).unevaluated
    }
    assert not conditional, f"{function}: conditions this check cannot evaluate: {conditional}"


def test_every_grant_is_used_by_a_recorded_call(recorded: CallRecorder, shape: str) -> None:
    """Least privilege (issue 35 item 12): each grant of each role (an action on a resource) is
    what some scenario's call, or a mapping's declared call, needs. A grant no path uses goes from
    the template; a path the scenarios miss gets a scenario."""
    unused_grants = [
        grant
        for function in FUNCTIONS
        for grant in unused(grants(function, STATEMENTS[shape][function]), recorded.distinct(function))
    ]
    assert unused_grants == [], "grants no recorded call uses:\n" + "\n".join(f"  {g}" for g in unused_grants)


def _grant_id(shaped: tuple[str, Grant]) -> str:
    shape, grant = shaped
    return f"{shape}-{grant.function}-{grant.sid}-{grant.action}-{grant.resource.rsplit(':', 1)[-1]}"


@pytest.mark.parametrize("shaped", GRANTS, ids=_grant_id)
def test_taking_away_a_used_grant_denies_a_recorded_call(shaped: tuple[str, Grant]) -> None:
    shape, grant = shaped
    calls: list[Call] = recording(shape).distinct(grant.function)
    if not any(grant.covers(call) for call in calls):
        pytest.skip(f"no recorded call uses {grant} (test_every_grant_is_used_by_a_recorded_call fails)")
    statements = STATEMENTS[shape][grant.function]
    assert not denied(calls, statements)
    refused = denied(calls, without(statements, grant))
    assert refused, f"{grant} is used, yet every call is still allowed without it (granted twice?)"


def test_migrating_grants_what_either_shape_needs() -> None:
    """ClaimShape migrating runs today's claim until the switch is set and the successor claim
    after: each function's role allows every call either recording made, and each of its grants
    is used by one of them (no grant of neither shape)."""
    for function in FUNCTIONS:
        calls = [*recording("legacy").distinct(function), *recording("successor").distinct(function)]
        statements = STATEMENTS["migrating"][function]
        assert not denied(calls, statements), function
        assert unused(grants(function, statements), calls) == [], function
