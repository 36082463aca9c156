"""The explored sets of the reads/heartbeats/detectors/adoption extension (``model_reads.py``).

The long run is 00:05, claimed at 00:04 and started at 00:05 by ``workerA`` (token 2, leased to
00:05:30, its ``due`` entry at 00:05:30); its worker heartbeats every 10 s (``long``), unless a
set has none (the worker died at its start).
"""

from __future__ import annotations

import json
from collections.abc import Callable

from jobsched_tools.successor import writes as w
from jobsched_tools.successor import writes_reads as wr
from jobsched_tools.successor.model import ActorSpec, message
from jobsched_tools.successor.model_reads import LONG_AT, ReadsBudget, ReadsWorld, register_programs
from jobsched_tools.successor.search import explore
from jobsched_tools.successor.sets import AT, TEN, ActorSet, at
from jobsched_tools.successor.world import World

register_programs()


def _started(keep_message: bool) -> Callable[[World], None]:
    """The set-up's claimed 00:05, started at 00:05 by workerA; its message deleted, or (a
    duplicate delivery to come) visible again."""

    def prepare(world: World) -> None:
        run_id = world.proto.key(LONG_AT, 1)
        op = wr.start_leased(world.proto, run_id, 1, LONG_AT, "workerA")
        world.write([op], "setup start", LONG_AT, faults=False)
        if not keep_message:
            world.queue.clear()

    return prepare


def _relinked_then_claimed(world: World) -> None:
    """An ad-hoc run M relinks the head 00:05 (version 2), then a claimer whose page showed the
    head at version 1 claims it (the successor is free) and sends version 1."""
    proto = world.proto
    head = world.runs()[proto.key(at(5), 1)]
    _run, ops = w.adhoc(proto, head, "manual", AT)
    world.write(ops, "setup adhoc", AT, faults=False)
    world.send(message(_run, 1), faults=False)
    world.write([w.claim(proto, head, AT, "tick")], "setup stale claim", AT, faults=False)
    world.send(message(head, int(head["version"])), faults=False)


def _a(name: str, kind: str, when: int = AT, arg: object = None) -> ActorSpec:
    return ActorSpec(name, kind, when, arg)


def _set(name: str, actors: tuple[ActorSpec, ...], budget: ReadsBudget, note: str, **kw: object) -> ActorSet:
    return ActorSet(name, actors, budget=budget, note=note, world=ReadsWorld, **kw)  # type: ignore[arg-type]


LONG = _started(keep_message=False)
BEATS = (at(5, 10), at(5, 20), at(5, 30), at(5, 40))

READS_SETS: dict[str, ActorSet] = {
    s.name: s
    for s in (
        _set(
            "long-run-heartbeats",
            (
                _a("workerA", "long", at(5), (BEATS, at(5, 45))),
                _a("detector", "sweeper", at(5, 36), (at(5, 36), at(5, 50))),
            ),
            ReadsBudget(crashes=1, dropped=1),
            "a long run heartbeats every 10 s (one may be lost, the worker may die after any); the "
            "detector sweeps at 00:05:36 and 00:05:50: recheck a live run, recover a dead one",
            setup="claimed",
            prepare=LONG,
        ),
        _set(
            "late-heartbeat-recover",
            (
                _a("workerA", "long", at(5), ((at(5, 10), at(5, 20), at(5, 30)), at(5, 35))),
                _a("detector", "sweeper", at(5, 36)),
                _a("workerB", "plain", at(5, 40)),
            ),
            ReadsBudget(dropped=2),
            "two heartbeats lost: the lease lapses at 00:05:30; the late third heartbeat and the "
            "commit race the recovery, and workerB takes the recovery's message",
            setup="claimed",
            prepare=LONG,
        ),
        _set(
            "two-detectors",
            (
                _a("detectorA", "sweeper", at(5, 40)),
                _a("detectorB", "sweeper", at(5, 40)),
                _a("workerB", "plain", at(5, 40)),
            ),
            ReadsBudget(crashes=1),
            "workerA died at its start: two detectors recover it, and workerB starts the recovery",
            setup="claimed",
            prepare=LONG,
        ),
        _set(
            "eventual-tick-tick",
            (_a("tickA", "tick_ec"), _a("tickB", "tick_ec")),
            ReadsBudget(crashes=1, lag=1),
            "two triggers read the successor eventually consistent: a stale absent after the other's claim",
        ),
        _set(
            "eventual-claim-change",
            (_a("tick", "tick_ec"), _a("registrar", "change", arg=w.Intent("retime", TEN))),
            ReadsBudget(crashes=1, stale=1, lag=1),
            "a stale successor read across a change whose marker is at that key",
        ),
        _set(
            "eventual-settle",
            (_a("tick", "tick_ec", at(6, 10)), _a("detector", "sweeper_ec", at(6, 10))),
            ReadsBudget(crashes=1, stale=1, lag=1),
            "00:05 unclaimed 70 s past: a late claim against a detector whose reads lag",
        ),
        _set(
            "stale-entry-committed",
            (
                _a("workerA", "long", at(5), ((), at(5, 20))),
                _a("detector", "sweeper_ec", at(5, 40)),
            ),
            ReadsBudget(stale=1, lag=1),
            "a run committed at 00:05:20 (no heartbeat: its lease is as the set-up wrote it); the "
            "detector's page and its read of the run both lag",
            setup="claimed",
            prepare=LONG,
        ),
        _set(
            "adopt-stale-page",
            (_a("tick", "tick_ec"), _a("manual", "manual"), _a("worker", "adopter", at(5), 2)),
            ReadsBudget(stale=1),
            "HC3: an ad-hoc run relinks the head while a claimer holds a page from before; the "
            "claim's message names the old version; the worker adopts at 00:05",
        ),
        _set(
            "adopt-vs-redispatch",
            (_a("worker", "adopter", at(5), 2), _a("detector", "sweeper", at(5, 10))),
            ReadsBudget(crashes=1, dups=1),
            "HC3's outcome as the set-up: M relinked 00:05 (version 2), then a stale claim sent "
            "version 1; the worker adopts at 00:05 against the redispatch due at 00:05:05 (the "
            "claimed head's entry is at its instant)",
            prepare=_relinked_then_claimed,
        ),
        _set(
            "adopt-recovered",
            (_a("detector", "sweeper", at(5, 40)), _a("worker", "adopter", at(5, 41), 2)),
            ReadsBudget(),
            "workerA died at its start; its message comes again after the recovery (a retry, "
            "the product's pending, due at 00:06:40): it must not be adopted",
            setup="claimed",
            prepare=_started(keep_message=True),
        ),
    )
}

# The extension's mutants: (protocol, the set that must catch it, the invariant).
READS_MUTANTS: dict[str, tuple[w.Protocol, str, str]] = {
    "adoption of a pending run (a retry)": (
        wr.ReadsProtocol(adopt_pending=True),
        "adopt-recovered",
        "retry_before_backoff",
    ),
    "the recheck keys the entry a lease past now": (
        wr.ReadsProtocol(recheck_ahead=True),
        "long-run-heartbeats",
        "lease_hidden",
    ),
}


def main(ks: list[int]) -> None:
    """``python -m jobsched_tools.successor --reads [--k 2 3]``: the sets, then the mutants."""
    for actor_set in READS_SETS.values():
        for k in ks:
            print(json.dumps(explore(actor_set, k).summary()), flush=True)
    for mutant, (proto, name, _check) in READS_MUTANTS.items():
        for k in ks:
            print(json.dumps({"mutant": mutant, **explore(READS_SETS[name], k, proto).summary()}), flush=True)
