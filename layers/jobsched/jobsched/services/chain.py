"""The job's chain of runs, as the worker and the miss detector read and move it.

Overlap is decided from the chain (``core/policies.py``), not from a slot on the job: the claim
links each run to the one before it in the write it makes anyway, and a run's start reads its
way back (strongly consistent reads, a fifth of a write unit's price each). Nothing is written to
take the job's turn or to give it back, so ``skip``, the default, costs what ``allow`` costs.
What is written only when a run waits (``buffer_one``): the wait, and the promotion at its end.
"""

from __future__ import annotations

from typing import Any

from jobsched.core.clock import dt_to_ms, ms_to_dt
from jobsched.core.config import SchedulerConfig
from jobsched.core.errors import ConditionFailed, StoreError
from jobsched.core.policies import MAX_CHAIN_STEPS, chain_step
from jobsched.core.run import NOT_RUN, RunKind, RunStatus, run_id_for, run_key
from jobsched.core.state import JobStatus, state_schedule
from jobsched.core.transitions import UnfinishedClaim, promote_op
from jobsched.core.writes import RUNS
from jobsched.ports import Store

Item = dict[str, Any]


class Chain:
    def __init__(self, store: Store, cfg: SchedulerConfig) -> None:
        self._store = store
        self._cfg = cfg

    def holder(self, after_run_id: str | None) -> Item | None:
        """The unfinished run that holds the job's turn before this one, or None: it is free."""
        run_id = after_run_id
        for _ in range(MAX_CHAIN_STEPS):
            if run_id is None:
                return None
            run = self._store.get(RUNS, run_key(run_id))
            holds, run_id = chain_step(run)
            if holds:
                return run
        if run_id is None:
            return None
        # Too long a walk: treat the turn as taken (skip behind the last run read), never as free.
        return {"run_id": run_id, "status": RunStatus.BUFFERED.value}

    def promote_waiting(self, holder_id: str, now: int) -> Item | None:
        """After the holder ended: promote the run waiting behind it, if any. Returns the run to
        dispatch. Best effort: a failure here leaves the waiting run's lease to the miss detector
        (``recheck_buffered_ops``), which promotes it when its lease lapses."""
        try:
            holder = self._store.get(RUNS, run_key(holder_id))
            waiting_id = holder.get("buffered_next") if holder else None
            waiting = self._store.get(RUNS, run_key(waiting_id)) if waiting_id else None
            if waiting is None or waiting.get("status") != RunStatus.BUFFERED.value:
                return None
            if waiting.get("blocked_by") != holder_id:
                return None
            op, promoted = promote_op(waiting, holder_id, now, self._cfg)
            self._store.update(op)
        except (ConditionFailed, StoreError):
            return None
        return promoted


def unfinished_claim(store: Store, state: Item | None) -> UnfinishedClaim | None:
    """The claim of the job's next occurrence that made its run but has not advanced the job, if
    any (one strongly consistent read, paid when the miss detector is about to send a scheduled
    run that was never sent). A run made by anyone else is in the chain already: a backfill or
    the miss detector moved the chain's end with it, and a missed or cancelled record holds no
    turn."""
    if state is None or state.get("status") != JobStatus.ACTIVE.value or "next_run_at" not in state:
        return None
    occurrence = int(state["next_run_at"])
    run_id = run_id_for(str(state["job_id"]), occurrence)
    if state.get("latest_run_id") == run_id:
        return None
    run = store.get(RUNS, run_key(run_id))
    if run is None or run.get("kind") != RunKind.SCHEDULED.value or run.get("status") in NOT_RUN:
        return None
    following = state_schedule(state).next_after(ms_to_dt(occurrence))
    return UnfinishedClaim(run, occurrence, dt_to_ms(following) if following is not None else None)
