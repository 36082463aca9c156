"""The IAM contract, offline: what each function calls against what its role is granted.

moto checks no IAM, so a call a role does not grant succeeds in every local test and fails on the
first deploy. This module gives the three parts of checking that without AWS:

- ``CallRecorder``: records every AWS call made while installed (a wrapper around botocore's
  ``BaseClient._make_api_call``, which every client method goes through), as the IAM actions and
  resource ARNs it is authorised by, tagged with the function acting at the time. A
  ``TransactWriteItems`` is recorded as its contained actions (each ``Put``, ``Update``, ``Delete``,
  ``ConditionCheck`` as ``PutItem``, ``UpdateItem``, ``DeleteItem``, ``ConditionCheckItem`` on its
  own table: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis-iam.html);
  a ``Query`` on an index as the index's ARN (``table/NAME/index/INDEX``); SQS batch calls as the
  action that authorises them (``SendMessageBatch`` as ``sqs:SendMessage``); an ECS ``RunTask`` as
  ``ecs:RunTask`` on its task definition and ``iam:PassRole`` on each role its overrides name, with
  the request context ``iam:PassedToService = ecs-tasks.amazonaws.com``; a Step Functions
  ``StartExecution`` as ``states:StartExecution`` on its state machine.
- ``role_statements``: a function role's statements from the template after the SAM transform
  (``transform``), with the intrinsics resolved to ARNs for a ``Stack`` (fake account, region,
  stack name, parameter values and the resources' physical names): ``Ref``, ``Fn::GetAtt``,
  ``Fn::Sub``, ``Fn::Join``, ``Fn::If`` and the conditions. SAM policy templates arrive expanded.
- ``evaluate``: IAM's evaluation for one identity policy set: a matching explicit ``Deny`` wins,
  else a matching ``Allow`` allows, else it is denied. Actions match case-insensitively with
  ``*``/``?`` wildcards, resources segment by segment of the ARN (``*`` within the last segment
  spans ``/``). A statement's ``Condition`` is evaluated when every key it names is in the call's
  recorded request context and every operator is ``StringEquals`` or ``StringLike``; any other is
  not evaluated: it is reported (``Decision.unevaluated``), never counted as an Allow, and a
  conditional Deny counts as denying.

Not modelled: resource-based policies, permission boundaries, SCPs, session policies (the stack
uses none of them).

A module per part: ``calls`` (what one call needs), ``recorder`` (``CallRecorder``), ``template``
(``transform``, ``Stack``), ``statements`` (``Statement``, ``role_statements``, the matching),
``evaluation`` (``evaluate``, ``Grant``, ``grants``, ``without``). Their public names are
re-exported here: ``from jobsched_tools.iam.policy import evaluate``.
"""

from jobsched_tools.iam.calls import (
    ECS_TASKS,
    KEY_ACTIONS,
    KEY_USE,
    Call,
    authorisations,
    dynamodb_table_arn,
    key_calls,
    lambda_function_arn,
    passed_roles,
    sqs_queue_arn,
)
from jobsched_tools.iam.evaluation import Decision, Grant, denied, describe, evaluate, grants, unused, without
from jobsched_tools.iam.recorder import CallRecorder
from jobsched_tools.iam.statements import (
    Statement,
    action_matches,
    condition_holds,
    managed_policies,
    resource_matches,
    role_statements,
)
from jobsched_tools.iam.template import TOOLS_PYTHON, Stack, TransformError, transform, translator_python

__all__ = [
    "ECS_TASKS",
    "KEY_ACTIONS",
    "KEY_USE",
    "TOOLS_PYTHON",
    "Call",
    "CallRecorder",
    "Decision",
    "Grant",
    "Stack",
    "Statement",
    "TransformError",
    "action_matches",
    "authorisations",
    "condition_holds",
    "denied",
    "describe",
    "dynamodb_table_arn",
    "evaluate",
    "grants",
    "key_calls",
    "lambda_function_arn",
    "managed_policies",
    "passed_roles",
    "resource_matches",
    "role_statements",
    "sqs_queue_arn",
    "transform",
    "translator_python",
    "unused",
    "without",
]
