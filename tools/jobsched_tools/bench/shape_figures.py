"""Each stack shape's metered units and prices, side by side (issue 37 item 4): what a run writes
and reads on a ``successor`` stack (the template's default), a ``migrating`` one (between the two
deploys of the migration) and a ``legacy`` one (bench/stack_shapes.py), what a job change and an
idle stack cost, and what a million runs cost in each capacity mode, beside EventBridge Scheduler
with a Lambda target and Powertools' idempotency table.

Every figure is metered on the product's services (bench/write_units.py, bench/read_units.py and
the two measurements below), so a change to the product moves it. Standalone:
``python -m jobsched_tools.bench.shape_figures [--json]``.
"""

from __future__ import annotations

import argparse
import functools
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from jobsched.core.clock import ManualClock, ms_to_dt
from jobsched.core.config import SchedulerConfig
from jobsched.core.job import JobDefinition
from jobsched.services.messages import parse_run_message
from jobsched.services.worker import HandlerResult, Started, Worker
from jobsched.targets.registry import HandlerRegistry

from jobsched_tools.bench import baseline, read_units, scale, stack_shapes, units, write_units
from jobsched_tools.bench.read_units import ReadMeter
from jobsched_tools.bench.shape_table import OTHER_USD_PER_MILLION
from jobsched_tools.bench.stack_shapes import SHAPES, StackShape
from jobsched_tools.bench.write_units import quiet_logger
from jobsched_tools.fakes.memory_queue import MemoryWorkQueue
from jobsched_tools.fakes.memory_telemetry import MemoryTelemetry

T0 = write_units.T0
MINUTE = 60_000
HOUR = write_units.HOUR
MINUTES_PER_MONTH = 730 * 60
# What a person writes (the job item): not jobsched's own cost of a change.
PERSON_WRITES = frozenset({"write definition"})


def _per(counter: Mapping[str, float], n: int) -> dict[str, float]:
    return {name: round(value / n, 4) for name, value in sorted(counter.items()) if value}


def change_units(shape: StackShape, jobs: int = 10) -> dict[str, Any]:
    """A job's first registration and a retime of it (every hour becoming every two hours), each
    applied by the registrar as ``Operations.register`` applies it: the write units of each by
    write and by table or index, jobsched's own (the person's job-item write apart), and the
    reads the registrar makes to plan them."""
    clock = ManualClock(T0)
    cfg = SchedulerConfig()
    store = stack_shapes.metered_store(shape, ReadMeter)
    queue = MemoryWorkQueue(clock, visibility_timeout_seconds=900)
    ops = stack_shapes.operations(shape, store, queue, clock, cfg)
    out: dict[str, Any] = {}
    steps = (("register", "rate(1 hour)", T0), ("retime", "rate(2 hours)", T0 + 10 * MINUTE))
    for step, schedule, at in steps:
        clock.set(at)
        store.reset_meters()
        for index in range(jobs):
            ops.register(JobDefinition(job_id=f"c{index:04d}", schedule=schedule, target="noop"))
        own = {label: units for label, units in store.by_label.items() if label not in PERSON_WRITES}
        out[step] = {
            "write_units": round(sum(own.values()) / jobs, 4),
            "by_write": _per(own, jobs),
            "by_table": _per(store.write_units, jobs),
            "read_units": round(store.read_units / jobs, 4),
        }
    return out


def idle_reads(shape: StackShape, jobs: int = 20) -> dict[str, Any]:
    """What a stack whose jobs are not due reads: one trigger tick and one detector sweep (the
    detector's Lambda, without its reconcile pass, which reads by the state table's size), with
    ``jobs`` hourly jobs half an hour from their next occurrence and with none. By request, and a
    month of them at the template's rates (a tick and a sweep a minute), priced on-demand."""
    out: dict[str, Any] = {}
    prices, _ = units.load_prices()
    read_usd = float(prices["dynamodb"]["read_request_unit_usd_per_million"])
    for count in (0, jobs):
        clock = ManualClock(T0)
        cfg = SchedulerConfig()
        store = stack_shapes.metered_store(shape, ReadMeter)
        queue = MemoryWorkQueue(clock, visibility_timeout_seconds=900)
        ops = stack_shapes.operations(shape, store, queue, clock, cfg)
        for index in range(count):
            ops.register(JobDefinition(job_id=f"i{index:04d}", schedule="rate(1 hour)", target="noop"))
        clock.set(T0 + 30 * MINUTE)
        trigger = stack_shapes.trigger(shape, store, queue, clock, cfg)
        detector = stack_shapes.detector(shape, store, queue, clock, cfg)
        figures = {
            "tick": _reads_of(store, "tick", functools.partial(trigger.tick, "idle")),
            "sweep": _reads_of(store, "sweep", functools.partial(detector.run, "idle", reconcile=False)),
        }
        month = (figures["tick"]["read_units"] + figures["sweep"]["read_units"]) * MINUTES_PER_MONTH
        out[f"{count}_jobs"] = figures | {
            "read_units_per_month": round(month),
            "usd_per_month_on_demand": round(month / 1e6 * read_usd, 4),
        }
    return out


