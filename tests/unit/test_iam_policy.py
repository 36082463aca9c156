"""jobsched_tools.iam.policy: what one API call needs (actions and ARNs), and IAM's evaluation of
a role's statements for it (the IAM contract test, tests/functional/test_iam_contract.py)."""

from __future__ import annotations

from jobsched_tools.iam.policy import (
    Call,
    Grant,
    Statement,
    authorisations,
    evaluate,
    resource_matches,
    without,
)

REGION, ACCOUNT = "us-east-1", "123456789012"
RUNS = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/runs"
STATE = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/state"


def test_a_transaction_needs_each_contained_action_on_its_own_table() -> None:
    params = {
        "TransactItems": [
            {"Put": {"TableName": "runs", "Item": {}}},
            {"Update": {"TableName": "state", "Key": {}}},
            {"ConditionCheck": {"TableName": "state", "Key": {}}},
            {"Delete": {"TableName": RUNS, "Key": {}}},  # an ARN is a table name too
        ]
    }
    assert authorisations("dynamodb", "TransactWriteItems", params, REGION, ACCOUNT) == sorted(
        [
            ("dynamodb:PutItem", RUNS),
            ("dynamodb:UpdateItem", STATE),
            ("dynamodb:ConditionCheckItem", STATE),
            ("dynamodb:DeleteItem", RUNS),
        ]
    )


