"""The explorer's world on a stack migrating to the successor claim (issue 37, shape f;
docs/proposals/successor-claim-build.md §4 row "explorer"): the real services on a store with the
runs table's ``due`` index and the migration switch on (core/claim_shape.py: the ``claim_shape``
attribute of the detector's bookkeeping item, written as tests/functional/harness.py's
``switch_to_successor`` writes it), so every job registered here takes the successor path once
the services have it.

What differs from today's world (``world.py``):

- **positions from heads**: the state's history (its marks, for the nothing-lost check) dates
  each stretch from the state's ``head_at`` (the head its last change made), not ``next_run_at``;
  the drive finds an occurrence overdue from the job's head (``core/head_invariants.heads``);
- **the checks at every write**: today's invariants that still hold of a successor job
  (``STILL_APPLY``: tokens never decrease, a finished run walked, no skip under ``buffer_all``, no
  wait cycle) and the successor invariants of ``core/head_invariants.py`` (H1-H5', I1', I3', I6'
  over the tables; I4' and the other write checks over each write's before and after);
- **the checks after the drive**: a live record (any epoch) decides every due instant, nothing
  decided twice, no claimed run left unfinished (a head waiting for its instant is not), and the
  job really is successor-shaped (``not_successor_shaped``: a service that still took today's
  path on a switched-on stack).

The sets (``sets_successor.py``) are the successor model's (``tools/jobsched_tools/successor``),
named as it names them.

Misfire, ``max_runs`` and backfill (``sets_successor_mis.py``, the model's ``sets_mis.py``): the
tables' checks take the job's ``max_runs`` (``runs_beyond_max``); a finished state's stretch ends
at its ``through``; after the drive the model's ``invariants_mis.final`` checks: a life that ended
made exactly ``max_runs`` runs (``runs_short``) and reads finished (``not_finished``), and every
outage got the job's misfire policy (``policy_fate``).
"""

from __future__ import annotations

import copy
import itertools
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from jobsched.core import head_invariants
from jobsched.core import invariants as core_invariants
from jobsched.core.claim_shape import CLAIM_SHAPE_ATTRIBUTE, ClaimShape, job_shape, stack_shape
from jobsched.core.config import SchedulerConfig
from jobsched.core.errors import StoreError
from jobsched.core.head_change import EPOCH, HEAD_AT, THROUGH
from jobsched.core.policies import UNFINISHED
from jobsched.core.run import RunKind, RunStatus
from jobsched.core.state import JobStatus
from jobsched.core.transitions.bookkeeping import BOOKKEEPING_KEY, bookkeeping_op
from jobsched.core.transitions.head_adhoc import BackfillRefused
from jobsched.core.transitions.head_finish import ends_live_life
from jobsched.core.writes import JOBS, RUNS, STATE, Item, Put, Update, WriteOp
from jobsched.services.worker import Started

from jobsched_tools.explore.build import RESUME_SEEN_AT, RESUMED_AT, bind_program
from jobsched_tools.explore.checks import (
    ADHOC,
    COMMITTED,
    POLICY,
    check_dead_letters,
    dated_by_records,
    manual_skipped_behind_future,
    persons_last_word,
)
from jobsched_tools.explore.drive import Services, quiesce
from jobsched_tools.explore.model import CFG, JOB_ID, MINUTE, SECOND, T0, ActorSet, ActorSpec, job_item
from jobsched_tools.explore.programs import PROGRAMS
from jobsched_tools.explore.search import Result, Step, finish_once, play_script, search
from jobsched_tools.explore.world import Budget, ExplorerStore, ExplorerTables, OffsetClock, World
from jobsched_tools.sim.faults import StateMark
from jobsched_tools.sim.invariants import occurrences, segments, withdrawable

