"""The simulated world: the real services as actors on a simulated clock, driven by one seeded RNG.

An event heap holds the next instant each actor acts (trigger ticks and detector runs every
minute, each running worker's next heartbeat or end); in between, the loop jumps the clock to the
next event or the next message becoming visible, so hours of simulated time take seconds.
Workers are driven step by step (begin, heartbeats, simulated handler, finish), never through
``Worker.execute``, which would use real threads and waits.
"""

from __future__ import annotations

import heapq
import time
from typing import Any

from jobsched.core.head import MARKER_STATUSES
from jobsched.core.job import is_job_id
from jobsched.core.policies import UNFINISHED
from jobsched.core.state import differences
from jobsched.core.writes import JOBS, RUNS, STATE
from jobsched.ports import DUE_INDEX, Store
from jobsched.services.completion import asks_delete, finished_as_written

from jobsched_tools.sim.invariants import Checker, all_items, check
from jobsched_tools.sim.migration import Migration
from jobsched_tools.sim.report import ChaosReport
from jobsched_tools.sim.scenario import ChaosConfig
from jobsched_tools.sim.successor import SuccessorChecker
from jobsched_tools.sim.workers import Workers
from jobsched_tools.sim.world_state import MINUTE

TERMINAL_STATUSES = frozenset({"succeeded", "failed", "skipped", "missed", "cancelled"})
# "the miss detector's reconcile pass applies the change the record carried within a pass and two
# minutes" (docs/operations.md, Registrar failures; docs/promises.md row 25): a pass is one
# detector run here (a minute), and a difference is applied once it lasted SUSPECT_AFTER_MS.
CONVERGE_WITHIN_MS = 3 * MINUTE


class World(Migration, Workers):
    """The world: its state (sim/world_state.py) and its actors, a mixin each: the stream
    (sim/stream.py), the people (sim/people.py), the trigger and detector (sim/ticks.py), the
    workers (sim/workers.py), and on a migrating stack the operator's switch (sim/migration.py).
    This module runs them: the event loop, the drain, the check."""

    def __init__(self, cfg: ChaosConfig, store: Store | None = None) -> None:
        super().__init__(cfg, store)
        # The store's hooks into the actors: the stream, the races around a recovery, a change
        # after a claimer's crash.
        self.store.on_job_write = self._stream_record
        self.store.before_recovery = self._heartbeat_races_recovery
        self.store.after_mid_claim_crash = self._change_after_crash

    # --- run -----------------------------------------------------------------------------------

    def run(self) -> ChaosReport:
        wall = time.perf_counter()
        for job in self.jobs:
            self.registered_at[job.definition.job_id] = self.clock.now_ms()
            self.ops.register(job.definition)
        self.store.enabled = self.queue.enabled = True
        self.store.actor = "world"
        first_minute = (self.start_ms // MINUTE + 1) * MINUTE
        self.at(first_minute + self.rng.randrange(2000), self._tick)
        self.at(first_minute + 30_000 + self.rng.randrange(2000), self._detect)
        self._schedule_operators()
        if self.cfg.migrate_midway:
            self._schedule_migration()
        self.at(self.window_end, self._faults_off)
        self.at(self.window_end + 10 * MINUTE, self._drain_check)
        while True:
            visible = self.queue.next_visible_at_ms()
            if visible is not None and visible <= self.clock.now_ms():
                self._poll()
                visible = self.queue.next_visible_at_ms()
            next_event = self._heap[0].at if self._heap else None
            candidates = [t for t in (next_event, visible) if t is not None]
            if not candidates:
                break
            when = min(candidates)
            if when > self.end:
                break
            if when > self.clock.now_ms():
                self.clock.set(when)
            while self._heap and self._heap[0].at <= self.clock.now_ms():
                heapq.heappop(self._heap).action()
        self.clock.set(self.end)
        report = check(self, SuccessorChecker if self.cfg.ends_successor else Checker)
        if self.cfg.migrate_midway:
            report.migration = self.migration_figures()
            report.invariant_violations += self.migration_violations()
        report.wall_seconds = round(time.perf_counter() - wall, 2)
        return report

    def _faults_off(self) -> None:
        self.store.enabled = self.queue.enabled = False
        self.log("world", "faults.off", "", "drain: faults off, trigger and detector on")

    def _drain_check(self) -> None:
        """End the drain once every occurrence of the window has settled (or at its cap)."""
        from jobsched_tools.sim.invariants import all_items

        runs = all_items(self.store.inner, RUNS)
        jobs = all_items(self.store.inner, STATE)
        # A successor-shaped world's markers end nothing (they are not runs), and its states have
        # no next-run entry: a job behind is a head at or before the window's end (open_runs).
        successor = self.cfg.ends_successor
        settled = TERMINAL_STATUSES | MARKER_STATUSES if successor else TERMINAL_STATUSES
        open_runs = any(r.get("status") not in settled and r["scheduled_at"] <= self.window_end for r in runs)
        behind = any(
            j.get("status") == "active"
            and (not successor or "next_run_at" in j)
            and j.get("next_run_at", 0) <= self.window_end
            for j in jobs
        )
        # A dead letter still owed is paid by the detector's next look (its check_at, at most a
        # minute on): a run that failed just before the drain's check would otherwise end the
        # drain with its debt open (issue 38).
        owed = any(r.get("dead_letter") == "pending" and r["scheduled_at"] <= self.window_end for r in runs)
        pending = self._completions_pending(jobs, runs) or self._registrations_pending(jobs)
        if open_runs or behind or owed or pending:
            self.at(self.clock.now_ms() + 5 * MINUTE, self._drain_check)
            return
        self.end = self.clock.now_ms()
        self.log("world", "drain.settled", "", "every occurrence of the window has settled")

    def _registrations_pending(self, states: list[dict[str, Any]]) -> bool:
        """A job item whose change has not reached its state, written within the time the
        reconcile pass is promised to take (``CONVERGE_WITHIN_MS``): a person's write during the
        drain (a resume or a re-creation the operator scheduled past the window) whose record is
        late behind an earlier one. The drain gives the pass its time; a difference older than
        that holds no drain, and ``converged`` reports it (invariants: ``registration_not_converged``)."""
        by_id = {str(s["job_id"]): s for s in states}
        recent = self.clock.now_ms() - CONVERGE_WITHIN_MS
        for job in all_items(self.store.inner, JOBS):
            job_id = str(job.get("job_id"))
            written = self.item_history.get(job_id, [])
            if not is_job_id(job_id) or not written or written[-1][0] <= recent:
                continue
            if differences(job, by_id.get(job_id), self.sched_cfg.shard_count):
                return True
        return False

    def _completions_pending(self, states: list[dict[str, Any]], runs: list[dict[str, Any]]) -> bool:
        """A job asking to be deleted after completion that is complete and still has its item:
        the drain waits for the reconcile pass (invariants: ``not_deleted_after_completion``)."""
        by_id = {str(s["job_id"]): s for s in states}
        unfinished = {str(r["job_id"]) for r in runs if r.get("status") in UNFINISHED}
        return any(
            asks_delete(job) and job_id not in unfinished and finished_as_written(job, by_id.get(job_id))
            for job in all_items(self.store.inner, JOBS)
            for job_id in (str(job.get("job_id")),)
        )


def run_chaos(cfg: ChaosConfig) -> ChaosReport:
    if cfg.store == "moto":
        from jobsched_tools.sim.moto_store import moto_store

        with moto_store((DUE_INDEX,) if cfg.ends_successor else ()) as store:
            return World(cfg, store).run()
    return World(cfg).run()
