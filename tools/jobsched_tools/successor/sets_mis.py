"""The explored sets of misfire policies, ``max_runs`` and one-time jobs, and backfill
(``writes_mis.py``, ``model_mis.py``, ``invariants_mis.py``), each with the protocol it runs
(its policy, its life), and their mutants.

The job is ``rate(5 minutes)`` from 00:00 (00:05, 00:10 ...) as in ``sets.py``. An outage: the
head 00:05 is still unclaimed when the detector sweeps at 00:20:50, so 00:05, 00:10 and 00:15 are
overdue (older than now - 60 s grace) and 00:20 is within its grace (a late run); the settle chunk
is two occurrences, so the outage takes two transactions ([00:05, 00:10], [00:15, 00:20]), and a
crash between them abandons it half-way. A trigger at 00:19:50 races the second chunk for 00:15
(the head the first chunk left) with a late claim.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from jobsched.core.job import MisfirePolicy
from jobsched.core.writes import STATE, Item, Update, WriteOp

from jobsched_tools.successor import invariants_mis as im
from jobsched_tools.successor import model_mis as mm
from jobsched_tools.successor import writes as w
from jobsched_tools.successor import writes_mis as m
from jobsched_tools.successor.invariants import Violation
from jobsched_tools.successor.model import ActorSpec, message
from jobsched_tools.successor.sets import AT, OLD, PAUSE, T0, ActorSet, at, retime
from jobsched_tools.successor.world import Budget, World

SKIP, RUN_ONCE, RUN_ALL = MisfirePolicy.SKIP, MisfirePolicy.RUN_ONCE, MisfirePolicy.RUN_ALL
OUTAGE = at(20, 50)
LATE_TICK = at(19, 50)  # a trigger behind the detector's clock: its page still holds 00:15


class WorldMis(World):
    """The model's world with this topic's checks after every write, and its ledger of settles."""

    def __init__(self, proto: m.MisProtocol, budget: Budget) -> None:
        super().__init__(proto, budget)
        self.settled: set[str] = set()
        self.throughs: list[int | None] = []  # each applied change's ``through``, as history's

    def _count(self, op: WriteOp) -> None:
        super()._count(op)
        if isinstance(op, Update) and op.table == STATE:
            self.throughs.append(op.set.get("through"))

    def after_write(self, ops: Sequence[WriteOp], before: dict[str, Item]) -> None:
        self.settled.update(im.settled_by(ops))
        super().after_write(ops, before)
        assert isinstance(self.proto, m.MisProtocol)
        for violation in im.check_tables(self.proto, self.runs()):
            self.find(*violation)
        for violation in im.check_write(ops, self.ledger.claimed, self.settled):
            self.find(*violation)


@dataclass(frozen=True)
class Extension:
    """The hooks ``sets.build`` and ``search.finish`` call for this topic's sets."""

    proto: m.MisProtocol = field(default_factory=m.MisProtocol)
    setup: str = "registered"  # "claimed": 00:05 claimed at 00:04; "settled": 00:05 missed at 00:06:10

    def build(self, actor_set: ActorSet, proto: w.Protocol) -> World:
        # The explored protocol's switches (mutants, dropped parts) on this set's job.
        mis = proto if isinstance(proto, m.MisProtocol) else self.proto
        if mis is not proto:
            mis = replace(self.proto, dropped=proto.dropped)
        world = WorldMis(mis, actor_set.budget)
        world.write(m.register(mis, OLD, T0), "register", T0, faults=False)
        world.ledger.history = [(T0, w.ACTIVE, (OLD.every, OLD.anchor))]
        if self.setup == "claimed":
            head = world.runs()[mis.key(at(5), 1)]
            world.write([m.claim(mis, head, AT, "setup")], "setup claim", AT, faults=False)
            world.send(message(head, int(head["version"])), faults=False)
        if self.setup == "settled":
            head = world.runs()[mis.key(at(5), 1)]
            world.write(m.settle_chunk(mis, head, at(6, 10)).ops, "setup settle", at(6, 10), faults=False)
        world.snapshot = copy.deepcopy(list(world.runs().values()))
        for spec in actor_set.actors:
            world.sched.add(spec.name, _program(world, spec))
        return world

    def drive(self, world: World, begin: int, end: int) -> None:
        mm.drive(world, begin, end)

    def final(self, world: World, actor_set: ActorSet) -> list[Violation]:
        assert isinstance(world.proto, m.MisProtocol) and isinstance(world, WorldMis)
        # A change's timing is due from its first occurrence after the change and after the last
        # occurrence decided before it (``through``, the model's rule), not after the change alone.
        history = world.ledger.history[:1] + [
            (max(begin, int(through)) if through is not None else begin, status, timing)
            for (begin, status, timing), through in zip(world.ledger.history[1:], world.throughs, strict=True)
        ]
        return im.final(world.proto, world.state(), world.runs(), history, actor_set.window_end)


