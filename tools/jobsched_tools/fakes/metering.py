"""A MemoryStore that meters DynamoDB's capacity units, write by write, by DynamoDB's rules.

The benchmark used to estimate a run's write units with a hand-written model of each step; a
model drifts from the code it describes. This store charges every request the real services make
as DynamoDB would (docs/benchmarks.md, "Write units", with the sources):

- a standard write costs ``ceil(size / 1 KB)`` write units, sized by the larger of the item
  before and after it; in a ``TransactWriteItems`` every item costs twice that ("Capacity unit
  consumption for write operations"; "Capacity management for transactions");
- a write also writes each global secondary index whose entry it changes, sized by the index
  entry (its projection): one write when the item enters or leaves the index, two (a delete and a
  put) when its index key changes, one when a projected attribute changes; never doubled by a
  transaction ("Managing global secondary indexes: provisioned throughput considerations";
  "Synchronizing data between tables and global secondary indexes":
  https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/GSI.html#GSI.Writes);
- a read costs ``ceil(size / 4 KB)`` read units, half for an eventually consistent one; a query
  charges the bytes it returns (at least one unit per page).

The indexes are those the store's tables have (MemoryStore's ``indexes``/``extra_indexes``: one
deployed shape's, ``ports.DEPLOYED_INDEXES``; legacy's by default), each with its projection from
template.yaml, the deployed schema itself, or from its definition in ports where the template
lacks it, charged by the same rules: the store charges what that shape's deployed tables would.
Charges are kept per label (``claim``, ``start run``, ``heartbeat``, ...), so a caller can tell
what each step of a run costs.
"""

from __future__ import annotations

import functools
import math
import threading
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jobsched.core.limits import item_size
from jobsched.core.writes import Check, Cond, Delete, Item, Put, Update, WriteOp
from jobsched.ports import INDEX_TABLE, TABLE_KEY, IndexName, Page, index_definition

from jobsched_tools.emulator.provision import load_template, table_specs
from jobsched_tools.fakes.memory_store import MemoryStore

KB = 1024
READ_CHUNK = 4 * KB
LOGICAL_TABLE = {"JobsTable": "jobs", "StateTable": "state", "RunsTable": "runs"}


