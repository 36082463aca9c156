"""Fault injectors: a Store wrapper (throttling, transient errors, lost responses, crashes during a
heartbeat, an interleaved second trigger) and a work queue with send faults and crash points.

The store's wrapper also keeps the simulation's own ledger of what reached the store (sim/ledger.py,
mixed in), which the invariants read; the simulation's in-memory store is sim/lease_store.py.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from jobsched.core.clock import Clock
from jobsched.core.errors import ConditionFailed, Throttled, TransientStoreError
from jobsched.core.writes import (
    Cond,
    Item,
    Put,
    Update,
    WriteOp,
)
from jobsched.ports import (
    DeadLetterRefused,
    IndexName,
    OutgoingMessage,
    Page,
    SendResult,
    Store,
)

from jobsched_tools.fakes.memory_queue import MemoryWorkQueue
from jobsched_tools.sim.ledger import EFFECTS, Ledger, LedgerKeeper, StateMark
from jobsched_tools.sim.scenario import FaultRates

# Read from here by the explorer and the invariants (they are the ledger's: sim/ledger.py).
__all__ = [
    "EFFECTS",
    "REFUSING_DEAD_LETTER_QUEUE",
    "FaultyStore",
    "SimCrash",
    "SimDeadLetters",
    "SimQueue",
    "StateMark",
]


# The claim's writes the fault hooks act around (an interleaved tick, a person inside the claim, a
# crash after it landed): today's claim transaction ("advance job" on the state, "create run") and
# the successor claim's one put of the head's successor (core/transitions/head_claim.py, issue 37).
CLAIM_STATE_LABELS = frozenset({"advance job", "claim head", "claim head (end)"})
CLAIM_LABELS = frozenset({"create run", "claim head", "claim head (end)"})


class SimCrash(BaseException):
    """The simulated process dies here. A BaseException, so no service's ``except`` swallows it."""


class FaultyStore(LedgerKeeper):
    """Wraps a Store. With ``enabled``, each call may be throttled or fail transiently before it
    happens, and each write may be applied and then lose its response (TransientStoreError)."""

    def __init__(
        self,
        inner: Store,
        rng: random.Random,
        rates: FaultRates,
        counts: Counter[str],
        clock: Clock,
        log: Callable[[str, str, str, str], None],
    ) -> None:
        self.inner = inner
        self.rng = rng
        self.rates = rates
        self.counts = counts
        self.clock = clock
        self.log = log
        self.enabled = False
        self.actor = "setup"
        self.ledger = Ledger()
        # Set by the world: called once, inside a trigger's claim, to run another tick interleaved.
        self.interleave: Callable[[], None] | None = None
        # Set by the world: called once, with the job id, just before a claim creates its run.
        self.before_create: Callable[[str], None] | None = None
        # Set by the world: the next claim lands and its claimer dies (before it sends the run);
        # then ``after_mid_claim_crash`` is called with the job id.
        self.crash_after_create = False
        self.after_mid_claim_crash: Callable[[str], None] | None = None
        # Set by the world: the next heartbeat write crashes its worker ("before" or "after" it lands).
        self.heartbeat_crash: str | None = None
        # Set by the world: called with a job id after every write to a job item (the stream).
        self.on_job_write: Callable[[str], object] | None = None
        # Set by the world: called with a run id just before the detector's recovery write.
        self.before_recovery: Callable[[str], None] | None = None
        # How far any actor's clock may be off: a recovery of a lease renewed beyond it is live.
        self.skew_bound_ms = 0
        # Set by the world: stretches in which capacity runs short (FaultRates.capacity_squeezes).
        self.squeezes: list[tuple[int, int]] = []
        # Set by the world: called with the operations of each write just before it lands (a
        # migrating world's switch and stale ticks, sim/migration.py).
        self.before_write: Callable[[Sequence[WriteOp]], None] | None = None

    # --- faults --------------------------------------------------------------------------------

    def _before_call(self, what: str) -> None:
        if not self.enabled:
            return
        now = self.clock.now_ms()
        squeezed = any(start <= now < end for start, end in self.squeezes)
        if self.rng.random() < (self.rates.squeeze_throttle if squeezed else self.rates.store_throttle):
            self.counts["store_throttle"] += 1
            self.log(self.actor, "fault.store_throttle", what, "")
            raise Throttled(f"injected throttling on {what}")
        if self.rng.random() < self.rates.store_transient:
            self.counts["store_transient"] += 1
            self.log(self.actor, "fault.store_transient", what, "")
            raise TransientStoreError(f"injected transient error on {what}")

    def _after_write(self, what: str) -> None:
        if self.enabled and self.rng.random() < self.rates.store_lost_response:
            self.counts["store_lost_response"] += 1
            self.log(self.actor, "fault.store_lost_response", what, "")
            raise TransientStoreError(f"injected lost response: {what} was applied")

    # --- Store ---------------------------------------------------------------------------------

    def get(self, table: str, key: Item, consistent: bool = True) -> Item | None:
        self._before_call(f"get {_key_text(key)}")
        return self.inner.get(table, key, consistent)

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
        self._before_call(f"query {index}/{partition}")
        return self.inner.query(index, partition, sort_from, sort_to, limit, cursor, consistent)

    def scan(self, table: str, limit: int = 100, cursor: dict[str, Any] | None = None) -> Page:
        return self.inner.scan(table, limit, cursor)

    def batch_get(self, table: str, keys: Sequence[Item], consistent: bool = False) -> list[Item]:
        self._before_call(f"batch_get {table} ({len(keys)} keys)")
        return self.inner.batch_get(table, keys, consistent)

    def delete(self, table: str, key: Item, condition: tuple[Cond, ...] = (), label: str = "delete") -> None:
        self._before_call(f"delete {_key_text(key)}")
        self.inner.delete(table, key, condition, label)
        self._observe_delete(table, key)

    def write(self, ops: Sequence[WriteOp]) -> None:
        what = ", ".join(f"{op.label} {_op_key(op)}" for op in ops[:3]) + (" ..." if len(ops) > 3 else "")
        self._before_call(what)
        if self.before_write is not None:
            self.before_write(ops)
        if self.interleave is not None and any(op.label in CLAIM_STATE_LABELS for op in ops):
            interleave, self.interleave = self.interleave, None
            interleave()
        if self.before_create is not None:
            created = next((op for op in ops if op.label in CLAIM_LABELS and isinstance(op, Put)), None)
            if created is not None:
                before_create, self.before_create = self.before_create, None
                before_create(str(created.item["job_id"]))
        if self.before_recovery is not None and self.actor == "detector":
            for op in ops:
                if op.label == "recover run" and isinstance(op, Update):
                    self.before_recovery(str(op.key["run_id"]))
        pre = self._commit_preimages(ops)
        runs_before = self._run_preimages(ops)
        try:
            self.inner.write(ops)
        except ConditionFailed as lost:
            self._note_effect_conflict(ops, lost)
            raise
        self._record_commits(ops, pre)
        self._observe(ops, runs_before)
        created = next((op for op in ops if op.label in CLAIM_LABELS and isinstance(op, Put)), None)
        if self.crash_after_create and created is not None:
            self.crash_after_create = False
            self.counts["trigger_crash_mid_claim"] += 1
            if self.after_mid_claim_crash is not None:
                self.after_mid_claim_crash(str(created.item["job_id"]))
            raise SimCrash("crashed after a claim landed, before it sent")
        self._after_write(what)

    def update(self, op: Update) -> Item:
        what = f"{op.label} {_op_key(op)}"
        crash = self.heartbeat_crash if op.label == "heartbeat" else None
        if crash is not None:
            self.heartbeat_crash = None
            if crash == "before":
                raise SimCrash("worker crashed sending its heartbeat")
        self._before_call(what)
        pre = self._commit_preimages([op])
        runs_before = self._run_preimages([op])
        result = self.inner.update(op)
        self._record_commits([op], pre)
        self._observe([op], runs_before)
        if crash == "after":
            raise SimCrash("worker crashed right after its heartbeat landed")
        self._after_write(what)
        return result


