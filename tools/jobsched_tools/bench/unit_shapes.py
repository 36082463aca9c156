"""Write and read units of the candidate shapes for issue 37 item 3, metered, and what each costs.

docs/proposals/fewer-write-units.md is the study; this module reproduces every figure in its
table (``python -m jobsched_tools.bench.unit_shapes``, and ``--markdown`` prints the table), and
``tests/unit/test_write_units.py`` fails when the page and the meter disagree.

Two kinds of measurement, both on the bench's MeteringStore (DynamoDB's capacity rules):

- **the product, transformed.** The product's own services (trigger, worker) run short jobs on a
  manual clock, on a store that rewrites each write the way the shape would (the commit keeps
  its lease attributes; the state's next-run key is a coarse bucket; the run enters no lease
  index). The rest of every write is the product's, so a change to the product moves these
  figures with it.
- **a replay.** Shapes with another data model (each run's index entry made one occurrence ahead,
  docs/proposals/due-entry-on-runs.md) have no services to run: their writes are replayed item by
  item (``replay_due_entry``; ``due_entry_proposal.py``, the proposal's own figures, replays
  through it).

Reads are not metered by running services the shapes do not have. They are counted from metered
sizes (an index entry's projection, an item's size) times how often each reader meets an entry,
which is stated with each shape (``ReadModel``): a query page is charged by its bytes (as at scale,
where a page holds many entries), a GetItem by its item, eventually consistent.

TTL: DynamoDB's own page says a TTL delete consumes no write throughput on the table, and says of
the indexes only that the item is "removed from local secondary indexes and global secondary
indexes just like other delete operations" (docs/proposals/fewer-write-units.md, with the sources).
So a shape that leaves its index entry for TTL to remove is metered both ways:
``write_units_per_run`` charges that removal as the index write of any delete (the documented
reading), ``write_units_if_ttl_frees_indexes`` does not.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from jobsched.core.clock import ManualClock
from jobsched.core.config import SchedulerConfig
from jobsched.core.job import JobDefinition, OverlapPolicy
from jobsched.core.limits import item_size
from jobsched.core.transitions import LEASE_ATTRIBUTES
from jobsched.core.writes import JOBS, RUNS, STATE, Check, Delete, Put, Update, WriteOp, eq, not_exists
from jobsched.ports import IndexName, Page
from jobsched.services.messages import parse_run_message
from jobsched.services.operations import Operations
from jobsched.services.trigger import Trigger
from jobsched.services.worker import HandlerResult, Started, Worker
from jobsched.targets.registry import HandlerRegistry

from jobsched_tools.bench import read_units as product_reads_meter
from jobsched_tools.bench.units import load_prices, unit_prices
from jobsched_tools.bench.write_units import T0, quiet_logger
from jobsched_tools.fakes.memory_queue import MemoryWorkQueue
from jobsched_tools.fakes.memory_telemetry import MemoryTelemetry
from jobsched_tools.fakes.metering import Index, MeteringStore, read_units, write_units

MINUTE = 60_000
HOUR = 3_600_000
DEF_HASH = "sha256:" + "a" * 64
DEFAULTS = SchedulerConfig()

# What a run costs besides DynamoDB, from the full bench run of 2026-12-04 (docs/bench-latest.json,
# usd_per_million_runs_by_service): Lambda compute 0.1505 (trigger) + 0.219 (worker), Lambda
# requests 0.022, SQS 0.12. Every shape makes the same sends, receives and invocations; the
# DynamoDB part is what differs, priced here from the meter in both capacity modes.
OTHER_USD_PER_MILLION = 0.1505 + 0.219 + 0.022 + 0.12
# The product's reads a run are metered by bench/read_units.py, the function the bench prices them
# with (``est_read_units_per_run``): the trigger's next-run pages and its strongly consistent
# GetItem of the job item at each claim (load_job), and skip's read of the run before it at the
# worker's start. Every shape keeps them.

# How often the trigger (one tick a minute, TickRate's default) meets an entry of the due index:
# every tick whose window [now - lookback, now + lookahead] holds it while it is in the index.
TICK_MS = MINUTE
SHORT_RUN_MS = 5_000  # a short run commits this long after its instant
# A coarse next-run key (shape d): the bucket, and the detector's overdue search meets every job
# of the current bucket once a sweep.
BUCKET_MS = 10 * MINUTE


@dataclass(frozen=True)
class ShapeUnits:
    """One shape's metered units per short run and what they cost."""

    name: str
    summary: str
    write_units_per_run: float  # skip, the default; a TTL removal of an index entry charged
    write_units_per_run_allow: float
    write_units_per_run_4k_payload: float
    write_units_if_ttl_frees_indexes: float
    write_units_per_heartbeat: float
    read_units_added_per_run: float  # beyond the product's metered reads
    by_step: dict[str, float]
    reads: str  # how the reads were counted
    keeps: str  # the guarantees it keeps, or which one it gives up
    gives_up: tuple[str, ...] = ()
    new_fence: str = ""  # a new linearisation point, which the explorer must check before it is built
    product_read_units_per_run: float = 0.0
    usd: dict[str, float] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return self.__dict__.copy()


