"""Delivering a failed run's outcome to its job's dead-letter queue (issue 38), at least once.

The debt is written with the failure itself (``core/dead_letter.py``); this service pays it. The
worker calls ``deliver`` right after its failure commit, the miss detector after its own failure
write and for every owed run its lease sweep finds (the worker died, or its send or its record
failed). Each delivery is a send and then a conditional record; nothing here raises into the
caller: a failure leaves the debt for the next sweep, a minute later.

A send the stack or SQS refuses for good is settled as ``refused``, with a reason a person can
act on (the run's ``dead_letter_error``, the ``run.dead_letter_refused`` log line and the
``DeadLetterFailures`` metric), instead of being tried every minute for ever: a queue not on the
stack's allow-list at once; a refusal by SQS (the queue does not exist, the role or the queue's
KMS key refuses: ``DeadLetterRefused``) once it has lasted ``REFUSED_FOR_GOOD_AFTER_MS`` since the
run failed, so that a grant still propagating after a deployment, or a key a person adds to the
stack within the hour, still gets the letter through.
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
from jobsched.ports import DeadLetterRefused, Store, Telemetry
from jobsched.services.definitions import Definitions

# The stack's parameter that lists the queues a job may name (template.yaml), and grants the
# worker and the miss detector sqs:SendMessage on them.
ALLOW_LIST_PARAMETER = "AllowedDeadLetterQueueArns"
# How long SQS's refusals of a run's dead letter are retried (once a minute, ``RETRY_MS``) before
# the debt is settled as refused: IAM's changes take effect within seconds to minutes of a
# deployment, and a person alerted by ``DeadLetterFailures`` has the hour to fix the grant.
REFUSED_FOR_GOOD_AFTER_MS = 3_600_000


class DeadLetterSender(Protocol):
    def send(self, queue_arn: str, body: str, deduplication_id: str) -> None:
        """Send one message to the queue. Raises ``DeadLetterRefused`` when the queue's service
        refused it for a reason no retry mends (see the adapter), anything else on a failure that
        a later attempt may not meet."""


def dead_letter_queue_refusal(queue_arn: str, allowed: Collection[str]) -> str | None:
    """Why the stack's allow-list refuses ``queue_arn`` as a job's dead-letter queue (None: it
    allows it). Entries are matched as the grant matches them (the parameter's pattern allows no
    wildcard, so in practice an entry is the queue's ARN)."""
    if any(fnmatchcase(queue_arn, entry) for entry in allowed):
        return None
    listed = ", ".join(allowed) or "empty: none is allowed"
    return (
        f"dead-letter queue {queue_arn} is not allowed: add it to the stack's {ALLOW_LIST_PARAMETER} "
        f"parameter (now {listed}), which also grants the worker and the miss detector the send"
    )


def dead_letter_problems(queue_arn: str | None, allowed: Collection[str]) -> list[str]:
    """The registration's reason for a job whose ``dead_letter_queue_arn`` the stack refuses
    (empty: none, or no queue named), in the form of the registrar's other reasons."""
    refusal = dead_letter_queue_refusal(queue_arn, allowed) if queue_arn is not None else None
    return [] if refusal is None else [f"dead_letter_queue_arn: {refusal}"]


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
        refusal = dead_letter_queue_refusal(queue, self._allowed) if self._allowed is not None else None
        if refusal is not None:
            return self._refuse(run, queue, refusal, now)
        body = json.dumps(dead_letter_body(run), sort_keys=True, separators=(",", ":"))
        try:
            self._sender.send(queue, body, run_id)
        except Exception as exc:  # any failure of the send: the debt stays for the next sweep...
            error = f"{type(exc).__name__}: {exc}"
            if isinstance(exc, DeadLetterRefused):  # ...unless SQS has refused it for long enough
                lasted = now - int(run.get("finished_at") or now)
                window = f"{REFUSED_FOR_GOOD_AFTER_MS // 60_000} minutes"
                if lasted >= REFUSED_FOR_GOOD_AFTER_MS:
                    return self._refuse(run, queue, f"SQS refused the send for {window}: {exc}", now)
                error = f"SQS refused the send (tried again for {window} after the failure): {exc}"
            self._record(run, dead_letter_retry_op(run, error, now))
            self._telemetry.event("run.dead_letter_failed", run_id, queue=queue, error=error[:300])
            self._telemetry.metric("DeadLetterFailures", 1)
            return False
        self._record(run, dead_letter_done_op(run, SENT, now))
        self._telemetry.event("run.dead_lettered", run_id, queue=queue)
        self._telemetry.metric("DeadLetters", 1)
        return True

    def _refuse(self, run: dict[str, Any], queue: str, reason: str, now: int) -> bool:
        """Settle the debt as ``refused``, with the reason a person acts on: out of the lease
        index, never sent (the run's ``dead_letter_error`` and the log keep the reason)."""
        self._record(run, dead_letter_done_op(run, REFUSED, now, reason))
        self._telemetry.event("run.dead_letter_refused", str(run["run_id"]), queue=queue, reason=reason)
        self._telemetry.metric("DeadLetterFailures", 1)
        return False

    def _record(self, run: dict[str, Any], op: Update) -> None:
        try:
            self._store.update(op)
        except ConditionFailed:
            pass  # a racer recorded it first (it sent too: at least once, perhaps twice)
        except StoreError as exc:
            # Unrecorded: the run stays owed and in the index, and is sent again (a duplicate).
            self._telemetry.event("run.dead_letter_unrecorded", str(run["run_id"]), error=str(exc)[:300])
