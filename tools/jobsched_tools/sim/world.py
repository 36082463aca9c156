"""The simulated world: the real services as actors on a simulated clock, driven by one seeded RNG.

An event heap holds the next instant each actor acts (trigger ticks and detector runs every
minute, each running worker's next heartbeat or end); in between, the loop jumps the clock to the
next event or the next message becoming visible, so hours of simulated time take seconds.
Workers are driven step by step (begin, heartbeats, simulated handler, finish), never through
``Worker.execute``, which would use real threads and waits.
"""

from __future__ import annotations

import functools
import heapq
import inspect
import random
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple, TypeVar

from jobsched.core.clock import ManualClock, SkewedClock, ms_to_dt
from jobsched.core.config import SchedulerConfig
from jobsched.core.errors import QueueError, StoreError
from jobsched.core.job import OverlapPolicy, definition_digest
from jobsched.core.policies import UNFINISHED
from jobsched.core.run import MAX_RUN_ID_LENGTH, RunMessage, manual_run_id, run_key
from jobsched.core.transitions import snapshot_key
from jobsched.core.writes import JOBS, RUNS, STATE, Put, Update, not_exists
from jobsched.ports import Store
from jobsched.services.completion import asks_delete, finished_as_written
from jobsched.services.detector import MissDetector
from jobsched.services.messages import parse_run_message
from jobsched.services.operations import JobNotFound, Operations
from jobsched.services.registrar import Registrar
from jobsched.services.trigger import Trigger
from jobsched.services.worker import FENCED_OUT, HandlerResult, Started, Worker
from jobsched.targets.registry import HandlerRegistry

from jobsched_tools.sim.faults import (
    EFFECTS,
    REFUSING_DEAD_LETTER_QUEUE,
    FaultyStore,
    LeaseIndexedMemoryStore,
    SimCrash,
    SimDeadLetters,
    SimQueue,
)
from jobsched_tools.sim.invariants import all_items, check
from jobsched_tools.sim.report import ChaosReport, LogEntry
from jobsched_tools.sim.scenario import (
    KNOWN_TARGETS,
    ChaosConfig,
    FaultRates,
    SimJob,
    build_jobs,
    malformed,
    retimed,
    start_instant,
    windows,
)

T = TypeVar("T")
STREAM_RETRIES = 10  # the registrar's event source mapping's MaximumRetryAttempts (template.yaml)
TERMINAL_STATUSES = frozenset({"succeeded", "failed", "skipped", "missed", "cancelled"})
MINUTE = 60_000
DEAD_LETTER_QUEUE = "arn:aws:sqs:us-east-1:123456789012:sim-dead-letters"


class StreamRecord(NamedTuple):
    """A jobs-table stream record on its way to the registrar."""

    due: int  # when the registrar's poll sees it
    job_id: str
    created: int  # ApproximateCreationDateTime: the write's time, rounded down to the second
    image: dict[str, Any] | None  # NewImage: the item the write left (None: deleted)


class _NullLogger:
    def info(self, msg: object, *args: object, **kwargs: Any) -> None:
        pass

    warning = error = info


class SimTelemetry:
    """The services' telemetry, kept in the simulation's event log with the acting actor."""

    def __init__(self, world: World) -> None:
        self._world = world
        self.counts: Counter[str] = Counter()
        # (simulated ms, name, value) of every metric, for the dashboard picture (ops/dashboard.py)
        self.metrics: list[tuple[int, str, float]] = []

    def event(self, name: str, correlation_id: str, **fields: Any) -> None:
        self.counts[name] += 1
        if name == "job.error":
            self._world.job_errors.append((correlation_id, str(fields.get("error"))))
        if name in ("tick.started", "tick.finished", "detector.started", "detector.finished"):
            if name.endswith("finished") and any(fields.get(k) for k in ("claimed", "leases_recovered")):
                self._world.log(self._world.store.actor, name, correlation_id, _short(fields))
            return
        self._world.log(self._world.store.actor, name, correlation_id, _short(fields))

    def metric(self, name: str, value: float, unit: str = "Count") -> None:  # noqa: ARG002 (the port's signature)
        self.metrics.append((self._world.clock.now_ms(), name, value))


@dataclass
class Invocation:
    """One worker Lambda invocation for one message."""

    worker: Worker
    name: str
    message: RunMessage
    receipt: str
    job: SimJob
    started: Started | None = None
    began_at: int = 0  # base clock
    run_for: int = 0
    timed_out: bool = False
    crash_at: int | None = None
    pause_at: int | None = None
    pause_for: int = 0
    crash_after_effect: bool = False
    stall_at: int | None = None  # the worker freezes here (elapsed ms) ...
    stalled_until: int | None = None  # ... until this instant (base clock), then goes on


@dataclass(order=True)
class _Event:
    at: int
    seq: int
    action: Callable[[], None] = field(compare=False)


