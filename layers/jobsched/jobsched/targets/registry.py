"""The handler registry and the context a handler receives."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any, Protocol

from jobsched.core.writes import Cond, Put, Update, WriteOp


class RunLogger(Protocol):
    def info(self, msg: object, *args: object, **kwargs: Any) -> None: ...
    def warning(self, msg: object, *args: object, **kwargs: Any) -> None: ...
    def error(self, msg: object, *args: object, **kwargs: Any) -> None: ...


class EffectNotAllowed(PermissionError):
    """A handler staged an effect on a table the stack does not allow (nor grant)."""


class EffectTables:
    """The tables a handler may stage effects on: the stack's ``StagedEffectTableArns`` parameter
    (``STAGED_EFFECT_TABLE_ARNS``), which is also the worker role's grant of ``PutItem``,
    ``UpdateItem`` and ``ConditionCheckItem`` on them. An empty list allows no table.

    Each entry is a table ARN (IAM's wildcards ``*`` and ``?`` allowed, as in the grant). A staged
    effect names its table by name or by ARN; a name matches an entry's ``table/NAME`` part. The
    transaction runs in the worker's own account and region (a TransactWriteItems cannot span
    them), so list only tables there."""

    PARAMETER = "StagedEffectTableArns"

    def __init__(self, allowed: Iterable[str]) -> None:
        self.allowed = tuple(entry for entry in allowed if entry)

    def allows(self, table: str) -> bool:
        for entry in self.allowed:
            if fnmatchcase(table, entry):
                return True
            _, marker, name = entry.partition(":table/")
            if marker and fnmatchcase(table, name):
                return True
        return False

    def check(self, table: str) -> None:
        if not self.allows(table):
            listed = ", ".join(self.allowed) or "empty: no table is allowed"
            raise EffectNotAllowed(
                f"staged effect on table {table!r} is not allowed: add the table's ARN to the "
                f"stack's {self.PARAMETER} parameter (STAGED_EFFECT_TABLE_ARNS; now {listed}), "
                "which also grants the worker's role PutItem, UpdateItem and ConditionCheckItem on it"
            )


@dataclass
class RunContext:
    """What a handler gets. ``idempotency_key`` is stable across every attempt of one occurrence:
    pass it to external systems so that a retried call after a crash is recognised there.
    ``cancelled`` is set when the worker lost its lease (fenced out) or the job timed out; long
    handlers should check it and stop. Writes staged with ``stage_put``/``stage_update`` commit
    in one DynamoDB transaction together with the run's fenced completion: exactly once. Their
    table must be allowed by ``effect_tables`` (the Lambda worker always passes the stack's list;
    None, for tests and simulations on their own stores, allows any)."""

    job_id: str
    run_id: str
    payload: dict[str, Any]
    scheduled_at: int
    attempt: int
    fencing_token: int
    idempotency_key: str
    logger: RunLogger
    cancelled: threading.Event = field(default_factory=threading.Event)
    staged: list[WriteOp] = field(default_factory=list)
    effect_tables: EffectTables | None = None

    def _allow(self, table: str) -> None:
        if self.effect_tables is not None:
            self.effect_tables.check(table)

    def stage_put(
        self, table: str, item: dict[str, Any], condition: tuple[Cond, ...] = (), label: str = ""
    ) -> None:
        self._allow(table)
        self.staged.append(Put(table, item, condition, label or f"effect put {table}"))

    def stage_update(
        self,
        table: str,
        key: dict[str, Any],
        set: dict[str, Any] | None = None,
        add: dict[str, int] | None = None,
        condition: tuple[Cond, ...] = (),
        label: str = "",
    ) -> None:
        self._allow(table)
        self.staged.append(
            Update(table, key, condition, label or f"effect update {table}", set or {}, (), add or {})
        )


Handler = Callable[[RunContext], Any]


class HandlerRegistry:
    def __init__(self) -> None:
        self._handlers: dict[str, Handler] = {}

    def register(self, name: str) -> Callable[[Handler], Handler]:
        def decorate(fn: Handler) -> Handler:
            if name in self._handlers and self._handlers[name] is not fn:
                raise ValueError(f"handler {name!r} is registered twice")
            self._handlers[name] = fn
            return fn

        return decorate

    def add(self, name: str, fn: Handler) -> None:
        self.register(name)(fn)

    def get(self, name: str) -> Handler | None:
        return self._handlers.get(name)

    def names(self) -> list[str]:
        return sorted(self._handlers)
