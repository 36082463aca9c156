"""Building an explored world: the set-ups (the world before the explored actors act, built
once per set-up and copied after) and ``build``, which binds each actor's program to its own
services and clock.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from jobsched.core.errors import QueueError, StoreError
from jobsched.core.invariants import ALL
from jobsched.core.transitions import bookkeeping_op
from jobsched.core.writes import JOBS, Put, Update
from jobsched.services.messages import parse_run_message
from jobsched.services.reconciler import DRAIN_HOLD_MS
from jobsched.services.trigger import Trigger
from jobsched.services.worker import HandlerResult, Started

from jobsched_tools.explore.drive import Services
from jobsched_tools.explore.model import CFG, JOB_ID, MINUTE, NEW, SECOND, T0, ActorSet, ActorSpec, job_item
from jobsched_tools.explore.programs import PROGRAMS
from jobsched_tools.explore.world import OffsetClock, World

_SETUPS: dict[tuple[str, str, str, str, str], tuple[Any, ...]] = {}
SETUPS = (
    "registered",
    "claimed",
    "claimed-manual",
    "edited-unapplied",
    "held-dead",
    "missed",
    "ran-deleted",
    "resumed-reconciled",
    "resumed-suspected",
    "recovered-waiting",
    "held-due",
    "manual-waiting",
    "canary-running",
    "overtaker-running",
)
# "resumed-reconciled": when the person resumed the job (its stream record comes late), and when
# the reconcile pass first saw the difference (the date it gives the change).
RESUMED_AT = T0 + 4 * MINUTE + 30 * SECOND
RESUME_SEEN_AT = T0 + 5 * MINUTE + 10 * SECOND


def _setup(
    world: World,
    setup: str,
    overlap: str,
    schedule: str,
    after_completion: str = "none",
    job: tuple[tuple[str, Any], ...] = (),
) -> None:
    """The world before the explored actors act, built once per set-up and copied after:
    "registered" (the job alone), "claimed" (a tick at 00:04 claimed 00:05), "claimed-manual"
    (and a manual run at 00:04:30 joined the chain behind it), "edited-unapplied" (a person
    re-timed the job at 00:02:30, its stream record has not come, and a reconcile pass saw the
    difference at 00:02:40: the next pass, a minute on, applies it)."""
    cached = _SETUPS.get((setup, overlap, schedule, after_completion, repr(job)))
    if cached is None:
        world.clock.set(T0)
        drive = Services(world, world.inner, world.mq, world.clock, "setup")
        item = job_item(schedule, overlap, after_completion, job)
        world.inner.write([Put(JOBS, item, (), "person puts job")])
        drive.registrar.apply(JOB_ID)
        world.after_write([])
        if setup in ("claimed", "claimed-manual"):
            world.clock.set(T0 + 4 * MINUTE)
            drive.trigger.tick("setup")
            world.after_write([])
        if setup == "claimed-manual":
            world.clock.set(T0 + 4 * MINUTE + 30 * SECOND)
            drive.ops.trigger(JOB_ID, request_id="setup")
            world.after_write([])
        if setup == "edited-unapplied":
            world.clock.set(T0 + 2 * MINUTE + 30 * SECOND)
            retimed = job_item(NEW, overlap, after_completion, job)
            world.inner.write([Put(JOBS, retimed, (), "person puts job")])
            world.clock.set(T0 + 2 * MINUTE + 40 * SECOND)
            drive.detector.run("setup")
            world.after_write([])
        if setup == "held-dead":
            # 00:05's worker starts it and dies; the manual run's worker then meets it running
            # (cancel_other: asks it to stop; buffer_all: waits behind it).
            world.clock.set(T0 + 4 * MINUTE)
            drive.trigger.tick("setup")
            world.clock.set(T0 + 4 * MINUTE + 30 * SECOND)
            drive.ops.trigger(JOB_ID, request_id="setup")
            world.clock.set(T0 + 5 * MINUTE)
            for receipt, body in sorted(world.mq.receive(10), key=lambda m: "@manual" in str(m[1]["run_id"])):
                world.clock.set(world.clock.now_ms() + 5 * SECOND)
                drive.worker.begin(parse_run_message(body), world.clock.now_ms() + 900_000)
                world.mq.delete(receipt)
            world.after_write([])
        if setup == "missed":
            # 00:05 came due with no tick; the detector records it missed (misfire: skip).
            world.clock.set(T0 + 7 * MINUTE)
            drive.detector.run("setup")
            world.after_write([])
        if setup == "ran-deleted":
            # 00:05 claimed at 00:04 and run at 00:05; a person deletes the job at 00:06.
            world.clock.set(T0 + 4 * MINUTE)
            drive.trigger.tick("setup")
            world.clock.set(T0 + 5 * MINUTE)
            for receipt, body in world.mq.receive(10):
                begun = drive.worker.begin(parse_run_message(body), world.clock.now_ms() + 900_000)
                if isinstance(begun, Started):
                    drive.worker.finish(begun, HandlerResult(True))
                world.mq.delete(receipt)
            world.clock.set(T0 + 6 * MINUTE)
            world.inner.delete(JOBS, {"job_id": JOB_ID}, (), "person deletes job")
            drive.registrar.apply(JOB_ID)
            world.after_write([])
        _redate_and_waiting_setups(world, drive, setup)
        SETUP_STEPS.get(setup, _no_more_steps)(world, drive)
        if setup not in SETUPS:
            raise ValueError(f"unknown set-up {setup!r}")
        cached = (copy.deepcopy(world.inner.tables), world.mq.snapshot(), list(world.ledger.marks))
        _SETUPS[(setup, overlap, schedule, after_completion, repr(job))] = cached
        world.trace.clear()
        world.ledger.findings.clear()
        world.ledger.seen.clear()
        world.telemetry.events.clear()
        return
    tables, (messages, seq), marks = cached
    world.inner.tables = copy.deepcopy(tables)
    world.mq.restore(messages, seq)
    world.ledger.marks = list(marks)


def _redate_and_waiting_setups(world: World, drive: Services, setup: str) -> None:
    """Issue 34's later set-ups (``_setup``): a resume whose stream record comes late, and runs
    waiting for a worker or a turn."""
    key = {"job_id": JOB_ID}
    if setup in ("resumed-reconciled", "resumed-suspected"):
        # Paused at 00:01 (applied); resumed at 00:04:30, its stream record late. The reconcile
        # pass sees the difference at 00:05:10 ("resumed-suspected") and applies it a minute
        # on, dated 00:05:10 (provisional: ``redate_floor``), so 00:05 was taken as not due: the
        # record, when it comes, dates the change at 00:04:30 and settles 00:05 behind the
        # job's place.
        world.clock.set(T0 + MINUTE)
        world.inner.update(Update(JOBS, key, (), "person updates job", set={"enabled": False}))
        drive.registrar.apply(JOB_ID)
        world.after_write([])
        world.clock.set(RESUMED_AT)
        world.inner.update(Update(JOBS, key, (), "person updates job", set={"enabled": True}))
        passes = 2 if setup == "resumed-reconciled" else 1
        for at in (RESUME_SEEN_AT, RESUME_SEEN_AT + MINUTE + 5 * SECOND)[:passes]:
            world.clock.set(at)
            drive.detector.run("setup")
            world.after_write([])
    if setup == "recovered-waiting":
        # 00:05's worker starts it at 00:05 and dies. The manual run made at 00:04:30 behind it
        # got no worker (its messages wait, the worker function throttled): the detector
        # redispatched it at 00:05:35 (token 2), and its first message (token 1) is still queued.
        world.clock.set(T0 + 4 * MINUTE)
        drive.trigger.tick("setup")
        world.clock.set(T0 + 4 * MINUTE + 30 * SECOND)
        drive.ops.trigger(JOB_ID, request_id="setup")
        world.clock.set(T0 + 5 * MINUTE)
        for seq, body, _ in world.mq.queued():
            taken = world.mq.take(seq) if "@manual" not in str(body["run_id"]) else None
            if taken is not None:
                drive.worker.begin(parse_run_message(taken[1]), world.clock.now_ms() + 900_000)
                world.mq.delete(taken[0])
        world.clock.set(T0 + 5 * MINUTE + 35 * SECOND)
        drive.detector.run("setup")
        world.after_write([])
    if setup == "held-due":
        # A manual run made at 00:03:50 started at 00:03:55 and holds the turn (its worker
        # died); 00:05, claimed at 00:04, comes due behind it; a second manual run is made at
        # 00:04:30 behind 00:05. Neither message is taken yet.
        world.clock.set(T0 + 3 * MINUTE + 50 * SECOND)
        drive.ops.trigger(JOB_ID, request_id="first")
        world.clock.set(T0 + 3 * MINUTE + 55 * SECOND)
        for receipt, body in world.mq.receive(10):
            drive.worker.begin(parse_run_message(body), world.clock.now_ms() + 900_000)
            world.mq.delete(receipt)
        world.clock.set(T0 + 4 * MINUTE)
        drive.trigger.tick("setup")
        world.clock.set(T0 + 4 * MINUTE + 30 * SECOND)
        drive.ops.trigger(JOB_ID, request_id="setup")
        world.after_write([])


def _manual_waiting(world: World, drive: Services) -> None:
    """00:05 claimed at 00:04, a manual run at 00:04:30 behind it; at 00:05 the manual run's
    worker finds 00:05 pending (due, not started) and parks the manual run behind it
    (``buffer_one``). 00:05's message is still queued."""
    world.clock.set(T0 + 4 * MINUTE)
    drive.trigger.tick("setup")
    world.clock.set(T0 + 4 * MINUTE + 30 * SECOND)
    drive.ops.trigger(JOB_ID, request_id="setup")
    world.clock.set(T0 + 5 * MINUTE)
    manual = [seq for seq, body, _ in world.mq.queued() if body.get("kind") == "manual"]
    taken = world.mq.take(manual[0])
    assert taken is not None
    drive.worker.begin(parse_run_message(taken[1]), world.clock.now_ms() + 900_000)
    world.mq.delete(taken[0])
    world.after_write([])


