"""Make a long-running moto server cost what DynamoDB does: memory and time independent of how
long it has run and how big its tables are.

Four patches to moto's internals, applied with ``apply()`` to the process that hosts the server
(the local stack, ``python -m jobsched_tools.emulator.local_moto --fast-transactions`` and the bench's
server process). They change what moto keeps, never what it answers:

* **Transactions back up only the items they name.** moto backs up every table a
  ``TransactWriteItems`` names with ``copy.deepcopy`` before applying it, so each transaction costs
  time proportional to the whole table (and its stream), about 100 ms at a few hundred items; a
  cancelled one then *replaces* the table object with the copy. Here the backup is of the named
  items, restored if the transaction is cancelled, together with the stream records the cancelled
  transaction appended (DynamoDB never streams a cancelled transaction). Tables with a sort key,
  or any operation that does not name its hash key, keep moto's own whole-table backup.
* **No instance tracking.** Every moto model object (each table backup, item, stream record,
  shard iterator, SQS message) is appended to a class-level ``instances_tracked`` list that only
  moto's debug dashboard reads and that nothing empties but a reset. With whole-table backups
  per transaction, the local stack grew from 120 MB to 3 GB in 15 minutes.
* **Stream shard iterators expire** 15 minutes after they are issued, as DynamoDB's do. moto keeps
  every iterator (one more per ``GetRecords``) in a dict forever, each holding its shard.
* **A Query reads its partition, not the table.** moto answers every ``Query`` by sorting every
  item of the table and testing each (``Table.all_items``), so a Query's time grows with the
  table, where DynamoDB's grows with what it returns. A table Query here starts from its
  partition's items; a global secondary index Query from the items ever seen with its partition
  value (a superset kept as items are put, updated and restored, checked item by item against the
  table when read). moto's own key conditions, sort, filter and paging then run unchanged on
  that smaller list. Without it, a successor stack's ``due`` index (on the runs table, which grows
  with every run) made each trigger tick's shard Queries slower the longer a benchmark ran, and
  its start lag measured moto (docs/benchmarks.md, "Start lag and the emulator").
"""

from __future__ import annotations

import copy
import threading
import time
import types
from typing import Any

ITERATOR_TTL_S = 15 * 60
_applied = False
_local = threading.local()


def apply() -> None:
    global _applied
    if _applied:
        return
    _fast_transactions()
    _no_instance_tracking()
    _expiring_shard_iterators()
    _partition_queries()
    _applied = True


def _fast_transactions() -> None:
    from moto.dynamodb import models
    from moto.dynamodb.models.dynamo_type import DynamoType
    from moto.dynamodb.models.table import Table

    real_deepcopy = copy.deepcopy

    def deepcopy(value: Any, memo: Any = None) -> Any:
        # Inside moto's DynamoDB backend only: a Table "backup" is the table itself; we restore
        # the touched items ourselves below.
        if isinstance(value, Table) and getattr(_local, "fast", False):
            return value
        return real_deepcopy(value, memo)

    shim = types.SimpleNamespace(
        **{name: getattr(copy, name) for name in dir(copy) if not name.startswith("__")}
    )
    shim.deepcopy = deepcopy
    setattr(models, "copy", shim)  # noqa: B010  (the module global moto's code reads)

    original = models.DynamoDBBackend.transact_write_items

    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        saved: list[tuple[Any, Any, Any, Any]] = []  # (table, hash, range or None, item as it was)
        streams: dict[int, tuple[Any, int]] = {}  # id(shard) -> (shard, records before)
        fast = True
        for entry in transact_items:
            _, op = next(iter(entry.items()))
            table = self.tables.get(op.get("TableName")) if isinstance(op, dict) else None
            attrs = (op.get("Key") or op.get("Item") or {}) if isinstance(op, dict) else {}
            range_attr = table.range_key_attr if table is not None else None
            if (
                table is None
                or table.hash_key_attr not in attrs
                or (range_attr is not None and range_attr not in attrs)
            ):
                fast = False  # anything unusual: moto's own whole-table backup
                break
            hash_value = DynamoType(attrs[table.hash_key_attr])
            # A table with a range key keeps items[hash][range] (moto's Table.items).
            range_value = DynamoType(attrs[range_attr]) if range_attr is not None else None
            held = table.items.get(hash_value)
            if range_value is not None:
                held = held.get(range_value) if held is not None else None
            saved.append((table, hash_value, range_value, real_deepcopy(held)))
            shard = table.stream_shard
            if shard is not None:
                streams.setdefault(id(shard), (shard, len(shard.items)))
        _local.fast = fast
        try:
            original(self, transact_items)
        except Exception:
            if fast:
                for table, hash_value, range_value, item in reversed(saved):
                    _restore(table, hash_value, range_value, item)
                for shard, length in streams.values():
                    del shard.items[length:]
            raise
        finally:
            _local.fast = False

    # moto's own transaction (its whole-table backup), for a test of what plain moto does.
    transact_write_items.__wrapped__ = original  # type: ignore[attr-defined]
    models.DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]


def _restore(table: Any, hash_value: Any, range_value: Any, item: Any) -> None:
    _note(table, item)  # the item put back is another object than the one its Query partition holds
    if range_value is None:
        if item is None:
            table.items.pop(hash_value, None)
        else:
            table.items[hash_value] = item
        return
    by_range = table.items[hash_value]
    if item is None:
        by_range.pop(range_value, None)
        if not by_range:
            table.items.pop(hash_value, None)
    else:
        by_range[range_value] = item


def _no_instance_tracking() -> None:
    from moto.core.common_models import BaseModel

    def untracked_new(cls: type[Any], *args: Any, **kwargs: Any) -> Any:
        return super(BaseModel, cls).__new__(cls)

    BaseModel.__new__ = staticmethod(untracked_new)  # type: ignore[method-assign]


