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
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from typing import Any

from jobsched.core.claim_shape import ClaimShape, DeployedShape
from jobsched.core.clock import Clock
from jobsched.core.config import SchedulerConfig
from jobsched.core.dead_letter import PENDING
from jobsched.core.errors import ConditionFailed, StoreError
from jobsched.core.head import head_check_delay_ms, is_unstarted_occurrence
from jobsched.core.job import WAITING_POLICIES, OverlapPolicy
from jobsched.core.run import RunStatus, run_key
from jobsched.core.timing import effective_grace_ms, is_overdue
from jobsched.core.transitions import recheck_buffered_ops, recheck_op, recover_op
from jobsched.core.writes import RUNS, Update
from jobsched.ports import IndexName, Store, Telemetry, WorkQueue
from jobsched.services.chain import Chain
from jobsched.services.dead_letters import DeadLetters, DeadLetterSender
from jobsched.services.definitions import Definitions
from jobsched.services.dispatch import Dispatcher
from jobsched.services.head_detector import DueSweep
from jobsched.services.loaded_job import load_job
from jobsched.services.paging import merge_oldest_first, shard_pages
from jobsched.services.pausing import Pauser
from jobsched.services.reconciler import Reconciler
from jobsched.services.registrar import Registrar
from jobsched.services.results import Counters
from jobsched.services.settle import Settler, SettleRequest

# Lapsed leases counted beyond what one run can recover (a lower bound is what the alarm needs).
BACKLOG_COUNT_LIMIT = 10_000
# Catch-up runs are sent in chunks of this many as the overdue jobs are handled, not all at the end.
DISPATCH_CHUNK = 100
# The overdue count looks at the deadline every this many jobs.
COUNT_CHECK_EVERY = 256

# The shortest nap between two sweeps when woken for a lapsing lease: at most four sweeps a second.
MIN_WAKE_GAP_MS = 250
# The time kept before the deadline margin for one wake for a lease.
LEASE_WAKE_BUDGET_MS = 1000


@dataclass
class DetectResult(Counters):
    LATEST = frozenset({"backlog"})  # a later sweep's backlog replaces, not adds to, the earlier
    leases_recovered: int = 0
    runs_failed: int = 0
    runs_cancelled: int = 0  # cancel_other: a dead holder asked to stop, ended as cancelled
    recovery_conflicts: int = 0
    jobs_caught_up: int = 0
    missed_recorded: int = 0
    catchups_started: int = 0
    degraded: bool = False
    backlog: int = 0
    items: int = 0
    buffered_promoted: int = 0
    leases_rechecked: int = 0
    job_errors: int = 0
    stopped_early: bool = False
    recovery_latency_ms: list[int] = field(default_factory=list)
    sweeps: int = 1
    jobs_checked: int = 0
    jobs_reconciled: int = 0
    # Of jobs_reconciled: invalid jobs the stack's allow-lists allow now, registered.
    jobs_revalidated: int = 0
    jobs_resharded: int = 0
    jobs_deleted_after_completion: int = 0


