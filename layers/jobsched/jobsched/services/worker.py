"""The worker: fenced start, heartbeats, handler execution, fenced commit, retries.

The steps (``begin``, ``heartbeat``, ``finish``) are separate so that the chaos simulation and the
crash tests can stop a worker between any two of them; ``process`` composes them for Lambda.
Exactly once is a property of the commit: whatever a worker does, only the holder of the run's
current token can move the run on, and staged DynamoDB effects commit in the same transaction.

The worker's parts, a module each: what its steps return (``worker_results.py``), the start
behind an unfinished run (``worker_overlap.py``), the handler's run (``worker_handler.py``) and
the commits (``worker_commit.py``). ``Worker`` is the start, the heartbeat and the composed path;
it mixes in the overlap and commit halves, which share its state. The names the tests, the
simulations and the Lambda wiring import stay importable from here.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Collection
from typing import Any

from jobsched.core.clock import Clock, EventWaiter, Waiter
from jobsched.core.config import SchedulerConfig
from jobsched.core.errors import ConditionFailed, StoreError, TransientStoreError
from jobsched.core.job import InvalidJob, JobDefinition, OverlapPolicy
from jobsched.core.policies import (
    UNFINISHED,
    OverlapDecision,
    attempts_left,
    decide_overlap,
)
from jobsched.core.run import AWAITING_START, RunMessage, RunStatus, run_key
from jobsched.core.timing import start_at_ms, worker_lease_until
from jobsched.core.transitions import (
    cancelled_error,
    heartbeat_op,
    overtake_op,
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
from jobsched.services.worker_commit import COMMIT_TRIES, is_backfill
from jobsched.services.worker_handler import SANDBOX_MUST_END, run_handler
from jobsched.services.worker_overlap import OverlapSettler
from jobsched.services.worker_results import FENCED_OUT, HandlerResult, Outcome, Started
from jobsched.targets.registry import (
    EffectTables,
    HandlerRegistry,
    RunContext,
    RunLogger,
)

__all__ = [
    "COMMIT_TRIES",
    "EARLY_WAIT_MAX_MS",
    "FENCED_OUT",
    "NEVER_THIS_EARLY_MS",
    "SANDBOX_MUST_END",
    "HandlerResult",
    "Outcome",
    "Started",
    "Worker",
]

# A message may arrive up to a second early (SQS delays are whole seconds); within this bound the
# worker waits out the remainder so the start is on time, beyond it the message is re-sent.
EARLY_WAIT_MAX_MS = 5_000
# No sender ever sends a message this far ahead of its instant (SQS delays stop at 900 s, and so
# does the trigger's lookahead): one that says so was not written by jobsched and would otherwise
# be deferred again every 15 minutes forever. It goes to the dead-letter queue instead.
NEVER_THIS_EARLY_MS = (900 + 60) * 1000


class Worker(OverlapSettler):
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
        adopt_scheduled: bool = False,
    ) -> None:
        """``effect_tables``: the tables handlers may stage effects on (the Lambda wiring passes
        the stack's list; None allows any, for tests and simulations on their own stores).
        ``dead_letter_sender`` and ``dead_letter_queues``: the jobs' dead-letter queues and the
        stack's allow-list of them (services/dead_letters.py). ``adopt_scheduled``: the successor
        claim's worker adoption (HC3, ``OverlapSettler._adopted``); the Lambda wiring turns it on
        (runtime/wiring.py): it acts only on a run its refused start read ``scheduled``, so on a
        legacy stack it never fires and costs no read."""
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
        self._adopt_scheduled = adopt_scheduled
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
            decision = decide_overlap(definition.overlap, message.run_id, holder, is_backfill(message))
            if holder is not None and decision is not OverlapDecision.RUN:
                settled = self._settle_overlap(message, definition.overlap, decision, holder, now, passed)
                if isinstance(settled, RunMessage):
                    message, overtaken_by = settled, None  # adopted (HC3): walk from its own link
                    continue
                if settled is not None:
                    return settled
                continue  # the holder moved on meanwhile: walk the chain again
            begun = self._start(message, definition, owner, overtaken_by, passed, now, deadline_ms)
            if isinstance(begun, tuple):
                message, overtaken_by = begun  # walk the chain again, as this message
                continue
            return begun
        raise TransientStoreError(f"run {message.run_id}: could not settle the start; SQS will redeliver")

    def _start(
        self,
        message: RunMessage,
        definition: JobDefinition,
        owner: str,
        overtaken_by: str | None,
        passed: list[dict[str, Any]],
        now: int,
        deadline_ms: int,
    ) -> Started | Outcome | tuple[RunMessage, str | None]:
        """The start's write, with the marks of the runs it passes over. A pair: walk the chain
        again as this message, knowing this overtaker (``start_op``'s ``overtaken_by``)."""
        lease_until = worker_lease_until(now, deadline_ms, self._cfg)
        start = start_op(
            message.run_id, message.version, owner, lease_until, now, overtaken_by, overtakes=bool(passed)
        )
        ops: list[WriteOp] = [start, *(overtake_op(run, message.run_id) for run in passed)]
        try:
            self._write_unsure(ops, lambda: self._is_own_start(message, owner))
        except ConditionFailed as lost:
            if lost.op is not start:
                return message, overtaken_by  # a run passed over started or was recovered
            current = lost.current or {}
            if _still_ours(current, message) and current.get("overtaken_by") != overtaken_by:
                return message, current.get("overtaken_by")  # a run started before this came due
            adopted = self._adopted(message, lost.current)
            if adopted is not None:
                return adopted, None  # from the run's own link, at its own token
            return self._drop_duplicate(message, lost.current)  # a duplicate or stale message
        return self._started(message, definition, owner, now, deadline_ms)

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
        """Run the handler in a thread, heartbeating until it returns, times out or is fenced
        (services/worker_handler.py)."""
        return run_handler(
            started, self._registry, self._waiter, self._clock, self._cfg, self._telemetry, self.heartbeat
        )

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


def _start_at(message: RunMessage) -> int:
    return start_at_ms(message.run_id, message.scheduled_at, message.definition)


def _still_ours(current: dict[str, Any], message: RunMessage) -> bool:
    """The run is as the message knows it: awaiting its start under the message's token."""
    return current.get("status") in AWAITING_START and current.get("version") == message.version
