"""The trigger's entry point with fan-out events, and the Lambda adapter a fan-out tick invokes
the groups through (on moto's Lambda; its docker-free backend accepts an invocation without
running it)."""

from __future__ import annotations

import contextlib
import io
import json
import zipfile
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from jobsched.adapters.lambda_invoker import LambdaGroupInvoker
from jobsched.core.errors import InvokeError
from lambda_apps import FakeContext, event, load_app
from moto import mock_aws

REGION = "us-east-1"


@pytest.mark.usefixtures("aws")
def test_a_group_event_claims_its_group_and_invokes_nothing() -> None:
    summary = load_app("trigger").lambda_handler(event("trigger_group.json"), FakeContext("group-1"))
    # SHARD_COUNT 8, group 1 of 4: shards 1 and 5.
    assert (summary["group"], summary["groups"], summary["shards"]) == (1, 4, 2)
    assert (summary["groups_invoked"], summary["groups_not_invoked"]) == (0, 0)


@pytest.mark.usefixtures("aws")
def test_the_scheduled_tick_invokes_the_other_groups_through_the_configured_alias(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from jobsched.runtime import wiring

    monkeypatch.setenv("TRIGGER_GROUPS", "3")
    monkeypatch.setenv("TRIGGER_FUNCTION_ARN", f"arn:aws:lambda:{REGION}:123456789012:function:absent:live")
    wiring.reset_app()
    # Build moto's Lambda routes once, on this thread: CPython 3.11 can fail building them on two
    # threads at once ("AST constructor recursion depth mismatch", fixed in 3.12), and the
    # fan-out's invocations run on threads against the in-process moto here.
    with contextlib.suppress(Exception):
        boto3.client("lambda", region_name=REGION).invoke(FunctionName="absent", Payload=b"{}")
    # No such function on moto: both invocations are refused, counted, and group 0 still ticks.
    summary = load_app("trigger").lambda_handler(event("trigger_scheduled.json"), FakeContext("tick-1"))
    assert (summary["group"], summary["groups"], summary["shards"]) == (0, 3, 3)
    assert (summary["groups_invoked"], summary["groups_not_invoked"]) == (0, 2)


@pytest.fixture
def lambda_alias() -> Iterator[tuple[Any, str]]:
    with mock_aws(config={"lambda": {"use_docker": False}}):
        iam = boto3.client("iam", region_name=REGION)
        role = iam.create_role(RoleName="trigger", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        client = boto3.client("lambda", region_name=REGION)
        code = io.BytesIO()
        with zipfile.ZipFile(code, "w") as archive:
            archive.writestr("app.py", "def lambda_handler(event, context):\n    return event\n")
        client.create_function(
            FunctionName="stack-trigger",
            Runtime="python3.12",
            Role=role,
            Handler="app.lambda_handler",
            Code={"ZipFile": code.getvalue()},
        )
        version = client.publish_version(FunctionName="stack-trigger")["Version"]
        alias = client.create_alias(FunctionName="stack-trigger", Name="live", FunctionVersion=version)
        yield client, alias["AliasArn"]


def test_the_invoker_sends_one_asynchronous_invocation_with_the_group_event(
    lambda_alias: tuple[Any, str],
) -> None:
    client, alias_arn = lambda_alias
    sent: list[dict[str, Any]] = []
    client.meta.events.register("before-call.lambda.Invoke", lambda params, **_: sent.append(params))
    LambdaGroupInvoker(client, alias_arn).invoke({"group": 2, "groups": 3})
    assert len(sent) == 1
    assert sent[0]["headers"]["X-Amz-Invocation-Type"] == "Event"
    assert sent[0]["url_path"] == f"/2015-03-31/functions/{alias_arn.replace(':', '%3A')}/invocations"
    assert json.loads(sent[0]["body"]) == {"group": 2, "groups": 3}


def test_a_refused_invocation_raises_invoke_error(lambda_alias: tuple[Any, str]) -> None:
    client, _ = lambda_alias
    from botocore.stub import Stubber

    with Stubber(client) as stub, pytest.raises(InvokeError, match="TooManyRequestsException"):
        stub.add_client_error("invoke", "TooManyRequestsException", http_status_code=429)
        LambdaGroupInvoker(
            client, "arn:aws:lambda:us-east-1:123456789012:function:stack-trigger:live"
        ).invoke({"group": 1, "groups": 2})


def test_the_invoker_needs_the_function_arn() -> None:
    with pytest.raises(ValueError, match="TRIGGER_FUNCTION_ARN"):
        LambdaGroupInvoker(boto3.client("lambda", region_name=REGION), "")
