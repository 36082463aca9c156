"""The worker: fenced start, heartbeats, handler execution, fenced commit, retries.

The steps (``begin``, ``heartbeat``, ``finish``) are separate so that the chaos simulation and the
crash tests can stop a worker between any two of them; ``process`` composes them for Lambda.
Exactly once is a property of the commit: whatever a worker does, only the holder of the run's
current token can move the run on, and staged DynamoDB effects commit in the same transaction.
"""

from __future__ import annotations

import contextvars
import functools
import itertools
import random
import threading
import traceback
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from jobsched.core.clock import Clock, EventWaiter, Waiter
from jobsched.core.config import SchedulerConfig
from jobsched.core.errors import ConditionFailed, StoreError, TransientStoreError
from jobsched.core.job import WAITING_POLICIES, InvalidJob, JobDefinition, OverlapPolicy
from jobsched.core.limits import RequestTooLarge
from jobsched.core.policies import (
    UNFINISHED,
    OverlapDecision,
    attempts_left,
    decide_overlap,
    past_event_age,
    retry_delay_ms,
    skipped_for,
)
from jobsched.core.run import RunKind, RunMessage, RunStatus, run_key
from jobsched.core.timing import start_at_ms, worker_lease_until
from jobsched.core.transitions import (
    buffer_at_start_ops,
    cancelled_error,
    finish_ops,
    heartbeat_op,
    overtake_op,
    retry_op,
    skip_at_start_ops,
    start_op,
)
from jobsched.core.writes import RUNS, WriteOp
from jobsched.ports import Store, Telemetry, WorkQueue
from jobsched.services.chain import Chain
from jobsched.services.dead_letters import DeadLetters, DeadLetterSender
from jobsched.services.definitions import Definitions
from jobsched.services.dispatch import Dispatcher
from jobsched.services.messages import PoisonMessage
from jobsched.services.pausing import Pauser
from jobsched.targets.registry import (
    EffectTables,
    HandlerRegistry,
    PermanentHandlerError,
    RunContext,
    RunLogger,
)

# A message may arrive up to a second early (SQS delays are whole seconds); within this bound the
# worker waits out the remainder so the start is on time, beyond it the message is re-sent.
EARLY_WAIT_MAX_MS = 5_000
# No sender ever sends a message this far ahead of its instant (SQS delays stop at 900 s, and so
# does the trigger's lookahead): one that says so was not written by jobsched and would otherwise
# be deferred again every 15 minutes forever. It goes to the dead-letter queue instead.
NEVER_THIS_EARLY_MS = (900 + 60) * 1000
COMMIT_TRIES = 4


class Outcome(StrEnum):
    SUCCEEDED = "succeeded"
    RETRY_SCHEDULED = "retry_scheduled"
    FAILED = "failed"
    DUPLICATE = "duplicate_dropped"
    FENCED_OUT = "fenced_out"
    SKIPPED = "skipped"
    BUFFERED = "buffered"
    DEFERRED = "deferred"
    ABANDONED = "abandoned"


@dataclass
class Started:
    message: RunMessage
    definition: JobDefinition
    token: int  # the fencing token this worker holds
    owner: str
    started_at: int
    deadline_ms: int
    context: RunContext
    # ``cancel_other``: the run that asked this one to stop (seen in a heartbeat's response).
    cancel_requested_by: str | None = None


@dataclass
class HandlerResult:
    ok: bool
    error: str | None = None
    staged: list[WriteOp] = field(default_factory=list)
    # No attempt can succeed (the target names no handler here, or the handler raised a
    # PermanentHandlerError such as NotAllowed): fail now, without retries.
    permanent: bool = False
    # The worker lost its lease while the handler ran: nothing may be committed.
    fenced: bool = False
    # Past its timeout the handler ignored ``ctx.cancelled`` until the invocation's deadline: its
    # thread cannot be killed, so nothing is recorded (the lease, held to the deadline, keeps the
    # job's turn) and the sandbox must end with it (``SANDBOX_MUST_END``).
    abandoned: bool = False


# Set once a handler's thread outlived its run in this process: a Python thread cannot be killed,
# and a Lambda sandbox thaws it beside whatever it runs next. The worker function ends its
# process after the batch (functions/worker/app.py), so the thread never runs beside a later
# attempt or occurrence: its run stays ``running`` under a lease that lapses only after the
# Lambda deadline, and the miss detector recovers it once the process is gone.
SANDBOX_MUST_END = threading.Event()