DUE = ("due",)
# Today's invariants (core/invariants.py) that still hold of a successor job: the others read the
# state's ``next-run`` position and the legacy chain, which the successor invariants replace
# (I1 one record by I1', I2/I3 reachable by I3', beyond the position by I6', the message's link by
# H2'/H4).
STILL_APPLY = (
    core_invariants.TOKEN_DECREASED,
    core_invariants.NO_WALK,
    core_invariants.SKIPPED_BUFFER_ALL,
    core_invariants.WAITS_ACYCLIC,
)
# Every check at a write, by name: today's that still apply, the tables' successor invariants and
# the write checks.
ALL_SUCCESSOR = STILL_APPLY + head_invariants.ALL + head_invariants.ALL_WRITE
NOT_SUCCESSOR = "not_successor_shaped"


class SuccessorWorld(World):
    """The world of one schedule on a switched-on stack with the ``due`` index."""

    def __init__(self, cfg: SchedulerConfig, budget: Budget, write_invariants: Sequence[str]) -> None:
        super().__init__(cfg, budget, write_invariants)
        self.inner = ExplorerTables(extra_indexes=DUE)
        self.read_claim_shape = True  # the trigger function's wiring (runtime/wiring.py)
        self.adopt_scheduled = True  # the worker function's (HC3)
        self.store = ExplorerStore(self)
        self.write_ledger = head_invariants.WriteLedger()
        self.runs_before: dict[str, Item] = {}
        self.offsets: dict[str, int] = {}  # each actor's clock offset (the write checks' "now")

    # --- positions from heads ------------------------------------------------------------------

    def _mark(self, state: Item | None, dated: int | None = None) -> None:
        """The state's history, its stretches dated from the head the last change made
        (``head_at``); a state still in ``next-run`` (not converted yet) from its position."""
        if state is None:
            return
        position = state.get(HEAD_AT, state.get("next_run_at"))
        timing = tuple(sorted((state.get("timing") or {}).items()))
        mark = StateMark(
            self.clock.now_ms() if dated is None else min(self.clock.now_ms(), int(dated)),
            str(state.get("status")),
            timing,
            position,
            # A finished life's last occurrence: a successor state's ``through`` (the finish write
            # copies the end marker's), which ends its stretch (``segments``).
            state.get("last_scheduled_at", state.get(THROUGH)),
        )
        last = self.ledger.marks[-1] if self.ledger.marks else None
        if last is None or (last.status, last.timing, last.next_run_at) != (
            mark.status,
            mark.timing,
            mark.next_run_at,
        ):
            self.ledger.marks.append(mark)

    def runs_by_id(self) -> dict[str, Item]:
        return {str(run["run_id"]): run for run in self.inner.tables[RUNS].values()}

    def overdue_times(self, until: int) -> list[int]:
        """An active job's head is overdue its misfire grace after its instant (the detector's
        ``due`` sweep settles it then)."""
        state = self.inner.tables[STATE].get(self.job_id) or {}
        if state.get("status") != "active":
            return super().overdue_times(until)
        grace = int((state.get("misfire") or {}).get("grace_seconds", 60))
        times = super().overdue_times(until)
        for head in head_invariants.heads(self.runs_by_id()):
            overdue = int(head["scheduled_at"]) + min(grace, self.cfg.trigger_lookback_seconds) * 1000 + 1
            if overdue <= until:
                times.append(overdue)
        return times

    def exec_start(self, started: Started) -> None:
        """Today's overlap check (two runs of a job executing at once), less the same run started
        again on a new token: a recovery fenced its earlier worker, which let its lease lapse (the
        model's ``worker-recover``: a worker that outlives its lease without a heartbeat is taken
        for dead, and its handler may still be running). Whether that start was allowed is I4'
        (``head_invariants.started``: a start only on the token the claim or a recovery wrote)."""
        run_id = started.message.run_id
        fenced = [e for e in self.ledger.executing if e[1] == run_id and e[2] < started.token]
        for entry in fenced:
            self.ledger.executing.remove(entry)
        super().exec_start(started)
        self.ledger.executing += fenced

    def lives(self) -> dict[str, head_invariants.Life]:
        """The job's ``max_runs`` life as its item says now (``runs_beyond_max``): a change that
        raises the limit carries the count, so every epoch's runs count against the new one."""
        item = self.inner.tables[JOBS].get(self.job_id) or {}
        limit = item.get("max_runs")
        return {self.job_id: head_invariants.Life(int(limit))} if limit is not None else {}

    # --- the checks at every write ---------------------------------------------------------------

    def after_write(self, ops: Sequence[WriteOp]) -> None:
        after = self.runs_by_id()
        if self.write_invariants and after != self.runs_before:
            actor = self.sched.actor_here()
            now = self.clock.now_ms() + (self.offsets.get(actor.name, 0) if actor is not None else 0)
            found = head_invariants.check_write(
                self.runs_before,
                after,
                now,
                self.write_ledger,
                self.cfg.dispatch_lease_seconds * 1000,
                self.cfg.clock_skew_allowance_ms,
            )
            for violation in found:
                if violation.invariant in self.write_invariants:
                    self.find(violation.invariant, violation.key, violation.detail)
        self.runs_before = copy.deepcopy(after)
        super().after_write(ops)

    def check_invariants(self) -> None:
        if not self.write_invariants:
            return
        states = self.inner.tables[STATE].values()
        runs = self.inner.tables[RUNS].values()
        messages = [body for _, body, _ in self.mq.queued()]
        today = [name for name in self.write_invariants if name in STILL_APPLY]
        found = core_invariants.check(states, runs, messages, self.ledger.tokens, today) if today else []
        # A state still in today's shape (no ``epoch``: registered before the switch, or by a
        # service without its successor path) has no head to judge: H1 and I3' read successor
        # states only (its runs, of epoch 0, are judged by the checks that need no successor).
        successor_states = [state for state in states if EPOCH in state]
        found += head_invariants.check(
            successor_states, runs, messages, lives=self.lives(), only=self.write_invariants
        )
        for violation in found:
            self.find(violation.invariant, violation.key, violation.detail)