def price(write_units_per_run: float, read_units_per_run: float) -> dict[str, float]:
    """USD per million runs, on-demand and provisioned at the price table's utilisation
    (bench/units.py ``unit_prices``), with everything but DynamoDB as measured on 2026-12-04."""
    prices, _ = load_prices()
    out = {}
    for mode in ("on_demand", "provisioned"):
        write_usd, read_usd = unit_prices(prices, mode)
        total = write_units_per_run * write_usd + read_units_per_run * read_usd + OTHER_USD_PER_MILLION
        out[mode] = round(total, 2)
    return out


# --- the product, transformed ------------------------------------------------------------------


Transform = Callable[[WriteOp], WriteOp]


def _unchanged(op: WriteOp) -> WriteOp:
    return op


class ShapedStore(MeteringStore):
    """A MeteringStore that rewrites every write as a shape would make it, then meters it."""

    def __init__(self, transform: Transform = _unchanged, indexes: Sequence[Index] | None = None) -> None:
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


def _keep_lease_entry(op: WriteOp) -> WriteOp:
    """Shape b: the commit leaves ``check_at`` and ``lease_shard`` (the lease entry) for TTL."""
    if isinstance(op, Update) and op.table == RUNS and op.label.startswith("commit"):
        return replace(
            op, remove=tuple(name for name in op.remove if name not in ("check_at", "lease_shard"))
        )
    return op


def _no_lease_entry(op: WriteOp) -> WriteOp:
    """Shape e: runs never enter the lease index (the state's entry stands for the run's)."""
    drop = ("check_at", "lease_shard")
    if isinstance(op, Put) and op.table == RUNS:
        return replace(op, item={k: v for k, v in op.item.items() if k not in drop})
    if isinstance(op, Update) and op.table == RUNS:
        return replace(op, set={k: v for k, v in op.set.items() if k not in drop})
    return op


def _bucket(next_run_at: Any) -> Any:
    return None if next_run_at is None else int(next_run_at) // BUCKET_MS * BUCKET_MS


def _coarse_next_run_key(op: WriteOp) -> WriteOp:
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


def _coarse_indexes() -> list[Index]:
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


def _index(store: MeteringStore, name: str) -> Index:
    return next(index for index in store.indexes if index.name == name)


def _entry_read_units(index: Index, item: dict[str, Any]) -> float:
    """An index entry's share of an eventually consistent query page, by its bytes."""
    return item_size(index.entry(item) or {}) / 4096 / 2


def _get_units(item: dict[str, Any] | None) -> float:
    return read_units(item_size(item or {}), consistent=False)


# --- a replay: each run's entry made one occurrence ahead --------------------------------------

