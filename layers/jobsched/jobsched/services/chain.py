"""The job's chain of runs, as the worker and the miss detector read and move it.

Overlap is decided from the chain (``core/policies.py``), not from a slot on the job: the claim
links each run to the one before it in the write it makes anyway, and a run's start reads its
way back (strongly consistent reads, a fifth of a write unit's price each). Nothing is written to
take the job's turn or to give it back, so ``skip``, the default, costs what ``allow`` costs.
What is written only when a run waits (``buffer_one``): the wait, and the promotion at its end.
"""

from __future__ import annotations

from typing import Any

from jobsched.core.config import SchedulerConfig
from jobsched.core.errors import ConditionFailed, StoreError
from jobsched.core.policies import (
    MAX_CHAIN_STEPS,
    UNFINISHED,
    WALK_EXHAUSTED,
    chain_step,
    not_yet_due,
    waits_for_walker,
)
from jobsched.core.run import RunStatus, run_key
from jobsched.core.transitions import promote_op
from jobsched.core.writes import RUNS
from jobsched.ports import Store

Item = dict[str, Any]


class Chain:
    def __init__(self, store: Store, cfg: SchedulerConfig) -> None:
        self._store = store
        self._cfg = cfg

    def holder(
        self, after_run_id: str | None, now: int, overtake: bool = True, walker: str | None = None
    ) -> tuple[Item | None, list[Item]]:
        """The unfinished run that holds the job's turn before ``walker`` (the run starting), or
        None: it is free; and the runs passed over on the way because they have not come due
        (``not_yet_due``), which the start must mark as overtaken in its own write. A run the
        walker overtook earlier waits for it (``waits_for_walker``): passed over, unmarked (its
        mark stands). ``overtake`` False (``buffer_all``): strict chain order, a run not yet due
        holds the turn too."""
        run_id = after_run_id
        passed: list[Item] = []
        seen: set[str] = set()
        for _ in range(MAX_CHAIN_STEPS):
            if run_id is None:
                return None, passed
            seen.add(run_id)
            run = self._store.get(RUNS, run_key(run_id))
            if walker is not None and run_id == walker:
                # W12: the walk reached the walker itself (through a skip that names it): it holds
                # its own turn and runs (decide_overlap). Checked before W3, since a worker may
                # begin a run a moment before its instant: its own run is never "passed over".
                return run, passed
            if overtake and run is not None and not_yet_due(run, now):
                passed.append(run)
                run_id = run.get("after_run_id")
                continue
            if run is not None and waits_for_walker(run, walker):
                run_id = run.get("after_run_id")
                continue
            holds, run_id = chain_step(run)
            if holds:
                return run, passed
            if run is not None and run_id in seen:
                # A run skipped for the overtaker the walk came from (it overtook this run, which
                # came due while it ran): that overtaker is finished, so go on before this run.
                run_id = run.get("after_run_id")
        if run_id is None:
            return None, passed
        # Too long a walk: treat the turn as taken (skip behind the last run read), never as free.
        return {"run_id": run_id, "status": RunStatus.BUFFERED.value, WALK_EXHAUSTED: True}, passed

    def line_end(self, holder: Item, run_id: str) -> Item | None:
        """Where a backfill run waits: the holder, or the last of the runs already waiting
        behind it, one behind another (``buffered_next``). None: the line changed while it was
        read (a run in it ended): walk the chain again."""
        run = holder
        for _ in range(MAX_CHAIN_STEPS):
            waiting = run.get("buffered_next")
            if waiting is None or waiting == run_id:
                return run
            following = self._store.get(RUNS, run_key(str(waiting)))
            if following is None or following.get("status") not in UNFINISHED:
                return None
            run = following
        return None

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