# --- the set-ups ------------------------------------------------------------------------------------

_SETUPS: dict[tuple[str, str, str, str, str], tuple[Any, ...]] = {}
SETUPS = ("registered", "claimed", "paused", "settled", "resumed-reconciled")


@contextmanager
def own_setups() -> Iterator[None]:
    """Set-ups built afresh in the block and forgotten after it (a mutant's, which must neither
    reuse the product's nor leave its own for later worlds)."""
    saved = dict(_SETUPS)
    _SETUPS.clear()
    try:
        yield
    finally:
        _SETUPS.clear()
        _SETUPS.update(saved)


def switch_on(world: World) -> None:
    """The migration switch (core/claim_shape.py), written as the detector writes its bookkeeping
    item (tests/functional/harness.py ``switch_to_successor``)."""
    current = world.inner.get(STATE, dict(BOOKKEEPING_KEY))
    sets = {CLAIM_SHAPE_ATTRIBUTE: ClaimShape.SUCCESSOR.value}
    world.inner.write([bookkeeping_op(current, sets, (), world.clock.now_ms())])


# The extension sets' own set-ups (explore/sets_successor_overlap.py: runs waiting and overtaken,
# and a legacy state on a migrating stack), each its steps after the job's registration, with the
# setup's services. ``BEFORE_SWITCH``: registered before the switch is on (a legacy state).
SETUP_STEPS: dict[str, Callable[[SuccessorWorld, Services], None]] = {}
BEFORE_SWITCH: set[str] = set()


