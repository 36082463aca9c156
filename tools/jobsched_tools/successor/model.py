"""Shape f's actors, simplified and deterministic: each reads and writes only through the world
(``world.py``), so every store and queue call is a scheduling point, and acts at its own clock.

- the trigger queries the ``due`` page once (a page read at one point and used at later ones: a
  frozen claimer, thawed when the explorer picks it again), reads each head's successor, puts it
  (the claim), and sends the head's message;
- the worker receives, starts (the fence), runs and commits; a duplicate delivery comes again;
- the detector sweeps the ``due`` entries below now - skew: an overdue unclaimed head is settled
  (misfire ``skip``), a claimed run unstarted past ``claimed_at`` + dispatch lease + skew is
  dispatched again, a running run past its lease is recovered;
- the registrar applies a person's change (retime, pause, resume, delete) in one transaction;
- operations makes an ad-hoc (manual) run.

``drive`` runs them serially, without faults, until everything is settled: the level-triggered
repair every schedule ends with, before the final checks.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from jobsched.core.errors import ConditionFailed
from jobsched.core.writes import Item, Put

from jobsched_tools.successor import writes as w
from jobsched_tools.successor.invariants import heads
from jobsched_tools.successor.world import LOST, World

DRIVE_STEP_MS = 30 * w.SECOND
TRIES = 4  # a registrar's or an ad-hoc request's attempts before it leaves the change pending


@dataclass(frozen=True)
class ActorSpec:
    name: str
    kind: str  # tick, worker, detector, change, manual
    at: int  # the actor's clock
    arg: Any = None


def message(run: Item, version: int) -> dict[str, Any]:
    return {"run_id": run["run_id"], "version": version, "after_run_id": run.get("after_run_id")}


def claim_put(world: World, head: Item, now: int, claimer: str) -> Put:
    """The base model's claim of ``head`` (an extension passes its own to ``tick``)."""
    return w.claim(world.proto, head, now, claimer)


def tick(world: World, spec: ActorSpec, claim: Callable[[World, Item, int, str], Put] = claim_put) -> None:
    now = spec.at
    page = world.due_page(now - w.LOOKBACK_MS, now + w.LOOKAHEAD_MS, stale=True)
    for entry in page:
        if entry.get("kind") != w.TIMED or entry["status"] != w.SCHEDULED:
            continue
        successor = world.get(str(entry["next_key"]))
        if successor is not None:
            # A retried tick finds its own claim (``claimed_by``) and sends; any other: claimed.
            if successor.get("claimed_by") == spec.name and successor.get("after_run_id") == entry["run_id"]:
                world.send(message(entry, int(entry["version"])))
            continue
        put = claim(world, entry, now, spec.name)
        try:
            option = world.write([put], put.label, now)
        except ConditionFailed:
            continue
        if option == LOST:
            again = world.get(str(entry["next_key"]))
            if again is None or again.get("claimed_by") != spec.name:
                continue
        world.send(message(entry, int(entry["version"])))


class OverlapSteps(Protocol):
    """The steps of a policy that walks the chain (overlap.py, which builds on this module and
    registers them in ``OVERLAP`` when imported: a hook, so that neither module imports the other
    back)."""

    def worker(self, world: World, spec: ActorSpec) -> None: ...
    def detect(self, world: World, run: Item, now: int) -> bool: ...


OVERLAP: list[OverlapSteps] = []


def _overlap_steps() -> OverlapSteps:
    if not OVERLAP:
        raise RuntimeError(
            "an overlap policy other than allow needs jobsched_tools.successor.overlap imported"
        )
    return OVERLAP[0]


def worker(world: World, spec: ActorSpec) -> None:
    if world.proto.overlap != "allow":  # a policy that walks the chain (overlap.py)
        _overlap_steps().worker(world, spec)
        return
    now = spec.at
    for _ in range(int(spec.arg or 1)):
        held, dup = world.receive(spec.name, faults=not spec.name.startswith("drive"))
        if held is None:
            return
        body = held.body
        op = w.start(world.proto, str(body["run_id"]), int(body["version"]), now)
        try:
            if world.write([op], op.label, now) == LOST:
                held.held_by = None  # no answer: the message comes again
                continue
        except ConditionFailed:
            world.delete_message(held)  # fenced out: a stale or duplicate message
            continue
        done = w.commit(world.proto, str(body["run_id"]), int(body["version"]) + 1)
        with contextlib.suppress(ConditionFailed):  # replaced by a recovery: its worker commits
            world.write([done], done.label, now)
        if dup:
            held.held_by = None
        else:
            world.delete_message(held)


