"""The search over shape f's model: every schedule with at most k preemptions, depth first, with
replay and state-fingerprint pruning: ``explore/search.py``'s ``search``, over this package's
world (``successor/world.py``: its fingerprint, its faults, its ledger) and its drive and final
checks (``finish``). The scheduler (``explore/sched.py``) is the product explorer's too: each
actor runs on its own thread and stops at every store and queue call.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from jobsched_tools.explore.search import Step, Tally, finish_once, play_script, search
from jobsched_tools.successor.invariants import ERROR, NEVER_APPLIED, check_final
from jobsched_tools.successor.ledger import Finding
from jobsched_tools.successor.model import drive
from jobsched_tools.successor.sets import ActorSet, build
from jobsched_tools.successor.world import World
from jobsched_tools.successor.writes import Protocol


@dataclass
class Result(Tally[Finding]):
    races: Counter[str] = field(default_factory=Counter)  # schedules in which each part stopped a write

    def summary(self) -> dict[str, object]:
        summary = super().summary()
        truncated = summary.pop("truncated")
        return {**summary, "races": sorted(self.races), "truncated": truncated}


def explore(
    actor_set: ActorSet,
    k: int,
    proto: Protocol | None = None,
    max_schedules: int | None = None,
    stop: bool = False,
) -> Result:
    proto = proto if proto is not None else Protocol()
    result = Result(actor_set.name, k)
    started = time.perf_counter()
    terminal: dict[bytes, list[Finding]] = {}
    finished = _finished(actor_set, terminal, result)
    search(lambda: build(actor_set, proto), finished, k, result, max_schedules, stop)
    result.states += len(terminal)
    result.seconds = time.perf_counter() - started
    return result


def _finished(
    actor_set: ActorSet, terminal: dict[bytes, list[Finding]], result: Result
) -> Callable[[World], list[Finding]]:
    def finished(world: World) -> list[Finding]:
        finish(world, actor_set, terminal)
        result.races.update(set(world.ledger.races))
        return world.ledger.findings

    return finished


def finish(world: World, actor_set: ActorSet, terminal: dict[bytes, list[Finding]]) -> None:
    """Drive the finished schedule to quiescence and check it (once per final state)."""
    finish_once(world, terminal, lambda: _drive_and_check(world, actor_set))


def _drive_and_check(world: World, actor_set: ActorSet) -> None:
    for actor in world.sched.actors:
        if actor.error is not None:
            world.find(ERROR, actor.name, actor.error)
    world.note("-- drive to quiescence --")
    begin = max(spec.at for spec in actor_set.actors)
    ext = actor_set.ext
    try:
        (ext.drive if ext is not None else drive)(world, begin, actor_set.window_end + actor_set.drive_after)
    except Exception as exc:  # an error of the drive is a finding, not a crash of the search
        world.find(ERROR, "drive", f"{type(exc).__name__}: {exc}")
    for spec in world.pending:
        world.find(NEVER_APPLIED, spec.name, f"{spec.arg} never applied")
    if ext is not None:
        violations = ext.final(world, actor_set)
    else:
        violations = check_final(world.runs(), world.ledger.history, actor_set.window_end)
    for violation in violations:
        world.find(*violation)
    if world.proto.overlap != "allow":  # the overlap policies' final checks (invariants_overlap.py)
        from jobsched_tools.successor import invariants_overlap

        for violation in invariants_overlap.check_final(world.proto, world.runs()):
            world.find(*violation)


# --- one schedule, written by hand -----------------------------------------------------------------


def play(actor_set: ActorSet, script: list[Step], proto: Protocol | None = None) -> World:
    """Run one schedule written as steps (actor, "until"/"through"/"rest", pattern[, option]), as
    ``explore/search.py``'s ``play_script`` reads them, then the drive and the checks."""
    world = build(actor_set, proto if proto is not None else Protocol())
    play_script(world, script)
    finish(world, actor_set, {})
    return world
