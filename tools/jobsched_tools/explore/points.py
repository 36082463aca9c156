"""The wrappers every explored actor calls through: the Store (``ExplorerStore``), the WorkQueue
(``PointQueue``) and a job's own dead-letter queue (``PointDeadLetters``). Each call is a
scheduling point (``sched.py``), with the faults the world's budget still allows as its options.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from jobsched.core.errors import ConditionFailed, TransientStoreError
from jobsched.core.writes import JOBS, RUNS, STATE, Cond, Item, Put, Update, WriteOp
from jobsched.ports import INDEX_TABLE, IndexName, OutgoingMessage, Page, SendResult

from jobsched_tools.explore.sched import OK, Call, Crash
from jobsched_tools.fakes.memory_store import MemoryStore

if TYPE_CHECKING:
    from jobsched_tools.explore.world import World

CRASH, LOST, STALE, DUP = "crash", "lost", "stale", "dup"
UNANSWERED = "unanswered"  # a dead-letter send the job's queue did not answer (issue 38)
TAKE = "take:"  # a worker's receive: which queued message (reorder)
INDEXES = ("next-run", "lease")


class ExplorerStore:
    """The Store every explored actor uses: each call is a scheduling point."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.inner = world.inner

    def _point(self, call: Call) -> str:
        option = self.world.sched.point(call)
        if self.world.sched.actor_here() is not None:
            actor = self.world.sched.actor_here()
            name = actor.name if actor is not None else "?"
            self.world.note(f"{name}: {call.detail}" + ("" if option == OK else f" [{option}]"))
            if option != OK:
                self.world.used[option.split(":")[0]] += 1
        return option

    def get(self, table: str, key: Item, consistent: bool = True) -> Item | None:
        self._point(Call("get", f"get {table} {_key(key)}"))
        item = self.inner.get(table, key, consistent)
        self.world.seen_by_actor(item)
        return item

    def query(
        self,
        index: IndexName,
        partition: Any,
        sort_from: int | None = None,
        sort_to: int | None = None,
        limit: int = 100,
        cursor: dict[str, Any] | None = None,
        consistent: bool = False,
    ) -> Page:
        stale = index in INDEXES and not consistent and self.world.used[STALE] < self.world.budget.stale
        option = self._point(Call("query", f"query {index}", (OK, STALE) if stale else (OK,)))
        if option == STALE:
            page = self._stale(INDEX_TABLE[index]).query(index, partition, sort_from, sort_to, limit, cursor)
        else:
            page = self.inner.query(index, partition, sort_from, sort_to, limit, cursor, consistent)
        self.world.seen_by_actor([page.items, page.cursor])
        return page

    def _stale(self, table: str) -> MemoryStore:
        """The table with each item one write behind (an index lagging its table)."""
        view = MemoryStore()
        rows = dict(self.inner.tables[table])
        for (name, key), before in self.world.previous.items():
            if name != table:
                continue
            if before is None:
                rows.pop(key, None)
            else:
                rows[key] = before
        view.tables[table] = rows
        return view

    def scan(self, table: str, limit: int = 100, cursor: dict[str, Any] | None = None) -> Page:
        self._point(Call("scan", f"scan {table}"))
        page = self.inner.scan(table, limit, cursor)
        self.world.seen_by_actor([page.items, page.cursor])
        return page

    def batch_get(self, table: str, keys: Sequence[Item], consistent: bool = False) -> list[Item]:
        self._point(Call("batch_get", f"batch_get {table} x{len(keys)}"))
        items = self.inner.batch_get(table, keys, consistent)
        self.world.seen_by_actor(items)
        return items

    def write(self, ops: Sequence[WriteOp]) -> None:
        person = any(op.label.startswith("person") for op in ops)
        what = ", ".join(f"{op.label} {_op_key(op)}" for op in ops)
        option = self._point(Call("write", f"write {what}", self.world.write_options(person)))
        self._apply(ops, option, lambda: self.inner.write(ops))

    def update(self, op: Update) -> Item:
        person = op.label.startswith("person")
        what = f"{op.label} {_op_key(op)}"
        option = self._point(Call("update", f"update {what}", self.world.write_options(person)))
        result: list[Item] = []
        self._apply([op], option, lambda: result.append(self.inner.update(op)))
        return result[0]

    def delete(self, table: str, key: Item, condition: tuple[Cond, ...] = (), label: str = "delete") -> None:
        person = label.startswith("person")
        option = self._point(Call("delete", f"{label} {_key(key)}", self.world.write_options(person)))
        self._apply(
            [Update(table, key, condition, label)],
            option,
            lambda: self.inner.delete(table, key, condition, label),
        )

    def _apply(self, ops: Sequence[WriteOp], option: str, write: Callable[[], None]) -> None:
        keys = [(op.table, self.inner._target(op)) for op in ops if op.table in (STATE, RUNS)]
        before = {k: copy.deepcopy(self.inner.tables[k[0]].get(k[1])) for k in keys}
        paused = [op for op in ops if isinstance(op, Update) and op.label == "pause on failure"]
        job_before = copy.deepcopy(self.inner.get(JOBS, paused[0].key)) if paused else None
        try:
            write()
        except ConditionFailed as lost:
            self.world.seen_by_actor(["lost", lost.op_index, lost.current])
            raise
        self.world.previous.update(before)
        for op in ops:
            if isinstance(op, Put) and op.table == RUNS and before.get((RUNS, self.inner._target(op))):
                # I1: a record is created once (``attribute_not_exists``), never put over another.
                self.world.find("record_overwritten", _op_key(op), f"{op.label} replaced it")
        if paused:
            self.world.check_pause(job_before)
        self.world.seen_by_actor("written")
        self.world.after_write(ops)
        if option == CRASH:
            raise Crash
        if option == LOST:
            raise TransientStoreError("explorer: the write landed, its response was lost")


