"""Retry, misfire and overlap rules: pure functions of their inputs."""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from jobsched.core.job import MisfirePolicy, OverlapPolicy, RetryPolicy
from jobsched.core.run import AWAITING_START, UNFINISHED_STATUSES, RunStatus


def retry_delay_ms(policy: RetryPolicy, failed_attempt: int, rng: random.Random) -> int:
    """Exponential backoff with full jitter (AWS Architecture Blog, "Exponential Backoff and
    Jitter"): spreads the retries of many jobs failing together, e.g. on a shared dependency."""
    ceiling: int = min(policy.max_backoff_seconds, policy.backoff_seconds * 2 ** (failed_attempt - 1)) * 1000
    if not policy.jitter:
        return ceiling
    return max(1000, int(rng.uniform(0, ceiling)))


def attempts_left(policy: RetryPolicy, attempt: int) -> bool:
    return attempt < policy.max_attempts


def past_event_age(max_age_seconds: int | None, origin_ms: int | None, retry_at_ms: int) -> str | None:
    """Why a retry starting at ``retry_at_ms`` may not run (``max_event_age_seconds``, as
    EventBridge Scheduler's ``MaximumEventAgeInSeconds``), or None. The age counts from
    ``origin_ms``, the run's instant; None (a backfill, whose instant is past on purpose) or no
    limit never stops a retry. A retry is refused when it would *start* past the limit, so no
    attempt of the run begins after it."""
    if max_age_seconds is None or origin_ms is None:
        return None
    limit_at = origin_ms + max_age_seconds * 1000
    if retry_at_ms <= limit_at:
        return None
    return (
        f"maximum event age reached: the retry would start {(retry_at_ms - origin_ms) // 1000} s after "
        f"the run's instant, past max_event_age_seconds {max_age_seconds}"
    )


class OverlapDecision(StrEnum):
    RUN = "run"  # the job's turn is free (or the policy allows overlap): run
    BUFFER = "buffer"  # wait behind the run holding the turn
    SKIP = "skip"  # record as skipped


# The chain of a job's runs (docs/design.md, "Overlap: the chain"): every run that will run is
# linked, when it is created, to the run created before it (``after_run_id``). A run may start
# when the walk back along the chain finds no unfinished run. Unfinished: pending, running or
# buffered, in any order of delivery: a run delivered before its predecessor started waits for
# it too, since that predecessor would not know about it. Under the successor claim a claimed run
# not yet started is ``scheduled``, and holds the turn as a pending one does (W5; build plan §2).
# An unclaimed head is never met: no run links to it (H4).
UNFINISHED = frozenset(status.value for status in UNFINISHED_STATUSES)
# The statuses of a run that awaits its start, as the walk's rules test them (W3, W4).
_AWAITING_START = frozenset(status.value for status in AWAITING_START)
# The walk's bound. Each step is one strongly consistent read of an older run. Past it, the run
# is skipped behind the last one read (never run: an unknown turn is not a free one).
MAX_CHAIN_STEPS = 32
# Marks the holder a walk past MAX_CHAIN_STEPS stands in for: not a run anyone can wait behind.
WALK_EXHAUSTED = "walk_exhausted"


def chain_step(run: Mapping[str, Any] | None) -> tuple[bool, str | None]:
    """One step of the walk: whether this run holds the job's turn, and the run to read next.
    A skipped run passes the walk to the run it was skipped for (``blocked_by``). A run that
    failed without ever starting (its dispatches ran out) never walked the chain itself, so it
    cannot vouch that the runs before it ended: it passes the walk to its predecessor
    (``after_run_id``). So does a finished run that overtook runs not yet due (``overtook``):
    it walked to a free turn, but the runs it passed over may have started after it (they wait
    for it, then run), and they lie before it in the chain. Any other finished or expired run
    ends it: it started, so it walked to a free turn, and finished is final."""
    if run is None:
        return False, None
    if run.get("status") in UNFINISHED:
        return True, None
    if run.get("status") == RunStatus.SKIPPED.value and run.get("blocked_by"):
        return False, str(run["blocked_by"])
    if (run.get("status") == RunStatus.FAILED.value and "first_started_at" not in run) or run.get("overtook"):
        after = run.get("after_run_id")
        return False, str(after) if after else None
    return False, None


def skipped_for(holder: Mapping[str, Any], passed_over: str | None = None) -> str:
    """The run a skip hands the walk to (``blocked_by``): the run nearest the skipped one, back
    along the chain, that may still hold the turn before it, so that a later walk through the
    skip misses no run that will run. The skip's walk reached the holder past every run in
    between, so that is the holder, unless the walk passed over a run because it was not yet
    due (``passed_over``, the first such): that run lies between the skipped one and the holder
    and will run when due, and a skip marks no run as overtaken, so nothing else would make its
    start visible to a walk through the skip. Naming the holder then let a later walk jump from
    the skip to the holder, find it finished, and start beside that run (chaos seed 2 at 30 jobs
    x 2 h: a manual run skipped behind a waiting run, the occurrence it passed over started
    later). Never a run further along the chain (the holder's ``buffered_next``, say): a walk
    that went forward could come back to the run walking and wait for itself (chaos seed 13)."""
    if passed_over is not None:
        return passed_over
    return str(holder["run_id"])