class World:
    def __init__(self, cfg: ChaosConfig, store: Store | None = None) -> None:
        self.cfg = cfg
        self.rng = random.Random(cfg.seed)
        rates = cfg.faults
        self.rates = rates
        self.start_ms = start_instant(self.rng)
        self.clock = ManualClock(self.start_ms)
        self.window_end = self.start_ms + int(cfg.hours * 3_600_000)
        self.end = self.window_end + cfg.drain_minutes * MINUTE
        self.counts: Counter[str] = Counter()
        self.entries: list[LogEntry] = []
        # The scenarios' fault coverage per seed (tests/sim, docs/chaos.md) was set at 8 shards;
        # the simulated triggers each claim every shard (trigger groups: test_trigger_fanout.py).
        self.sched_cfg = SchedulerConfig(shard_count=8, trigger_groups=1)
        inner = store if store is not None else LeaseIndexedMemoryStore(extra_keys={EFFECTS: ("pk",)})
        self.store = FaultyStore(inner, self.rng, rates, self.counts, self.clock, self.log)
        self.queue = SimQueue(self.clock, cfg.visibility_timeout_seconds, self.rng, rates, self.counts)
        self.telemetry = SimTelemetry(self)
        self.jobs = build_jobs(self.rng, cfg.jobs, self.start_ms, cfg.hours, rates.large_payload_jobs)
        # Dead letters (issue 38): their own generator, so the other draws stay as they were.
        self.dead_letters = SimDeadLetters(
            random.Random(cfg.seed * 7919 + 38), rates.dead_letter_send_failure
        )
        if rates.dead_letter_jobs:
            picks = random.Random(cfg.seed * 7919 + 39)
            refusing = random.Random(cfg.seed * 7919 + 40)  # its own: the picks stay as they were

            def queue() -> str:
                refuses = (
                    rates.dead_letter_queue_refuses and refusing.random() < rates.dead_letter_queue_refuses
                )
                return REFUSING_DEAD_LETTER_QUEUE if refuses else DEAD_LETTER_QUEUE

            self.jobs = [
                replace(
                    job,
                    definition=job.definition.model_copy(update={"dead_letter_queue_arn": queue()}),
                )
                if picks.random() < rates.dead_letter_jobs
                else job
                for job in self.jobs
            ]
        self.by_id = {job.definition.job_id: job for job in self.jobs}
        outage_len = (20 * MINUTE, 90 * MINUTE)
        self.outages = windows(self.rng, rates.trigger_outages, self.start_ms, self.window_end, *outage_len)
        self.overloads = windows(
            self.rng,
            rates.detector_overloads,
            self.start_ms,
            self.window_end,
            10 * MINUTE,
            30 * MINUTE,
            avoid=self.outages,
        )
        if rates.capacity_squeezes:  # drawn only when on: the other seeds' runs stay as they were
            self.store.squeezes = windows(
                self.rng, rates.capacity_squeezes, self.start_ms, self.window_end, 5 * MINUTE, 20 * MINUTE
            )
            self.counts["capacity_squeeze"] += len(self.store.squeezes)
        self.counts["trigger_outage"] += len(self.outages)
        self.counts["detector_overload"] += len(self.overloads)

        def skewed(name: str) -> SkewedClock:
            skew = self.rng.randint(-rates.clock_skew_max_ms, rates.clock_skew_max_ms)
            if skew:
                self.counts["clock_skew"] += 1
                self.log("setup", "fault.clock_skew", name, f"{skew} ms")
            return SkewedClock(self.clock, skew)

        # One claimer thread where the trigger offers parallel claims: no thread nondeterminism.
        serial: dict[str, Any] = (
            {"claim_concurrency": 1} if "claim_concurrency" in inspect.signature(Trigger).parameters else {}
        )
        self.triggers = [
            Trigger(
                self.store,
                self.queue,
                self.telemetry,
                skewed(f"trigger-{n}"),
                self.sched_cfg,
                False,
                **serial,
            )
            for n in "AB"
        ]
        detector_clock = skewed("detector")
        # Sequential index reads, as for the trigger: faults land in a reproducible order.
        self.detector = MissDetector(
            self.store,
            self.queue,
            self.telemetry,
            detector_clock,
            self.sched_cfg,
            parallel_queries=False,
            dead_letter_sender=self.dead_letters,
        )
        tiny = self.sched_cfg.model_copy(update={"detector_max_items": 2})
        self.overloaded_detector = MissDetector(
            self.store,
            self.queue,
            self.telemetry,
            detector_clock,
            tiny,
            parallel_queries=False,
            dead_letter_sender=self.dead_letters,
        )
        registry = HandlerRegistry()
        registry.add("sim.effect", lambda _ctx: None)  # never called: handlers are simulated
        self.workers = [
            Worker(
                self.store,
                self.queue,
                self.telemetry,
                skewed(f"worker-{n}"),
                self.sched_cfg,
                registry,
                f"worker-{n}",
                logger_for=lambda _run_id: _NullLogger(),
                rng=random.Random(self.rng.random()),
                dead_letter_sender=self.dead_letters,
            )
            for n in range(cfg.workers)
        ]
        self.ops = Operations(self.store, self.queue, self.telemetry, self.clock, self.sched_cfg)
        # The registrar function, fed by the jobs table's stream (simulated below): it knows the
        # deployment's handlers, so an item naming another target is invalid.
        # It claims a changed job's first occurrences a tick would reach late (issue 16), racing
        # the ticks through the same conditions.
        early = Trigger(self.store, self.queue, self.telemetry, self.clock, self.sched_cfg, False, **serial)
        self.registrar = Registrar(
            self.store,
            self.telemetry,
            self.clock,
            self.sched_cfg,
            self.queue,
            known_targets=KNOWN_TARGETS,
            claim_now=lambda job_id: early.claim_now(job_id, "registrar"),
        )
        # (deliverable at, job id, the record's time, the item the write left), in write order.
        self.stream: list[StreamRecord] = []
        self.late_stream: dict[str, list[StreamRecord]] = {}  # per job: records arriving late
        # Every write a person made to a job item: (when, the item after it, or None: deleted, and
        # when its stream record reaches the registrar, or None: lost).
        self.person_log: dict[str, list[tuple[int, dict[str, Any] | None, int | None]]] = {}
        # Every write to a job item, by anyone (a pause on failure, a delete after completion):
        # (when, the item's definition digest after it, or None: deleted).
        self.item_history: dict[str, list[tuple[int, str | None]]] = {}
        self.stream_failures = 0  # of the record at the head
        self.store.on_job_write = self._stream_record
        self.store.before_recovery = self._heartbeat_races_recovery
        self.store.after_mid_claim_crash = self._change_after_crash
        self.store.skew_bound_ms = 2 * rates.clock_skew_max_ms + 1000
        # What a person last wrote as each job's (valid) definition item.
        self.person_items = {job.definition.job_id: job.definition.to_item() for job in self.jobs}
        self.operated: set[str] = set()  # jobs a person changed during the run
        self.odd_keys: set[str] = set()  # job items a person keyed with a snapshot's key
        self.live: dict[str, Invocation] = {}  # started invocations, by run id
        self.registered_at: dict[str, int] = {}
        self._heap: list[_Event] = []
        self._seq = 0
        self._invocations = 0
        self.leases_recovered = 0
        self.outcomes: Counter[str] = Counter()
        self.unexpected: list[str] = []
        self.job_errors: list[tuple[str, str]] = []  # (job or run id, error) the services isolated

    # --- plumbing ------------------------------------------------------------------------------

    def log(self, actor: str, what: str, key: str, detail: str = "") -> None:
        self.entries.append(LogEntry(self.clock.now_ms(), actor, what, key, detail))

    def at(self, when: int, action: Callable[[], None]) -> None:
        self._seq += 1
        heapq.heappush(self._heap, _Event(max(when, self.clock.now_ms()), self._seq, action))

    @property
    def faults_on(self) -> bool:
        return self.clock.now_ms() < self.window_end

    def roll(self, kind: str, rate: float, key: str = "") -> bool:
        if self.faults_on and rate > 0 and self.rng.random() < rate:
            self.counts[kind] += 1
            self.log(self.store.actor, f"fault.{kind}", key)
            return True
        return False

    @contextmanager
    def acting(self, actor: str) -> Iterator[None]:
        previous, self.store.actor = self.store.actor, actor
        try:
            yield
        finally:
            self.store.actor = previous

    def call(self, actor: str, fn: Callable[[], T], key: str = "") -> tuple[bool, T | None]:
        """Run one actor step. A crash or a store/queue error ends the invocation (as it would
        fail the Lambda); any other exception is a bug the simulation reports."""
        with self.acting(actor):
            try:
                return True, fn()
            except SimCrash as crash:
                self.log(actor, "crashed", key, str(crash))
            except (StoreError, QueueError) as error:
                self.log(actor, "invocation.failed", key, f"{type(error).__name__}: {error}")
            except Exception as error:  # reported as a violation, with the trace
                self.log(actor, "invocation.exception", key, f"{type(error).__name__}: {error}")
                self.unexpected.append(
                    f"unexpected_exception {key}: {actor}: {type(error).__name__}: {error}"
                )
        return False, None

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
        report = check(self)
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
        open_runs = any(
            r["scheduled_at"] <= self.window_end and r.get("status") not in TERMINAL_STATUSES for r in runs
        )
        behind = any(j.get("status") == "active" and j.get("next_run_at", 0) <= self.window_end for j in jobs)
        # A dead letter still owed is paid by the detector's next look (its check_at, at most a
        # minute on): a run that failed just before the drain's check would otherwise end the
        # drain with its debt open (issue 38).
        owed = any(r.get("dead_letter") == "pending" and r["scheduled_at"] <= self.window_end for r in runs)
        if open_runs or behind or owed or self._completions_pending(jobs, runs):
            self.at(self.clock.now_ms() + 5 * MINUTE, self._drain_check)
            return
        self.end = self.clock.now_ms()
        self.log("world", "drain.settled", "", "every occurrence of the window has settled")

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

    def _in(self, stretches: list[tuple[int, int]]) -> bool:
        now = self.clock.now_ms()
        return any(a <= now < b for a, b in stretches)

    # --- trigger and detector ------------------------------------------------------------------

    def _tick(self) -> None:
        minute = self.clock.now_ms() // MINUTE
        self.at((minute + 1) * MINUTE + self.rng.randrange(2000), self._tick)
        if self._in(self.outages):
            return
        invocations = 2 if self.roll("trigger_duplicate", self.rates.trigger_duplicate) else 1
        for n in range(invocations):
            trigger = self.triggers[n]
            name = f"trigger-{'AB'[n]}"
            if self.roll("trigger_concurrent", self.rates.trigger_concurrent):
                self.store.interleave = lambda: self._interleaved_tick(minute)
            inside_claim: list[Callable[[str], None]] = []
            if self.roll("operator_manual_run", self.rates.operator_manual_run):
                inside_claim.append(self._manual_run)
            if self.roll("operator_change_mid_claim", self.rates.operator_change_mid_claim):
                inside_claim.append(self._change_mid_claim)
            if inside_claim:
                self.store.before_create = functools.partial(_each, tuple(inside_claim))
            crash = self.faults_on and self.rng.random() < self.rates.trigger_crash_before_send
            self.queue.crash_next_send = crash
            self.store.crash_after_create = (
                self.faults_on and self.rng.random() < self.rates.trigger_crash_mid_claim
            )
            self.call(name, functools.partial(trigger.tick, f"tick-{minute}-{n}"), f"tick-{minute}")
            self.queue.crash_next_send = False
            self.store.crash_after_create = False
            self.store.interleave = None
            self.store.before_create = None

    def _interleaved_tick(self, minute: int) -> None:
        crash, self.queue.crash_next_send = self.queue.crash_next_send, False
        trigger = self.triggers[1]
        self.call("trigger-C", lambda: trigger.tick(f"tick-{minute}-concurrent"), f"tick-{minute}")
        self.queue.crash_next_send = crash

    def _manual_run(self, job_id: str) -> None:
        """A person's `jobsched trigger`, landing inside a tick's claim of the same job."""
        request = f"person-{self.clock.now_ms()}"

        def run_now() -> object:
            try:
                return self.ops.trigger(job_id, request)
            except (ValueError, JobNotFound):
                return None  # the job is invalid or gone: the person reads the error

        ok, result = self.call("operator", run_now, job_id)
        if ok and result is not None:
            self.operated.add(job_id)
            self.log("operator", "operator_manual_run", job_id, str(result))

    def _change_mid_claim(self, job_id: str) -> None:
        """A person's change of the job a tick is claiming, applied by the registrar (a fast
        stream) after the tick read the job and before its claim makes the run."""
        self._operate(self.rng.choice(("operator_retime", "operator_pause", "operator_delete")), job_id)
        deliver = functools.partial(self.registrar.on_stream_record, "MODIFY", job_id, None)
        self.call("registrar", deliver, job_id)

    def _change_after_crash(self, job_id: str) -> None:
        """Half the time, a person changes the job whose claimer died after its claim and before
        sending it: the claimed run is in the chain, and runs once (the detector sends it)."""
        if self.rng.random() < 0.5:
            kind = self.rng.choice(("operator_retime", "operator_pause", "operator_delete"))
            when = self.clock.now_ms() + self.rng.randrange(1_000, 20_000)
            self.at(when, functools.partial(self._operate, kind, job_id))

    def _detect(self) -> None:
        minute = self.clock.now_ms() // MINUTE
        self.at((minute + 1) * MINUTE + 30_000 + self.rng.randrange(2000), self._detect)
        detector = self.overloaded_detector if self._in(self.overloads) else self.detector
        ok, result = self.call("detector", lambda: detector.run(f"detect-{minute}"), f"detect-{minute}")
        if ok and result is not None:
            self.leases_recovered += result.leases_recovered

    # --- workers -------------------------------------------------------------------------------

    def _poll(self) -> None:
        while True:
            batch = self.queue.receive(10)
            if not batch:
                return
            if len(batch) > 1 and self.roll("sqs_reorder", self.rates.sqs_reorder):
                self.rng.shuffle(batch)
            for receipt, body in batch:
                self._deliver(receipt, body)

    def _deliver(self, receipt: str, body: dict[str, Any]) -> None:
        message = parse_run_message(body)
        key = message.run_id
        if self.roll("sqs_delay", self.rates.sqs_delay, key):
            self.queue.change_visibility(receipt, self.rng.randrange(5, 120))
            return
        if self.roll("sqs_duplicate", self.rates.sqs_duplicate, key):
            self.queue.inject(body, self.rng.randrange(0, 60))
        if self.roll("worker_crash_before_start", self.rates.worker_crash_before_start, key):
            return  # never deleted: SQS delivers it again after the visibility timeout
        index = self.rng.randrange(len(self.workers))
        worker, name = self.workers[index], f"worker-{index}"
        job = self.by_id[message.job_id]
        inv = Invocation(worker, name, message, receipt, job)
        deadline = worker._clock.now_ms() + self.cfg.lambda_timeout_seconds * 1000
        self._invocations += 1
        ok, begun = self.call(name, lambda: worker.begin(message, deadline), key)
        if not ok:
            return
        if not isinstance(begun, Started):
            self.outcomes[str(begun)] += 1
            self.queue.delete(receipt)
            return
        inv.started = begun
        inv.began_at = self.clock.now_ms()
        if self.roll("worker_crash_after_start", self.rates.worker_crash_after_start, key):
            return
        self.live[key] = inv
        behaviour = job.behaviour
        duration = behaviour.duration_ms + self.rng.randrange(behaviour.jitter_ms)
        limit = min(
            job.definition.timeout_seconds * 1000,
            begun.deadline_ms - self.sched_cfg.deadline_margin_ms - begun.started_at,
        )
        inv.run_for = min(duration, limit)
        inv.timed_out = duration > limit
        if self.roll("worker_crash_mid_handler", self.rates.worker_crash_mid_handler, key):
            inv.crash_at = self.rng.randrange(inv.run_for + 1)
        elif self.roll("zombie_worker", self.rates.zombie_worker, key):
            inv.pause_at = self.rng.randrange(inv.run_for + 1)
            lease = self.sched_cfg.lease_seconds * 1000 + self.sched_cfg.clock_skew_allowance_ms
            inv.pause_for = self.rng.randrange(lease + 70_000, lease + 200_000)
        elif self.roll("worker_stall", self.rates.worker_stall, key):
            inv.stall_at = self.rng.randrange(inv.run_for + 1)
        elif self.rng.random() < self.rates.worker_crash_after_effect and self.faults_on:
            inv.crash_after_effect = True
        self._next_step(inv)

    def _next_step(self, inv: Invocation) -> None:
        hb = self.sched_cfg.heartbeat_seconds * 1000
        now = self.clock.now_ms()
        elapsed = now - inv.began_at
        targets = [elapsed + hb, inv.run_for]
        if inv.crash_at is not None:
            targets.append(inv.crash_at)
        if inv.pause_at is not None:
            targets.append(inv.pause_at)
        if inv.stall_at is not None:
            targets.append(inv.stall_at)
        self.at(inv.began_at + max(elapsed, min(targets)), lambda: self._step(inv))

    def _step(self, inv: Invocation) -> None:
        assert inv.started is not None
        started = inv.started
        key = inv.message.run_id
        elapsed = self.clock.now_ms() - inv.began_at
        if inv.crash_at is not None and elapsed >= inv.crash_at:
            self.log(inv.name, "crashed", key, "mid-handler")
            self._gone(inv)
            return
        if inv.pause_at is not None and elapsed >= inv.pause_at:
            self._gone(inv)
            self.log(inv.name, "zombie.paused", key, f"for {inv.pause_for} ms, token {started.token}")
            inv.pause_at = None
            self.at(self.clock.now_ms() + inv.pause_for, lambda: self._zombie_resume(inv))
            return
        now = self.clock.now_ms()
        if inv.stall_at is not None and elapsed >= inv.stall_at:
            # The whole invocation freezes (a long GC pause, a starved host) past its lease, then
            # goes on where it was: its first act is the heartbeat that is now late.
            inv.stall_at = None
            stall = self.sched_cfg.lease_seconds * 1000 + self.sched_cfg.clock_skew_allowance_ms
            stall += self.rng.randrange(2_000, 20_000)
            inv.stalled_until = now + stall
            inv.run_for += stall
            self.log(inv.name, "worker.stalled", key, f"for {stall} ms")
            self.at(inv.stalled_until, lambda: self._step(inv))
            return
        if inv.stalled_until is not None and now < inv.stalled_until:
            return  # frozen (an interleaved late heartbeat may have ended it early: see below)
        inv.stalled_until = None
        if elapsed >= inv.run_for:
            self._complete(inv)
            return
        if self.roll("worker_crash_in_heartbeat", self.rates.worker_crash_in_heartbeat, key):
            self.store.heartbeat_crash = self.rng.choice(["before", "after"])
        ok, alive = self._heartbeat(inv, started, key)
        self.store.heartbeat_crash = None
        if not ok:
            self._gone(inv)
            return
        if not alive:
            self._finish(inv, FENCED_OUT)
            return
        if started.context.cancelled.is_set():
            # cancel_other: a newer run asked this one to stop; the simulated handler honours
            # ctx.cancelled and returns at once (a failure: it did not finish its work).
            self.counts["cancel_other_stop"] += 1
            self._finish(inv, HandlerResult(False, "stopped: ctx.cancelled"))
            return
        self._next_step(inv)

    def _heartbeat(self, inv: Invocation, started: Started, run_id: str) -> tuple[bool, bool | None]:
        """The worker's heartbeat, and the promise it keeps: a stale holder (its run recovered,
        perhaps started again by another attempt) never renews the lease (design.md, The
        writes: heartbeat): a heartbeat lands only on its own attempt, running, at its token."""
        before = self.store.inner.get(RUNS, run_key(run_id)) or {}
        own = (before.get("status"), before.get("version"), before.get("owner")) == (
            "running",
            started.token,
            started.owner,
        )
        result = self.call(inv.name, lambda: inv.worker.heartbeat(started), run_id)
        after = self.store.inner.get(RUNS, run_key(run_id)) or {}
        if not own and after.get("heartbeat_at") != before.get("heartbeat_at"):
            self.store._violate(
                "stale_heartbeat",
                run_id,
                f"{inv.name}'s heartbeat at token {started.token} landed on the run "
                f"{before.get('status')} at version {before.get('version')}, owner {before.get('owner')}",
            )
        return result

    def _zombie_resume(self, inv: Invocation) -> None:
        """The paused worker wakes up and, believing its handler done, commits straight away
        (``zombie_fails``: its handler failed, and it writes the retry or the failure)."""
        run_id = inv.message.run_id
        if self.roll("zombie_fails", self.rates.zombie_fails, run_id):
            self.log(inv.name, "zombie.resumed", run_id, "its handler failed: retries without a heartbeat")
            self._finish(inv, HandlerResult(False, "simulated handler failure (a zombie's)"), zombie=True)
            return
        self.log(inv.name, "zombie.resumed", run_id, "commits without a heartbeat")
        self._finish(inv, self._result(inv, force_ok=True), zombie=True)

    def _result(self, inv: Invocation, force_ok: bool = False) -> HandlerResult:
        assert inv.started is not None
        if inv.timed_out and not force_ok:
            return HandlerResult(False, f"timed out after {inv.job.definition.timeout_seconds} s")
        if not force_ok and self.rng.random() < inv.job.behaviour.fail_probability:
            return HandlerResult(False, "simulated handler failure")
        context = inv.started.context
        context.staged.clear()
        if inv.job.behaviour.effect == "counter":
            context.stage_update(EFFECTS, {"pk": inv.message.run_id}, add={"count": 1})
        else:
            context.stage_put(
                EFFECTS,
                {
                    "pk": f"{inv.message.run_id}#once",
                    "run_id": inv.message.run_id,
                    "token": context.fencing_token,
                },
                condition=(not_exists("pk", "the effect is applied once per occurrence"),),
            )
        return HandlerResult(True, staged=list(context.staged))

    def _complete(self, inv: Invocation) -> None:
        result = self._result(inv)
        if inv.crash_after_effect and result.ok:
            self._gone(inv)
            self.counts["worker_crash_after_effect"] += 1
            self.log(inv.name, "fault.worker_crash_after_effect", inv.message.run_id)
            return
        self._finish(inv, result)

    def _finish(self, inv: Invocation, result: HandlerResult, zombie: bool = False) -> None:
        assert inv.started is not None
        started = inv.started
        self._gone(inv)
        ok, outcome = self.call(inv.name, lambda: inv.worker.finish(started, result), inv.message.run_id)
        if not ok:
            return
        self.outcomes[("zombie_" if zombie else "") + str(outcome)] += 1
        if zombie:
            self.log(inv.name, "zombie.outcome", inv.message.run_id, str(outcome))
        self.queue.delete(inv.receipt)  # the invocation returned: Lambda deletes the message

    def _gone(self, inv: Invocation) -> None:
        if self.live.get(inv.message.run_id) is inv:
            del self.live[inv.message.run_id]

    def _heartbeat_races_recovery(self, run_id: str) -> None:
        """Called just before the detector's recovery write: a stalled worker's late heartbeat
        may land in between (the race the recovery's lease-as-read condition stops), or a newer
        run of a ``cancel_other`` job may ask the holder to stop (``_cancel_races_recovery``)."""
        self._cancel_races_recovery(run_id)
        inv = self.live.get(run_id)
        now = self.clock.now_ms()
        if inv is None or inv.started is None or inv.stalled_until is None or now >= inv.stalled_until:
            return
        if not self.roll("heartbeat_races_recovery", self.rates.heartbeat_races_recovery, run_id):
            return
        inv.stalled_until = None
        started = inv.started
        self._heartbeat(inv, started, run_id)

    def _cancel_races_recovery(self, run_id: str) -> None:
        """A person's manual run of a ``cancel_other`` job, delivered at once: its walk finds the
        holder still running (its lease lapsed, the recovery not landed yet) and parks behind it,
        asking it to stop, between the detector's read and its write (the race the recovery's
        no-cancel-request condition stops: issue 34 item 3)."""
        if self.rates.cancel_races_recovery <= 0:
            return  # no draw: the default run's random sequence stays as it was
        holder = self.store.inner.get(RUNS, run_key(run_id))
        job = self.by_id.get(str((holder or {}).get("job_id")))
        if holder is None or job is None or holder.get("status") != "running":
            return
        if job.definition.overlap is not OverlapPolicy.CANCEL_OTHER or "cancel_requested" in holder:
            return
        if not self.roll("cancel_races_recovery", self.rates.cancel_races_recovery, run_id):
            return
        self._manual_run(job.definition.job_id)
        self._poll()

    # --- the jobs table's stream and the registrar -------------------------------------------------

    def _stream_record(self, job_id: str) -> int | None:
        """A write to a job item: its stream record reaches the registrar after a short lag,
        with the write's time rounded down to the second (``ApproximateCreationDateTime``) and
        the item the write left (``NewImage``). Returns when it is due there (None: lost)."""
        now = self.clock.now_ms()
        image = self.store.inner.get(JOBS, {"job_id": job_id})
        digest = definition_digest(image) if image is not None else None
        self.item_history.setdefault(job_id, []).append((now, digest))
        if self.roll("stream_lost", self.rates.stream_lost, job_id):
            return None  # the registrar never sees it: the reconcile pass must (registration_converged)
        lag = self.rng.randrange(200, 2_000)
        if self.roll("stream_delay", self.rates.stream_delay, job_id):
            lag = self.rng.randrange(10_000, 120_000)
        record = StreamRecord(now + lag, job_id, now // 1000 * 1000, image)
        waiting = self.late_stream.get(job_id)
        if waiting or self.roll("stream_late", self.rates.stream_late, job_id):
            # Late (its shard is behind): after the reconcile pass, and before any later record of
            # the same job.
            due = max(now + self.rng.randrange(3 * MINUTE, 10 * MINUTE), waiting[-1].due if waiting else 0)
            self.late_stream.setdefault(job_id, []).append(record._replace(due=due))
            self.at(due, functools.partial(self._late_poll, job_id))
            return due
        self.stream.append(record)
        self.at(record.due, self._registrar_poll)
        return record.due

    def _late_poll(self, job_id: str) -> None:
        """A late job's records, in order, each retried until it lands (a failed record holds the
        ones behind it, as on a shard)."""
        waiting = self.late_stream.get(job_id, [])
        while waiting and waiting[0].due <= self.clock.now_ms():
            record = waiting[0]
            deliver = functools.partial(
                self.registrar.on_stream_record, "MODIFY", job_id, record.image, record.created
            )
            ok, _ = self.call("registrar", deliver, job_id)
            if not ok:
                self.at(self.clock.now_ms() + 5_000, functools.partial(self._late_poll, job_id))
                return
            waiting.pop(0)
        if not waiting:
            self.late_stream.pop(job_id, None)

    def _registrar_poll(self) -> None:
        """The event source mapping: records in order; a failed one is retried, in order, before
        any later one (a shard's iterator does not move past it)."""
        while self.stream and self.stream[0].due <= self.clock.now_ms():
            _, job_id, created, image = self.stream[0]
            deliver = functools.partial(self.registrar.on_stream_record, "MODIFY", job_id, image, created)
            ok, _ = self.call("registrar", deliver, job_id)
            if not ok:
                self.stream_failures += 1
                if self.stream_failures <= STREAM_RETRIES:
                    self.at(self.clock.now_ms() + 5_000, self._registrar_poll)
                    return
                # The mapping's MaximumRetryAttempts: the record goes to the failure queue and the
                # job's change is not applied; the reconcile pass must apply it (converged). In a
                # capacity squeeze that is the expected degradation; elsewhere only a bug gets
                # here (store faults are rare).
                if self._in(self.store.squeezes):
                    self.counts["stream_failed_in_squeeze"] += 1
                else:
                    self.unexpected.append(
                        f"registration_dropped {job_id}: registrar failed {STREAM_RETRIES + 1} times"
                    )
            self.stream_failures = 0
            self.stream.pop(0)
            if self.roll("stream_duplicate", self.rates.stream_duplicate, job_id):
                self.stream.insert(0, StreamRecord(self.clock.now_ms() + 1_000, job_id, created, image))
                self.at(self.clock.now_ms() + 1_000, self._registrar_poll)
                return

    # --- people -------------------------------------------------------------------------------------

    def _schedule_operators(self) -> None:
        """Every operator action of the run, at seeded instants in the window (none in its first
        ten and last twenty minutes), plus backfills just before each outage ends."""
        hours = self.cfg.hours
        begin, end = self.start_ms + 10 * MINUTE, self.window_end - 20 * MINUTE
        if end <= begin:
            return
        for kind in FaultRates.OPERATOR_ACTIONS:
            expected = float(getattr(self.rates, kind)) * len(self.jobs) * hours
            count = int(expected) + (1 if self.rng.random() < expected - int(expected) else 0)
            for _ in range(count):
                when = self.rng.randrange(begin, end)
                job_id = self.rng.choice(self.jobs).definition.job_id
                self.at(when, functools.partial(self._operate, kind, job_id))
        if self.rates.operator_odd_input > 0:  # drawn only when on: the other seeds' runs stay
            expected = self.rates.operator_odd_input * len(self.jobs) * hours
            count = int(expected) + (1 if self.rng.random() < expected - int(expected) else 0)
            for _ in range(count):
                when = self.rng.randrange(begin, end)
                job_id = self.rng.choice(self.jobs).definition.job_id
                self.at(when, functools.partial(self._operate, "operator_odd_input", job_id))
        if self.rates.operator_backfill > 0:
            for _, outage_end in self.outages:
                for _ in range(8):
                    job_id = self.rng.choice(self.jobs).definition.job_id
                    when = outage_end - self.rng.randrange(10_000, 120_000)
                    self.at(when, functools.partial(self._operate, "operator_backfill", job_id))

    def _person_writes(
        self, job_id: str, item: dict[str, Any] | None, change: dict[str, Any] | None = None
    ) -> bool:
        """A person's put-item (``item``), update-item (``change``) or delete (neither), straight
        to the table as the console or the AWS CLI would; the stream tells the registrar."""
        inner = self.store.inner
        exists = inner.get(JOBS, {"job_id": job_id}) is not None
        if item is not None:
            inner.write([Put(JOBS, item, condition=(), label="person puts job")])
        elif change is not None:
            if not exists:
                return False  # the person sees the job is gone and does nothing
            inner.update(Update(JOBS, {"job_id": job_id}, (), "person updates job", set=change))
        else:
            if not exists:
                return False
            inner.delete(JOBS, {"job_id": job_id})
        self.operated.add(job_id)
        written = (self.clock.now_ms(), inner.get(JOBS, {"job_id": job_id}))
        self.person_log.setdefault(job_id, []).append((*written, self._stream_record(job_id)))
        return True

    def _operate(self, kind: str, job_id: str) -> None:
        if not self.faults_on:
            return
        person = self.person_items[job_id]
        detail = ""
        if kind == "operator_edit":
            done = self._person_writes(job_id, None, {"description": f"edited at {self.clock.now_ms()}"})
        elif kind == "operator_reput":
            done = self._person_writes(job_id, dict(person))
        elif kind == "operator_retime":
            schedule = retimed(self.rng, str(person["schedule"]))
            done = schedule is not None
            if schedule is not None:
                person["schedule"] = detail = schedule
                done = self._person_writes(job_id, dict(person))
        elif kind == "operator_pause":
            done = self._person_writes(job_id, None, {"enabled": False})
            self.at(
                self.clock.now_ms() + self.rng.randrange(5, 40) * MINUTE,
                functools.partial(self._resume, job_id),
            )
        elif kind == "operator_delete":
            done = self._person_writes(job_id, None)
            recreate = functools.partial(self._recreate, job_id)
            self.at(self.clock.now_ms() + self.rng.randrange(5, 40) * MINUTE, recreate)
        elif kind == "operator_malformed":
            detail, broken = malformed(self.rng, person)
            done = self._person_writes(job_id, broken)
            self.at(
                self.clock.now_ms() + self.rng.randrange(2, 20) * MINUTE,
                functools.partial(self._recreate, job_id),
            )
        elif kind == "operator_odd_input":
            done = self._odd_input(job_id)
        else:
            done = self._backfill(job_id)
        if done:
            self.counts[kind] += 1
            self.log("operator", kind, job_id, detail)

    def _resume(self, job_id: str) -> None:
        self._person_writes(job_id, None, {"enabled": True})

    def _recreate(self, job_id: str) -> None:
        self._person_writes(job_id, dict(self.person_items[job_id]))

    def _odd_input(self, job_id: str) -> bool:
        """A person puts a job item keyed with the job's definition-snapshot key, and asks for a
        manual run with a request id one character too long for its run id. The registrar must
        only report the item invalid (no state item, the snapshot untouched), and the trigger
        must refuse the request before writing anything (invariants: ``odd_inputs``)."""
        state = self.store.inner.get(STATE, {"job_id": job_id})
        if state is None or not state.get("def_hash"):
            return False
        key = str(snapshot_key(job_id, str(state["def_hash"]))["job_id"])
        item = {**self.person_items[job_id], "job_id": key}
        self.store.inner.write([Put(JOBS, item, condition=(), label="person puts an odd job item")])
        self.odd_keys.add(key)
        self._stream_record(key)

        too_long = "r" * (MAX_RUN_ID_LENGTH - len(manual_run_id(job_id, "")) + 1)

        def trigger() -> object:
            try:
                return self.ops.trigger(job_id, too_long)
            except (ValueError, JobNotFound):
                return None  # refused, before any write

        ok, accepted = self.call("operator", trigger, job_id)
        if ok and accepted is not None:
            self.unexpected.append(f"odd_input_accepted {job_id}: a request id too long ran {accepted}")
        return True

    def _backfill(self, job_id: str) -> bool:
        now = self.clock.now_ms()
        since = now - self.rng.randrange(2, 30) * MINUTE

        def backfill() -> object:
            try:
                return self.ops.backfill(job_id, ms_to_dt(since), ms_to_dt(now))
            except (ValueError, JobNotFound):
                return None  # the job is invalid or gone: the person reads the error

        ok, result = self.call("operator", backfill, job_id)
        if ok and result is not None:
            self.operated.add(job_id)
            return True
        return False


def run_chaos(cfg: ChaosConfig) -> ChaosReport:
    if cfg.store == "moto":
        from jobsched_tools.sim.moto_store import moto_store

        with moto_store() as store:
            return World(cfg, store).run()
    return World(cfg).run()


def _short(fields: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in fields.items() if v not in (None, "", 0, False))[:300]


def _each(actions: tuple[Callable[[str], None], ...], job_id: str) -> None:
    for action in actions:
        action(job_id)