class PointQueue:
    """The WorkQueue every explored actor uses: a send is a scheduling point."""

    def __init__(self, world: World) -> None:
        self.world = world

    def send(self, messages: Sequence[OutgoingMessage]) -> SendResult:
        world = self.world
        options = [OK]
        if world.used[DUP] < world.budget.dups:
            options.append(DUP)
        if world.used[CRASH] < world.budget.crashes:
            options.append(CRASH)
        runs = ",".join(f"{m.body.get('run_id')}v{m.body.get('version')}" for m in messages)
        option = world.store._point(Call("send", f"send {runs}", tuple(options)))
        result = world.mq.send(messages)
        if option == DUP:
            world.mq.send(messages)
        world.seen_by_actor("sent")
        world.check_invariants()
        if option == CRASH:
            raise Crash
        return result


class PointDeadLetters:
    """A job's own dead-letter queue (issue 38), as the explored actors send to it: each send is
    a scheduling point, which fails (the queue did not answer) while the budget's ``unanswered``
    allows; every letter that reached it is kept for the checks (``_dead_letters``)."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.sent: list[dict[str, Any]] = []

    def send(self, queue_arn: str, body: str, deduplication_id: str) -> None:  # noqa: ARG002
        world = self.world
        options = (OK, UNANSWERED) if world.used[UNANSWERED] < world.budget.unanswered else (OK,)
        option = world.store._point(Call("send", f"send dead letter {deduplication_id}", options))
        if option == UNANSWERED:
            world.seen_by_actor("unanswered")
            raise ConnectionError("explorer: the dead-letter queue did not answer")
        self.sent.append(json.loads(body))
        world.seen_by_actor("sent")


def _key(key: Item) -> str:
    return ",".join(str(v) for v in key.values())


def _op_key(op: WriteOp) -> str:
    if isinstance(op, Put):
        return str(op.item.get("run_id") or op.item.get("job_id"))
    return str(op.key.get("run_id") or op.key.get("job_id"))
