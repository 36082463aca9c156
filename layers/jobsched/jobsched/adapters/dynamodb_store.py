"""The Store on DynamoDB, through the low-level boto3 client.

It translates the core's write language (``jobsched.core.writes``) to DynamoDB expressions:
every attribute name goes through a ``#n`` placeholder (``status``, ``owner`` and many others
are reserved words) and every value through a ``:v`` placeholder. The contract tests
(tests/contract/test_store_contract.py) run the same suite against this store and the
in-memory one.

Item values are plain Python (str, int, bool, None, list, dict). Numbers come back as ``int``
when integral (else ``float``), never as ``Decimal``. A top-level attribute set to ``None`` is
treated as absent, as the core's conditions treat it: a Put drops it and an Update removes it,
so that ``attribute_exists`` on DynamoDB agrees with ``Cond.holds`` in memory. ``None`` nested
inside a map or list is stored as NULL and round-trips.

Errors are mapped to the core's: a lost condition to ``ConditionFailed`` (with the item as it is
now, from ``ReturnValuesOnConditionCheckFailure=ALL_OLD``), throttling that survived the SDK's
retries to ``Throttled``, a transaction conflict, a connection failure or another service
error to ``TransientStoreError``. A request DynamoDB rejects as malformed
(``ValidationException``) is a bug in the caller, not a transient state, and raises
``ValueError``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any, NoReturn, cast

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotoConnectionError

from jobsched.core.errors import ConditionFailed, Throttled, TransientStoreError
from jobsched.core.limits import RequestTooLarge, check_item_size, check_transaction, item_size
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
)
from jobsched.ports import (
    BASE_QUERIES,
    BATCH_GET_MAX_KEYS,
    INDEX_KEYS,
    INDEX_TABLE,
    TABLE_KEY,
    IndexName,
    Page,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

THROTTLING_CODES = frozenset(
    {
        "ThrottlingException",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "LimitExceededException",
    }
)
# Cancellation reason codes (TransactionCanceledException.CancellationReasons[].Code).
THROTTLING_REASONS = frozenset({"ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded"})

# BatchGetItem: requests per call while DynamoDB leaves keys unprocessed, and the first backoff.
BATCH_GET_TRIES = 4
BATCH_GET_BACKOFF_S = 0.05

# Removed by an Update that changes nothing (see _Expression.update); never written.
NOOP_ATTRIBUTE = "__jobsched_noop"

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()


def to_plain(value: Any) -> Any:
    """A deserialised DynamoDB value with Decimals turned into int (integral) or float."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: to_plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_plain(v) for v in value]
    if isinstance(value, set):
        return {to_plain(v) for v in value}
    return value


def serialize(value: Any) -> dict[str, Any]:
    return cast(dict[str, Any], _serializer.serialize(value))


def deserialize(value: Mapping[str, Any]) -> Any:
    return to_plain(_deserializer.deserialize(value))  # type: ignore[arg-type]


def serialize_item(item: Mapping[str, Any]) -> dict[str, Any]:
    return {k: serialize(v) for k, v in item.items()}


def deserialize_item(item: Mapping[str, Any]) -> Item:
    return {k: deserialize(v) for k, v in item.items()}


