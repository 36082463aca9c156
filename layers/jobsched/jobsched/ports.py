"""The services' view of the outside world. Adapters implement these; the core never sees boto3."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from jobsched.core.writes import Cond, Item, Update, WriteOp

IndexName = Literal["next-run", "lease", "job-runs"]

INDEX_TABLE: dict[str, str] = {"next-run": "state", "lease": "runs", "job-runs": "runs"}
# The base table's key attribute of each logical table (an index query's tie-breaker).
TABLE_KEY: dict[str, str] = {"jobs": "job_id", "state": "job_id", "runs": "run_id"}
# Indexes that project only keys (template.yaml): a query returns these attributes, nothing else.
# What each index returns of an item (template.yaml's projections; a test holds the two equal):
# a query sees these attributes and nothing else, so no reader can rely on one the index drops.
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
    "lease": ("run_id", "lease_shard", "check_at"),
    "job-runs": ("run_id", "job_id", "scheduled_at"),
}
INDEX_KEYS: dict[str, tuple[str, str]] = {
    "next-run": ("sched_shard", "next_run_at"),
    "lease": ("lease_shard", "check_at"),
    "job-runs": ("job_id", "scheduled_at"),
}


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
    ) -> Page:
        """Items of ``index`` in one partition with sort key in [sort_from, sort_to], ascending.
        Index reads are eventually consistent, as on DynamoDB."""
        ...

    def write(self, ops: Sequence[WriteOp]) -> None: ...

    def update(self, op: Update) -> Item: ...

    def delete(self, table: str, key: Item, condition: tuple[Cond, ...] = (), label: str = "delete") -> None:
        """Delete one item if ``condition`` holds (raises ``ConditionFailed`` otherwise)."""
        ...

    def scan(self, table: str, limit: int = 100, cursor: dict[str, Any] | None = None) -> Page: ...


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


class Telemetry(Protocol):
    """One structured event per operation, with a correlation id; metrics alongside."""

    def event(self, name: str, correlation_id: str, **fields: Any) -> None: ...

    def metric(self, name: str, value: float, unit: str = "Count") -> None: ...


class GroupInvoker(Protocol):
    """Starts one trigger invocation for a shard group, asynchronously (docs/design.md, "Trigger
    fan-out"). Raises ``InvokeError`` when the invocation was not accepted."""

    def invoke(self, event: dict[str, Any]) -> None: ...
