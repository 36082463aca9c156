"""Runs that join the chain through the job's head (the successor claim, shape f; issue 37): the
ad-hoc run, the rerun of a missed record and the backfill of a past instant
(docs/proposals/successor-claim-build.md §1 rows "ad-hoc run" and "rerun missed", HC3, HC11; the
model: tools/jobsched_tools/successor/writes.py ``adhoc``, writes_mis.py ``backfill``).

Under shape f the chain's end is the head's ``after_run_id`` while the job has a head (§0, "Where
the state's attributes go"): a claim of N puts N+1 with ``after_run_id`` = N and never writes
the state. So a run made beside the schedule joins the chain by **relinking the head**, in one
transaction of three items:

- the run (or the record rerun in place), with ``after_run_id`` = the head's;
- the head, ``after_run_id`` = the run, ``version`` and ``head_version`` + 1 (so a message sent
  with the head's old token fails its start; the bump of ``head_version`` is the relink's one
  ``due`` index unit), conditional on the head still ``scheduled`` at the version read;
- a ConditionCheck at the head's ``next_key``: nothing there, the head is still unclaimed (HC3).

When the relink or the check fails, the head moved: a claim landed first (``tick-manual``), the
detector settled it, a change closed it, another run relinked it. The caller reads the head again
(HC12) and relinks the head it finds: after a claim that is N+1, whose ``after_run_id`` is N, so
the run then lies between N and N+1 (``after_join_failure``). A job without a head (paused,
invalid, finished, deleted, or a legacy state not yet converted) joins the state's
``latest_run_id`` as today (``settle.adhoc_run_ops``): every change writes the closed head's
``after_run_id`` there, so it is the chain's end while the job has none.

Nothing in the services calls these yet (the build's later wave wires them, S8).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any, Literal

from jobsched.core.clock import iso_z
from jobsched.core.config import SchedulerConfig
from jobsched.core.head import epoch_of, is_cancelled_head, is_marker, is_record, next_key
from jobsched.core.run import NOT_RUN, parse_run_id, run_id_for, run_key, shard_of
from jobsched.core.state import JobStatus
from jobsched.core.transitions.conditions import (
    RunItem,
    StateItem,
    _adhoc_run_absent,
    _backfill_record_absent,
    _head_scheduled,
    _head_version,
    _relink_successor_absent,
)
from jobsched.core.transitions.settle import adhoc_run_ops, rerun_missed_ops
from jobsched.core.writes import RUNS, Check, Item, Put, Update, WriteOp

# The ad-hoc run's transaction: the run, the head relinked, the check at its successor key.
RELINK_ITEMS = 3


class NoHeadRead(ValueError):
    """An active job read without a head, whose state no longer holds the chain's end (it was
    converted: no ``next_run_at``). Either its life ended (an end marker: the finish write first,
    ``head_finish.finish_life_ops``, HC5) or the read missed the head; either way, read again."""


def relink_head_ops(head: RunItem, run_id: str | None, tag: str, through: int | None = None) -> list[WriteOp]:
    """The head relinked behind ``run_id`` and the check that it is unclaimed: the two items every
    run joining the chain through the head adds to its own write. ``run_id`` None: no run joins
    (a redate chunk of missed records), the head keeps its link but its version still moves, so
    every other relink and stale message read before it fails. ``through``: a redate's last
    record (HC4), which the head's ``through`` must not stay before."""
    version = int(head["version"])
    sets: Item = {"version": version + 1, "head_version": int(head.get("head_version", version)) + 1}
    if run_id is not None:
        sets["after_run_id"] = run_id
    if through is not None and through > int(head.get("through") or 0):
        sets["through"] = through
    return [
        Update(
            RUNS,
            run_key(str(head["run_id"])),
            condition=(_head_scheduled(tag), _head_version(tag, version)),
            label=f"relink head {head['run_id']} ({tag})",
            set=sets,
        ),
        Check(
            RUNS,
            run_key(next_key(head)),
            condition=(_relink_successor_absent(tag),),
            label="head unclaimed",
        ),
    ]


def joined_behind_head(run: RunItem, head: RunItem) -> RunItem:
    """``run`` linked where the head was: its ``after_run_id`` is the head's (none: the first run
    of its job)."""
    joined = {name: value for name, value in run.items() if name != "after_run_id"}
    if head.get("after_run_id") is not None:
        joined["after_run_id"] = head["after_run_id"]
    return joined


def adhoc_run_with_head_ops(run: RunItem, head: RunItem) -> list[WriteOp]:
    """A manual run M (``new_run_item``, kind ``manual``) joins the chain in front of the head:
    put M (``adhoc.run_absent``) with the head's ``after_run_id``, the head relinked behind M, the
    head checked unclaimed. Three items; what is dispatched is ``ops[0].item``."""
    joined = joined_behind_head(run, head)
    return [
        Put(RUNS, joined, condition=(_adhoc_run_absent(),), label="create ad-hoc run"),
        *relink_head_ops(head, str(run["run_id"]), "adhoc"),
    ]


