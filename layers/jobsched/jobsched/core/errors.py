"""The core's own failures. Adapters map boto3 errors to these; no boto3 error reaches the core."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jobsched.core.writes import WriteOp


class StoreError(Exception):
    """Base class for store failures."""


class ConditionFailed(StoreError):
    """A conditional write lost: the item was not as the writer read it.

    ``op`` is the operation whose condition failed (the very object the caller passed, so a
    service asks "was it my commit?" with ``lost.op is commit``, never by its position in the
    transaction), ``op_index`` its position, and ``current`` the item as it is now where the
    store could return it (DynamoDB's ``ReturnValuesOnConditionCheckFailure=ALL_OLD``), so the
    caller can tell a lost race from its own earlier write whose response was lost.
    """

    def __init__(self, op_index: int, op: WriteOp, current: dict[str, Any] | None) -> None:
        super().__init__(f"condition failed on {op.label} (operation {op_index})")
        self.op_index = op_index
        self.op = op
        self.current = current

    @property
    def label(self) -> str:
        return self.op.label


class Throttled(StoreError):
    """The store refused for capacity after the SDK's own retries; the work is picked up later."""


class TransientStoreError(StoreError):
    """The outcome is unknown: the write may or may not have happened (e.g. a lost response)."""


class QueueError(Exception):
    """Sending to the work queue failed for the whole request."""


class InvokeError(Exception):
    """An asynchronous invocation (a trigger group) was not accepted."""
