"""Sending pending runs to the work queue: shared by the trigger, the worker (retries and
promoted buffered runs), the miss detector (recoveries, catch-ups) and the registrar (late runs
of a changed schedule)."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from jobsched.core.clock import Clock
from jobsched.core.errors import QueueError
from jobsched.core.limits import (
    SQS_MAX_BATCH_BYTES,
    SQS_MAX_BATCH_ENTRIES,
    SQS_MAX_MESSAGE_BYTES,
    chunks_by_size,
    message_size,
)
from jobsched.core.run import RunMessage, encode_body
from jobsched.core.timing import send_delay_seconds, start_at_ms
from jobsched.ports import OutgoingMessage, Telemetry, WorkQueue
from jobsched.services.definitions import Definitions


class Dispatcher:
    def __init__(
        self, queue: WorkQueue, telemetry: Telemetry, clock: Clock, definitions: Definitions
    ) -> None:
        self._queue = queue
        self._telemetry = telemetry
        self._clock = clock
        self._definitions = definitions

    def dispatch(self, runs: Sequence[dict[str, Any]]) -> int:
        """Send runs (oldest due first), in batches within SQS's limits by count and by bytes,
        each batch in one request. Returns how many could not be sent (the entries SQS rejected,
        or the whole batch when the request failed): they keep their dispatch lease and the miss
        detector redispatches them when it lapses, so a failed send delays a run but never loses
        it. No retry here: the client's botocore retry mode (``standard``, with backoff; see
        adapters/aws.py) already retried throttling and transient errors before the failure
        reached us, and an immediate loop on top of it only multiplied the calls."""
        sendable = [run for run in map(self._with_definition, runs) if run is not None]
        ordered = sorted(sendable, key=_due)
        bodies = [pair for pair in map(self._message, ordered) if pair is not None]
        batches = chunks_by_size(
            bodies,
            lambda pair: message_size(encode_body(pair[1])),
            SQS_MAX_BATCH_ENTRIES,
            SQS_MAX_BATCH_BYTES,
        )
        return len(runs) - len(bodies) + sum(self._send_batch(batch) for batch in batches)

    def _message(self, run: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """The run's message body, built on its own: a run that cannot be a message (an id past
        the message's limits, a message past SQS's) is logged (``run.message_invalid``) and
        counted in ``DispatchFailures``, never raised, so it cannot fail the batch it is in or
        the sweep or tick that sends it. It keeps its dispatch lease, and the miss detector fails
        it visibly once its redispatches are used up (MAX_REDISPATCHES)."""
        try:
            body = RunMessage.from_run_item(run).to_body()
            size = message_size(encode_body(body))
            if size > SQS_MAX_MESSAGE_BYTES:
                raise ValueError(f"the message is {size} bytes; SQS's limit is {SQS_MAX_MESSAGE_BYTES}")
        except (ValidationError, ValueError, KeyError, TypeError) as exc:
            self._telemetry.event(
                "run.message_invalid",
                str(run.get("run_id"))[:500],
                error=f"{type(exc).__name__}: {exc}"[:500],
            )
            self._telemetry.metric("DispatchFailures", 1)
            return None
        return run, body

    def _with_definition(self, run: dict[str, Any]) -> dict[str, Any] | None:
        """The run with the definition its message carries. A run item holds only the digest;
        the caller attaches the definition when it has it at hand, else it is read back. A run
        whose definition is gone is not sent: it keeps its dispatch lease, and the miss detector
        fails it visibly after its redispatches (MAX_REDISPATCHES)."""
        if "definition" in run:
            return run
        definition = self._definitions.load(run["job_id"], run["def_hash"])
        if definition is None:
            self._telemetry.event("run.definition_missing", run["run_id"], def_hash=run["def_hash"])
            self._telemetry.metric("DispatchFailures", 1)
            return None
        return {**run, "definition": definition}

    def _send_batch(self, batch: Sequence[tuple[dict[str, Any], dict[str, Any]]]) -> int:
        by_id = {f"m{index}": pair for index, pair in enumerate(batch)}
        now = self._clock.now_ms()
        pending = [
            OutgoingMessage(msg_id, body, send_delay_seconds(_due(run), now))
            for msg_id, (run, body) in by_id.items()
        ]
        # A failure of the whole request (after the SDK's retries) leaves every entry unsent.
        with contextlib.suppress(QueueError):
            pending = self._queue.send(pending).failed
        failed_ids = {message.id for message in pending}
        for msg_id, (run, _) in by_id.items():
            if msg_id in failed_ids:
                self._telemetry.event("run.dispatch_failed", run["run_id"], version=run["version"])
            else:
                self._telemetry.event(
                    "run.dispatched",
                    run["run_id"],
                    version=run["version"],
                    attempt=run["attempt"],
                    scheduled_at=run["scheduled_at"],
                    delay_s=send_delay_seconds(_due(run), now),
                )
        self._telemetry.metric("Dispatches", len(batch) - len(failed_ids))
        if failed_ids:
            self._telemetry.metric("DispatchFailures", len(failed_ids))
        return len(failed_ids)


def _due(run: dict[str, Any]) -> int:
    """When the run should start: its retry time for a retry, else its scheduled instant plus its
    offset in the job's start window (``jitter_seconds``; the run carries its definition here)."""
    if run.get("retry_at"):
        return int(run["retry_at"])
    return start_at_ms(str(run["run_id"]), int(run["scheduled_at"]), run.get("definition"))