def _setup(world: SuccessorWorld, actor_set: ActorSet) -> None:
    """The successor model's set-ups: "registered" (the job alone, registered at 00:00 on a
    switched-on stack: its head at 00:05), "claimed" (a tick at 00:04 claimed 00:05 and sent its
    message), "paused" (and a person paused it at 00:03, applied: no head)."""
    # The settings too: a head's check_at follows the dispatch lease (HC7, the short-lease sets).
    key = (actor_set.setup, actor_set.overlap, actor_set.schedule, repr(actor_set.job), repr(actor_set.cfg))
    cached = _SETUPS.get(key)
    if cached is None:
        if actor_set.setup not in SETUPS and actor_set.setup not in SETUP_STEPS:
            raise ValueError(f"unknown successor set-up {actor_set.setup!r}")
        world.clock.set(T0)
        if actor_set.setup not in BEFORE_SWITCH:
            switch_on(world)
        drive = Services(world, world.inner, world.mq, world.clock, "setup")
        item = job_item(actor_set.schedule, actor_set.overlap, "none", actor_set.job)
        world.inner.write([Put(JOBS, item, (), "person puts job")])
        drive.registrar.apply(JOB_ID)
        world.after_write([])
        if actor_set.setup == "claimed":
            world.clock.set(T0 + 4 * MINUTE)
            drive.trigger.tick("setup")
            world.after_write([])
        if actor_set.setup == "settled":  # the model's (sets_mis.py): 00:05 missed at 00:06:10
            world.clock.set(T0 + 6 * MINUTE + 10_000)
            drive.detector.run("setup")
            world.after_write([])
        if actor_set.setup == "paused":
            world.clock.set(T0 + 3 * MINUTE)
            pause = Update(JOBS, {"job_id": JOB_ID}, (), "person updates job", set={"enabled": False})
            world.inner.update(pause)
            drive.registrar.apply(JOB_ID)
            world.after_write([])
        if actor_set.setup in SETUP_STEPS:
            SETUP_STEPS[actor_set.setup](world, drive)
        if actor_set.setup == "resumed-reconciled":
            _resumed_reconciled(world, drive)
        cached = (copy.deepcopy(world.inner.tables), world.mq.snapshot(), list(world.ledger.marks))
        _SETUPS[key] = cached
        world.trace.clear()
        world.ledger.findings.clear()
        world.ledger.seen.clear()
        world.telemetry.events.clear()
    else:
        tables, (messages, seq), marks = cached
        world.inner.tables = copy.deepcopy(tables)
        world.mq.restore(messages, seq)
        world.ledger.marks = list(marks)
    world.runs_before = copy.deepcopy(world.runs_by_id())


def _resumed_reconciled(world: SuccessorWorld, drive: Services) -> None:
    """The redate's set-up (HC4; build.py's "resumed-reconciled" on a successor stack): paused at
    00:01 (applied: the head 00:05#1 cancelled, its marker at 00:10#1), resumed at 00:04:30 with
    its stream record late; the reconcile pass sees the difference at 00:05:10 and applies it at
    00:06:15, dated 00:05:10 (``redate_floor``): the new head is 00:10 in the resume's epoch, and
    00:05, due after the person's write, waits for the record to date the change (``late_record``
    with ``RESUMED_AT``)."""
    key = {"job_id": JOB_ID}
    world.clock.set(T0 + MINUTE)
    world.inner.update(Update(JOBS, key, (), "person updates job", set={"enabled": False}))
    drive.registrar.apply(JOB_ID)
    world.after_write([])
    world.clock.set(RESUMED_AT)
    world.inner.update(Update(JOBS, key, (), "person updates job", set={"enabled": True}))
    for at in (RESUME_SEEN_AT, RESUME_SEEN_AT + MINUTE + 5 * SECOND):
        world.clock.set(at)
        drive.detector.run("setup")
        world.after_write([])


def change(world: World, svc: Services, spec: ActorSpec) -> None:
    """The model's ``change`` actor: a person's write to the job item (``arg``: "retime:SCHEDULE",
    "pause", "resume", "delete", or "max_runs:N": a new limit, a new life once the last ended),
    then the registrar's apply of its stream record."""
    key = {"job_id": JOB_ID}
    what, _, schedule = str(spec.arg).partition(":")
    if what == "retime":
        item = job_item(schedule, world.overlap, world.after_completion, world.job)
        world.store.write([Put(JOBS, item, (), "person puts job")])
    elif what == "max_runs":
        job = (*(field for field in world.job if field[0] != "max_runs"), ("max_runs", int(schedule)))
        item = job_item(world.schedule, world.overlap, world.after_completion, job)
        world.store.write([Put(JOBS, item, (), "person puts job")])
    elif what in ("pause", "resume"):
        world.store.update(Update(JOBS, key, (), "person updates job", set={"enabled": what == "resume"}))
    elif what == "delete":
        world.store.delete(JOBS, key, (), "person deletes job")
    elif what == "edit":  # HC10: the payload edited, the timing kept (a change all the same)
        world.store.update(Update(JOBS, key, (), "person updates job", set={"description": "edited"}))
    else:
        raise ValueError(f"unknown change {what!r}")
    world.person_last = what
    world.person_at = svc.clock.now_ms()
    world.registration_pending = True
    svc.registrar.apply(JOB_ID)
    world.registration_pending = False


