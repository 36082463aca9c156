"""The successor model's reads / heartbeats / detectors / adoption extension
(tools/jobsched_tools/successor/sets_reads.py, model_reads.py, writes_reads.py), ported to the
product's explorer on a successor-shaped stack (``successor.py``), as ``sets_successor.py`` ports
the 23 base sets: the real services, the model's names, times and fault budgets where the product
has the same fault, and core/head_invariants.py's checks (the model's ``finished_in_due``,
``retry_before_backoff`` and ``lease_hidden`` are ported there: ``DUE_LEFT``, ``RETRY_EARLY``,
``LEASE_HIDDEN``; its ``recovery_late`` judges a sweep's time, so it is the ``sweeper``'s, here).
``MUTANTS`` are the model's two of this extension (``READS_MUTANTS``), as product mutants.

What the port changes, and why:

- **eventually consistent reads**: the product reads eventually consistent only the trigger's
  GetItem of a head's successor (services/head_trigger.py); the explorer answers it one write
  behind under ``Budget.lag`` (world.py ``ExplorerStore.get``). The detector's reads are strongly
  consistent, so the model's ``sweeper_ec`` is the product's detector (``eventual-settle``), and
  ``stale-entry-committed`` (a detector whose GetItem lags) has no product counterpart: not ported;
- **heartbeats**: the model's ``long`` worker is ``long`` here, the product's worker heartbeating
  at the set's offsets (``Worker.heartbeat``); a heartbeat the model drops is one the set leaves
  out (``late-heartbeat-recover``: the two before 00:05:30);
- **adoption**: the model's ``adopt-recovered`` (a recovered run's message comes again after its
  backoff) is ``adopt-retry``: the product's recovery of a dead worker sends its message at once
  (no backoff), and its retry after a failed attempt is the ``pending`` run whose message waits out
  its backoff (``retry_at``), which HC3's adoption must not start early (``MUTANTS``);
- **the head's condition parts** (``sim/mutants.py`` ``SUCCESSOR_SWITCHABLE``, this file's block):
  ``CATCHERS`` catch a part switched off alone; the parts no set can catch alone have their reason
  in ``UNCAUGHT`` (the form of tests/sim/test_switches.py) and the set that reaches their race
  (``ALONE``), and a redundant one a set of ``PAIRS`` that catches it together with the part that
  makes it redundant (tests/explore/test_successor_explorer_reads.py; tests/unit/test_head_reads_parts.py
  shows each reason on the store).

Times: the job is ``rate(5 minutes)`` registered at 00:00; set-up "claimed" is 00:05 claimed at
00:04 (its message queued). The product's leases: a worker's 30 s (``lease_seconds``), a claimed
run's dispatch lease 30 s from its start (its instant) or its claim, the skew allowance 2 s.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from types import ModuleType
from typing import Any

from jobsched.core import head_invariants
from jobsched.core.config import SchedulerConfig
from jobsched.core.head import is_closure_marker
from jobsched.core.run import RunMessage, RunStatus, run_key
from jobsched.core.transitions import recover
from jobsched.core.transitions.head_recover import dispatch_lapses_at
from jobsched.core.writes import RUNS, Item, Update
from jobsched.services.messages import parse_run_message
from jobsched.services.worker import FENCED_OUT, HandlerResult, Started, Worker
from jobsched.services.worker_overlap import OverlapSettler

from jobsched_tools.explore.drive import QUIET_LOG, Services
from jobsched_tools.explore.model import CFG, SECOND, ActorSet, ActorSpec, by_name, job_item
from jobsched_tools.explore.sched import Call
from jobsched_tools.explore.sets_successor import TEN, WINDOW_END, Mutant, at, retime
from jobsched_tools.explore.successor import SUCCESSOR_PROGRAMS
from jobsched_tools.explore.world import STALE, Budget, OffsetClock, World

# --- the programs the model's actors need ---------------------------------------------------------


def _take(world: World, visible_at: int | None = None) -> tuple[str, dict[str, Any]] | None:
    """Receive the oldest fresh message (a scheduling point); ``visible_at``: only one visible
    at that instant (SQS holds a delayed message, a retry's backoff, until then). The queue dates
    a message on the world's base clock: an actor acting ``offset`` later sees one due that much
    later, so a set using it keeps its senders at the base time."""
    option = world.store._point(Call("receive", "receive"))
    if option != "ok":
        return None
    with world.mq._lock:
        fresh = [
            m.seq
            for m in world.mq._messages.values()
            if m.receive_count == 0 and (visible_at is None or m.visible_at_ms <= visible_at)
        ]
    world.seen_by_actor(fresh[:1])
    return world.mq.take(fresh[0]) if fresh else None


def _worker(world: World, svc: Services, name: str, offset_ms: int) -> Worker:
    """The product's worker on a clock ``offset_ms`` past the actor's (a later heartbeat)."""
    return Worker(
        world.store,
        world.queue,
        world.telemetry,
        OffsetClock(svc.clock, offset_ms),
        world.cfg,
        world.registry,
        name,
        logger_for=lambda _run_id: QUIET_LOG,
        rng=random.Random(0),
        adopt_scheduled=world.adopt_scheduled,
    )


def long(world: World, svc: Services, spec: ActorSpec) -> None:
    """The model's ``long``: a worker that starts the first message's run at its clock, heartbeats
    at each offset of ``arg[0]`` (a refused heartbeat: it was recovered; it stops, and its record
    is fenced out), then commits at ``arg[1]``. ``arg[0]`` None: it dies at its start (no
    heartbeat, no commit), its message deleted (the model's ``_started(keep_message=False)``)."""
    beats, commit_ms = spec.arg
    taken = _take(world)
    if taken is None:
        return
    receipt, body = taken
    world.seen_by_actor(body)
    begun = svc.worker.begin(parse_run_message(body), svc.clock.now_ms() + 900_000)
    world.mq.delete(receipt)
    if not isinstance(begun, Started):
        return
    world.exec_start(begun)
    if beats is None:
        return  # died at its start: its handler never ends (the execution stays, fenced later)
    try:
        for beat_ms in beats:
            if not _worker(world, svc, spec.name, beat_ms).heartbeat(begun):
                _worker(world, svc, spec.name, beat_ms).finish(begun, FENCED_OUT)
                return
        _worker(world, svc, spec.name, commit_ms).finish(begun, HandlerResult(True))
    finally:
        world.exec_end(begun)


def visible_worker(world: World, svc: Services, _spec: ActorSpec) -> None:
    """The base ``worker``, receiving only a message visible at its clock (a retry's waits out
    its backoff, as SQS's ``DelaySeconds`` holds it): the explored ``worker`` takes any."""
    taken = _take(world, visible_at=svc.clock.now_ms())
    if taken is None:
        return
    receipt, body = taken
    world.seen_by_actor(body)
    begun = svc.worker.begin(parse_run_message(body), svc.clock.now_ms() + 900_000)
    if isinstance(begun, Started):
        world.exec_start(begun)
        try:
            world.store._point(Call("handler", f"handler of {begun.message.run_id} runs"))
            svc.worker.finish(begun, HandlerResult(True))
        finally:
            world.exec_end(begun)
    world.mq.delete(receipt)


def lose(world: World, _svc: Services, _spec: ActorSpec) -> None:
    """The oldest fresh message never reaches a worker (the claim's send lost after its put
    landed: the model's ``lost`` send), so the claimed run waits for its redispatch."""
    taken = _take(world)
    if taken is not None:
        world.mq.delete(taken[0])


RECOVERY_LATE = "recovery_late"


def sweeper(world: World, svc: Services, spec: ActorSpec) -> None:
    """The detector, with the model's ``recovery_late`` after its sweep (the promise: a crashed
    run is recovered within a lease plus the skew allowance): a run running when the actor began
    and unchanged since (its token and lease as then), whose lease ended at or before the sweep's
    now minus the allowance, is still running after a sweep whose ``due`` page did not lag; and
    a claimed run still ``scheduled`` and unchanged (its message lost, or its worker died before
    its start write) whose dispatch lease (``dispatch_lapses_at``: from its start or its claim)
    ended by then. The runs are read when the actor begins, before its first call: unchanged from
    then to the end of the sweep, a run was as read when the sweep's page was.

    A run whose entry was not due by the sweep's clock is judged only if no actor's clock keyed
    it: the explored actors' clocks are apart (an actor at 00:05 may start a run another
    redispatched at 00:05:40, which keys its entry there: ``recovered_at``), and a write that keys
    an entry after the lease is ``lease_hidden``'s. A head's entry (its instant plus the check
    delay, HC7) is keyed by no clock: kept through its claim and its start, it must come by the
    lease's end, or the detector meets the dead run late (a fixed 30 s delay with a 5 s lease:
    ``short-lease-*``)."""
    skew = world.cfg.clock_skew_allowance_ms
    watched = (RunStatus.RUNNING.value, RunStatus.SCHEDULED.value)
    began = {
        str(run["run_id"]): (run.get("status"), run.get("version"), run.get("lease_expires_at"))
        for run in world.inner.tables[RUNS].values()
        if run.get("status") in watched
    }
    stale = world.used[STALE]
    svc.detector.run(spec.name)
    now = svc.clock.now_ms()
    if world.used[STALE] != stale:
        return  # a lagging page may miss the entry: the next sweep's
    for run in world.inner.tables[RUNS].values():
        run_id, lease = str(run["run_id"]), run.get("lease_expires_at")
        if began.get(run_id) != (run.get("status"), run.get("version"), lease):
            continue
        if run.get("recovered_at") is not None and int(run.get("check_at", now)) + skew > now:
            continue  # keyed by a redispatch at another actor's clock
        if run.get("status") == RunStatus.RUNNING.value and lease is not None and int(lease) + skew <= now:
            world.find(RECOVERY_LATE, run_id, f"swept at {now}, leased to {lease}, still running")
        elif run.get("status") == RunStatus.SCHEDULED.value and "next_key" in run:
            successor = world.inner.get(RUNS, run_key(str(run["next_key"])))
            if successor is None or is_closure_marker(successor):
                continue  # a head, or a head a change closed: not a claimed run
            lapse = dispatch_lapses_at(run, successor, world.cfg, _definition(world))
            if lapse + skew <= now:
                world.find(RECOVERY_LATE, run_id, f"swept at {now}, its dispatch lease ended {lapse}")


def _definition(world: World) -> Item:
    """The explored job's definition (its start window, for a claimed run's dispatch lease)."""
    return job_item(world.schedule, world.overlap, world.after_completion, world.job)


PROGRAMS = {"long": long, "visible_worker": visible_worker, "lose": lose, "sweeper": sweeper}
for _kind, _program in PROGRAMS.items():
    SUCCESSOR_PROGRAMS.setdefault(_kind, _program)


# --- the sets ---------------------------------------------------------------------------------------

BEATS = (10 * SECOND, 20 * SECOND, 30 * SECOND, 40 * SECOND)
# The retry the adoption must not start early: a failed attempt's next one after a 60 s backoff.
RETRY = (("retry", {"max_attempts": 2, "backoff_seconds": 60, "jitter": False}),)


def _a(name: str, kind: str, offset_ms: int = 0, arg: object = None) -> ActorSpec:
    return ActorSpec(name, kind, offset_ms, arg)


def _reads(
    name: str,
    actors: tuple[ActorSpec, ...],
    when: int,
    setup: str = "registered",
    budget: Budget | None = None,
    note: str = "",
    **more: Any,
) -> ActorSet:
    """A set as ``sets_successor`` writes the model's: the window to 00:10, one crash unless the
    budget says otherwise; ``more``: the job's other fields (``overlap``, ``job``)."""
    return ActorSet(
        name,
        actors,
        setup=setup,
        at=when,
        window_end=WINDOW_END,
        budget=budget if budget is not None else Budget(crashes=1),
        note=note,
        **more,
    )


MODEL_SETS = by_name(
    _reads(
        "long-run-heartbeats",
        (
            _a("workerA", "long", arg=(BEATS, 45 * SECOND)),
            _a("detector", "sweeper", 36 * SECOND),
            _a("detector-again", "sweeper", 50 * SECOND),
        ),
        at(5),
        setup="claimed",
        note="a long run heartbeats every 10 s (the worker may die after any); the detector sweeps "
        "at 00:05:36 and 00:05:50: recheck a live run, recover a dead one",
    ),
    _reads(
        "late-heartbeat-recover",
        (
            _a("workerA", "long", arg=((30 * SECOND,), 35 * SECOND)),
            _a("detector", "sweeper", 36 * SECOND),
            _a("workerB", "worker", 40 * SECOND),
        ),
        at(5),
        setup="claimed",
        budget=Budget(crashes=0),
        note="the heartbeats at 00:05:10 and 00:05:20 never landed: the lease lapses at 00:05:30; "
        "the late third heartbeat and the commit race the recovery, and workerB takes its message",
    ),
    _reads(
        "two-detectors",
        (
            _a("workerA", "long", arg=(None, 0)),
            _a("detectorA", "sweeper", 40 * SECOND),
            _a("detectorB", "sweeper", 40 * SECOND),
            _a("workerB", "worker", 40 * SECOND),
        ),
        at(5),
        setup="claimed",
        note="workerA died at its start: two detectors recover it, and workerB starts the recovery",
    ),
    _reads(
        "eventual-tick-tick",
        (_a("tickA", "tick"), _a("tickB", "tick")),
        at(4),
        budget=Budget(crashes=1, lag=1),
        note="two triggers read the successor eventually consistent: a stale absent after the other's claim",
    ),
    _reads(
        "eventual-claim-change",
        (_a("tick", "tick"), _a("registrar", "change", arg=retime(TEN))),
        at(4),
        budget=Budget(crashes=1, stale=1, lag=1),
        note="a stale successor read across a change whose marker is at that key",
    ),
    _reads(
        "eventual-settle",
        (_a("tick", "tick"), _a("detector", "detector")),
        at(6, 10),
        budget=Budget(crashes=1, stale=1, lag=1),
        note="00:05 unclaimed 70 s past: a late claim whose successor read lags, against the settle",
    ),
    _reads(
        "adopt-stale-page",
        (_a("tick", "tick"), _a("manual", "manual"), _a("worker", "worker", 60 * SECOND, 2)),
        at(4),
        budget=Budget(crashes=0, stale=1),
        note="HC3: an ad-hoc run relinks the head while a claimer holds a page from before; the "
        "claim's message names the old version; the worker adopts at 00:05",
    ),
    _reads(
        "adopt-vs-redispatch",
        (
            _a("tick", "tick"),
            _a("manual", "manual"),
            _a("worker", "worker", 60 * SECOND, 2),
            _a("detector", "detector", 70 * SECOND),
        ),
        at(4),
        budget=Budget(crashes=0, stale=1),
        note="HC3's stale claim (an ad-hoc run relinked 00:05 under the claimer's page): the worker "
        "adopts at 00:05 against the redispatch at 00:05:10",
    ),
    _reads(
        "adopt-retry",
        (
            _a("tick", "tick"),
            _a("workerA", "failing_worker"),
            _a("workerB", "visible_worker", 10 * SECOND),
        ),
        at(5),
        budget=Budget(crashes=0, dups=1),
        job=RETRY,
        note="the model's adopt-recovered: 00:05's message is delivered twice; workerA's attempt "
        "fails (its retry waits 60 s), and the duplicate reaches workerB at 00:05:10: not adopted",
    ),
)

# Sets of the product's own, for the head's condition parts the model's sets do not reach (the
# model has no HC8 recheck write, no cancel_other, and one redispatch per run).
PART_SETS = by_name(
    _reads(
        "late-claim-recheck",
        (_a("tick", "tick"), _a("detector", "detector", 25 * SECOND), _a("worker", "worker", 25 * SECOND)),
        at(5, 10),
        budget=Budget(crashes=0),
        note="HC8: 00:05 claimed late, at 00:05:10; the detector meets its entry (00:05:30) at "
        "00:05:35 before its dispatch lease lapses (00:05:40) and rechecks it, while a worker "
        "starts and commits it",
    ),
    _reads(
        "redispatch-stop-request",
        (
            _a("lose", "lose"),
            _a("manual", "manual"),
            _a("workerM", "visible_worker"),
            _a("detector", "detector"),
        ),
        at(5, 40),
        setup="claimed",
        budget=Budget(crashes=0),
        overlap="cancel_other",
        note="cancel_other: 00:05's message was lost; at 00:05:40 an ad-hoc run's worker asks it "
        "to stop as the detector redispatches it",
    ),
    _reads(
        "redispatch-twice",
        (
            _a("detector", "detector"),
            _a("detectorA", "detector", 40 * SECOND),
            _a("detectorB", "detector", 40 * SECOND),
        ),
        at(5, 40),
        setup="claimed",
        budget=Budget(crashes=0),
        note="00:05's message was lost and its redispatch's message too: two detectors redispatch "
        "it again at 00:06:20, against a worker taking the first",
    ),
)

# HC7 with leases below 30 s (the bench's 5 s): a head keeps its due entry through its claim and
# its start, so the detector must meet a claimed run whose worker died at its start, or whose
# message was lost, by its lease's end; the sweeper's ``recovery_late`` judges it at 00:05:08
# (the 5 s lease plus the 2 s skew allowance, plus 1 s). A fixed 30 s check delay fails both.
SHORT_LEASES = SchedulerConfig(
    **{**CFG.model_dump(), "dispatch_lease_seconds": 5, "lease_seconds": 5, "heartbeat_seconds": 2}
)
SHORT_LEASE_SETS = by_name(
    _reads(
        "short-lease-dies-at-start",
        (
            _a("workerA", "long", arg=(None, 0)),
            _a("detector", "sweeper", 8 * SECOND),
            _a("workerB", "worker", 8 * SECOND),
        ),
        at(5),
        setup="claimed",
        budget=Budget(crashes=0),
        cfg=SHORT_LEASES,
        note="leases of 5 s: workerA died at its start at 00:05; swept at 00:05:08, it is recovered "
        "and workerB starts the recovery",
    ),
    _reads(
        "short-lease-lost-dispatch",
        (
            _a("lose", "lose"),
            _a("detector", "sweeper", 8 * SECOND),
            _a("worker", "worker", 8 * SECOND),
        ),
        at(5),
        setup="claimed",
        budget=Budget(crashes=0),
        cfg=SHORT_LEASES,
        note="leases of 5 s: 00:05's message was lost; swept at 00:05:08, it is redispatched",
    ),
)

SETS: dict[str, ActorSet] = {**MODEL_SETS, **PART_SETS, **SHORT_LEASE_SETS}
# The bound per set (preemptions): each runs in a few seconds on a loaded 2-core machine (the
# three with four actors or four heartbeats take 16-40 s at k=1, so k=0).
HEAVY = ("long-run-heartbeats", "two-detectors", "adopt-vs-redispatch")
BOUNDS: dict[str, int] = dict.fromkeys(SETS, 1) | dict.fromkeys(HEAVY, 0)


# --- the head's condition parts: catchers, reasons, pairs ------------------------------------------

# Each part caught switched off alone: (set, k, the violation reported).
CATCHERS: dict[str, tuple[str, int, str]] = {
    # Two ad-hoc runs relink one head from the same read: the second joins behind the head's old
    # link, and the first is reachable from nothing (the base set; the stale page's adopt-stale-page
    # has one ad-hoc run).
    "relink_head_ops:_head_version": ("manual-manual", 1, head_invariants.UNREACHABLE),
    # One of the four switchable before (sets_successor.REDISPATCH_FENCE), caught alone here: a
    # detector that read the claimed run before two redispatches (no lease yet, so no lease part)
    # writes its token back over the second's.
    "redispatch_head_op:_redispatch_version": ("redispatch-twice", 1, "token_decreased"),
}

TOKEN_MOVES = (
    "redundant with the token part: every write that moves a claimed run out of scheduled (its start, "
    "a redispatch that fails it) moves its token too"
)
# Parts no set catches switched off alone, and why (the form of tests/sim/test_switches.py
# ``UNCAUGHT``); each names the set that reaches its race and reports nothing (``ALONE``).
UNCAUGHT: dict[str, str] = {
    "recheck_claimed_op:_run_status": TOKEN_MOVES + " (the pair: PAIRS)",
    "recheck_claimed_op:_run_token": "no promise breaks: with the status part, a stale recheck lands "
    "only on a run still scheduled whose token moved since the read, i.e. after another detector's "
    "redispatch, which set check_at a dispatch lease past its own now; the recheck moves it back to the "
    "lapse it read, earlier: the detector looks earlier, never later, and judges the run again",
    "relink_head_ops:_head_scheduled": "redundant with the relink's ConditionCheck "
    "(_relink_successor_absent): a head leaves scheduled only once its successor key is filled (the "
    "claim's put before its start; a settle's record or a change's closure marker in the same "
    "transaction), so the check fails whenever this part would (the pair: PAIRS)",
    "redispatch_head_op:_lease_as_read": "redundant with _redispatch_version: a scheduled run's lease is "
    "written only by a redispatch (or a settle's dispatch, which creates the run), which moves its token "
    "too (the pair: PAIRS)",
    "redispatch_head_op:_not_asked_to_stop": "no promise breaks: a stop request (cancel_other) moves no "
    "token, so a redispatch read before it lands (reached: redispatch-stop-request); its message's start "
    "is refused by the start's own _not_asked_to_stop (start_op), so the run never starts, and the next "
    "sweep ends it (failed, its error 'cancelled: ...') a dispatch lease later, promoting the run that "
    "asked",
    # One of the four switchable before: caught only with _redispatch_version (REDISPATCH_FENCE).
    "redispatch_head_op:_redispatch_status_scheduled": TOKEN_MOVES + " (the pair: PAIRS)",
}
# The set that reaches each uncaught part's race at k=1, and reports nothing with it off alone.
ALONE: dict[str, str] = {
    "recheck_claimed_op:_run_status": "late-claim-recheck",
    "recheck_claimed_op:_run_token": "late-claim-recheck",
    "relink_head_ops:_head_scheduled": "tick-manual",
    "redispatch_head_op:_lease_as_read": "redispatch-twice",
    "redispatch_head_op:_not_asked_to_stop": "redispatch-stop-request",
    "redispatch_head_op:_redispatch_status_scheduled": "redispatch-twice",
}

# Parts that stop one race together, the set that catches them switched off together, and what it
# reports (the redundancy reasons above rest on these).
PAIRS: dict[tuple[str, ...], tuple[str, int, str]] = {
    # The recheck read 00:05 scheduled before its dispatch lease lapsed; the worker started and
    # committed it; the stale recheck puts check_at back on the succeeded run.
    ("recheck_claimed_op:_run_status", "recheck_claimed_op:_run_token"): (
        "late-claim-recheck",
        1,
        head_invariants.DUE_LEFT,
    ),
    ("relink_head_ops:_head_scheduled", "relink_head_ops:_relink_successor_absent"): (
        "tick-manual",
        1,
        head_invariants.ADHOC_BEHIND_CLAIMED,
    ),
    ("redispatch_head_op:_lease_as_read", "redispatch_head_op:_redispatch_version"): (
        "redispatch-twice",
        1,
        "token_decreased",
    ),
    ("redispatch_head_op:_redispatch_status_scheduled", "redispatch_head_op:_redispatch_version"): (
        "redispatch-twice",
        1,
        "token_decreased",
    ),
}


# --- the model's adoption mutant ---------------------------------------------------------------------


def _adopts_pending(original: Callable[..., Any]) -> Callable[..., Any]:
    """The model's ``adopt_pending``: HC3's adoption (``OverlapSettler._adopted``) also adopts a
    ``pending`` run, a retry whose message waits out its backoff."""

    def adopted(self: Any, message: RunMessage, refused_by: dict[str, Any] | None) -> RunMessage | None:
        if refused_by is None or refused_by.get("status") != RunStatus.PENDING.value:
            return original(self, message, refused_by)  # type: ignore[no-any-return]
        run = self._store.get(RUNS, run_key(message.run_id))
        if (
            run is None
            or run.get("status") != RunStatus.PENDING.value
            or int(run["version"]) <= message.version
        ):
            return None
        return message.model_copy(
            update={"version": int(run["version"]), "after_run_id": run.get("after_run_id")}
        )

    return adopted


def _recheck_ahead(original: Callable[[Item], Update]) -> Callable[[Item], Update]:
    """The model's ``recheck_ahead``: the detector's recheck of a renewed lease (core/transitions/
    recover.py ``recheck_op``, which the ``due`` sweep runs for a running run) keys the entry a
    lease past the lease it read, not at it."""

    def recheck(run: Item) -> Update:
        op = original(run)
        return replace(op, set={"check_at": int(run["lease_expires_at"]) + CFG.lease_seconds * 1000})

    return recheck


@contextmanager
def _replaced(owner: Any, name: str, replacement: Callable[[Any], Any]) -> Iterator[None]:
    """``name`` of ``owner`` (a class, or a module and every ``jobsched.`` module that imported it
    by name) replaced for the block: a mutant changes the product's own code on purpose, as
    sim/mutants.py does, so it names what it replaces by its name."""
    original = getattr(owner, name)
    holders = [owner]
    if isinstance(owner, ModuleType):
        holders += [
            m
            for n, m in sorted(sys.modules.items())
            if n.startswith("jobsched.") and m is not owner and vars(m).get(name) is original
        ]
    raw = owner.__dict__[name]
    for holder in holders:
        setattr(holder, name, replacement(original if holder is not owner else raw))
    try:
        yield
    finally:
        for holder in holders:
            setattr(holder, name, original if holder is not owner else raw)


# The worker's adoption (HC3), a method of the product's worker: the mutant replaces it by name.
ADOPTION = "_adopted"


MUTANTS: dict[str, Mutant] = {
    m.name: m
    for m in (
        Mutant(
            "adoption of a pending run (a retry)",
            "ReadsProtocol(adopt_pending=True)",
            lambda: _replaced(OverlapSettler, ADOPTION, _adopts_pending),
            "adopt-retry",
            head_invariants.RETRY_EARLY,
        ),
        Mutant(
            "the recheck keys the entry a lease past the lease",
            "ReadsProtocol(recheck_ahead=True)",
            lambda: _replaced(recover, "recheck_op", _recheck_ahead),
            "long-run-heartbeats",
            head_invariants.LEASE_HIDDEN,
        ),
    )
}
