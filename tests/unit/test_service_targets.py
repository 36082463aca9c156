"""The Step Functions and ECS built-in targets (issue 29, part 6): each call carries the
occurrence's idempotency key in the form the service deduplicates on (the execution name, the
client token), each destination is checked against its allow-list at call time, and a retry of
one occurrence starts one execution.

Step Functions on moto behaves as AWS documents StartExecution for a STANDARD workflow (the same
name and input while the execution is open: success, the same execution; once it is closed:
ExecutionAlreadyExists; not idempotent for EXPRESS), so those tests run against moto. moto's ECS
ignores ``clientToken`` (two RunTask calls with one token start two tasks), so the ECS retry test
runs against a fake written from AWS's documented RunTask idempotency instead; moto checks the
call's shape.
https://docs.aws.amazon.com/step-functions/latest/apireference/API_StartExecution.html
https://docs.aws.amazon.com/AmazonECS/latest/APIReference/ECS_Idempotency.html
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from jobsched.core.run import run_id_for
from jobsched.targets.builtin import (
    CLIENT_TOKEN_MAX,
    EXECUTION_NAME_MAX,
    NotAllowed,
    client_token,
    execution_name,
    register_builtins,
)
from jobsched.targets.registry import Handler, HandlerRegistry, RunContext
from moto import mock_aws

REGION, ACCOUNT = "us-east-1", "123456789012"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/task"
PASS = json.dumps({"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}})
FORBIDDEN = set(' \t\n<>{}[]?*"#%\\^|~`$&,;:/')


@dataclass
class Allow:
    allowed_queue_arns: list[str] = field(default_factory=list)
    allowed_event_bus_arns: list[str] = field(default_factory=list)
    allowed_function_arns: list[str] = field(default_factory=list)
    allowed_state_machine_arns: list[str] = field(default_factory=list)
    allowed_task_definition_arns: list[str] = field(default_factory=list)
    allowed_task_role_arns: list[str] = field(default_factory=list)


def context(payload: dict[str, Any], key: str, attempt: int = 1) -> RunContext:
    return RunContext("job", key, payload, 0, attempt, attempt, key, logging.getLogger("t"))


def handler(allow: Allow, name: str, clients: Any = None) -> Handler:
    registry = HandlerRegistry()
    register_builtins(registry, allow, clients or (lambda service: boto3.client(service, region_name=REGION)))
    found = registry.get(name)
    assert found is not None
    return found


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    env = {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x", "AWS_DEFAULT_REGION": REGION}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        yield


def state_machine(name: str = "report", kind: str = "STANDARD") -> str:
    sfn = boto3.client("stepfunctions", region_name=REGION)
    arn: str = sfn.create_state_machine(
        name=name, definition=PASS, roleArn=f"arn:aws:iam::{ACCOUNT}:role/sfn", type=kind
    )["stateMachineArn"]
    return arn


def executions(machine: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = boto3.client("stepfunctions", region_name=REGION).list_executions(
        stateMachineArn=machine
    )["executions"]
    return found


# --- the names -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [
        run_id_for("nightly-report", 1_796_522_400_000),
        "job@manual:request-1",
        "a" * 128 + "@2026-12-05T02:00:00Z",
        "j.o:b_1@2026-12-05T02:00:00Z",
    ],
)
def test_an_execution_name_and_a_client_token_fit_the_service_s_rules(key: str) -> None:
    name = execution_name(key)
    assert 1 <= len(name) <= EXECUTION_NAME_MAX
    assert not FORBIDDEN & set(name)
    assert all(c.isascii() and (c.isalnum() or c in "-_") for c in name)  # CloudWatch-logging safe
    assert execution_name(key) == name  # the same key, the same name: every attempt
    token = client_token(key)
    assert 1 <= len(token) <= CLIENT_TOKEN_MAX
    assert all(33 <= ord(c) <= 126 for c in token)
    assert client_token(key) == token


def test_keys_that_differ_only_where_a_name_cannot_show_it_get_different_names() -> None:
    assert execution_name("a:b@x") != execution_name("a-b@x")
    assert execution_name("a/b@x") != execution_name("a:b@x")
    long_a, long_b = "j" * 100 + "@1", "j" * 100 + "@2"
    assert execution_name(long_a) != execution_name(long_b)
    assert client_token(long_a) != client_token(long_b)
    assert execution_name("plain-name_1") == "plain-name_1"  # a safe key is its own name
    assert client_token("job@manual:r1") == "job@manual:r1"


# --- Step Functions --------------------------------------------------------------------------


@pytest.mark.usefixtures("aws")
def test_a_retry_of_the_same_occurrence_starts_one_execution() -> None:
    machine = state_machine()
    start = handler(Allow(allowed_state_machine_arns=[machine]), "sfn_start_execution")
    key = run_id_for("report", 1_796_522_400_000)
    payload = {"state_machine": machine, "input": {"b": 2, "a": 1}}
    first = start(context(payload, key, attempt=1))
    again = start(context(payload, key, attempt=2))  # the execution is still open: the same one
    assert first["execution_arn"] == again["execution_arn"]
    assert first["execution_name"] == execution_name(key)
    listed = executions(machine)
    assert [e["name"] for e in listed] == [execution_name(key)]
    described = boto3.client("stepfunctions", region_name=REGION).describe_execution(
        executionArn=first["execution_arn"]
    )
    assert json.loads(described["input"]) == {"a": 1, "b": 2}  # the payload's input, as is


@pytest.mark.usefixtures("aws")
def test_a_retry_after_the_execution_closed_starts_none_and_succeeds() -> None:
    machine = state_machine()
    start = handler(Allow(allowed_state_machine_arns=[machine]), "sfn_start_execution")
    key = run_id_for("report", 1_796_522_400_000)
    first = start(context({"state_machine": machine}, key))
    boto3.client("stepfunctions", region_name=REGION).stop_execution(executionArn=first["execution_arn"])
    retried = start(context({"state_machine": machine}, key, attempt=2))  # ExecutionAlreadyExists
    assert retried == {"execution_name": execution_name(key), "already_started": True}
    assert len(executions(machine)) == 1
    other = start(context({"state_machine": machine}, run_id_for("report", 1_796_608_800_000)))
    assert "execution_arn" in other and len(executions(machine)) == 2  # the next occurrence: its own


@pytest.mark.usefixtures("aws")
def test_an_express_workflow_starts_again_on_a_retry() -> None:
    """Documented, not a guarantee jobsched can give: EXPRESS StartExecution is not idempotent."""
    machine = state_machine("fast", "EXPRESS")
    start = handler(Allow(allowed_state_machine_arns=[machine]), "sfn_start_execution")
    key = run_id_for("fast", 1_796_522_400_000)
    start(context({"state_machine": machine}, key))
    start(context({"state_machine": machine}, key, attempt=2))  # no error: a second execution


@pytest.mark.usefixtures("aws")
def test_a_state_machine_off_the_list_is_refused_before_any_call() -> None:
    machine = state_machine()
    allowed = f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:other-*"
    start = handler(Allow(allowed_state_machine_arns=[allowed]), "sfn_start_execution")
    with pytest.raises(NotAllowed, match="AllowedStateMachineArns"):
        start(context({"state_machine": machine}, "job@x"))
    with pytest.raises(NotAllowed, match="must be an ARN"):
        start(context({"state_machine": "report"}, "job@x"))
    assert executions(machine) == []
    pattern = machine.replace("report", "rep*")
    wildcard = handler(Allow(allowed_state_machine_arns=[pattern]), "sfn_start_execution")
    assert "execution_arn" in wildcard(context({"state_machine": machine}, "job@x"))


# --- ECS -------------------------------------------------------------------------------------


class DocumentedEcs:
    """RunTask as AWS documents its idempotency: a retry with the same client token and the same
    parameters returns the original result and starts nothing; the same token with other
    parameters is a ConflictException."""

    class exceptions:  # boto3's shape
        class ConflictException(Exception):
            pass

    def __init__(self) -> None:
        self.started: list[str] = []
        self.by_token: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}

    def run_task(self, **params: Any) -> dict[str, Any]:
        token = params["clientToken"]
        if token in self.by_token:
            earlier, response = self.by_token[token]
            if earlier != params:
                raise self.exceptions.ConflictException(token)
            return response
        arn = f"arn:aws:ecs:{REGION}:{ACCOUNT}:task/c/{len(self.started) + 1}"
        self.started.append(arn)
        response = {"tasks": [{"taskArn": arn}], "failures": []}
        self.by_token[token] = (params, response)
        return response


TASK_DEF = f"arn:aws:ecs:{REGION}:{ACCOUNT}:task-definition/report:3"
CLUSTER = f"arn:aws:ecs:{REGION}:{ACCOUNT}:cluster/c"


def ecs_allow(**lists: list[str]) -> Allow:
    return Allow(
        allowed_task_definition_arns=lists.get("definitions", [TASK_DEF]),
        allowed_task_role_arns=lists.get("roles", [ROLE]),
    )


def test_a_retry_of_the_same_occurrence_runs_one_task_by_its_client_token() -> None:
    ecs = DocumentedEcs()
    run = handler(ecs_allow(), "ecs_run_task", lambda _service: ecs)
    key = run_id_for("report", 1_796_522_400_000)
    payload = {"cluster": CLUSTER, "task_definition": TASK_DEF, "run_task": {"launchType": "FARGATE"}}
    first = run(context(payload, key))
    again = run(context(payload, key, attempt=2))
    assert first == again == {"task_arns": [ecs.started[0]], "client_token": client_token(key)}
    assert len(ecs.started) == 1
    run(context(payload, run_id_for("report", 1_796_608_800_000)))
    assert len(ecs.started) == 2


@pytest.mark.usefixtures("aws")
def test_run_task_on_moto_passes_the_token_and_the_parameters() -> None:
    ecs = boto3.client("ecs", region_name=REGION)
    ecs.create_cluster(clusterName="c")
    definition = ecs.register_task_definition(
        family="report", containerDefinitions=[{"name": "x", "image": "i", "memory": 128}]
    )["taskDefinition"]["taskDefinitionArn"]
    run = handler(ecs_allow(definitions=[definition.rsplit(":", 1)[0] + ":*"]), "ecs_run_task")
    payload = {
        "cluster": CLUSTER,
        "task_definition": definition,
        "run_task": {
            "launchType": "FARGATE",
            "networkConfiguration": {"awsvpcConfiguration": {"subnets": ["subnet-1"]}},
            "overrides": {"taskRoleArn": ROLE},
        },
    }
    result = run(context(payload, "report@2026-12-05T02:00:00Z"))
    assert len(result["task_arns"]) == 1
    assert result["client_token"] == "report@2026-12-05T02:00:00Z"


def test_run_task_checks_the_definition_and_the_roles_it_passes() -> None:
    ecs = DocumentedEcs()
    run = handler(ecs_allow(), "ecs_run_task", lambda _service: ecs)
    base = {"cluster": CLUSTER, "task_definition": TASK_DEF}
    other_def = {**base, "task_definition": TASK_DEF.replace("report:3", "report:4")}
    with pytest.raises(NotAllowed, match="AllowedTaskDefinitionArns"):
        run(context(other_def, "k"))
    latest = {**base, "task_definition": TASK_DEF.rsplit(":", 1)[0]}  # no revision: the latest
    with pytest.raises(NotAllowed, match="report:\\*"):
        run(context(latest, "k"))
    every_revision = ecs_allow(definitions=[TASK_DEF.rsplit(":", 1)[0] + ":*"])
    any_revision = handler(every_revision, "ecs_run_task", lambda _s: ecs)
    assert any_revision(context(latest, "k1"))["task_arns"]
    admin = f"arn:aws:iam::{ACCOUNT}:role/admin"
    other_role = {**base, "run_task": {"overrides": {"executionRoleArn": admin}}}
    with pytest.raises(NotAllowed, match="AllowedTaskRoleArns"):
        run(context(other_role, "k2"))
    with pytest.raises(ValueError, match="clientToken"):
        run(context({**base, "run_task": {"clientToken": "mine"}}, "k3"))
    assert len(ecs.started) == 1