# The proposal's index, keys only, and shape f's: the same key, with
# the immutable attributes a claim needs (set when the run is created, never changed by a claim,
# a start or a heartbeat), so that the trigger reads no run to claim it.
DUE_KEYS_ONLY = Index("due", RUNS, ("lease_shard", "check_at"), "KEYS_ONLY", (), ("job_id", "run_id"))
DUE_CLAIMABLE = Index(
    "due",
    RUNS,
    ("lease_shard", "check_at"),
    "INCLUDE",
    (
        "scheduled_at",
        "next_at",
        "next_key",
        "timing",
        "def_hash",
        "after_run_id",
        "kind",
        "overlap",
        "max_attempts",
    ),
    ("job_id", "run_id"),
)
TIMING = {"schedule": "rate(1 hour)", "timezone": "UTC"}


def _scheduled_run(job_id: str, occurrence: int, overlap: str, timing_on_run: bool) -> dict[str, Any]:
    run = {
        "job_id": job_id,
        "run_id": f"{job_id}@{occurrence}",
        "scheduled_at": occurrence * HOUR,
        "kind": "scheduled",
        "status": "scheduled",
        "version": 1,
        "attempt": 1,
        "recoveries": 0,
        "def_hash": DEF_HASH,
        "overlap": overlap,
        "max_attempts": 3,
        "after_run_id": f"{job_id}@{occurrence - 1}",
        "lease_shard": 3,
        "check_at": occurrence * HOUR,
    }
    if timing_on_run:  # what a claimer needs to make the next one, without reading the state
        run |= {
            "timing": dict(TIMING),
            "next_at": (occurrence + 1) * HOUR,
            "next_key": f"{job_id}@{occurrence + 1}",
        }
    return run


@dataclass(frozen=True)
class Replayed:
    store: ShapedStore
    write_units_per_run: float
    write_units_per_heartbeat: float
    by_step: dict[str, float]
    run_after_commit: dict[str, Any]
    run_scheduled: dict[str, Any]
    state: dict[str, Any]


