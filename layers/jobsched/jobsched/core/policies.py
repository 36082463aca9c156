"""Retry, misfire and overlap rules: pure functions of their inputs."""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import StrEnum

from jobsched.core.job import MisfirePolicy, OverlapPolicy, RetryPolicy
from jobsched.core.run import RunStatus


def retry_delay_ms(policy: RetryPolicy, failed_attempt: int, rng: random.Random) -> int:
    """Exponential backoff with full jitter (AWS Architecture Blog, "Exponential Backoff and
    Jitter"): spreads the retries of many jobs failing together, e.g. on a shared dependency."""
    ceiling: int = min(policy.max_backoff_seconds, policy.backoff_seconds * 2 ** (failed_attempt - 1)) * 1000
    if not policy.jitter:
        return ceiling
    return max(1000, int(rng.uniform(0, ceiling)))


def attempts_left(policy: RetryPolicy, attempt: int) -> bool:
    return attempt < policy.max_attempts


class OverlapDecision(StrEnum):
    RUN = "run"  # take the job's slot (or no slot needed) and run
    BUFFER = "buffer"  # wait for the slot
    SKIP = "skip"  # record as skipped


def decide_overlap(
    policy: OverlapPolicy, run_id: str, active_run_id: str | None, buffered_run_id: str | None
) -> OverlapDecision:
    if policy is OverlapPolicy.ALLOW or active_run_id is None or active_run_id == run_id:
        return OverlapDecision.RUN
    if policy is OverlapPolicy.BUFFER_ONE and buffered_run_id in (None, run_id):
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