def _overtaker_running(world: World, drive: Services) -> None:
    """The successor model's ``overtaker_running`` on today's path: 00:05 claimed at 00:04; the
    manual run made at 00:04:30 starts then, passing over 00:05 (not yet due: W3, marked
    overtaken), and its worker dies (its dispatch lease lapses at 00:05). 00:05's message is still
    queued."""
    world.clock.set(T0 + 4 * MINUTE)
    drive.trigger.tick("setup")
    world.clock.set(T0 + 4 * MINUTE + 30 * SECOND)
    drive.ops.trigger(JOB_ID, request_id="setup")
    manual = [seq for seq, body, _ in world.mq.queued() if body.get("kind") == "manual"]
    taken = world.mq.take(manual[0])
    assert taken is not None
    drive.worker.begin(parse_run_message(taken[1]), world.clock.now_ms() + 900_000)
    world.mq.delete(taken[0])
    world.after_write([])


def _no_more_steps(_world: World, _drive: Services) -> None:
    return None


# Set-ups built by a function of their own (the world after registration, and the setup's services).
# "canary-running": ShardCount was lowered from 2 to the stack's 1; the detector's bookkeeping
# records the dropped shard (``shard_high`` 2) and found it empty at DRAINED_SINCE, an hour before
# 00:06 (its drain hold ends then). A canary of the old version still runs.
CANARY_SHARDS = 2
DRAINED_SINCE = T0 + 6 * MINUTE - DRAIN_HOLD_MS


