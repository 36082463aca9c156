"""The overlap policies' sets on shape f's model: the product explorer's hard cases for overlap
(``explore/sets_core.py`` ``manual-worker-tick-*``, ``sets_promises.py`` ``waiting-race-*``,
``promoters-*``, the ``OVERTAKES`` sets), with shape f's claims (a put at the head's successor
key, the chain's end the head's link), its ad-hoc relink of the head, and its stale pages.

Each base set is explored under each policy it names (``<base>-<policy>``): the policy is the
``Protocol``'s ``overlap`` (``protocol_for``). Run ids: ``j@manual:<request>`` for an ad-hoc run,
``j@2026-12-01T00:05:00...`` for the occurrence 00:05 (a worker's pattern ``T00:05``).
"""

from __future__ import annotations

import json
from dataclasses import replace

from jobsched.core.writes import Item

from jobsched_tools.successor import overlap
from jobsched_tools.successor import writes as w
from jobsched_tools.successor import writes_overlap as wo
from jobsched_tools.successor.invariants import heads
from jobsched_tools.successor.model import ActorSpec, message
from jobsched_tools.successor.sets import NEW, ActorSet, at
from jobsched_tools.successor.world import Budget, World

ALL_WALKING: tuple[wo.Policy, ...] = ("skip", "buffer_one", "buffer_all", "cancel_other")


# --- set-ups (serial, without faults) --------------------------------------------------------------


def _head(world: World) -> Item:
    found = heads(world.runs())
    assert len(found) == 1, found
    return found[0]


def adhoc(world: World, request: str, now: int) -> str:
    run, ops = w.adhoc(world.proto, _head(world), request, now)
    world.write(ops, f"setup adhoc {request}", now, faults=False)
    world.send(message(run, 1), faults=False)
    return str(run["run_id"])


def claim(world: World, now: int) -> str:
    head = _head(world)
    world.write([w.claim(world.proto, head, now, "setup")], "setup claim", now, faults=False)
    world.send(message(head, int(head["version"])), faults=False)
    return str(head["run_id"])


def _take(world: World, run_id: str) -> None:
    world.queue = [m for m in world.queue if m.body["run_id"] != run_id]


def start(world: World, run_id: str, now: int, passed: tuple[str, ...] = ()) -> None:
    runs = world.runs()
    ops = wo.start(world.proto, run_id, int(runs[run_id]["version"]), now, [runs[p] for p in passed], None)
    world.write(ops, f"setup start {run_id}", now, faults=False)
    _take(world, run_id)


def commit(world: World, run_id: str, now: int) -> None:
    token = int(world.runs()[run_id]["version"])
    world.write([w.commit(world.proto, run_id, token)], f"setup commit {run_id}", now, faults=False)


def wait(world: World, run_id: str, holder_id: str, now: int) -> None:
    runs = world.runs()
    policy = world.proto.overlap if world.proto.overlap in wo.WAITING_POLICIES else "buffer_one"
    ops = wo.buffer(world.proto, policy, run_id, int(runs[run_id]["version"]), runs[holder_id], now)  # type: ignore[arg-type]
    world.write(ops, f"setup wait {run_id}", now, faults=False)
    _take(world, run_id)


def held_due(world: World) -> None:
    """A manual run M1 runs (since 00:04:50); 00:05, claimed behind it, comes due; a second
    manual run M2 joined the chain behind 00:05 (before the head 00:10)."""
    m1 = adhoc(world, "m1", at(4))
    start(world, m1, at(4, 50))
    claim(world, at(4))
    adhoc(world, "m2", at(4, 30))


def manual_waiting(world: World) -> None:
    """00:05 claimed, started at 00:05:15 (lease to 00:05:45); a manual run M (00:05:02) waits
    behind it (its lease to 00:05:40)."""
    five = claim(world, at(4))
    m = adhoc(world, "m", at(5, 2))
    start(world, five, at(5, 15))
    wait(world, m, five, at(5, 10))


def overtaken_ended(world: World) -> None:
    """00:05 claimed; a manual run M at 00:04:30 overtook it (not yet due) and ended."""
    five = claim(world, at(4))
    m = adhoc(world, "m", at(4, 30))
    start(world, m, at(4, 30), passed=(five,))
    commit(world, m, at(4, 30))


def overtaker_running(world: World) -> None:
    """00:05 claimed; a manual run M at 00:04:30 overtook it and runs, leased to 00:05:00: its
    worker died, so the detector recovers it and it walks again."""
    five = claim(world, at(4))
    m = adhoc(world, "m", at(4, 30))
    start(world, m, at(4, 30), passed=(five,))


def _a(name: str, kind: str, when: int, arg: object = None) -> ActorSpec:
    return ActorSpec(name, kind, when, arg)


# --- the sets ----------------------------------------------------------------------------------------