def backfill(world: World, svc: Services, spec: ActorSpec) -> None:
    """A person's backfill (``programs.backfill``); one refused at or after the head (HC11: not
    settled yet) is the clear error the person gets, nothing written."""
    try:
        PROGRAMS["backfill"](world, svc, spec)
    except BackfillRefused as refused:
        world.note(f"{spec.name}: refused: {refused}")


def manual_retry(world: World, svc: Services, spec: ActorSpec) -> None:
    """A person's ad-hoc request (``programs.manual``) sent again, with its request id, when its
    answer is lost (the model's ``manual-lost-response``: what the request id is for)."""
    try:
        PROGRAMS["manual"](world, svc, spec)
    except StoreError as unanswered:
        world.note(f"{spec.name}: no answer ({type(unanswered).__name__}): the request is sent again")
        PROGRAMS["manual"](world, svc, spec)


SUCCESSOR_PROGRAMS: dict[str, Callable[[World, Services, ActorSpec], None]] = {
    **PROGRAMS,
    "change": change,
    "backfill": backfill,
    "manual_retry": manual_retry,
}


def build(
    actor_set: ActorSet, offsets: tuple[int, ...], invariants: Sequence[str] = ALL_SUCCESSOR
) -> SuccessorWorld:
    world = SuccessorWorld(actor_set.cfg or CFG, actor_set.budget, invariants)
    world.overlap = actor_set.overlap
    world.schedule = actor_set.schedule
    world.job = actor_set.job
    world.extra_check = actor_set.check
    world.handler_ms = actor_set.handler_ms
    _setup(world, actor_set)
    world.clock.set(actor_set.at)
    world.window_end = actor_set.window_end
    world.check_invariants()
    for spec, offset in zip(actor_set.actors, offsets, strict=True):
        world.offsets[spec.name] = spec.offset_ms + offset
        clock = OffsetClock(world.clock, spec.offset_ms + offset)
        svc = Services(world, world.store, world.queue, clock, spec.name)
        world.sched.add(spec.name, bind_program(SUCCESSOR_PROGRAMS[spec.kind], world, svc, spec))
    return world


# --- the checks after the drive ----------------------------------------------------------------------


def final_checks(world: SuccessorWorld, skew_ms: int) -> None:
    """What must hold once everything settled (``checks.final_checks``, read by instant and
    epoch): a live record decides every due occurrence; no record of an instant never due; one
    commit per run; no claimed or started run left unfinished; a manual run never skipped behind
    a run not due yet; a person's last word; no dead letter owed; and the job is successor-shaped."""
    runs = world.runs_by_id()
    for run_id, count in world.ledger.commits.items():
        if count > 1:
            world.find("duplicate_commit", run_id, f"{count} commits")
    allowed = _occurrence_records(world, runs, skew_ms)
    for run_id, run in sorted(runs.items()):
        if not head_invariants.is_live_record(run) and run.get("kind") not in ADHOC:
            continue  # a marker or a cancelled head: no record
        at = int(run["scheduled_at"])
        if run.get("kind") not in ADHOC and at <= world.window_end and at not in allowed:
            world.find("run_not_due", run_id, "a record of an instant that was no due occurrence")
        waiting = run.get("status") == "scheduled" and head_invariants.is_head(run, runs)
        if run.get("status") in UNFINISHED and not waiting:
            world.find("unfinished_after_drive", run_id, f"still {run.get('status')}")
        if run.get("kind") == "manual" and run.get("status") == "skipped":
            manual_skipped_behind_future(world, run_id, run, runs, skew_ms)
    persons_last_word(world)
    check_dead_letters(world, runs)
    _successor_shaped(world)
    life_checks(world, runs)
    policy_fates(world, runs)
    for actor in world.sched.actors:
        if actor.error is not None:
            world.find("unexpected_exception", actor.name, actor.error)
    for event in world.telemetry.named("job.error"):
        world.find("job_error", event.correlation_id, str(event.fields.get("error")))
    if world.extra_check is not None:
        world.extra_check(world)


