"""What each kind of explored actor does: a program is a function of the world, the actor's
services and its spec, run on the actor's own thread; every store and queue call it makes through
``world.store`` / ``world.queue`` (or the ``Services`` built for it) is a scheduling point. Its
kind is its key in ``PROGRAMS``. The toy protocols are the explorer's own tests.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from jobsched.core.clock import ms_to_dt
from jobsched.core.errors import ConditionFailed
from jobsched.core.writes import JOBS, Put, Update, eq, not_exists
from jobsched.services.messages import parse_run_message
from jobsched.services.operations import JobNotFound
from jobsched.services.worker import FENCED_OUT, HandlerResult, Started, Worker

from jobsched_tools.explore.drive import QUIET_LOG, Services
from jobsched_tools.explore.model import JOB_ID, MINUTE, NEW, ActorSpec, job_item
from jobsched_tools.explore.sched import Call
from jobsched_tools.explore.world import TAKE, OffsetClock, World


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