def adhoc_ops(run: RunItem, state: StateItem | None, head: RunItem | None) -> list[WriteOp]:
    """The ad-hoc run's write for the job as read: through its head when it has one, else joining
    the state's ``latest_run_id`` as today. ``NoHeadRead`` for an active converted state read
    without a head (its ``latest_run_id`` is not the chain's end)."""
    if head is not None:
        return adhoc_run_with_head_ops(run, head)
    _refuse_headless(state)
    linked = {name: value for name, value in run.items() if name != "after_run_id"}
    if state is not None and state.get("latest_run_id") is not None:
        linked["after_run_id"] = state["latest_run_id"]
    return adhoc_run_ops(linked, state)


def _refuse_headless(state: StateItem | None) -> None:
    """A state that still holds ``next_run_at`` is legacy (not converted, §5): its
    ``latest_run_id`` is the chain's end, as today. A converted active one has a head, or an end
    marker not yet copied to it (HC5)."""
    if state is None or state.get("status") != JobStatus.ACTIVE.value or "next_run_at" in state:
        return
    raise NoHeadRead(
        f"job {state['job_id']} is active but no head was read: its life may have ended (its end "
        "marker is not yet copied to its state: the finish write first) or the read missed it; "
        "read again"
    )


class JoinRetry(StrEnum):
    """What a run joining through the head does after its transaction failed."""

    # The run's own item lost (``ops[0]``): the ad-hoc run exists (a retried request: its answer
    # was lost; report it made, as today's ``TriggeredRun(already_requested=True)``), the backfill
    # instant got its record, or the missed record was rerun by a racer.
    MADE = "made"
    # The head moved since the read (relinked, redispatched, claimed, settled, closed): read the
    # head again and relink the one found. After a claim that is N+1 (``after_run_id`` = N), so
    # the run lies between N and N+1 (HC3).
    READ_AGAIN = "read_again"


def after_join_failure(ops: list[WriteOp], lost: WriteOp) -> JoinRetry:
    """The pure decision after ``ConditionFailed`` on ``ops``: ``lost`` is the operation whose
    condition failed (``ConditionFailed.op``; DynamoDB names the first failing item of a cancelled
    transaction, and the run's own item comes first)."""
    if not ops or all(lost is not op for op in ops):
        raise ValueError(f"{lost.label}: not an operation of this write")
    if ops[0].table != RUNS:
        # A redate's first item is the state: its loss means the state moved, not "made".
        raise ValueError(f"{ops[0].label}: not a write whose first item is its run")
    return JoinRetry.MADE if lost is ops[0] else JoinRetry.READ_AGAIN


# --- the rerun of a missed record ----------------------------------------------------------------


def rerunnable(record: Mapping[str, Any]) -> bool:
    """A record that did not run and may become its own run (``run.NOT_RUN``): ``missed``, or a
    legacy ``cancelled`` of epoch 0. A shape-f cancelled head (epoch ≥ 1) or a marker is never
    rerun: its occurrence was not due under its timing, and its instant may hold another epoch's
    record (I1')."""
    return record.get("status") in NOT_RUN and not is_cancelled_head(record) and not is_marker(record)


def _refuse_not_rerunnable(record: RunItem) -> None:
    if not rerunnable(record):
        what = "a cancelled head" if is_cancelled_head(record) else f"status {record.get('status')}"
        raise ValueError(f"{record['run_id']}: only a missed record is rerun, not {what}")


def rerun_missed_with_head_ops(
    missed: RunItem, definition: Item, def_hash: str, now: int, cfg: SchedulerConfig, head: RunItem
) -> list[WriteOp]:
    """A missed record becomes its run (same id, as today's ``rerun_missed_ops``, with its own parts
    ``_run_status`` and ``_run_token``: the model's ``backfill.record_missed`` and
    ``backfill.record_version``), joining the chain through the head: its ``after_run_id`` is the
    head's, the head relinked behind it, checked unclaimed. A record at or after the head's instant
    is refused (HC11; none should exist, I6)."""
    _refuse_not_rerunnable(missed)
    at = int(missed["scheduled_at"])
    if at >= int(head["scheduled_at"]):
        raise BackfillRefused(f"{iso_z(at)} is {NOT_SETTLED}")
    (rerun,) = rerun_missed_ops(missed, definition, def_hash, now, cfg, None)  # the record's own write
    assert isinstance(rerun, Update)
    link = {"after_run_id": head["after_run_id"]} if head.get("after_run_id") is not None else {}
    rerun = replace(
        rerun, set={**rerun.set, **link}, remove=(*rerun.remove, *(() if link else ("after_run_id",)))
    )
    return [rerun, *relink_head_ops(head, str(missed["run_id"]), "backfill")]