def _program(world: World, spec: ActorSpec) -> Callable[[], None]:
    program = mm.PROGRAMS[spec.kind]
    return lambda: program(world, spec)


def _a(name: str, kind: str, when: int = AT, arg: object = None) -> ActorSpec:
    return ActorSpec(name, kind, when, arg)


def _ext(setup: str = "registered", **switches: object) -> Extension:
    return Extension(m.MisProtocol(**switches), setup)  # type: ignore[arg-type]


def _outage(name: str, policy: MisfirePolicy, *more: ActorSpec, note: str) -> ActorSet:
    actors = (_a("detector", "detector", OUTAGE), _a("tick", "tick", LATE_TICK), *more)
    return ActorSet(
        name,
        actors,
        budget=Budget(crashes=1),  # a stale page adds nothing: the set-up's head is before every page
        window_end=at(25),
        note=note,
        ext=_ext(policy=policy, max_catchup=1),
    )


SETS_MIS: dict[str, ActorSet] = {
    s.name: s
    for s in (
        # Misfire: an outage settled in two chunks, against a late claim of the chunk's head.
        _outage("outage-skip", SKIP, note="skip: 00:05, 00:10, 00:15 missed, 00:20 late, in two chunks"),
        _outage(
            "outage-run-all",
            RUN_ALL,
            note="run_all (max_catchup 1): 00:05 runs, 00:10 and 00:15 missed, 00:20 late",
        ),
        _outage("outage-run-once", RUN_ONCE, note="run_once: 00:15 runs, 00:05 and 00:10 missed, 00:20 late"),
        _outage(
            "outage-change",
            RUN_ALL,
            _a("registrar", "change", OUTAGE, PAUSE),
            note="a pause meets the overdue head: it settles it under the policy first",
        ),
        # max_runs and one-time jobs: the end marker.
        ActorSet(
            "last-claim-change",
            (_a("tick", "tick"), _a("registrar", "change", arg=retime(w.Timing(3 * 60_000, T0)))),
            budget=Budget(crashes=1, stale=1),
            window_end=at(20),
            note="max_runs 1: the claim of 00:05 puts the end marker; a retime races it",
            ext=_ext(max_runs=1),
        ),
        ActorSet(
            "last-claim-settle",
            (_a("tick", "tick", at(6, 10)), _a("detector", "detector", at(6, 10))),
            budget=Budget(crashes=1, stale=1),
            window_end=at(20),
            note="max_runs 1: 00:05 unclaimed 70 s past: the late claim (the end) against the settle",
            ext=_ext(max_runs=1),
        ),
        ActorSet(
            "max-runs-chain",
            (_a("tickA", "tick"), _a("tickB", "tick", at(9)), _a("worker", "worker", at(9), 2)),
            budget=Budget(crashes=1, lost=1),
            window_end=at(20),
            note="max_runs 2: two claims, the second puts the end marker; nothing after it",
            ext=_ext(max_runs=2),
        ),
        ActorSet(
            "one-time-settle",
            (_a("tick", "tick", at(6, 10)), _a("detector", "detector", at(6, 10))),
            budget=Budget(crashes=1, stale=1),
            window_end=at(20),
            note="at(00:05), run_once: 00:05 overdue: the settle's run and end against a late claim",
            ext=_ext(until=at(5), policy=RUN_ONCE),
        ),
        # Backfill: one live record per instant.
        ActorSet(
            "backfill-settle",
            (_a("backfill", "backfill", at(11, 10), at(10)), _a("detector", "detector", at(11, 10))),
            budget=Budget(crashes=1, lost=1),
            note="00:05 and 00:10 overdue: a backfill of 00:10 against their settle: refused, or the rerun",
            ext=_ext(),
        ),
        ActorSet(
            "backfill-past-settle",
            (_a("backfill", "backfill", at(11, 10), at(2)), _a("detector", "detector", at(11, 10))),
            budget=Budget(crashes=1),
            note="00:02 (no record, before the overdue head) backfilled: its relink against the settle",
            ext=_ext(),
        ),
        ActorSet(
            "backfill-backfill",
            (
                _a("backfillA", "backfill", at(6, 30), at(5)),
                _a("backfillB", "backfill", at(6, 30), at(5)),
                _a("worker", "worker", at(6, 30)),
            ),
            budget=Budget(lost=1),
            note="00:05 missed: two backfills of it (rerun in place once), one started as B reads",
            ext=_ext("settled"),
        ),
        ActorSet(
            "backfill-two-instants",
            (_a("backfillA", "backfill", at(6, 30), at(5)), _a("backfillB", "backfill", at(6, 30), at(2))),
            budget=Budget(),
            note="00:05 missed: its rerun and a backfill of 00:02 relink one head",
            ext=_ext("settled"),
        ),
        ActorSet(
            "backfill-same-instant",
            (
                _a("backfillA", "backfill", at(6, 30), at(2)),
                _a("backfillB", "backfill", at(6, 30), at(2)),
                _a("worker", "worker", at(6, 30)),
            ),
            budget=Budget(),
            note="00:02 (no record) backfilled twice at once: one record at its backfill key",
            ext=_ext("settled"),
        ),
        ActorSet(
            "backfill-tick",
            (
                _a("backfill", "backfill", at(8, 40), at(2)),
                _a("tick", "tick", at(8, 40)),
                _a("registrar", "change", at(8, 40), retime(w.Timing(3 * 60_000, T0))),
            ),
            budget=Budget(crashes=1),
            note="00:02 (no record) backfilled against the claim of 00:10 and a retime",
            ext=_ext("settled"),
        ),
    )
}

# Each rule's mutant: (its switches, the set that must catch it).
MUTANTS_MIS: dict[str, tuple[m.MisProtocol, str]] = {
    "run_once runs each chunk's latest (no more_follow)": (
        m.MisProtocol(policy=RUN_ONCE, max_catchup=1, more_follow=False),
        "outage-run-once",
    ),
    "a chunk's head forgets the outage's catch-ups": (
        m.MisProtocol(policy=RUN_ALL, max_catchup=1, carry_catchups=False),
        "outage-run-all",
    ),
    "a chunk's head after now, not after the chunk": (
        m.MisProtocol(policy=SKIP, max_catchup=1, resume_after_chunk=False),
        "outage-skip",
    ),
    "a change closes a due head missed (no settle first)": (
        m.MisProtocol(policy=RUN_ALL, max_catchup=1, change_settles_first=False),
        "outage-change",
    ),
    "a settle leaves a missed last head's end key empty": (
        m.MisProtocol(max_runs=1, close_end_key=False),
        "last-claim-settle",
    ),
    "a backfill at the head (no refusal)": (m.MisProtocol(refuse_at_head=False), "backfill-settle"),
}
