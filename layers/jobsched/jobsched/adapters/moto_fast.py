"""Make moto's ``TransactWriteItems`` cost what DynamoDB's does: independent of the table's size.

moto backs up every table a transaction names with ``copy.deepcopy`` before applying it, so each
transaction costs time proportional to the whole table (about 100 ms at a few hundred items):
a benchmark of the trigger, whose claim is a transaction, would measure moto's backup rather
than our code. This patch (applied by ``jobsched bench`` to its moto server process, never in
tests) backs up just the items the transaction names and restores them if it is cancelled,
which is the same rollback for our tables (hash key only; a transaction writes only the items
it names). Stream records of a cancelled transaction are not rolled back; the bench runs no
stream consumer.
"""

from __future__ import annotations

import copy
import threading
import types
from typing import Any

_applied = False
_local = threading.local()


def apply() -> None:
    global _applied
    if _applied:
        return
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
        saved: list[tuple[Any, Any, Any]] = []
        fast = True
        for entry in transact_items:
            _, op = next(iter(entry.items()))
            table = self.tables.get(op.get("TableName")) if isinstance(op, dict) else None
            attrs = (op.get("Key") or op.get("Item") or {}) if isinstance(op, dict) else {}
            if table is None or table.range_key_attr is not None or table.hash_key_attr not in attrs:
                fast = False  # anything unusual: moto's own whole-table backup
                break
            hash_value = DynamoType(attrs[table.hash_key_attr])
            saved.append((table, hash_value, real_deepcopy(table.items.get(hash_value))))
        _local.fast = fast
        try:
            original(self, transact_items)
        except Exception:
            if fast:
                for table, hash_value, item in reversed(saved):
                    if item is None:
                        table.items.pop(hash_value, None)
                    else:
                        table.items[hash_value] = item
            raise
        finally:
            _local.fast = False

    models.DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]
    _applied = True