def _reads_of(store: ReadMeter, actor: str, act: Callable[[], object]) -> dict[str, Any]:
    """The read units ``act`` charged on ``store``, and its requests by kind and index."""
    store.reset_meters()
    before = dict(store.request_counts)
    with store.reading(actor):
        act()
    counts = store.request_counts
    requests = {kind: counts.get(kind, 0) - before.get(kind, 0) for kind in counts}
    charged = {request for (reader, request) in store.units if reader == actor}
    return {
        "read_units": round(store.read_units, 4),
        "requests": {kind: n for kind, n in sorted(requests.items()) if n},
        "requests_by_index_or_table": sorted(charged),
    }


def reads_at_defaults(shape: StackShape, jobs: int = 60, minutes: int = 20) -> dict[str, Any]:
    """Read units a run at the template's defaults (a tick a minute, lookahead 90 s, lookback 300 s,
    a detector sweep a minute), on a timeline: ``jobs`` jobs every 5 minutes, their instants spread
    over the period, each run started and committed at its instant; the trigger's
    and the detector's reads by request, per run committed (steady state: the first 5 minutes are
    not counted). On a successor stack a claimed run keeps its head's ``check_at`` until it
    commits, so a tick whose window still holds it reads its successor again: this counts how often."""
    clock = ManualClock(T0)
    cfg = SchedulerConfig()
    store = stack_shapes.metered_store(shape, ReadMeter)
    queue = MemoryWorkQueue(clock, visibility_timeout_seconds=900)
    ops = stack_shapes.operations(shape, store, queue, clock, cfg)
    period_s = 300
    for index in range(jobs):
        start = ms_to_dt(T0 + (index * period_s // jobs) * 1000)
        ops.register(
            JobDefinition(job_id=f"d{index:04d}", schedule="rate(5 minutes)", target="noop", start=start)
        )
    registry = HandlerRegistry()
    registry.add("noop", lambda _ctx: None)
    worker = Worker(
        store, queue, MemoryTelemetry(), clock, cfg, registry, "defaults", logger_for=quiet_logger
    )
    trigger = stack_shapes.trigger(shape, store, queue, clock, cfg)
    detector = stack_shapes.detector(shape, store, queue, clock, cfg)
    finished = 0
    for second in range(minutes * 60):
        clock.set(T0 + second * 1000)
        if second == period_s:
            store.reset_meters()
            finished = 0
        if second % 60 == 0:
            with store.reading("trigger"):
                trigger.tick(f"tick-{second}")
            with store.reading("detector"):
                detector.run(f"sweep-{second}", reconcile=False)
        with store.reading("worker"):
            for receipt, body in queue.receive(100):
                begun = worker.begin(parse_run_message(body), clock.now_ms() + 900_000)
                queue.delete(receipt)
                if isinstance(begun, Started):
                    worker.finish(begun, HandlerResult(True))
                    finished += 1
    per_run = max(1, finished)
    by_request = {
        f"{reader}: {request}": round(units / per_run, 4)
        for (reader, request), units in sorted(store.units.items())
        if reader in ("trigger", "detector", "worker")
    }
    return {
        "runs": finished,
        "read_units_per_run": round(sum(by_request.values()), 4),
        "read_units_by_request": by_request,
        "page_floor_per_run": round(sum(store.page_floor.values()) / per_run, 4),
    }


def price(
    write_units_per_run: float,
    read_units_per_run: float,
    others: Mapping[str, float],
    prices: dict[str, dict[str, Any]],
) -> dict[str, dict[str, float]]:
    """USD per million runs in each capacity mode, by service: the metered DynamoDB units at
    on-demand's or provisioned's unit price (bench/units.py ``unit_prices``), and ``others``
    (SQS, Lambda requests and compute: the same for every shape) as they are."""
    out = {}
    for mode in ("on_demand", "provisioned"):
        write_usd, read_usd = units.unit_prices(prices, mode)
        parts = {
            "dynamodb_writes": write_units_per_run * write_usd,
            "dynamodb_reads": read_units_per_run * read_usd,
            **others,
        }
        rounded = {name: round(value, 4) for name, value in parts.items()}
        out[mode] = rounded | {"total": round(sum(parts.values()), 4)}
    return out


def default_others() -> dict[str, float]:
    """Everything but DynamoDB a run costs, as the latest full bench measured it
    (bench/shape_table.py ``OTHER_USD_PER_MILLION``, checked there against docs/bench-latest.json)."""
    return {"others_from_latest_bench": OTHER_USD_PER_MILLION}


def measure(
    overlap: str = "skip",
    others: Mapping[str, float] | None = None,
    shapes: Sequence[StackShape] = SHAPES,
) -> dict[str, Any]:
    """Every shape's figures at ``overlap`` (``skip``: the default policy), priced with ``others``
    (a full bench run passes its own measured SQS and Lambda figures)."""
    prices, source = units.load_prices()
    others = dict(others) if others is not None else default_others()
    by_shape: dict[str, Any] = {}
    for shape in shapes:
        written = write_units.measure(overlap, runs=20, heartbeats=1, shape=shape)
        # Short runs, as the scale model counts them: no heartbeat.
        steady = write_units.measure(overlap, runs=20, heartbeats=0, shape=shape)
        read = read_units.measure(overlap, shape=shape)
        at_defaults = reads_at_defaults(shape)
        by_shape[shape.name] = {
            **stack_shapes.as_json(shape),
            "write_units_per_run": written.write_units_per_run,
            "write_units_by_write": {
                label: value for label, value in written.by_step.items() if label != "heartbeat"
            },
            "write_units_by_write_and_table": written.by_write,
            "write_units_by_table": written.by_table,
            "write_units_per_heartbeat": written.write_units_per_heartbeat,
            "read_units_per_run": read.read_units_per_run,
            "read_units_by_request": read.by_request,
            # The same reads on a timeline at the template's defaults (a tick a minute, lookahead
            # 90 s): a successor tick can meet a claimed run again before it starts.
            "read_units_at_defaults": at_defaults,
            "read_units_page_floor_per_run": read.page_floor_units_per_run,
            "usd_per_million_runs": price(
                written.write_units_per_run, read.read_units_per_run, others, prices
            ),
            "capacity": [
                scale.capacity(steady.by_table, read.read_units_per_run, target, prices)
                for target in scale.CAPACITY_TARGETS
            ],
            "job_change": change_units(shape),
            "idle": idle_reads(shape),
        }
    measured = baseline.measure()
    baselines = {
        mode: baseline.usd_per_million_runs(measured, prices, *units.unit_prices(prices, mode))
        for mode in ("on_demand", "provisioned")
    }
    return {
        "overlap": overlap,
        "shipped": stack_shapes.shipped().name,
        "shapes": by_shape,
        "baseline": {"measured": measured, "usd_per_million_runs": baselines},
        "price_source": source,
    }


def markdown(figures: dict[str, Any]) -> str:
    """The per-shape table docs/benchmarks.md carries."""
    lines = [
        "| shape | write units a run (by write) | read units a run | $/M on-demand "
        "| $/M provisioned (70 %) |",
        "|---|---|---|---|---|",
    ]
    for name, shape in figures["shapes"].items():
        writes = ", ".join(f"{label} {value:g}" for label, value in shape["write_units_by_write"].items())
        usd = shape["usd_per_million_runs"]
        lines.append(
            f"| {name} | **{shape['write_units_per_run']:g}** ({writes}) | {shape['read_units_per_run']:g} | "
            f"{usd['on_demand']['total']:.2f} | {usd['provisioned']['total']:.2f} |"
        )
    base = figures["baseline"]["usd_per_million_runs"]
    writes = figures["baseline"]["measured"]["idempotency_write_units_per_run"]
    lines.append(
        f"| EventBridge Scheduler + Lambda + idempotency | {writes:g} write units an invocation | - "
        f"| {base['on_demand']['total']:.2f} | {base['provisioned']['total']:.2f} |"
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    figures = measure()
    print(json.dumps(figures, indent=2) if args.json else markdown(figures))


if __name__ == "__main__":
    main()
