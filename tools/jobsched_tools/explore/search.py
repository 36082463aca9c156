"""The search: every schedule with at most k preemptions, depth first, with replay.

A schedule is the controller's list of decisions (which actor makes its pending call, with which
option). Each branch is run from the start: the world is rebuilt (from the set-up's snapshot)
and the decision prefix replayed, which the services' determinism makes exact. At each decision
point past the prefix the state is fingerprinted (tables, queue, each actor's program counter
and a digest of every result it has seen, faults used, executing handlers); a state already
reached with as few preemptions, after the same actor, is not explored again.

A preemption is a switch away from an actor that could go on. Switching after an actor finished
is free. Once every actor finished, the world is driven to quiescence (``drive.quiesce``) and
checked; the drive's findings are cached per final state.
"""

from __future__ import annotations

import itertools
import time
from collections import Counter
from dataclasses import dataclass, field

from jobsched.core.invariants import ALL

from jobsched_tools.explore.checks import final_checks
from jobsched_tools.explore.drive import quiesce
from jobsched_tools.explore.scenarios import ActorSet, build
from jobsched_tools.explore.sched import OK
from jobsched_tools.explore.world import Finding, World

Decision = tuple[int, str]  # (actor index, option)


@dataclass
class Result:
    actor_set: str
    k: int
    schedules: int = 0  # explored to the end (and driven to quiescence)
    pruned: int = 0  # cut at a state already explored
    states: int = 0  # distinct states met at decision points
    seconds: float = 0.0
    first: dict[str, Finding] = field(default_factory=dict)  # the first schedule per check
    counts: Counter[str] = field(default_factory=Counter)  # schedules with each check violated
    truncated: bool = False

    @property
    def violations(self) -> list[Finding]:
        return list(self.first.values())

    def summary(self) -> dict[str, object]:
        return {
            "actor_set": self.actor_set,
            "k": self.k,
            "schedules": self.schedules,
            "pruned": self.pruned,
            "states": self.states,
            "seconds": round(self.seconds, 2),
            "violations": dict(sorted(self.counts.items())),
            "truncated": self.truncated,
        }


def explore(
    actor_set: ActorSet,
    k: int,
    invariants: tuple[str, ...] = ALL,
    offsets: tuple[int, ...] = (0,),
    max_schedules: int | None = None,
    stop_on_first: bool = False,
) -> Result:
    """Explore ``actor_set`` with at most ``k`` preemptions; each actor's clock is also tried at
    every offset in ``offsets`` (ms, all combinations)."""
    result = Result(actor_set.name, k)
    started = time.perf_counter()
    terminal: dict[bytes, list[Finding]] = {}
    for combo in itertools.product(offsets, repeat=len(actor_set.actors)):
        visited: dict[tuple[bytes, int | None], int] = {}
        todo: list[list[Decision]] = [[]]
        while todo:
            if max_schedules is not None and result.schedules >= max_schedules:
                result.truncated = True
                break
            prefix = todo.pop()
            world = build(actor_set, combo, invariants)
            branches, done = _run(world, prefix, k, visited)
            todo.extend(reversed(branches))
            if not done:
                result.pruned += 1
                continue
            result.schedules += 1
            _finish(
                world, terminal, max(abs(o) for o in combo) + max(abs(a.offset_ms) for a in actor_set.actors)
            )
            for finding in world.ledger.findings:
                result.first.setdefault(finding.check, finding)
            result.counts.update({finding.check for finding in world.ledger.findings})
            if stop_on_first and world.ledger.findings:
                todo.clear()
        result.states += len(visited)
    result.states += len(terminal)
    result.seconds = time.perf_counter() - started
    return result


def _run(
    world: World, prefix: list[Decision], k: int, visited: dict[tuple[bytes, int | None], int]
) -> tuple[list[list[Decision]], bool]:
    """Run one schedule: replay ``prefix``, then take the first alternative at each point,
    returning the other alternatives as new prefixes. False when cut at a visited state."""
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
    """Every decision allowed here, the current actor's plain call first."""
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


def _finish(world: World, terminal: dict[bytes, list[Finding]], skew_ms: int) -> None:
    """Drive the finished schedule to quiescence and check it (once per final state)."""
    key = world.outcome_key()
    cached = terminal.get(key)
    if cached is not None:
        for finding in cached:
            world.find(finding.check, finding.key, finding.detail)
        return
    before = len(world.ledger.findings)
    world.note("-- drive to quiescence --")
    quiesce(world, world.registration_pending)
    final_checks(world, skew_ms)
    terminal[key] = world.ledger.findings[before:]


# --- one schedule, written by hand: the named regressions -----------------------------------------

Step = tuple[str, str, str] | tuple[str, str, str, str]


def play(actor_set: ActorSet, script: list[Step], offsets: tuple[int, ...] | None = None) -> World:
    """Run one schedule written as steps, then the remaining actors to their end in the set's
    order, then the drive to quiescence and the checks. A step is (actor, mode, pattern[,
    option]): "until" steps the actor while its next call's description does not contain
    ``pattern``; "through" does so and then makes that call too (with ``option``: "crash",
    "lost", "stale", ...); "rest" runs it to its end. A pattern the actor never meets runs it to
    its end (a schedule the code no longer has is then simply the serial one)."""
    offsets = offsets if offsets is not None else tuple(0 for _ in actor_set.actors)
    world = build(actor_set, offsets)
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
    skew = max(abs(o) for o in offsets) + max(abs(a.offset_ms) for a in actor_set.actors)
    _finish(world, {}, skew)
    return world
