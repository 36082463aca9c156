"""What the invariant checker reads of a finished chaos run.

``sim/world.py`` runs the world and hands itself to ``sim/invariants.py``; the checker names only
this view of it, so the dependency points one way (world -> invariants -> observed), and the
checker can be read, and fed, without the world (issue 39).
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Protocol

from jobsched.core.clock import ManualClock
from jobsched.core.config import SchedulerConfig

from jobsched_tools.sim.faults import FaultyStore, SimDeadLetters, SimQueue
from jobsched_tools.sim.report import LogEntry
from jobsched_tools.sim.scenario import ChaosConfig, FaultRates, SimJob


class ObservedWorld(Protocol):
    """The attributes of ``World`` the checker reads; ``World`` matches it structurally."""

    cfg: ChaosConfig
    rates: FaultRates
    sched_cfg: SchedulerConfig
    clock: ManualClock
    start_ms: int
    window_end: int
    store: FaultyStore
    queue: SimQueue
    by_id: dict[str, SimJob]
    outages: list[tuple[int, int]]
    operated: set[str]  # jobs a person changed during the run
    odd_keys: set[str]  # job items a person keyed with a snapshot's key
    counts: Counter[str]
    entries: list[LogEntry]
    outcomes: Counter[str]
    leases_recovered: int
    # (run id, lapsed at, recovered at) of every recovery; when each clean detector run began.
    recoveries: list[tuple[str, int, int]]
    clean_detector_runs: list[int]
    unexpected: list[str]
    job_errors: list[tuple[str, str]]  # (job or run id, error) the services isolated
    dead_letters: SimDeadLetters  # every letter a job's dead-letter queue was sent
    # Every write a person made to a job item: (when, the item after it or None, when its stream
    # record reaches the registrar or None: lost).
    person_log: dict[str, list[tuple[int, dict[str, Any] | None, int | None]]]
    item_history: dict[str, list[tuple[int, str | None]]]  # every write to a job item: (when, digest)
