"""The conversion of a legacy state to the successor claim (§5 "The migration", deploy 1; build
step S8; unexplored by the model): the write the trigger, the detector and the reconcile pass
make, once the migration switch is on, for a state still in ``next-run``.

One transaction, a change in the epoch's sense (§0):

- the state, conditional on its ``version`` (``_state_unchanged``: an old-code claim still in
  flight, a settle or a registrar's change moved it; one of the two fails, and the loser reads
  again), takes version E = ``version`` + 1 and loses ``next_run_at``, ``sched_shard`` (so it
  leaves ``next-run``), ``catchups`` and ``latest_run_id`` (the head carries them); it gains
  ``epoch`` = E, ``through`` and ``head_at`` (the instant of the head made), as a change writes
  them (``core/head_change.py``);
- the job's first head at ``<job>@<next_run_at>#E`` (``_run_is_new``), with ``after_run_id`` =
  ``latest_run_id``, ``runs_before`` = ``runs_claimed``, ``through`` = ``last_scheduled_at``, and
  the state's ``catchups`` (an outage's count in progress, now on the head as a settle chunk's).

If the legacy key ``<job>@<next_run_at>`` holds a record (only a backfill can have put one there:
a claim or a settle writes it with the state's advance), the occurrence is decided: the head goes
to the next occurrence, ``through`` = that instant, as ``advance_op`` did. An overdue state's
next occurrences may all have been backfilled (a backfill covers past instants), so the head
goes to the first occurrence from ``next_run_at`` on that holds no legacy record; the caller
reads the job's legacy keys from ``next_run_at`` to now (``recorded``). With no occurrence left
the state is finished instead, keeping ``latest_run_id`` (the chain's end while the job has no
head). Every writer of a legacy key moves the state's version in the same write (today's claim,
settle and ad-hoc join), so the version part holds that read.

A conversion interrupted anywhere leaves the state in ``next-run``, where the next tick or pass
meets it again (level-triggered). Legacy records keep their ids (epoch 0).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from jobsched.core.head import HeadJob, head_item
from jobsched.core.head_change import CHAIN_END, EPOCH, HEAD_AT, RUNS_CLAIMED, THROUGH
from jobsched.core.run import parse_run_id, run_id_for
from jobsched.core.state import INDEX_ATTRIBUTES, JobStatus
from jobsched.core.transitions.conditions import RunItem, StateItem, _run_is_new, _state_unchanged
from jobsched.core.writes import RUNS, STATE, Item, Put, Update, WriteOp

# What the state loses: its place in ``next-run`` and what the head now carries.
CONVERTED_AWAY = (*INDEX_ATTRIBUTES, "catchups", "latest_run_id")


def is_legacy(state: Mapping[str, Any]) -> bool:
    """A state the conversion applies to: active, still in ``next-run``."""
    return state.get("status") == JobStatus.ACTIVE.value and state.get("next_run_at") is not None


def legacy_key(state: Mapping[str, Any]) -> str:
    """The legacy id of the state's next occurrence: the key a backfill's record may hold."""
    return run_id_for(str(state["job_id"]), int(state["next_run_at"]))


def legacy_recorded(state: Mapping[str, Any], items: Iterable[Mapping[str, Any]]) -> set[int]:
    """The instants from the state's ``next_run_at`` on whose legacy key holds a record, among
    ``items`` (the job's runs as read, e.g. a Query of its legacy keys from ``legacy_key(state)``
    on): what ``convert_legacy_ops`` passes over."""
    recorded: set[int] = set()
    for item in items:
        try:
            parts = parse_run_id(str(item["run_id"]))
        except ValueError:
            continue
        at = parts.instant_ms
        if parts.kind == "timed" and parts.epoch == 0 and at is not None and at >= int(state["next_run_at"]):
            recorded.add(at)
    return recorded


def convert_legacy_ops(
    state: StateItem,
    job: HeadJob,
    recorded: Collection[int],
    shard_count: int,
    now: int,
    *,
    check_delay_ms: int,
) -> list[WriteOp]:
    """The conversion of ``state`` (see the module's docstring). ``job``: the head's copy of the
    job (the state's ``timing``, ``misfire`` and ``def_hash``, ``head_job_of_state``);
    ``recorded``: the instants from ``next_run_at`` on whose legacy key holds a record, as read;
    ``check_delay_ms``: the stack's ``head_check_delay_ms``."""
    if not is_legacy(state):
        raise ValueError(f"job {state['job_id']}: only an active state in next-run is converted")
    epoch = int(state["version"]) + 1
    at: int | None = int(state["next_run_at"])
    through = _through(state, now)
    while at is not None and at in recorded:
        through, at = at, job.next_after(at)
    # As a change writes them (head_change): the epoch apart from the version, which the finish
    # write and redate raise alone; ``through``, the state's while the job has no head.
    sets: Item = {"version": epoch, EPOCH: epoch, THROUGH: through, "updated_at": now}
    if at is None:
        # The backfill's record was the schedule's last occurrence: finished, as advance_op did.
        sets["status"] = JobStatus.FINISHED.value
        return [_state_op(state, sets, (*INDEX_ATTRIBUTES, "catchups"))]
    catchups = int(state.get("catchups") or 0)
    head = head_item(
        job,
        at,
        epoch,
        through=through,
        shard_count=shard_count,
        check_delay_ms=check_delay_ms,
        runs_before=int(state.get(RUNS_CLAIMED) or 0),
        after_run_id=state.get(CHAIN_END),
        catchups=catchups or None,
    )
    sets[HEAD_AT] = at
    return [
        _state_op(state, sets, CONVERTED_AWAY),
        Put(RUNS, head, condition=(_run_is_new(),), label="convert: first head"),
    ]


def _through(state: Mapping[str, Any], now: int) -> int:
    """The last occurrence decided before the next one: ``last_scheduled_at``; for a job that never
    ran, its registration (the first registration's head has ``through`` = now)."""
    for name in ("last_scheduled_at", "registered_at"):
        if state.get(name) is not None:
            return int(state[name])
    return now


def _state_op(state: StateItem, sets: Item, remove: tuple[str, ...]) -> Update:
    return Update(
        STATE,
        {"job_id": state["job_id"]},
        condition=(_state_unchanged(state),),
        label="convert to the successor claim",
        set=sets,
        remove=tuple(name for name in remove if name in state),
    )


def head_job_of_state(
    state: Mapping[str, Any], overlap: str, max_attempts: int, max_runs: int | None
) -> HeadJob:
    """The head's copy of a legacy state's job: the timing, misfire policy and digest the state
    follows (not the job item's: a change not yet applied stays the registrar's, which then
    closes this head as any change does), and the definition's overlap, attempts and ``max_runs``."""
    return HeadJob(
        job_id=str(state["job_id"]),
        timing=dict(state["timing"]),
        misfire=dict(state.get("misfire") or {}),
        def_hash=str(state["def_hash"]),
        overlap=overlap,
        max_attempts=max_attempts,
        max_runs=max_runs,
    )


def converted_head(ops: list[WriteOp]) -> RunItem | None:
    """The head a conversion's write makes (None: it finished the state)."""
    puts = [op for op in ops if isinstance(op, Put)]
    return dict(puts[0].item) if puts else None