BASE: dict[str, tuple[ActorSet, tuple[wo.Policy, ...]]] = {
    s.name: (s, policies)
    for s, policies in (
        (
            ActorSet(
                "ovl-overtake",
                (
                    _a("manual", "manual", at(4, 30)),
                    _a("workerM", "oworker", at(4, 30), (1, "manual")),
                    _a("workerS", "oworker", at(5), (1, "T00:05")),
                ),
                setup="claimed",
                note="a manual run (00:04:30) passes over 00:05, claimed and not yet due, and marks it "
                "overtaken in its start; 00:05's worker at 00:05 starts it, or meets the mark (W1, W3)",
            ),
            ALL_WALKING,
        ),
        (
            ActorSet(
                "ovl-overtake-long",
                (
                    _a("workerS", "oworker", at(5), (1, "T00:05")),
                    _a("tick", "tick", at(9)),
                    _a("workerT", "oworker", at(10), (1, "T00:10")),
                ),
                prepare=overtaken_ended,
                budget=Budget(),
                note="a manual run overtook 00:05 and ended; 00:05 runs as 00:10 (claimed at 00:09, "
                "linked behind the manual run) walks: it reaches 00:05 only through the overtaker (W8)",
            ),
            ("skip", "buffer_one", "cancel_other"),
        ),
        (
            ActorSet(
                "ovl-overtaker-recovered",
                (
                    _a("workerS", "oworker", at(5, 10), (1, "T00:05")),
                    _a("detector", "detector", at(5, 10)),
                    _a("workerM", "oworker", at(5, 10), (1, "manual")),
                ),
                prepare=overtaker_running,
                budget=Budget(),
                note="a manual run overtook 00:05 and its worker died; the detector recovers it as "
                "00:05 comes due: the overtaker walks again and meets the run it overtook (W4, I8)",
            ),
            ("skip", "buffer_one", "cancel_other"),
        ),
        (
            ActorSet(
                "ovl-manual-worker-tick",
                (_a("manual", "manual", at(4)), _a("tick", "tick", at(4)), _a("worker", "oworker", at(5), 2)),
                note="the product's manual-worker-tick: an ad-hoc relink, a claim and a worker taking both "
                "messages at 00:05",
            ),
            ALL_WALKING,
        ),
        (
            ActorSet(
                "ovl-manual-worker-tick-dup",
                (_a("manual", "manual", at(4)), _a("tick", "tick", at(4)), _a("worker", "oworker", at(5), 2)),
                budget=Budget(crashes=1, dups=1),
                note="the same, one message delivered twice (a skip and a wait keep the run's token)",
            ),
            ("skip",),
        ),
        (
            ActorSet(
                "ovl-retime-walk",
                (
                    _a("workerS", "oworker", at(5), (1, "T00:05")),
                    _a("registrar", "change", at(5), w.Intent("retime", NEW)),
                    _a("tick", "tick", at(5)),
                    _a("workerN", "oworker", at(6), (1, "T00:06")),
                ),
                setup="claimed",
                budget=Budget(),
                note="00:05 runs as a retime to 3 minutes closes the head 00:10 (its marker at 00:15) "
                "and heads 00:06, linked to the closed head's link (00:05); 00:06 is claimed and walks",
            ),
            ("buffer_one", "cancel_other"),
        ),
        (
            ActorSet(
                "ovl-stale-page",
                (_a("tick", "tick", at(4)), _a("manual", "manual", at(4)), _a("worker", "oworker", at(5), 2)),
                budget=Budget(stale=1),
                note="a claimer's page from before an ad-hoc relink: the claim's message carries the "
                "link before the relink; its token fences it out (I4) before its walk can matter",
            ),
            ("skip", "buffer_one"),
        ),
        (
            ActorSet(
                "ovl-waiting-race",
                (
                    _a("workerS", "oworker", at(5, 1), (1, "T00:05")),
                    _a("workerM", "oworker", at(5, 1), (1, "manual:m2")),
                    _a("finisher", "finisher", at(5, 1), "j@manual:m1"),
                ),
                prepare=held_due,
                budget=Budget(),
                note="the product's waiting-race: M1 runs; 00:05 due behind it, M2 behind 00:05; both "
                "workers walk and wait at once, as M1 ends and promotes",
            ),
            ALL_WALKING,
        ),
        (
            ActorSet(
                "ovl-promoters",
                (
                    _a("finisher", "finisher", at(5, 20), None),
                    _a("detector", "detector", at(5, 45)),
                    _a("workerP", "oworker", at(5, 45), (1, "manual")),
                ),
                prepare=manual_waiting,
                budget=Budget(),
                note="the product's promoters: M waits behind 00:05; 00:05 ends and its worker promotes "
                "M as the detector finds M's lease lapsed and promotes it; a worker starts M",
            ),
            ("buffer_one", "buffer_all", "cancel_other"),
        ),
    )
}


def _finisher_arg(actor_set: ActorSet) -> ActorSet:
    """The promoters' finisher finishes 00:05 (its id is the protocol's key, fixed here)."""
    five = w.Protocol().key(at(5), 1)
    actors = tuple(
        replace(a, arg=five) if a.kind == "finisher" and a.arg is None else a for a in actor_set.actors
    )
    return replace(actor_set, actors=actors)


SETS: dict[str, tuple[ActorSet, wo.Policy]] = {
    f"{name}-{policy}": (replace(_finisher_arg(base), name=f"{name}-{policy}"), policy)
    for name, (base, policies) in BASE.items()
    for policy in policies
}


def protocol_for(name: str, **switches: object) -> w.Protocol:
    return w.Protocol(overlap=SETS[name][1], **switches)  # type: ignore[arg-type]


def main_overlap(ks: list[int], parts: bool) -> None:
    """``--overlap``: every overlap set at each k; with ``--parts``, each overlap condition part
    and walk rule removed alone, at the first k, on every overlap set."""
    from jobsched_tools.successor.search import explore

    if parts:
        for part in (*wo.ALL_PARTS, *overlap.WALK_RULES):
            caught = {}
            for name, (actor_set, _) in SETS.items():
                result = explore(actor_set, ks[0], protocol_for(name, dropped=frozenset({part})))
                if result.counts:
                    caught[name] = sorted(result.counts)
            print(json.dumps({"part": part, "caught_by": caught}), flush=True)
        return
    for name, (actor_set, _) in SETS.items():
        for k in ks:
            result = explore(actor_set, k, protocol_for(name))
            print(json.dumps(result.summary()), flush=True)
