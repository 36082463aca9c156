"""A role's policy statements: read from the transformed template (``role_statements``), and
matched against one action on one resource (``Statement.matches``: IAM's action and resource
matching) and one request context (``condition_holds``)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jobsched_tools.iam.template import Stack


def _strings(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    items = value if isinstance(value, list) else [value]
    flat: list[str] = []
    for item in items:
        flat.extend(str(part) for part in (item if isinstance(item, list) else [item]))
    return tuple(flat)


@dataclass(frozen=True)
class Statement:
    sid: str
    effect: str
    actions: tuple[str, ...] = ()
    not_actions: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    not_resources: tuple[str, ...] = ()
    condition: Mapping[str, Any] | None = None

    @classmethod
    def parse(cls, raw: Mapping[str, Any], default_sid: str) -> Statement:
        return cls(
            sid=str(raw.get("Sid") or default_sid),
            effect=str(raw["Effect"]),
            actions=_strings(raw.get("Action")),
            not_actions=_strings(raw.get("NotAction")),
            resources=_strings(raw.get("Resource")),
            not_resources=_strings(raw.get("NotResource")),
            condition=raw.get("Condition") or None,
        )

    def matches(self, action: str, resource: str) -> bool:
        if self.actions and not any(action_matches(p, action) for p in self.actions):
            return False
        if self.not_actions and any(action_matches(p, action) for p in self.not_actions):
            return False
        if self.resources and not any(resource_matches(p, resource) for p in self.resources):
            return False
        return not (self.not_resources and any(resource_matches(p, resource) for p in self.not_resources))


def _glob(pattern: str, value: str) -> bool:
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, re.DOTALL) is not None


def action_matches(pattern: str, action: str) -> bool:
    """IAM action matching: case-insensitive, ``*`` and ``?`` wildcards."""
    return _glob(pattern.lower(), action.lower())


def resource_matches(pattern: str, resource: str) -> bool:
    """IAM resource matching: ``*`` alone matches anything; otherwise the ARN's six segments
    (``arn:partition:service:region:account:resource``) match one by one, case-sensitively, and
    the last segment's wildcards span ``/`` and ``:``. A call on ``*`` (an action with no
    resource-level permissions) is matched only by a ``*`` pattern."""
    if pattern == "*":
        return True
    pattern_parts, resource_parts = pattern.split(":", 5), resource.split(":", 5)
    if len(pattern_parts) != 6 or len(resource_parts) != 6:
        return _glob(pattern, resource)
    return all(_glob(p, r) for p, r in zip(pattern_parts, resource_parts, strict=True))


def role_statements(transformed: Mapping[str, Any], function: str, stack: Stack) -> list[Statement]:
    """The statements of ``function``'s role (``<function>Role``, made by SAM): its inline
    policies, resolved. Managed policies are listed by ``managed_policies``, not expanded."""
    role = transformed["Resources"][f"{function}Role"]["Properties"]
    statements: list[Statement] = []
    for policy in stack.resolve(role.get("Policies", [])):
        document = policy["PolicyDocument"]
        raw = document["Statement"]
        for index, statement in enumerate(raw if isinstance(raw, list) else [raw]):
            statements.append(Statement.parse(statement, f"{policy['PolicyName']}#{index}"))
    return statements


def managed_policies(transformed: Mapping[str, Any], function: str, stack: Stack) -> list[str]:
    role = transformed["Resources"][f"{function}Role"]["Properties"]
    return [str(arn) for arn in stack.resolve(role.get("ManagedPolicyArns", []))]


_CONDITION_OPERATORS: dict[str, Callable[[str, str], bool]] = {
    "StringEquals": lambda pattern, value: pattern == value,
    "StringLike": lambda pattern, value: _glob(pattern, value),
}


def condition_holds(condition: Mapping[str, Any], context: Sequence[tuple[str, str]]) -> bool | None:
    """Whether a statement's ``Condition`` holds for a request context: every operator's every key
    must match one of its values (IAM: AND across keys and operators, OR across values; keys
    case-insensitive). None: it cannot be evaluated here (another operator, or a key the context
    lacks)."""
    values = {key.lower(): value for key, value in context}
    for operator, tests in condition.items():
        compare = _CONDITION_OPERATORS.get(operator)
        if compare is None or not isinstance(tests, Mapping):
            return None
        for key, wanted in tests.items():
            if key.lower() not in values:
                return None
            if not any(compare(str(pattern), values[key.lower()]) for pattern in _strings(wanted)):
                return False
    return True
