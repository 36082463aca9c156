"""An in-memory Store with DynamoDB's semantics, for the chaos simulation and fast tests.

It passes the same contract tests as ``DynamoStore`` (tests/contract), which is what makes the
simulation's evidence about the conditions carry over to DynamoDB. A lock makes each write
atomic, as DynamoDB's per-item (and per-transaction) atomicity does.

DynamoDB rules it enforces, so that code which works here also works there:

- a top-level attribute set to ``None`` is absent (a Put drops it, an Update removes it), as the
  core's conditions treat it; ``None`` nested in a map or list is kept;
- floats are rejected (``TypeError``, as boto3's serializer does): instants are integer ms;
- a transaction touches each item at most once, an update names each attribute once, and key
  attributes cannot be changed or removed (``ValueError``, where DynamoDB says
  ``ValidationException``);
- DynamoDB's size limits (``core/limits.py``): an item written past 400 KB, and a transaction of
  more than 100 operations or more than 4 MB of items (counted as they are after the write),
  raise ``RequestTooLarge`` before anything is written, as DynamoDB rejects them;
- tables other than "jobs", "state" and "runs" (the worker's staged user effects) need their key
  attributes declared: ``MemoryStore(extra_keys={"effects": ("pk",)})``; an undeclared table
  learns its key from the first get/update/check/delete on it;
- the tables have the claim indexes of one deployed shape (template.yaml's ``ClaimShape``,
  ``ports.DEPLOYED_INDEXES``): ``MemoryStore(indexes=DEPLOYED_INDEXES["successor"])`` has ``due``
  alone; by default legacy's ``next-run`` and ``lease``, plus any of ``extra_indexes``
  (``extra_indexes=("due",)``: a migrating stack's). A query of an index the store lacks raises
  ``ValueError``, as DynamoDB rejects a Query naming an index the table lacks (ValidationException,
  "The table does not have the specified index"), so a test fails if any path queries one.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from jobsched.core.errors import ConditionFailed
from jobsched.core.limits import check_item_size, check_transaction, item_size
from jobsched.core.occurrences import occurrence_key_range
from jobsched.core.writes import (
    JOBS,
    RUNS,
    STATE,
    Check,
    Cond,
    Delete,
    Item,
    Put,
    Update,
    WriteOp,
    conditions_hold,
)
from jobsched.ports import (
    BASE_QUERIES,
    BATCH_GET_MAX_KEYS,
    DEPLOYED_INDEXES,
    INDEX_KEYS,
    INDEX_PROJECTION,
    INDEX_TABLE,
    TABLE_KEY,
    IndexName,
    Page,
)

KEYS = TABLE_KEY  # template.yaml's key schemas: the runs table's key is (job_id, run_id)


def _check_value(value: Any, where: str) -> None:
    if isinstance(value, float):
        raise TypeError(f"{where}: float values are not supported (use integer milliseconds)")
    if isinstance(value, dict):
        for k, v in value.items():
            _check_value(v, f"{where}.{k}")
    elif isinstance(value, list | tuple | set):
        for v in value:
            _check_value(v, where)


# Every global secondary index the code defines (ports.INDEX_KEYS less the base-table queries).
ALL_INDEXES = frozenset(name for name in INDEX_KEYS if name not in BASE_QUERIES)
LEGACY_INDEXES = DEPLOYED_INDEXES["legacy"]


class MemoryStore:
    def __init__(
        self,
        extra_keys: Mapping[str, tuple[str, ...]] | None = None,
        extra_indexes: Iterable[str] = (),
        *,
        indexes: Iterable[str] | None = None,
    ) -> None:
        base = LEGACY_INDEXES if indexes is None else frozenset(indexes)
        # The global secondary indexes the tables have (module docstring).
        self.deployed_indexes = base | frozenset(extra_indexes)
        unknown = self.deployed_indexes - ALL_INDEXES
        if unknown:
            raise ValueError(f"{sorted(unknown)}: not an index the code defines (ports.INDEX_KEYS)")
        # Those beyond legacy's (``due`` on a migrating or successor stack's tables).
        self.extra_indexes = self.deployed_indexes - LEGACY_INDEXES
        self.tables: dict[str, dict[Any, Item]] = {JOBS: {}, STATE: {}, RUNS: {}}
        self.key_schema: dict[str, tuple[str, ...]] = dict(KEYS)
        self.key_schema.update({table: tuple(attrs) for table, attrs in (extra_keys or {}).items()})
        self._lock = threading.RLock()
        self.request_counts: dict[str, int] = {}

    def _count(self, kind: str) -> None:
        self.request_counts[kind] = self.request_counts.get(kind, 0) + 1

    def _table(self, name: str) -> dict[Any, Item]:
        return self.tables.setdefault(name, {})

    def _key_names(self, table: str, key: Mapping[str, Any] | None = None) -> tuple[str, ...]:
        names = self.key_schema.get(table)
        if names is None:
            if key is None:
                raise ValueError(
                    f"table {table!r} has no declared key: MemoryStore(extra_keys={{{table!r}: (...)}})"
                )
            names = self.key_schema[table] = tuple(sorted(key))
        return names

    def _key_value(self, table: str, key: Mapping[str, Any], *, from_item: bool = False) -> Any:
        """The dict key of an item: the bare value for a one-attribute key ("jobs", "state":
        ``tables["jobs"][job_id]``), else a tuple of the values in key-schema order ("runs":
        ``tables["runs"][(job_id, run_id)]``). A key with an attribute missing or extra raises
        ``ValueError``, as DynamoDB's ValidationException."""
        names = self._key_names(table, None if from_item else key)
        if not from_item and set(key) != set(names):
            raise ValueError(f"key {sorted(key)} does not match table {table!r}'s key {list(names)}")
        missing = [name for name in names if key.get(name) is None]
        if missing:
            raise ValueError(f"table {table!r}: item lacks key attribute(s) {missing}")
        return key[names[0]] if len(names) == 1 else tuple(key[name] for name in names)

    def _key_of(self, table: str, item: Mapping[str, Any]) -> Item:
        return {name: item[name] for name in self._key_names(table)}

    def get(self, table: str, key: Item, consistent: bool = True) -> Item | None:  # noqa: ARG002 - always consistent
        with self._lock:
            self._count("GetItem")
            item = self._table(table).get(self._key_value(table, key))
            return copy.deepcopy(item) if item is not None else None

    def get_attributes(
        self, table: str, key: Item, names: Sequence[str], consistent: bool = True
    ) -> Item | None:
        """A GetItem with a ProjectionExpression (ports.AttributeRead): counted as a GetItem."""
        item = self.get(table, key, consistent)
        return None if item is None else {name: item[name] for name in names if name in item}

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
        base = index in BASE_QUERIES
        if base and (sort_from is not None or sort_to is not None):
            raise ValueError(f"{index!r} queries a table's key: it takes no sort bounds")
        if consistent and not base:
            raise ValueError(f"{index!r} is a global secondary index: it has no consistent reads")
        if not base and index not in self.deployed_indexes:
            raise ValueError(
                f"the {INDEX_TABLE[index]} table does not have the specified index: {index!r} "
                f"(this store's tables have {sorted(self.deployed_indexes)}: ports.DEPLOYED_INDEXES)"
            )
        pk, sk = INDEX_KEYS[index]
        key_attr = KEYS[INDEX_TABLE[index]][-1]  # the table key's last attribute: unique in a partition
        with self._lock:
            self._count("Query")
            matches = [
                item
                for item in self._table(INDEX_TABLE[index]).values()
                if pk in item
                and item[pk] == partition
                and type(item[pk]) is type(partition)
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
            if not base:
                projected = INDEX_PROJECTION[index]  # as DynamoDB returns the index's entries
                page = [{k: item[k] for k in projected if k in item} for item in page]
            return Page([copy.deepcopy(item) for item in page], next_cursor)

    def scan(self, table: str, limit: int = 100, cursor: dict[str, Any] | None = None) -> Page:
        """Items in key order; the cursor is the last item's key (as DynamoDB's LastEvaluatedKey)."""
        with self._lock:
            self._count("Scan")
            rows = self._table(table)
            # Any deterministic total order will do (DynamoDB's is by key hash); repr orders
            # strings and tuples of strings alike.
            keys = sorted(rows, key=repr)
            if cursor is not None:
                after = repr(self._key_value(table, cursor))
                keys = [k for k in keys if repr(k) > after]
            page = keys[:limit]
            next_cursor = self._key_of(table, rows[page[-1]]) if len(keys) > limit and page else None
            return Page([copy.deepcopy(rows[k]) for k in page], next_cursor)

    def batch_get(self, table: str, keys: Sequence[Item], consistent: bool = False) -> list[Item]:  # noqa: ARG002 - always consistent
        if len(keys) > BATCH_GET_MAX_KEYS:
            raise ValueError(f"BatchGetItem reads at most {BATCH_GET_MAX_KEYS} keys, not {len(keys)}")
        with self._lock:
            self._count("BatchGetItem")
            values = [self._key_value(table, key) for key in keys]
            if len(set(map(repr, values))) != len(values):
                raise ValueError("BatchGetItem: the keys must be distinct")  # as DynamoDB rejects them
            rows = self._table(table)
            return [copy.deepcopy(rows[value]) for value in values if value in rows]

    # --- HC12's read of a job's occurrence items (issue 37; ports.OccurrenceQuery) -------------

    def occurrence_items(self, job_id: str, page_limit: int | None = None) -> list[Item]:
        """As DynamoStore's: newest first, page by page. Each page is read under the lock and the
        next one after it, so a write between two pages is seen as DynamoDB would show it."""
        if page_limit is not None and page_limit < 1:
            raise ValueError(f"a Query's Limit is at least 1, not {page_limit}")  # as DynamoDB's
        low, high = occurrence_key_range(job_id)
        found: list[Item] = []
        cursor: str | None = None
        while True:
            with self._lock:
                self._count("Query")
                keys = sorted(
                    (
                        run_id
                        for (partition, run_id) in self._table(RUNS)
                        if partition == job_id
                        and low <= run_id <= high
                        and (cursor is None or run_id < cursor)
                    ),
                    reverse=True,
                )
                page = keys[:page_limit] if page_limit is not None else keys
                found += [copy.deepcopy(self._table(RUNS)[(job_id, run_id)]) for run_id in page]
            if len(page) == len(keys) or not page:
                return found
            cursor = page[-1]

    def write(self, ops: Sequence[WriteOp]) -> None:
        if not ops:
            return
        for op in ops:
            self._validate(op)
        with self._lock:
            single = len(ops) == 1 and not isinstance(ops[0], Check)
            if not single:
                check_transaction([0] * len(ops))  # the count, before anything else
            self._count(type(ops[0]).__name__ + "Item" if single else "TransactWriteItems")
            targets = [(op.table, self._target(op)) for op in ops]
            if len(set(targets)) != len(targets):
                raise ValueError("a transaction may touch each item only once")
            currents = [self._table(op.table).get(targets[index][1]) for index, op in enumerate(ops)]
            self._check_sizes(ops, currents, single)
            for index, op in enumerate(ops):
                if not conditions_hold(op.condition, currents[index]):
                    raise ConditionFailed(index, op, copy.deepcopy(currents[index]))
            for op in ops:
                self._apply(op)

    def update(self, op: Update) -> Item:
        self._validate(op)
        with self._lock:
            self._count("UpdateItem")
            current = self._table(op.table).get(self._target(op))
            self._check_sizes([op], [current], single=True)
            if not conditions_hold(op.condition, current):
                raise ConditionFailed(0, op, copy.deepcopy(current))
            return copy.deepcopy(self._apply(op))

    def delete(self, table: str, key: Item, condition: tuple[Cond, ...] = (), label: str = "delete") -> None:
        with self._lock:
            self._count("DeleteItem")
            current = self._table(table).get(self._key_value(table, key))
            if not conditions_hold(condition, current):
                raise ConditionFailed(0, Check(table, key, condition, label), copy.deepcopy(current))
            self._table(table).pop(self._key_value(table, key), None)

    def _check_sizes(self, ops: Sequence[WriteOp], currents: Sequence[Item | None], single: bool) -> None:
        """DynamoDB's size limits, on the items as the write would leave them."""
        sizes = []
        for op, current in zip(ops, currents, strict=True):
            if isinstance(op, Delete):
                sizes.append(item_size(dict(op.key)))  # a delete writes no item: its key counts
                continue
            after = current if isinstance(op, Check) else self._preview(op, current)
            if not isinstance(op, Check):
                check_item_size(after or {}, op.label)
            sizes.append(item_size(after or {}))
        if not single:
            check_transaction(sizes)

    def _preview(self, op: Put | Update, current: Item | None) -> Item:
        if isinstance(op, Put):
            return {k: v for k, v in op.item.items() if v is not None}
        item = dict(current) if current is not None else dict(op.key)
        for name, value in (*op.set.items(), *op.set_if_missing.items()):
            if value is None:
                item.pop(name, None)
            else:
                item[name] = value
        for name, amount in op.add.items():
            item[name] = int(item.get(name, 0)) + amount
        for name in op.remove:
            item.pop(name, None)
        return item

    def _target(self, op: WriteOp) -> Any:
        if isinstance(op, Put):
            return self._key_value(op.table, op.item, from_item=True)
        return self._key_value(op.table, op.key)

    @staticmethod
    def _validate(op: WriteOp) -> None:
        if isinstance(op, Put):
            _check_value(op.item, op.label)
            return
        if isinstance(op, Check | Delete):
            return
        _check_value(op.set, op.label)
        _check_value(op.set_if_missing, op.label)
        named = [*op.set, *op.set_if_missing, *op.remove, *op.add]
        if len(set(named)) != len(named):
            raise ValueError(f"{op.label}: an update names each attribute once (DynamoDB: overlapping paths)")
        for name in [*op.remove, *op.add, *op.set_if_missing]:
            if name in op.key:
                raise ValueError(f"{op.label}: cannot change key attribute {name}")
        for name, value in op.set.items():
            if name in op.key and op.key[name] != value:
                raise ValueError(f"{op.label}: cannot change key attribute {name}")

    def _apply(self, op: WriteOp) -> Item:
        table = self._table(op.table)
        if isinstance(op, Check):
            return {}
        if isinstance(op, Delete):
            table.pop(self._target(op), None)
            return {}
        if isinstance(op, Put):
            item = {k: copy.deepcopy(v) for k, v in op.item.items() if v is not None}
            table[self._target(op)] = item
            return item
        key_value = self._target(op)
        old = table.get(key_value)
        item = copy.deepcopy(old) if old is not None else dict(op.key)
        for name, value in op.set.items():
            if value is None:
                item.pop(name, None)
            else:
                item[name] = copy.deepcopy(value)
        for name, value in op.set_if_missing.items():
            if value is not None and (old is None or name not in old):
                item[name] = copy.deepcopy(value)
        for name, amount in op.add.items():
            item[name] = int(item.get(name, 0)) + amount
        for name in op.remove:
            item.pop(name, None)
        table[key_value] = item
        return item