def rerun_ops(
    missed: RunItem,
    definition: Item,
    def_hash: str,
    now: int,
    cfg: SchedulerConfig,
    state: StateItem | None,
    head: RunItem | None,
) -> list[WriteOp]:
    """The rerun for the job as read: through its head, else as today (the state's chain end)."""
    if head is not None:
        return rerun_missed_with_head_ops(missed, definition, def_hash, now, cfg, head)
    _refuse_not_rerunnable(missed)
    _refuse_headless(state)
    return rerun_missed_ops(missed, definition, def_hash, now, cfg, state)


# --- backfill (HC11) -------------------------------------------------------------------------------

NOT_SETTLED = "not settled yet: the detector settles it within a minute; backfill it then"


class BackfillRefused(ValueError):
    """A backfill of an instant refused with a clear reason; nothing is written."""


@dataclass(frozen=True)
class BackfillStep:
    """What a backfill does at one past instant: ``create`` a record at ``backfill_run_id``,
    ``rerun`` the instant's missed record (``record``) in place, or nothing: the instant holds a
    live record that ran or runs (``ran``, ``record``; today's "ran already")."""

    outcome: Literal["create", "rerun", "ran"]
    at: int
    record: RunItem | None = None


def backfill_run_id(head: Mapping[str, Any], at: int) -> str:
    """A backfill's record takes the head's epoch (HC11): no key of an older timing is reused,
    and an instant before the head holds nothing else in that epoch (a settle and a claim of the
    head's epoch write only after it), so the put's ``attribute_not_exists`` is its race with a
    second backfill or a redate of the same instant."""
    return run_id_for(str(head["job_id"]), at, epoch_of(head))


def backfill_step(
    head: Mapping[str, Any], items: Iterable[Mapping[str, Any]], at: int, now: int
) -> BackfillStep:
    """The backfill of instant ``at`` for the job whose head is ``head``; ``items``: the job's items
    as read with the head (any epoch; those of other instants are ignored).

    Refused (``BackfillRefused``, nothing written) at or after the head's instant: that
    occurrence is not decided yet (the head's claim or settle decides it; HC11), and after now.
    An instant holding a live record of any epoch gets nothing new: a missed one is rerun, one
    that ran or runs is left (``ran``). A cancelled head or a marker is not a record."""
    if at > now:
        raise BackfillRefused(f"{iso_z(at)} is in the future: backfill covers past occurrences only")
    if at >= int(head["scheduled_at"]):
        raise BackfillRefused(f"{iso_z(at)} is {NOT_SETTLED}")
    records = [item for item in items if _instant_of(item) == at and is_record(item)]
    ran = [record for record in records if record.get("status") not in NOT_RUN]
    if ran:
        return BackfillStep("ran", at, dict(ran[0]))
    if records:
        return BackfillStep("rerun", at, dict(records[0]))
    return BackfillStep("create", at)


def _instant_of(item: Mapping[str, Any]) -> int | None:
    try:
        parts = parse_run_id(str(item["run_id"]))
    except ValueError:
        return None
    return parts.instant_ms if parts.kind == "timed" else None


def backfill_with_head_ops(run: RunItem, head: RunItem) -> list[WriteOp]:
    """A backfill's new record (``new_run_item``, kind ``backfill``, at ``backfill_run_id``) joins
    the chain through the head: three items, as the ad-hoc run's. The relink's version part holds
    the head as read, so the range checked against its instant (``backfill_step``) still lies
    before it when the write lands (HC11)."""
    at = int(run["scheduled_at"])
    if at >= int(head["scheduled_at"]):
        raise BackfillRefused(f"{iso_z(at)} is {NOT_SETTLED}")
    if run["run_id"] != backfill_run_id(head, at):
        raise ValueError(
            f"{run['run_id']}: a backfill's record takes the head's epoch ({backfill_run_id(head, at)})"
        )
    joined = joined_behind_head(run, head)
    return [
        Put(RUNS, joined, condition=(_backfill_record_absent(),), label=f"backfill {run['run_id']}"),
        *relink_head_ops(head, str(run["run_id"]), "backfill"),
    ]


def in_epoch(run: RunItem, epoch: int, shard_count: int) -> RunItem:
    """``run`` (a record built at its legacy id, ``new_run_item``) at its instant's key in
    ``epoch``, with its lease's shard (a function of the run id) to match."""
    keyed = {**run, "run_id": run_id_for(str(run["job_id"]), int(run["scheduled_at"]), epoch)}
    if "lease_shard" in keyed:
        keyed["lease_shard"] = shard_of(keyed["run_id"], shard_count)
    return keyed
