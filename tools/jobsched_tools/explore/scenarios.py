"""The explored worlds: one job, its set-up, and the actor sets (issue 25's core sets and more).

The job is ``rate(5 minutes)`` (00:00, 00:05, 00:10 ...), registered at 00:00; the explored
actors act at 00:04 (the tick's lookahead reaches 00:05), unless a set says otherwise. A re-time
moves it to ``rate(3 minutes)`` (00:06, 00:09 ...). Occurrences up to ``window_end`` must all
have their records once the world is driven to quiescence.

To add an actor: write a program (a function of the world, the actor's services and its spec,
run on the actor's own thread; every store and queue call it makes through ``world.store`` /
``world.queue`` is a scheduling point), register it in ``PROGRAMS``, and use its kind in an
``ActorSet``.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from jobsched.core.clock import ms_to_dt
from jobsched.core.config import SchedulerConfig
from jobsched.core.errors import ConditionFailed, QueueError, StoreError
from jobsched.core.invariants import ALL
from jobsched.core.job import JobDefinition
from jobsched.core.writes import JOBS, Put, Update, eq, not_exists
from jobsched.services.messages import parse_run_message
from jobsched.services.operations import JobNotFound
from jobsched.services.worker import FENCED_OUT, HandlerResult, Started, Worker

from jobsched_tools.explore.sched import Call
from jobsched_tools.explore.world import HANDLER_MS, QUIET_LOG, TAKE, Budget, OffsetClock, Services, World

T0 = int(datetime(2026, 12, 1, tzinfo=UTC).timestamp() * 1000)  # 00:00:00Z
SECOND = 1_000
MINUTE = 60_000
JOB_ID = "j"
OLD = "rate(5 minutes)"
NEW = "rate(3 minutes)"
CFG = SchedulerConfig(shard_count=1, trigger_groups=1)


@dataclass(frozen=True)
class ActorSpec:
    name: str
    kind: str
    offset_ms: int = 0
    arg: Any = None


@dataclass(frozen=True)
class ActorSet:
    name: str
    actors: tuple[ActorSpec, ...]
    setup: str = "registered"  # "registered": the job alone; "claimed": a tick claimed 00:05 at 00:04
    at: int = T0 + 4 * MINUTE
    window_end: int = T0 + 8 * MINUTE
    budget: Budget = field(default_factory=Budget)
    overlap: str = "skip"
    schedule: str = OLD
    after_completion: str = "none"  # action_after_completion (issue 29)
    # More fields of the job's definition (``max_runs``, ``pause_on_failure``, ``retry`` ...).
    job: tuple[tuple[str, Any], ...] = ()
    note: str = ""
    # A check of the set's own, run after the drive (the toy protocols of the explorer's tests).
    check: Callable[[World], None] | None = None
    handler_ms: int = HANDLER_MS  # how long each handler runs in the drive to quiescence


def job_item(
    schedule: str = OLD,
    overlap: str = "skip",
    after_completion: str = "none",
    job: tuple[tuple[str, Any], ...] = (),
) -> dict[str, Any]:
    return JobDefinition(
        job_id=JOB_ID,
        schedule=schedule,
        target="t",
        overlap=overlap,
        action_after_completion=after_completion,
        **dict(job),
    ).to_item()


# --- programs: what each kind of actor does --------------------------------------------------


def tick(_world: World, svc: Services, spec: ActorSpec) -> None:
    svc.trigger.tick(spec.name)


def detector(_world: World, svc: Services, spec: ActorSpec) -> None:
    svc.detector.run(spec.name)


def manual(world: World, svc: Services, spec: ActorSpec) -> None:
    try:
        svc.ops.trigger(JOB_ID, request_id=spec.name)
    except JobNotFound:
        world.note(f"{spec.name}: the job is gone (deleted): the manual run is refused")


def backfill(_world: World, svc: Services, spec: ActorSpec) -> None:
    start, end = spec.arg
    svc.ops.backfill(JOB_ID, ms_to_dt(start), ms_to_dt(end))


def registrar(world: World, svc: Services, spec: ActorSpec) -> None:
    """A person's write to the job item (an atomic step of its own), then the registrar's apply
    of its stream record."""
    key = {"job_id": JOB_ID}
    change, _, schedule = str(spec.arg).partition(":")
    if change == "retime":
        item = job_item(schedule or NEW, world.overlap, world.after_completion, world.job)
        world.store.write([Put(JOBS, item, (), "person puts job")])
    elif change == "pause":
        world.store.update(Update(JOBS, key, (), "person updates job", set={"enabled": False}))
    elif change == "delete":
        world.store.delete(JOBS, key, (), "person deletes job")
    elif change == "reput":  # the same job registered again (after a delete: a new life)
        item = job_item(world.schedule, world.overlap, world.after_completion, world.job)
        world.store.write([Put(JOBS, item, (), "person puts job")])
    else:
        raise ValueError(f"unknown change {change!r}")
    world.person_last = change
    world.person_at = svc.clock.now_ms()
    world.registration_pending = True
    svc.registrar.apply(JOB_ID)
    world.registration_pending = False


def person(world: World, svc: Services, spec: ActorSpec) -> None:
    """A person's write to the job item alone: its stream record comes late (``stream``), or
    never, and the reconcile pass applies it. ``arg``: "retime[:SCHEDULE]", "pause", "resume",
    "edit" (a map of the definition: the payload), "delete" or "reput" (the same job again, as
    registered: re-registration after a delete)."""
    key = {"job_id": JOB_ID}
    change, _, schedule = str(spec.arg).partition(":")
    if change == "retime":
        item = job_item(schedule or NEW, world.overlap, world.after_completion, world.job)
        world.store.write([Put(JOBS, item, (), "person puts job")])
    elif change in ("pause", "resume"):
        world.store.update(Update(JOBS, key, (), "person updates job", set={"enabled": change == "resume"}))
    elif change == "edit":  # a scalar of the definition
        world.store.update(Update(JOBS, key, (), "person updates job", set={"description": "edited"}))
    elif change == "edit-map":  # a map of the definition
        retry = {"max_attempts": 2, "backoff_seconds": 1}
        world.store.update(Update(JOBS, key, (), "person updates job", set={"retry": retry}))
    elif change == "delete":
        world.store.delete(JOBS, key, (), "person deletes job")
    elif change == "reput":
        item = job_item(world.schedule, world.overlap, world.after_completion, world.job)
        world.store.write([Put(JOBS, item, (), "person puts job")])
    else:
        raise ValueError(f"unknown change {change!r}")
    world.person_last = change
    world.person_at = svc.clock.now_ms()
    world.registration_pending = True  # its stream record is delivered in the drive at the latest


def bulk(world: World, svc: Services, spec: ActorSpec) -> None:
    """``jobsched pause/resume --group g``: one bounded operation over the group's jobs, each
    through the ordinary pause or resume and its registration. ``arg``: "pause" or "resume"."""
    world.person_last = str(spec.arg)
    world.person_at = svc.clock.now_ms()
    world.registration_pending = True
    svc.ops.set_enabled_where(spec.arg == "resume", group="g", limit=10)
    world.registration_pending = False


def stream(world: World, svc: Services, spec: ActorSpec) -> None:
    """The registrar's apply of a stream record that comes late, dated when the person wrote
    it (``arg``: that instant)."""
    svc.registrar.apply(JOB_ID, changed_at=int(spec.arg) if spec.arg is not None else None)
    world.registration_pending = False


def late_record(world: World, svc: Services, spec: ActorSpec) -> None:
    """The stream record of a person's write, late (after the reconcile pass applied the write):
    the registrar's apply of it, dated when the person wrote it (``arg``: that instant), with
    the image the write left (the job as set up: ``RESUMED_AT``'s resume)."""
    image = job_item(world.schedule, world.overlap, world.after_completion, world.job)
    svc.registrar.on_stream_record("MODIFY", JOB_ID, image, changed_at=int(spec.arg))
    world.registration_pending = False
    world.records_delivered.append(int(spec.arg))


def worker(
    world: World, svc: Services, spec: ActorSpec, beat_ms: int | None = None, fails: bool = False
) -> None:
    """Receive a message (which one is a choice when reordering), start it, let the handler run
    (a scheduling point of its own), finish it. ``arg``: how many messages (default 1).
    ``beat_ms``: the live worker heartbeats once, on a clock that far ahead, before its handler
    ends (a detector acting that late finds a live worker's lease renewed, as it would).
    ``fails``: every handler fails."""
    beating = None
    if beat_ms is not None:
        beating = Worker(
            world.store,
            world.queue,
            world.telemetry,
            OffsetClock(svc.clock, beat_ms),
            world.cfg,
            world.registry,
            spec.name,
            logger_for=lambda _run_id: QUIET_LOG,
            rng=random.Random(0),
        )
    for _ in range(int(spec.arg or 1)):
        option = world.store._point(Call("receive", "receive", dynamic=lambda: _receivable(world)))
        if not option.startswith(TAKE) or option == TAKE + "none":
            return
        taken = world.mq.take(int(option[len(TAKE) :]))
        if taken is None:
            return
        result = HandlerResult(not fails, error="the handler failed" if fails else None)
        _work(world, svc, *taken, result, beating)


def _work(
    world: World,
    svc: Services,
    receipt: str,
    body: dict[str, Any],
    result: HandlerResult,
    beating: Worker | None = None,
) -> None:
    """Start the run, let its handler run (a scheduling point of its own), finish it. With
    ``beating``, the live worker heartbeats first; fenced out, it ends without deleting the
    message (its record fails, and SQS delivers it again)."""
    world.seen_by_actor(body)
    begun = svc.worker.begin(parse_run_message(body), svc.clock.now_ms() + 900_000)
    if isinstance(begun, Started):
        world.exec_start(begun)
        try:
            if beating is not None and not beating.heartbeat(begun):
                svc.worker.finish(begun, FENCED_OUT)
                return
            world.store._point(Call("handler", f"handler of {begun.message.run_id} runs"))
            svc.worker.finish(begun, result)
        finally:  # also when the worker crashes: its handler dies with it
            world.exec_end(begun)
    world.mq.delete(receipt)


def worker_of(world: World, svc: Services, spec: ActorSpec) -> None:
    """A worker that receives the first message of one kind of run (``arg``: the kind, and
    whether its handler succeeds; a failure is retried), whatever is queued before it: the
    set decides which worker takes which run, without --reorder's every order."""
    kind, succeeds = spec.arg
    world.store._point(Call("receive", f"receive a {kind} run"))
    fresh = [seq for seq, body, received in world.mq.queued() if received == 0 and body.get("kind") == kind]
    world.seen_by_actor(fresh[:1])
    taken = world.mq.take(fresh[0]) if fresh else None
    if taken is not None:
        _work(world, svc, *taken, HandlerResult(True) if succeeds else HandlerResult(False, "it failed"))


def beating_worker(world: World, svc: Services, spec: ActorSpec) -> None:
    """A worker that heartbeats once a minute on (``worker``'s ``beat_ms``): alive, as a detector
    acting a minute later sees it."""
    worker(world, svc, spec, beat_ms=MINUTE)


def failing_worker(world: World, svc: Services, spec: ActorSpec) -> None:
    """A worker whose handlers fail (``pause_on_failure``)."""
    worker(world, svc, spec, fails=True)


def zombie_worker(world: World, svc: Services, spec: ActorSpec) -> None:
    """A worker whose handler fails, then freezes (a long pause, a frozen sandbox) before its
    retry write, past its lease: it wakes after its run was recovered (and maybe started again)
    and writes the retry with the token it holds. Its handler returned before the freeze, so it
    runs beside nothing; only its write is late."""
    option = world.store._point(Call("receive", "receive", dynamic=lambda: _receivable(world)))
    if not option.startswith(TAKE) or option == TAKE + "none":
        return
    taken = world.mq.take(int(option[len(TAKE) :]))
    if taken is None:
        return
    receipt, body = taken
    world.seen_by_actor(body)
    begun = svc.worker.begin(parse_run_message(body), svc.clock.now_ms() + 900_000)
    if isinstance(begun, Started):
        world.exec_start(begun)
        world.exec_end(begun)  # the handler failed at once
        world.store._point(Call("freeze", f"{spec.name} frozen before its retry of {begun.message.run_id}"))
        svc.worker.finish(begun, HandlerResult(False, "the handler failed"))
    world.mq.delete(receipt)


def _receivable(world: World) -> tuple[str, ...]:
    fresh = [seq for seq, _, received in world.mq.queued() if received == 0]
    if not fresh:
        return (TAKE + "none",)
    if not world.budget.reorder:
        fresh = fresh[:1]
    return tuple(f"{TAKE}{seq}" for seq in fresh)


def toy_increment(world: World, _svc: Services, _spec: ActorSpec) -> None:
    """A broken toy protocol: read a counter, write it plus one, unconditionally."""
    item = world.store.get(JOBS, {"job_id": "counter"}) or {"job_id": "counter", "n": 0}
    world.store.write([Put(JOBS, {**item, "n": int(item["n"]) + 1}, (), "toy increment")])


def toy_compare_and_set(world: World, _svc: Services, _spec: ActorSpec) -> None:
    """The toy protocol fixed: the write is conditional on the value read; a loser reads again."""
    while True:
        item = world.store.get(JOBS, {"job_id": "counter"})
        n = int(item["n"]) if item is not None else 0
        why = "the counter as read"
        condition = (eq("n", n, why),) if item is not None else (not_exists("job_id", why),)
        try:
            world.store.write([Put(JOBS, {"job_id": "counter", "n": n + 1}, condition, "toy increment")])
            return
        except ConditionFailed:
            continue


def counted_twice(world: World) -> None:
    """The toy's promise: every increment counts."""
    toys = [a for a in world.sched.actors if a.name.startswith("toy")]
    item = world.inner.tables[JOBS].get("counter") or {"n": 0}
    if int(item["n"]) != len(toys):
        world.find("lost_update", "counter", f"{item['n']} after {len(toys)} increments")


PROGRAMS: dict[str, Callable[[World, Services, ActorSpec], None]] = {
    "toy_increment": toy_increment,
    "toy_compare_and_set": toy_compare_and_set,
    "tick": tick,
    "detector": detector,
    "manual": manual,
    "backfill": backfill,
    "registrar": registrar,
    "worker": worker,
    "worker_of": worker_of,
    "beating_worker": beating_worker,
    "failing_worker": failing_worker,
    "zombie_worker": zombie_worker,
    "person": person,
    "stream": stream,
    "late_record": late_record,
    "bulk": bulk,
}


# --- building a world ----------------------------------------------------------------------------


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


def _no_more_steps(_world: World, _drive: Services) -> None:
    return None


# Set-ups built by a function of their own (the world after registration, and the setup's services).
SETUP_STEPS: dict[str, Callable[[World, Services], None]] = {"manual-waiting": _manual_waiting}


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
        world.sched.add(spec.name, _bind(program, world, svc, spec))
    return world


def _bind(
    program: Callable[[World, Services, ActorSpec], None], world: World, svc: Services, spec: ActorSpec
) -> Callable[[], None]:
    def run() -> None:
        try:
            program(world, svc, spec)
        except (StoreError, QueueError) as error:  # the invocation fails, as a Lambda's would
            world.note(f"{spec.name}: invocation failed: {type(error).__name__}: {error}")

    return run


# --- the actor sets --------------------------------------------------------------------------------


def _a(name: str, kind: str, offset_ms: int = 0, arg: Any = None) -> ActorSpec:
    return ActorSpec(name, kind, offset_ms, arg)


CORE: dict[str, ActorSet] = {
    s.name: s
    for s in (
        ActorSet("tick-retime", (_a("tick", "tick"), _a("registrar", "registrar", arg="retime"))),
        ActorSet("tick-manual", (_a("tick", "tick"), _a("manual", "manual"))),
        ActorSet(
            "detector-worker",
            (_a("worker", "worker"), _a("detector", "detector")),
            setup="claimed",
            at=T0 + 5 * MINUTE + 33 * SECOND,
            note="the 00:05 run's dispatch lease lapsed as its message arrives",
        ),
        ActorSet("tick-tick-crash", (_a("tickA", "tick"), _a("tickB", "tick"))),
        ActorSet("pause-tick", (_a("registrar", "registrar", arg="pause"), _a("tick", "tick"))),
        ActorSet("manual-retime", (_a("manual", "manual"), _a("registrar", "registrar", arg="retime"))),
    )
}

MORE: dict[str, ActorSet] = {
    s.name: s
    for s in (
        ActorSet(
            "tick-retime-detector",
            (_a("tick", "tick"), _a("registrar", "registrar", arg="retime"), _a("detector", "detector")),
        ),
        ActorSet("delete-tick", (_a("registrar", "registrar", arg="delete"), _a("tick", "tick"))),
        ActorSet(
            "backfill-tick",
            (_a("backfill", "backfill", arg=(T0, T0 + 5 * MINUTE + 20 * SECOND)), _a("tick", "tick")),
            at=T0 + 5 * MINUTE + 20 * SECOND,
            note="00:05 came due unclaimed; a backfill of (00:00, 00:05:20] races the late tick",
        ),
        ActorSet(
            "tick-retime-skewed",
            (_a("tick", "tick", offset_ms=3_000), _a("registrar", "registrar", arg="retime")),
            at=T0 + 3 * MINUTE + 27 * SECOND + 500,
            note="the trigger's clock 3 s ahead reaches 00:05 while the registrar's window does not",
        ),
        ActorSet(
            "workers",
            (_a("workerA", "worker"), _a("workerB", "worker")),
            setup="claimed-manual",
            at=T0 + 5 * MINUTE,
            note="00:05's run and a manual run queued behind it reach two workers at once",
        ),
        ActorSet(
            "manual-detector",
            (_a("manual", "manual"), _a("detector", "detector")),
            at=T0 + 7 * MINUTE,
            note="00:05 came due unclaimed (no tick) and is overdue: the detector settles it "
            "while a person's manual run joins the chain",
        ),
        ActorSet(
            "manual-worker-tick",
            (_a("manual", "manual"), _a("tick", "tick"), _a("worker", "worker", arg=2)),
            budget=Budget(crashes=0, reorder=True),
        ),
        ActorSet(
            "completion-delete",
            (_a("worker", "worker"), _a("detector", "detector"), _a("registrar", "registrar", arg="pause")),
            setup="claimed",
            at=T0 + 5 * MINUTE + SECOND,
            schedule="at(2026-12-01T00:05:00)",
            after_completion="delete",
            note="a one-time job that deletes itself after completion: its run, the reconcile pass's "
            "delete and a person's pause, in any order",
        ),
    )
}

# Issue 29's overlap policies: the same races under buffer_all (every run waits its turn, in
# chain order) and cancel_other (the wait asks the holder to stop).
WAITING: dict[str, ActorSet] = {
    s.name: s
    for overlap in ("buffer_all", "cancel_other")
    for s in (
        ActorSet(
            f"workers-{overlap}",
            (_a("workerA", "worker"), _a("workerB", "worker")),
            setup="claimed-manual",
            at=T0 + 5 * MINUTE,
            overlap=overlap,
            budget=Budget(crashes=1, reorder=True),
            note="00:05's run and a manual run behind it reach two workers at once, in any order",
        ),
        ActorSet(
            f"manual-worker-tick-{overlap}",
            (_a("manual", "manual"), _a("tick", "tick"), _a("worker", "worker", arg=2)),
            overlap=overlap,
            budget=Budget(crashes=0, reorder=True),
        ),
        ActorSet(
            f"detector-worker-{overlap}",
            (_a("worker", "worker"), _a("detector", "detector")),
            setup="claimed-manual",
            at=T0 + 5 * MINUTE + 33 * SECOND,
            overlap=overlap,
            note="00:05's dispatch lease lapsed as its message arrives; a manual run queued behind",
        ),
    )
}

# Issue 34, item 12: the walk's rules around an overtake, with runs that wait and runs that last.
OVERTAKES: dict[str, ActorSet] = {
    s.name: s
    for s in (
        ActorSet(
            "backfill-retry-buffer-one",
            (
                _a("backfill", "backfill", arg=(T0 - SECOND, T0)),
                _a("workerB", "worker_of", arg=("backfill", False)),
                _a("workerS", "worker_of", offset_ms=2 * SECOND, arg=("scheduled", True)),
            ),
            setup="claimed",
            at=T0 + 4 * MINUTE + 59 * SECOND,
            overlap="buffer_one",
            note="a backfill of 00:00 overtakes 00:05 (claimed, not yet due) and fails; 00:05, due to "
            "its worker 2 s ahead, waits behind it; the backfill's retry must not wait behind 00:05",
        ),
        ActorSet(
            "overtake-long-run",
            (_a("manual", "manual"), _a("worker", "worker_of", arg=("manual", True))),
            setup="claimed",
            at=T0 + 4 * MINUTE + 30 * SECOND,
            window_end=T0 + 11 * MINUTE,
            handler_ms=6 * MINUTE,
            note="a manual run overtakes 00:05 and ends; 00:05 then runs 6 minutes, past 00:10, "
            "whose walk reaches it only through the manual run (which overtook it)",
        ),
        ActorSet(
            "manuals-skewed",
            (_a("manualA", "manual"), _a("manualB", "manual", offset_ms=SECOND)),
            setup="claimed",
            at=T0 + 4 * MINUTE + 30 * SECOND,
            budget=Budget(crashes=0),
            note="two people trigger manual runs at 00:04:30, one's clock 1 s ahead; 00:05 claimed: "
            "both overtake it, and the one behind is skipped behind the other, which runs (its "
            "instant 1 s ahead of the skip's clock: due all the same)",
        ),
    )
}

# The explorer's own tests: a broken toy protocol it must catch, and its fix it must pass.
TOYS: dict[str, ActorSet] = {
    s.name: s
    for s in (
        ActorSet(
            "toy-lost-update",
            (_a("toyA", "toy_increment"), _a("toyB", "toy_increment")),
            budget=Budget(crashes=0),
            check=counted_twice,
        ),
        ActorSet(
            "toy-compare-and-set",
            (_a("toyA", "toy_compare_and_set"), _a("toyB", "toy_compare_and_set")),
            budget=Budget(crashes=0),
            check=counted_twice,
        ),
    )
}

# Issue 34: the newer actors together (the reconcile pass, delete after completion, the waiting
# policies' recovery, max_runs), each promise's checker able to fail (tests/sim/test_switches.py).
PROMISES: dict[str, ActorSet] = {
    s.name: s
    for s in (
        ActorSet(
            "reconcile-stream-tick",
            (
                _a("detector", "detector"),
                _a("stream", "stream", arg=T0 + 2 * MINUTE + 30 * SECOND),
                _a("tick", "tick"),
            ),
            setup="edited-unapplied",
            note="a re-time's stream record comes late, as the reconcile pass applies the change and "
            "a tick claims",
        ),
        ActorSet(
            "reconcile-edit-tick",
            (
                _a("detector", "detector"),
                _a("registrar", "registrar", arg="retime:rate(4 minutes)"),
                _a("tick", "tick"),
            ),
            setup="edited-unapplied",
            note="a second edit (and its record) after a lost one, as the reconcile pass applies the "
            "first and a tick claims",
        ),
        ActorSet(
            "completion-manual",
            (_a("worker", "worker"), _a("detector", "detector"), _a("manual", "manual")),
            setup="claimed",
            at=T0 + 5 * MINUTE + SECOND,
            schedule="at(2026-12-01T00:05:00)",
            after_completion="delete",
            note="a one-time job that deletes itself after completion: its run, the reconcile pass's "
            "delete and a person's manual run, in any order",
        ),
        *(
            ActorSet(
                f"holder-dead-{overlap}",
                (_a("detector", "detector"), _a("workerA", "worker"), _a("workerB", "worker")),
                setup="held-dead",
                at=T0 + 5 * MINUTE + 40 * SECOND,
                overlap=overlap,
                budget=Budget(crashes=1, reorder=True),
                note="00:05's worker died while it ran; the manual run waits behind it (cancel_other: "
                "and asked it to stop); its lease lapsed: the detector recovers it as two workers take "
                "what is sent",
            )
            for overlap in ("cancel_other", "buffer_all")
        ),
        ActorSet(
            "max-runs-backfill",
            (
                _a("backfill", "backfill", arg=(T0, T0 + 5 * MINUTE + 20 * SECOND)),
                _a("tick", "tick"),
                _a("manual", "manual"),
            ),
            at=T0 + 5 * MINUTE + 20 * SECOND,
            job=(("max_runs", 2),),
            note="a job limited to 2 scheduled runs: 00:05 came due unclaimed; a backfill of it, a "
            "late tick and a manual run",
        ),
    )
}

# pause_on_failure: a run failing for good (one attempt) pauses the job, racing a person's write.
FAILING = (("pause_on_failure", True), ("retry", {"max_attempts": 1}))
PROMISES.update(
    {
        s.name: s
        for s in (
            *(
                ActorSet(
                    f"pause-{change}",
                    (_a("worker", "failing_worker"), _a("person", "person", arg=change)),
                    setup="claimed",
                    at=T0 + 5 * MINUTE,
                    job=FAILING,
                    budget=Budget(crashes=0),
                    note="00:05's run fails for good and pauses the job, as a person edits or deletes it",
                )
                for change in ("edit", "edit-map", "delete")
            ),
            ActorSet(
                "backfills-missed",
                (
                    _a("backfillA", "backfill", arg=(T0, T0 + 7 * MINUTE)),
                    _a("worker", "worker"),
                    _a("backfillB", "backfill", arg=(T0, T0 + 7 * MINUTE)),
                ),
                setup="missed",
                at=T0 + 7 * MINUTE + 30 * SECOND,
                window_end=T0 + 7 * MINUTE,
                job=(("misfire", {"policy": "skip"}),),
                budget=Budget(crashes=0),
                note="00:05 was recorded missed; two people backfill it at once while a worker takes "
                "what is sent (operations.md: each missed record becomes its run, at most once)",
            ),
            *(
                ActorSet(
                    name,
                    (_a("registrar", "registrar", arg="reput"), _a("tick", "tick")),
                    setup="ran-deleted",
                    at=T0 + 7 * MINUTE,
                    window_end=T0 + 12 * MINUTE,
                    job=job,
                    budget=Budget(crashes=0),
                    note="a job ran 00:05 and was deleted; registered again, it starts a new life "
                    "(operations.md: to bring a deleted job back, register it again)",
                )
                for name, job in (("reregister", ()), ("max-runs-reregister", (("max_runs", 1),)))
            ),
            ActorSet(
                "tick-retime-earlier",
                (_a("tick", "tick"), _a("registrar", "registrar", arg="retime:rate(2 minutes)")),
                at=T0 + 3 * MINUTE + 40 * SECOND,
                budget=Budget(crashes=0),
                note="a tick claims 00:05 at 00:03:40 as a person re-times the job to every 2 minutes: "
                "the new timing's first occurrence (00:04) comes before the claimed one",
            ),
            ActorSet(
                "bulk-pause-tick",
                (_a("bulk", "bulk", arg="pause"), _a("tick", "tick")),
                job=(("group", "g"),),
                note="a person pauses the job's group (a bulk operation) as a tick claims",
            ),
            ActorSet(
                "report-delete",
                (
                    _a("stream", "stream", arg=T0 + 2 * MINUTE + 30 * SECOND),
                    _a("person", "person", arg="delete"),
                ),
                setup="edited-unapplied",
                budget=Budget(crashes=0),
                note="a late record's registration writes its report as the person deletes the job",
            ),
        )
    }
)

# Issue 34: the last condition parts no set reached (tests/sim/test_switches.py): a late stream
# record's redate racing a claim and a backfill, and a stale message walking a recovered run.
PROMISES.update(
    {
        s.name: s
        for s in (
            ActorSet(
                "redate-tick",
                (_a("record", "late_record", arg=RESUMED_AT), _a("tick", "tick")),
                setup="resumed-reconciled",
                at=T0 + 9 * MINUTE + 10 * SECOND,
                window_end=T0 + 11 * MINUTE,
                budget=Budget(crashes=0),
                note="a resume's stream record comes after the reconcile pass applied it, as a tick "
                "claims 00:10: the record settles 00:05 (due after the person's write) behind the "
                "chain's end as the tick left it",
            ),
            ActorSet(
                "redate-backfill",
                (
                    _a("backfill", "backfill", arg=(RESUMED_AT, T0 + 5 * MINUTE + 20 * SECOND)),
                    _a("record", "late_record", arg=RESUMED_AT),
                ),
                setup="resumed-reconciled",
                at=T0 + 7 * MINUTE,
                window_end=T0 + 11 * MINUTE,
                budget=Budget(crashes=0),
                note="a person backfills 00:05 (the reconcile pass dated the resume after it) as the "
                "resume's late record settles it: one record, one run",
            ),
            ActorSet(
                "redate-reconcile-tick",
                (
                    _a("detector", "detector"),
                    _a("record", "late_record", arg=RESUMED_AT),
                    _a("tick", "tick"),
                ),
                setup="resumed-suspected",
                at=T0 + 8 * MINUTE + 40 * SECOND,
                window_end=T0 + 11 * MINUTE,
                budget=Budget(crashes=0),
                note="a resume's stream record comes late, as the reconcile pass applies the resume "
                "and a tick claims 00:10: 00:05, due after the person's write, runs or is recorded "
                "whichever of the record and the pass applies the change first (issue 34 item 4)",
            ),
            *(
                ActorSet(
                    f"waiting-race-{overlap}",
                    (
                        _a("workerS", "worker_of", arg=("scheduled", True)),
                        _a("workerM", "worker_of", arg=("manual", True)),
                    ),
                    setup="held-due",
                    at=T0 + 5 * MINUTE + SECOND,
                    overlap=overlap,
                    budget=Budget(crashes=0),
                    note="a manual run holds the turn; 00:05 comes due behind it and a second manual "
                    "run behind 00:05: each one's worker walks and waits (cancel_other: and asks its "
                    "holder to stop) at once",
                )
                for overlap in ("cancel_other", "buffer_one")
            ),
            ActorSet(
                "stale-message-recovered",
                (_a("detector", "detector"), _a("worker", "worker")),
                setup="recovered-waiting",
                at=T0 + 6 * MINUTE + 10 * SECOND,
                overlap="buffer_one",
                budget=Budget(crashes=0, reorder=True),
                note="a manual run behind 00:05 (its worker died) waits for a worker; the detector "
                "redispatches it again as a worker takes any of its messages, the first one stale",
            ),
        )
    }
)

# Issue 38: a run failed for good owes its job's own dead-letter queue its outcome, written in the
# failure's own write; its worker pays it, and the detector's lease sweep pays what is still owed
# (the worker died, or its send failed). Two payers, either's send unanswered or its actor dead.
DEAD_LETTER_QUEUE = "arn:aws:sqs:us-east-1:123456789012:explored-dead-letters"
PROMISES.update(
    {
        s.name: s
        for s in (
            ActorSet(
                "dead-letter-payers",
                (_a("worker", "failing_worker"), _a("detector", "detector", offset_ms=40 * SECOND)),
                setup="claimed",
                at=T0 + 5 * MINUTE,
                job=(("retry", {"max_attempts": 1}), ("dead_letter_queue_arn", DEAD_LETTER_QUEUE)),
                budget=Budget(crashes=1, unanswered=1),
                note="00:05's run fails for good, owing its dead letter; its worker pays it as the "
                "detector, 40 s on (past the debt's check_at), pays what it finds owed",
            ),
        )
    }
)

# Issue 34: the races the fencing parts of the retry, the promotion and the overtake stop, reached
# (tests/sim/test_switches.py switches the parts off).
FENCES: dict[str, ActorSet] = {
    s.name: s
    for s in (
        ActorSet(
            "zombie-retry",
            (
                _a("zombie", "zombie_worker"),
                _a("detector", "detector", offset_ms=40 * SECOND),
                _a("worker", "worker", offset_ms=40 * SECOND),
            ),
            setup="claimed",
            at=T0 + 5 * MINUTE,
            budget=Budget(crashes=0),
            note="00:05's handler fails and its worker freezes before the retry write; its lease "
            "lapses, the detector (40 s on) recovers the run and another worker starts it; the "
            "frozen worker then writes its retry with the token it held",
        ),
        ActorSet(
            "promoters-buffer_one",
            (
                _a("workerS", "beating_worker"),
                _a("detector", "detector", offset_ms=40 * SECOND),
                _a("workerP", "worker_of", offset_ms=40 * SECOND, arg=("manual", True)),
            ),
            setup="manual-waiting",
            at=T0 + 5 * MINUTE + 5 * SECOND,
            overlap="buffer_one",
            budget=Budget(crashes=0),
            note="the manual run waits behind 00:05; 00:05 runs and ends, and its worker, having "
            "read the waiting run, is slow to promote it; the waiting run's lease lapses and the "
            "detector (40 s on) promotes it, and another worker starts it: two promoters at once",
        ),
        ActorSet(
            "overtake-recovered",
            (
                _a("manual", "manual"),
                _a("worker", "worker_of", arg=("manual", True)),
                _a("detector", "detector", offset_ms=42 * SECOND),
            ),
            setup="claimed",
            at=T0 + 4 * MINUTE + 50 * SECOND,
            budget=Budget(crashes=0),
            note="a manual run's worker passes over 00:05 (not yet due) as a detector 42 s on finds "
            "00:05's dispatch lease lapsed and recovers it (pending, a new token): the overtake's "
            "mark then lands on, or is refused by, a run whose token moved",
        ),
    )
}

# Issue 34: redundant condition parts switched off together (tests/sim/test_switches.py PAIRS).
PROMISES.update(
    {
        s.name: s
        for s in (
            ActorSet(
                "pause-detector",
                (_a("registrar", "registrar", arg="pause"), _a("detector", "detector")),
                at=T0 + 7 * MINUTE,
                note="00:05 came due unclaimed and is overdue: the detector settles it as a person "
                "pauses the job (whose registration records it missed)",
            ),
        )
    }
)

ACTOR_SETS: dict[str, ActorSet] = {**CORE, **MORE, **WAITING, **OVERTAKES, **PROMISES, **TOYS, **FENCES}
