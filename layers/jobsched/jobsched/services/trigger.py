"""The trigger tick: find due occurrences in the next-run index, claim each once, dispatch.

Safe under repetition: the claim is a transaction that creates the occurrence's run (its id is
deterministic, ``attribute_not_exists``) and advances the job's state item (``version`` as
read), so duplicate or concurrent ticks claim each occurrence at most once. A tick that dies after
claiming and before sending leaves pending runs whose dispatch lease lapses; the miss detector
redispatches them.

One job never holds up another: each job's claims run in isolation. A job that fails (a bug, an
unexpected error) is logged with its id and the reason, counted in ``JobErrors`` and left due for
the next tick; a transient store error is retried for that job alone; every other job proceeds.
"""

from __future__ import annotations

import itertools
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from jobsched.core.claim_shape import ClaimShape, DeployedShape, job_shape
from jobsched.core.clock import Clock, dt_to_ms, ms_to_dt
from jobsched.core.config import SchedulerConfig
from jobsched.core.errors import ConditionFailed, StoreError, Throttled, TransientStoreError
from jobsched.core.run import RunKind, RunStatus, run_id_for, run_key
from jobsched.core.state import JobStatus
from jobsched.core.timing import is_overdue
from jobsched.core.transitions import advance_op, claim_ops, new_run_item, runs_claimed
from jobsched.core.writes import RUNS, STATE, Item
from jobsched.ports import Store, Telemetry, WorkQueue
from jobsched.services.definitions import Definitions
from jobsched.services.dispatch import Dispatcher
from jobsched.services.head_trigger import HeadClaims, TakenHeads
from jobsched.services.loaded_job import LoadedJob, load_job
from jobsched.services.paging import merge_oldest_first, shard_pages
from jobsched.services.registrar import Registrar
from jobsched.services.results import Counters

SEND_BATCH = 10
# A tick claims everything due in its window, so it reads large pages: fewer round trips per
# tick (DynamoDB still caps a page at 1 MB, about 2,500 state items). With many shards a page is
# smaller, so that one page per shard fits paging.HELD_ITEMS_BUDGET (memory bounded, issue 18).
DUE_PAGE_SIZE = 1000
SENDERS = 4
BACKLOG_COUNT_LIMIT = 10_000
# Reads of a job's state after a lost claim, and attempts after a transient error, per job per tick.
REFRESHES = 2
TRANSIENT_TRIES = 3


@dataclass
class TickResult(Counters):
    claimed: int = 0
    dispatched: int = 0
    dispatch_failed: int = 0
    conflicts: int = 0
    duplicates: int = 0
    deferred: int = 0
    throttled: int = 0
    transient: int = 0
    job_errors: int = 0
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


@dataclass
class _Tick:
    """One tick's shared context, handed to each job's claims."""

    invocation_id: str
    now: int
    window_to: int
    budget: _ClaimBudget
    out_of_time: Callable[[], bool]
    taken: TakenHeads = field(default_factory=TakenHeads)  # the successor claim's heads (head_trigger)


class _Claimed(list[Item]):
    """One job's claimed runs to send, and the runs already counted as claimed (a claim retried
    after a lost advance finds its own run again and counts it once)."""

    def __init__(self) -> None:
        super().__init__()
        self.counted: set[str] = set()


