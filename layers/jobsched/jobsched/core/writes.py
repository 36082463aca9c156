"""The write language of the core: every state change is a conditional write built from named parts.

Why a small language instead of DynamoDB expression strings in each service: the conditions are
the correctness argument of jobsched, so they are written once, here in the pure core, as data
(``Cond`` parts, each carrying the race it stops). The DynamoDB adapter translates them to
``ConditionExpression`` strings and the in-memory store evaluates them in Python; one contract
test suite runs against both, so neither can drift from the other.

Item values are plain Python: str, int, bool, None, list and dict (no floats: instants are
integer milliseconds since the epoch).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Item = dict[str, Any]

JOBS = "jobs"  # job definitions: written by people, read by jobsched
STATE = "state"  # each job's scheduler state: written only by jobsched (core/state.py)
RUNS = "runs"  # one item per occurrence

CondKind = Literal["exists", "not_exists", "eq", "ne", "lt", "le", "gt", "ge", "in", "or"]


@dataclass(frozen=True)
class Cond:
    """One named part of a condition. ``why`` names the race this part stops."""

    kind: CondKind
    attr: str
    why: str
    value: Any = None
    alternatives: tuple[Cond, ...] = ()

    def holds(self, item: Mapping[str, Any] | None) -> bool:
        """Evaluate against the current item (None: no item). DynamoDB semantics: a comparison
        against a missing attribute is false."""
        if self.kind == "or":
            return any(alt.holds(item) for alt in self.alternatives)
        present = item is not None and self.attr in item and item[self.attr] is not None
        if self.kind == "exists":
            return present
        if self.kind == "not_exists":
            return not present
        if not present:
            # DynamoDB: "<>" against a missing attribute is true, every other comparison false.
            return self.kind == "ne"
        assert item is not None
        current = item[self.attr]
        if self.kind == "in":
            return current in self.value
        compare = _COMPARISONS[self.kind]
        if self.kind not in ("eq", "ne") and not _comparable(current, self.value):
            return False
        return bool(compare(current, self.value))


_COMPARISONS: dict[str, Callable[[Any, Any], Any]] = {
    "eq": operator.eq,
    "ne": operator.ne,
    "lt": operator.lt,
    "le": operator.le,
    "gt": operator.gt,
    "ge": operator.ge,
}


def _comparable(current: Any, value: Any) -> bool:
    """DynamoDB orders only values of one type (a number against a string is false)."""
    return type(current) is type(value) or (isinstance(current, int) and isinstance(value, int))


def exists(attr: str, why: str) -> Cond:
    return Cond("exists", attr, why)


def not_exists(attr: str, why: str) -> Cond:
    return Cond("not_exists", attr, why)


def eq(attr: str, value: Any, why: str) -> Cond:
    return Cond("eq", attr, why, value)


def ne(attr: str, value: Any, why: str) -> Cond:
    return Cond("ne", attr, why, value)


def lt(attr: str, value: Any, why: str) -> Cond:
    return Cond("lt", attr, why, value)


def le(attr: str, value: Any, why: str) -> Cond:
    return Cond("le", attr, why, value)


def is_in(attr: str, values: Sequence[Any], why: str) -> Cond:
    return Cond("in", attr, why, tuple(values))


def any_of(why: str, *alternatives: Cond) -> Cond:
    return Cond("or", "", why, None, tuple(alternatives))


@dataclass(frozen=True)
class Put:
    table: str
    item: Item
    condition: tuple[Cond, ...]
    label: str


@dataclass(frozen=True)
class Update:
    table: str
    key: Item
    condition: tuple[Cond, ...]
    label: str
    set: Item = field(default_factory=dict)
    remove: tuple[str, ...] = ()
    # Atomic increments (DynamoDB ADD): for writers that must bump a counter they did not read.
    add: dict[str, int] = field(default_factory=dict)
    # Set only where absent (DynamoDB if_not_exists), e.g. the first start of a run.
    set_if_missing: Item = field(default_factory=dict)


@dataclass(frozen=True)
class Check:
    """A condition on an item that the transaction does not change."""

    table: str
    key: Item
    condition: tuple[Cond, ...]
    label: str


@dataclass(frozen=True)
class Delete:
    """Delete an item if ``condition`` holds: in a transaction, beside the items whose state
    made the delete safe (``ConditionCheck``s on them)."""

    table: str
    key: Item
    condition: tuple[Cond, ...]
    label: str


WriteOp = Put | Update | Check | Delete


def conditions_hold(conditions: Sequence[Cond], item: Mapping[str, Any] | None) -> bool:
    return all(c.holds(item) for c in conditions)


def failing_parts(conditions: Sequence[Cond], item: Mapping[str, Any] | None) -> list[Cond]:
    """The named parts that do not hold: what a log line says when a write loses a race."""
    return [c for c in conditions if not c.holds(item)]
