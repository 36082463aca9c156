"""Make a long-running moto server cost what DynamoDB does: memory and time independent of how
long it has run and how big its tables are.

Three patches to moto's internals, applied with ``apply()`` to the process that hosts the server
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
