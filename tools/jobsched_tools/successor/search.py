"""The search over shape f's model: every schedule with at most k preemptions, depth first, with
replay and state-fingerprint pruning, as ``explore/search.py`` does it.

``explore/search.py`` is not reused as is: its ``explore`` builds the product's world
(``scenarios.build``) and drives it with the product's services (``world.quiesce``), and its
``_run`` is private and typed to that world. The scheduler (``explore/sched.py``) is reused:
each actor runs on its own thread and stops at every store and queue call.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

from jobsched_tools.explore.sched import OK
from jobsched_tools.successor.invariants import ERROR, NEVER_APPLIED, check_final
from jobsched_tools.successor.ledger import Finding
from jobsched_tools.successor.model import drive
from jobsched_tools.successor.sets import ActorSet, build
from jobsched_tools.successor.world import World
from jobsched_tools.successor.writes import Protocol

Decision = tuple[int, str]  # (actor index, option)


@dataclass
class Result:
    actor_set: str
    k: int
    schedules: int = 0
    pruned: int = 0
    states: int = 0
    seconds: float = 0.0
    first: dict[str, Finding] = field(default_factory=dict)
    counts: Counter[str] = field(default_factory=Counter)
    races: Counter[str] = field(default_factory=Counter)  # schedules in which each part stopped a write
    truncated: bool = False

    def summary(self) -> dict[str, object]:
        return {
            "actor_set": self.actor_set,
            "k": self.k,
            "schedules": self.schedules,
            "pruned": self.pruned,
            "states": self.states,
            "seconds": round(self.seconds, 2),
            "violations": dict(sorted(self.counts.items())),
            "races": sorted(self.races),
            "truncated": self.truncated,
        }


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
    visited: dict[tuple[bytes, int | None], int] = {}
    terminal: dict[bytes, list[Finding]] = {}
    todo: list[list[Decision]] = [[]]
    while todo:
        if max_schedules is not None and result.schedules >= max_schedules:
            result.truncated = True
            break
        prefix = todo.pop()
        world = build(actor_set, proto)
        branches, done = _run(world, prefix, k, visited)
        todo.extend(reversed(branches))
        if not done:
            result.pruned += 1
            continue
        result.schedules += 1
        finish(world, actor_set, terminal)
        result.counts.update({f.check for f in world.ledger.findings})
        result.races.update(set(world.ledger.races))
        for finding in world.ledger.findings:
            result.first.setdefault(finding.check, finding)
        if stop and world.ledger.findings:
            break
    result.states = len(visited) + len(terminal)
    result.seconds = time.perf_counter() - started
    return result


def _run(
    world: World, prefix: list[Decision], k: int, visited: dict[tuple[bytes, int | None], int]
) -> tuple[list[list[Decision]], bool]:
    actors = world.sched.actors
    branches: list[list[Decision]] = []
    path: list[Decision] = []
    last: int | None = None
    preemptions = 0
    world.sched.start()
    try:
        while True:
            alternatives = _alternatives(world, last, preemptions, k)
            if not alternatives:
                return branches, True
            if len(path) < len(prefix):
                choice = prefix[len(path)]
                cost = _cost(world, last, choice[0])
            else:
                key = (world.fingerprint(), last)
                best = visited.get(key)
                if best is not None and best <= preemptions:
                    return branches, False
                visited[key] = preemptions
                (choice, cost), rest = alternatives[0], alternatives[1:]
                branches += [[*path, alt] for alt, _ in rest]
            index, option = choice
            world.sched.step(actors[index], option)
            if actors[index].crashed:
                world.note(f"{actors[index].name}: crashed")
            path.append(choice)
            preemptions += cost
            last = index
    finally:
        world.sched.close()


def _cost(world: World, last: int | None, index: int) -> int:
    actors = world.sched.actors
    return 1 if last is not None and index != last and actors[last].enabled else 0


def _alternatives(world: World, last: int | None, preemptions: int, k: int) -> list[tuple[Decision, int]]:
    found: list[tuple[Decision, int]] = []
    order = list(range(len(world.sched.actors)))
    if last is not None:
        order.remove(last)
        order.insert(0, last)
    for index in order:
        actor = world.sched.actors[index]
        if not actor.enabled or actor.pending is None:
            continue
        cost = _cost(world, last, index)
        if preemptions + cost > k:
            continue
        options = actor.pending.choices()
        ordered = [o for o in options if o == OK] + [o for o in options if o != OK]
        found += [((index, option), cost) for option in ordered]
    return found


def finish(world: World, actor_set: ActorSet, terminal: dict[bytes, list[Finding]]) -> None:
    """Drive the finished schedule to quiescence and check it (once per final state)."""
    key = world.outcome_key()
    cached = terminal.get(key)
    if cached is not None:
        for finding in cached:
            world.find(finding.check, finding.key, finding.detail)
        return
    before = len(world.ledger.findings)
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
    terminal[key] = world.ledger.findings[before:]


# --- one schedule, written by hand -----------------------------------------------------------------

Step = tuple[str, str, str] | tuple[str, str, str, str]


def play(actor_set: ActorSet, script: list[Step], proto: Protocol | None = None) -> World:
    """Run one schedule written as steps (actor, "until"/"through"/"rest", pattern[, option]), as
    ``explore/search.py``'s ``play`` reads them, then the rest serially, the drive and the checks."""
    world = build(actor_set, proto if proto is not None else Protocol())
    by_name = {actor.name: actor for actor in world.sched.actors}
    world.sched.start()
    try:
        for step in script:
            name, mode, pattern = step[0], step[1], step[2]
            option = step[3] if len(step) > 3 else OK
            actor = by_name[name]
            while actor.enabled and (
                mode == "rest" or pattern not in (actor.pending.detail if actor.pending else "")
            ):
                world.sched.step(actor, OK)
            if mode == "through" and actor.enabled:
                world.sched.step(actor, option)
        for actor in world.sched.actors:
            while actor.enabled:
                world.sched.step(actor, OK)
    finally:
        world.sched.close()
    finish(world, actor_set, {})
    return world