class MissDetector:
    def __init__(
        self,
        store: Store,
        queue: WorkQueue,
        telemetry: Telemetry,
        clock: Clock,
        cfg: SchedulerConfig,
        parallel_queries: bool = True,
        registrar: Registrar | None = None,
        dead_letter_sender: DeadLetterSender | None = None,
        dead_letter_queues: Collection[str] | None = None,
        deployed: DeployedShape = DeployedShape.MIGRATING,
    ) -> None:
        self._store = store
        self._parallel = parallel_queries
        self._settler = Settler(store, telemetry, cfg)
        self._registrar = registrar or Registrar(
            store, telemetry, clock, cfg, queue, report=False, deployed=deployed
        )
        # The stack's claim indexes (template.yaml's ClaimShape): ``successor`` has no next-run and
        # no lease index, so the detector then sweeps ``due`` alone from its first invocation.
        self._deployed = deployed
        self._reconciler = Reconciler(store, telemetry, clock, cfg, self._registrar, deployed=deployed)
        # The lease expiry up to which the last run looked (see next_lease_lapse).
        self._leases_read_through = 0
        self._telemetry = telemetry
        self._clock = clock
        self._cfg = cfg
        self._dispatcher = Dispatcher(queue, telemetry, clock, Definitions(store, cfg))
        self._chain = Chain(store, cfg)
        self._pauser = Pauser(store, telemetry, clock)
        self._dead_letters = DeadLetters(store, dead_letter_sender, telemetry, clock, cfg, dead_letter_queues)
        # The stack's claim (core/claim_shape.py ``stack_shape``): its deployed indexes, and on a
        # migrating stack the switch on the bookkeeping item the reconcile pass reads first in each
        # invocation. Successor: the detector sweeps ``due`` instead of ``lease``.
        self._due_sweep = deployed is DeployedShape.SUCCESSOR
        self._due: DueSweep[DetectResult] = DueSweep(
            store,
            telemetry,
            clock,
            cfg,
            dispatcher=self._dispatcher,
            dead_letters=self._dead_letters,
            repair=self._registrar.apply,
            entries=lambda expired_before: self._merged("due", None, expired_before),
            check_run=self._check_run,
            after_recovery=self._recovered,
            job_error=self._job_error,
        )

    def sweep(
        self,
        invocation_id: str,
        deadline_ms: int,
        every_ms: int,
        sleep_ms: Callable[[int], None],
        awake_until_ms: int = 0,
    ) -> DetectResult:
        """Run every ``every_ms`` until the deadline: one invocation of a once-a-minute schedule
        (EventBridge's finest rate) then finds a dead worker's lapsed lease within seconds, not
        up to a minute later. Between sweeps it wakes early for the next lease due to lapse, so a
        crashed worker's run is recovered a skew allowance after its lease, not up to a period
        later. Stops early when a run could not finish its work: the backlog is better served by
        the next invocation's full budget than by a nap.

        ``awake_until_ms``: an invocation woken for a lease made outside a tick
        (services/waking.py) does not return idle before then, whatever its first reads of the
        eventually consistent indexes showed."""
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
            if (
                self._cfg.detector_idle_return
                and started >= awake_until_ms
                # With the switch on every head is in ``due``, so some entry lapses after any
                # horizon: ``_jobs_due_by`` then asks whether one lapses before it (a lease or a head).
                and (lease_wake_at is None or self._due_sweep)
                and not self._jobs_due_by(deadline_ms + self._cfg.lookahead_seconds * 1000)
            ):
                break  # idle: no lease to watch, and none the trigger can create before the next invocation
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
            # overdue jobs keep their regular period however often leases lapse. The jobs table
            # is compared once per invocation, in its first sweep.
            later = self.run(invocation_id, deadline_ms, leases_only=not full, reconcile=False)
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

    def _jobs_due_by(self, horizon_ms: int) -> bool:
        """Whether a job is due by ``horizon_ms``: one item per shard of the next-run index. The
        sweep stops early (issue 27 item 7: an idle stack paid ~57 s of detector a minute) when no
        lease is held and no job is due before this invocation's deadline plus the lookahead, so
        the trigger can create no lease before the next invocation's first sweep. A shard that
        cannot be read counts as due: an error never makes the detector stop early.

        With the switch on, also whether a ``due`` entry (a lease, a head: its instant plus the
        stack's dispatch lease, ``head_check_delay_ms``) comes to be checked by then: a lease
        lapsing later, or a head due later, is the next invocation's, as a job due later is."""
        failed: list[StoreError] = []
        if self._deployed is not DeployedShape.SUCCESSOR:  # a successor stack has no next-run
            firsts = shard_pages(
                self._store,
                "next-run",
                self._reconciler.shard_span,
                None,
                horizon_ms,
                failed.append,
                self._parallel,
                1,
            )  # shard_span: while a lowered ShardCount's dropped shards drain, those too
            if bool(failed) or any(True for shard in firsts for _ in itertools.islice(shard, 1)):
                return True
        if not self._due_sweep:
            return False
        firsts = shard_pages(
            self._store,
            "due",
            self._reconciler.shard_span,
            None,
            horizon_ms + head_check_delay_ms(self._cfg),
            failed.append,
            self._parallel,
            1,
        )
        return bool(failed) or any(True for shard in firsts for _ in itertools.islice(shard, 1))

    def next_lease_lapse(self, after_ms: int) -> int | None:
        """When the earliest lease expiring after ``after_ms`` becomes recoverable (its expiry
        plus the skew allowance), or None when there is none. One item read per shard; a shard
        that cannot be read is left to the regular sweep. A heartbeat may renew that lease before
        then: the wake-up finds nothing to do and costs one sweep.

        The sweep passes the expiry bound its last run read up to, not ``now``: a lease that
        became recoverable while that run was working is already due, and is found here."""
        index: IndexName = "due" if self._due_sweep else "lease"  # due: every lease and every head
        firsts = shard_pages(
            self._store, index, self._reconciler.shard_span, after_ms + 1, None, _skip, self._parallel, 1
        )
        expiries = [int(run["check_at"]) for shard in firsts for run in itertools.islice(shard, 1)]
        earliest = min(expiries, default=None)
        if earliest is None:
            return None
        return earliest + self._cfg.clock_skew_allowance_ms + 1

    def run(
        self,
        invocation_id: str,
        deadline_ms: int | None = None,
        leases_only: bool = False,
        reconcile: bool = True,
    ) -> DetectResult:
        """One sweep: expired leases, then (unless ``leases_only``) overdue jobs, then (with
        ``reconcile``: the first sweep of an invocation) a slice of the jobs table compared with
        the states (services/reconciler.py)."""
        result = DetectResult()
        self._telemetry.event("detector.started", invocation_id, leases_only=leases_only)

        def budget_left() -> bool:
            if result.items >= self._cfg.detector_max_items:
                return False
            return deadline_ms is None or self._clock.now_ms() < deadline_ms - self._cfg.deadline_margin_ms

        if reconcile and not leases_only:
            self._reconciler.load()  # the shards to sweep: more than ShardCount while some drain
        self._due_sweep = self._reconciler.claim_shape is ClaimShape.SUCCESSOR
        if self._due_sweep:
            # One sweep of ``due`` (services/head_detector.py): leases and overdue heads in one
            # pass, so no run is judged twice; on a migrating stack ``next-run`` below still finds
            # legacy states (a successor stack has no next-run: the reconcile pass converts them).
            self._leases_read_through = self._clock.now_ms() - self._cfg.clock_skew_allowance_ms
            self._due.sweep(result, budget_left, leases_only)
        else:
            # Leases first: a crashed worker's run is a committed promise, overdue jobs are next.
            self._recover_leases(result, budget_left)
        self._telemetry.metric("LeasesRecovered", result.leases_recovered)
        if not leases_only:
            if self._deployed is not DeployedShape.SUCCESSOR:
                self._catch_up_overdue(result, budget_left)
            self._telemetry.metric("MissedRuns", result.missed_recorded)
            self._telemetry.metric("DetectorBacklog", result.backlog)
        if reconcile and not leases_only:
            # Last: a lost change waits minutes at worst, a lapsed lease or an overdue job not.
            def reconcile_budget() -> bool:
                return (
                    deadline_ms is None or self._clock.now_ms() < deadline_ms - self._cfg.deadline_margin_ms
                )

            reconciled = self._reconciler.run(reconcile_budget, deadline_ms)
            result.jobs_checked += reconciled.checked
            result.jobs_reconciled += reconciled.reconciled
            result.jobs_revalidated += reconciled.revalidated
            result.jobs_resharded += reconciled.resharded
            result.jobs_deleted_after_completion += reconciled.completion.deleted
            result.job_errors += reconciled.errors
        if result.recovery_latency_ms:
            self._telemetry.metric("RecoveryLatency", max(result.recovery_latency_ms), "Milliseconds")
        self._telemetry.event("detector.finished", invocation_id, **result.summary())
        return result

    # --- expired leases ----------------------------------------------------------------------

    def _recover_leases(self, result: DetectResult, budget_left: Callable[[], bool]) -> None:
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
                result.backlog += 1 + sum(1 for _ in itertools.islice(runs, BACKLOG_COUNT_LIMIT))
                break
            result.items += 1
            try:
                recovered = self._check(run, expired_before, now, result)
            except StoreError:
                continue  # throttled or unknown: the lease is still expired next time
            except Exception as exc:  # one run's failure must not stop the others
                self._job_error(result, str(run.get("run_id")), exc)
                continue
            if recovered is not None:
                to_dispatch.append(recovered)
        self._dispatcher.dispatch(to_dispatch)

    def _check(
        self, entry: dict[str, Any], expired_before: int, now: int, result: DetectResult
    ) -> dict[str, Any] | None:
        """A run whose ``check_at`` came (the lease index holds keys only): read it, then move
        ``check_at`` to its renewed lease if the worker is alive, or recover it."""
        run = self._store.get(RUNS, run_key(entry["run_id"]))
        return self._check_run(run, expired_before, now, result)

    def _check_run(
        self, run: dict[str, Any] | None, expired_before: int, now: int, result: DetectResult
    ) -> dict[str, Any] | None:
        if run is None or "check_at" not in run or int(run["check_at"]) > expired_before:
            return None  # finished or moved on since the (eventually consistent) index read
        if is_unstarted_occurrence(run):
            return None  # a head or a claimed run (the successor claim): the due sweep's (HC7)
        if run.get("dead_letter") == PENDING:
            self._dead_letters.deliver(run)  # a failed run whose dead letter is still owed
            return None
        if run.get("status") == RunStatus.BUFFERED.value:
            return self._recheck_buffered(run, now, result)
        if int(run["lease_expires_at"]) > expired_before:
            self._recheck(run, result)
            return None
        return self._recover(run, now, result)

    def _recheck(self, run: dict[str, Any], result: DetectResult) -> None:
        try:
            self._store.update(recheck_op(run))
        except ConditionFailed:
            return  # finished or recovered meanwhile: nothing to look at
        result.leases_rechecked += 1

    def _recover(self, run: dict[str, Any], now: int, result: DetectResult) -> dict[str, Any] | None:
        max_attempts = _max_attempts(run)
        update, after = recover_op(run, now, self._cfg, max_attempts)
        if after["status"] == RunStatus.FAILED.value:
            update = self._dead_letters.mark_recovered(update, run, now)
        try:
            self._store.write([update])
        except ConditionFailed as lost:
            result.recovery_conflicts += 1
            self._telemetry.event("recovery.lost", run["run_id"], failed=lost.label)
            return None
        except StoreError:
            return None  # throttled or unknown: the lease is still expired next time
        return self._recovered(run, after, update, now, int(run["lease_expires_at"]), result)

    def _recovered(
        self,
        run: dict[str, Any],
        after: dict[str, Any],
        update: Update,
        now: int,
        lapsed_at: int,
        result: DetectResult,
    ) -> dict[str, Any] | None:
        """What follows a recovery's write ``update`` (or a claimed run's redispatch,
        services/head_detector.py): events and metrics, and the run to send: the recovered run,
        or the one waiting behind a run that ended. ``lapsed_at``: when its lease lapsed."""
        latency = now - lapsed_at
        result.recovery_latency_ms.append(latency)
        if after["status"] == RunStatus.FAILED.value and run.get("cancel_requested"):
            # cancel_other: the run a newer one asked to stop ended with its worker. It ends as
            # cancelled, as its worker would have ended it: not retried, not a failure (no
            # Failures, no pause_on_failure); the newer run waiting behind it starts now.
            result.runs_cancelled += 1
            self._telemetry.event(
                "run.cancelled",
                run["run_id"],
                error=after["last_error"],
                by="miss_detector",
                replaced_by=run["cancel_requested"],
            )
            return self._chain.promote_waiting(run["run_id"], now)
        if after["status"] == RunStatus.FAILED.value:
            result.runs_failed += 1
            self._telemetry.event("run.failed", run["run_id"], error=after["last_error"], by="miss_detector")
            self._telemetry.metric("Failures", 1)
            self._dead_letters.deliver({**after, **update.set})
            # pause_on_failure: one read of the job item, only when a run failed for good.
            self._pauser.after_final_failure(
                str(run["job_id"]), run["run_id"], str(run.get("def_hash")), str(after["last_error"])
            )
            if _overlap(run) in WAITING_POLICIES:
                return self._chain.promote_waiting(run["run_id"], now)  # the run behind it
            return None
        result.leases_recovered += 1
        self._telemetry.event(
            "lease.recovered",
            run["run_id"],
            was=run["status"],
            attempt=after["attempt"],
            token=after["version"],
            lease_expired_at=lapsed_at,
            recovery_latency_ms=latency,
        )
        return after

    def _recheck_buffered(self, run: dict[str, Any], now: int, result: DetectResult) -> dict[str, Any] | None:
        """A buffered run's lease lapsed: renew it while its holder runs, else promote it."""
        holder_id = run.get("blocked_by")
        holder = self._store.get(RUNS, run_key(holder_id)) if holder_id else None
        op, promoted = recheck_buffered_ops(run, holder, now, self._cfg)
        try:
            self._store.write([op])
        except ConditionFailed as lost:
            result.recovery_conflicts += 1
            self._telemetry.event("recovery.lost", run["run_id"], failed=lost.label)
            return None
        except StoreError:
            return None
        if promoted is not None:
            result.buffered_promoted += 1
            self._telemetry.event("run.promoted", run["run_id"], by="miss_detector", holder=holder_id)
        return promoted

    # --- overdue occurrences -----------------------------------------------------------------

    def _catch_up_overdue(self, result: DetectResult, budget_left: Callable[[], bool]) -> None:
        now = self._clock.now_ms()
        # Decide whether to degrade from a bounded look: count at most the degradation threshold
        # plus what one invocation can use, never an unbounded backlog, and hold none of it: the
        # count streams through the index a page at a time (the threshold may be 10 million).
        # Then a second pass handles the overdue jobs oldest first, one at a time (the states
        # stay in the index; the next invocation reads what this one leaves).
        look = self._cfg.detector_degrade_backlog + self._cfg.detector_max_items
        # The count also stops at the deadline: a backlog too long to count in time is at least
        # what was counted (the decision and the DetectorBacklog metric are lower bounds then).
        counted = 0
        for counted, _ in enumerate(itertools.islice(self._overdue(now), look), start=1):
            if counted % COUNT_CHECK_EVERY == 0 and not budget_left():
                break
        if counted == 0:
            return  # nothing overdue, the usual case: no second pass over the index
        degraded = counted > self._cfg.detector_degrade_backlog
        if degraded:
            result.degraded = True
            self._telemetry.event("detector.degraded", "miss_detector", overdue_jobs_at_least=counted)
        to_dispatch: list[dict[str, Any]] = []
        for handled, state in enumerate(itertools.islice(self._overdue(now), counted)):
            if not budget_left():
                result.stopped_early = True
                result.backlog += counted - handled
                break
            try:
                to_dispatch += self._catch_up(state, now, degraded, result, budget_left)
            except StoreError:
                result.backlog += 1  # throttled or unknown: the job is still overdue next time
            except Exception as exc:  # one job's failure must not stop the others
                self._job_error(result, str(state.get("job_id")), exc)
            if len(to_dispatch) >= DISPATCH_CHUNK:
                self._dispatcher.dispatch(to_dispatch)  # sent as they come: none held for long
                to_dispatch = []
        self._dispatcher.dispatch(to_dispatch)

    def _overdue(self, now: int) -> Iterator[dict[str, Any]]:
        """Overdue jobs, oldest first, streamed. Per-job grace is at least 0, so anything not
        older than ``now`` could be overdue; the per-job rule (shared with the trigger) decides."""
        return (state for state in self._merged("next-run", None, now) if _overdue(state, now, self._cfg))

    def _catch_up(
        self,
        state: dict[str, Any],
        now: int,
        degraded: bool,
        result: DetectResult,
        budget_left: Callable[[], bool],
    ) -> list[dict[str, Any]]:
        job = load_job(self._store, state, self._registrar.apply)
        if job is None:
            return []  # the job item changed: the registrar settled it; the next sweep reads it
        misfire = job.definition.misfire
        request = SettleRequest(
            schedule=job.schedule,
            misfire=misfire,
            snapshot=job.snapshot,
            def_hash=job.def_hash,
            overdue_before=now - effective_grace_ms(misfire.grace_seconds, self._cfg),
            # Occurrences after the missed ones that are due, or due within the trigger's
            # lookahead, are claimed here as ordinary (late) runs. Left to the trigger, which ticks
            # once a minute, they would be overdue by its next tick whenever the grace is shorter
            # than the tick period, and the job would never get back to the trigger after an
            # outage: every later occurrence would meet the misfire policy (skip: never run again).
            late_until=now + self._cfg.lookahead_seconds * 1000,
            degraded=degraded,
            max_runs=job.definition.max_runs,
        )
        before = result.items

        def left(written: int) -> bool:
            result.items = before + written  # the budget counts this job's records as they land
            return budget_left()

        settled = self._settler.settle(job.state, request, now, left)
        result.items = before + len(settled.records)
        result.missed_recorded += len(settled.missed)
        result.catchups_started += len(settled.to_dispatch)
        if settled.records:
            result.jobs_caught_up += 1
        if not settled.complete and not settled.lost_race:
            result.stopped_early = True
            result.backlog += 1
        return settled.to_dispatch

    def _job_error(self, result: DetectResult, key: str, exc: Exception) -> None:
        result.job_errors += 1
        self._telemetry.event(
            "job.error", key, actor="miss_detector", error=f"{type(exc).__name__}: {exc}"[:500]
        )
        self._telemetry.metric("JobErrors", 1)

    # --- shared ------------------------------------------------------------------------------

    def _merged(self, index: IndexName, sort_from: int | None, sort_to: int) -> Iterator[dict[str, Any]]:
        """Every shard's matches, oldest first. A failing shard is left for the next run."""
        return merge_oldest_first(
            index,
            shard_pages(
                self._store, index, self._reconciler.shard_span, sort_from, sort_to, _skip, self._parallel
            ),
        )


def _skip(_: StoreError) -> None:
    return None


def _overdue(state: dict[str, Any], now: int, cfg: SchedulerConfig) -> bool:
    misfire = state.get("misfire") if isinstance(state.get("misfire"), dict) else {}
    grace = int(misfire.get("grace_seconds", 60)) if misfire else 60
    return is_overdue(int(state["next_run_at"]), now, grace, cfg)


def _max_attempts(run: dict[str, Any]) -> int:
    return int(run.get("max_attempts", 1))


def _overlap(run: dict[str, Any]) -> OverlapPolicy:
    try:
        return OverlapPolicy(run.get("overlap", "skip"))
    except ValueError:
        return OverlapPolicy.SKIP