def not_yet_due(run: Mapping[str, Any], now: int) -> bool:
    """A claimed run that has not come due and never ran: it holds no turn for a run that starts
    before it (a person's manual run, a backfill). The starter passes over it, and marks it as
    overtaken in its own start's transaction (``overtake_op``), so that when it comes due it
    waits for the starter: the clock decides which of the two runs first, never whether both
    run at once. W3: a claimed run is ``pending``, or ``scheduled`` under the successor claim
    (build plan §2), where a claimed run not yet due is ``scheduled``; either is passed over."""
    return (
        run.get("status") in _AWAITING_START
        and int(run.get("attempt", 1)) == 1
        and "first_started_at" not in run
        and int(run.get("scheduled_at", 0)) > now
    )


# A run that has not started since its overtaker passed it over: awaiting its start, or parked.
_WAITS_FOR_WALKER = _AWAITING_START | {RunStatus.BUFFERED.value}


def waits_for_walker(run: Mapping[str, Any], walker: str | None) -> bool:
    """A run the walking run overtook (its start passed over it, not yet due) and that has not
    started since (its start clears ``overtaken_by``, and is refused while the overtaker is
    unfinished): it waits for the walker, awaiting its start (pending, or scheduled under the
    successor claim) or buffered behind it, so it holds no turn against it. The walk passes
    over it to its predecessor, as the first walk passed over it.
    Without this a retried overtaker (a backfill run under ``buffer_one``, which is never
    skipped) waited behind the run waiting for it, and neither ever started (issue 34, item 12):
    the waits-for relation must stay acyclic (``core/invariants.py`` ``waits_cycle``)."""
    return walker is not None and run.get("status") in _WAITS_FOR_WALKER and run.get("overtaken_by") == walker


def decide_overlap(
    policy: OverlapPolicy, run_id: str, holder: Mapping[str, Any] | None, backfill: bool = False
) -> OverlapDecision:
    """``holder``: the unfinished run the walk found, or None. ``buffer_all``: every run waits,
    behind whatever unfinished run precedes it (a waiting one too). ``cancel_other``: as
    ``buffer_one`` (at most one waits), and the wait asks the holder to stop. A ``backfill`` run
    waits behind any holder (at the end of the line of runs waiting behind it, services/chain.py
    ``line_end``) instead of being skipped: a person asked for each of its occurrences to run,
    and a backfill's runs, created together, would otherwise skip each other. Only a walk that
    ran out (``WALK_EXHAUSTED``: an unknown turn) skips it."""
    if policy is OverlapPolicy.ALLOW or holder is None or holder.get("run_id") == run_id:
        return OverlapDecision.RUN
    if policy is OverlapPolicy.BUFFER_ALL:
        return OverlapDecision.BUFFER
    if backfill and not holder.get(WALK_EXHAUSTED):
        return OverlapDecision.BUFFER
    if (
        policy in (OverlapPolicy.BUFFER_ONE, OverlapPolicy.CANCEL_OTHER)
        and holder.get("status") != RunStatus.BUFFERED.value  # it is itself the one waiting
        and holder.get("buffered_next") in (None, run_id)  # or another waits behind it
    ):
        return OverlapDecision.BUFFER
    return OverlapDecision.SKIP


@dataclass(frozen=True)
class MisfireFate:
    scheduled_at: int
    status: RunStatus  # PENDING (run it) or MISSED
    reason: str


def plan_misfire(
    policy: MisfirePolicy,
    missed: list[int],
    max_catchup: int,
    catchups_so_far: int,
    degraded: bool,
    more_follow: bool = False,
) -> list[MisfireFate]:
    """Decide the fate of every missed occurrence (ascending instants) of one job.

    ``run_once`` runs the latest and records the rest as missed, coalesced into it; ``run_all``
    runs the oldest up to ``max_catchup`` per outage (``catchups_so_far`` counts the ones already
    started in this outage by an earlier, interrupted detector run) and records the rest;
    ``skip`` records all. Under overload (``degraded``) ``run_all`` is coalesced to ``run_once``,
    the documented degradation, and the reason says so. ``more_follow`` says later missed
    occurrences exist beyond this batch, so ``run_once`` must not run any of this batch's.
    """
    if not missed:
        return []
    if policy is MisfirePolicy.SKIP:
        return [MisfireFate(t, RunStatus.MISSED, "misfire policy skip") for t in missed]
    if policy is MisfirePolicy.RUN_ALL and not degraded:
        budget = max(0, max_catchup - catchups_so_far)
        fates = []
        for index, t in enumerate(missed):
            if index < budget:
                fates.append(MisfireFate(t, RunStatus.PENDING, "misfire policy run_all: catch-up"))
            else:
                fates.append(
                    MisfireFate(
                        t, RunStatus.MISSED, f"misfire policy run_all: beyond max_catchup {max_catchup}"
                    )
                )
        return fates
    why = "misfire policy run_once" if policy is MisfirePolicy.RUN_ONCE else "run_all degraded to run_once"
    latest = None if more_follow else missed[-1]
    return [
        MisfireFate(t, RunStatus.PENDING if t == latest else RunStatus.MISSED, f"{why}: coalesced")
        for t in missed
    ]