def _successor_shaped(world: World) -> None:
    """The job runs the successor claim on this switched-on stack: its state records a change's
    ``epoch`` (core/claim_shape.py). A service that still took today's path left it in
    ``next-run`` (or without an epoch): every other check then judged today's protocol."""
    state = world.inner.get(STATE, {"job_id": world.job_id})
    stack = stack_shape(world.inner.get(STATE, dict(BOOKKEEPING_KEY)))
    if state is not None and (job_shape(state, stack) != ClaimShape.SUCCESSOR or EPOCH not in state):
        world.find(NOT_SUCCESSOR, world.job_id, f"its state holds no epoch: {sorted(state)}")


def _occurrence_records(world: World, runs: Mapping[str, Item], skew_ms: int) -> set[int]:
    """``checks._occurrence_records`` by instant: every occurrence due while the job was active
    has a live record of some epoch that ran or was decided (a claimed run's, a settle's)."""
    ahead = world.cfg.lookahead_seconds * 1000 + 2 * skew_ms + 2_000
    due: set[int] = set()
    allowed: set[int] = set()
    at_a_change: set[int] = set()
    for span in segments(dated_by_records(world), world.window_end):
        stretch = occurrences(span.timing, span.start, min(span.end, world.window_end))
        due.update(stretch)
        allowed.update(occurrences(span.timing, span.start, span.end + ahead))
        # Within skew of the change that ended the stretch (not a life's end by its schedule).
        at_a_change.update(withdrawable(span, stretch, world.window_end, skew_ms + 1_000))
    by_instant: dict[int, list[Item]] = {}
    for run in runs.values():
        parts = head_invariants.id_parts(run.get("run_id"))
        if parts is not None and parts.kind == "timed" and parts.instant_ms is not None:
            by_instant.setdefault(parts.instant_ms, []).append(run)
    for occurrence in sorted(due):
        items = by_instant.get(occurrence, [])
        decided = [r for r in items if r.get("status") in COMMITTED or r.get("status") in POLICY]
        if decided:
            continue
        if occurrence in at_a_change and all(not head_invariants.is_live_record(r) for r in items):
            continue
        statuses = sorted(str(r.get("status")) for r in items) or ["absent"]
        world.find("lost_occurrence", f"{world.job_id}@{occurrence}", f"due, and {statuses} after the drive")
    return allowed


RUNS_SHORT, NOT_FINISHED = "runs_short", "not_finished"


def live_end(world: World, runs: Mapping[str, Item]) -> int | None:
    """The instant of the last occurrence of the job's live life, once its end marker is written
    (core/transitions/head_finish.py ``ends_live_life``); None while the life goes on."""
    state = world.inner.get(STATE, {"job_id": world.job_id})
    ends = [int(run["last_run_at"]) for run in runs.values() if ends_live_life(state, run)]
    return min(ends) if ends else None