def _expiring_shard_iterators() -> None:
    from moto.dynamodbstreams import models

    backend = models.DynamoDBStreamsBackend
    original_get_iterator = backend.get_shard_iterator
    issued: dict[int, dict[str, float]] = {}  # per backend: iterator arn -> issued at

    def forget_expired(self: Any) -> None:
        now = time.monotonic()
        times = issued.setdefault(id(self), {})
        for arn in list(self.shard_iterators):
            times.setdefault(arn, now)
        expired = [arn for arn, at in times.items() if now - at > ITERATOR_TTL_S]
        for arn in expired:
            times.pop(arn, None)
            self.shard_iterators.pop(arn, None)

    def get_shard_iterator(self: Any, *args: Any, **kwargs: Any) -> Any:
        # Issuing one is where the expired ones go (a reader that follows NextShardIterator for
        # 15 minutes without asking for a new one keeps its chain; ours ask on every read).
        forget_expired(self)
        return original_get_iterator(self, *args, **kwargs)

    backend.get_shard_iterator = get_shard_iterator  # type: ignore[method-assign]


# Per table: (index name, its partition attribute) -> partition value -> primary key -> item. A
# superset: an item stays under a value it no longer holds (or after it is deleted) until the next
# read of that partition drops it; every item holding a value is under it.
_PARTITIONS = "_jobsched_gsi_partitions"


def _partition_queries() -> None:
    from moto.dynamodb import models
    from moto.dynamodb.models.table import GlobalSecondaryIndex, Table

    original_all_items = Table.all_items
    original_query = Table.query
    original_put = Table.put_item
    original_update = models.DynamoDBBackend.update_item

    def all_items(self: Any) -> Any:
        chosen = getattr(_local, "partition", None)
        if chosen is not None and chosen[0] is self:
            return chosen[1]
        return original_all_items(self)

    def query(self: Any, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
        index_name = kwargs.get("index_name", args[6] if len(args) > 6 else None)
        items = (
            _table_partition(self, hash_key)
            if index_name is None
            else _index_partition(self, index_name, kwargs.get("hash_key_conditions"), GlobalSecondaryIndex)
        )
        if items is None:
            return original_query(self, hash_key, *args, **kwargs)
        _local.partition = (self, items)
        try:
            return original_query(self, hash_key, *args, **kwargs)
        finally:
            _local.partition = None

    def put_item(self: Any, *args: Any, **kwargs: Any) -> Any:
        item = original_put(self, *args, **kwargs)
        _note(self, item)
        return item

    def update_item(self: Any, table_name: str, *args: Any, **kwargs: Any) -> Any:
        item = original_update(self, table_name, *args, **kwargs)
        _note(self.get_table(table_name), item)  # an update may set an index's partition value
        return item

    patches: tuple[tuple[Any, str], ...] = (
        (all_items, "all_items"),
        (query, "query"),
        (put_item, "put_item"),
    )
    for patched, name in patches:
        patched.__wrapped__ = getattr(Table, name)
        setattr(Table, name, patched)
    update_item.__wrapped__ = original_update  # type: ignore[attr-defined]
    models.DynamoDBBackend.update_item = update_item  # type: ignore[method-assign]


def _primary(item: Any) -> tuple[Any, Any]:
    return (item.hash_key, item.range_key)


def _in_table(table: Any, item: Any) -> bool:
    held = table.items.get(item.hash_key)
    if table.range_key_attr is not None:
        return held is not None and held.get(item.range_key) is item
    return held is item


def _table_partition(table: Any, hash_key: Any) -> list[Any] | None:
    if hash_key is None:
        return None
    held = table.items.get(hash_key)
    if held is None:
        return []
    return list(held.values()) if table.range_key_attr is not None else [held]


def _index_partition(table: Any, index_name: str, conditions: Any, gsi_type: type) -> list[Any] | None:
    """The items that may be in the index's partition the Query names, or None for moto's own way
    (an index with a composite partition key, a local index, an unknown index)."""
    index = next((i for i in table.all_indexes() if i.name == index_name), None)
    hash_attrs = [k["AttributeName"] for k in index.schema if k["KeyType"] == "HASH"] if index else []
    if not isinstance(index, gsi_type) or len(hash_attrs) != 1 or not conditions or len(conditions) != 1:
        return None
    attr, value = conditions[0]
    if attr != hash_attrs[0]:
        return None
    partitions = table.__dict__.setdefault(_PARTITIONS, {})
    key = (index_name, attr)
    if key not in partitions:  # first Query of this index: from the table as it is
        built: dict[Any, dict[Any, Any]] = {}
        for item in original_items(table):
            held = item.attrs.get(attr)
            if held is not None:
                built.setdefault(held, {})[_primary(item)] = item
        partitions[key] = built
    members = partitions[key].get(value, {})
    for primary, item in list(members.items()):
        held = item.attrs.get(attr)
        if held is None or held != value or not _in_table(table, item):
            del members[primary]
    return sorted(members.values(), key=lambda i: (i.hash_key, i.range_key) if i.range_key else i.hash_key)


def original_items(table: Any) -> Any:
    """Every item of the table, whatever Query is under way (``Table.all_items`` unpatched)."""
    from moto.dynamodb.models.table import Table

    return Table.all_items.__wrapped__(table)  # type: ignore[attr-defined]


def _note(table: Any, item: Any) -> None:
    """An item put, updated or restored: file it under each known index's partition it holds."""
    if item is None:
        return
    for (_, attr), by_value in table.__dict__.get(_PARTITIONS, {}).items():
        held = item.attrs.get(attr)
        if held is not None:
            by_value.setdefault(held, {})[_primary(item)] = item