def detector(world: World, spec: ActorSpec) -> None:
    now, proto = spec.at, world.proto
    for entry in world.due_page(None, now - w.SKEW_MS, stale=True):
        run = world.get(str(entry["run_id"]))
        if run is None or run.get("check_at") is None or int(run["check_at"]) > now - w.SKEW_MS:
            continue
        if proto.overlap != "allow" and _overlap_steps().detect(world, run, now):
            continue  # a waiting run, a run asked to stop (overlap.py)
        if run["status"] == w.RUNNING:
            _write_and_send(world, w.recover(proto, run, now), run, now)
        elif run["status"] == w.SCHEDULED and run["kind"] == w.MANUAL:
            _write_and_send(world, w.redispatch(proto, run, now), run, now)
        elif run["status"] == w.SCHEDULED:
            successor = world.get(str(run["next_key"]))
            if successor is None:
                if now > int(run["at"]) + w.GRACE_MS:
                    _write(world, w.settle(proto, run, now), f"settle {run['run_id']}", now)
                continue
            if successor["status"] == w.CLOSED and not proto.marker_is_claim:
                continue  # a closed head: its change cancels it
            claimed_at = int(successor.get("claimed_at", 0))
            if now >= claimed_at + w.DISPATCH_LEASE_MS + w.SKEW_MS:
                _write_and_send(world, w.redispatch(proto, run, now), run, now)


def _write(world: World, ops: list[Any], detail: str, now: int) -> bool:
    try:
        return world.write(ops, detail, now) != LOST
    except ConditionFailed:
        return False


def _write_and_send(world: World, op: Any, run: Item, now: int) -> None:
    if _write(world, [op], op.label, now):
        world.send(message(run, int(op.set["version"])))


def change(world: World, spec: ActorSpec) -> None:
    if not apply_change(world, spec.name, spec.arg, spec.at):
        world.pending.append(spec)


def apply_change(world: World, name: str, intent: w.Intent, now: int) -> bool:
    """The registrar's apply of one change: True once it is applied (or has nothing to do)."""
    for _ in range(TRIES):
        state = world.get("j", "state")
        if state is None or name in state.get("applied", ()) or state["status"] == w.DELETED:
            return True
        if (intent.kind, state["status"]) in (("pause", w.PAUSED), ("resume", w.ACTIVE)):
            return True
        runs = {str(r["run_id"]): r for r in world.runs_of_job()}
        found = heads(runs)
        head = found[0] if state["status"] == w.ACTIVE and len(found) == 1 else None
        if state["status"] == w.ACTIVE and head is None:
            continue
        plan = w.change(world.proto, state, head, runs, intent, now, name)
        if _write(world, plan.ops, f"change {name}", now):
            return True
    return False


def manual(world: World, spec: ActorSpec) -> None:
    now = spec.at
    for _ in range(TRIES):
        state = world.get("j", "state")
        if state is None or state["status"] != w.ACTIVE:
            world.note(f"{spec.name}: the job is not active: the ad-hoc run is refused")
            return
        found = heads({str(r["run_id"]): r for r in world.runs_of_job()})
        if len(found) != 1:
            continue
        run, ops = w.adhoc(world.proto, found[0], spec.name, now)
        try:
            if world.write(ops, f"adhoc {spec.name}", now) == LOST:
                continue  # no answer: the request is made again (the same request id)
        except ConditionFailed as failed:
            if failed.op.label != "adhoc run":
                continue  # the head moved: read it again
            # Made by an earlier try whose answer was lost: send its message (again).
        world.send(message(run, 1))
        return


PROGRAMS = {"tick": tick, "worker": worker, "detector": detector, "change": change, "manual": manual}


def drive(world: World, begin: int, end: int) -> None:
    """Serially, without faults: the pending changes, then every ``DRIVE_STEP_MS`` a detector
    sweep, a tick and a worker draining the queue, until ``end``."""
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
            worker(world, ActorSpec("drive-worker", "worker", now))
        now += DRIVE_STEP_MS
