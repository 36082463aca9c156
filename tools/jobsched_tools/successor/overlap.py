"""The overlap policies' actors on shape f's chain: a worker that walks (W1-W13), decides (W14)
and writes its start, skip or wait (W15, W16), commits, and promotes the run waiting behind its
run; the detector's part (a waiting run's lapsed lease: promote or recheck; a run asked to stop
that never started: ended as cancelled, and the run behind it promoted); and the holder's worker
of a set-up run (``finisher``).

The walk's rules are switches too: ``Protocol.dropped`` may name ``walk.W1``, ``walk.W3``,
``walk.W4``, ``walk.W8``, ``walk.W12``, ``walk.W13``, ``walk.W16`` (the fallback to a skip when
the wait's own W16 part fails), ``promote.at_end`` (the holder's worker does not promote).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any, cast

from jobsched.core.errors import ConditionFailed
from jobsched.core.writes import Item, Update, WriteOp, failing_parts

from jobsched_tools.explore.sched import OK
from jobsched_tools.successor import invariants_overlap
from jobsched_tools.successor import writes as w
from jobsched_tools.successor import writes_overlap as wo
from jobsched_tools.successor.model import OVERLAP, PROGRAMS, TRIES, ActorSpec, message
from jobsched_tools.successor.world import DUP, LOST, Message, World

WALK_RULES = (
    "walk.W1",
    "walk.W3",
    "walk.W4",
    "walk.W8",
    "walk.W12",
    "walk.W13",
    "walk.W16",
    "promote.at_end",
)
STARTED, WAITED, SKIPPED, STALE, UNANSWERED, GAVE_UP = (
    "started",
    "waited",
    "skipped",
    "stale",
    "lost",
    "gave up",
)


def policy(world: World) -> wo.Policy:
    return cast(wo.Policy, world.proto.overlap)


def on(world: World, rule: str) -> bool:
    return rule not in world.proto.dropped


# --- the walk, through the world (each read a scheduling point) ----------------------------------


def walk(
    world: World, after: str | None, now: int, walker: str, overtake: bool
) -> tuple[Item | None, list[Item]]:
    """The unfinished run holding the turn before ``walker`` (None: free), and the runs passed over
    as not yet due (W3), which the start marks overtaken."""
    run_id, seen = after, set[str]()
    passed: list[Item] = []
    for _ in range(wo.MAX_CHAIN_STEPS):
        if run_id is None:
            return None, passed
        seen.add(run_id)
        run = world.get(run_id)
        if run_id == walker and on(world, "walk.W12"):
            return run, passed
        if overtake and on(world, "walk.W3") and run is not None and wo.not_yet_due(run, now):
            passed.append(run)
            run_id = run.get("after_run_id")
            continue
        if on(world, "walk.W4") and run is not None and wo.waits_for_walker(run, walker):
            run_id = run.get("after_run_id")
            continue
        if (
            not on(world, "walk.W8")
            and run is not None
            and run.get("overtook")
            and run["status"] in wo.FINISHED
        ):
            return None, passed  # the mutant: a finished overtaker ends the walk (W10)
        holds, following = wo.chain_step(run)
        if holds:
            return run, passed
        if run is not None and following in seen:
            following = run.get("after_run_id")  # W9
        run_id = following
    return {"run_id": run_id, "status": wo.BUFFERED, "walk_exhausted": True}, passed  # W11


def _failed_tags(failed: ConditionFailed) -> set[str]:
    return {c.why.split(":", 1)[0] for c in failing_parts(failed.op.condition, failed.current)}


STALE_PARTS = frozenset(
    {
        "start.status_scheduled",
        "start.version",
        "start.not_asked_to_stop",
        "skip.status_scheduled",
        "skip.version",
        "buffer.status_scheduled",
        "buffer.version",
    }
)


def _turn(
    world: World, run: Item, body: Mapping[str, Any], now: int
) -> tuple[Item | None, list[Item], str | None]:
    """The holder (W1, else the walk from the message's link, W2), the runs passed over, and the
    overtaker the worker found finished (the start clears its mark)."""
    overtaker = run.get("overtaken_by")
    finished_overtaker: str | None = None
    if overtaker is not None:
        found = world.get(str(overtaker))
        if found is not None and found["status"] in wo.UNFINISHED:
            if on(world, "walk.W1"):
                return found, [], None  # W1: wait for (or skip behind) the overtaker, without walking
        else:
            finished_overtaker = str(overtaker)
    after = body.get("after_run_id")
    holder, passed = walk(
        world, str(after) if after else None, now, str(run["run_id"]), policy(world) != "buffer_all"
    )
    return holder, passed, finished_overtaker


def _plan(
    world: World, body: Mapping[str, Any], run: Item, now: int
) -> tuple[str, list[WriteOp], Item | None, list[Item]]:
    proto, run_id, version = world.proto, str(body["run_id"]), int(body["version"])
    holder, passed, finished_overtaker = (
        (None, [], None) if policy(world) == "allow" else _turn(world, run, body, now)
    )
    decision = wo.decide(policy(world), run_id, holder)
    if decision == wo.RUN:
        return decision, wo.start(proto, run_id, version, now, passed, finished_overtaker), holder, passed
    assert holder is not None
    if decision == wo.SKIP:
        return (
            decision,
            [wo.skip(proto, run_id, version, _skipped_for(world, holder, passed))],
            holder,
            passed,
        )
    if policy(world) == "buffer_all" and holder.get("buffered_next") not in (None, run_id):
        return (
            decision,
            [wo.buffer_unnamed(proto, run_id, version, str(holder["run_id"]), now)],
            holder,
            passed,
        )
    return decision, wo.buffer(proto, policy(world), run_id, version, holder, now), holder, passed


def decide_and_write(world: World, body: Mapping[str, Any], now: int) -> str:
    """Walk, decide and write the start, the skip or the wait; decide again on a lost race."""
    run_id, version = str(body["run_id"]), int(body["version"])
    for _ in range(TRIES):
        run = world.get(run_id)
        if run is None:
            return STALE
        decision, ops, holder, passed = _plan(world, body, run, now)
        try:
            option = world.write(ops, f"{decision} {run_id}", now)
        except ConditionFailed as failed:
            tags = _failed_tags(failed)
            own = isinstance(failed.op, Update) and failed.op.key.get("run_id") == run_id
            if own and "buffer.nobody_waits_behind" in tags and on(world, "walk.W16"):
                # W16: a run waits behind this one: it is skipped, and its end promotes that run.
                assert holder is not None
                with contextlib.suppress(ConditionFailed):
                    skip = wo.skip(world.proto, run_id, version, _skipped_for(world, holder, passed))
                    if world.write([skip], skip.label, now) == LOST:
                        return UNANSWERED
                    promote_behind(world, run_id, now)
                return SKIPPED
            if own and tags & STALE_PARTS:
                return STALE
            continue
        if option == LOST:
            return UNANSWERED
        return {wo.RUN: STARTED, wo.SKIP: SKIPPED, wo.BUFFER: WAITED}[decision]
    return GAVE_UP


def _skipped_for(world: World, holder: Mapping[str, Any], passed: list[Item]) -> str:
    """W13: the first run passed over as not yet due, else the holder."""
    if passed and on(world, "walk.W13"):
        return str(passed[0]["run_id"])
    return str(holder["run_id"])


def promote_behind(world: World, holder_id: str, now: int) -> None:
    """After ``holder_id`` ended: promote the run waiting behind it and send its message."""
    holder = world.get(holder_id)
    waiting_id = holder.get("buffered_next") if holder else None
    if waiting_id is None:
        return
    waiting = world.get(str(waiting_id))
    if waiting is None or waiting["status"] != wo.BUFFERED or waiting.get("blocked_by") != holder_id:
        return
    _promote(world, waiting, holder_id, now)


def _promote(world: World, waiting: Item, holder_id: str, now: int) -> None:
    op = wo.promote(world.proto, waiting, holder_id, now)
    try:
        if world.write([op], op.label, now) == LOST:
            return
    except ConditionFailed:
        return
    world.send(message(waiting, int(op.set["version"])))


# --- the actors ------------------------------------------------------------------------------------


def _receive(world: World, worker: str, pattern: str | None, faults: bool) -> tuple[Message | None, bool]:
    """The oldest visible message (whose run id contains ``pattern``), held by ``worker``."""
    option = world.point("receive", f"receive {pattern or ''}".strip(), (OK, DUP) if faults else (OK,))
    for held in world.queue:
        if held.held_by is None and (pattern is None or pattern in str(held.body["run_id"])):
            held.held_by = worker
            world.seen(held.body)
            return held, option == DUP
    world.seen(None)
    return None, False


def worker(world: World, spec: ActorSpec) -> None:
    """``spec.arg``: how many messages (an int), or (how many, a run-id pattern)."""
    now = spec.at
    count, pattern = (spec.arg, None) if not isinstance(spec.arg, tuple) else spec.arg
    for _ in range(int(count or 1)):
        held, dup = _receive(world, spec.name, pattern, faults=not spec.name.startswith("drive"))
        if held is None:
            return
        body = held.body
        outcome = decide_and_write(world, body, now)
        if outcome == UNANSWERED:
            held.held_by = None  # no answer: the message comes again
            continue
        if outcome == STARTED:
            run_id, token = str(body["run_id"]), int(body["version"]) + 1
            done = w.commit(world.proto, run_id, token)
            try:
                answered = world.write([done], done.label, now) != LOST
            except ConditionFailed:
                answered = False  # replaced by a recovery: its worker commits
            if answered and on(world, "promote.at_end"):
                promote_behind(world, run_id, now)
            if answered:
                _owed(world, run_id)
        if dup:
            held.held_by = None
        else:
            world.delete_message(held)


def finisher(world: World, spec: ActorSpec) -> None:
    """The worker of a set-up run that is running (``spec.arg``): it commits and promotes."""
    run = world.get(str(spec.arg))
    if run is None or run["status"] != w.RUNNING:
        return
    done = w.commit(world.proto, str(spec.arg), int(run["version"]))
    try:
        if world.write([done], done.label, spec.at) == LOST:
            return
    except ConditionFailed:
        return
    if on(world, "promote.at_end"):
        promote_behind(world, str(spec.arg), spec.at)
    _owed(world, str(spec.arg))


def _owed(world: World, holder_id: str) -> None:
    for violation in invariants_overlap.owed_promotion(world.runs(), holder_id):
        world.find(*violation)


def detect(world: World, run: Item, now: int) -> bool:
    """The detector's part for a run whose ``check_at`` lapsed; True if it handled the run."""
    if run["status"] == wo.BUFFERED:
        holder_id = str(run["blocked_by"])
        holder = world.get(holder_id)
        if (
            holder is None
            or holder["status"] not in wo.UNFINISHED
            or holder.get("buffered_next") != run["run_id"]
        ):
            _promote(world, run, holder_id, now)
        else:
            with contextlib.suppress(ConditionFailed):
                world.write([wo.recheck(world.proto, run, now)], f"recheck {run['run_id']}", now)
        return True
    if run["status"] == w.SCHEDULED and run.get("cancel_requested") is not None:
        op = wo.end_cancelled(world.proto, run)
        try:
            if world.write([op], op.label, now) == LOST:
                return True
        except ConditionFailed:
            return True
        promote_behind(world, str(run["run_id"]), now)
        return True
    return False


PROGRAMS.update({"oworker": worker, "finisher": finisher})


class _Steps:
    worker = staticmethod(worker)
    detect = staticmethod(detect)


OVERLAP.append(_Steps())
