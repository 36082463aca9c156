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

The search itself (``search``, ``finish_once``, ``play_script``) knows a world only through
``Explored`` and ``Checked``: its scheduler (the enabled actors, their options, a step), its
state's fingerprint and its findings. Two worlds use it: the product's (``explore/world.py``,
``explore`` and ``play`` below) and shape f's model (``successor/world.py``,
``successor/search.py``); what a world fingerprints, which faults it offers and what it checks
at the end stay in its own package.
"""

from __future__ import annotations

import itertools
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from jobsched.core.invariants import ALL

from jobsched_tools.explore.checks import final_checks
from jobsched_tools.explore.drive import quiesce
from jobsched_tools.explore.scenarios import ActorSet, build
from jobsched_tools.explore.sched import OK, Scheduler
from jobsched_tools.explore.world import Finding, World

Decision = tuple[int, str]  # (actor index, option)


# --- what the search needs of a world ---------------------------------------------------------------


class Explored(Protocol):
    """A world the search can drive: its actors (each enabled one's pending call offers its
    options; ``sched.step`` applies one) and the fingerprint of its state, which must cover
    everything that decides what can happen next (tables, queue, each actor's program counter
    and what it has seen, the faults used)."""

    @property
    def sched(self) -> Scheduler: ...

    def fingerprint(self) -> bytes: ...

    def note(self, line: str) -> None: ...


class Found(Protocol):
    """One violation, as the search counts it."""

    @property
    def check(self) -> str: ...

    @property
    def key(self) -> str: ...

    @property
    def detail(self) -> str: ...


F = TypeVar("F", bound=Found)
W = TypeVar("W", bound=Explored)


class Findings(Protocol[F]):
    findings: list[F]


class Checked(Protocol[F]):
    """A world whose finished schedules are checked: the key of its final state (what the drive to
    quiescence and the final checks depend on) and its findings."""

    @property
    def ledger(self) -> Findings[F]: ...

    def outcome_key(self) -> bytes: ...

    def find(self, check: str, key: str, detail: str) -> None: ...


@dataclass
class Tally(Generic[F]):
    """What a search counted, whatever the world."""

    actor_set: str
    k: int
    schedules: int = 0  # explored to the end (and driven to quiescence)
    pruned: int = 0  # cut at a state already explored
    states: int = 0  # distinct states met at decision points
    seconds: float = 0.0
    first: dict[str, F] = field(default_factory=dict)  # the first schedule per check
    counts: Counter[str] = field(default_factory=Counter)  # schedules with each check violated
    truncated: bool = False

    @property
    def violations(self) -> list[F]:
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


# --- the search, for any world ---------------------------------------------------------------------


def search(
    fresh: Callable[[], W],
    finished: Callable[[W], Sequence[F]],
    k: int,
    tally: Tally[F],
    max_schedules: int | None = None,
    stop_on_first: bool = False,
) -> None:
    """Explore every schedule of the worlds ``fresh`` builds (each at the same set-up) with at
    most ``k`` preemptions, adding to ``tally``. ``finished`` drives a world whose actors all
    ended and checks it, returning the schedule's findings. ``tally.states`` counts the states
    met at decision points (a caller adds its final states)."""
    visited: dict[tuple[bytes, int | None], int] = {}
    todo: list[list[Decision]] = [[]]
    while todo:
        if max_schedules is not None and tally.schedules >= max_schedules:
            tally.truncated = True
            break
        prefix = todo.pop()
        world = fresh()
        branches, done = _run(world, prefix, k, visited)
        todo.extend(reversed(branches))
        if not done:
            tally.pruned += 1
            continue
        tally.schedules += 1
        findings = finished(world)
        for finding in findings:
            tally.first.setdefault(finding.check, finding)
        tally.counts.update({finding.check for finding in findings})
        if stop_on_first and findings:
            break
    tally.states += len(visited)


def _run(
    world: Explored, prefix: list[Decision], k: int, visited: dict[tuple[bytes, int | None], int]
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


def _cost(world: Explored, last: int | None, index: int) -> int:
    actors = world.sched.actors
    return 1 if last is not None and index != last and actors[last].enabled else 0


def _alternatives(world: Explored, last: int | None, preemptions: int, k: int) -> list[tuple[Decision, int]]:
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


def finish_once(
    world: Checked[F], terminal: dict[bytes, list[F]], drive_and_check: Callable[[], None]
) -> None:
    """Drive a finished schedule to quiescence and check it (``drive_and_check``) once per final
    state: a state met before gets the findings its first drive made."""
    key = world.outcome_key()
    cached = terminal.get(key)
    if cached is not None:
        for finding in cached:
            world.find(finding.check, finding.key, finding.detail)
        return
    before = len(world.ledger.findings)
    drive_and_check()
    terminal[key] = world.ledger.findings[before:]


# --- one schedule, written by hand: the named regressions -----------------------------------------

Step = tuple[str, str, str] | tuple[str, str, str, str]


def play_script(world: Explored, script: list[Step]) -> None:
    """Run one schedule written as steps, then the remaining actors to their end in the set's
    order. A step is (actor, mode, pattern[, option]): "until" steps the actor while its next
    call's description does not contain ``pattern``; "through" does so and then makes that call
    too (with ``option``: "crash", "lost", "stale", ...); "rest" runs it to its end. A pattern
    the actor never meets runs it to its end (a schedule the code no longer has is then simply
    the serial one)."""
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


# --- the product's world ---------------------------------------------------------------------------


class Result(Tally[Finding]):
    """What exploring one of the product's actor sets found."""


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
        skew_ms = max(abs(o) for o in combo) + max(abs(a.offset_ms) for a in actor_set.actors)
        fresh = _fresh(actor_set, combo, invariants)
        search(fresh, _finished(terminal, skew_ms), k, result, max_schedules, stop_on_first)
    result.states += len(terminal)
    result.seconds = time.perf_counter() - started
    return result


def _fresh(actor_set: ActorSet, offsets: tuple[int, ...], invariants: tuple[str, ...]) -> Callable[[], World]:
    return lambda: build(actor_set, offsets, invariants)


def _finished(terminal: dict[bytes, list[Finding]], skew_ms: int) -> Callable[[World], list[Finding]]:
    def finished(world: World) -> list[Finding]:
        _finish(world, terminal, skew_ms)  # the module's name, looked up at each call (tests wrap it)
        return world.ledger.findings

    return finished


def _finish(world: World, terminal: dict[bytes, list[Finding]], skew_ms: int) -> None:
    """Drive the finished schedule to quiescence and check it (once per final state)."""

    def drive_and_check() -> None:
        world.note("-- drive to quiescence --")
        quiesce(world, world.registration_pending)
        final_checks(world, skew_ms)

    finish_once(world, terminal, drive_and_check)


def play(actor_set: ActorSet, script: list[Step], offsets: tuple[int, ...] | None = None) -> World:
    """Run one schedule written as steps (``play_script``), then the drive to quiescence and the
    checks."""
    offsets = offsets if offsets is not None else tuple(0 for _ in actor_set.actors)
    world = build(actor_set, offsets)
    play_script(world, script)
    skew = max(abs(o) for o in offsets) + max(abs(a.offset_ms) for a in actor_set.actors)
    _finish(world, {}, skew)
    return world
