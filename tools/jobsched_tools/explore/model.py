"""The explored job and the shape of an actor set.

The job is ``rate(5 minutes)`` (00:00, 00:05, 00:10 ...), registered at 00:00; the explored
actors act at 00:04 (the tick's lookahead reaches 00:05), unless a set says otherwise. A re-time
moves it to ``rate(3 minutes)`` (00:06, 00:09 ...). Occurrences up to ``window_end`` must all
have their records once the world is driven to quiescence.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from jobsched.core.config import SchedulerConfig
from jobsched.core.job import JobDefinition

from jobsched_tools.explore.world import HANDLER_MS, Budget, World

T0 = int(datetime(2026, 12, 1, tzinfo=UTC).timestamp() * 1000)  # 00:00:00Z
SECOND = 1_000
MINUTE = 60_000
JOB_ID = "j"
OLD = "rate(5 minutes)"
NEW = "rate(3 minutes)"
CFG = SchedulerConfig(shard_count=1, trigger_groups=1)


@dataclass(frozen=True)
class ActorSpec:
    name: str
    kind: str
    offset_ms: int = 0
    arg: Any = None


@dataclass(frozen=True)
class ActorSet:
    name: str
    actors: tuple[ActorSpec, ...]
    setup: str = "registered"  # "registered": the job alone; "claimed": a tick claimed 00:05 at 00:04
    at: int = T0 + 4 * MINUTE
    window_end: int = T0 + 8 * MINUTE
    budget: Budget = field(default_factory=Budget)
    overlap: str = "skip"
    schedule: str = OLD
    after_completion: str = "none"  # action_after_completion (issue 29)
    # More fields of the job's definition (``max_runs``, ``pause_on_failure``, ``retry`` ...).
    job: tuple[tuple[str, Any], ...] = ()
    note: str = ""
    # A check of the set's own, run after the drive (the toy protocols of the explorer's tests).
    check: Callable[[World], None] | None = None
    handler_ms: int = HANDLER_MS  # how long each handler runs in the drive to quiescence
    # The stack's settings where they are not ``CFG`` (the successor explorer's short leases, HC7).
    cfg: SchedulerConfig | None = None


def job_item(
    schedule: str = OLD,
    overlap: str = "skip",
    after_completion: str = "none",
    job: tuple[tuple[str, Any], ...] = (),
) -> dict[str, Any]:
    return JobDefinition(
        job_id=JOB_ID,
        schedule=schedule,
        target="t",
        overlap=overlap,
        action_after_completion=after_completion,
        **dict(job),
    ).to_item()


def actor_spec(name: str, kind: str, offset_ms: int = 0, arg: Any = None) -> ActorSpec:
    return ActorSpec(name, kind, offset_ms, arg)


def by_name(*sets: ActorSet) -> dict[str, ActorSet]:
    """A family of actor sets, keyed by name (in order)."""
    return {s.name: s for s in sets}
