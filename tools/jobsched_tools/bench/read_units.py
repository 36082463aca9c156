"""Read units per run, metered by reader: every read the product makes for a run, on the
MeteringStore (DynamoDB's capacity rules), attributed to the actor and the request that made it.

The real services run short jobs on a manual clock in a steady state (each job's second and
third occurrences, so that ``skip``'s start reads the run before it, as every run but a job's
first does):

- the trigger ticks 5 s before each instant: its next-run pages and its strongly consistent
  GetItem of the job item at each claim (``load_job``);
- the worker starts each run at its instant (``skip``: it reads the run before it, strongly
  consistent), heartbeats once and commits;
- the miss detector sweeps as its Lambda does, once while the runs are in flight and once after
  they committed: its lease and overdue searches, and a GetItem of each run whose ``check_at`` came.

Two kinds of read, priced apart:

- **per run**: every GetItem and BatchGetItem (exact), and each entry's share of the query pages
  that returned it (its bytes over 4 KB, halved when eventually consistent): at scale a page holds
  many entries, and this share is what a run adds to it;
- **per request**: the rest of each page's charge, the half unit DynamoDB bills for a page however
  little it returns. It is paid per tick and per sweep, not per run (at this bench's 20 jobs it
  would dwarf the rest); the idle cost prices it (``bench/idle.py``). ``page_floor_units`` reports
  it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from jobsched.core.clock import ManualClock
from jobsched.core.config import SchedulerConfig
from jobsched.core.job import JobDefinition, OverlapPolicy
from jobsched.core.limits import item_size
from jobsched.core.run import RunStatus
from jobsched.core.writes import RUNS, STATE, Item
from jobsched.ports import IndexName, Page
from jobsched.services.messages import parse_run_message
from jobsched.services.worker import HandlerResult, Started, Worker
from jobsched.targets.registry import HandlerRegistry

from jobsched_tools.bench import stack_shapes
from jobsched_tools.bench.stack_shapes import StackShape
from jobsched_tools.bench.write_units import T0, quiet_logger
from jobsched_tools.fakes.memory_queue import MemoryWorkQueue
from jobsched_tools.fakes.memory_telemetry import MemoryTelemetry
from jobsched_tools.fakes.metering import READ_CHUNK, MeteringStore

MINUTE = 60_000
READERS = ("trigger", "worker", "detector")


def entry_share(size: int, consistent: bool) -> float:
    """An item's share of a query page's read units, by its bytes (no per-page minimum)."""
    units = size / READ_CHUNK
    return units if consistent else units / 2


class ReadMeter(MeteringStore):
    """A MeteringStore that also keeps each read's units by reader and request
    (``"GetItem runs"``, ``"Query lease"``), and each query's entries' shares apart from the
    per-page minimum. ``reading(name)`` names the reader of the reads made inside it."""

    def __init__(self, *, indexes: Iterable[str] | None = None) -> None:
        super().__init__(indexes=indexes)
        self.reader = "setup"
        self.units: defaultdict[tuple[str, str], float] = defaultdict(float)  # (reader, request) -> units
        self.page_floor: defaultdict[str, float] = defaultdict(float)  # page minimums beyond entries

    def reset_meters(self) -> None:
        super().reset_meters()
        self.units.clear()
        self.page_floor.clear()

    @contextmanager
    def reading(self, reader: str) -> Iterator[None]:
        before, self.reader = self.reader, reader
        try:
            yield
        finally:
            self.reader = before

    def get(self, table: str, key: Item, consistent: bool = True) -> Item | None:
        before = self.read_units
        item = super().get(table, key, consistent)
        self.units[(self.reader, f"GetItem {table}")] += self.read_units - before
        return item

    def batch_get(self, table: str, keys: Sequence[Item], consistent: bool = False) -> list[Item]:
        before = self.read_units
        items = super().batch_get(table, keys, consistent)
        self.units[(self.reader, f"BatchGetItem {table}")] += self.read_units - before
        return items

    def occurrence_items(self, job_id: str, page_limit: int | None = None) -> list[Item]:
        # HC12's strongly consistent read of a job's occurrence keys (the successor claim's
        # registrar and reconcile pass): charged as one page, no entry shares to split.
        before = self.read_units
        items = super().occurrence_items(job_id, page_limit)
        self.units[(self.reader, "Query runs (occurrences)")] += self.read_units - before
        return items

    def query(
        self,
        index: IndexName,
        partition: Any,
        sort_from: int | None = None,
        sort_to: int | None = None,
        limit: int = 100,
        cursor: dict[str, Any] | None = None,
        consistent: bool = False,
    ) -> Page:
        before = self.read_units
        page = super().query(index, partition, sort_from, sort_to, limit, cursor, consistent)
        self._split(f"Query {index}", self.read_units - before, page.items, consistent)
        return page

    def scan(self, table: str, limit: int = 100, cursor: dict[str, Any] | None = None) -> Page:
        before = self.read_units
        page = super().scan(table, limit, cursor)
        self._split(f"Scan {table}", self.read_units - before, page.items, consistent=False)
        return page

    def _split(self, request: str, charged: float, items: Sequence[Item], consistent: bool) -> None:
        shares = sum(entry_share(item_size(item), consistent) for item in items)
        self.units[(self.reader, request)] += shares
        self.page_floor[self.reader] += charged - shares


@dataclass(frozen=True)
class RunReads:
    overlap: str
    runs: int
    read_units_per_run: float  # every reader's per-run reads, summed: what the bench prices
    by_reader: dict[str, float]
    by_request: dict[str, float]  # "trigger: GetItem jobs" -> units per run
    page_floor_units_per_run: float = 0.0  # at this bench's scale; per request, not per run
    page_floor_by_reader: dict[str, float] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return self.__dict__.copy()


def measure(
    overlap: str = "skip",
    jobs: int = 20,
    occurrences: int = 3,
    warm_up: int = 1,
    store: ReadMeter | None = None,
    shape: StackShape | None = None,
) -> RunReads:
    """``jobs`` jobs every minute, ``warm_up`` occurrences run unmetered (a job's first run has
    no run before it), then ``occurrences`` metered: the reads of those runs, per run, on
    ``shape``'s stack (bench/stack_shapes.py; None: the template's default). ``store``: a meter
    to read afterwards (every unit it charged is in ``units`` or ``page_floor``), made with that
    shape's indexes."""
    shape = shape or stack_shapes.shipped()
    clock = ManualClock(T0)
    # A lookahead shorter than the period: each tick claims one occurrence per job (the default
    # lookahead of a minute job claims one or two; the reads of a claim do not depend on it).
    cfg = SchedulerConfig(lookahead_seconds=10)
    store = store if store is not None else stack_shapes.metered_store(shape, ReadMeter)
    queue = MemoryWorkQueue(clock, visibility_timeout_seconds=900)
    telemetry = MemoryTelemetry()
    ops = stack_shapes.operations(shape, store, queue, clock, cfg)
    for index in range(jobs):
        ops.register(
            JobDefinition(
                job_id=f"r{index:04d}",
                schedule="rate(1 minute)",
                target="noop",
                overlap=OverlapPolicy(overlap),
            )
        )
    registry = HandlerRegistry()
    registry.add("noop", lambda _ctx: None)
    worker = Worker(store, queue, telemetry, clock, cfg, registry, "reads", logger_for=quiet_logger)
    trigger = stack_shapes.trigger(shape, store, queue, clock, cfg)
    detector = stack_shapes.detector(shape, store, queue, clock, cfg)
    finished = 0
    for number in range(warm_up + occurrences):
        if number == warm_up:
            store.reset_meters()
            finished = 0
        instant = next_instant(store)
        clock.set(instant - 5_000)
        with store.reading("trigger"):
            trigger.tick("reads")
        clock.set(instant)
        started: list[Started] = []
        with store.reading("worker"):
            for receipt, body in queue.receive(jobs):
                begun = worker.begin(parse_run_message(body), clock.now_ms() + 900_000)
                assert isinstance(begun, Started), begun
                started.append(begun)
                queue.delete(receipt)
        clock.advance(cfg.heartbeat_seconds * 1000)
        with store.reading("detector"):
            detector.run("reads", reconcile=False)  # the runs in flight
        with store.reading("worker"):
            for run in started:
                assert worker.heartbeat(run)
                worker.finish(run, HandlerResult(True))
        clock.advance(cfg.lease_seconds * 1000)
        with store.reading("detector"):
            detector.run("reads", reconcile=False)  # after their leases would have lapsed
        finished += len(started)
    assert finished == jobs * occurrences, f"{finished} of {jobs * occurrences} runs finished"
    by_request = {
        f"{reader}: {request}": round(units / finished, 4)
        for (reader, request), units in sorted(store.units.items())
        if reader in READERS
    }
    by_reader = {
        reader: round(sum(u for (r, _), u in store.units.items() if r == reader) / finished, 4)
        for reader in READERS
    }
    floor = {reader: round(store.page_floor[reader] / finished, 4) for reader in READERS}
    return RunReads(
        overlap,
        finished,
        round(sum(by_reader.values()), 4),
        by_reader,
        by_request,
        round(sum(floor.values()), 4),
        floor,
    )


def next_instant(store: MeteringStore) -> int:
    """The earliest instant a job is positioned at: a legacy state's ``next_run_at``, or a head's
    ``scheduled_at`` (a ``scheduled`` occurrence whose successor key holds nothing)."""
    positions = [int(item["next_run_at"]) for item in store.tables[STATE].values() if "next_run_at" in item]
    runs = store.tables[RUNS]
    positions += [
        int(item["scheduled_at"])
        for item in runs.values()
        if item.get("status") == RunStatus.SCHEDULED.value
        and "next_key" in item
        and (item["job_id"], item["next_key"]) not in runs
    ]
    return min(positions)
