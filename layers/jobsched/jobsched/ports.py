"""The services' view of the outside world. Adapters implement these; the core never sees boto3."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from jobsched.core.writes import Cond, Item, Update, WriteOp

# What ``Store.query`` reads: a global secondary index ("next-run", "lease", "due": which of them
# a stack's tables have is its deployed shape's, DEPLOYED_INDEXES), or the key of a base table
# ("runs-of-job": a Query on the runs table without IndexName, whose partition key is the job id;
# see BASE_QUERIES).
IndexName = Literal["next-run", "lease", "due", "runs-of-job"]

INDEX_TABLE: dict[str, str] = {"next-run": "state", "lease": "runs", "due": "runs", "runs-of-job": "runs"}
# Each logical table's key attributes (template.yaml): partition, then sort if the table has one.
TABLE_KEY: dict[str, tuple[str, ...]] = {
    "jobs": ("job_id",),
    "state": ("job_id",),
    "runs": ("job_id", "run_id"),
}
# Queries served by the base table's own key, not by an index: they return whole items in the
# order of the table's sort key (a run's history: the caller orders it by ``scheduled_at``) and
# take no sort bounds. Eventually consistent, as the index queries are, unless asked to be
# strongly consistent (``consistent=True``: twice the read units).
BASE_QUERIES: frozenset[str] = frozenset({"runs-of-job"})
# The successor claim's index (docs/proposals/successor-claim-build.md, §0 "The `due` index"; build
# step S3). It replaces "next-run" and "lease" once the claim is built (S4-S8), and shares
# ``lease``'s key, so every run that has a lease entry today has a ``due`` entry too. Its
# projection carries what the trigger needs to claim a head from the page alone. ``status`` and
# ``version`` are left out on purpose: the start writes both, and an index projecting them would
# be written by every start (1 unit more a run); a started run's successor exists, and the
# trigger's GetItem of it skips the run (§0). No start or heartbeat writes any attribute below.
DUE_INDEX = "due"
DUE_PROJECTED: tuple[str, ...] = (
    "scheduled_at",
    "epoch",
    "head_version",
    "after_run_id",
    "def_hash",
    "timing",
    "misfire",
    "next_at",
    "next_key",
    "through",
    "runs_before",
    "catchups",
    "overlap",
    "max_attempts",
    "kind",
    # The claim decides from the entry alone whether its run is the life's last (HC5).
    "max_runs",
)
# The indexes each value of template.yaml's ``ClaimShape`` parameter (core/claim_shape.py
# ``DeployedShape``) gives the stack's tables. Keyed by the value's string so that ports needs
# no import of the enum; tests/template holds the template to it under each value.
DEPLOYED_INDEXES: dict[str, frozenset[str]] = {
    "legacy": frozenset({"next-run", "lease"}),
    "migrating": frozenset({"next-run", "lease", DUE_INDEX}),
    "successor": frozenset({DUE_INDEX}),
}
# Retired (issue 37, wave 3): the index a legacy stack lacks. Only what still names it uses it
# (emulator/provision.py, ops/capacity.py, tests/template: w3template's, which move to
# DEPLOYED_INDEXES); the services and the test stores go by DEPLOYED_INDEXES.
UNDEPLOYED_INDEXES: frozenset[str] = DEPLOYED_INDEXES["migrating"] - DEPLOYED_INDEXES["legacy"]
# What each index returns of an item (template.yaml's projections; tests/template holds the
# template's equal to these):
# a query sees these attributes and nothing else, so no reader can rely on one the index drops.
# A KEYS_ONLY index holds the table's key (for runs: job_id and run_id) and its own.
INDEX_PROJECTION: dict[str, tuple[str, ...]] = {
    "next-run": (
        "job_id",
        "sched_shard",
        "next_run_at",
        "version",
        "status",
        "def_hash",
        "timing",
        "misfire",
        "last_scheduled_at",
        "catchups",
        "latest_run_id",
    ),
    "lease": ("job_id", "run_id", "lease_shard", "check_at"),
    # INCLUDE: the table's key, the index's key and the named attributes, which an entry holds
    # only where the item has them ("INCLUDE - In addition to the attributes described in
    # KEYS_ONLY, the secondary index will include other non-key attributes that you specify":
    # https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_Projection.html). A Query
    # of the index returns those and nothing else (Query's Select, ALL_PROJECTED_ATTRIBUTES:
    # https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_Query.html).
    DUE_INDEX: ("job_id", "run_id", "lease_shard", "check_at", *DUE_PROJECTED),
}
# The partition and sort attribute of each query (for "runs-of-job", the runs table's own key).
INDEX_KEYS: dict[str, tuple[str, str]] = {
    "next-run": ("sched_shard", "next_run_at"),
    "lease": ("lease_shard", "check_at"),
    DUE_INDEX: ("lease_shard", "check_at"),  # lease's key: the two share their entries' keys
    "runs-of-job": ("job_id", "run_id"),
}


def index_definition(name: str) -> dict[str, Any]:
    """``name``'s entry of DynamoDB's ``GlobalSecondaryIndexes`` (CreateTable; UpdateTable's
    ``Create``), from INDEX_KEYS and INDEX_PROJECTION: what a table must be created with to hold
    an index of a shape the template does not deploy (DEPLOYED_INDEXES), and what the plan's deploy 1 adds
    to it (tests/template holds the template's indexes to it). On-demand: a provisioned table's
    caller adds the index's ``ProvisionedThroughput``."""
    partition, sort = INDEX_KEYS[name]
    table_key = TABLE_KEY[INDEX_TABLE[name]]
    non_key = [attr for attr in INDEX_PROJECTION[name] if attr not in (*table_key, partition, sort)]
    projection: dict[str, Any] = {"ProjectionType": "KEYS_ONLY"}
    if non_key:
        projection = {"ProjectionType": "INCLUDE", "NonKeyAttributes": non_key}
    return {
        "IndexName": name,
        "KeySchema": [
            {"AttributeName": partition, "KeyType": "HASH"},
            {"AttributeName": sort, "KeyType": "RANGE"},
        ],
        "Projection": projection,
    }


# DynamoDB's BatchGetItem reads at most 100 items a request.
BATCH_GET_MAX_KEYS = 100


@dataclass(frozen=True)
class Page:
    items: list[Item]
    cursor: dict[str, Any] | None = None  # pass back to continue; None: no more


class Store(Protocol):
    """DynamoDB's operations as jobsched uses them. ``write`` is atomic over its operations
    (one conditional write, or one transaction) and raises ``ConditionFailed`` naming the
    operation that lost; ``update`` applies one conditional update and returns the new item."""

    def get(self, table: str, key: Item, consistent: bool = True) -> Item | None: ...

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
        """Items of ``index`` in one partition with sort key in [sort_from, sort_to], ascending.
        Index reads are eventually consistent, as on DynamoDB. A base-table query
        (``BASE_QUERIES``) returns whole items and takes no bounds (``ValueError``); it may be
        strongly ``consistent`` (DynamoDB's ConsistentRead, which a global secondary index
        refuses: ``ValueError`` for an index)."""
        ...

    def write(self, ops: Sequence[WriteOp]) -> None: ...

    def update(self, op: Update) -> Item: ...

    def delete(self, table: str, key: Item, condition: tuple[Cond, ...] = (), label: str = "delete") -> None:
        """Delete one item if ``condition`` holds (raises ``ConditionFailed`` otherwise)."""
        ...

    def scan(self, table: str, limit: int = 100, cursor: dict[str, Any] | None = None) -> Page: ...

    def batch_get(self, table: str, keys: Sequence[Item], consistent: bool = False) -> list[Item]:
        """The items at ``keys`` (at most ``BATCH_GET_MAX_KEYS``, distinct) that exist, in no
        particular order: DynamoDB's BatchGetItem, with the keys it leaves unprocessed asked
        again (``Throttled`` when some stay unprocessed)."""
        ...


@runtime_checkable
class AttributeRead(Protocol):
    """A GetItem of some attributes only (DynamoDB's ``ProjectionExpression``): what a reader
    needs of a large item (the migration switch on the detector's bookkeeping item, whose
    ``suspects`` may reach ~100 KB). It saves the bytes sent and parsed, not read units: "you can
    request a subset of attributes to retrieve. However, doing so has no impact on the item size
    calculations" (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/read-write-operations.html).
    A protocol of its own, beside ``Store``, so that the stores' wrappers need not forward it: a
    caller falls back to ``get`` (``read_attributes``)."""

    def get_attributes(
        self, table: str, key: Item, names: Sequence[str], consistent: bool = True
    ) -> Item | None:
        """The item's attributes of ``names`` that it has (None: no item; ``{}``: none of them)."""
        ...


def read_attributes(store: Store, table: str, key: Item, names: Sequence[str]) -> Item | None:
    """``names`` of the item at ``key``, strongly consistent: a projected GetItem where the store
    serves one (``AttributeRead``), else the whole item cut to them."""
    if isinstance(store, AttributeRead):
        return store.get_attributes(table, key, names)
    item = store.get(table, key)
    return None if item is None else {name: item[name] for name in names if name in item}


class OccurrenceQuery(Protocol):
    """HC12's read of a job's occurrence items (issue 37, the successor claim; build plan
    docs/proposals/successor-claim-build.md, HC12). Only tests call it in this wave (build step
    S1); the registrar, operations, describe and the reconcile pass are to find a job's head with
    it (``core.occurrences.find_head``) when the successor claim is wired in. It is a protocol of
    its own, beside ``Store``, so that the stores' wrappers (the chaos faults, the explorer, the
    bench's meters) need not forward it before anything in the product calls it."""

    def occurrence_items(self, job_id: str, page_limit: int | None = None) -> list[Item]:
        """Every item of ``job_id``'s runs partition in ``core.occurrences.occurrence_key_range``
        (timed ids of every epoch, closure markers and end markers; no manual run), whole, newest
        first (descending run id): one strongly consistent Query on the runs table's own key
        (``ConsistentRead``, ``ScanIndexForward`` false), paginated to the end. ``page_limit``:
        the Query's ``Limit`` per page (None: DynamoDB's 1 MB page), for tests of the paging.
        Strongly consistent per item, not a snapshot: a Query is read-committed against a
        concurrent transaction, so a caller that finds several heads or none reads again."""
        ...


@dataclass(frozen=True)
class OutgoingMessage:
    id: str  # unique within one batch
    body: dict[str, Any]
    delay_seconds: int = 0


@dataclass
class SendResult:
    failed: list[OutgoingMessage] = field(default_factory=list)


class WorkQueue(Protocol):
    def send(self, messages: Sequence[OutgoingMessage]) -> SendResult:
        """Send up to 10 messages; returns those SQS rejected (to retry) instead of raising."""
        ...


class DeadLetterRefused(Exception):
    """A job's dead-letter queue refused a send for good (services/dead_letters.py): the queue
    does not exist, or the caller may not send to it or use its key. The message says what to
    change. Raised by the sender (adapters/dead_letter_queue.py) instead of its service's error."""


class Telemetry(Protocol):
    """One structured event per operation, with a correlation id; metrics alongside."""

    def event(self, name: str, correlation_id: str, **fields: Any) -> None: ...

    def metric(self, name: str, value: float, unit: str = "Count") -> None: ...


class GroupInvoker(Protocol):
    """Starts one trigger invocation for a shard group, asynchronously (docs/design.md, "Trigger
    fan-out"). Raises ``InvokeError`` when the invocation was not accepted."""

    def invoke(self, event: dict[str, Any]) -> None: ...


@dataclass(frozen=True)
class RunOutcome:
    """A terminal outcome, read from its run record's change in the runs table's stream
    (docs/operations.md, "Outcome events"). ``outcome_id`` (``run_id#status#version``) is the
    consumer's deduplication key: every delivery of one write carries the same one, and two
    writes that end a run the same way (a missed occurrence rerun and missed again) differ."""

    run_id: str
    job_id: str
    status: str  # succeeded, failed, missed or skipped
    version: int  # the record's version after the write that ended it
    recorded_at: int  # ms: when the record was written
    scheduled_at: int | None = None  # ms: the occurrence's instant (a manual run's request)
    reason: str | None = None  # the error of a failure, why it was missed or skipped
    attempt: int | None = None  # the attempt that ended a run that ran; None for missed, skipped

    @property
    def outcome_id(self) -> str:
        return f"{self.run_id}#{self.status}#{self.version}"


@dataclass(frozen=True)
class OutcomeRejection:
    """One outcome of a ``publish`` the sink did not accept: its index in the call, the error,
    and whether a later attempt may succeed (a throttle, an outage, a missing permission) or
    never can (the bus refuses the event itself)."""

    index: int
    error: str
    retryable: bool


class OutcomeSink(Protocol):
    """Where terminal outcomes go (an EventBridge bus). Returns the outcomes it did not accept;
    raises when the call failed as a whole (every outcome may be retried)."""

    def publish(self, outcomes: Sequence[RunOutcome]) -> list[OutcomeRejection]: ...