class _Expression:
    """Placeholders for one request: names and values shared by its condition and update
    expressions (DynamoDB rejects a request that declares a placeholder it does not use)."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self._name_of: dict[str, str] = {}
        self.values: dict[str, dict[str, Any]] = {}

    def name(self, attr: str) -> str:
        placeholder = self._name_of.get(attr)
        if placeholder is None:
            placeholder = f"#n{len(self._name_of)}"
            self._name_of[attr] = placeholder
            self.names[placeholder] = attr
        return placeholder

    def value(self, value: Any) -> str:
        placeholder = f":v{len(self.values)}"
        self.values[placeholder] = serialize(value)
        return placeholder

    def condition(self, conditions: Sequence[Cond]) -> str | None:
        """The parts joined with AND. Parentheses only around OR groups: DynamoDB rejects
        redundant parentheses (``((a = :v))``) as a ValidationException."""
        if not conditions:
            return None
        parts = [self._cond(c) for c in conditions]
        if len(parts) == 1:
            return parts[0][0]
        return " AND ".join(f"({text})" if is_or else text for text, is_or in parts)

    def _cond(self, cond: Cond) -> tuple[str, bool]:
        """The expression of one part, and whether it is an OR at its top level."""
        if cond.kind == "or":
            alternatives = [self._cond(alt) for alt in cond.alternatives]
            if not alternatives:
                return self._false(cond), False
            if len(alternatives) == 1:
                return alternatives[0]
            # OR is associative and AND binds tighter than OR: no alternative needs parentheses.
            return " OR ".join(text for text, _ in alternatives), True
        name = self.name(cond.attr)
        if cond.kind == "exists":
            return f"attribute_exists({name})", False
        if cond.kind == "not_exists":
            return f"attribute_not_exists({name})", False
        if cond.kind == "in":
            values = list(cond.value)
            if not values:
                return self._false(cond), False
            if len(values) > 100:
                raise ValueError(f"IN takes at most 100 values ({cond.why})")
            return f"{name} IN ({', '.join(self.value(v) for v in values)})", False
        operator = {"eq": "=", "ne": "<>", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}[cond.kind]
        return f"{name} {operator} {self.value(cond.value)}", False

    def _false(self, cond: Cond) -> str:
        # DynamoDB has no literal false; an attribute cannot both exist and not exist.
        name = self.name(cond.attr or "_")
        return f"attribute_exists({name}) AND attribute_not_exists({name})"

    def update(self, op: Update) -> str:
        sets: list[str] = []
        removes: list[str] = []
        self._set_parts(op, sets, removes)
        for attr in op.remove:
            if attr in op.key:
                raise ValueError(f"{op.label}: cannot remove key attribute {attr}")
            removes.append(self.name(attr))
        adds = [f"{self.name(attr)} {self.value(amount)}" for attr, amount in op.add.items()]
        clauses = []
        if sets:
            clauses.append("SET " + ", ".join(sets))
        if removes:
            clauses.append("REMOVE " + ", ".join(removes))
        if adds:
            clauses.append("ADD " + ", ".join(adds))
        if not clauses:
            # Nothing to change: DynamoDB's UpdateItem still creates the key-only item when it is
            # absent (the memory store does the same). Removing an attribute nobody writes says
            # that explicitly (moto cannot handle an UpdateItem without an UpdateExpression).
            clauses.append(f"REMOVE {self.name(NOOP_ATTRIBUTE)}")
        return " ".join(clauses)

    def _set_parts(self, op: Update, sets: list[str], removes: list[str]) -> None:
        """``op.set`` and ``op.set_if_missing`` as SET clauses (a None value removes)."""
        for attr, value in op.set.items():
            if attr in op.key:
                if op.key[attr] != value:
                    raise ValueError(f"{op.label}: cannot change key attribute {attr}")
                continue  # DynamoDB rejects SET on a key attribute, even to the same value
            if value is None:
                removes.append(self.name(attr))
            else:
                sets.append(f"{self.name(attr)} = {self.value(value)}")
        for attr, value in op.set_if_missing.items():
            if attr in op.key or value is None:
                continue
            name = self.name(attr)
            sets.append(f"{name} = if_not_exists({name}, {self.value(value)})")

    def apply(self, request: dict[str, Any]) -> dict[str, Any]:
        if self.names:
            request["ExpressionAttributeNames"] = dict(self.names)
        if self.values:
            request["ExpressionAttributeValues"] = dict(self.values)
        return request


class DynamoStore:
    """``Store`` on DynamoDB. ``jobs_table``/``state_table``/``runs_table`` are the real names of
    the logical tables "jobs", "state" and "runs"; any other table name (the worker's staged user
    effects) is used as is. ``table_keys`` optionally declares the key attributes of such extra tables,
    which lets ``write`` reject two operations on one item before DynamoDB does."""

    def __init__(
        self,
        client: DynamoDBClient,
        jobs_table: str,
        state_table: str,
        runs_table: str,
        table_keys: Mapping[str, tuple[str, ...]] | None = None,
    ) -> None:
        self.client = client
        self._names = {JOBS: jobs_table, STATE: state_table, RUNS: runs_table}
        self._keys: dict[str, tuple[str, ...]] = dict(TABLE_KEY)  # template.yaml: runs by (job_id, run_id)
        self._keys.update(table_keys or {})

    def table_name(self, table: str) -> str:
        return self._names.get(table, table)

    # ------------------------------------------------------------------ reads

    def get(self, table: str, key: Item, consistent: bool = True) -> Item | None:
        try:
            response = self.client.get_item(
                TableName=self.table_name(table), Key=serialize_item(key), ConsistentRead=consistent
            )
        except (ClientError, HTTPClientError, BotoConnectionError) as error:
            _raise_mapped(error)
        item = response.get("Item")
        return deserialize_item(item) if item is not None else None

    def get_attributes(
        self, table: str, key: Item, names: Sequence[str], consistent: bool = True
    ) -> Item | None:
        """GetItem with a ProjectionExpression (ports.AttributeRead). DynamoDB returns no
        ``Item`` when none exists, and an empty one when it has none of ``names``."""
        placeholders = {f"#a{index}": name for index, name in enumerate(names)}
        try:
            response = self.client.get_item(
                TableName=self.table_name(table),
                Key=serialize_item(key),
                ConsistentRead=consistent,
                ProjectionExpression=", ".join(placeholders),
                ExpressionAttributeNames=placeholders,
            )
        except (ClientError, HTTPClientError, BotoConnectionError) as error:
            _raise_mapped(error)
        item = response.get("Item")
        return deserialize_item(item) if item is not None else None

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
        pk, sk = INDEX_KEYS[index]
        names = {"#pk": pk, "#sk": sk}
        values: dict[str, Any] = {":p": serialize(partition)}
        condition = "#pk = :p"
        if sort_from is not None and sort_to is not None:
            condition += " AND #sk BETWEEN :a AND :b"
            values[":a"] = serialize(sort_from)
            values[":b"] = serialize(sort_to)
        elif sort_from is not None:
            condition += " AND #sk >= :a"
            values[":a"] = serialize(sort_from)
        elif sort_to is not None:
            condition += " AND #sk <= :b"
            values[":b"] = serialize(sort_to)
        else:
            del names["#sk"]  # DynamoDB rejects an unused placeholder
        request: dict[str, Any] = {
            "TableName": self.table_name(INDEX_TABLE[index]),
            "KeyConditionExpression": condition,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
            "Limit": limit,
            # Global secondary indexes are eventually consistent; ConsistentRead is not allowed.
            # A base-table query (no IndexName) reads eventually consistent too unless asked.
        }
        if not base:
            request["IndexName"] = index
        if consistent:
            request["ConsistentRead"] = True
        if sort_from is not None and sort_to is not None and sort_from > sort_to:
            return Page([], None)  # DynamoDB rejects BETWEEN with reversed bounds
        if cursor is not None:
            request["ExclusiveStartKey"] = serialize_item(cursor)
        try:
            response = self.client.query(**request)
        except (ClientError, HTTPClientError, BotoConnectionError) as error:
            if not base and isinstance(error, ClientError) and _missing_index(error):
                # An index the stack's deployed shape lacks (ports.DEPLOYED_INDEXES: "due" on a
                # legacy stack, "next-run" and "lease" on a successor one) is a setup error or a
                # path that should not query it, never a transient error.
                raise ValueError(
                    f"the {self.table_name(INDEX_TABLE[index])} table has no index {index!r}: {error}"
                ) from error
            _raise_mapped(error)
        return self._page(response)

    def scan(self, table: str, limit: int = 100, cursor: dict[str, Any] | None = None) -> Page:
        request: dict[str, Any] = {"TableName": self.table_name(table), "Limit": limit}
        if cursor is not None:
            request["ExclusiveStartKey"] = serialize_item(cursor)
        try:
            response = self.client.scan(**request)
        except (ClientError, HTTPClientError, BotoConnectionError) as error:
            _raise_mapped(error)
        return self._page(response)

    def batch_get(self, table: str, keys: Sequence[Item], consistent: bool = False) -> list[Item]:
        if len(keys) > BATCH_GET_MAX_KEYS:
            raise ValueError(f"BatchGetItem reads at most {BATCH_GET_MAX_KEYS} keys, not {len(keys)}")
        if not keys:
            return []
        name = self.table_name(table)
        request: dict[str, Any] = {
            name: {"Keys": [serialize_item(key) for key in keys], "ConsistentRead": consistent}
        }
        items: list[Item] = []
        # DynamoDB may leave keys unprocessed (throttling, the 16 MB response limit): ask for
        # them again, a few times with a short backoff, as its documentation advises.
        for attempt in range(BATCH_GET_TRIES):
            try:
                response = self.client.batch_get_item(RequestItems=cast(Any, request))
            except (ClientError, HTTPClientError, BotoConnectionError) as error:
                _raise_mapped(error)
            items += [deserialize_item(item) for item in response.get("Responses", {}).get(name, [])]
            unprocessed: dict[str, Any] = dict(response.get("UnprocessedKeys") or {})
            if not unprocessed.get(name, {}).get("Keys"):
                return items
            request = {name: unprocessed[name]}
            time.sleep(BATCH_GET_BACKOFF_S * 2**attempt)
        raise Throttled(f"BatchGetItem on {table}: keys still unprocessed after {BATCH_GET_TRIES} tries")

    # HC12's read of a job's occurrence items (issue 37; ports.OccurrenceQuery). IAM: a Query on
    # the runs table's own ARN (no index), which a function's role grants as ``dynamodb:Query`` on
    # ``RunsTable.Arn``; no condition key distinguishes ConsistentRead or the key range.
    def occurrence_items(self, job_id: str, page_limit: int | None = None) -> list[Item]:
        if page_limit is not None and page_limit < 1:
            raise ValueError(f"a Query's Limit is at least 1, not {page_limit}")
        low, high = occurrence_key_range(job_id)
        partition, sort = TABLE_KEY[RUNS]
        request: dict[str, Any] = {
            "TableName": self.table_name(RUNS),
            "KeyConditionExpression": "#pk = :p AND #sk BETWEEN :a AND :b",
            "ExpressionAttributeNames": {"#pk": partition, "#sk": sort},
            "ExpressionAttributeValues": {
                ":p": serialize(job_id),
                ":a": serialize(low),
                ":b": serialize(high),
            },
            "ConsistentRead": True,  # HC12: a head put or closed just before is seen
            "ScanIndexForward": False,  # newest first
        }
        if page_limit is not None:
            request["Limit"] = page_limit
        found: list[Item] = []
        while True:
            try:
                response = self.client.query(**request)
            except (ClientError, HTTPClientError, BotoConnectionError) as error:
                _raise_mapped(error)
            page = self._page(response)
            found += page.items
            if page.cursor is None:
                return found
            request["ExclusiveStartKey"] = serialize_item(page.cursor)

    @staticmethod
    def _page(response: Mapping[str, Any]) -> Page:
        items = [deserialize_item(item) for item in response.get("Items", [])]
        # A page can end exactly at the last match and still carry a LastEvaluatedKey (DynamoDB
        # does this when the Limit is reached; moto sometimes too): the next page is then empty.
        # Callers loop until the cursor is None.
        last = response.get("LastEvaluatedKey")
        return Page(items, deserialize_item(last) if last else None)

    # ----------------------------------------------------------------- writes

    def write(self, ops: Sequence[WriteOp]) -> None:
        if not ops:
            return
        _check_sizes(ops)
        if len(ops) == 1 and not isinstance(ops[0], Check):
            op = ops[0]
            if isinstance(op, Put):
                request = self._put_request(op)
                try:
                    self.client.put_item(**request)
                except (ClientError, HTTPClientError, BotoConnectionError) as error:
                    _raise_mapped(error, op)
            elif isinstance(op, Delete):
                self.delete(op.table, op.key, op.condition, op.label)
            else:
                self._update(op, return_values="NONE")
            return
        self._check_distinct_items(ops)
        # No ClientRequestToken: a token makes DynamoDB treat a repeat within 10 minutes as the
        # same transaction, and a caller that retries with a *changed* transaction (re-read,
        # new version) would then fail with IdempotentParameterMismatch. Our conditions already
        # make a retried transaction safe: it fails with ConditionFailed and the caller compares
        # the current item with what it meant to write.
        items = [self._transact_item(op) for op in ops]
        try:
            self.client.transact_write_items(TransactItems=cast(Any, items))
        except ClientError as error:
            if _code(error) == "TransactionCanceledException":
                _raise_cancelled(error, ops)
            _raise_mapped(error)
        except (HTTPClientError, BotoConnectionError) as error:
            _raise_mapped(error)

    def update(self, op: Update) -> Item:
        attributes = self._update(op, return_values="ALL_NEW")
        return deserialize_item(attributes)

    def delete(self, table: str, key: Item, condition: tuple[Cond, ...] = (), label: str = "delete") -> None:
        request = self._delete_request(Delete(table, key, condition, label))
        try:
            self.client.delete_item(**request)
        except (ClientError, HTTPClientError, BotoConnectionError) as error:
            _raise_mapped(error, Check(table, key, condition, label))

    def _update(self, op: Update, return_values: str) -> dict[str, Any]:
        request = self._update_request(op)
        request["ReturnValues"] = return_values
        try:
            response = self.client.update_item(**request)
        except (ClientError, HTTPClientError, BotoConnectionError) as error:
            _raise_mapped(error, op)
        return dict(response.get("Attributes", {}))

    # --------------------------------------------------------------- requests

    def _put_request(self, op: Put) -> dict[str, Any]:
        expression = _Expression()
        request: dict[str, Any] = {
            "TableName": self.table_name(op.table),
            "Item": serialize_item({k: v for k, v in op.item.items() if v is not None}),
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        condition = expression.condition(op.condition)
        if condition:
            request["ConditionExpression"] = condition
        return expression.apply(request)

    def _update_request(self, op: Update) -> dict[str, Any]:
        expression = _Expression()
        request: dict[str, Any] = {
            "TableName": self.table_name(op.table),
            "Key": serialize_item(op.key),
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        request["UpdateExpression"] = expression.update(op)
        condition = expression.condition(op.condition)
        if condition:
            request["ConditionExpression"] = condition
        return expression.apply(request)

    def _check_request(self, op: Check) -> dict[str, Any]:
        expression = _Expression()
        request: dict[str, Any] = {
            "TableName": self.table_name(op.table),
            "Key": serialize_item(op.key),
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        condition = expression.condition(op.condition)
        if condition is None:
            # ConditionCheck requires a condition; an empty one always holds.
            name = expression.name(next(iter(op.key)))
            condition = f"attribute_exists({name}) OR attribute_not_exists({name})"
        request["ConditionExpression"] = condition
        return expression.apply(request)

    def _transact_item(self, op: WriteOp) -> dict[str, Any]:
        if isinstance(op, Put):
            return {"Put": self._put_request(op)}
        if isinstance(op, Update):
            return {"Update": self._update_request(op)}
        if isinstance(op, Delete):
            return {"Delete": self._delete_request(op)}
        return {"ConditionCheck": self._check_request(op)}

    def _delete_request(self, op: Delete) -> dict[str, Any]:
        expression = _Expression()
        request: dict[str, Any] = {"TableName": self.table_name(op.table), "Key": serialize_item(op.key)}
        condition = expression.condition(op.condition)
        if condition is not None:
            request["ConditionExpression"] = condition
            request["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        return expression.apply(request)

    def _check_distinct_items(self, ops: Sequence[WriteOp]) -> None:
        seen: set[tuple[str, str]] = set()
        for op in ops:
            identity = self._identity(op)
            if identity is None:
                continue
            if identity in seen:
                raise ValueError(f"{op.label}: a transaction may touch each item only once")
            seen.add(identity)

    def _identity(self, op: WriteOp) -> tuple[str, str] | None:
        if isinstance(op, Put):
            key_names = self._keys.get(op.table)
            if key_names is None:
                return None
            key = {name: op.item.get(name) for name in key_names}
        else:
            key = dict(op.key)
        return (self.table_name(op.table), repr(sorted(key.items())))


# ------------------------------------------------------------------- limits


def _check_sizes(ops: Sequence[WriteOp]) -> None:
    """Reject before sending what DynamoDB would reject for its size (core/limits.py), with a
    message that names the operation. An update's item is unknown here, so its size is counted
    from what it writes: a lower bound, which DynamoDB itself backs up with a ValidationException."""
    sizes = []
    for op in ops:
        if isinstance(op, Put):
            written = {k: v for k, v in op.item.items() if v is not None}
            check_item_size(written, op.label)
        elif isinstance(op, Update):
            written = {**op.key, **op.set, **op.set_if_missing}
        else:
            written = dict(op.key)
        sizes.append(item_size(written))
    if len(ops) > 1 or isinstance(ops[0], Check):
        check_transaction(sizes)


# ------------------------------------------------------------------- errors


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def _missing_index(error: ClientError) -> bool:
    """A Query named an index its table lacks. DynamoDB says ValidationException, "The table does
    not have the specified index: NAME" (which ``_raise_mapped`` makes a ValueError anyway); moto
    says ResourceNotFoundException, "Invalid index: NAME for table: ...", which would otherwise
    read as a transient error."""
    message = str(error.response.get("Error", {}).get("Message", "")).lower()
    return _code(error) in ("ValidationException", "ResourceNotFoundException") and (
        "specified index" in message or "invalid index" in message
    )


def _raise_mapped(error: Exception, op: WriteOp | None = None) -> NoReturn:
    if isinstance(error, ClientError):
        code = _code(error)
        if code == "ConditionalCheckFailedException" and op is not None:
            item = cast(dict[str, Any], error.response).get("Item")
            raise ConditionFailed(0, op, deserialize_item(item) if item else None) from error
        if code in THROTTLING_CODES:
            raise Throttled(f"{code}: {error}") from error
        if code == "ValidationException":
            if "item size" in str(error).lower():  # "Item size has exceeded the maximum allowed size"
                raise RequestTooLarge(f"DynamoDB rejected the item's size: {error}") from error
            raise ValueError(f"DynamoDB rejected the request: {error}") from error
        raise TransientStoreError(f"{code}: {error}") from error
    raise TransientStoreError(f"{type(error).__name__}: {error}") from error


def _raise_cancelled(error: ClientError, ops: Sequence[WriteOp]) -> NoReturn:
    response = cast(dict[str, Any], error.response)
    reasons: list[dict[str, Any]] = list(response.get("CancellationReasons", []))
    for index, reason in enumerate(reasons):
        if reason.get("Code") == "ConditionalCheckFailed" and index < len(ops):
            item = reason.get("Item")
            raise ConditionFailed(index, ops[index], deserialize_item(item) if item else None) from error
    codes = {str(reason.get("Code")) for reason in reasons} - {"None"}
    if codes & THROTTLING_REASONS:
        raise Throttled(f"transaction cancelled: {sorted(codes)}") from error
    if "ValidationError" in codes:
        messages = " ".join(str(reason.get("Message", "")) for reason in reasons).lower()
        if "item size" in messages:  # "Item size has exceeded the maximum allowed size"
            raise RequestTooLarge(f"DynamoDB rejected an item's size in the transaction: {error}") from error
        raise ValueError(f"DynamoDB rejected the transaction: {error}") from error
    # TransactionConflict (another transaction or write on one of the items was in progress) and
    # anything else: nothing was written, the caller may retry.
    raise TransientStoreError(f"transaction cancelled: {sorted(codes) or 'unknown'}") from error
