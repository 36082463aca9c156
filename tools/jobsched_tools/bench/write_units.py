"""Write units per run, metered: the real services run short jobs on a MeteringStore (DynamoDB's
capacity rules, one stack shape's indexes: bench/stack_shapes.py) on a manual clock, and each
step's units are read off.

Deterministic and fast (no server, no real time), so the benchmark reports it and a test holds
the figures to their targets.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from jobsched.core.clock import ManualClock
from jobsched.core.config import SchedulerConfig
from jobsched.core.job import JobDefinition, OverlapPolicy
from jobsched.services.messages import parse_run_message
from jobsched.services.worker import HandlerResult, Started, Worker
from jobsched.targets.registry import HandlerRegistry

from jobsched_tools.bench import stack_shapes
from jobsched_tools.bench.stack_shapes import StackShape
from jobsched_tools.fakes.memory_queue import MemoryWorkQueue
from jobsched_tools.fakes.memory_telemetry import MemoryTelemetry

T0 = 1_796_083_200_000  # 2026-12-01T00:00:00Z
HOUR = 3_600_000


@dataclass(frozen=True)
class RunUnits:
    overlap: str
    payload_bytes: int
    runs: int
    write_units_per_run: float  # claim to commit, heartbeats excluded
    write_units_per_heartbeat: float
    read_units_per_run: float
    registrar_records_per_run: float  # writes to job items (each wakes the registrar)
    by_step: dict[str, float]
    # Write units per run by table or index ("runs", "runs/lease", ...), heartbeats included: what
    # the scale model divides among an index's partitions.
    by_table: dict[str, float] = field(default_factory=dict)
    shape: str = ""  # the stack shape metered (bench/stack_shapes.py)
    # Write units per run by write (its label) and by table or index: ``{"claim head": {"runs": 1,
    # "runs/due": 1}}``, heartbeats included.
    by_write: dict[str, dict[str, float]] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return self.__dict__.copy()


class _Quiet:
    def info(self, msg: object, *args: object, **kwargs: Any) -> None:
        pass

    warning = error = info


def quiet_logger(_run_id: str) -> _Quiet:
    return _Quiet()


def measure(
    overlap: str = "skip",
    payload_bytes: int = 0,
    runs: int = 20,
    heartbeats: int = 1,
    shape: StackShape | None = None,
) -> RunUnits:
    """``runs`` hourly jobs, each claimed once, started, heartbeating ``heartbeats`` times and
    committed; the units of that, per run, on ``shape``'s stack (bench/stack_shapes.py; None: the
    template's default, what a new stack ships with)."""
    shape = shape or stack_shapes.shipped()
    clock = ManualClock(T0)
    cfg = SchedulerConfig()
    store = stack_shapes.metered_store(shape, stack_shapes.ByWriteMeter)
    queue = MemoryWorkQueue(clock, visibility_timeout_seconds=900)
    ops = stack_shapes.operations(shape, store, queue, clock, cfg)
    payload = {"blob": "x" * payload_bytes} if payload_bytes else {}
    for index in range(runs):
        ops.register(
            JobDefinition(
                job_id=f"u{index:04d}",
                schedule="rate(1 hour)",
                target="noop",
                overlap=OverlapPolicy(overlap),
                payload=payload,
            )
        )
    store.reset_meters()
    clock.set(T0 + HOUR - 5_000)
    stack_shapes.trigger(shape, store, queue, clock, cfg).tick("units")
    clock.set(T0 + HOUR)
    registry = HandlerRegistry()
    registry.add("noop", lambda _ctx: None)
    worker = Worker(store, queue, MemoryTelemetry(), clock, cfg, registry, "units", logger_for=quiet_logger)
    started: list[Started] = []
    for _, body in queue.receive(runs):
        begun = worker.begin(parse_run_message(body), clock.now_ms() + 900_000)
        assert isinstance(begun, Started), begun
        started.append(begun)
    before_beats = store.total_write_units()
    for _ in range(heartbeats):
        clock.advance(cfg.heartbeat_seconds * 1000)
        for run in started:
            assert worker.heartbeat(run)
    beat_units = store.total_write_units() - before_beats
    for run in started:
        worker.finish(run, HandlerResult(True))
    assert len(started) == runs, f"{len(started)} of {runs} runs started"
    by_step = {label: units / runs for label, units in sorted(store.by_label.items())}
    total = store.total_write_units() - beat_units
    job_item_writes = store.write_units.get("jobs", 0)
    return RunUnits(
        overlap,
        payload_bytes,
        runs,
        total / runs,
        beat_units / (runs * heartbeats) if heartbeats else 0.0,
        store.read_units / runs,
        job_item_writes / runs,
        by_step,
        by_table={name: units / runs for name, units in sorted(store.write_units.items())},
        shape=shape.name,
        by_write={
            label: {name: units / runs for name, units in sorted(tables.items()) if units}
            for label, tables in sorted(store.by_write.items())
        },
    )


# Which phase of a run each labelled write belongs to (the labels core/transitions/ gives).
PHASES = {
    "create run": "claim",
    "advance job": "claim",
    "claim head": "claim",  # the successor claim: one put of the next head (core/transitions/head_claim.py)
    "start run": "start",
    "commit succeeded": "commit",
}


def by_phase(units: RunUnits) -> dict[str, float]:
    """A run's write units by phase (claim, start, commit; heartbeats apart)."""
    phases = {"claim": 0.0, "start": 0.0, "commit": 0.0}
    for label, value in units.by_step.items():
        if label in PHASES:
            phases[PHASES[label]] += value
    return phases