class SimQueue(MemoryWorkQueue):
    """MemoryWorkQueue with send faults and a crash point: ``crash_next_send`` makes the next send
    raise SimCrash (the sender dies after its writes, before the messages leave)."""

    def __init__(
        self,
        clock: Clock,
        visibility_timeout_seconds: int,
        rng: random.Random,
        rates: FaultRates,
        counts: Counter[str],
    ) -> None:
        super().__init__(clock, visibility_timeout_seconds)
        self.rng = rng
        self.rates = rates
        self.counts = counts
        self.enabled = False
        self.crash_next_send = False
        self.fail_message = self._fail_message
        self.fail_request = self._fail_request

    def _fail_message(self, _message: OutgoingMessage) -> bool:
        if self.enabled and self.rng.random() < self.rates.sqs_send_failure:
            self.counts["sqs_send_failure"] += 1
            return True
        return False

    def _fail_request(self, _messages: Sequence[OutgoingMessage]) -> bool:
        if self.enabled and self.rng.random() < self.rates.sqs_request_failure:
            self.counts["sqs_request_failure"] += 1
            return True
        return False

    def send(self, messages: Sequence[OutgoingMessage]) -> SendResult:
        if self.crash_next_send:
            self.crash_next_send = False
            self.counts["trigger_crash_before_send"] += 1
            raise SimCrash("crashed after claiming, before sending")
        return super().send(messages)

    def inject(self, body: dict[str, Any], delay_seconds: int) -> None:
        """Queue a copy of a message (a duplicate delivery), bypassing the send faults."""
        enabled, self.enabled = self.enabled, False
        try:
            super().send([OutgoingMessage("dup", body, delay_seconds)])
        finally:
            self.enabled = enabled


def _key_text(key: Item) -> str:
    return ",".join(str(v) for v in key.values())


def _op_key(op: WriteOp) -> str:
    if isinstance(op, Put):
        return str(op.item.get("run_id") or op.item.get("job_id") or op.item.get("pk"))
    return _key_text(op.key)


# A dead-letter queue SQS refuses every send to (``dead_letter_queue_refuses``).
REFUSING_DEAD_LETTER_QUEUE = "arn:aws:sqs:us-east-1:123456789012:sim-deleted-dead-letters"


class SimDeadLetters:
    """A job's dead-letter queue: keeps every letter sent, and fails a send at a seeded rate."""

    def __init__(self, rng: random.Random, failure: float) -> None:
        self._rng = rng
        self._failure = failure
        self.sent: list[dict[str, Any]] = []
        self.failed = 0
        self.refused = 0

    def send(self, queue_arn: str, body: str, deduplication_id: str) -> None:  # noqa: ARG002
        if queue_arn == REFUSING_DEAD_LETTER_QUEUE:
            self.refused += 1
            raise DeadLetterRefused("injected: the queue does not exist: create it or change the job")
        if self._rng.random() < self._failure:
            self.failed += 1
            raise ConnectionError("injected: the dead-letter queue did not answer")
        self.sent.append(json.loads(body))