def _canary_running(world: World, drive: Services) -> None:
    """A tick of the old version (ShardCount 2) claims 00:05 at 00:04, so its lease sits on shard
    1, which the stack dropped (a worker's start renews the lease where it is); at 00:05 a worker
    starts it and dies. The bookkeeping as a detector left it: shard 1 drained since
    ``DRAINED_SINCE`` (a claim written after the detector's last look)."""
    world.clock.set(T0 + 4 * MINUTE)
    canary_cfg = world.cfg.model_copy(update={"shard_count": CANARY_SHARDS})
    canary = Trigger(
        world.inner,
        world.mq,
        world.telemetry,
        world.clock,
        canary_cfg,
        parallel_queries=False,
        claim_concurrency=1,
        claimer_id="canary",
    )
    canary.tick("setup")
    world.clock.set(T0 + 5 * MINUTE)
    for receipt, body in world.mq.receive(10):
        drive.worker.begin(parse_run_message(body), world.clock.now_ms() + 900_000)
        world.mq.delete(receipt)
    sets = {"shard_high": CANARY_SHARDS, "drained_since": DRAINED_SINCE, "passes": 0}
    world.inner.update(bookkeeping_op(None, sets, (), DRAINED_SINCE))
    world.after_write([])


SETUP_STEPS: dict[str, Callable[[World, Services], None]] = {
    "manual-waiting": _manual_waiting,
    "canary-running": _canary_running,
    "overtaker-running": _overtaker_running,
}


def build(actor_set: ActorSet, offsets: tuple[int, ...], invariants: tuple[str, ...] = ALL) -> World:
    world = World(CFG, actor_set.budget, invariants)
    world.overlap = actor_set.overlap
    world.schedule = actor_set.schedule
    world.after_completion = actor_set.after_completion
    world.job = actor_set.job
    world.extra_check = actor_set.check
    world.handler_ms = actor_set.handler_ms
    _setup(
        world,
        actor_set.setup,
        actor_set.overlap,
        actor_set.schedule,
        actor_set.after_completion,
        actor_set.job,
    )
    world.clock.set(actor_set.at)
    world.window_end = actor_set.window_end
    # A change whose stream record has not come yet is delivered in the drive at the latest.
    world.registration_pending = actor_set.setup == "edited-unapplied"
    world.check_invariants()  # the tokens as set up
    for spec, offset in zip(actor_set.actors, offsets, strict=True):
        clock = OffsetClock(world.clock, spec.offset_ms + offset)
        svc = Services(world, world.store, world.queue, clock, spec.name)
        program = PROGRAMS[spec.kind]
        world.sched.add(spec.name, bind_program(program, world, svc, spec))
    return world


def bind_program(
    program: Callable[[World, Services, ActorSpec], None], world: World, svc: Services, spec: ActorSpec
) -> Callable[[], None]:
    def run() -> None:
        try:
            program(world, svc, spec)
        except (StoreError, QueueError) as error:  # the invocation fails, as a Lambda's would
            world.note(f"{spec.name}: invocation failed: {type(error).__name__}: {error}")

    return run
