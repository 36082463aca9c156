"""Write and read units of the candidate shapes for issue 37 item 3, metered, and what each costs.

docs/proposals/fewer-write-units.md is the study; this module reproduces every figure in its
table (``python -m jobsched_tools.bench.unit_shapes``, and ``--markdown`` prints the table), and
``tests/unit/test_write_units.py`` fails when the page and the meter disagree. Here: the shapes
and how each one's reads are counted; the store and driver in ``shaped_store.py``, the replay in
``due_entry_replay.py``, the figures' record, prices and table in ``shape_table.py``.

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
from dataclasses import replace
from typing import Any

from jobsched.core.config import SchedulerConfig
from jobsched.core.writes import RUNS

from jobsched_tools.bench import read_units as product_reads_meter
from jobsched_tools.bench.due_entry_replay import DUE_CLAIMABLE, Replayed, replay_due_entry
from jobsched_tools.bench.shape_table import ShapeUnits, markdown_table, price
from jobsched_tools.bench.shaped_store import (
    BUCKET_MS,
    MINUTE,
    Driven,
    ShapedStore,
    Transform,
    coarse_indexes,
    coarse_next_run_key,
    drive,
    entry_read_units,
    get_units,
    index_named,
    job_states,
    keep_lease_entry,
    move_state_key,
    no_lease_entry,
    unchanged,
)
from jobsched_tools.bench.stack_shapes import LEGACY
from jobsched_tools.fakes.metering import Index

DEFAULTS = SchedulerConfig()

# The product's reads a run are metered by bench/read_units.py, the function the bench prices them
# with (``est_read_units_per_run``): the trigger's next-run pages and its strongly consistent
# GetItem of the job item at each claim (load_job), and skip's read of the run before it at the
# worker's start. Every shape keeps them.

# How often the trigger (one tick a minute, TickRate's default) meets an entry of the due index:
# every tick whose window [now - lookback, now + lookahead] holds it while it is in the index.
TICK_MS = MINUTE
SHORT_RUN_MS = 5_000  # a short run commits this long after its instant


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
    product_reads = product_reads_meter.measure("skip", shape=LEGACY).read_units_per_run

    def detector_walk(index_name: str) -> Callable[[Driven], float]:
        """Shape b: the detector meets each kept lease entry once (after its per-shard watermark)
        and reads the run to judge it."""

        def added(driven: Driven) -> float:
            runs = [item for item in driven.store.tables[RUNS].values() if "check_at" in item]
            index = index_named(driven.store, index_name)
            if not runs:  # no entry kept: nothing for the walk to read
                return 0.0
            return sum(entry_read_units(index, item) + get_units(item) for item in runs) / len(runs)

        return added

    def overdue_bucket_reads(driven: Driven) -> float:
        """Shape d: every sweep (10 s) of the overdue search reads every job of the current bucket
        (its key is in the past); a job every minute is read six times a run."""
        index = index_named(driven.store, "next-run")
        states = job_states(driven.store)
        per_minute = MINUTE / (DEFAULTS.detector_sweep_seconds * 1000)
        return per_minute * sum(entry_read_units(index, state) for state in states) / len(states)

    def state_entry_reads(driven: Driven) -> float:
        """Shape e: the detector meets the job's entry at its run's check time, reads the run."""
        index = index_named(driven.store, "next-run")
        states = job_states(driven.store)
        return sum(entry_read_units(index, state) + 0.5 for state in states) / len(states)

    def trigger_reads(
        visits: float, per_visit_get: str, state_read: bool, detector: bool
    ) -> Callable[[Replayed], float]:
        def added(replayed: Replayed) -> float:
            index = replayed.store.indexes[0]
            entry = entry_read_units(index, replayed.run_scheduled)
            # A claimer reads the run it met (its status), or, in shape f, the run's successor:
            # absent (unclaimed; half a unit all the same) or present (claimed).
            get = get_units(replayed.run_scheduled if per_visit_get == "run" else None)
            reads = visits * (entry + get) + (get_units(replayed.state) if state_read else 0.0)
            if detector:  # the detector's walk meets each kept entry once, reads the run
                reads += entry + get_units(replayed.run_after_commit)
            return reads

        return added

    shapes = [
        _product_like(
            "product",
            "the atomic claim (run + state), start, commit: what jobsched builds",
            unchanged,
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
            keep_lease_entry,
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
            coarse_next_run_key,
            ALL_KEPT,
            "detector: its overdue search reads every job of the current bucket each 10 s sweep",
            overdue_bucket_reads,
            indexes=coarse_indexes,
            schedule="rate(1 minute)",
            occurrences=10,
        ),
        _product_like(
            "b + d (a job every minute)",
            "shapes b and d together",
            lambda op: coarse_next_run_key(keep_lease_entry(op)),
            "as b",
            "as b, plus d's overdue reads",
            lambda driven: detector_walk("lease")(driven) + overdue_bucket_reads(driven),
            indexes=coarse_indexes,
            schedule="rate(1 minute)",
            occurrences=10,
            ttl=True,
            gives_up=(RECOVERY,),
        ),
        _product_like(
            "e: the lease entry on the state item",
            "runs enter no lease index; the state's next-run entry stands for its run until the "
            "detector moves it back to the next occurrence",
            no_lease_entry,
            ALL_KEPT,
            "detector: the job's entry once a run (entry + GetItem run)",
            state_entry_reads,
            extra_per_run=move_state_key,
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
