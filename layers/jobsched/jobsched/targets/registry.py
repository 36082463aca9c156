"""The handler registry and the context a handler receives."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from jobsched.core.writes import Cond, Put, Update, WriteOp


class RunLogger(Protocol):
    def info(self, msg: object, *args: object, **kwargs: Any) -> None: ...
    def warning(self, msg: object, *args: object, **kwargs: Any) -> None: ...
    def error(self, msg: object, *args: object, **kwargs: Any) -> None: ...


@dataclass
class RunContext:
    """What a handler gets. ``idempotency_key`` is stable across every attempt of one occurrence:
    pass it to external systems so that a retried call after a crash is recognised there.
    ``cancelled`` is set when the worker lost its lease (fenced out) or the job timed out; long
    handlers should check it and stop. Writes staged with ``stage_put``/``stage_update`` commit
    in one DynamoDB transaction together with the run's fenced completion: exactly once."""

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

    def stage_put(
        self, table: str, item: dict[str, Any], condition: tuple[Cond, ...] = (), label: str = ""
    ) -> None:
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
