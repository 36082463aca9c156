"""The reconcile pass's part in the successor claim (issue 37; build plan §2 "reconcile pass", §3 HC5,
§5 "The migration"), taken only with the migration switch on (core/claim_shape.py):

- **legacy states are converted** as the pass walks them (§5: "the reconcile pass converts the
  rest"): core/transitions/head_convert.py's transaction, through the registrar's own
  ``convert_legacy``. Each pass counts the states it met still in ``next-run`` (``LegacyStates``),
  and the bookkeeping item keeps the count of the last complete pass, which
  ``jobsched migrate successor-claim --check`` reads ("a full reconcile pass counted no state with
  ``next_run_at``");
- **a lost finish write is repaired** (HC5): an active successor state whose timing can end is read
  again (strongly), then its runs partition (HC12, in head_finish.py's order), and if it reads as
  finished (``reads_as_finished``: no head, its live life's end marker written) the finish write
  (``finish_life_ops``) lands. Level-triggered: the trigger's finish after its last claim may be lost.

Each job is isolated: a failure is counted and logged by the caller, and the job is met again on
the next pass.
"""

from __future__ import annotations

from dataclasses import dataclass

from jobsched.core.clock import Clock
from jobsched.core.config import SchedulerConfig
from jobsched.core.errors import ConditionFailed
from jobsched.core.head_change import EPOCH
from jobsched.core.state import JobStatus
from jobsched.core.transitions.head_convert import is_legacy
from jobsched.core.transitions.head_finish import finish_life_ops, reads_as_finished
from jobsched.core.writes import STATE, Item
from jobsched.ports import Store, Telemetry
from jobsched.services.definitions import Definitions
from jobsched.services.head_registrar import convert_legacy, find_head, read_job_items

# The bookkeeping item's record of the legacy count (``count_legacy_states``).
LEGACY_IN_PASS = "legacy_in_pass"  # counted so far in the pass under way
LEGACY_PASS_FULL = "legacy_pass_full"  # the pass under way was counted from its first page
LEGACY_LAST_PASS = "legacy_last_pass"  # the count of the last pass counted whole
LEGACY_LAST_PASS_AT = "legacy_last_pass_at"


@dataclass(frozen=True)
class Walked:
    """What the pass did for one job's state."""

    state: Item
    legacy: bool = False
    converted: bool = False
    finished: bool = False


def can_end(job: Item) -> bool:
    """Whether the job item's timing can end (HC5: only these lives write an end marker): a
    ``max_runs``, an ``end``, an ``at()``, or a cron expression with a year field that is not ``*``
    (a cron's year ends it). Read from the item as scanned: no store call."""
    if job.get("max_runs") is not None or job.get("end") is not None:
        return True
    schedule = str(job.get("schedule") or "").strip()
    if schedule.startswith("at("):
        return True
    if schedule.startswith("cron(") and schedule.endswith(")"):
        fields = schedule[5:-1].split()
        return len(fields) == 6 and fields[5] != "*"
    return False


class HeadReconciler:
    def __init__(self, store: Store, telemetry: Telemetry, clock: Clock, cfg: SchedulerConfig) -> None:
        self._store = store
        self._telemetry = telemetry
        self._clock = clock
        self._cfg = cfg
        self._definitions = Definitions(store, cfg)

    def walk(self, job: Item, state: Item) -> Walked:
        """Convert a legacy state, or finish a life whose finish write was lost. Returns the state
        as the pass should go on with it. Store errors raise (the caller isolates the job)."""
        job_id = str(job["job_id"])
        now = self._clock.now_ms()
        if is_legacy(state):
            try:
                convert_legacy(self._store, self._cfg, self._definitions, state, now)
            except ConditionFailed:
                # An old-code claim or a registrar moved it first: the next pass meets it again.
                return Walked(state, legacy=True)
            self._telemetry.event(
                "job.converted", job_id, version=int(state["version"]) + 1, actor="reconciler"
            )
            return Walked(state, legacy=True, converted=True)
        if state.get("status") != JobStatus.ACTIVE.value or EPOCH not in state or not can_end(job):
            return Walked(state)
        # head_finish.py's order: the state first (strongly), then the job's items.
        fresh = self._store.get(STATE, {"job_id": job_id})
        if fresh is None or fresh.get("status") != JobStatus.ACTIVE.value:
            return Walked(fresh or state)
        found = find_head(read_job_items(self._store, job_id), fresh)
        if found.ambiguous or found.end_marker is None:
            return Walked(fresh)
        if not reads_as_finished(fresh, found.head, found.end_marker):
            return Walked(fresh)
        try:
            self._store.write(finish_life_ops(fresh, found.end_marker, now))
        except ConditionFailed:
            return Walked(fresh)  # a change or the trigger's own finish landed first
        self._telemetry.event(
            "job.finished", job_id, end_marker=str(found.end_marker["run_id"]), actor="reconciler"
        )
        finished = self._store.get(STATE, {"job_id": job_id})
        return Walked(finished or fresh, finished=True)


def count_legacy_states(
    item: Item | None, sets: Item, counted: int, started_fresh: bool, completed: bool, now: int
) -> None:
    """Add this run's count of legacy states to the pass's, on the bookkeeping item: ``counted``
    in this run, which began at the pass's first page if ``started_fresh`` and ended the pass if
    ``completed``. A pass is counted whole only from its first page (the switch may have been set
    mid-pass); its count then becomes ``legacy_last_pass``."""
    previous = item or {}
    full = started_fresh or bool(previous.get(LEGACY_PASS_FULL))
    running = counted + (0 if started_fresh else int(previous.get(LEGACY_IN_PASS) or 0))
    if completed:
        if full:
            sets[LEGACY_LAST_PASS] = running
            sets[LEGACY_LAST_PASS_AT] = now
        sets[LEGACY_IN_PASS] = 0
        sets[LEGACY_PASS_FULL] = False
        return
    sets[LEGACY_IN_PASS] = running
    sets[LEGACY_PASS_FULL] = full
