"""The simulation's in-memory store: ``MemoryStore`` with a faster lease-index query and faster
copies, the same answers (the simulation's runs table grows to tens of thousands of items and
the detector queries it every minute). The ``due`` index of the successor claim (issue 37) shares
the ``lease`` index's keys (``lease_shard``, ``check_at``), so the same set of entries answers it,
projected as ``due`` projects (a world built with ``extra_indexes=("due",)``)."""

from __future__ import annotations

from typing import Any

from jobsched.core.errors import ConditionFailed
from jobsched.core.writes import (
    RUNS,
    Check,
    Delete,
    Item,
    Put,
    Update,
    WriteOp,
    conditions_hold,
)
from jobsched.ports import (
    INDEX_KEYS,
    INDEX_PROJECTION,
    IndexName,
    Page,
)

from jobsched_tools.fakes.memory_store import MemoryStore


class LeaseIndexedMemoryStore(MemoryStore):
    """MemoryStore whose ``lease`` index query looks only at leased runs: the simulation's runs
    table grows to tens of thousands of items and the detector queries it every minute. Same
    answers as MemoryStore (the items are filtered and ordered by the same rules)."""

    def __init__(
        self, extra_keys: dict[str, tuple[str, ...]] | None = None, extra_indexes: tuple[str, ...] = ()
    ) -> None:
        super().__init__(extra_keys, extra_indexes)
        self._leased: dict[Any, None] = {}  # the runs table's keys (job_id, run_id) of leased runs

    def get(self, table: str, key: Item, consistent: bool = True) -> Item | None:  # noqa: ARG002 - always consistent
        with self._lock:
            self._count("GetItem")
            item = self._table(table).get(self._key_value(table, key))
            return _copy(item) if item is not None else None

    def update(self, op: Update) -> Item:
        self._validate(op)
        with self._lock:
            self._count("UpdateItem")
            current = self._table(op.table).get(self._target(op))
            self._check_sizes([op], [current], single=True)
            if not conditions_hold(op.condition, current):
                raise ConditionFailed(0, op, _copy(current))
            updated: Item = _copy(self._apply(op))
            return updated

    def _apply(self, op: WriteOp) -> Item:
        item = self._apply_fast(op)
        if op.table == RUNS and not isinstance(op, Check):
            key = self._target(op)
            if "check_at" in item and "lease_shard" in item:
                self._leased[key] = None
            else:
                self._leased.pop(key, None)
        return item

    def _apply_fast(self, op: WriteOp) -> Item:
        """MemoryStore._apply with a plain-data copy instead of copy.deepcopy (items hold only
        dicts, lists and scalars), the simulation's hottest path."""
        table = self._table(op.table)
        if isinstance(op, Check):
            return {}
        if isinstance(op, Delete):
            table.pop(self._target(op), None)
            return {}
        if isinstance(op, Put):
            item = {k: _copy(v) for k, v in op.item.items() if v is not None}
            table[self._target(op)] = item
            return item
        key_value = self._target(op)
        old = table.get(key_value)
        # Stored items are never handed out or mutated in place, so the new version may share
        # the unchanged nested values of the old one.
        item = dict(old) if old is not None else dict(op.key)
        for name, value in op.set.items():
            if value is None:
                item.pop(name, None)
            else:
                item[name] = _copy(value)
        for name, value in op.set_if_missing.items():
            if value is not None and (old is None or name not in old):
                item[name] = _copy(value)
        for name, amount in op.add.items():
            item[name] = int(item.get(name, 0)) + amount
        for name in op.remove:
            item.pop(name, None)
        table[key_value] = item
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
        fast = index == "lease" or (index == "due" and index in self.extra_indexes)
        if not fast or consistent:  # MemoryStore answers (or refuses) the others
            return super().query(index, partition, sort_from, sort_to, limit, cursor, consistent)
        pk, sk = INDEX_KEYS[index]
        with self._lock:
            self._count("Query")
            runs = self.tables[RUNS]
            matches = []
            for key in self._leased:
                item = runs.get(key)
                if (
                    item is not None
                    and pk in item
                    and item[pk] == partition
                    and type(item[pk]) is type(partition)
                    and sk in item
                    and (sort_from is None or item[sk] >= sort_from)
                    and (sort_to is None or item[sk] <= sort_to)
                ):
                    matches.append(item)
            matches.sort(key=lambda item: (item[sk], item["run_id"]))
            if cursor is not None:
                after = (cursor[sk], cursor["run_id"])
                matches = [m for m in matches if (m[sk], m["run_id"]) > after]
            page = matches[:limit]
            more = len(matches) > limit
            next_cursor = {sk: page[-1][sk], "run_id": page[-1]["run_id"]} if more and page else None
            # The lease index holds keys only, the due index its INCLUDE list, as on DynamoDB.
            projected = INDEX_PROJECTION[index]
            return Page([{k: _copy(item[k]) for k in projected if k in item} for item in page], next_cursor)


def _copy(value: Any) -> Any:
    """A deep copy of plain data (dicts, lists, scalars), several times faster than deepcopy."""
    kind = type(value)
    if kind is dict:
        return {k: _copy(v) for k, v in value.items()}
    if kind is list:
        return [_copy(v) for v in value]
    return value
