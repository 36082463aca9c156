"""Issue 38, item 1: any AWS API as a target (``aws_sdk``, as EventBridge Scheduler's universal
targets, ``arn:aws:scheduler:::aws-sdk:SERVICE:apiAction``), ``sns_publish`` and
``kinesis_put_record``, against moto.

What moto does not do is tested against AWS's documentation instead: moto's EC2 does not
deduplicate RunInstances on its ``ClientToken`` (two calls with one token start two instances),
so for EC2 the test checks that the run's idempotency key is the token the call carries, which is
what EC2 deduplicates on ("a client token is a unique, case-sensitive string of up to 64 ASCII
characters ... If you retry a request that completed successfully using the same client token
and the same parameters, the retry succeeds without performing any further actions",
https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-idempotency.html). moto's SNS FIFO topic
and SQS FIFO queue do deduplicate on ``MessageDeduplicationId``, so that retry is tested whole.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from jobsched.runtime.settings import Settings
from jobsched.targets.builtin import NotAllowed, register_builtins
from jobsched.targets.registry import Handler, HandlerRegistry, RunContext
from jobsched.targets.universal import (
    SdkCallRefused,
    fit,
    iam_action,
    parse_universal_arn,
)
from moto import mock_aws
from pydantic import ValidationError

REGION, ACCOUNT = "us-east-1", "123456789012"
KEY = "nightly@2026-12-05T02:00:00Z"


@dataclass
class Allow:
    allowed_sdk_actions: list[str] = field(default_factory=list)
    allowed_topic_arns: list[str] = field(default_factory=list)
    allowed_stream_arns: list[str] = field(default_factory=list)


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "x",
        "AWS_SECRET_ACCESS_KEY": "x",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        yield


class Clients:
    """boto3 clients, counted: a refused call must build none."""

    def __init__(self) -> None:
        self.built: list[str] = []

    def __call__(self, service: str) -> Any:
        self.built.append(service)
        return boto3.client(service, region_name=REGION)


def handler(allow: Any, name: str, clients: Any = None) -> Handler:
    registry = HandlerRegistry()
    register_builtins(registry, allow, clients or Clients())
    found = registry.get(name)
    assert found is not None
    return found


def context(payload: dict[str, Any], key: str = KEY) -> RunContext:
    return RunContext("nightly", key, payload, 0, 1, 1, key, logging.getLogger("t"))


def _instance(ec2: Any) -> str:
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    instance_id: str = ec2.run_instances(ImageId=image, MinCount=1, MaxCount=1)["Instances"][0]["InstanceId"]
    return instance_id


def test_the_universal_target_arn_is_parsed_as_eventbridge_writes_it() -> None:
    assert parse_universal_arn("arn:aws:scheduler:::aws-sdk:ec2:stopInstances") == ("ec2", "stopInstances")
    assert parse_universal_arn("arn:aws-cn:scheduler:::aws-sdk:rds:stopDBCluster") == ("rds", "stopDBCluster")
    with pytest.raises(ValueError, match="not a universal target ARN"):
        parse_universal_arn("arn:aws:sqs:us-east-1:123456789012:q")
    assert iam_action("stepfunctions", "StartExecution") == "states:StartExecution"


@pytest.mark.usefixtures("aws")
def test_aws_sdk_stops_an_instance_with_the_payload_as_the_request() -> None:
    ec2 = boto3.client("ec2", region_name=REGION)
    instance = _instance(ec2)
    stop = handler(Allow(allowed_sdk_actions=["ec2:StopInstances"]), "aws_sdk")
    payload = {
        "target_arn": "arn:aws:scheduler:::aws-sdk:ec2:stopInstances",
        "input": {"InstanceIds": [instance]},
    }
    result = stop(context(payload))
    assert result["operation"] == "ec2:StopInstances"
    state = ec2.describe_instances(InstanceIds=[instance])["Reservations"][0]["Instances"][0]["State"]["Name"]
    assert state in ("stopping", "stopped")
    json.dumps(result)  # the result is plain data (datetimes as text)


@pytest.mark.usefixtures("aws")
def test_an_action_not_on_the_list_is_refused_before_any_client_is_built() -> None:
    clients = Clients()
    call = handler(Allow(allowed_sdk_actions=["ec2:StopInstances"]), "aws_sdk", clients)
    with pytest.raises(SdkCallRefused, match=r"ec2:TerminateInstances is not allowed.*AllowedSdkActions"):
        call(context({"service": "ec2", "action": "terminateInstances", "input": {"InstanceIds": ["i-1"]}}))
    with pytest.raises(SdkCallRefused, match="empty: none is allowed"):
        handler(Allow(), "aws_sdk", clients)(context({"service": "ec2", "action": "stopInstances"}))
    assert clients.built == []


@pytest.mark.usefixtures("aws")
def test_a_wildcard_action_is_refused_by_the_settings_and_matches_nothing() -> None:
    base = {"jobs_table": "jjj", "state_table": "sss", "runs_table": "rrr", "work_queue_url": "q"}
    with pytest.raises(ValidationError, match="without wildcards"):
        Settings.model_validate({**base, "allowed_sdk_actions": "ec2:StopInstances,ec2:*"})
    assert Settings.model_validate(
        {**base, "allowed_sdk_actions": "ec2:StopInstances"}
    ).allowed_sdk_actions == ["ec2:StopInstances"]
    call = handler(Allow(allowed_sdk_actions=["ec2:*"]), "aws_sdk")
    with pytest.raises(SdkCallRefused):
        call(context({"service": "ec2", "action": "stopInstances", "input": {"InstanceIds": ["i-1"]}}))


@pytest.mark.usefixtures("aws")
def test_the_run_s_key_is_ec2_s_client_token_on_every_attempt() -> None:
    ec2 = boto3.client("ec2", region_name=REGION)
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    launch = handler(Allow(allowed_sdk_actions=["ec2:RunInstances"]), "aws_sdk")
    payload = {
        "service": "ec2",
        "action": "runInstances",
        "input": {"ImageId": image, "MinCount": 1, "MaxCount": 1},
    }
    first = launch(context(payload))
    again = launch(context(payload))  # a retried attempt of the same occurrence
    assert first["idempotency_fields"] == again["idempotency_fields"] == ["ClientToken"]
    tokens = [
        instance["ClientToken"]
        for reservation in ec2.describe_instances()["Reservations"]
        for instance in reservation["Instances"]
    ]
    # botocore would put a new random UUID in each call: both carry the occurrence's key instead.
    assert tokens == [KEY, KEY]
    # A token the input sets is the job's own and is kept.
    kept = launch(context({**payload, "input": {**payload["input"], "ClientToken": "mine"}}))
    assert kept["idempotency_fields"] == []


def test_the_template_refuses_a_wildcard_in_the_sdk_action_list() -> None:
    from jobsched_tools.emulator.provision import load_template

    pattern = re.compile(load_template()["Parameters"]["AllowedSdkActions"]["AllowedPattern"])
    assert pattern.fullmatch("ec2:StopInstances") and pattern.fullmatch("")
    for wildcard in ("ec2:*", "*", "ec2:Stop*", "ec2:Stop?nstances"):
        assert not pattern.fullmatch(wildcard), wildcard


def test_a_long_key_is_cut_to_the_token_limit_and_stays_distinct() -> None:
    long_a, long_b = "j@" + "a" * 100 + "1", "j@" + "a" * 100 + "2"
    assert len(fit(long_a, 64)) == 64 and fit(long_a, 64) != fit(long_b, 64)
    assert fit(long_a, 64) == fit(long_a, 64) and fit("short@key", 64) == "short@key"
    assert len(fit(long_a, 10)) == 10


@pytest.mark.usefixtures("aws")
def test_sns_publish_to_a_fifo_topic_is_deduplicated_on_the_run_s_key() -> None:
    sns = boto3.client("sns", region_name=REGION)
    sqs = boto3.client("sqs", region_name=REGION)
    topic = sns.create_topic(Name="jobs.fifo", Attributes={"FifoTopic": "true"})["TopicArn"]
    queue = sqs.create_queue(QueueName="sub.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    sns.subscribe(
        TopicArn=topic, Protocol="sqs", Endpoint=queue_arn, Attributes={"RawMessageDelivery": "true"}
    )
    publish = handler(Allow(allowed_topic_arns=[topic]), "sns_publish")
    payload = {"topic_arn": topic, "message": {"report": "daily"}}
    first = publish(context(payload))
    publish(context(payload))  # a retried attempt: the topic drops it (moto, as SNS FIFO does)
    assert first["deduplication_id"] == KEY
    messages = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10)["Messages"]
    assert [json.loads(m["Body"]) for m in messages] == [{"report": "daily"}]
    with pytest.raises(NotAllowed, match="AllowedTopicArns"):
        handler(Allow(), "sns_publish")(context(payload))


@pytest.mark.usefixtures("aws")
def test_sns_publish_to_a_standard_topic() -> None:
    sns = boto3.client("sns", region_name=REGION)
    topic = sns.create_topic(Name="jobs")["TopicArn"]
    result = handler(Allow(allowed_topic_arns=[topic]), "sns_publish")(
        context({"topic_arn": topic, "message": "plain text", "subject": "nightly"})
    )
    assert result["message_id"] and result["deduplication_id"] is None


@pytest.mark.usefixtures("aws")
def test_kinesis_put_record_carries_the_key() -> None:
    kinesis = boto3.client("kinesis", region_name=REGION)
    kinesis.create_stream(StreamName="events", ShardCount=1)
    stream = kinesis.describe_stream(StreamName="events")["StreamDescription"]["StreamARN"]
    put = handler(Allow(allowed_stream_arns=[stream]), "kinesis_put_record")
    result = put(context({"stream_arn": stream, "data": {"n": 1}}))
    shard = kinesis.list_shards(StreamName="events")["Shards"][0]["ShardId"]
    iterator = kinesis.get_shard_iterator(
        StreamName="events", ShardId=shard, ShardIteratorType="TRIM_HORIZON"
    )
    (record,) = kinesis.get_records(ShardIterator=iterator["ShardIterator"])["Records"]
    assert record["PartitionKey"] == KEY and record["SequenceNumber"] == result["sequence_number"]
    assert json.loads(record["Data"]) == {"n": 1, "idempotency_key": KEY}
    with pytest.raises(NotAllowed, match="AllowedStreamArns"):
        handler(Allow(), "kinesis_put_record")(context({"stream_arn": stream}))
