"""The simulated world's state and plumbing: the seeded RNG, the simulated clock, the store and
queue with their fault injectors, the real services (triggers, detector, workers, registrar) as
actors, the event heap, and the calls every actor makes through (``log``, ``at``, ``roll``,
``call``).

``World`` (sim/world.py) is this state with its actors mixed in, a module each: the jobs
table's stream (sim/stream.py), the people (sim/people.py), the trigger and the detector
(sim/ticks.py), the workers (sim/workers.py).
"""

from __future__ import annotations

import heapq
import inspect
import random
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple, TypeVar

from jobsched.core import head_invariants
from jobsched.core.claim_shape import CLAIM_SHAPE_ATTRIBUTE, ClaimShape
from jobsched.core.clock import ManualClock, SkewedClock
from jobsched.core.config import SchedulerConfig
from jobsched.core.errors import QueueError, StoreError
from jobsched.core.run import RunMessage
from jobsched.core.transitions.bookkeeping import BOOKKEEPING_KEY, bookkeeping_op
from jobsched.core.writes import STATE
from jobsched.ports import DUE_INDEX, Store
from jobsched.services.detector import MissDetector
from jobsched.services.operations import Operations
from jobsched.services.registrar import Registrar
from jobsched.services.trigger import Trigger
from jobsched.services.worker import Started, Worker
from jobsched.targets.registry import HandlerRegistry

from jobsched_tools.sim.faults import (
    REFUSING_DEAD_LETTER_QUEUE,
    FaultyStore,
    SimCrash,
    SimDeadLetters,
    SimQueue,
)
from jobsched_tools.sim.lease_store import LeaseIndexedMemoryStore
from jobsched_tools.sim.ledger import EFFECTS
from jobsched_tools.sim.report import LogEntry
from jobsched_tools.sim.scenario import KNOWN_TARGETS, ChaosConfig, SimJob, build_jobs, start_instant, windows

T = TypeVar("T")
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

    def __init__(self, world: WorldState) -> None:
        self._world = world
        self.counts: Counter[str] = Counter()
        # (simulated ms, name, value) of every metric, for the dashboard picture (ops/dashboard.py)
        self.metrics: list[tuple[int, str, float]] = []

    def event(self, name: str, correlation_id: str, **fields: Any) -> None:
        self.counts[name] += 1
        if name == "job.error":
            self._world.job_errors.append((correlation_id, str(fields.get("error"))))
        if name == "lease.recovered":
            lapsed = int(fields["lease_expired_at"])
            self._world.recoveries.append(
                (correlation_id, lapsed, lapsed + int(fields["recovery_latency_ms"]))
            )
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


class WorldState:
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
        self.sched_cfg = SchedulerConfig(
            shard_count=8,
            trigger_groups=1,
            lease_seconds=cfg.lease_seconds,
            dispatch_lease_seconds=cfg.lease_seconds,
            heartbeat_seconds=min(10, cfg.lease_seconds // 2),
        )
        # A successor-shaped or migrating stack's runs table has the ``due`` index (the memory
        # store keeps today's indexes too: a migrating stack has all three).
        due: tuple[str, ...] = (DUE_INDEX,) if cfg.ends_successor else ()
        inner = (
            store
            if store is not None
            else LeaseIndexedMemoryStore(extra_keys={EFFECTS: ("pk",)}, extra_indexes=due)
        )
        if cfg.successor:
            switch_to_successor(inner, self.clock.now_ms())
        self.store = FaultyStore(inner, self.rng, rates, self.counts, self.clock, self.log)
        self.store.successor = cfg.ends_successor
        self.store.migrating = cfg.migrate_midway
        self.store.head_writes = head_invariants.WriteLedger()
        self.store.head_write_slack_ms = rates.clock_skew_max_ms + 1000
        self.store.dispatch_lease_ms = self.sched_cfg.dispatch_lease_seconds * 1000
        self.store.skew_allowance_ms = self.sched_cfg.clock_skew_allowance_ms
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
        # A successor-shaped stack's functions as runtime/wiring.py wires them (issue 37): the
        # trigger reads the migration switch, the worker adopts a claimed run (a migrating
        # stack's too: its functions run the code that knows both claims before the switch).
        # Today's world passes neither, so its services make exactly today's calls.
        shaped: dict[str, Any] = {"read_claim_shape": True} if cfg.ends_successor else {}
        adopting: dict[str, Any] = {"adopt_scheduled": True} if cfg.ends_successor else {}
        self.triggers = [
            Trigger(
                self.store,
                self.queue,
                self.telemetry,
                skewed(f"trigger-{n}"),
                self.sched_cfg,
                False,
                **serial,
                **shaped,
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
                **adopting,
            )
            for n in range(cfg.workers)
        ]
        self.ops = Operations(self.store, self.queue, self.telemetry, self.clock, self.sched_cfg)
        # The registrar function, fed by the jobs table's stream (simulated below): it knows the
        # deployment's handlers, so an item naming another target is invalid.
        # It claims a changed job's first occurrences a tick would reach late (issue 16), racing
        # the ticks through the same conditions.
        early = Trigger(
            self.store, self.queue, self.telemetry, self.clock, self.sched_cfg, False, **serial, **shaped
        )
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
        # Issue 37's "recovery of a crashed run within a lease plus the skew allowance", as the
        # once-a-minute simulated detector can keep it: every recovery as (run id, when its lease
        # or dispatch lease lapsed, when it was recovered), and when each clean detector run
        # (no fault injected, no error, not cut short) began (``recovery_late``).
        self.recoveries: list[tuple[str, int, int]] = []
        self.clean_detector_runs: list[int] = []
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

    def _in(self, stretches: list[tuple[int, int]]) -> bool:
        now = self.clock.now_ms()
        return any(a <= now < b for a, b in stretches)


def switch_to_successor(store: Store, now: int) -> None:
    """Turn the stack's migration switch on (core/claim_shape.py): the ``claim_shape`` attribute of
    the detector's bookkeeping item, written as the detector writes it (as the functional tests'
    ``harness.switch_to_successor`` does). Before any job registers, so every job's first
    registration follows the successor claim (``job_shape`` of no state is the stack's)."""
    current = store.get(STATE, dict(BOOKKEEPING_KEY))
    switch = {CLAIM_SHAPE_ATTRIBUTE: ClaimShape.SUCCESSOR.value}
    store.write([bookkeeping_op(current, switch, (), now)])


def _short(fields: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in fields.items() if v not in (None, "", 0, False))[:300]
