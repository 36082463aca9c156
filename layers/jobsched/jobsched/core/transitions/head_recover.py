"""The miss detector under the successor claim (shape f; docs/proposals/successor-claim-build.md §1
rows "recover" and "recheck", HC7, HC8; model: ``writes.redispatch``, ``model.detector``).

A head keeps its ``due`` entry (``check_at`` = instant + the dispatch lease,
``head_check_delay_ms``) through its claim: the claim writes only the successor. So the detector
meets, below now - skew, both unclaimed heads and claimed runs whose start has not come, and tells
them apart by the successor key (HC7):

- nothing there: an unclaimed head; past its grace it is settled (``head_settle``), within it
  it is the trigger's;
- a closure marker: a head a change closed (the ``due`` read was stale); left alone;
- a run, a record or the end marker: a claimed run whose message may be lost. Past
  ``max(start, claimed_at) + dispatch lease`` (the claim's time is the successor's ``claimed_at``)
  plus the skew allowance it is redispatched; before that its ``check_at`` is moved there once
  (HC8: a claim made late, or a start window, put the lease after the head's check).

``redispatch_head_op`` sends a claimed ``scheduled`` run again: it stays ``scheduled`` with a new
token (``version`` and ``head_version`` + 1) and ``check_at`` a dispatch lease ahead
(``redispatch.status_scheduled``, ``redispatch.version``; ``_lease_as_read``,
``_not_asked_to_stop`` and ``MAX_REDISPATCHES`` as today's ``recover_op``). Only a run whose
successor is filled by a run or the end marker is redispatched (H2): ``judge_due_entry`` says so
before the op is built.

Pure, and called by no service yet (build step S8 wires it behind a migration switch).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from jobsched.core.config import SchedulerConfig
from jobsched.core.head import is_closure_marker, is_unstarted_occurrence
from jobsched.core.job import Misfire
from jobsched.core.run import RunStatus, run_key
from jobsched.core.timing import is_overdue, start_at_ms
from jobsched.core.transitions.conditions import (
    LEASE_ATTRIBUTES,
    RunItem,
    _dispatch_lease,
    _lease_as_read,
    _not_asked_to_stop,
    _redispatch_status_scheduled,
    _redispatch_version,
    _run_status,
    _run_token,
)
from jobsched.core.transitions.finish import finish_ops
from jobsched.core.transitions.recover import MAX_REDISPATCHES, cancelled_error
from jobsched.core.writes import RUNS, Cond, Update


class DueVerdict(StrEnum):
    """What the detector does with a ``due`` entry it read below now - skew (HC7)."""

    MOVED = "moved"  # the item is gone or its check_at moved on since the index read: nothing
    OTHER = "other"  # not a head or a claimed run (running, pending, buffered, manual): as today
    SETTLE = "settle"  # an unclaimed head past its grace: settle it (head_settle)
    TRIGGERS = "triggers"  # an unclaimed head within its grace: the trigger's; leave it
    CLOSED = "closed"  # its successor key holds a closure marker: its change closed it; leave it
    REDISPATCH = "redispatch"  # a claimed run whose dispatch lease lapsed: send it again
    RECHECK = "recheck"  # a claimed run whose lease has not lapsed: move check_at to it (HC8)


@dataclass(frozen=True)
class DueJudgement:
    verdict: DueVerdict
    # RECHECK: where the run's ``check_at`` moves (the lease's end); REDISPATCH: the lease lapsed at.
    lease_until: int | None = None


def dispatch_lapses_at(
    run: Mapping[str, Any],
    successor: Mapping[str, Any],
    cfg: SchedulerConfig,
    definition: Mapping[str, Any] | None = None,
) -> int:
    """When a claimed run's message should have started it: a dispatch lease after its start
    (its instant plus its window, ``jitter_seconds`` of ``definition``) or after its claim (the
    successor's ``claimed_at``), whichever is later; or the lease a redispatch or a settle gave
    it (``lease_expires_at``), if later still."""
    start = start_at_ms(str(run["run_id"]), int(run["scheduled_at"]), definition)
    claimed_at = int(successor.get("claimed_at") or 0)
    lapse = max(start, claimed_at) + cfg.dispatch_lease_seconds * 1000
    return max(lapse, int(run.get("lease_expires_at") or 0))


def judge_due_entry(
    run: Mapping[str, Any] | None,
    successor: Mapping[str, Any] | None,
    now: int,
    cfg: SchedulerConfig,
    definition: Mapping[str, Any] | None = None,
) -> DueJudgement:
    """HC7's judgement of a ``due`` entry read below now - skew: ``run`` is the entry's item as
    read again (strongly consistent; None if gone), ``successor`` the item at its ``next_key``
    (None if absent; not read for an item that is not a head or a claimed run). The grace is
    the run's own misfire policy's (``effective_grace_ms``, as the trigger's)."""
    skewed_now = now - cfg.clock_skew_allowance_ms
    if run is None or run.get("check_at") is None or int(run["check_at"]) > skewed_now:
        return DueJudgement(DueVerdict.MOVED)
    if not is_unstarted_occurrence(run):
        return DueJudgement(DueVerdict.OTHER)
    if successor is None:
        grace = Misfire.model_validate(dict(run.get("misfire") or {})).grace_seconds
        if is_overdue(int(run["scheduled_at"]), now, grace, cfg):
            return DueJudgement(DueVerdict.SETTLE)
        return DueJudgement(DueVerdict.TRIGGERS)
    if is_closure_marker(successor):
        return DueJudgement(DueVerdict.CLOSED)
    lapse = dispatch_lapses_at(run, successor, cfg, definition)
    if lapse <= skewed_now:
        return DueJudgement(DueVerdict.REDISPATCH, lapse)
    return DueJudgement(DueVerdict.RECHECK, lapse)


def recheck_claimed_op(run: RunItem, lease_until: int) -> Update:
    """HC8: the detector met a claimed run before its dispatch lease lapsed (a late claim, a start
    window): look again when it lapses. No token changes hands (today's ``recheck_op`` parts)."""
    return Update(
        RUNS,
        run_key(run["run_id"]),
        condition=(_run_token(run["version"]), _run_status(RunStatus.SCHEDULED)),
        label="recheck claimed run",
        set={"check_at": lease_until},
    )


def redispatch_head_op(run: RunItem, now: int, cfg: SchedulerConfig) -> tuple[Update, RunItem]:
    """The lost dispatch of a claimed ``scheduled`` run: a new token (``version`` and
    ``head_version`` + 1), a dispatch lease from now, and it stays ``scheduled``; the caller
    sends its message (``head_claim.claimed_run_message``) once the write lands. After
    ``MAX_REDISPATCHES`` it fails for good, and a run a newer one asked to stop
    (``cancel_requested``, W15/W16) ends cancelled, as today's ``recover_op`` ends them.
    Returns the write and the run as it will be after it."""
    version = int(run["version"])
    condition: tuple[Cond, ...] = (_redispatch_status_scheduled(), _redispatch_version(int(run["version"])))
    if run.get("lease_expires_at") is not None:
        # A redispatch or a settle gave it a lease (a head's claim gives none): a racing
        # detector's redispatch since the read moved it.
        condition += (_lease_as_read(run),)
    after = dict(run)
    after.update(version=version + 1, head_version=version + 1)
    after["recoveries"] = int(run.get("recoveries", 0)) + 1
    error = "dispatch lease expired: no worker started the claimed run (message lost or trigger crashed)"
    exhausted = after["recoveries"] > MAX_REDISPATCHES
    if run.get("cancel_requested"):
        error, exhausted = cancelled_error(str(run["cancel_requested"]), error), True
    else:
        condition += (_not_asked_to_stop(),)
    if exhausted:
        update = finish_ops(
            run["run_id"], version, RunStatus.SCHEDULED, RunStatus.FAILED, now, cfg, error, condition[2:]
        )
        update = Update(
            update.table,
            update.key,
            condition=condition,
            label="redispatch fails run",
            set={**update.set, "head_version": version + 1},
            remove=update.remove,
        )
        after.update(status=RunStatus.FAILED.value, last_error=error, finished_at=now)
        for name in LEASE_ATTRIBUTES:
            after.pop(name, None)
        return update, after
    lease = _dispatch_lease(str(run["run_id"]), now + cfg.dispatch_lease_seconds * 1000, cfg)
    after.update(last_error=error, **lease)
    update = Update(
        RUNS,
        run_key(run["run_id"]),
        condition=condition,
        label="redispatch claimed run",
        set={
            "version": version + 1,
            "head_version": version + 1,
            "recoveries": after["recoveries"],
            "last_error": error,
            **lease,
            "recovered_at": now,
        },
    )
    return update, after