class _Lost(Exception):
    """A claim's advance lost to a racer (or its outcome is unknown): read the job again."""


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
        registrar: Registrar | None = None,
        claimer_id: str | None = None,
        read_claim_shape: bool = False,
        deployed: DeployedShape | None = None,
    ) -> None:
        self._store = store
        # The stack's claim indexes (template.yaml's ClaimShape, runtime/wiring.py passes
        # ``Settings.claim_shape``). Not given: ``read_claim_shape`` says migrating (the switch is
        # read) or legacy (exactly today's calls: a benchmark, a simulation of today's stack).
        if deployed is None:
            deployed = DeployedShape.MIGRATING if read_claim_shape else DeployedShape.LEGACY
        self._deployed = deployed
        # Names this trigger's claims (with the invocation and the occurrence), so that a write
        # retried after its first attempt landed is recognised as its own, and a racer's is not.
        self._claimer_id = claimer_id or uuid.uuid4().hex[:12]
        self._telemetry = telemetry
        self._clock = clock
        self._cfg = cfg
        self._dispatcher = Dispatcher(queue, telemetry, clock, Definitions(store, cfg))
        self._registrar = registrar or Registrar(
            store, telemetry, clock, cfg, queue, report=False, deployed=deployed
        )
        self._parallel = parallel_queries
        # Sequential queries and claims make a tick fully deterministic (the chaos simulation and
        # tests ask for parallel_queries=False); Lambda uses the configured concurrency.
        if claim_concurrency is None:
            claim_concurrency = cfg.claim_concurrency if parallel_queries else 1
        self._claim_concurrency = claim_concurrency
        # The successor claim (issue 37): from the first tick on a stack deployed ``successor``;
        # on a ``migrating`` one only with the stack's switch on, read once per invocation
        # (runtime/wiring.py); never on a ``legacy`` one.
        self._heads = HeadClaims(
            store, telemetry, cfg, self._claimer_id, self._registrar.apply, deployed=deployed
        )

    # --- the tick ------------------------------------------------------------------------------

    def tick(
        self, invocation_id: str, deadline_ms: int | None = None, shards: Sequence[int] | None = None
    ) -> TickResult:
        """Claim what is due in ``shards`` of the next-run index (None: every shard; a trigger
        group's invocation passes its own, services/fanout.py)."""
        now = self._clock.now_ms()
        window_from = now - self._cfg.trigger_lookback_seconds * 1000
        window_to = now + self._cfg.lookahead_seconds * 1000
        self._telemetry.event("tick.started", invocation_id, window_from=window_from, window_to=window_to)

        def out_of_time() -> bool:
            if deadline_ms is None:
                return False
            return self._clock.now_ms() >= deadline_ms - self._cfg.deadline_margin_ms

        tick = _Tick(invocation_id, now, window_to, _ClaimBudget(self._cfg.max_claims_per_tick), out_of_time)
        result = TickResult()
        successor = self._heads.stack_shape(invocation_id) is ClaimShape.SUCCESSOR
        # A stack deployed ``successor`` has no next-run index: its legacy states (a stack
        # deployed so over unconverted ones) are the reconcile pass's to convert.
        no_next_run = self._deployed is DeployedShape.SUCCESSOR
        due = iter(()) if no_next_run else self._due_jobs(window_from, window_to, result, shards)
        with _Sender(self._dispatcher, result, parallel=self._claim_concurrency > 1) as sender:
            # With the switch on, a legacy state met in next-run is converted and its head
            # claimed (head_trigger.py), then the heads in the due index are claimed.
            self._claim_all(due, tick, result, sender, self._convert_isolated if successor else None)
            if successor:
                heads = self._heads.due_heads(
                    window_from, window_to, _on_throttle(result), self._parallel, DUE_PAGE_SIZE, shards
                )
                self._claim_all(heads, tick, result, sender, self._claim_head_isolated)
        self._telemetry.metric("Claims", result.claimed)
        self._telemetry.metric("ClaimConflicts", result.conflicts)
        self._telemetry.metric("Backlog", result.backlog)
        if result.job_errors:
            self._telemetry.metric("JobErrors", result.job_errors)
        if result.lag_ms:
            self._telemetry.metric("ScheduleLag", max(result.lag_ms), "Milliseconds")
        self._telemetry.event("tick.finished", invocation_id, **result.summary())
        return result

    def claim_now(self, job_id: str, invocation_id: str) -> TickResult:
        """Claim one job's occurrences in the lookahead window now, as a tick would: the
        registrar calls this right after it (re)schedules a job, so that an occurrence due before
        the next tick is claimed and sent on time (issue 16; docs/design.md, "First
        occurrences"). Racing a tick is safe: both claim through the same conditional writes."""
        now = self._clock.now_ms()
        result = TickResult()
        state = self._read_state(job_id, successor_too=True)
        if state is not None and job_shape(state, ClaimShape.LEGACY) is ClaimShape.SUCCESSOR:
            return self._claim_head_now(job_id, invocation_id, now)
        if state is not None and self._deployed is DeployedShape.SUCCESSOR:
            return self._convert_now(state, invocation_id, now)
        if state is None or int(state["next_run_at"]) > now + self._cfg.lookahead_seconds * 1000:
            return result  # nothing a tick would claim now
        tick = _Tick(
            invocation_id,
            now,
            now + self._cfg.lookahead_seconds * 1000,
            _ClaimBudget(self._cfg.max_claims_per_tick),
            lambda: False,
        )
        with _Sender(self._dispatcher, result, parallel=False) as sender:
            sender.collect(*self._claim_isolated(state, tick))
        if result.claimed:
            self._telemetry.metric("EarlyClaims", result.claimed)
            self._telemetry.event("claim.early", job_id, **result.summary())
        return result

    def _claim_head_now(self, job_id: str, invocation_id: str, now: int) -> TickResult:
        """``claim_now`` for a job of the successor claim: its head (HC12), as a tick would."""
        result = TickResult()
        window_to = now + self._cfg.lookahead_seconds * 1000
        budget = _ClaimBudget(self._cfg.max_claims_per_tick)
        tick = _Tick(invocation_id, now, window_to, budget, lambda: False)
        with _Sender(self._dispatcher, result, parallel=False) as sender:
            sender.collect(*result_of(self._heads.claim_job_now, job_id, tick))
        if result.claimed:
            self._telemetry.metric("EarlyClaims", result.claimed)
            self._telemetry.event("claim.early", job_id, **result.summary())
        return result

    def _convert_now(self, state: Item, invocation_id: str, now: int) -> TickResult:
        """``claim_now`` for a legacy state on a stack deployed ``successor`` (no next-run to claim
        it from): converted and its head claimed, as a tick on a migrating stack does."""
        result = TickResult()
        window_to = now + self._cfg.lookahead_seconds * 1000
        budget = _ClaimBudget(self._cfg.max_claims_per_tick)
        tick = _Tick(invocation_id, now, window_to, budget, lambda: False)
        with _Sender(self._dispatcher, result, parallel=False) as sender:
            sender.collect(*self._convert_isolated(state, tick))
        return result

    def _convert_isolated(self, state: Item, tick: _Tick) -> tuple[TickResult, list[Item]]:
        return result_of(self._heads.convert_and_claim, state, tick)

    def _claim_head_isolated(self, entry: Item, tick: _Tick) -> tuple[TickResult, list[Item]]:
        return result_of(self._heads.claim_entry, entry, tick)

    def _claim_all(
        self,
        due: Iterator[Item],
        tick: _Tick,
        result: TickResult,
        sender: _Sender,
        claim: Callable[[Item, _Tick], tuple[TickResult, list[Item]]] | None = None,
    ) -> None:
        """Claim every due job, ``claim_concurrency`` at a time; each job's claims stay in order
        (its next occurrence depends on its last), different jobs are independent. ``claim``: one
        item's claims (default: a legacy state's, ``_claim_isolated``)."""
        claim = claim or self._claim_isolated

        def stop_here() -> bool:
            if tick.budget.exhausted() or tick.out_of_time():
                result.stopped_early = True
                # Counting what is left reads more pages; stop counting at a bound (a lower bound
                # is what the Backlog alarm needs).
                result.backlog += 1 + sum(1 for _ in itertools.islice(due, BACKLOG_COUNT_LIMIT))
                return True
            return False

        if self._claim_concurrency <= 1:
            for state in due:
                if stop_here():
                    break
                sender.collect(*claim(state, tick))
            return
        with ThreadPoolExecutor(max_workers=self._claim_concurrency) as pool:
            in_flight: set[Future[tuple[TickResult, list[Item]]]] = set()
            for state in due:
                if stop_here():
                    break
                in_flight.add(pool.submit(claim, state, tick))
                if len(in_flight) >= 2 * self._claim_concurrency:
                    finished, in_flight = wait(in_flight, return_when=FIRST_COMPLETED)
                    for future in finished:
                        sender.collect(*future.result())
            for future in in_flight:
                sender.collect(*future.result())

    def _due_jobs(
        self, window_from: int, window_to: int, result: TickResult, shards: Sequence[int] | None
    ) -> Iterator[Item]:
        """The shards' due jobs merged oldest first; each shard is paged lazily."""

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
            shards,
        )
        return merge_oldest_first("next-run", firsts)

    # --- one job -------------------------------------------------------------------------------

    def _claim_isolated(self, state: Item, tick: _Tick) -> tuple[TickResult, list[Item]]:
        """One job's claims, isolated: whatever happens to this job, the tick goes on."""
        local = TickResult()
        claimed = _Claimed()
        job_id = str(state.get("job_id"))
        for attempt in range(TRANSIENT_TRIES):
            try:
                if attempt:
                    # After an unknown outcome (a timeout, a lost response): read the job again
                    # and go on from where it stands. A claim that did land is recognised as
                    # this tick's own (claimed_by).
                    fresh = self._read_state(job_id)
                    if fresh is None:
                        break
                    state = fresh
                self._claim_job(state, tick, local, claimed)
                break
            except Throttled:
                local.throttled += 1  # the job stays due; the next tick picks it up
                break
            except TransientStoreError as exc:
                local.transient += 1
                self._telemetry.event("claim.transient", job_id, attempt=attempt + 1, error=str(exc)[:300])
            except Exception as exc:  # one job's bug must not stop the others
                local.job_errors += 1
                self._telemetry.event(
                    "job.error", job_id, actor="trigger", error=f"{type(exc).__name__}: {exc}"[:500]
                )
                break
        return local, claimed

    def _claim_job(self, state: Item, tick: _Tick, result: TickResult, claimed: _Claimed) -> None:
        """Claim every occurrence of one job inside the window (a fast rate may have several).
        After a lost claim the job is read again and everything is derived afresh from it: its
        schedule and definition may have changed (a change takes effect from its next
        occurrence, and only with the definition it was registered with)."""
        for _ in range(REFRESHES + 1):
            job = load_job(self._store, state, self._registrar.apply)
            if job is None:
                # The job item changed and the registrar (inline) has just applied it: claim from
                # the state it left, in this tick, so that a new first occurrence is not left
                # waiting a tick period (issue 16). No state, or the same one: defer.
                fresh = self._read_state(str(state["job_id"]))
                if fresh is not None and fresh.get("version") != state.get("version"):
                    state = fresh
                    continue
                result.deferred += 1
                self._telemetry.event("claim.deferred", str(state["job_id"]), reason="job item changed")
                return
            try:
                self._claim_occurrences(job, tick, result, claimed)
                return
            except _Lost:
                fresh = self._read_state(str(state["job_id"]))
                if fresh is None:
                    return
                state = fresh
        result.conflicts += 1
        self._telemetry.event("claim.lost", str(state["job_id"]))

    def _read_state(self, job_id: str, successor_too: bool = False) -> Item | None:
        """The job's state if it is active and in next-run; ``successor_too``: or active under the
        successor claim (its position is its head)."""
        state = self._store.get(STATE, {"job_id": job_id})
        if state is None or state.get("status") != JobStatus.ACTIVE.value:
            return None
        if "next_run_at" not in state and not (successor_too and "epoch" in state):
            return None
        return state

    def _claim_occurrences(self, job: LoadedJob, tick: _Tick, result: TickResult, claimed: _Claimed) -> None:
        state = job.state
        grace = job.definition.misfire.grace_seconds
        while "next_run_at" in state and state["next_run_at"] <= tick.window_to:
            occurrence = int(state["next_run_at"])
            if is_overdue(occurrence, tick.now, grace, self._cfg):
                return  # the miss detector owns it, under the job's misfire policy
            if tick.out_of_time() or not tick.budget.take():
                result.stopped_early = True
                result.backlog += 1
                return
            following = job.schedule.next_after(ms_to_dt(occurrence))
            next_occurrence = dt_to_ms(following) if following is not None else None
            following_ms = next_occurrence
            limit = job.definition.max_runs
            if limit is not None and runs_claimed(state) + 1 >= limit:
                next_occurrence = None  # this is the job's last scheduled run: it finishes with it
            latest = self._claim_one(
                job, state, occurrence, next_occurrence, tick, result, claimed, following_ms
            )
            if latest is None:
                next_occurrence = following_ms  # moved past a backfill's record: nothing counted
            state = _advanced(state, occurrence, next_occurrence, latest, count=limit is not None)

    def _claim_one(
        self,
        job: LoadedJob,
        state: Item,
        occurrence: int,
        next_occurrence: int | None,
        tick: _Tick,
        result: TickResult,
        claimed: _Claimed,
        following_ms: int | None = None,
    ) -> str | None:
        """Claim one occurrence: one transaction makes its run, links it behind the chain's end
        and moves the job past it (``claim_ops``). Once it lands the run is the chain's end and is
        sent. Raises ``_Lost`` when the job's state moved under us (a racer, a change, a stale
        index page): the caller reads the job again and derives everything afresh. Returns the
        run the job's chain now ends with, or None when the job moved on without a new run."""
        run_id = run_id_for(job.definition.job_id, occurrence)
        # Tags the claim as this tick's own: a write retried after its first attempt landed (a
        # lost response) fails its condition, and the tag tells that from a racer's claim.
        claimed_by = f"{self._claimer_id}/{tick.invocation_id}/{occurrence}"
        run = new_run_item(
            job.definition.job_id,
            run_id,
            occurrence,
            job.snapshot,
            job.def_hash,
            RunKind.SCHEDULED,
            tick.now,
            self._cfg,
            claimed_by=claimed_by,
            after_run_id=state.get("latest_run_id"),
        )
        try:
            count = job.definition.max_runs is not None
            self._store.write(claim_ops(state, run, next_occurrence, tick.now, count=count))
        except (ConditionFailed, TransientStoreError) as lost:
            existing = self._store.get(RUNS, run_key(run_id))
            if existing is not None and existing.get("claimed_by") == claimed_by:
                run = existing  # our own transaction landed; its response was lost
            elif isinstance(lost, TransientStoreError):
                raise  # nothing of ours landed: the job is claimed again after a re-read
            elif existing is not None and lost.op_index == 0:
                self._advance_past_record(state, occurrence, following_ms, tick, result)
                return None
            else:
                raise _Lost() from lost
        if run_id not in claimed.counted:
            claimed.counted.add(run_id)
            self._count_claim(run, tick, result)
        self._send(run, job, claimed)
        return run_id

    def _advance_past_record(
        self, state: Item, occurrence: int, next_occurrence: int | None, tick: _Tick, result: TickResult
    ) -> None:
        """The occurrence has a record already (a backfill of it made one and joined the chain
        then): move the job past it without a second run. Conditional on the state as read, so
        a change made meanwhile makes this claim read again."""
        try:
            self._store.update(advance_op(state, occurrence, next_occurrence, tick.now))
        except ConditionFailed as moved:
            raise _Lost() from moved
        result.duplicates += 1
        self._telemetry.event("claim.duplicate_occurrence", run_id_for(str(state["job_id"]), occurrence))

    def _send(self, run: Item, job: LoadedJob, claimed: list[Item]) -> None:
        """Send the claimed run once per tick. The message carries the definition when it is the
        one at hand; else the dispatcher reads the run's own back by its digest."""
        if run.get("status") != RunStatus.PENDING.value or any(r["run_id"] == run["run_id"] for r in claimed):
            return
        definition = {"definition": job.snapshot} if run.get("def_hash") == job.def_hash else {}
        claimed.append({**run, **definition})

    def _count_claim(self, run: Item, tick: _Tick, result: TickResult) -> None:
        result.claimed += 1
        lag = tick.now - int(run["scheduled_at"])
        result.lag_ms.append(max(0, lag))
        self._telemetry.event(
            "run.claimed", run["run_id"], job_id=run["job_id"], scheduled_at=run["scheduled_at"], lag_ms=lag
        )


