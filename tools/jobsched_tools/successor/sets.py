"""The explored sets of shape f's model: issue 25's core sets, the proposal's five new ones, and
the hard cases a change's new head meets (a key that already holds a record).

The job is ``rate(5 minutes)`` (00:05, 00:10 ...), registered at 00:00 with its head at 00:05;
the actors act at 00:04 (the tick's lookahead reaches 00:05) unless a set says otherwise. A
retime moves it to ``rate(3 minutes)`` (00:06, 00:09 ...), to ``rate(10 minutes)`` (its first
occurrence, 00:10, is the old head's successor key: where the change's closure marker goes) or
to ``rate(150 seconds)`` (its first, 00:05, is the head's own key).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from jobsched_tools.successor import writes as w
from jobsched_tools.successor.model import PROGRAMS, ActorSpec, apply_change, message
from jobsched_tools.successor.world import Budget, World

T0 = int(datetime(2026, 12, 1, tzinfo=UTC).timestamp() * 1000)
MINUTE = 60 * w.SECOND
OLD = w.Timing(5 * MINUTE, T0)
NEW = w.Timing(3 * MINUTE, T0)
TEN = w.Timing(10 * MINUTE, T0)
HALF = w.Timing(150 * w.SECOND, T0)
AT = T0 + 4 * MINUTE


def at(minutes: int, seconds: int = 0) -> int:
    return T0 + minutes * MINUTE + seconds * w.SECOND


@dataclass(frozen=True)
class ActorSet:
    name: str
    actors: tuple[ActorSpec, ...]
    # "claimed": a tick claimed 00:05 at 00:04 and sent its message; "paused": paused at 00:03
    setup: str = "registered"
    budget: Budget = field(default_factory=lambda: Budget(crashes=1))
    window_end: int = at(12)
    drive_after: int = 3 * MINUTE
    note: str = ""
    world: Callable[[w.Protocol, Budget], World] = World  # an extension's world (model_reads.py)
    prepare: Callable[[World], None] | None = None  # set-up after ``setup`` (sets_reads, sets_overlap)
    # A topic's own set-up, actors, drive and final checks (sets_mis.py's ``Extension``).
    ext: Any = None


def build(actor_set: ActorSet, proto: w.Protocol) -> World:
    if actor_set.ext is not None:
        built: World = actor_set.ext.build(actor_set, proto)
        return built
    world = actor_set.world(proto, actor_set.budget)
    world.write(w.register(proto, OLD, T0), "register", T0, faults=False)
    world.ledger.history = [(T0, w.ACTIVE, (OLD.every, OLD.anchor))]
    if actor_set.setup == "claimed":
        head = world.runs()[proto.key(at(5), 1)]
        world.write([w.claim(proto, head, AT, "setup")], "setup claim", AT, faults=False)
        world.send(message(head, int(head["version"])), faults=False)
    if actor_set.setup == "paused":
        apply_change(world, "setup-pause", PAUSE, at(3))
    if actor_set.prepare is not None:
        actor_set.prepare(world)
    world.snapshot = copy.deepcopy(list(world.runs().values()))
    for spec in actor_set.actors:
        world.sched.add(spec.name, _program(world, spec))
    return world


def _program(world: World, spec: ActorSpec) -> Callable[[], None]:
    program = PROGRAMS[spec.kind]
    return lambda: program(world, spec)


def _a(name: str, kind: str, when: int = AT, arg: object = None) -> ActorSpec:
    return ActorSpec(name, kind, when, arg)


def retime(timing: w.Timing) -> w.Intent:
    return w.Intent("retime", timing)


PAUSE, RESUME = w.Intent("pause"), w.Intent("resume")

CORE: dict[str, ActorSet] = {
    s.name: s
    for s in (
        ActorSet("tick-tick-crash", (_a("tickA", "tick"), _a("tickB", "tick"))),
        ActorSet("tick-retime", (_a("tick", "tick"), _a("registrar", "change", arg=retime(NEW)))),
        ActorSet("pause-tick", (_a("registrar", "change", arg=PAUSE), _a("tick", "tick"))),
        ActorSet("tick-manual", (_a("tick", "tick"), _a("manual", "manual"))),
        ActorSet("manual-retime", (_a("manual", "manual"), _a("registrar", "change", arg=retime(NEW)))),
        ActorSet(
            "detector-worker",
            (_a("worker", "worker", at(5, 33), 2), _a("detector", "detector", at(5, 33))),
            setup="claimed",
            budget=Budget(crashes=1, dups=1),
            note="00:05 claimed at 00:04: its dispatch lease lapsed as its message arrives, delivered twice",
        ),
    )
}

NEW_SETS: dict[str, ActorSet] = {
    s.name: s
    for s in (
        ActorSet(
            "claim-stale-change",
            (_a("tick", "tick"), _a("registrar", "change", arg=retime(TEN))),
            budget=Budget(crashes=1, stale=1),
            note="a frozen claimer's put against a change whose new head is at the old successor key",
        ),
        ActorSet(
            "claim-settle",
            (_a("tick", "tick", at(6, 10)), _a("detector", "detector", at(6, 10))),
            budget=Budget(crashes=1, stale=1),
            note="00:05 unclaimed 70 s past: a late claim against the detector's settle",
        ),
        ActorSet(
            "claim-lost-message",
            (_a("tick", "tick"), _a("detector", "detector", at(5, 40)), _a("worker", "worker", at(5, 40))),
            budget=Budget(lost=1),
            note="the claim lands, its send is lost: the detector dispatches once, after the lease",
        ),
        ActorSet(
            "manual-claim-stale-page",
            (_a("tick", "tick"), _a("manual", "manual")),
            budget=Budget(crashes=1, stale=1),
            note="an ad-hoc run relinks the head while a claimer holds a page from before",
        ),
        ActorSet(
            "pause-resume-same-instant",
            (_a("pause", "change", arg=PAUSE), _a("resume", "change", arg=RESUME), _a("tick", "tick")),
            note="a pause and a resume at 00:04: the resumed head's key is the paused head's",
        ),
    )
}

HARD: dict[str, ActorSet] = {
    s.name: s
    for s in (
        ActorSet(
            "pause-resume-marker",
            (_a("pause", "change", arg=PAUSE), _a("resume", "change", at(5, 30), RESUME), _a("tick", "tick")),
            note="resumed at 00:05:30: the first occurrence is the paused head's successor (its marker)",
        ),
        ActorSet(
            "retime-onto-head",
            (_a("tick", "tick"), _a("registrar", "change", arg=retime(HALF))),
            note="the new timing's first occurrence, 00:05, is the head's own key",
        ),
        ActorSet(
            "retime-onto-claimed",
            (_a("tick", "tick", at(4, 30)), _a("registrar", "change", at(4, 30), retime(HALF))),
            setup="claimed",
            note="00:05 claimed: the new timing (00:05, 00:07:30) must start after it",
        ),
        ActorSet(
            "retime-there-and-back",
            (
                _a("registrarA", "change", arg=retime(TEN)),
                _a("registrarB", "change", arg=retime(OLD)),
                _a("tick", "tick"),
            ),
            budget=Budget(),
            note="5 to 10 minutes and back: markers of one timing at keys the other reaches later",
        ),
        ActorSet(
            "settle-change",
            (
                _a("detector", "detector", at(6, 10)),
                _a("registrar", "change", at(6, 10), PAUSE),
                _a("tick", "tick", at(6, 10)),
            ),
            budget=Budget(crashes=1, stale=1),
            note="00:05 unclaimed 70 s past: the detector's settle, a pause and a late claim, on one key",
        ),
        ActorSet(
            "worker-recover",
            (
                _a("workerA", "worker", at(5)),
                _a("detector", "detector", at(5, 40)),
                _a("workerB", "worker", at(5, 40)),
            ),
            setup="claimed",
            note="00:05 starts at 00:05 and outlives its 30 s lease: a recovery against its commit",
        ),
        ActorSet(
            "manual-settle",
            (_a("manual", "manual", at(6, 10)), _a("detector", "detector", at(6, 10))),
            note="00:05 unclaimed 70 s past: an ad-hoc run relinks the head the detector settles",
        ),
        ActorSet(
            "manual-lost-response",
            (_a("manual", "manual"), _a("worker", "worker", arg=2)),
            setup="claimed",
            budget=Budget(lost=1),
            note="an ad-hoc request whose answer is lost tries again; 00:05, claimed, lies behind it",
        ),
        ActorSet(
            "delete-tick-manual",
            (_a("registrar", "change", arg=w.Intent("delete")), _a("tick", "tick"), _a("manual", "manual")),
            budget=Budget(crashes=1, stale=1),
            note="a delete against a claim and an ad-hoc run: the deleted job keeps no head",
        ),
        ActorSet(
            "manual-manual",
            (_a("manualA", "manual"), _a("manualB", "manual")),
            note="two ad-hoc runs relink one head",
        ),
        ActorSet(
            "paused-resume-retime",
            (_a("resume", "change", arg=RESUME), _a("registrar", "change", arg=retime(NEW))),
            setup="paused",
            note="paused at 00:03 (no head): a resume and a retime, both on the state alone",
        ),
        ActorSet(
            "stale-claim-across-settle",
            (
                _a("tick", "tick", at(6, 10)),
                _a("detector", "detector", at(7, 5)),
                _a("worker", "worker", at(7, 5)),
            ),
            budget=Budget(stale=1, dups=1),
            note="a frozen claimer holding 00:05's entry across its settle, and the next head's claim",
        ),
    )
}

SETS: dict[str, ActorSet] = {**CORE, **NEW_SETS, **HARD}

# The proposal's four mutants: (protocol, the set that must catch it).
MUTANTS: dict[str, tuple[w.Protocol, str]] = {
    "claim without attribute_not_exists": (
        w.Protocol(dropped=frozenset({"claim.successor_absent"})),
        "claim-stale-change",
    ),
    "change without its closure marker": (w.Protocol(change_marker=False), "claim-stale-change"),
    "detector takes a closure marker for a claim": (w.Protocol(marker_is_claim=True), "settle-change"),
    "ad-hoc run without its ConditionCheck": (w.Protocol(adhoc_check=False), "tick-manual"),
}