def replay_due_entry(
    *,
    state_advance: bool,
    take: bool,
    atomic: bool,
    keep_entry: bool = False,
    ttl_charges_indexes: bool = True,
    index: Index = DUE_KEYS_ONLY,
    overlap: str = "skip",
    payload_bytes: int = 0,
    runs: int = 4,
) -> Replayed:
    """``runs`` jobs, each with occurrence 1 scheduled, claimed (creating occurrence 2), started,
    heartbeating once and committed, as one of the due-entry shapes would write them:

    - ``state_advance``: the claim also advances the state (the proposal as written);
    - ``take``: the claim moves occurrence 1 from ``scheduled`` to ``pending`` (the proposal);
      without it the claim is the creation of occurrence 2 alone (shape f, the successor claim);
    - ``atomic``: the claim's writes as one TransactWriteItems (one write needs none);
    - ``keep_entry``: the commit leaves the index entry for TTL (shapes b, c).

    The job's definition and payload live in the jobs table, written at registration only."""
    store = ShapedStore(indexes=[index])
    timing_on_run = not state_advance
    for number in range(runs):
        job_id = f"u{number:04d}"
        store.write([Put(RUNS, _scheduled_run(job_id, 1, overlap, timing_on_run), (), "set up")])
        state = {"job_id": job_id, "version": 1, "status": "active", "def_hash": DEF_HASH, "timing": TIMING}
        store.write([Put(STATE, state | {"latest_run_id": f"{job_id}@0"}, (), "set up")])
        job = {"job_id": job_id, "schedule": TIMING["schedule"], "target": "noop", "overlap": overlap}
        store.write(
            [
                Put(
                    JOBS,
                    job | ({"payload": {"blob": "x" * payload_bytes}} if payload_bytes else {}),
                    (),
                    "set up",
                )
            ]
        )
    store.reset_meters()
    beats = 0
    for number in range(runs):
        job_id = f"u{number:04d}"
        run = {"job_id": job_id, "run_id": f"{job_id}@1"}
        claim: list[WriteOp] = [
            Put(
                RUNS,
                _scheduled_run(job_id, 2, overlap, timing_on_run),
                (not_exists("run_id", "claimed by a racer, or the head closed by a change"),),
                "claim: create next",
            )
        ]
        if take:
            claim.append(
                Update(
                    RUNS,
                    run,
                    (
                        eq("status", "scheduled", "claimed, recorded or cancelled"),
                        eq("version", 1, "as read"),
                    ),
                    "claim: take run",
                    set={
                        "status": "pending",
                        "version": 2,
                        "lease_expires_at": HOUR + 30_000,
                        "claimed_by": "t1",
                    },
                )
            )
        if state_advance:
            claim.append(
                Update(
                    STATE,
                    {"job_id": job_id},
                    (eq("version", 1, "a change or a racer"),),
                    "claim: advance state",
                    set={"version": 2, "latest_run_id": run["run_id"], "last_scheduled_at": HOUR},
                )
            )
        if atomic or len(claim) == 1:
            store.write(claim)
        else:
            for op in claim:
                store.write([op])
        version = 2 if take else 1
        store.update(
            Update(
                RUNS,
                run,
                (
                    eq("status", "pending" if take else "scheduled", "duplicate delivery"),
                    eq("version", version, "stale"),
                ),
                "start",
                set={
                    "status": "running",
                    "version": version + 1,
                    "owner": "w-" + "b" * 36,
                    "lease_expires_at": HOUR + 31_000,
                },
            )
        )
        before = store.total_write_units()
        store.update(
            Update(
                RUNS,
                run,
                (eq("status", "running", "recovered"),),
                "heartbeat",
                set={"lease_expires_at": HOUR + 41_000},
            )
        )
        beats += store.total_write_units() - before
        gone = ("lease_expires_at",) if keep_entry else LEASE_ATTRIBUTES
        store.update(
            Update(
                RUNS,
                run,
                (eq("status", "running", "recovered"), eq("version", version + 1, "a stale worker")),
                "commit",
                set={"status": "succeeded", "version": version + 2, "expires_at": 9_999_999},
                remove=gone,
            )
        )
    run_after_commit = dict(store.tables[RUNS][("u0000", "u0000@1")])
    run_scheduled = dict(store.tables[RUNS][("u0000", "u0000@2")])
    state_item = dict(store.tables[STATE]["u0000"])
    if keep_entry:
        store.expire_by_ttl(ttl_charges_indexes)
    total = store.total_write_units() - beats
    labels = {label: units / runs for label, units in sorted(store.by_label.items()) if label != "heartbeat"}
    return Replayed(store, total / runs, beats / runs, labels, run_after_commit, run_scheduled, state_item)


# --- the shapes ----------------------------------------------------------------------------------


def _visits_while_listed(listed_after_instant_ms: int) -> float:
    """Ticks whose window meets an entry keyed by its instant, listed from before the window
    until ``listed_after_instant_ms`` after its instant (at most the lookback)."""
    span = DEFAULTS.lookahead_seconds * 1000 + min(
        listed_after_instant_ms, DEFAULTS.trigger_lookback_seconds * 1000
    )
    return span / TICK_MS


def _product_like(
    name: str,
    summary: str,
    transform: Transform,
    keeps: str,
    reads: str,
    added_reads: Callable[[Driven], float],
    indexes: Callable[[], list[Index]] | None = None,
    schedule: str = "rate(1 hour)",
    occurrences: int = 1,
    ttl: bool = False,
    extra_per_run: Callable[[ShapedStore], None] | None = None,
    gives_up: tuple[str, ...] = (),
) -> ShapeUnits:
    def one(overlap: str, payload: int, charge: bool = True) -> tuple[Driven, float]:
        store = ShapedStore(transform, indexes() if indexes else None)
        driven = drive(store, overlap, payload, schedule, occurrences)
        added = added_reads(driven)  # before TTL empties the table
        if extra_per_run is not None:
            extra_per_run(store)
        if ttl:
            store.expire_by_ttl(charge)
        total = store.total_write_units() - driven.write_units_per_heartbeat * driven.runs
        steps = {
            label: units / driven.runs
            for label, units in sorted(store.by_label.items())
            if label != "heartbeat"
        }
        return replace(driven, write_units_per_run=total / driven.runs, by_step=steps), added

    (skip, added), (allow, _), (payload, _) = one("skip", 0), one("allow", 0), one("skip", 4096)
    free = one("skip", 0, charge=False)[0] if ttl else skip
    return ShapeUnits(
        name,
        summary,
        skip.write_units_per_run,
        allow.write_units_per_run,
        payload.write_units_per_run,
        free.write_units_per_run,
        skip.write_units_per_heartbeat,
        round(added, 3),
        skip.by_step,
        reads,
        keeps,
        gives_up,
    )