class _Sender:
    """Sends claimed runs a full batch at a time as claims complete, so that the first runs of a
    big tick are on their way while the rest are still being claimed. With parallel claimers,
    batches go out on a few sender threads too: one sender at ~10 ms a batch would cap a tick
    near 1,000 runs/s however fast the claims are."""

    def __init__(self, dispatcher: Dispatcher, result: TickResult, parallel: bool) -> None:
        self._dispatcher = dispatcher
        self._result = result
        self._pending: list[Item] = []
        self._pool = ThreadPoolExecutor(max_workers=SENDERS) if parallel else None
        self._sends: list[tuple[int, Future[int]]] = []

    def __enter__(self) -> _Sender:
        return self

    def collect(self, local: TickResult, runs: list[Item]) -> None:
        self._result.merge(local)
        self._pending.extend(runs)
        while len(self._pending) >= SEND_BATCH:
            self._send(self._pending[:SEND_BATCH])
            del self._pending[:SEND_BATCH]

    def _send(self, batch: list[Item]) -> None:
        if self._pool is None:
            self._count(len(batch), self._dispatcher.dispatch(batch))
        else:
            self._sends.append((len(batch), self._pool.submit(self._dispatcher.dispatch, batch)))

    def _count(self, size: int, unsent: int) -> None:
        self._result.dispatch_failed += unsent
        self._result.dispatched += size - unsent

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        try:
            if exc_type is None and self._pending:
                self._send(self._pending)  # what was claimed is still sent when the tick stops
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True)  # also when the tick dies: no thread left behind
        if exc_type is None:
            for size, sent in self._sends:
                self._count(size, sent.result())


def result_of(
    claims: Callable[[Any, _Tick, TickResult], list[Item]], item: Any, tick: _Tick
) -> tuple[TickResult, list[Item]]:
    """One item's claims (``HeadClaims``), as ``_Sender.collect`` takes them."""
    local = TickResult()
    return local, claims(item, tick, local)


def _on_throttle(result: TickResult) -> Callable[[StoreError], None]:
    def throttled(_: StoreError) -> None:
        result.throttled += 1  # this shard's rest waits for the next tick

    return throttled


def _advanced(
    state: Item, occurrence: int, next_occurrence: int | None, latest_run_id: str | None, count: bool = False
) -> dict[str, Any]:
    """The state as our successful advance left it, so the next claim in this tick needs no read."""
    state = {**state, "version": state["version"] + 1, "last_scheduled_at": occurrence}
    if latest_run_id is not None:
        state["latest_run_id"] = latest_run_id
        if count:
            state["runs_claimed"] = runs_claimed(state) + 1
    if next_occurrence is None:
        state.pop("next_run_at", None)
    else:
        state["next_run_at"] = next_occurrence
    return state
