"""The worker's commits: the run's end (success or failure, with the handler's staged effects, in
one fenced write), the retry, the fenced-out end, and the promotion of the run waiting behind.

A mixin of ``Worker`` (services/worker.py), whose ``__init__`` sets the collaborators declared
here; every write is conditional on the token the worker holds, so a commit of a worker that
lost its lease changes nothing.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from typing import Any

from jobsched.core.clock import Clock
from jobsched.core.config import SchedulerConfig
from jobsched.core.errors import ConditionFailed, TransientStoreError
from jobsched.core.job import WAITING_POLICIES
from jobsched.core.limits import RequestTooLarge
from jobsched.core.policies import attempts_left, past_event_age, retry_delay_ms
from jobsched.core.run import RunKind, RunMessage, RunStatus, run_key
from jobsched.core.transitions import finish_ops, retry_op
from jobsched.core.writes import RUNS, WriteOp
from jobsched.ports import Store, Telemetry
from jobsched.services.chain import Chain
from jobsched.services.dead_letters import DeadLetters
from jobsched.services.dispatch import Dispatcher
from jobsched.services.pausing import Pauser
from jobsched.services.worker_results import Outcome, Started

COMMIT_TRIES = 4


class Committer:
    """The commit half of ``Worker``: what it needs of the worker, set by ``Worker.__init__``."""

    _store: Store
    _telemetry: Telemetry
    _clock: Clock
    _cfg: SchedulerConfig
    _rng: random.Random
    _dispatcher: Dispatcher
    _chain: Chain
    _pauser: Pauser
    _dead_letters: DeadLetters

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
        if not (waiting or is_backfill(message)):
            return
        promoted = self._chain.promote_waiting(message.run_id, now)
        if promoted is not None:
            self._telemetry.event("run.promoted", promoted["run_id"], after=message.run_id)
            self._dispatcher.dispatch([promoted])

    def _schedule_retry(self, started: Started, error: str) -> Outcome:
        message = started.message
        now = self._clock.now_ms()
        delay = retry_delay_ms(started.definition.retry, message.attempt, self._rng)
        origin = None if is_backfill(message) else message.scheduled_at
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


def is_backfill(message: RunMessage) -> bool:
    return message.kind == RunKind.BACKFILL.value
