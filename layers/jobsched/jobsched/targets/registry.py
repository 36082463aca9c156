"""The handler registry and the context a handler receives."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any, Protocol

from jobsched.core.limits import (
    DYNAMODB_MAX_ITEM_BYTES,
    DYNAMODB_MAX_TRANSACTION_BYTES,
    DYNAMODB_MAX_TRANSACTION_ITEMS,
    SAFETY_BYTES,
    RequestTooLarge,
    item_size,
)
from jobsched.core.writes import Cond, Put, Update, WriteOp

# The commit's own operations in its transaction (the run's fenced completion): staged effects
# have the rest of DynamoDB's 100.
COMMIT_OPS = 1
MAX_STAGED_EFFECTS = DYNAMODB_MAX_TRANSACTION_ITEMS - COMMIT_OPS
# The staged items' bytes, with room left for the run's own item in the same 4 MB.
MAX_STAGED_BYTES = DYNAMODB_MAX_TRANSACTION_BYTES - SAFETY_BYTES


class RunLogger(Protocol):
    def info(self, msg: object, *args: object, **kwargs: Any) -> None: ...
    def warning(self, msg: object, *args: object, **kwargs: Any) -> None: ...
    def error(self, msg: object, *args: object, **kwargs: Any) -> None: ...


class PermanentHandlerError(Exception):
    """A handler's failure no retry can mend: the stack's own configuration refuses the call (a
    destination or a table not in its allow-lists, which are also the worker's IAM grant). Raised
    out of a handler, it fails the run at once, with its message, without the retries its job's
    ``retry`` would give: they would all fail alike until the stack is changed."""


class NotAllowed(PermanentHandlerError, PermissionError):
    """A destination the stack's allow-lists do not name: permanent (the run fails at once)."""


class EffectNotAllowed(PermanentHandlerError, PermissionError):
    """A handler staged an effect on a table the stack does not allow (nor grant)."""


class StagedEffectsTooLarge(RequestTooLarge):
    """A staged effect past DynamoDB's transaction limits. No attempt could commit it: the run
    fails at once, with this reason, whether or not the handler catches it."""


class EffectTables:
    """The tables a handler may stage effects on: the stack's ``StagedEffectTableArns`` parameter
    (``STAGED_EFFECT_TABLE_ARNS``), which is also the worker role's grant of ``PutItem`` and
    ``UpdateItem`` on them. An empty list allows no table.

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
                "which also grants the worker's role PutItem and UpdateItem on it"
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
    # Why the staged effects cannot commit (``StagedEffectsTooLarge``), once one went past a
    # limit: the worker then fails the run finally, even if the handler caught the error.
    staging_error: str | None = None
    _staged_bytes: int = 0

    def _allow(self, table: str) -> None:
        if self.effect_tables is not None:
            self.effect_tables.check(table)

    def _admit(self, op: Put | Update) -> None:
        """Size the effect when it is staged, against what the commit's transaction can hold:
        ``MAX_STAGED_EFFECTS`` operations, each item within 400 KB, ``MAX_STAGED_BYTES`` in all.
        An update is sized by what it writes (its item's other attributes are unknown here; the
        store's refusal at commit fails the run the same way)."""
        written = op.item if isinstance(op, Put) else {**op.key, **op.set, **dict.fromkeys(op.add, 0)}
        size = item_size({k: v for k, v in written.items() if v is not None})
        problem = None
        if len(self.staged) >= MAX_STAGED_EFFECTS:
            problem = (
                f"at most {MAX_STAGED_EFFECTS} staged effects per run (DynamoDB's transaction holds "
                f"{DYNAMODB_MAX_TRANSACTION_ITEMS} operations, {COMMIT_OPS} of them the run's commit)"
            )
        elif size > DYNAMODB_MAX_ITEM_BYTES:
            problem = (
                f"the item is {size} bytes; DynamoDB's item limit is 400 KB ({DYNAMODB_MAX_ITEM_BYTES} "
                "bytes, attribute names included)"
            )
        elif self._staged_bytes + size > MAX_STAGED_BYTES:
            problem = (
                f"the staged items would be {self._staged_bytes + size} bytes; a transaction holds 4 MB "
                f"of items, {MAX_STAGED_BYTES} bytes for the staged ones"
            )
        if problem is not None:
            self.staging_error = f"staged effect {op.label!r} refused: {problem}"
            raise StagedEffectsTooLarge(self.staging_error)
        self._staged_bytes += size
        self.staged.append(op)

    def stage_put(
        self, table: str, item: dict[str, Any], condition: tuple[Cond, ...] = (), label: str = ""
    ) -> None:
        self._allow(table)
        self._admit(Put(table, item, condition, label or f"effect put {table}"))

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
        self._admit(
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