def _move_state_key(store: ShapedStore) -> None:
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


def _replayed(
    name: str,
    summary: str,
    keeps: str,
    reads: str,
    added_reads: Callable[[Replayed], float],
    gives_up: tuple[str, ...] = (),
    new_fence: str = "",
    **shape: Any,
) -> ShapeUnits:
    skip = replay_due_entry(**shape)
    allow = replay_due_entry(overlap="allow", **shape)
    payload = replay_due_entry(payload_bytes=4096, **shape)
    free = replay_due_entry(ttl_charges_indexes=False, **shape) if shape.get("keep_entry") else skip
    return ShapeUnits(
        name,
        summary,
        skip.write_units_per_run,
        allow.write_units_per_run,
        payload.write_units_per_run,
        free.write_units_per_run,
        skip.write_units_per_heartbeat,
        round(added_reads(skip), 3),
        skip.by_step,
        reads,
        keeps,
        gives_up,
        new_fence,
    )


ALL_KEPT = "all four"
RECOVERY, ONE_TXN = (
    "level-triggered recovery",
    "one transaction per job change",
)


def measure_shapes() -> list[ShapeUnits]:
    """Every shape of docs/proposals/fewer-write-units.md, metered, with its price."""
    short_visits = _visits_while_listed(SHORT_RUN_MS)
    kept_visits = _visits_while_listed(DEFAULTS.trigger_lookback_seconds * 1000)
    # The product's own reads, metered on its services (the same for every shape that keeps them).
    product_reads = product_reads_meter.measure("skip").read_units_per_run

    def detector_walk(index_name: str) -> Callable[[Driven], float]:
        """Shape b: the detector meets each kept lease entry once (after its per-shard watermark)
        and reads the run to judge it."""

        def added(driven: Driven) -> float:
            runs = [item for item in driven.store.tables[RUNS].values() if "check_at" in item]
            index = _index(driven.store, index_name)
            if not runs:  # no entry kept: nothing for the walk to read
                return 0.0
            return sum(_entry_read_units(index, item) + _get_units(item) for item in runs) / len(runs)

        return added

    def overdue_bucket_reads(driven: Driven) -> float:
        """Shape d: every sweep (10 s) of the overdue search reads every job of the current bucket
        (its key is in the past); a job every minute is read six times a run."""
        index = _index(driven.store, "next-run")
        states = job_states(driven.store)
        per_minute = MINUTE / (DEFAULTS.detector_sweep_seconds * 1000)
        return per_minute * sum(_entry_read_units(index, state) for state in states) / len(states)

    def state_entry_reads(driven: Driven) -> float:
        """Shape e: the detector meets the job's entry at its run's check time, reads the run."""
        index = _index(driven.store, "next-run")
        states = job_states(driven.store)
        return sum(_entry_read_units(index, state) + 0.5 for state in states) / len(states)

    def trigger_reads(
        visits: float, per_visit_get: str, state_read: bool, detector: bool
    ) -> Callable[[Replayed], float]:
        def added(replayed: Replayed) -> float:
            index = replayed.store.indexes[0]
            entry = _entry_read_units(index, replayed.run_scheduled)
            # A claimer reads the run it met (its status), or, in shape f, the run's successor:
            # absent (unclaimed; half a unit all the same) or present (claimed).
            get = _get_units(replayed.run_scheduled if per_visit_get == "run" else None)
            reads = visits * (entry + get) + (_get_units(replayed.state) if state_read else 0.0)
            if detector:  # the detector's walk meets each kept entry once, reads the run
                reads += entry + _get_units(replayed.run_after_commit)
            return reads

        return added

    shapes = [
        _product_like(
            "product",
            "the atomic claim (run + state), start, commit: what jobsched builds",
            _unchanged,
            ALL_KEPT,
            "metered on the product's services: the trigger's next-run pages and job-item reads",
            lambda _driven: 0.0,
        ),
        _replayed(
            "proposal, atomic",
            "docs/proposals/due-entry-on-runs.md, its claim atomic: create N+1, take N, advance the state",
            ALL_KEPT,
            f"trigger: {short_visits:.2f} visits a run x (keys-only entry + GetItem run), GetItem state once",
            trigger_reads(short_visits, "run", state_read=True, detector=False),
            state_advance=True,
            take=True,
            atomic=True,
        ),
        _replayed(
            "a: fence on the scheduled run",
            "the proposal without the state's advance: claim = one transaction of create N+1 and take N",
            ALL_KEPT + ", if every change fences on the scheduled run (new linearisation point)",
            f"trigger: {short_visits:.2f} visits a run x (keys-only entry + GetItem run); timing on the run",
            trigger_reads(short_visits, "run", state_read=False, detector=False),
            new_fence="the scheduled run",
            state_advance=False,
            take=True,
            atomic=True,
        ),
        _product_like(
            "b: commit keeps its lease entry",
            "the product, the commit leaving check_at and lease_shard for TTL to remove",
            _keep_lease_entry,
            "the fence and the record; recovery then rests on a per-shard watermark (edge-triggered)",
            "detector: each entry once after its per-shard watermark (keys-only entry + GetItem run)",
            detector_walk("lease"),
            ttl=True,
            gives_up=(RECOVERY,),
        ),
        _replayed(
            "c: a + b",
            "shape a, the commit leaving the due entry for TTL (trigger and detector watermarks)",
            "as a; recovery and the trigger's reads rest on per-shard watermarks (edge-triggered)",
            "trigger: 1 visit (its own watermark) x (entry + GetItem run); detector walk: entry + GetItem",
            trigger_reads(1.0, "run", state_read=False, detector=True),
            gives_up=(RECOVERY,),
            new_fence="the scheduled run",
            state_advance=False,
            take=True,
            atomic=True,
            keep_entry=True,
        ),
        _replayed(
            "c without a trigger watermark",
            "shape c, the trigger reading its whole window each tick",
            "as c",
            f"trigger: {kept_visits:.2f} visits a run (lookahead + lookback) x (entry + GetItem run); "
            "detector walk",
            trigger_reads(kept_visits, "run", state_read=False, detector=True),
            gives_up=(RECOVERY,),
            new_fence="the scheduled run",
            state_advance=False,
            take=True,
            atomic=True,
            keep_entry=True,
        ),
        _product_like(
            "d: coarse next-run key (a job every minute)",
            f"the product, next-run keyed by a {BUCKET_MS // MINUTE}-minute bucket: an advance inside it "
            "changes a projected attribute (1), not the key (2); ten occurrences a job",
            _coarse_next_run_key,
            ALL_KEPT,
            "detector: its overdue search reads every job of the current bucket each 10 s sweep",
            overdue_bucket_reads,
            indexes=_coarse_indexes,
            schedule="rate(1 minute)",
            occurrences=10,
        ),
        _product_like(
            "b + d (a job every minute)",
            "shapes b and d together",
            lambda op: _coarse_next_run_key(_keep_lease_entry(op)),
            "as b",
            "as b, plus d's overdue reads",
            lambda driven: detector_walk("lease")(driven) + overdue_bucket_reads(driven),
            indexes=_coarse_indexes,
            schedule="rate(1 minute)",
            occurrences=10,
            ttl=True,
            gives_up=(RECOVERY,),
        ),
        _product_like(
            "e: the lease entry on the state item",
            "runs enter no lease index; the state's next-run entry stands for its run until the "
            "detector moves it back to the next occurrence",
            _no_lease_entry,
            ALL_KEPT,
            "detector: the job's entry once a run (entry + GetItem run)",
            state_entry_reads,
            extra_per_run=_move_state_key,
        ),
        _replayed(
            "f: the successor claim",
            "each run made one occurrence ahead; the claim of N is the creation of N+1 alone (one "
            "conditional put); N+1 existing is N's claim; a change closes the head by writing its "
            "successor's key",
            ALL_KEPT + ", if the explorer agrees (new linearisation point: the head's successor key)",
            f"trigger: {short_visits:.2f} visits a run x (entry with the run's fixed attributes + "
            "GetItem of its successor)",
            trigger_reads(short_visits, "successor", state_read=False, detector=False),
            new_fence="the head's successor key",
            state_advance=False,
            take=False,
            atomic=False,
            index=DUE_CLAIMABLE,
        ),
        _replayed(
            "proposal, plain writes",
            "the proposal as first written: its three claim writes made one by one",
            "the fence, the record and recovery",
            "as the proposal",
            trigger_reads(short_visits, "run", state_read=True, detector=False),
            gives_up=(ONE_TXN,),
            state_advance=True,
            take=True,
            atomic=False,
        ),
        _replayed(
            "a, plain writes",
            "shape a with create N+1 and take N made one by one",
            "the fence, the record and recovery",
            "as a",
            trigger_reads(short_visits, "run", state_read=False, detector=False),
            gives_up=(ONE_TXN,),
            new_fence="the scheduled run",
            state_advance=False,
            take=True,
            atomic=False,
        ),
    ]
    priced = []
    for shape in shapes:
        reads = product_reads + shape.read_units_added_per_run
        priced.append(
            replace(
                shape,
                product_read_units_per_run=round(product_reads, 3),
                usd=price(shape.write_units_per_run, reads)
                | {
                    f"{mode}_if_ttl_frees_indexes": value
                    for mode, value in price(shape.write_units_if_ttl_frees_indexes, reads).items()
                },
            )
        )
    return priced


