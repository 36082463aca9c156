"""An in-memory Store with DynamoDB's semantics, for the chaos simulation and fast tests.

It passes the same contract tests as ``DynamoStore`` (tests/contract), which is what makes the
simulation's evidence about the conditions carry over to DynamoDB. A lock makes each write
atomic, as DynamoDB's per-item (and per-transaction) atomicity does.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Sequence
from typing import Any

from jobsched.core.errors import ConditionFailed
from jobsched.core.writes import (
    JOBS,
    RUNS,
    MAX_TRANSACTION_ITEMS,
    Check,
    Item,
    Put,
    Update,
    WriteOp,
    conditions_hold,
)
from jobsched.ports import INDEX_KEYS, INDEX_TABLE, IndexName, Page

KEYS = {JOBS: "job_id", RUNS: "run_id"}


class MemoryStore:
    def __init__(self) -> None:
        self.tables: dict[str, dict[Any, Item]] = {JOBS: {}, RUNS: {}}
        self._lock = threading.RLock()
        self.request_counts: dict[str, int] = {}

    def _count(self, kind: str) -> None:
        self.request_counts[kind] = self.request_counts.get(kind, 0) + 1

    def _table(self, name: str) -> dict[Any, Item]:
        return self.tables.setdefault(name, {})

    @staticmethod
    def _key_value(table: str, key: Item) -> Any:
        return tuple(sorted(key.items())) if table not in KEYS else key[KEYS[table]]

    def get(self, table: str, key: Item, consistent: bool = True) -> Item | None:
        with self._lock:
            self._count("GetItem")
            item = self._table(table).get(self._key_value(table, key))
            return copy.deepcopy(item) if item is not None else None

    def query(
        self,
        index: IndexName,
        partition: Any,
        sort_from: int | None = None,
        sort_to: int | None = None,
        limit: int = 100,
        cursor: dict[str, Any] | None = None,
    ) -> Page:
        pk, sk = INDEX_KEYS[index]
        key_attr = KEYS[INDEX_TABLE[index]]
        with self._lock:
            self._count("Query")
            matches = [
                item
                for item in self._table(INDEX_TABLE[index]).values()
                if item.get(pk) == partition
                and sk in item
                and (sort_from is None or item[sk] >= sort_from)
                and (sort_to is None or item[sk] <= sort_to)
            ]
            matches.sort(key=lambda item: (item[sk], item[key_attr]))
            if cursor is not None:
                after = (cursor[sk], cursor[key_attr])
                matches = [m for m in matches if (m[sk], m[key_attr]) > after]
            page = matches[:limit]
            more = len(matches) > limit
            next_cursor = {sk: page[-1][sk], key_attr: page[-1][key_attr]} if more and page else None
            return Page([copy.deepcopy(item) for item in page], next_cursor)

    def scan(self, table: str, limit: int = 100, cursor: dict[str, Any] | None = None) -> Page:
        with self._lock:
            self._count("Scan")
            keys = sorted(self._table(table))
            if cursor is not None:
                keys = [k for k in keys if k > cursor["key"]]
            page = keys[:limit]
            next_cursor = {"key": page[-1]} if len(keys) > limit and page else None
            return Page([copy.deepcopy(self._table(table)[k]) for k in page], next_cursor)

    def write(self, ops: Sequence[WriteOp]) -> None:
        if not ops:
            return
        if len(ops) > MAX_TRANSACTION_ITEMS:
            raise ValueError(f"a transaction holds at most {MAX_TRANSACTION_ITEMS} operations")
        with self._lock:
            self._count("TransactWriteItems" if len(ops) > 1 else type(ops[0]).__name__ + "Item")
            for index, op in enumerate(ops):
                current = self._current(op)
                if not conditions_hold(op.condition, current):
                    raise ConditionFailed(index, op.label, copy.deepcopy(current))
            for op in ops:
                self._apply(op)

    def update(self, op: Update) -> Item:
        with self._lock:
            self._count("UpdateItem")
            current = self._current(op)
            if not conditions_hold(op.condition, current):
                raise ConditionFailed(0, op.label, copy.deepcopy(current))
            return copy.deepcopy(self._apply(op))

    def delete(self, table: str, key: Item) -> None:
        with self._lock:
            self._count("DeleteItem")
            self._table(table).pop(self._key_value(table, key), None)

    def _current(self, op: WriteOp) -> Item | None:
        key = op.item if isinstance(op, Put) else op.key
        if isinstance(op, Put):
            key = {KEYS[op.table]: op.item[KEYS[op.table]]} if op.table in KEYS else op.item
        return self._table(op.table).get(self._key_value(op.table, key))

    def _apply(self, op: WriteOp) -> Item:
        table = self._table(op.table)
        if isinstance(op, Check):
            return {}
        if isinstance(op, Put):
            item = copy.deepcopy(op.item)
            key = {KEYS[op.table]: item[KEYS[op.table]]} if op.table in KEYS else item
            table[self._key_value(op.table, key)] = item
            return item
        key_value = self._key_value(op.table, op.key)
        item = copy.deepcopy(table.get(key_value)) or dict(op.key)
        item.update(copy.deepcopy(op.set))
        for name, value in op.set_if_missing.items():
            item.setdefault(name, copy.deepcopy(value))
        for name, amount in op.add.items():
            item[name] = int(item.get(name, 0)) + amount
        for name in op.remove:
            item.pop(name, None)
        table[key_value] = item
        return item
