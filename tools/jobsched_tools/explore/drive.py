"""The services as each actor (or the drive) sees them, and the drive to quiescence after a
schedule: the stream's retry of a registration that did not finish, ticks once a minute up to the
window's end, the detector, and workers draining the queue. Deterministic, on the base clock.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from jobsched.core.clock import Clock
from jobsched.core.writes import RUNS
from jobsched.services.detector import MissDetector
from jobsched.services.messages import parse_run_message
from jobsched.services.registrar import Registrar
from jobsched.services.trigger import Trigger
from jobsched.services.worker import FENCED_OUT, HandlerResult, Started, Worker

from jobsched_tools.explore.world import World


class _NullLogger:
    def info(self, msg: object, *args: object, **kwargs: Any) -> None:
        pass

    warning = error = info


_LOG = QUIET_LOG = _NullLogger()
# The drive ends this long after the window whose occurrences must all have records.
DRIVE_AFTER_MS = 150_000
BEAT_MS = 20_000  # the drive's heartbeats: fewer than a worker's, within the 30 s lease


# --- services as each actor sees them ------------------------------------------------------------


class Services:
    """The services built on one store, queue and clock (an actor's, or the drive's)."""

    def __init__(self, world: World, store: Any, queue: Any, clock: Clock, name: str) -> None:
        cfg = world.cfg
        self.clock = clock
        self.registrar_inline = Registrar(store, world.telemetry, clock, cfg, queue, report=False)
        self.trigger = Trigger(
            store,
            queue,
            world.telemetry,
            clock,
            cfg,
            parallel_queries=False,
            claim_concurrency=1,
            registrar=self.registrar_inline,
            claimer_id=name,
            read_claim_shape=world.read_claim_shape,
        )
        early = Trigger(
            store,
            queue,
            world.telemetry,
            clock,
            cfg,
            parallel_queries=False,
            claim_concurrency=1,
            claimer_id=name,
            read_claim_shape=world.read_claim_shape,
        )
        self.registrar = Registrar(
            store,
            world.telemetry,
            clock,
            cfg,
            queue,
            known_targets={"t"},
            claim_now=lambda job_id: early.claim_now(job_id, "registrar"),
        )
        self.detector = MissDetector(
            store,
            queue,
            world.telemetry,
            clock,
            cfg,
            parallel_queries=False,
            registrar=self.registrar_inline,
            dead_letter_sender=world.dead_letter_queue,
        )
        self.worker = Worker(
            store,
            queue,
            world.telemetry,
            clock,
            cfg,
            world.registry,
            name,
            logger_for=lambda _run_id: _LOG,
            rng=random.Random(0),
            dead_letter_sender=world.dead_letter_queue,
            adopt_scheduled=world.adopt_scheduled,
        )
        from jobsched.services.operations import Operations

        self.ops = Operations(store, queue, world.telemetry, clock, cfg)


# --- the drive to quiescence and the final checks -------------------------------------------------


@dataclass
class _Running:
    started: Started
    receipt: str
    began: int
    beat: int


def quiesce(world: World, redeliver_registration: bool) -> None:
    """Drive everything to quiescence on the base clock: the stream's retry of a registration
    that did not finish, ticks once a minute up to the window's end, the detector, and workers
    draining the queue (each handler runs ``handler_ms``, heartbeating). Deterministic."""
    # The drive's calls go through the same wrappers (no actor: no scheduling point), so its
    # writes are checked and its commits counted like the explored actors'.
    drive = Services(world, world.store, world.queue, world.clock, "drive")
    if redeliver_registration:
        drive.registrar.apply(world.job_id)
        world.after_write([])
    running: list[_Running] = []
    catch_up_until = world.window_end + DRIVE_AFTER_MS
    end = catch_up_until + 10 * 60_000  # a bound: the drive ends when nothing is left to happen
    next_tick = world.clock.now_ms()
    while world.clock.now_ms() <= end:
        now = world.clock.now_ms()
        if next_tick <= now <= world.window_end:
            drive.trigger.tick(f"drive-{now}")
            next_tick = now + 60_000
        # After the window, overdue occurrences are not caught up any more (nothing would end).
        drive.detector.run(f"drive-{now}", leases_only=now > catch_up_until)
        _deliver(world, drive.worker, running)
        _progress(world, drive.worker, running)
        world.after_write([])
        wake = _next_event(world, running, next_tick, catch_up_until)
        if wake is None:
            break
        world.clock.set(wake)


def _deliver(world: World, worker: Worker, running: list[_Running]) -> None:
    while True:
        batch = world.mq.receive(10)
        if not batch:
            return
        for receipt, body in batch:
            begun = worker.begin(parse_run_message(body), world.clock.now_ms() + 900_000)
            if isinstance(begun, Started):
                world.exec_start(begun)
                now = world.clock.now_ms()
                running.append(_Running(begun, receipt, now, now))
            else:
                world.mq.delete(receipt)


def _progress(world: World, worker: Worker, running: list[_Running]) -> None:
    now = world.clock.now_ms()
    beat_ms = BEAT_MS
    for entry in list(running):
        if now - entry.began >= world.handler_ms:
            running.remove(entry)
            worker.finish(entry.started, HandlerResult(True))
            world.exec_end(entry.started)
            world.mq.delete(entry.receipt)
        elif now - entry.beat >= beat_ms:
            entry.beat = now
            if not worker.heartbeat(entry.started):
                running.remove(entry)
                worker.finish(entry.started, FENCED_OUT)
                world.exec_end(entry.started)
                world.mq.delete(entry.receipt)


def _next_event(world: World, running: list[_Running], next_tick: int, catch_up_until: int) -> int | None:
    """The next instant something can happen in the drive, or None when nothing can."""
    now = world.clock.now_ms()
    cfg = world.cfg
    times: list[int] = []
    if next_tick <= world.window_end:
        times.append(next_tick)
    visible = world.mq.next_visible_at_ms()
    if visible is not None:
        times.append(visible)
    for entry in running:
        times.append(min(entry.began + world.handler_ms, entry.beat + BEAT_MS))
    for run in world.inner.tables[RUNS].values():
        if "check_at" in run:
            times.append(int(run["check_at"]) + cfg.clock_skew_allowance_ms + 1)
    times += world.overdue_times(catch_up_until)
    later = [t for t in times if t > now]
    return min(later) if later else None