FENCED_OUT = HandlerResult(False, "fenced out: lease lost", fenced=True)


class Worker:
    def __init__(
        self,
        store: Store,
        queue: WorkQueue,
        telemetry: Telemetry,
        clock: Clock,
        cfg: SchedulerConfig,
        registry: HandlerRegistry,
        worker_id: str,
        logger_for: Callable[[str], RunLogger],
        sleep_ms: Callable[[int], None] = lambda _ms: None,
        rng: random.Random | None = None,
        waiter: Waiter | None = None,
        effect_tables: EffectTables | None = None,
        dead_letter_sender: DeadLetterSender | None = None,
        dead_letter_queues: Collection[str] | None = None,
    ) -> None:
        """``effect_tables``: the tables handlers may stage effects on (the Lambda wiring passes
        the stack's list; None allows any, for tests and simulations on their own stores).
        ``dead_letter_sender`` and ``dead_letter_queues``: the jobs' dead-letter queues and the
        stack's allow-list of them (services/dead_letters.py)."""
        self._store = store
        self._effect_tables = effect_tables
        self._telemetry = telemetry
        self._clock = clock
        self._cfg = cfg
        self._registry = registry
        self._worker_id = worker_id
        self._logger_for = logger_for
        self._sleep_ms = sleep_ms
        self._waiter = waiter or EventWaiter()
        self._rng = rng or random.Random()
        self._dispatcher = Dispatcher(queue, telemetry, clock, Definitions(store, cfg))
        self._chain = Chain(store, cfg)
        self._pauser = Pauser(store, telemetry, clock)
        self._dead_letters = DeadLetters(store, dead_letter_sender, telemetry, clock, cfg, dead_letter_queues)
        # Records of one batch run on concurrent threads: next() on a count is atomic in CPython,
        # so every takeover gets its own owner tag (it tells a worker's own write from a racer's).
        self._takeovers = itertools.count(1)

    # --- the composed path, used by the Lambda handler ---------------------------------------

    def process(self, message: RunMessage, deadline_ms: int) -> Outcome:
        begun = self.begin(message, deadline_ms)
        if not isinstance(begun, Started):
            return begun
        result = self.execute(begun)
        return self.finish(begun, result)

    # --- steps -------------------------------------------------------------------------------

    def begin(self, message: RunMessage, deadline_ms: int) -> Started | Outcome:
        early = _start_at(message) - self._clock.now_ms()
        if early > NEVER_THIS_EARLY_MS:
            raise PoisonMessage(
                f"run {message.run_id}: scheduled {early // 1000} s ahead; no jobsched sender sends "
                "a message more than 900 s early"
            )
        if message.attempt == 1 and early > EARLY_WAIT_MAX_MS:
            # Delivered far too early (should not happen with SQS delays): send it back, delayed.
            self._dispatcher.dispatch([message.as_run_item()])
            self._telemetry.event("run.deferred", message.run_id, early_ms=early)
            return Outcome.DEFERRED
        if message.attempt == 1 and early > 0:
            self._sleep_ms(early)
        try:
            definition = JobDefinition.from_item(message.definition)
        except InvalidJob as exc:
            # The snapshot was valid when claimed; an invalid one means a corrupted message.
            raise PoisonMessage(f"run {message.run_id}: definition invalid: {exc}") from exc
        owner = f"{self._worker_id}/{next(self._takeovers)}"
        overtaken_by: str | None = None  # a run that passed over this one, as its lost start read
        for _ in range(COMMIT_TRIES):
            now = self._clock.now_ms()
            holder, passed = self._turn(message, definition, overtaken_by, now)
            decision = decide_overlap(definition.overlap, message.run_id, holder, _is_backfill(message))
            if holder is not None and decision is not OverlapDecision.RUN:
                settled = self._settle_overlap(message, definition.overlap, decision, holder, now, passed)
                if settled is not None:
                    return settled
                continue  # the holder moved on meanwhile: walk the chain again
            lease_until = worker_lease_until(now, deadline_ms, self._cfg)
            start = start_op(
                message.run_id, message.version, owner, lease_until, now, overtaken_by, overtakes=bool(passed)
            )
            ops: list[WriteOp] = [start, *(overtake_op(run, message.run_id) for run in passed)]
            try:
                self._write_unsure(ops, lambda: self._is_own_start(message, owner))
            except ConditionFailed as lost:
                if lost.op is not start:
                    continue  # a run passed over started or was recovered: walk again
                current = lost.current or {}
                if _still_ours(current, message) and current.get("overtaken_by") != overtaken_by:
                    overtaken_by = current.get("overtaken_by")  # a run started before this came due
                    continue
                return self._drop_duplicate(message, lost.current)  # a duplicate or stale message
            return self._started(message, definition, owner, now, deadline_ms)
        raise TransientStoreError(f"run {message.run_id}: could not settle the start; SQS will redeliver")

    def _turn(
        self, message: RunMessage, definition: JobDefinition, overtaken_by: str | None, now: int
    ) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        """Who holds the job's turn before this run (None: free), and the runs not yet due that
        this start passes over. A run that overtook this one holds the turn until it ends."""
        if definition.overlap is OverlapPolicy.ALLOW:
            return None, []
        if overtaken_by is not None:
            overtaker = self._store.get(RUNS, run_key(overtaken_by))
            if overtaker is not None and overtaker.get("status") in UNFINISHED:
                return overtaker, []
        # buffer_all keeps strict chain order: a run not yet due holds the turn too, so no run
        # overtakes another and every run waits behind the one before it (docs/design.md).
        return self._chain.holder(
            message.after_run_id,
            now,
            overtake=definition.overlap is not OverlapPolicy.BUFFER_ALL,
            walker=message.run_id,
        )

    def _started(
        self, message: RunMessage, definition: JobDefinition, owner: str, now: int, deadline_ms: int
    ) -> Started:
        token = message.version + 1
        lag = now - _start_at(message)  # against the jittered start (``jitter_seconds``)
        context = RunContext(
            job_id=message.job_id,
            run_id=message.run_id,
            payload=definition.payload,
            scheduled_at=message.scheduled_at,
            attempt=message.attempt,
            fencing_token=token,
            idempotency_key=message.run_id,
            logger=self._logger_for(message.run_id),
            effect_tables=self._effect_tables,
        )
        self._telemetry.event(
            "run.started", message.run_id, attempt=message.attempt, token=token, lag_ms=lag, owner=owner
        )
        if message.attempt == 1:
            self._telemetry.metric("StartLag", max(0, lag), "Milliseconds")
        return Started(message, definition, token, owner, now, deadline_ms, context)

    def _settle_overlap(
        self,
        message: RunMessage,
        policy: OverlapPolicy,
        decision: OverlapDecision,
        holder: dict[str, Any],
        now: int,
        passed: list[dict[str, Any]] | None = None,
        register: bool = True,
    ) -> Outcome | None:
        """An unfinished run holds the job's turn: skip or wait behind it. None: decide again.
        ``passed``: the runs not yet due the walk passed over on its way to the holder."""
        if decision is OverlapDecision.BUFFER and _is_backfill(message):
            end = self._chain.line_end(holder, message.run_id)
            if end is None:
                return None  # the line moved: decide again
            holder = end
        holder_id = str(holder["run_id"])
        reason: str | None = None
        if decision is OverlapDecision.BUFFER:
            cancel = policy is OverlapPolicy.CANCEL_OTHER
            one_waits = (OverlapPolicy.BUFFER_ONE, OverlapPolicy.CANCEL_OTHER)
            alone = policy in one_waits and not _is_backfill(message)
            ops = buffer_at_start_ops(
                message.run_id,
                message.version,
                holder,
                now,
                self._cfg,
                cancel=cancel,
                register=register,
                alone=alone,
            )
            event, outcome = "run.buffered", Outcome.BUFFERED
        else:
            reason = f"overlap policy skip: {holder_id} still {holder.get('status')}"
            blocked_by = skipped_for(holder, passed[0]["run_id"] if passed else None)
            if blocked_by != holder_id:
                reason += f"; the walk goes on at {blocked_by}"
            ops = skip_at_start_ops(message.run_id, message.version, reason, blocked_by, now, self._cfg)
            event, outcome = "run.skipped", Outcome.SKIPPED
        try:
            self._store.write(ops)
        except ConditionFailed as lost:
            if lost.op is ops[0]:
                if decision is OverlapDecision.BUFFER and _waited_on(lost.current, message):
                    # A run waits behind this one already (W16): at most one waits, so this run
                    # is skipped, and its end promotes the one waiting behind it.
                    return self._settle_overlap(message, policy, OverlapDecision.SKIP, holder, now, passed)
                return self._drop_duplicate(message, lost.current)  # it moved on meanwhile
            current = lost.current or {}
            if (
                policy is OverlapPolicy.BUFFER_ALL
                and current.get("status") in UNFINISHED
                and current.get("buffered_next") not in (None, message.run_id)
            ):
                # Another run waits behind this holder already (one whose own predecessor ended
                # without starting): wait unnamed, never skip; the detector re-decides it.
                return self._settle_overlap(message, policy, decision, holder, now, passed, register=False)
            return None  # the holder ended (or another run waits behind it): decide again
        self._telemetry.event(event, message.run_id, holder=holder_id, reason=reason)
        if decision is OverlapDecision.BUFFER and policy is OverlapPolicy.CANCEL_OTHER:
            self._telemetry.event("run.cancel_requested", holder_id, by=message.run_id)
        if outcome is Outcome.SKIPPED:
            self._telemetry.metric("SkippedRuns", 1)
            self._after_end(message, now)  # a run may wait behind this one
        return outcome

    def _drop_duplicate(self, message: RunMessage, current: dict[str, Any] | None) -> Outcome:
        self._telemetry.event(
            "run.duplicate_dropped",
            message.run_id,
            message_version=message.version,
            current_version=current.get("version") if current else None,
            current_status=current.get("status") if current else "absent",
        )
        self._telemetry.metric("DuplicatesDropped", 1)
        return Outcome.DUPLICATE

    def _is_own_start(self, message: RunMessage, owner: str) -> bool:
        run = self._store.get(RUNS, run_key(message.run_id))
        return bool(run and run.get("owner") == owner and run.get("version") == message.version + 1)

    def heartbeat(self, started: Started) -> bool:
        """Renew the lease. False: the token changed (the run was recovered); stop, don't commit."""
        now = self._clock.now_ms()
        lease_until = worker_lease_until(now, started.deadline_ms, self._cfg)
        try:
            renewed = self._store.update(
                heartbeat_op(started.message.run_id, started.token, started.owner, lease_until, now)
            )
        except ConditionFailed:
            started.context.cancelled.set()
            self._telemetry.event("run.heartbeat_lost", started.message.run_id, token=started.token)
            return False
        except StoreError:
            return True  # transient: the lease has slack for the next heartbeat
        self._telemetry.event(
            "run.heartbeat", started.message.run_id, token=started.token, lease_until=lease_until
        )
        requested = (renewed or {}).get("cancel_requested")
        if requested and started.cancel_requested_by is None:
            # cancel_other: a newer run waits behind this one and asked it to stop. The lease is
            # still ours: the handler is told (ctx.cancelled) and the worker commits its end.
            started.cancel_requested_by = str(requested)
            started.context.cancelled.set()
            self._telemetry.event("run.cancelling", started.message.run_id, by=requested)
        return True

    def execute(self, started: Started) -> HandlerResult:
        """Run the handler in a thread, heartbeating until it returns, times out or is fenced."""
        handler = self._registry.get(started.definition.target)
        if handler is None:
            known = ", ".join(self._registry.names()) or "none"
            return HandlerResult(
                False,
                f"no handler named {started.definition.target!r} (registered: {known})",
                permanent=True,
            )
        outcome: dict[str, Any] = {}
        done = threading.Event()

        def run() -> None:
            try:
                outcome["value"] = handler(started.context)
            except Exception as exc:  # a handler's failure is data for the retry policy
                outcome["error"] = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=5)}"
                # ... unless no retry can mend it (the stack's allow-lists refuse the call).
                outcome["permanent"] = isinstance(exc, PermanentHandlerError)
            finally:
                done.set()

        # The handler's thread starts in a copy of this thread's context: what was bound to the
        # run here (the logger's run id: runtime/telemetry.py bind_run) holds there too.
        thread = threading.Thread(
            target=contextvars.copy_context().run,
            args=(run,),
            name=f"handler-{started.message.run_id}",
            daemon=True,
        )
        thread.start()
        timeout_at = started.started_at + started.definition.timeout_seconds * 1000
        last_moment = started.deadline_ms - self._cfg.deadline_margin_ms
        timeout_at = min(timeout_at, last_moment)
        while not self._waiter.wait(done, self._cfg.heartbeat_seconds * 1000):
            now = self._clock.now_ms()
            if now >= timeout_at and not started.context.cancelled.is_set():
                # Ask the handler to stop, and keep its lease while it does: recording the
                # timeout now would let a retry or the next occurrence start beside it.
                started.context.cancelled.set()
                self._telemetry.event("run.timed_out", started.message.run_id, cancelled=True)
            if started.context.cancelled.is_set() and now >= last_moment:
                SANDBOX_MUST_END.set()
                self._telemetry.event("run.abandoned", started.message.run_id, thread=thread.name)
                return HandlerResult(False, "handler ignored its cancellation", abandoned=True)
            if not self.heartbeat(started):
                SANDBOX_MUST_END.set()  # the handler's thread may run on: not beside our next run
                return FENCED_OUT
        if self._clock.now_ms() > timeout_at or started.context.cancelled.is_set():
            return HandlerResult(False, f"timed out after {started.definition.timeout_seconds} s")
        if started.context.staging_error is not None:
            # No attempt could commit what it staged: fail now, never retry.
            return HandlerResult(False, started.context.staging_error, permanent=True)
        if "error" in outcome:
            return HandlerResult(False, str(outcome["error"]), permanent=bool(outcome.get("permanent")))
        return HandlerResult(True, staged=list(started.context.staged))

    def finish(self, started: Started, result: HandlerResult) -> Outcome:
        if result.fenced:
            return self._fenced_out(started, None)
        if result.abandoned:
            return Outcome.ABANDONED  # nothing recorded: the lease lapses after the process ends
        if result.ok:
            return self._commit(started, RunStatus.SUCCEEDED, None, result.staged)
        error = result.error or "failed"
        if started.cancel_requested_by is not None:
            # Stopped for the run waiting behind it: not retried (that run takes the turn next).
            error = cancelled_error(started.cancel_requested_by, error)
            return self._commit(started, RunStatus.FAILED, error, [])
        if not result.permanent and attempts_left(started.definition.retry, started.message.attempt):
            return self._schedule_retry(started, error)
        return self._commit(started, RunStatus.FAILED, error, [])

    # --- commits -----------------------------------------------------------------------------

    def _commit(
        self, started: Started, status: RunStatus, error: str | None, staged: list[WriteOp]
    ) -> Outcome:
        message = started.message
        now = self._clock.now_ms()
        for _ in range(COMMIT_TRIES):
            commit = finish_ops(
                message.run_id, started.token, RunStatus.RUNNING, status, now, self._cfg, error
            )
            # A run failed for good owes its job's dead-letter queue its outcome, in this write.
            owed = status is RunStatus.FAILED and started.cancel_requested_by is None
            if owed:
                commit = self._dead_letters.mark(commit, message.run_id, started.definition, now)
            ops: list[WriteOp] = [commit, *staged]
            try:
                self._write_unsure(ops, functools.partial(self._is_own_commit, started, status))
            except RequestTooLarge as refused:
                if not staged:
                    raise  # the run's own commit: a bug, not the handler's doing
                # The store refused the staged effects for their size (an update's whole item is
                # known only there): deterministic, so the run fails finally, with the reason.
                staged, status, error = (
                    [],
                    RunStatus.FAILED,
                    f"staged effects refused for their size: {refused}",
                )
                continue
            except ConditionFailed as lost:
                if lost.op is commit:
                    return self._fenced_out(started, lost.current)
                # A staged effect's own condition failed: the effect and the commit are one
                # transaction, so neither happened. Treat it as the handler failing.
                failure = f"staged write {lost.label!r} failed its condition"
                staged, status, error = [], RunStatus.FAILED, failure
                if attempts_left(started.definition.retry, message.attempt):
                    return self._schedule_retry(started, failure)
                continue
            duration = now - started.started_at
            event = "run.succeeded" if status is RunStatus.SUCCEEDED else "run.failed"
            self._telemetry.event(
                event,
                message.run_id,
                attempt=message.attempt,
                duration_ms=duration,
                error=error,
                effects=len(staged),
                scheduled_at=message.scheduled_at,
            )
            self._telemetry.metric("Successes" if status is RunStatus.SUCCEEDED else "Failures", 1)
            self._telemetry.metric("RunDuration", duration, "Milliseconds")
            self._after_end(message, now)
            if owed and "dead_letter" in commit.set:
                self._dead_letters.deliver({**message.as_run_item(), **commit.set})
            if (
                status is RunStatus.FAILED
                and started.definition.pause_on_failure
                and started.cancel_requested_by is None  # stopped for a newer run: no failure
            ):
                self._pauser.after_final_failure(
                    message.job_id, message.run_id, started.definition.definition_hash(), error or ""
                )
            return Outcome.SUCCEEDED if status is RunStatus.SUCCEEDED else Outcome.FAILED
        raise TransientStoreError(f"run {message.run_id}: commit kept conflicting; SQS will redeliver")

    def _after_end(self, message: RunMessage, now: int) -> None:
        """The run ended: promote the run waiting behind it (``buffer_one``, ``buffer_all``,
        ``cancel_other``; under the others none waits; and a backfill run may wait behind any run:
        a backfill run's end looks too; a backfill run waiting behind another run is promoted by
        the miss detector once that run has ended). One read when nothing waits."""
        waiting = message.definition.get("overlap") in {policy.value for policy in WAITING_POLICIES}
        if not (waiting or _is_backfill(message)):
            return
        promoted = self._chain.promote_waiting(message.run_id, now)
        if promoted is not None:
            self._telemetry.event("run.promoted", promoted["run_id"], after=message.run_id)
            self._dispatcher.dispatch([promoted])

    def _schedule_retry(self, started: Started, error: str) -> Outcome:
        message = started.message
        now = self._clock.now_ms()
        delay = retry_delay_ms(started.definition.retry, message.attempt, self._rng)
        origin = None if _is_backfill(message) else message.scheduled_at
        too_old = past_event_age(started.definition.max_event_age_seconds, origin, now + delay)
        if too_old is not None:
            return self._commit(started, RunStatus.FAILED, f"{too_old}; last error: {error}", [])
        op = retry_op(message.run_id, started.token, message.attempt, delay, error, now, self._cfg)
        try:
            self._write_unsure([op], lambda: self._is_own_retry(started))
        except ConditionFailed as lost:
            return self._fenced_out(started, lost.current)
        self._telemetry.event(
            "run.retry_scheduled",
            message.run_id,
            attempt=message.attempt + 1,
            delay_ms=delay,
            error=error[:500],
        )
        self._telemetry.metric("Retries", 1)
        retry = message.as_run_item()
        retry.update(version=started.token + 1, attempt=message.attempt + 1, retry_at=now + delay)
        self._dispatcher.dispatch([retry])
        return Outcome.RETRY_SCHEDULED

    def _fenced_out(self, started: Started, current: dict[str, Any] | None) -> Outcome:
        self._telemetry.event(
            "run.fenced_out",
            started.message.run_id,
            token=started.token,
            current_version=current.get("version") if current else None,
            current_status=current.get("status") if current else None,
        )
        self._telemetry.metric("FencedOut", 1)
        return Outcome.FENCED_OUT

    def _is_own_commit(self, started: Started, status: RunStatus) -> bool:
        run = self._store.get(RUNS, run_key(started.message.run_id))
        return bool(
            run
            and run.get("status") == status.value
            and run.get("version") == started.token + 1
            and run.get("owner") == started.owner
        )

    def _is_own_retry(self, started: Started) -> bool:
        run = self._store.get(RUNS, run_key(started.message.run_id))
        return bool(
            run
            and run.get("version") == started.token + 1
            and run.get("attempt") == started.message.attempt + 1
        )

    def _write_unsure(self, ops: list[WriteOp], was_mine: Callable[[], bool]) -> None:
        """Write; when the outcome is unknown (a lost response), look: if the write landed, it's
        done; if not, try once more. Conditions make the second try safe."""
        try:
            self._store.write(ops)
        except TransientStoreError:
            if was_mine():
                return
            self._store.write(ops)


def _waited_on(current: dict[str, Any] | None, message: RunMessage) -> bool:
    """The run is still this message's to start, and another run waits behind it."""
    return (
        current is not None
        and current.get("status") == RunStatus.PENDING.value
        and current.get("version") == message.version
        and current.get("buffered_next") is not None
    )


def _is_backfill(message: RunMessage) -> bool:
    return message.kind == RunKind.BACKFILL.value


def _start_at(message: RunMessage) -> int:
    return start_at_ms(message.run_id, message.scheduled_at, message.definition)


def _still_ours(current: dict[str, Any], message: RunMessage) -> bool:
    """The run is as the message knows it: pending under the message's token."""
    return current.get("status") == RunStatus.PENDING.value and current.get("version") == message.version
