"""Delivering a failed run's outcome to its job's dead-letter queue (issue 38), at least once.

The debt is written with the failure itself (``core/dead_letter.py``); this service pays it. The
worker calls ``deliver`` right after its failure commit, the miss detector after its own failure
write and for every owed run its lease sweep finds (the worker died, or its send or its record
failed). Each delivery is a send and then a conditional record; nothing here raises into the
caller: a failure leaves the debt for the next sweep.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from fnmatch import fnmatchcase
from typing import Any, Protocol

from jobsched.core.clock import Clock
from jobsched.core.config import SchedulerConfig
from jobsched.core.dead_letter import (
    PENDING,
    REFUSED,
    SENT,
    dead_letter_body,
    dead_letter_done_op,
    dead_letter_retry_op,
    with_dead_letter,
)
from jobsched.core.errors import ConditionFailed, StoreError
from jobsched.core.job import InvalidJob, JobDefinition
from jobsched.core.writes import Update
from jobsched.ports import Store, Telemetry
from jobsched.services.definitions import Definitions


class DeadLetterSender(Protocol):
    def send(self, queue_arn: str, body: str, deduplication_id: str) -> None:
        """Send one message to the queue (raises on failure)."""


class DeadLetters:
    def __init__(
        self,
        store: Store,
        sender: DeadLetterSender | None,
        telemetry: Telemetry,
        clock: Clock,
        cfg: SchedulerConfig,
        allowed: Collection[str] | None = None,
    ) -> None:
        """``sender`` None: this actor cannot send (the debt is still written, and left to the
        detector). ``allowed``: the stack's ``AllowedDeadLetterQueueArns`` (None allows any,
        for tests and simulations)."""
        self._store = store
        self._sender = sender
        self._telemetry = telemetry
        self._clock = clock
        self._cfg = cfg
        self._allowed = tuple(allowed) if allowed is not None else None

    def mark(self, commit: Update, run_id: str, definition: JobDefinition | None, now: int) -> Update:
        """The final failure ``commit``, owing the job's queue its outcome if it has one."""
        if definition is None or definition.dead_letter_queue_arn is None:
            return commit
        return with_dead_letter(commit, run_id, definition.dead_letter_queue_arn, now, self._cfg)

    def mark_recovered(self, commit: Update, run: dict[str, Any], now: int) -> Update:
        """As ``mark``, for a run the detector fails, which holds only its definition's digest:
        the definition is read back (one read, only for a run failing for good)."""
        item = Definitions(self._store, self._cfg).load(str(run["job_id"]), str(run.get("def_hash")))
        if item is None:
            return commit
        try:
            definition = JobDefinition.from_item(item)
        except InvalidJob:
            return commit
        return self.mark(commit, str(run["run_id"]), definition, now)

    def deliver(self, run: dict[str, Any]) -> bool:
        """Pay the debt of ``run`` (a failed run as written or read). True when sent and recorded."""
        if run.get("dead_letter") != PENDING or self._sender is None:
            return False
        now = self._clock.now_ms()
        run_id = str(run["run_id"])
        queue = str(run.get("dead_letter_queue_arn") or "")
        if self._allowed is not None and not any(fnmatchcase(queue, entry) for entry in self._allowed):
            reason = (
                f"dead-letter queue {queue} is not allowed: add it to the stack's AllowedDeadLetterQueueArns "
                "parameter, which also grants the send"
            )
            self._record(run, dead_letter_done_op(run, REFUSED, now, reason))
            self._telemetry.event("run.dead_letter_refused", run_id, queue=queue, reason=reason)
            self._telemetry.metric("DeadLetterFailures", 1)
            return False
        body = json.dumps(dead_letter_body(run), sort_keys=True, separators=(",", ":"))
        try:
            self._sender.send(queue, body, run_id)
        except Exception as exc:  # any failure of the send: the debt stays for the next sweep
            error = f"{type(exc).__name__}: {exc}"
            self._record(run, dead_letter_retry_op(run, error, now))
            self._telemetry.event("run.dead_letter_failed", run_id, queue=queue, error=error[:300])
            self._telemetry.metric("DeadLetterFailures", 1)
            return False
        self._record(run, dead_letter_done_op(run, SENT, now))
        self._telemetry.event("run.dead_lettered", run_id, queue=queue)
        self._telemetry.metric("DeadLetters", 1)
        return True

    def _record(self, run: dict[str, Any], op: Update) -> None:
        try:
            self._store.update(op)
        except ConditionFailed:
            pass  # a racer recorded it first (it sent too: at least once, perhaps twice)
        except StoreError as exc:
            # Unrecorded: the run stays owed and in the index, and is sent again (a duplicate).
            self._telemetry.event("run.dead_letter_unrecorded", str(run["run_id"]), error=str(exc)[:300])
