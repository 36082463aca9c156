"""The successor claim's switch turned on mid-run (issue 37; docs/proposals/successor-claim-build.md
§5 "The migration", between the deploys): a migrating stack (ports.DEPLOYED_INDEXES["migrating"]:
the next-run, lease and due indexes) whose functions all run the code that knows both claims, with
the switch off. Every job registers and runs today's claim; at a seeded moment of the window an
operator runs ``jobsched migrate successor-claim`` (its write, services/claim_switch.py, which
ops/migrate.py ``switch_on`` makes, through the faulty store) while claims, runs, retries and
changes are in flight, and the trigger, the registrar and the reconcile pass convert the legacy
states (core/transitions/head_convert.py).

The moments that make the conversion's conditions matter, made on purpose:

- **the switch lands inside a legacy claim**: the switch's write lands between a tick's read of a
  job (the tick read the switch off) and its claim transaction, and a tick that reads it on runs
  interleaved there and converts what it meets: the legacy claim, conditional on the state's
  version, must lose whole (``_state_as_read``), or the job gets a head beside a legacy record;
- **a stale tick inside a conversion**: for ``STALE_MS`` after the switch, a tick that read the
  switch before it flipped (a Lambda still running; ``Trigger`` without ``read_claim_shape``)
  claims as today between a conversion's read of a state and its write: the conversion,
  conditional on the state's version (head_convert.py ``_state_unchanged``), must lose and read
  again, or it makes a head at the instant the legacy claim just recorded (``record_created_twice``)
  and takes the state out of ``next-run`` behind the legacy claim's back.

Everything else (faults, people, outages, squeezes) is the chaos world's as it is. The checks are
the successor world's on the final tables (sim/successor.py), the legacy ones on each write of a
job still legacy (sim/ledger.py ``migrating``), and the migration's own: the switch landed, and
no state is left in ``next-run`` (``converged``).

A part of ``World`` (sim/world.py), mixed in over the trigger and the detector (sim/ticks.py).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from jobsched.core.claim_shape import ClaimShape, stack_shape
from jobsched.core.clock import iso_z
from jobsched.core.transitions.bookkeeping import BOOKKEEPING_KEY
from jobsched.core.transitions.head_convert import is_legacy
from jobsched.core.writes import STATE, Update, WriteOp
from jobsched.services.claim_switch import write_switch
from jobsched.services.definitions import Definitions
from jobsched.services.head_registrar import convert_legacy
from jobsched.services.registrar import Registrar
from jobsched.services.trigger import Trigger

from jobsched_tools.sim.invariants import all_items
from jobsched_tools.sim.ledger import CONVERSION
from jobsched_tools.sim.ticks import TriggerAndDetector
from jobsched_tools.sim.world_state import MINUTE, T

# The labels of the writes the moments above land inside: today's claim transaction's state
# write, and the conversion's (core/transitions/head_convert.py ``_state_op``).
LEGACY_CLAIM = "advance job"
HEAD_CLAIMS = frozenset({"claim head", "claim head (end)"})  # the successor claim's (head_claim.py)
# How long after the switch a tick may still claim under the switch as it read it (a tick reads it
# once, at its start; a tick's Lambda runs for at most a minute or so).
STALE_MS = 2 * MINUTE
# Per conversion write in that stretch: a stale tick lands inside it.
STALE_TICK_INSIDE_CONVERSION = 0.5
# Per conversion write in that stretch, else: a second converter (the registrar) lands inside it.
SECOND_CONVERTER = 0.25
# The operator runs the command at this share of the window (seeded), leaving a legacy part
# and a successor part of every job's history.
SWITCH_BETWEEN = (0.3, 0.6)
# The switch lands inside the first legacy claim after the operator's moment, or at most this
# late (an outage may leave no claim to land in).
LAND_WITHIN_MS = 3 * MINUTE


@dataclass
class MigrationLog:
    """What the migration did, for the report (``ChaosReport.migration``)."""

    planned_at: int = 0
    switched_at: int | None = None
    landed_inside_claim: bool = False
    switch_tries: int = 0
    legacy_states_at_switch: int = 0
    legacy_at_switch: frozenset[str] = frozenset()
    stale_ticks: int = 0
    second_converters: int = 0
    head_claims_by_ticks: int = 0
    converted_by: dict[str, int] = field(default_factory=dict)

    def figures(self, converted: set[str], left: int) -> dict[str, Any]:
        return {
            "switched_at": None if self.switched_at is None else iso_z(self.switched_at // 1000 * 1000),
            "landed_inside_a_legacy_claim": self.landed_inside_claim,
            "switch_tries": self.switch_tries,
            "legacy_states_at_switch": self.legacy_states_at_switch,
            "legacy_states_converted": len(converted),
            # Converted, though not legacy at the switch: a state a write in flight across it left
            # in next-run (sim/migration.py's report says which).
            "converted_not_legacy_at_switch": sorted(converted - self.legacy_at_switch),
            "converted_by": dict(sorted(self.converted_by.items())),
            "legacy_states_left": left,
            "stale_ticks": self.stale_ticks,
            "second_converters": self.second_converters,
            # Claims of heads the ticks tried after the switch (the successor claim is live).
            "head_claims_by_ticks": self.head_claims_by_ticks,
        }


class Migration(TriggerAndDetector):
    """The operator's switch and the stale ticks around it (this module's docstring)."""

    migration: MigrationLog
    _stale_trigger: Trigger
    _switch_armed: bool = False

    def _schedule_migration(self) -> None:
        # Its own generator: the world's draws stay as a migrating world without the switch makes.
        picks = random.Random(self.cfg.seed * 7919 + 37)
        low, high = SWITCH_BETWEEN
        span = self.window_end - self.start_ms
        when = self.start_ms + int(span * picks.uniform(low, high))
        for _ in range(20):  # ticks claim then (not in a trigger outage): the switch lands in one
            if not any(a - LAND_WITHIN_MS <= when < b for a, b in self.outages):
                break
            when = self.start_ms + int(span * picks.uniform(low, high))
        self._stale_picks = picks
        self.migration = MigrationLog(planned_at=when)
        # A tick that read the switch before it flipped: today's claim (no ``read_claim_shape``).
        stale = Trigger(self.store, self.queue, self.telemetry, self.clock, self.sched_cfg, False)
        self._stale_trigger = stale
        self.store.before_write = self._inside_write
        self.at(when, self._arm_switch)
        self.at(when + LAND_WITHIN_MS, self._switch_if_not_landed)

    def call(self, actor: str, fn: Callable[[], T], key: str = "") -> tuple[bool, T | None]:
        """``WorldState.call``; on a migrating stack each step is a new invocation of its function,
        which reads the switch anew: runtime/wiring.py builds the trigger and the registrar per
        invocation, and each keeps the switch it read for its life (head_trigger.py
        ``HeadClaims.stack_shape``: one GetItem; services/registrar.py: with its first state read).
        The simulation's services live the whole run, so at each step they forget the switch they
        read: a tick or a registration after the switch takes the successor claim, as the
        product's do, and only this module's stale ticks act on a switch read before it flipped.
        (Without it, no tick claimed a head after the switch, and the detector's misfire handling
        ran every job late: seed 3 reported ``run_all_incomplete``.)"""
        if self.cfg.migrate_midway:
            for registrar in self._registrars():
                registrar._stack = None
            for trigger in self.triggers:
                trigger._heads._shape = None
        return super().call(actor, fn, key)

    def _registrars(self) -> list[Registrar]:
        services: list[Any] = [*self.triggers, self.detector, self.overloaded_detector, self.ops]
        return [self.registrar, *(service._registrar for service in services)]

    def _arm_switch(self) -> None:
        self._switch_armed = True
        self.log("operator", "migrate.armed", "", "jobsched migrate successor-claim: the next legacy claim")

    def _switch_if_not_landed(self) -> None:
        if self._switch_armed:
            self._switch_armed = False
            self._switch()

    def _inside_write(self, ops: Sequence[WriteOp]) -> None:
        """FaultyStore's hook, before each write lands: the moments of this module's docstring."""
        labels = {op.label for op in ops}
        if self._switch_armed and LEGACY_CLAIM in labels:
            self._switch_armed = False
            if self._switch():
                self.migration.landed_inside_claim = True
                self._interleaved_shaped_tick()
            return
        switched = self.migration.switched_at
        if switched is not None and self.store.actor.startswith("trigger") and labels & HEAD_CLAIMS:
            self.migration.head_claims_by_ticks += 1
        converted = next((op for op in ops if op.label == CONVERSION and isinstance(op, Update)), None)
        if switched is None or converted is None or self.clock.now_ms() >= switched + STALE_MS:
            return
        job_id = str(converted.key["job_id"])
        roll = self._stale_picks.random()
        if roll < STALE_TICK_INSIDE_CONVERSION:
            # The stale tick reaches the job being converted (its claim of the job's occurrences
            # in the lookahead, as a tick makes it: nothing when none is due that soon).
            self.migration.stale_ticks += 1
            minute = self.clock.now_ms() // MINUTE
            claim = self._stale_trigger.claim_now
            self.call("trigger-S", lambda: claim(job_id, f"tick-{minute}-stale"), job_id)
        elif roll < STALE_TICK_INSIDE_CONVERSION + SECOND_CONVERTER:
            self.migration.second_converters += 1
            self.call("registrar", lambda: self._convert_again(job_id), job_id)

    def _convert_again(self, job_id: str) -> None:
        """The registrar (applying a change to the job that arrived now) converts it first, from
        the state as it reads it: the same transaction the outer conversion is about to write."""
        state = self.store.get(STATE, {"job_id": job_id})
        if state is not None and is_legacy(state):
            definitions = Definitions(self.store, self.sched_cfg)
            convert_legacy(self.store, self.sched_cfg, definitions, state, self.clock.now_ms())

    def _switch(self) -> bool:
        """``jobsched migrate successor-claim``: its write (services/claim_switch.py, which
        ops/migrate.py's ``switch_on`` makes once it has seen the stack deployed migrating, as
        this world's is by construction) through the faulty store (throttled or failing as any
        call), retried by the operator a minute later until it lands."""
        self.migration.switch_tries += 1
        if self.migration.switched_at is None:
            legacy = frozenset(str(s["job_id"]) for s in all_items(self.store.inner, STATE) if is_legacy(s))
            self.migration.legacy_at_switch = legacy
            self.migration.legacy_states_at_switch = len(legacy)
        hook, self.store.before_write = self.store.before_write, None  # the switch's own write
        try:
            ok, _ = self.call(
                "operator",
                lambda: write_switch(self.store, self.clock.now_ms()),
                "migrate",
            )
        finally:
            self.store.before_write = hook
        if not ok:
            self.at(self.clock.now_ms() + MINUTE, self._switch_again)
            return False
        if self.migration.switched_at is None:
            self.migration.switched_at = self.clock.now_ms()
            count = self.migration.legacy_states_at_switch
            self.log("operator", "migrate.switched", "", f"{count} legacy states")
        return True

    def _switch_again(self) -> None:
        self._switch()

    def _interleaved_shaped_tick(self) -> None:
        """A tick that reads the switch on, run inside the legacy claim the switch landed in."""
        minute = self.clock.now_ms() // MINUTE
        trigger = self.triggers[1]
        crash, self.queue.crash_next_send = self.queue.crash_next_send, False
        hook, self.store.before_write = self.store.before_write, None
        try:
            self.call("trigger-C", lambda: trigger.tick(f"tick-{minute}-switched"), f"tick-{minute}")
        finally:
            self.store.before_write = hook
            self.queue.crash_next_send = crash

    def migration_violations(self) -> list[str]:
        """The migration's own check, on the tables: the switch is on at the end (the rest, no
        state left in ``next-run``, is ``converged``'s)."""
        book = self.store.inner.get(STATE, dict(BOOKKEEPING_KEY))
        if stack_shape(book) is ClaimShape.SUCCESSOR:
            return []
        return [f"migration_not_switched {BOOKKEEPING_KEY['job_id']}: the bookkeeping item's switch is off"]

    def migration_figures(self) -> dict[str, Any]:
        conversions = self.store.ledger.conversions
        for actor, count in self.store.ledger.conversion_actors.items():
            self.migration.converted_by[actor] = count
        left = sum(1 for state in all_items(self.store.inner, STATE) if is_legacy(state))
        return self.migration.figures(set(conversions), left)