def life_checks(world: World, runs: Mapping[str, Item]) -> None:
    """The life's end (the model's ``invariants_mis.final``, HC5), once everything settled:

    - ``runs_short``: a ``max_runs`` life that ended made exactly ``max_runs`` scheduled runs
      (``head_invariants.life_runs``; more is ``runs_beyond_max`` at every write);
    - ``not_finished``: a life whose end marker is written reads ``finished`` in its state (the
      trigger's finish write follows its claim; the reconcile pass repairs a lost one), and a
      finite job (``max_runs``, ``at()``) no person changed, whose life must have ended in the
      window, has its end marker."""
    state = world.inner.get(STATE, {"job_id": world.job_id})
    item = world.inner.get(JOBS, {"job_id": world.job_id})
    if state is None or item is None:
        return
    limit = item.get("max_runs")
    end = live_end(world, runs)
    if limit is not None and end is not None:
        made = head_invariants.life_runs(head_invariants.Life(int(limit)), runs)
        if made != int(limit):
            world.find(RUNS_SHORT, world.job_id, f"{made} runs, max_runs {limit}")
    if end is not None and state.get("status") != JobStatus.FINISHED.value:
        status = state.get("status")
        world.find(NOT_FINISHED, world.job_id, f"its life ended at {end}, its state is {status}")
    if end is None and world.person_last is None and state.get("status") == JobStatus.ACTIVE.value:
        due = occurrences(timing_of(item), T0 + 1, world.window_end)
        one_time = str(item["schedule"]).startswith("at(")
        if (limit is not None and len(due) >= int(limit)) or (one_time and due):
            world.find(NOT_FINISHED, world.job_id, f"{len(due)} occurrences due, and no end marker")


POLICY_FATE = "policy_fate"


def policy_fates(world: World, runs: Mapping[str, Item]) -> None:
    """``policy_fate`` (the model's ``invariants_mis.policy_fates``): every outage (consecutive
    occurrences of one epoch a settle decided under the job's misfire policy, across its chunks)
    got that policy: ``skip`` runs none of its overdue occurrences; ``run_all`` runs the first
    ``max_catchup`` less the catch-ups its first head carried, and records the rest; ``run_once``
    runs at most one, the latest overdue, and one unless a later occurrence ran (a late claim, or
    the life's end); every occurrence within its grace runs, late."""
    item = world.inner.get(JOBS, {"job_id": world.job_id}) or {}
    misfire = dict(item.get("misfire") or {})
    policy, max_catchup = str(misfire.get("policy", "run_once")), int(misfire.get("max_catchup", 10))
    decided = sorted(
        (run for run in runs.values() if _decided_by_policy(run)),
        key=lambda run: (int(run["epoch"]), int(run["scheduled_at"])),
    )
    outages: list[list[Item]] = []
    for run in decided:
        if outages and outages[-1][-1].get("next_key") == run["run_id"]:
            outages[-1].append(run)
        else:
            outages.append([run])
    for outage in outages:
        first = str(outage[0]["run_id"])
        late = [run for run in outage if run.get("kind") != RunKind.CATCHUP.value]
        overdue = [run for run in outage if run.get("kind") == RunKind.CATCHUP.value]
        ran = [run["scheduled_at"] for run in overdue if run.get("status") != RunStatus.MISSED.value]
        if any(run.get("status") == RunStatus.MISSED.value for run in late):
            world.find(POLICY_FATE, first, "an occurrence within its grace was not run late")
        if policy == "skip" and ran:
            world.find(POLICY_FATE, first, f"skip ran {ran}")
        elif policy == "run_all":
            budget = max(0, max_catchup - int(outage[0].get("catchups") or 0))
            want = [run["scheduled_at"] for run in overdue[:budget]]
            if ran != want:
                world.find(POLICY_FATE, first, f"run_all ran {ran}, not {want}")
        elif policy == "run_once" and overdue:
            if len(ran) > 1 or (ran and ran[0] != overdue[-1]["scheduled_at"]):
                world.find(POLICY_FATE, first, f"run_once ran {ran}")
            if not ran and not late and not _next_ran(outage[-1], runs):
                world.find(POLICY_FATE, first, "run_once ran none of the outage")


def _decided_by_policy(run: Item) -> bool:
    """An occurrence a settle decided under the misfire policy: kind ``catchup`` (overdue) or a
    late run (``settled_at``), not one a change's settle recorded missed with its reason (a
    pause, a delete). A run's ``reason`` may be its start's since (an overlap skip)."""
    if run.get("settled_at") is None or not head_invariants.is_occurrence(run):
        return False
    missed = run.get("status") == RunStatus.MISSED.value
    return not missed or str(run.get("reason")).startswith("misfire policy")