def _units(value: float) -> str:
    return f"{value:g}"


def _gives_up(shape: ShapeUnits) -> str:
    given = ", ".join(shape.gives_up) or "nothing"
    return f"{given}; new fence: {shape.new_fence}" if shape.new_fence else given


def markdown_table(shapes: Sequence[ShapeUnits]) -> str:
    """The table docs/proposals/fewer-write-units.md holds (the test compares the two)."""
    lines = [
        "| shape | write units a run (skip / allow / 4 KiB) | if TTL frees the index | read units added "
        "| $/M on-demand | $/M provisioned | gives up |",
        "|---|---|---|---|---|---|---|",
    ]
    for shape in shapes:
        units = "/".join(
            _units(value)
            for value in (
                shape.write_units_per_run,
                shape.write_units_per_run_allow,
                shape.write_units_per_run_4k_payload,
            )
        )
        free = _units(shape.write_units_if_ttl_frees_indexes)
        usd_od, usd_pr = shape.usd["on_demand"], shape.usd["provisioned"]
        if shape.write_units_if_ttl_frees_indexes != shape.write_units_per_run:
            if_free = (
                shape.usd["on_demand_if_ttl_frees_indexes"],
                shape.usd["provisioned_if_ttl_frees_indexes"],
            )
            free += f" (${if_free[0]:.2f} / ${if_free[1]:.2f})"
        lines.append(
            f"| {shape.name} | {units} | {free} | {shape.read_units_added_per_run:g} | "
            f"{usd_od:.2f} | {usd_pr:.2f} | {_gives_up(shape)} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="print the proposal's table")
    args = parser.parse_args(argv)
    shapes = measure_shapes()
    if args.markdown:
        print(markdown_table(shapes))
    else:
        print(json.dumps([shape.as_json() for shape in shapes], indent=2))


if __name__ == "__main__":
    main()