@dataclass(frozen=True)
class Index:
    name: str
    table: str
    keys: tuple[str, ...]
    projection: str  # ALL, KEYS_ONLY or INCLUDE
    include: tuple[str, ...] = ()
    table_keys: tuple[str, ...] = ()

    def entry(self, item: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """The item's entry in this index, or None when it is not in it (sparse)."""
        if item is None or any(item.get(key) is None for key in self.keys):
            return None
        if self.projection == "ALL":
            return dict(item)
        names = (*self.keys, *self.table_keys, *(self.include if self.projection == "INCLUDE" else ()))
        return {name: item[name] for name in names if item.get(name) is not None}


def template_indexes() -> list[Index]:
    """Every GSI of the template's tables, with its projection."""
    return list(_template_indexes())


@functools.cache
def _template_indexes() -> tuple[Index, ...]:
    # Parsed once per process: template.yaml takes seconds to load, and a benchmark or a test
    # makes many stores (the indexes are frozen dataclasses, safe to share).
    # Every claim index the template makes: ClaimShape migrating has all three.
    indexes = []
    specs = table_specs(load_template(), {"ClaimShape": "migrating"})
    for logical_id, table in LOGICAL_TABLE.items():
        props = specs[logical_id]
        table_keys = tuple(k["AttributeName"] for k in props["KeySchema"])
        for gsi in props.get("GlobalSecondaryIndexes", []):
            projection = gsi["Projection"]
            indexes.append(
                Index(
                    gsi["IndexName"],
                    table,
                    tuple(k["AttributeName"] for k in gsi["KeySchema"]),
                    projection["ProjectionType"],
                    tuple(projection.get("NonKeyAttributes", ())),
                    table_keys,
                )
            )
    return tuple(indexes)


def code_index(name: str) -> Index:
    """An index defined in ports (``index_definition``) that template.yaml lacks, as the meter
    charges it: the same shape ``_template_indexes`` reads from the template."""
    definition = index_definition(name)
    table = INDEX_TABLE[name]
    return Index(
        name,
        table,
        tuple(key["AttributeName"] for key in definition["KeySchema"]),
        definition["Projection"]["ProjectionType"],
        tuple(definition["Projection"].get("NonKeyAttributes", ())),
        TABLE_KEY[table],
    )


def write_units(size: int) -> int:
    return max(1, math.ceil(size / KB))


def read_units(size: int, consistent: bool) -> float:
    units = max(1, math.ceil(size / READ_CHUNK))
    return float(units) if consistent else units / 2


class MeteringStore(MemoryStore):
    """MemoryStore charging DynamoDB's capacity units per request (``units``, ``by_label``)."""

    def __init__(
        self,
        extra_keys: Mapping[str, tuple[str, ...]] | None = None,
        extra_indexes: Iterable[str] = (),
        *,
        indexes: Iterable[str] | None = None,
    ) -> None:
        super().__init__(extra_keys, extra_indexes, indexes=indexes)
        from_template = {index.name: index for index in template_indexes()}
        self.indexes = [from_template.get(name) or code_index(name) for name in sorted(self.deployed_indexes)]
        self._meter_lock = threading.Lock()
        self.write_units: Counter[str] = Counter()  # by table or index
        self.by_label: Counter[str] = Counter()  # write units by the operation's label
        self.read_units = 0.0

    # --- reads ----------------------------------------------------------------------------------

    def get(self, table: str, key: Item, consistent: bool = True) -> Item | None:
        item = super().get(table, key, consistent)
        self._charge_read(item_size(item or {}), consistent)
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
        page = super().query(index, partition, sort_from, sort_to, limit, cursor, consistent)
        self._charge_read(sum(item_size(item) for item in page.items), consistent=consistent)
        return page

    def scan(self, table: str, limit: int = 100, cursor: dict[str, Any] | None = None) -> Page:
        # A Scan is charged by the total size of the items it read, not item by item.
        page = super().scan(table, limit, cursor)
        self._charge_read(sum(item_size(item) for item in page.items), consistent=False)
        return page

    def batch_get(self, table: str, keys: Sequence[Item], consistent: bool = False) -> list[Item]:
        # BatchGetItem is charged as a GetItem of each item read (rounded up to 4 KB each).
        items = super().batch_get(table, keys, consistent)
        for item in items:
            self._charge_read(item_size(item), consistent)
        return items

    def occurrence_items(self, job_id: str, page_limit: int | None = None) -> list[Item]:
        # HC12's read (issue 37): strongly consistent, charged by the size of what it returns (as
        # one page: a job's occurrence items are well under a page's 1 MB).
        items = super().occurrence_items(job_id, page_limit)
        self._charge_read(sum(item_size(item) for item in items), consistent=True)
        return items

    def _charge_read(self, size: int, consistent: bool) -> None:
        with self._meter_lock:
            self.read_units += read_units(size, consistent)

    # --- writes ---------------------------------------------------------------------------------

    def write(self, ops: Sequence[WriteOp]) -> None:
        befores = self._befores(ops)
        super().write(ops)
        self._charge(ops, befores, transactional=len(ops) > 1 or isinstance(ops[0], Check))

    def update(self, op: Update) -> Item:
        befores = self._befores([op])
        after = super().update(op)
        self._charge([op], befores, transactional=False)
        return after

    def delete(self, table: str, key: Item, condition: tuple[Cond, ...] = (), label: str = "delete") -> None:
        before = super().get(table, key)
        super().delete(table, key, condition, label)
        op = Check(table, key, condition, label)
        self._charge_item(op, before, None, transactional=False)

    def _befores(self, ops: Sequence[WriteOp]) -> list[Item | None]:
        with self._lock:
            return [self._table(op.table).get(self._target(op)) for op in ops]

    def _charge(self, ops: Sequence[WriteOp], befores: list[Item | None], transactional: bool) -> None:
        for op, before in zip(ops, befores, strict=True):
            if isinstance(op, Check):
                # A ConditionCheck in a transaction is charged as a write of the item's size.
                self._charge_table(op, write_units(item_size(before or {})) * 2)
                continue
            after = super().get(op.table, self._key_of_op(op))
            self._charge_item(op, before, after, transactional)

    def _key_of_op(self, op: Put | Update | Delete) -> Item:
        return self._key_of(op.table, op.item) if isinstance(op, Put) else dict(op.key)

    def _charge_item(self, op: WriteOp, before: Item | None, after: Item | None, transactional: bool) -> None:
        size = max(item_size(before or {}), item_size(after or {}))
        self._charge_table(op, write_units(size) * (2 if transactional else 1))
        for index in self.indexes:
            if index.table == op.table:
                units = _index_units(index, before, after)
                if units:
                    with self._meter_lock:
                        self.write_units[f"{op.table}/{index.name}"] += units
                        self.by_label[op.label] += units

    def _charge_table(self, op: WriteOp, units: int) -> None:
        with self._meter_lock:
            self.write_units[op.table] += units
            self.by_label[op.label] += units

    def total_write_units(self) -> int:
        with self._meter_lock:
            return sum(self.write_units.values())

    def reset_meters(self) -> None:
        with self._meter_lock:
            self.write_units.clear()
            self.by_label.clear()
            self.read_units = 0.0


def _index_units(index: Index, before: Item | None, after: Item | None) -> int:
    old, new = index.entry(before), index.entry(after)
    if old is None and new is None:
        return 0
    if old is None:
        return write_units(item_size(new or {}))
    if new is None:
        return write_units(item_size(old))
    if any(old.get(key) != new.get(key) for key in index.keys):
        return write_units(item_size(old)) + write_units(item_size(new))
    return write_units(item_size(new)) if old != new else 0