def test_an_index_query_needs_the_index_arn_and_sqs_batches_their_single_action() -> None:
    query = {"TableName": "state", "IndexName": "next-run"}
    assert authorisations("dynamodb", "Query", query, REGION, ACCOUNT) == [
        ("dynamodb:Query", f"{STATE}/index/next-run")
    ]
    url = f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/work"
    assert authorisations("sqs", "SendMessageBatch", {"QueueUrl": url}, REGION, ACCOUNT) == [
        ("sqs:SendMessage", f"arn:aws:sqs:{REGION}:{ACCOUNT}:work")
    ]
    invoke = {"FunctionName": "f", "Qualifier": "live"}
    assert authorisations("lambda", "Invoke", invoke, REGION, ACCOUNT) == [
        ("lambda:InvokeFunction", f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:f:live")
    ]


def test_resources_match_segment_by_segment_and_actions_ignore_case() -> None:
    assert resource_matches(f"{STATE}/index/*", f"{STATE}/index/next-run")
    assert not resource_matches(STATE, f"{STATE}/index/next-run")  # the table grants no index
    assert resource_matches("arn:aws:dynamodb:*:*:table/st*", STATE)
    assert not resource_matches("arn:aws:dynamodb:*:*:table/st*", RUNS)
    assert not resource_matches(RUNS, "*")  # an action without resource-level permissions
    allow = Statement("A", "Allow", actions=("DynamoDB:get*",), resources=(RUNS,))
    assert evaluate([allow], "dynamodb:GetItem", RUNS).allowed


def test_an_explicit_deny_wins_and_a_condition_is_reported_not_assumed() -> None:
    allow = Statement("A", "Allow", actions=("dynamodb:*",), resources=("*",))
    deny = Statement("D", "Deny", actions=("dynamodb:DeleteItem",), resources=(RUNS,))
    assert not evaluate([allow, deny], "dynamodb:DeleteItem", RUNS).allowed
    assert evaluate([allow, deny], "dynamodb:PutItem", RUNS).allowed
    conditional = Statement("C", "Allow", ("dynamodb:PutItem",), (), (RUNS,), (), {"Bool": {"x": "true"}})
    decision = evaluate([conditional], "dynamodb:PutItem", RUNS)
    assert not decision.allowed and decision.unevaluated == ("C",)


def test_taking_a_grant_away_keeps_the_statement_s_other_grants() -> None:
    actions = ("dynamodb:GetItem", "dynamodb:PutItem")
    statement = Statement("S", "Allow", actions=actions, resources=(RUNS, STATE))
    left = without([statement], Grant("f", "S", "dynamodb:PutItem", RUNS))
    assert not evaluate(left, "dynamodb:PutItem", RUNS).allowed
    kept = (("dynamodb:PutItem", STATE), ("dynamodb:GetItem", RUNS), ("dynamodb:GetItem", STATE))
    for action, resource in kept:
        assert evaluate(left, action, resource).allowed, (action, resource)
    assert Grant("f", "S", "dynamodb:Put*", RUNS).covers(Call("f", "dynamodb:PutItem", RUNS))


def test_a_string_condition_is_evaluated_against_the_call_s_request_context() -> None:
    """iam:PassRole only to ECS tasks (issue 29): the condition decides, with the context a
    recorded RunTask carries; without the key it is reported, not assumed."""
    role = "arn:aws:iam::123456789012:role/task"
    only_ecs = {"StringEquals": {"iam:PassedToService": "ecs-tasks.amazonaws.com"}}
    passing = Statement("P", "Allow", ("iam:PassRole",), (), (role,), (), only_ecs)
    to_ecs = (("iam:PassedToService", "ecs-tasks.amazonaws.com"),)
    assert evaluate([passing], "iam:PassRole", role, to_ecs).allowed
    to_lambda = (("iam:PassedToService", "lambda.amazonaws.com"),)
    assert not evaluate([passing], "iam:PassRole", role, to_lambda).allowed
    assert evaluate([passing], "iam:PassRole", role).unevaluated == ("P",)
    ecs_like = {"StringLike": {"iam:PassedToService": "ecs-*"}}
    like = Statement("L", "Allow", ("iam:PassRole",), (), (role,), (), ecs_like)
    assert evaluate([like], "iam:PassRole", role, to_ecs).allowed


def test_a_run_task_is_recorded_with_the_roles_it_passes() -> None:
    from jobsched_tools.iam.policy import authorisations, passed_roles

    params = {
        "cluster": "c",
        "taskDefinition": "report:3",
        "overrides": {"taskRoleArn": "arn:aws:iam::123456789012:role/t"},
    }
    assert authorisations("ecs", "RunTask", params, "us-east-1", "123456789012") == [
        ("ecs:RunTask", "arn:aws:ecs:us-east-1:123456789012:task-definition/report:3")
    ]
    to_ecs = (("iam:PassedToService", "ecs-tasks.amazonaws.com"),)
    role = "arn:aws:iam::123456789012:role/t"
    assert passed_roles("ecs", "RunTask", params) == [("iam:PassRole", role, to_ecs)]
    machine = "arn:aws:states:us-east-1:123456789012:stateMachine:m"
    start = {"stateMachineArn": machine}
    started = authorisations("stepfunctions", "StartExecution", start, "us-east-1", "1")
    assert started == [("states:StartExecution", machine)]


def test_a_call_that_reaches_an_encrypted_resource_needs_its_key_through_its_service() -> None:
    """moto encrypts nothing: the KMS calls a service makes with its caller's permissions are
    derived from the calls that reach a resource under a customer-managed key, per function."""
    from jobsched_tools.iam.policy import key_calls

    key = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/k"
    queue = f"arn:aws:sqs:{REGION}:{ACCOUNT}:letters"
    plain = f"arn:aws:sqs:{REGION}:{ACCOUNT}:plain"
    calls = [
        Call("Detector", "sqs:SendMessage", queue),
        Call("Detector", "sqs:SendMessage", plain),  # not encrypted: nothing
        Call("Worker", "dynamodb:UpdateItem", RUNS),
        Call("Worker", "sqs:ReceiveMessage", queue),  # not a use of the key in this table
    ]
    derived = key_calls(calls, {queue: key, RUNS: key}, REGION)
    via_sqs = (("kms:ViaService", f"sqs.{REGION}.amazonaws.com"),)
    via_dynamodb = (("kms:ViaService", f"dynamodb.{REGION}.amazonaws.com"),)
    assert {(c.function, c.action, c.resource, c.context) for c in derived} == {
        ("Detector", "kms:GenerateDataKey", key, via_sqs),
        ("Detector", "kms:Decrypt", key, via_sqs),
        ("Worker", "kms:GenerateDataKey", key, via_dynamodb),
        ("Worker", "kms:Decrypt", key, via_dynamodb),
    }
