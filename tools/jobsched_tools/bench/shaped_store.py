"""The product's own services on a store that rewrites each write as a cost-study shape would
make it, then meters it (the cost study, bench/unit_shapes.py, and the proposal page
docs/proposals/fewer-write-units.md): the store, the driver that runs short jobs through it on a
manual clock, the rewrites of shapes b, d and e, and the read sizes the study counts its readers'
reads with."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from jobsched.core.clock import ManualClock
from jobsched.core.config import SchedulerConfig
from jobsched.core.job import JobDefinition, OverlapPolicy
from jobsched.core.limits import item_size
from jobsched.core.writes import RUNS, STATE, Check, Delete, Put, Update, WriteOp
from jobsched.ports import IndexName, Page
from jobsched.services.messages import parse_run_message
from jobsched.services.operations import Operations
from jobsched.services.trigger import Trigger
from jobsched.services.worker import HandlerResult, Started, Worker
from jobsched.targets.registry import HandlerRegistry

from jobsched_tools.bench.write_units import T0, quiet_logger
from jobsched_tools.fakes.memory_queue import MemoryWorkQueue
from jobsched_tools.fakes.memory_telemetry import MemoryTelemetry
from jobsched_tools.fakes.metering import Index, MeteringStore, read_units, write_units

MINUTE = 60_000
HOUR = 3_600_000

# A coarse next-run key (shape d): the bucket, and the detector's overdue search meets every job
# of the current bucket once a sweep.
BUCKET_MS = 10 * MINUTE


Transform = Callable[[WriteOp], WriteOp]


def unchanged(op: WriteOp) -> WriteOp:
    return op


class ShapedStore(MeteringStore):
    """A MeteringStore that rewrites every write as a shape would make it, then meters it."""

    def __init__(self, transform: Transform = unchanged, indexes: Sequence[Index] | None = None) -> None:
        super().__init__()
        self._transform = transform
        if indexes is not None:
            self.indexes = list(indexes)
        # Read units of index queries, kept apart: at this scale each shard's page is charged its
        # minimum half unit, which at a thousand runs a second is spread over many entries.
        self.query_read_units = 0.0

    def query(self, index: IndexName, partition: Any, *args: Any, **kwargs: Any) -> Page:
        before = self.read_units
        page = super().query(index, partition, *args, **kwargs)
        self.query_read_units += self.read_units - before
        return page

    def write(self, ops: Sequence[WriteOp]) -> None:
        super().write([self._transform(op) for op in ops])

    def update(self, op: Update) -> dict[str, Any]:
        shaped = self._transform(op)
        assert isinstance(shaped, Update)
        return super().update(shaped)

    def expire_by_ttl(self, charge_indexes: bool) -> None:
        """TTL deletes every finished run (one with ``expires_at``): no write unit on the table
        ("without consuming write throughput"); each index entry it removes charged as a delete's
        index write, or not (AWS's documentation does not say which)."""
        finished = [key for key, item in self.tables[RUNS].items() if "expires_at" in item]
        for item in (self.tables[RUNS][key] for key in finished):
            for index in self.indexes:
                entry = index.entry(item) if index.table == RUNS else None
                if entry is not None and charge_indexes:
                    units = write_units(item_size(entry))
                    self.write_units[f"{RUNS}/{index.name}"] += units
                    self.by_label["ttl delete"] += units
        for key in finished:
            del self.tables[RUNS][key]


@dataclass(frozen=True)
class Driven:
    store: ShapedStore
    runs: int
    write_units_per_run: float
    write_units_per_heartbeat: float
    get_read_units_per_run: float  # GetItem and BatchGetItem: queries apart (ShapedStore.query)
    by_step: dict[str, float]


def drive(
    store: ShapedStore,
    overlap: str = "skip",
    payload_bytes: int = 0,
    schedule: str = "rate(1 hour)",
    occurrences: int = 1,
    jobs: int = 3,
) -> Driven:
    """The product's services run ``occurrences`` short runs of each of ``jobs`` jobs on
    ``store``: the trigger claims each occurrence 5 s before it, the worker starts it at its
    instant, heartbeats once and commits. ``write_units.measure``'s loop, for several
    occurrences, and on a store that may rewrite the writes."""
    clock = ManualClock(T0)
    # A lookahead shorter than the period: each tick claims one occurrence per job, as the
    # default's does for an hourly job; the writes of a claim do not depend on it.
    cfg = SchedulerConfig(lookahead_seconds=10)
    queue = MemoryWorkQueue(clock, visibility_timeout_seconds=900)
    telemetry = MemoryTelemetry()
    ops = Operations(store, queue, telemetry, clock, cfg)
    payload = {"blob": "x" * payload_bytes} if payload_bytes else {}
    for index in range(jobs):
        ops.register(
            JobDefinition(
                job_id=f"u{index:04d}",
                schedule=schedule,
                target="noop",
                overlap=OverlapPolicy(overlap),
                payload=payload,
            )
        )
    store.reset_meters()
    store.read_units = store.query_read_units = 0.0
    registry = HandlerRegistry()
    registry.add("noop", lambda _ctx: None)
    worker = Worker(store, queue, telemetry, clock, cfg, registry, "units", logger_for=quiet_logger)
    trigger = Trigger(store, queue, telemetry, clock, cfg, parallel_queries=False)
    beat_units = 0
    finished = 0
    for _ in range(occurrences):
        instant = min(int(state["next_run_at"]) for state in job_states(store))
        clock.set(instant - 5_000)
        trigger.tick("units")
        clock.set(instant)
        started: list[Started] = []
        for receipt, body in queue.receive(jobs):
            begun = worker.begin(parse_run_message(body), clock.now_ms() + 900_000)
            assert isinstance(begun, Started), begun
            started.append(begun)
            queue.delete(receipt)
        before = store.total_write_units()
        clock.advance(cfg.heartbeat_seconds * 1000)
        for run in started:
            assert worker.heartbeat(run)
        beat_units += store.total_write_units() - before
        for run in started:
            worker.finish(run, HandlerResult(True))
        finished += len(started)
    assert finished == jobs * occurrences, f"{finished} of {jobs * occurrences} runs finished"
    labels = {
        label: units / finished for label, units in sorted(store.by_label.items()) if label != "heartbeat"
    }
    return Driven(
        store,
        finished,
        (store.total_write_units() - beat_units) / finished,
        beat_units / finished,
        (store.read_units - store.query_read_units) / finished,
        labels,
    )


def keep_lease_entry(op: WriteOp) -> WriteOp:
    """Shape b: the commit leaves ``check_at`` and ``lease_shard`` (the lease entry) for TTL."""
    if isinstance(op, Update) and op.table == RUNS and op.label.startswith("commit"):
        return replace(
            op, remove=tuple(name for name in op.remove if name not in ("check_at", "lease_shard"))
        )
    return op


def no_lease_entry(op: WriteOp) -> WriteOp:
    """Shape e: runs never enter the lease index (the state's entry stands for the run's)."""
    drop = ("check_at", "lease_shard")
    if isinstance(op, Put) and op.table == RUNS:
        return replace(op, item={k: v for k, v in op.item.items() if k not in drop})
    if isinstance(op, Update) and op.table == RUNS:
        return replace(op, set={k: v for k, v in op.set.items() if k not in drop})
    return op


def _bucket(next_run_at: Any) -> Any:
    return None if next_run_at is None else int(next_run_at) // BUCKET_MS * BUCKET_MS


def coarse_next_run_key(op: WriteOp) -> WriteOp:
    """Shape d: the state carries ``due_bucket`` (its next run's bucket), the index's new key."""
    if op.table != STATE or isinstance(op, Check | Delete):
        return op
    if isinstance(op, Put):
        return replace(op, item={**op.item, "due_bucket": _bucket(op.item.get("next_run_at"))})
    if "next_run_at" in op.set:
        return replace(op, set={**op.set, "due_bucket": _bucket(op.set["next_run_at"])})
    if "next_run_at" in op.remove:
        return replace(op, remove=(*op.remove, "due_bucket"))
    return op


def coarse_indexes() -> list[Index]:
    """The template's indexes with next-run keyed by the bucket; next_run_at becomes projected."""
    indexes = []
    for index in MeteringStore().indexes:
        if index.name == "next-run":
            index = replace(
                index, keys=("sched_shard", "due_bucket"), include=(*index.include, "next_run_at")
            )
        indexes.append(index)
    return indexes


def job_states(store: MeteringStore) -> list[dict[str, Any]]:
    """The jobs' state items (the state table also holds definition snapshots, keyed job#hash)."""
    return [item for item in store.tables[STATE].values() if "next_run_at" in item]


def index_named(store: MeteringStore, name: str) -> Index:
    return next(index for index in store.indexes if index.name == name)


def entry_read_units(index: Index, item: dict[str, Any]) -> float:
    """An index entry's share of an eventually consistent query page, by its bytes."""
    return item_size(index.entry(item) or {}) / 4096 / 2


def get_units(item: dict[str, Any] | None) -> float:
    return read_units(item_size(item or {}), consistent=False)


def move_state_key(store: ShapedStore) -> None:
    """Shape e: at the run's check time the detector finds the job's entry (its run's lease) and
    moves the state's key back to its next run: an item write and a re-key, per run."""
    for state in job_states(store):
        store.update(
            Update(
                STATE,
                {"job_id": state["job_id"]},
                (),
                "detector: state key back to next run",
                set={"next_run_at": int(state["next_run_at"]) + 1},
            )
        )
