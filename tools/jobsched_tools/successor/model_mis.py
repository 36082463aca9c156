"""The actors for misfire policies, ``max_runs`` and one-time jobs, and backfill (``writes_mis.py``),
on the model's world: the same programs as ``model.py`` where the feature changes a write, so
every store and queue call is still a scheduling point.

- the trigger claims with ``writes_mis.claim`` (the end marker for a life's last run);
- the detector settles an overdue head chunk by chunk under the job's misfire policy, each chunk
  one transaction that leaves the next head (a crash between chunks abandons the settle there),
  and sends the runs each chunk made;
- the registrar's change carries the life's count to its new head, and leaves a finished job
  (its end marker landed) alone but for a delete;
- operations' backfill of a past instant (refused at or after the head).

``drive`` is ``model.drive`` with these actors.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from typing import Any

from jobsched.core.errors import ConditionFailed
from jobsched.core.writes import STATE, Item, Put, Update

from jobsched_tools.successor import writes as w
from jobsched_tools.successor import writes_mis as m
from jobsched_tools.successor.invariants import heads
from jobsched_tools.successor.model import TRIES, ActorSpec, message, worker
from jobsched_tools.successor.model import tick as base_tick
from jobsched_tools.successor.world import LOST, World

DRIVE_STEP_MS = 30 * w.SECOND


def _proto(world: World) -> m.MisProtocol:
    assert isinstance(world.proto, m.MisProtocol)
    return world.proto


def _claim(world: World, head: Item, now: int, claimer: str) -> Put:
    return m.claim(_proto(world), head, now, claimer)


def tick(world: World, spec: ActorSpec) -> None:
    """The base model's tick, claiming with this topic's claim (an end marker after the last)."""
    base_tick(world, spec, _claim)


def detector(world: World, spec: ActorSpec) -> None:
    now, proto = spec.at, _proto(world)
    for entry in world.due_page(None, now - w.SKEW_MS, stale=True):
        run = world.get(str(entry["run_id"]))
        if run is None or run.get("check_at") is None or int(run["check_at"]) > now - w.SKEW_MS:
            continue
        if run["status"] == w.RUNNING:
            _write_and_send(world, w.recover(proto, run, now), run, now)
        elif run["status"] == w.SCHEDULED and run["kind"] in (w.MANUAL, m.BACKFILL):
            _write_and_send(world, w.redispatch(proto, run, now), run, now)
        elif run["status"] == w.SCHEDULED:
            successor = world.get(str(run["next_key"]))
            if successor is None:
                if now > int(run["at"]) + w.GRACE_MS:
                    settle(world, run, now)
                continue
            if successor["status"] == w.CLOSED:
                continue  # a closed head: its change or settle closed it
            claimed_at = int(successor.get("claimed_at", 0))
            if now >= claimed_at + w.DISPATCH_LEASE_MS + w.SKEW_MS:
                _write_and_send(world, w.redispatch(proto, run, now), run, now)


def settle(world: World, head: Item, now: int) -> None:
    """Chunk after chunk, as the product's ``Settler``: each chunk one transaction that leaves the
    next head; the next chunk reads that head again (a crash between them abandons the rest)."""
    proto = _proto(world)
    while True:
        chunk = m.settle_chunk(proto, head, now)
        if not _write(world, chunk.ops, f"settle chunk from {head['run_id']}", now):
            return
        for run in chunk.runs:
            world.send(message(run, int(run["version"])))
        if not chunk.more or chunk.next_head is None:
            return
        nxt = world.get(chunk.next_head)
        if nxt is None or nxt["status"] != w.SCHEDULED:
            return
        head = nxt


def _write(world: World, ops: list[Any], detail: str, now: int) -> bool:
    try:
        return world.write(ops, detail, now) != LOST
    except ConditionFailed:
        return False


def _write_and_send(world: World, op: Any, run: Item, now: int) -> None:
    if _write(world, [op], op.label, now):
        world.send(message(run, int(op.set["version"])))


def ended(runs: dict[str, Item]) -> bool:
    return any(r["status"] == w.END for r in runs.values())


def change(world: World, spec: ActorSpec) -> None:
    if not apply_change(world, spec.name, spec.arg, spec.at):
        world.pending.append(spec)


def apply_change(world: World, name: str, intent: w.Intent, now: int) -> bool:
    """``model.apply_change`` with a life: the new head carries the closed head's count (a closed
    head's occurrence did not run), and a finished job (its end marker landed: no head) takes
    only a delete."""
    proto = _proto(world)
    for _ in range(TRIES):
        state = world.get("j", "state")
        if state is None or name in state.get("applied", ()) or state["status"] == w.DELETED:
            return True
        if (intent.kind, state["status"]) in (("pause", w.PAUSED), ("resume", w.ACTIVE)):
            return True
        runs = {str(r["run_id"]): r for r in world.runs_of_job()}
        found = heads(runs)
        head = found[0] if state["status"] == w.ACTIVE and len(found) == 1 else None
        if head is not None and int(head["at"]) <= now and proto.change_settles_first:
            # The product's rule: what came due before the change is settled first, under the
            # policy (late runs within grace); the change then closes the head that leaves.
            settle(world, head, now)
            continue
        if state["status"] == w.ACTIVE and head is None:
            if not ended(runs):
                continue
            if intent.kind != "delete":
                world.note(f"{name}: the job is finished: {intent.kind} has nothing to change")
                return True
        plan = w.change(proto, state, head, runs, intent, now, name)
        ops = _with_life(proto, plan.ops, head, state, now)
        if _write(world, ops, f"change {name}", now):
            return True
    return False


def _with_life(
    proto: m.MisProtocol, planned: list[Any], head: Item | None, state: Item, now: int
) -> list[Any]:
    """The change's writes with the life's count carried (the new head's ``runs_before``, and the
    state's while paused), and a due head's close marked for the policy's oracle."""
    count = int(head.get("runs_before", 0)) if head is not None else int(state.get("runs_before", 0))
    ops = []
    for op in planned:
        if isinstance(op, Put) and op.label == "change new head":
            op = replace(op, item=m.shape(proto, op.item, count))
        elif isinstance(op, Update) and op.label.startswith("change closes") and head is not None:
            if int(head["at"]) <= now:  # a due head closed (the mutant only: the rule settles it)
                late = int(head["at"]) >= now - w.GRACE_MS
                fate = "change: late within grace" if late else "change: overdue"
                op = replace(op, set={**op.set, "decided": "missed", "fate": fate, "settled_at": now})
        elif isinstance(op, Update) and op.table == STATE:
            op = replace(op, set={**op.set, "runs_before": count})
        ops.append(op)
    return ops


def backfill(world: World, spec: ActorSpec) -> None:
    """A person's backfill of the instant ``spec.arg``; tried again when the head moved."""
    now, proto = spec.at, _proto(world)
    for _ in range(TRIES):
        state = world.get("j", "state")
        if state is None or state["status"] != w.ACTIVE:
            world.note(f"{spec.name}: the job is not active: the backfill is refused")
            return
        runs = {str(r["run_id"]): r for r in world.runs_of_job()}
        found = heads(runs)
        if len(found) != 1:
            if ended(runs):
                world.note(f"{spec.name}: the job is finished: the backfill is refused")
                return
            continue
        try:
            run, ops = m.backfill(proto, found[0], runs, int(spec.arg), now)
        except m.Refused as refused:
            world.note(f"{spec.name}: refused: {refused}")
            return
        try:
            if world.write(ops, f"backfill {spec.name}", now) == LOST:
                continue
        except ConditionFailed:
            continue  # the head or the record moved: read again
        world.send(message(run, int(run["version"])))
        return


PROGRAMS = {"tick": tick, "worker": worker, "detector": detector, "change": change, "backfill": backfill}


def drive(world: World, begin: int, end: int) -> None:
    """``model.drive`` with these actors: the pending changes, then every 30 s a detector sweep,
    a tick and a worker draining the queue."""
    world.release_held()
    for spec in list(world.pending):
        if apply_change(world, spec.name, spec.arg, begin):
            world.pending.remove(spec)
    now = begin
    while now <= end:
        detector(world, ActorSpec("drive-detector", "detector", now))
        tick(world, ActorSpec("drive-tick", "tick", now))
        for _ in range(20):
            if not world.queue:
                break
            with contextlib.suppress(ConditionFailed):
                worker(world, ActorSpec("drive-worker", "worker", now))
        now += DRIVE_STEP_MS
