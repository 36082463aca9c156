"""Runs that join the chain beside the schedule: the settle of occurrences that came due without a
claim (the detector's, the registrar's), the ad-hoc run (manual, backfill) and the rerun of a
missed occurrence (backfill); each joins the job's chain in the write that moves its end.
"""

from __future__ import annotations

from dataclasses import replace

from jobsched.core.config import SchedulerConfig
from jobsched.core.run import NOT_RUN, RunKind, RunStatus, run_key
from jobsched.core.state import INDEX_ATTRIBUTES, JobStatus
from jobsched.core.transitions.conditions import (
    RunItem,
    StateItem,
    _dispatch_lease,
    _next_is,
    _run_is_new,
    _run_status,
    _run_token,
    _state_as_read,
    _state_unchanged,
    _still_active,
)
from jobsched.core.writes import RUNS, STATE, Item, Put, Update, WriteOp


def settle_ops(
    state: StateItem,
    records: list[RunItem],
    first: int,
    last: int,
    resume_at: int | None,
    catchups: int,
    now: int,
    switch: tuple[Item, tuple[str, ...]] | None = None,
    counted: int | None = None,
) -> list[WriteOp]:
    """Write a chunk of occurrences that came due without a claim (catch-up runs, late runs and
    missed records, oldest first) and move the job past them, atomically.

    The chunk covers the job's occurrences ``first`` to ``last``; ``records`` are those that get
    a record (all of them, less any that had one already). ``resume_at`` is the job's next
    occurrence after the chunk. An interrupted writer leaves the job at the first occurrence not
    yet written, so the next attempt continues from there. ``switch`` (sets, removes) is applied
    in the same write: the registrar's change of timing or status, made together with the last
    chunk of the old timing's occurrences. The chunk's runs that will run join the job's chain
    (``link_runs``: their ``after_run_id`` is set in place, so what the caller dispatches carries
    it) in the same transaction that moves the chain's end: like a claim, one linearisation point.
    """
    sets: Item = {
        "version": state["version"] + 1,
        "updated_at": now,
        "catchups": catchups,
        "last_scheduled_at": max(last, int(state.get("last_scheduled_at") or 0)),
    }
    latest = link_runs(state.get("latest_run_id"), records)
    if latest is not None:
        sets["latest_run_id"] = latest
    if counted is not None:
        sets["runs_claimed"] = counted  # ``max_runs``: the count after this chunk's runs
    remove: tuple[str, ...] = ()
    if resume_at is None:
        sets["status"] = JobStatus.FINISHED.value
        remove = INDEX_ATTRIBUTES
    else:
        sets["next_run_at"] = resume_at
    if switch is not None:
        # The registrar's plan wins over the chunk's own bookkeeping of the old timing.
        switch_sets, switch_remove = switch
        for name in switch_remove:
            sets.pop(name, None)
        sets.update(switch_sets)
        remove = tuple(dict.fromkeys(name for name in (*remove, *switch_remove) if name not in sets))
    ops: list[WriteOp] = [
        Update(
            STATE,
            {"job_id": state["job_id"]},
            condition=(
                _state_unchanged(state),
                _next_is(
                    first,
                    "the chunk starts at the job's next occurrence: no occurrence is skipped or "
                    "recorded twice by two detectors, or by a detector and the registrar",
                ),
                _still_active(),
            ),
            label="settle occurrences",
            set=sets,
            remove=remove,
        )
    ]
    ops += [Put(RUNS, run, condition=(_run_is_new(),), label=f"record {run['run_id']}") for run in records]
    return ops


def adhoc_run_ops(run: RunItem, state: StateItem | None) -> list[WriteOp]:
    """A manual or backfill run: created once per deterministic id, leaving the schedule alone.
    It joins the job's chain (``run`` must be linked: ``link_runs``), so the job's next
    occurrence waits for it as it would for a scheduled run. One transaction: a run outside the
    chain could overlap the next occurrence. A job without a state item has no chain. (A
    claimed run whose advance has not landed is not in the chain yet: whoever advances the job
    past it links it behind this one, before it is sent.)"""
    ops: list[WriteOp] = [Put(RUNS, run, condition=(_run_is_new(),), label="create ad-hoc run")]
    if state is not None:
        ops.append(_join_chain(state, run["run_id"], run["claimed_at"]))
    return ops


def _join_chain(state: StateItem, run_id: str, now: int) -> Update:
    return Update(
        STATE,
        {"job_id": state["job_id"]},
        condition=(
            _state_as_read(state),  # the run links to the chain's end as read: still the end
        ),
        label="join chain",
        set={"latest_run_id": run_id, "version": state["version"] + 1, "updated_at": now},
    )


def link_runs(latest_run_id: str | None, runs: list[RunItem]) -> str | None:
    """Link the runs that will run, in order, behind the job's latest run: each one's
    ``after_run_id`` is the run before it. Returns the new end of the chain."""
    for run in runs:
        if run.get("status") != RunStatus.PENDING.value:
            continue  # a missed record never runs: it holds no turn
        if latest_run_id is not None:
            run["after_run_id"] = latest_run_id
        latest_run_id = str(run["run_id"])
    return latest_run_id


def rerun_missed_ops(
    missed: RunItem,
    definition: Item,
    def_hash: str,
    now: int,
    cfg: SchedulerConfig,
    state: StateItem | None,
) -> list[WriteOp]:
    """A person backfills an occurrence recorded as missed (or ``cancelled``, a legacy fence: it
    never ran, and no run links to it): the record itself becomes the run (same id), so the
    occurrence still has exactly one record and runs at most once. Like any ad-hoc run it joins
    the job's chain, in the same transaction."""
    rerun = _rerun_missed(missed, definition, def_hash, now, cfg)
    if state is None:
        return [rerun]
    link = {"after_run_id": state["latest_run_id"]} if state.get("latest_run_id") else {}
    rerun = replace(rerun, set={**rerun.set, **link})
    return [rerun, _join_chain(state, missed["run_id"], now)]


def _not_run(record: RunItem) -> RunStatus:
    if record.get("status") not in NOT_RUN:
        raise ValueError(
            f"{record['run_id']}: only a record that did not run is rerun, not {record.get('status')}"
        )
    return RunStatus(record["status"])


def _rerun_missed(missed: RunItem, definition: Item, def_hash: str, now: int, cfg: SchedulerConfig) -> Update:
    return Update(
        RUNS,
        run_key(missed["run_id"]),
        condition=(
            _run_status(_not_run(missed)),
            _run_token(missed["version"]),
        ),
        label="rerun missed occurrence",
        set={
            "status": RunStatus.PENDING.value,
            "kind": RunKind.BACKFILL.value,
            "version": missed["version"] + 1,
            "attempt": 1,
            "def_hash": def_hash,
            "overlap": str(definition.get("overlap", "skip")),
            "max_attempts": int((definition.get("retry") or {}).get("max_attempts", 3)),
            "retry_at": now,
            **_dispatch_lease(missed["run_id"], now + cfg.dispatch_lease_seconds * 1000, cfg),
            "missed_reason": missed.get("reason", ""),
        },
        remove=("finished_at", "expires_at", "reason"),
    )
