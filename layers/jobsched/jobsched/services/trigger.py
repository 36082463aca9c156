"""The trigger tick: find due occurrences in the next-run index, claim each once, dispatch.

Safe under repetition: the claim is a transaction that creates the occurrence's run (its id is
deterministic, ``attribute_not_exists``) and advances the job (``version`` as read), so duplicate
or concurrent ticks claim each occurrence at most once. A tick that dies after claiming and before
sending leaves pending runs whose dispatch lease lapses; the miss detector redispatches them.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

from jobsched.core.clock import Clock, dt_to_ms, ms_to_dt
from jobsched.core.config import SchedulerConfig
from jobsched.core.errors import ConditionFailed, StoreError, Throttled, TransientStoreError
from jobsched.core.job import InvalidJob
from jobsched.core.run import run_id_for
from jobsched.core.timing import is_overdue
from jobsched.core.transitions import advance_only_ops, claim_ops
from jobsched.core.writes import JOBS, RUNS
from jobsched.ports import Store, Telemetry, WorkQueue
from jobsched.services.dispatch import Dispatcher
from jobsched.services.jobs import item_hash, load_job, mark_invalid
from jobsched.services.paging import merge_oldest_first, shard_pages
from jobsched.services.results import Counters

SEND_BATCH = 10
# A tick claims everything due in its window, so it reads large pages: fewer round trips per
# tick (DynamoDB still caps a page at 1 MB, about 2,500 job items).
DUE_PAGE_SIZE = 1000
SENDERS = 4
BACKLOG_COUNT_LIMIT = 10_000


@dataclass
class TickResult(Counters):
    claimed: int = 0
    dispatched: int = 0
    dispatch_failed: int = 0
    conflicts: int = 0
    duplicates: int = 0
    invalid: int = 0
    deferred: int = 0
    throttled: int = 0
    backlog: int = 0
    stopped_early: bool = False
    lag_ms: list[int] = field(default_factory=list)


class _ClaimBudget:
    """The per-tick claim cap, shared by the parallel claimers."""

    def __init__(self, limit: int) -> None:
        self._left = limit
        self._lock = threading.Lock()

    def take(self) -> bool:
        with self._lock:
            if self._left <= 0:
                return False
            self._left -= 1
            return True

    def exhausted(self) -> bool:
        with self._lock:
            return self._left <= 0


class Trigger:
    def __init__(
        self,
        store: Store,
        queue: WorkQueue,
        telemetry: Telemetry,
        clock: Clock,
        cfg: SchedulerConfig,
        parallel_queries: bool = True,
        claim_concurrency: int | None = None,
    ) -> None:
        self._store = store
        self._telemetry = telemetry
        self._clock = clock
        self._cfg = cfg
        self._dispatcher = Dispatcher(queue, telemetry, clock)
        self._parallel = parallel_queries
        # Sequential queries and claims make a tick fully deterministic (the chaos simulation and
        # tests ask for parallel_queries=False); Lambda uses the configured concurrency.
        if claim_concurrency is None:
            claim_concurrency = cfg.claim_concurrency if parallel_queries else 1
        self._claim_concurrency = claim_concurrency

    def tick(self, invocation_id: str, deadline_ms: int | None = None) -> TickResult:
        now = self._clock.now_ms()
        window_from = now - self._cfg.trigger_lookback_seconds * 1000
        window_to = now + self._cfg.lookahead_seconds * 1000
        self._telemetry.event("tick.started", invocation_id, window_from=window_from, window_to=window_to)
        result = TickResult()
        to_dispatch: list[dict[str, Any]] = []

        def out_of_time() -> bool:
            if deadline_ms is None:
                return False
            return self._clock.now_ms() >= deadline_ms - self._cfg.deadline_margin_ms

        budget = _ClaimBudget(self._cfg.max_claims_per_tick)

        def claim(item: dict[str, Any]) -> tuple[TickResult, list[dict[str, Any]]]:
            # Each job's claims are sequential (its next occurrence depends on the last one);
            # different jobs are independent, so they may be claimed in parallel.
            local = TickResult()
            try:
                return local, self._claim_job(item, window_to, invocation_id, local, out_of_time, budget)
            except Throttled:
                local.throttled += 1  # the job stays due; the next tick picks it up
                return local, []

        due = self._due_jobs(window_from, window_to, result)
        concurrency = self._claim_concurrency
        # With parallel claimers, batches are sent by a few sender threads too: one sender at
        # ~10 ms a batch would cap a tick near 1,000 runs/s however fast the claims are.
        senders = ThreadPoolExecutor(max_workers=SENDERS) if concurrency > 1 else None
        sends: list[Future[int]] = []

        def send(batch: list[dict[str, Any]]) -> None:
            if senders is None:
                self._count_sent(len(batch), self._dispatcher.dispatch(batch), result)
            else:
                sends.append(senders.submit(self._dispatcher.dispatch, batch))
                sizes.append(len(batch))

        sizes: list[int] = []

        def collect(done: tuple[TickResult, list[dict[str, Any]]]) -> None:
            local, runs = done
            result.merge(local)
            to_dispatch.extend(runs)
            # Send as claims complete, a full batch at a time, so that the first runs of a big
            # tick are on their way while the rest are still being claimed.
            while len(to_dispatch) >= SEND_BATCH:
                send(to_dispatch[:SEND_BATCH])
                del to_dispatch[:SEND_BATCH]

        try:
            with ThreadPoolExecutor(max_workers=concurrency) if concurrency > 1 else nullcontext() as pool:
                in_flight: set[Future[tuple[TickResult, list[dict[str, Any]]]]] = set()
                for item in due:
                    if budget.exhausted() or out_of_time():
                        result.stopped_early = True
                        # Counting what is left reads more pages; stop counting at a bound (a lower
                        # bound is what the Backlog alarm needs).
                        result.backlog += 1 + sum(1 for _ in itertools.islice(due, BACKLOG_COUNT_LIMIT))
                        break
                    if pool is None:
                        collect(claim(item))
                        continue
                    in_flight.add(pool.submit(claim, item))
                    if len(in_flight) >= 2 * concurrency:
                        finished, in_flight = wait(in_flight, return_when=FIRST_COMPLETED)
                        for future in finished:
                            collect(future.result())
                for future in in_flight:
                    collect(future.result())
            if to_dispatch:
                send(to_dispatch)
            if senders is not None:
                senders.shutdown(wait=True)
                for size, sent in zip(sizes, sends, strict=True):
                    self._count_sent(size, sent.result(), result)
        finally:
            if senders is not None:
                senders.shutdown(wait=True)  # also when a claim raised: no thread left behind
        self._telemetry.metric("Claims", result.claimed)
        self._telemetry.metric("ClaimConflicts", result.conflicts)
        self._telemetry.metric("Backlog", result.backlog)
        if result.lag_ms:
            self._telemetry.metric("ScheduleLag", max(result.lag_ms), "Milliseconds")
        self._telemetry.event("tick.finished", invocation_id, **result.summary())
        return result

    @staticmethod
    def _count_sent(size: int, unsent: int, result: TickResult) -> None:
        result.dispatch_failed += unsent
        result.dispatched += size - unsent

    def _due_jobs(self, window_from: int, window_to: int, result: TickResult) -> Iterator[dict[str, Any]]:
        """All shards' due jobs merged oldest first; each shard is paged lazily."""

        def throttled(_: StoreError) -> None:
            result.throttled += 1  # this shard's rest waits for the next tick

        firsts = shard_pages(
            self._store,
            "next-run",
            self._cfg.shard_count,
            window_from,
            window_to,
            throttled,
            self._parallel,
            DUE_PAGE_SIZE,
        )
        return merge_oldest_first("next-run", firsts)

    def _claim_job(
        self,
        item: dict[str, Any],
        window_to: int,
        correlation: str,
        result: TickResult,
        out_of_time: Callable[[], bool],
        budget: _ClaimBudget,
    ) -> list[dict[str, Any]]:
        """Claim every occurrence of one job inside the window (a fast rate may have several)."""
        now = self._clock.now_ms()
        try:
            job = load_job(item)
        except InvalidJob as exc:
            if mark_invalid(self._store, self._telemetry, item, exc.reasons, now, item_hash(item)):
                result.invalid += 1
            return []
        if item.get("def_hash") != job.definition.definition_hash():
            # Changed by a person and not yet seen by the registrar: claiming now would use the
            # old timing with the new definition. The registrar will recompute it.
            result.deferred += 1
            self._telemetry.event(
                "claim.deferred", item["job_id"], reason="definition changed, awaiting registrar"
            )
            return []
        claimed: list[dict[str, Any]] = []
        snapshot = job.definition.to_item()
        refreshed = False
        while "next_run_at" in item and item["next_run_at"] <= window_to:
            occurrence = int(item["next_run_at"])
            if is_overdue(occurrence, now, job.definition.misfire.grace_seconds, self._cfg):
                break  # the miss detector owns it, under the job's misfire policy
            if out_of_time() or not budget.take():
                result.stopped_early = True
                result.backlog += 1
                break
            following = job.schedule.next_after(ms_to_dt(occurrence))
            next_occurrence = dt_to_ms(following) if following is not None else None
            run_id = run_id_for(item["job_id"], occurrence)
            ops, run = claim_ops(item, snapshot, run_id, occurrence, next_occurrence, now, self._cfg)
            try:
                self._store.write(ops)
            except ConditionFailed as lost:
                if lost.op_index == 1:
                    # The run exists (claimed before a person re-put the job): move on, don't run twice.
                    result.duplicates += 1
                    self._telemetry.event("claim.duplicate_occurrence", run_id)
                    try:
                        self._store.write(advance_only_ops(item, occurrence, next_occurrence, now, self._cfg))
                    except (ConditionFailed, TransientStoreError):
                        return claimed  # a racer moved the job; the next tick reads it afresh
                    item = _advanced(item, occurrence, next_occurrence)
                    continue
                elif not refreshed:
                    # Our index read was stale: read the job itself once and carry on from there.
                    refreshed = True
                    fresh = self._store.get(JOBS, {"job_id": item["job_id"]})
                    if fresh is None or fresh.get("status") != "active":
                        return claimed
                    item = fresh
                    continue
                else:
                    result.conflicts += 1
                    self._telemetry.event("claim.lost", run_id, failed=lost.label)
                    return claimed
            except TransientStoreError:
                # The claim may or may not have happened. If the run exists it is pending with its
                # dispatch lease, and sending it (perhaps a second time) is safe: a worker starts a
                # run only with its current token. Otherwise the next tick claims it.
                existing = self._store.get(RUNS, {"run_id": run_id})
                if existing is not None and existing.get("status") == "pending":
                    claimed.append(existing)
                return claimed
            else:
                result.claimed += 1
                lag = now - occurrence
                result.lag_ms.append(max(0, lag))
                self._telemetry.event(
                    "run.claimed", run_id, job_id=item["job_id"], scheduled_at=occurrence, lag_ms=lag
                )
                claimed.append(run)
                item = _advanced(item, occurrence, next_occurrence)
        return claimed


def _advanced(item: dict[str, Any], occurrence: int, next_occurrence: int | None) -> dict[str, Any]:
    """The job as our successful advance left it, so the next claim in this tick needs no read."""
    item = {**item, "version": item["version"] + 1, "last_scheduled_at": occurrence}
    if next_occurrence is None:
        item.pop("next_run_at", None)
    else:
        item["next_run_at"] = next_occurrence
    return item
