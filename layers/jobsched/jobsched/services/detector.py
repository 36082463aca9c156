"""The miss detector: recover expired leases and catch overdue occurrences.

Overload degrades in a defined way (see docs/operations.md, "Degradation order"):
1. work per invocation is bounded by the Lambda deadline and ``detector_max_items``; oldest first;
2. what is left is reported as the ``DetectorBacklog`` metric and picked up next invocation;
3. when the overdue backlog exceeds ``detector_degrade_backlog``, ``run_all`` catch-up is
   coalesced to ``run_once`` and every affected run record says so in its ``reason``;
4. every step is one conditional write (or transaction), so an invocation cut off anywhere leaves
   consistent state for the next one.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from jobsched.core.clock import Clock, dt_to_ms, ms_to_dt
from jobsched.core.config import SchedulerConfig
from jobsched.core.errors import ConditionFailed, StoreError
from jobsched.core.job import InvalidJob, JobDefinition, MisfirePolicy, OverlapPolicy
from jobsched.core.policies import MisfireFate, plan_misfire
from jobsched.core.run import RunKind, RunStatus, run_id_for
from jobsched.core.timing import effective_grace_ms, is_overdue
from jobsched.core.transitions import misfire_ops, new_run_item, recover_op, slot_release_ops
from jobsched.core.writes import JOBS, RUNS, WriteOp
from jobsched.ports import IndexName, Store, Telemetry, WorkQueue
from jobsched.services.dispatch import Dispatcher
from jobsched.services.jobs import item_hash, load_job, mark_invalid
from jobsched.services.paging import merge_oldest_first, shard_pages
from jobsched.services.results import Counters

# Missed occurrences computed per job per invocation: a per-second job down for a day is 86,400;
# the rest are handled by the next invocation, from where this one left the job.
MAX_MISSED_PER_JOB = 2_000

# The shortest nap between two sweeps when woken for a lapsing lease: at most four sweeps a second.
MIN_WAKE_GAP_MS = 250
# The time kept before the deadline margin for one wake for a lease.
LEASE_WAKE_BUDGET_MS = 1000


@dataclass
class DetectResult(Counters):
    LATEST = frozenset({"backlog"})  # a later sweep's backlog replaces, not adds to, the earlier
    leases_recovered: int = 0
    runs_failed: int = 0
    recovery_conflicts: int = 0
    jobs_caught_up: int = 0
    missed_recorded: int = 0
    catchups_started: int = 0
    degraded: bool = False
    backlog: int = 0
    items: int = 0
    stopped_early: bool = False
    recovery_latency_ms: list[int] = field(default_factory=list)
    sweeps: int = 1


class MissDetector:
    def __init__(
        self,
        store: Store,
        queue: WorkQueue,
        telemetry: Telemetry,
        clock: Clock,
        cfg: SchedulerConfig,
        parallel_queries: bool = True,
    ) -> None:
        self._store = store
        self._parallel = parallel_queries
        # The lease expiry up to which the last run looked (see next_lease_lapse).
        self._leases_read_through = 0
        self._telemetry = telemetry
        self._clock = clock
        self._cfg = cfg
        self._dispatcher = Dispatcher(queue, telemetry, clock)

    def sweep(
        self, invocation_id: str, deadline_ms: int, every_ms: int, sleep_ms: Callable[[int], None]
    ) -> DetectResult:
        """Run every ``every_ms`` until the deadline: one invocation of a once-a-minute schedule
        (EventBridge's finest rate) then finds a dead worker's lapsed lease within seconds, not
        up to a minute later. Between sweeps it wakes early for the next lease due to lapse, so a
        crashed worker's run is recovered a skew allowance after its lease, not up to a period
        later. Stops early when a run could not finish its work: the backlog is better served by
        the next invocation's full budget than by a nap."""
        total = self.run(invocation_id, deadline_ms)
        next_full_at = self._clock.now_ms() + every_ms
        while every_ms > 0:
            if total.stopped_early:
                break
            started = self._clock.now_ms()
            # Room before the deadline margin: a full sweep is allowed half a period, a wake for a
            # lease (one read per shard and a few writes) LEASE_WAKE_BUDGET_MS. So early wakes go
            # on after the last full sweep, and only an invocation's last seconds leave a lapsing
            # lease to the next invocation.
            room_until = deadline_ms - self._cfg.deadline_margin_ms
            lease_wake_at = self._lease_wake_at(started)
            if next_full_at + every_ms // 2 < room_until and (
                lease_wake_at is None or lease_wake_at >= next_full_at
            ):
                wake_at, full = next_full_at, True
            elif lease_wake_at is not None and lease_wake_at + LEASE_WAKE_BUDGET_MS < room_until:
                wake_at, full = lease_wake_at, False
            else:
                break
            # From now, not from `started`: reading the next lapse took time of its own.
            sleep_ms(max(0, wake_at - self._clock.now_ms()))
            if self._clock.now_ms() < wake_at:
                break  # a clock that did not move with the sleep (a stub): never spin
            # Woken for a lease: recover leases only, which halves the wake's reads and time;
            # overdue jobs keep their regular period however often leases lapse.
            later = self.run(invocation_id, deadline_ms, leases_only=not full)
            if full:
                next_full_at = self._clock.now_ms() + every_ms
            elif not later.stopped_early:
                later.backlog = total.backlog  # a lease-only run did not look at overdue jobs
            total.merge(later)
            if later.stopped_early:
                break
        return total

    def _lease_wake_at(self, now: int) -> int | None:
        """When to wake for the next lease to lapse (skew allowance included), or None when no
        lease is held. Never sooner than ``MIN_WAKE_GAP_MS``: however many leases lapse one after
        another, the detector reads at most a few sweeps' worth of index pages a second."""
        lapses_at = self.next_lease_lapse(self._leases_read_through)
        return None if lapses_at is None else max(now + MIN_WAKE_GAP_MS, lapses_at)

    def next_lease_lapse(self, after_ms: int) -> int | None:
        """When the earliest lease expiring after ``after_ms`` becomes recoverable (its expiry
        plus the skew allowance), or None when there is none. One item read per shard; a shard
        that cannot be read is left to the regular sweep. A heartbeat may renew that lease before
        then: the wake-up finds nothing to do and costs one sweep.

        The sweep passes the expiry bound its last run read up to, not ``now``: a lease that
        became recoverable while that run was working is already due, and is found here."""
        firsts = shard_pages(
            self._store, "lease", self._cfg.shard_count, after_ms + 1, None, _skip, self._parallel, 1
        )
        expiries = [int(run["lease_expires_at"]) for shard in firsts for run in itertools.islice(shard, 1)]
        earliest = min(expiries, default=None)
        if earliest is None:
            return None
        return earliest + self._cfg.clock_skew_allowance_ms + 1

    def run(
        self, invocation_id: str, deadline_ms: int | None = None, leases_only: bool = False
    ) -> DetectResult:
        result = DetectResult()
        self._telemetry.event("detector.started", invocation_id, leases_only=leases_only)

        def budget_left() -> bool:
            if result.items >= self._cfg.detector_max_items:
                return False
            return deadline_ms is None or self._clock.now_ms() < deadline_ms - self._cfg.deadline_margin_ms

        # Leases first: a crashed worker's run is a committed promise, overdue jobs are next.
        self._recover_leases(result, budget_left)
        self._telemetry.metric("LeasesRecovered", result.leases_recovered)
        if not leases_only:
            self._catch_up_overdue(result, budget_left)
            self._telemetry.metric("MissedRuns", result.missed_recorded)
            self._telemetry.metric("DetectorBacklog", result.backlog)
        if result.recovery_latency_ms:
            self._telemetry.metric("RecoveryLatency", max(result.recovery_latency_ms), "Milliseconds")
        self._telemetry.event("detector.finished", invocation_id, **result.summary())
        return result

    # --- expired leases ----------------------------------------------------------------------

    def _recover_leases(self, result: DetectResult, budget_left: Any) -> None:
        now = self._clock.now_ms()
        # A lease counts as expired only after the skew allowance: a worker whose clock runs a
        # little behind ours must not be recovered while it still believes it holds the lease.
        expired_before = now - self._cfg.clock_skew_allowance_ms
        self._leases_read_through = expired_before
        runs = self._merged("lease", None, expired_before)
        to_dispatch: list[dict[str, Any]] = []
        for run in runs:
            if not budget_left():
                result.stopped_early = True
                result.backlog += 1 + sum(1 for _ in runs)
                break
            result.items += 1
            recovered = self._recover(run, now, result)
            if recovered is not None:
                to_dispatch.append(recovered)
        if to_dispatch:
            self._dispatcher.dispatch(to_dispatch)

    def _recover(self, run: dict[str, Any], now: int, result: DetectResult) -> dict[str, Any] | None:
        max_attempts = _max_attempts(run)
        update, after = recover_op(run, now, self._cfg, max_attempts)
        ops: list[WriteOp] = [update]
        promoted = None
        if after["status"] == RunStatus.FAILED.value and _overlap(run) is not OverlapPolicy.ALLOW:
            job = self._store.get(JOBS, {"job_id": run["job_id"]})
            buffered_id = job.get("buffered_run_id") if job else None
            buffered = self._store.get(RUNS, {"run_id": buffered_id}) if buffered_id else None
            slot_ops, promoted = (
                slot_release_ops(job, run["run_id"], buffered, now, self._cfg) if job else ([], None)
            )
            ops += slot_ops
        try:
            self._store.write(ops)
        except ConditionFailed as lost:
            result.recovery_conflicts += 1
            self._telemetry.event("recovery.lost", run["run_id"], failed=lost.label)
            return None
        except StoreError:
            return None  # throttled or unknown: the lease is still expired next time
        latency = now - int(run["lease_expires_at"])
        result.recovery_latency_ms.append(latency)
        if after["status"] == RunStatus.FAILED.value:
            result.runs_failed += 1
            self._telemetry.event("run.failed", run["run_id"], error=after["last_error"], by="miss_detector")
            self._telemetry.metric("Failures", 1)
            return promoted
        result.leases_recovered += 1
        self._telemetry.event(
            "lease.recovered",
            run["run_id"],
            was=run["status"],
            attempt=after["attempt"],
            token=after["version"],
            lease_expired_at=run["lease_expires_at"],
            recovery_latency_ms=latency,
        )
        return after

    # --- overdue occurrences -----------------------------------------------------------------

    def _catch_up_overdue(self, result: DetectResult, budget_left: Any) -> None:
        now = self._clock.now_ms()
        # Per-job grace is at least 0, so anything not older than `now` could be overdue; the
        # per-job rule (shared with the trigger) decides.
        # Read at most what this invocation could use plus the degradation threshold: enough to
        # decide whether to degrade without reading an unbounded backlog into memory.
        overdue = (job for job in self._merged("next-run", None, now) if _overdue(job, now, self._cfg))
        jobs = list(
            itertools.islice(overdue, self._cfg.detector_degrade_backlog + self._cfg.detector_max_items)
        )
        degraded = len(jobs) > self._cfg.detector_degrade_backlog
        if degraded:
            result.degraded = True
            self._telemetry.event("detector.degraded", "miss_detector", overdue_jobs=len(jobs))
        to_dispatch: list[dict[str, Any]] = []
        for index, job in enumerate(jobs):
            if not budget_left():
                result.stopped_early = True
                result.backlog += len(jobs) - index
                break
            to_dispatch += self._catch_up(job, now, degraded, result, budget_left)
        if to_dispatch:
            self._dispatcher.dispatch(to_dispatch)

    def _catch_up(
        self, item: dict[str, Any], now: int, degraded: bool, result: DetectResult, budget_left: Any
    ) -> list[dict[str, Any]]:
        try:
            job = load_job(item)
        except InvalidJob as exc:
            mark_invalid(self._store, self._telemetry, item, exc.reasons, now, item_hash(item))
            return []
        definition = job.definition
        grace_ms = effective_grace_ms(definition.misfire.grace_seconds, self._cfg)
        # Occurrences older than the grace are missed; the one(s) still within grace belong to
        # the trigger again, so stop there.
        missed = [int(item["next_run_at"])]
        horizon = now - grace_ms
        while len(missed) < MAX_MISSED_PER_JOB:
            following = job.schedule.next_after(ms_to_dt(missed[-1]))
            if following is None or dt_to_ms(following) >= horizon:
                break
            missed.append(dt_to_ms(following))
        more_follow = len(missed) >= MAX_MISSED_PER_JOB
        fates = plan_misfire(
            definition.misfire.policy,
            missed,
            definition.misfire.max_catchup,
            int(item.get("catchups", 0)),
            degraded,
            more_follow,
        )
        # Occurrences after the missed ones that are due, or due within the trigger's lookahead,
        # are claimed here as ordinary (late) runs. Left to the trigger, which ticks once a minute,
        # they would be overdue by its next tick whenever the grace is shorter than the tick
        # period, and the job would never get back to the trigger after an outage: every later
        # occurrence would go through the misfire policy (skip: never run again).
        late: set[int] = set()
        if not more_follow and fates:
            cursor = fates[-1].scheduled_at
            while len(late) < MAX_MISSED_PER_JOB:
                upcoming = job.schedule.next_after(ms_to_dt(cursor))
                if upcoming is None or dt_to_ms(upcoming) > now + self._cfg.lookahead_seconds * 1000:
                    break
                cursor = dt_to_ms(upcoming)
                late.add(cursor)
                fates.append(MisfireFate(cursor, RunStatus.PENDING, "late within grace"))
        snapshot = definition.to_item()
        dispatch: list[dict[str, Any]] = []
        catchups = int(item.get("catchups", 0))
        chunk_size = self._cfg.misfire_chunk
        for start in range(0, len(fates), chunk_size):
            if start and not budget_left():
                result.stopped_early = True
                result.backlog += 1
                break
            chunk = fates[start : start + chunk_size]
            after_chunk = chunk[-1].scheduled_at
            following = job.schedule.next_after(ms_to_dt(after_chunk))
            resume_at = dt_to_ms(following) if following is not None else None
            runs: list[tuple[dict[str, Any], RunStatus]] = []
            for fate in chunk:
                kind = RunKind.SCHEDULED if fate.scheduled_at in late else RunKind.CATCHUP
                run = new_run_item(
                    definition.job_id,
                    run_id_for(definition.job_id, fate.scheduled_at),
                    fate.scheduled_at,
                    snapshot,
                    kind,
                    now,
                    self._cfg,
                    status=fate.status,
                    reason=fate.reason,
                )
                if fate.status is RunStatus.PENDING:
                    run["reason"] = fate.reason
                runs.append((run, fate.status))
            new_catchups = catchups + sum(
                1 for run, status in runs if status is RunStatus.PENDING and run["scheduled_at"] not in late
            )
            written = self._write_chunk(item, runs, resume_at, new_catchups, now)
            if written is None:
                return dispatch  # lost a race: the next invocation starts from the job as it is
            item = {**item, "version": item["version"] + 1, "catchups": new_catchups}
            if resume_at is not None:
                item["next_run_at"] = resume_at
            catchups = new_catchups
            result.items += len(written)
            for run, status in written:
                if status is RunStatus.MISSED:
                    result.missed_recorded += 1
                    self._telemetry.event(
                        "run.missed",
                        run["run_id"],
                        scheduled_at=run["scheduled_at"],
                        reason=run.get("reason"),
                    )
                else:
                    result.catchups_started += 1
                    self._telemetry.event("run.catchup", run["run_id"], scheduled_at=run["scheduled_at"])
                    dispatch.append(run)
        result.jobs_caught_up += 1
        return dispatch

    def _write_chunk(
        self,
        job: dict[str, Any],
        runs: list[tuple[dict[str, Any], RunStatus]],
        resume_at: int | None,
        catchups: int,
        now: int,
    ) -> list[tuple[dict[str, Any], RunStatus]] | None:
        """Write one chunk; drop occurrences whose run already exists (claimed earlier, e.g. before
        a person re-put the job) and retry, so none is recorded twice."""
        for _ in range(3):
            if not runs:
                return runs
            ops = misfire_ops(job, runs, resume_at, catchups, now)
            try:
                self._store.write(ops)
                return runs
            except ConditionFailed as lost:
                if lost.op_index == 0:
                    self._telemetry.event("catchup.lost", job["job_id"], failed=lost.label)
                    return None
                existing = runs[lost.op_index - 1][0]["run_id"]
                runs = [(run, status) for run, status in runs if run["run_id"] != existing]
            except StoreError:
                return None
        return None

    # --- shared ------------------------------------------------------------------------------

    def _merged(self, index: IndexName, sort_from: int | None, sort_to: int) -> Iterator[dict[str, Any]]:
        """Every shard's matches, oldest first. A failing shard is left for the next run."""
        return merge_oldest_first(
            index,
            shard_pages(self._store, index, self._cfg.shard_count, sort_from, sort_to, _skip, self._parallel),
        )


def _skip(_: StoreError) -> None:
    return None


def _overdue(job: dict[str, Any], now: int, cfg: SchedulerConfig) -> bool:
    misfire = job.get("misfire") if isinstance(job.get("misfire"), dict) else {}
    grace = int(misfire.get("grace_seconds", 60)) if misfire else 60
    return is_overdue(int(job["next_run_at"]), now, grace, cfg)


def _max_attempts(run: dict[str, Any]) -> int:
    try:
        return JobDefinition.from_item(run["definition"]).retry.max_attempts
    except (InvalidJob, KeyError):
        return 1


def _overlap(run: dict[str, Any]) -> OverlapPolicy:
    try:
        return OverlapPolicy(run["definition"].get("overlap", "skip"))
    except ValueError:
        return OverlapPolicy.SKIP


__all__ = ["DetectResult", "MisfirePolicy", "MissDetector"]
