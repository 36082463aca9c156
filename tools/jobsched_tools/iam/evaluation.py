"""IAM's evaluation of a role's statements for one call (``evaluate``: an explicit Deny wins, else an
Allow allows, else denied), and the grants the contract test takes away one at a time
(``grants``, ``without``), the calls denied and the grants no call uses."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from jobsched_tools.iam.calls import Call
from jobsched_tools.iam.statements import Statement, action_matches, condition_holds, resource_matches


@dataclass(frozen=True)
class Decision:
    allowed: bool
    allowed_by: tuple[str, ...]
    denied_by: tuple[str, ...]
    unevaluated: tuple[str, ...]  # statements that match but carry a Condition


def evaluate(
    statements: Sequence[Statement], action: str, resource: str, context: Sequence[tuple[str, str]] = ()
) -> Decision:
    allows: list[str] = []
    denies: list[str] = []
    unevaluated: list[str] = []
    for statement in statements:
        if not statement.matches(action, resource):
            continue
        if statement.condition:
            holds = condition_holds(statement.condition, context)
            if holds is False:
                continue
            if holds is None:
                unevaluated.append(statement.sid)
                if statement.effect == "Deny":
                    denies.append(statement.sid)  # it may apply: count it
                continue
        (denies if statement.effect == "Deny" else allows).append(statement.sid)
    return Decision(bool(allows) and not denies, tuple(allows), tuple(denies), tuple(unevaluated))


@dataclass(frozen=True)
class Grant:
    """One action pattern on one resource pattern of one Allow statement."""

    function: str
    sid: str
    action: str
    resource: str
    # The statement's Condition, as JSON ("" for none): a conditional grant covers only the calls
    # whose recorded context satisfies it.
    condition: str = ""

    def __str__(self) -> str:
        when = f" if {self.condition}" if self.condition else ""
        return f"{self.function} {self.sid}: {self.action} on {self.resource}{when}"

    def covers(self, call: Call) -> bool:
        if not (action_matches(self.action, call.action) and resource_matches(self.resource, call.resource)):
            return False
        return not self.condition or condition_holds(json.loads(self.condition), call.context) is True


def grants(function: str, statements: Sequence[Statement]) -> list[Grant]:
    return [
        Grant(
            function,
            statement.sid,
            action,
            resource,
            json.dumps(statement.condition, sort_keys=True) if statement.condition else "",
        )
        for statement in statements
        if statement.effect == "Allow"
        for action in statement.actions
        for resource in statement.resources
    ]


def without(statements: Sequence[Statement], grant: Grant) -> list[Statement]:
    """``statements`` with one grant taken away: its statement loses the action on that resource
    (it keeps the action on its other resources and its other actions on every resource)."""
    kept: list[Statement] = []
    for statement in statements:
        if statement.sid != grant.sid or grant.action not in statement.actions:
            kept.append(statement)
            continue
        others = tuple(a for a in statement.actions if a != grant.action)
        if others:
            kept.append(_replace(statement, actions=others))
        remaining = tuple(r for r in statement.resources if r != grant.resource)
        if remaining:
            kept.append(_replace(statement, actions=(grant.action,), resources=remaining))
    return kept


def _replace(statement: Statement, **changes: Any) -> Statement:
    values = {**statement.__dict__, **changes}
    return Statement(**values)


def denied(calls: Sequence[Call], statements: Sequence[Statement]) -> list[Call]:
    return [
        call for call in calls if not evaluate(statements, call.action, call.resource, call.context).allowed
    ]


def unused(grant_list: Sequence[Grant], calls: Sequence[Call]) -> list[Grant]:
    return [grant for grant in grant_list if not any(grant.covers(call) for call in calls)]


def describe(statements: Sequence[Statement]) -> str:
    return json.dumps([statement.__dict__ for statement in statements], indent=1, default=str)