def _next_ran(last: Item, runs: Mapping[str, Item]) -> bool:
    """The occurrence after an outage ran or runs (a late claim took it over), or the life ended."""
    after = runs.get(str(last.get("next_key")))
    if after is not None and after.get("status") == RunStatus.END.value:
        return True
    if after is None or not head_invariants.is_occurrence(after) or after.get("settled_at") is not None:
        return False
    claimed = after.get("status") == RunStatus.SCHEDULED.value and head_invariants.is_claimed(after, runs)
    return claimed or after.get("status") in head_invariants.RUN_STATUSES


def timing_of(item: Item) -> tuple[tuple[str, str], ...]:
    return tuple(sorted({"schedule": str(item.get("schedule")), "timezone": "UTC"}.items()))


# --- the search ----------------------------------------------------------------------------------------


def _finish(world: SuccessorWorld, terminal: dict[bytes, list[Any]], skew_ms: int) -> None:
    def drive_and_check() -> None:
        world.note("-- drive to quiescence --")
        quiesce(world, world.registration_pending)
        final_checks(world, skew_ms)

    finish_once(world, terminal, drive_and_check)


def explore(
    actor_set: ActorSet,
    k: int,
    invariants: Sequence[str] = ALL_SUCCESSOR,
    offsets: tuple[int, ...] = (0,),
    max_schedules: int | None = None,
    stop_on_first: bool = False,
) -> Result:
    """``search.explore`` on the successor world."""
    result = Result(actor_set.name, k)
    started = time.perf_counter()
    terminal: dict[bytes, list[Any]] = {}
    for combo in itertools.product(offsets, repeat=len(actor_set.actors)):
        skew_ms = max(abs(o) for o in combo) + max(abs(a.offset_ms) for a in actor_set.actors)

        def fresh(combo: tuple[int, ...] = combo) -> SuccessorWorld:
            return build(actor_set, combo, invariants)

        def finished(world: SuccessorWorld, skew_ms: int = skew_ms) -> list[Any]:
            _finish(world, terminal, skew_ms)
            return world.ledger.findings

        search(fresh, finished, k, result, max_schedules, stop_on_first)
    result.states += len(terminal)
    result.seconds = time.perf_counter() - started
    return result


def play(actor_set: ActorSet, script: list[Step]) -> SuccessorWorld:
    """One schedule written as steps (``search.play_script``), driven and checked."""
    world = build(actor_set, tuple(0 for _ in actor_set.actors))
    play_script(world, script)
    _finish(world, {}, max(abs(a.offset_ms) for a in actor_set.actors))
    return world


def landed() -> dict[str, bool]:
    """Which services take their successor path on this branch, each probed on the "registered"
    set-up (until all do, a set that needs one judges a head nothing claims or settles):
    "registrar" (its state records an epoch), "trigger" (a tick at 00:04 claims the head: an item
    joins behind it), "detector" (at 00:06:10 the detector settles the unclaimed head without a
    per-job error)."""
    probe = ActorSet("probe", ())
    world = SuccessorWorld(CFG, probe.budget, ())
    _setup(world, probe)
    state = world.inner.get(STATE, {"job_id": JOB_ID})
    found = {"registrar": state is not None and EPOCH in state, "trigger": False, "detector": False}
    heads = head_invariants.heads(world.runs_by_id())
    if not found["registrar"] or not heads:
        return found
    head_id = str(heads[0]["run_id"])
    services = Services(world, world.inner, world.mq, world.clock, "probe")
    saved = (copy.deepcopy(world.inner.tables), world.mq.snapshot())
    world.clock.set(T0 + 4 * MINUTE)
    services.trigger.tick("probe")
    found["trigger"] = any(run.get("after_run_id") == head_id for run in world.runs_by_id().values())
    world.inner.tables = saved[0]
    world.mq.restore(*saved[1])
    world.clock.set(T0 + 6 * MINUTE + 10_000)
    services.detector.run("probe")
    settled = head_id not in {str(h["run_id"]) for h in head_invariants.heads(world.runs_by_id())}
    found["detector"] = settled and not world.telemetry.named("job.error")
    return found
