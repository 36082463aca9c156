"""``action_after_completion: delete`` (issue 29): a complete job's item is deleted.

A job is **complete** when it will make no more runs and every run it made has ended:

- no more runs: its state is ``finished`` (an ``at()`` whose occurrence has its record, an
  ``end`` passed, ``max_runs`` reached: the claim or settle that made the last record moved the
  state to ``finished`` in the same write), and the state follows the job item as it reads now
  (its ``def_hash`` is the item's digest: no change waits to be applied, such as a raised
  ``max_runs``). A paused job is not finished, so it is never deleted. Under the successor claim
  the last claim writes its life's end marker and the state is finished by the finish write, or,
  if that was lost, by the reconcile pass (services/head_reconciler.py, HC5) before this reads it;
- every run ended: no run of the job is ``scheduled`` (under the successor claim, a claimed run
  that has not started: issue 37), ``pending``, ``running`` or ``buffered``, read from the
  job's partition of the runs table with a strongly consistent Query (every run of the job,
  whatever its overlap policy: under ``allow`` a finished run says nothing of the runs before it,
  so the chain's walk would not do).

It is level-triggered: the miss detector's reconcile pass (services/reconciler.py) hands this every
job item it compares with its state, and a job that is not complete yet (its last run still
running or retrying) is looked at again on the next pass. The delete is one transaction
(``core/transitions/register.py`` ``delete_after_completion_ops``): the job item conditional on every
definition attribute as read (a person's edit wins), and a check that the state is still the
finished one read before the runs were (no run joined since). A lost condition is counted
(``DeletesAfterCompletionLost``), never an error: the next pass reads again. After the delete the
registrar is applied at once (the state goes ``deleted``, as its REMOVE record would make it);
the runs stay as history and expire as usual. A store error (throttling, a transient error, a lost
response) defers the job to the next pass (``job.delete_after_completion_deferred``); a delete
whose response was lost has landed, and the next pass finds no item.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from enum import StrEnum

from jobsched.core.errors import ConditionFailed, StoreError
from jobsched.core.job import ActionAfterCompletion, definition_digest
from jobsched.core.policies import UNFINISHED
from jobsched.core.state import JobStatus, life_of
from jobsched.core.transitions import delete_after_completion_ops
from jobsched.core.writes import STATE, Item, failing_parts
from jobsched.ports import Store, Telemetry
from jobsched.services.paging import query_all
from jobsched.services.registrar import Registrar


class Completion(StrEnum):
    NOT_ASKED = "not_asked"  # action_after_completion is none (or the item is not a valid job)
    NOT_FINISHED = "not_finished"  # the job will still make runs, or its state lags its item
    RUNS_UNFINISHED = "runs_unfinished"  # finished, but a run has not ended yet
    DELETED = "deleted"
    LOST = "lost"  # a condition of the delete failed: a person's edit, or a run made since


@dataclass
class Completed:
    deleted: int = 0
    lost: int = 0
    waiting: int = 0  # finished, with runs still to end
    deferred: int = 0  # a store error (throttled, transient): the next pass reads again


def asks_delete(job: Item) -> bool:
    """The cheap test on the item as scanned: only a job item that says ``delete`` costs reads."""
    return job.get("action_after_completion") == ActionAfterCompletion.DELETE.value


def finished_as_written(job: Item, state: Item | None) -> bool:
    """The state is finished and follows this very item (a valid one: an invalid item's digest
    starts with ``invalid-`` and no finished state carries it)."""
    return (
        state is not None
        and state.get("status") == JobStatus.FINISHED.value
        and state.get("def_hash") == definition_digest(job)
    )


class Completer:
    def __init__(self, store: Store, telemetry: Telemetry, registrar: Registrar) -> None:
        self._store = store
        self._telemetry = telemetry
        self._registrar = registrar

    def consider(self, job: Item, state: Item | None, done: Completed | None = None) -> Completion:
        """Delete ``job`` (as scanned) if it asks for it and is complete. ``state`` is its state as
        the pass read it (eventually consistent: only a filter; the decision reads it again).
        Store errors are the caller's to isolate (they raise)."""
        done = done if done is not None else Completed()
        if not asks_delete(job):
            return Completion.NOT_ASKED
        if not finished_as_written(job, state):
            return Completion.NOT_FINISHED
        job_id = str(job["job_id"])
        state = self._store.get(STATE, {"job_id": job_id})  # strongly consistent: the version to hold
        if state is None or not finished_as_written(job, state):
            return Completion.NOT_FINISHED
        # After the state's read: a run made before it is in this strongly consistent Query, and
        # one made after it moved the state's version, which the delete's transaction checks.
        runs = list(query_all(self._store, "runs-of-job", job_id, consistent=True))
        unfinished = sorted(str(run["run_id"]) for run in runs if run.get("status") in UNFINISHED)
        if unfinished:
            done.waiting += 1
            return Completion.RUNS_UNFINISHED
        try:
            self._store.write(delete_after_completion_ops(job, state))
        except ConditionFailed as lost:
            done.lost += 1
            parts = failing_parts(lost.op.condition, lost.current)
            self._telemetry.event(
                "job.delete_after_completion_lost",
                job_id,
                lost=lost.label,
                attributes=sorted({part.attr for part in parts})[:10],
                why=sorted({part.why for part in parts})[:3],
            )
            self._telemetry.metric("DeletesAfterCompletionLost", 1)
            return Completion.LOST
        done.deleted += 1
        statuses = Counter(str(run.get("status")) for run in runs)
        self._telemetry.event(
            "job.deleted_after_completion",
            job_id,
            runs=len(runs),
            statuses=dict(sorted(statuses.items())),
            latest_run_id=state.get("latest_run_id"),
            runs_claimed=state.get("runs_claimed"),  # this life's (max_runs); runs: every life's
            life=life_of(state),
        )
        try:
            # The state goes deleted now, as the REMOVE record will make it (that record then
            # finds nothing to change). A store error here is the stream's to repair.
            self._registrar.apply(job_id)
        except StoreError as exc:  # the delete landed; the registrar function applies it later
            self._telemetry.event(
                "job.delete_after_completion_unregistered", job_id, error=f"{type(exc).__name__}: {exc}"[:500]
            )
        return Completion.DELETED
