"""The miss detector's sweep of the ``due`` index, with the migration switch on (issue 37;
docs/proposals/successor-claim-build.md §3 HC7, HC8, HC9, §4 row "detector"; model:
``model.detector``, ``model_mis.detector``).

``due`` holds every item with ``lease_shard``/``check_at``: the heads (``check_at`` = instant + the
dispatch lease, ``head_check_delay_ms``, kept through their claim and start) and every run with a
lease, legacy runs included (the two indexes share their key attributes). So with the switch on
the detector sweeps ``due`` *instead of* ``lease``, and no run is judged twice. The ``next-run``
overdue search stays for legacy states until they are converted (services/detector.py).

One sweep of ``due`` below now - skew, oldest first. Each entry's item is read again (strongly
consistent: the index projects neither ``status`` nor ``version``) and, for a head or a claimed
run, the item at its successor key; ``judge_due_entry`` (core/transitions/head_recover.py, HC7)
decides:

- ``SETTLE``: an unclaimed head past its grace, settled chunk after chunk (services/head_settler.py)
  under the job's misfire policy, as today's catch-up; not in a lease-only wake (overdue heads keep
  the full sweep's period, as overdue states do). The job item is read first: a job a person
  changed since the head was made is the registrar's (its change settles the head first, with a
  pause's or a delete's reason), as today's ``load_job`` leaves such a state to it;
- ``TRIGGERS`` (within grace: the trigger's), ``CLOSED`` (a change's marker), ``MOVED``: left;
- ``REDISPATCH``: a claimed run whose message was lost, past its dispatch lease and the skew
  allowance (from its start window, ``jitter_seconds``, so the run's definition is read): sent
  again with a new token (``redispatch_head_op``), as today's recovery sends a pending run;
- ``RECHECK``: a claimed run met before its dispatch lease lapsed (a late claim, a start window:
  HC8): its ``check_at`` moves to the lapse, once;
- ``OTHER``: a run with a lease (running, pending, buffered, a dead letter owed): today's check.

Overload degrades as the detector's does (services/detector.py's docstring): a bounded count
first (the degradation threshold plus one invocation's items, streamed, stopped at the deadline);
``run_all`` catch-up coalesced to ``run_once`` above the threshold; work bounded by the deadline
and ``detector_max_items``, oldest first, the rest counted in ``DetectorBacklog``. Every step is one
conditional write (or transaction), and each entry's failure is its own (logged, counted).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any, Generic, Protocol, TypeVar

from jobsched.core.clock import Clock
from jobsched.core.config import SchedulerConfig
from jobsched.core.errors import ConditionFailed, StoreError
from jobsched.core.head import TIMED_KINDS, head_check_delay_ms, is_unstarted_occurrence, next_key
from jobsched.core.job import InvalidJob, JobDefinition
from jobsched.core.run import RunStatus, run_key
from jobsched.core.timing import is_overdue
from jobsched.core.transitions.head_recover import (
    DueJudgement,
    DueVerdict,
    judge_due_entry,
    recheck_claimed_op,
    redispatch_head_op,
)
from jobsched.core.writes import JOBS, RUNS, Item, Update
from jobsched.ports import Store, Telemetry
from jobsched.services.dead_letters import DeadLetters
from jobsched.services.definitions import Definitions
from jobsched.services.dispatch import Dispatcher
from jobsched.services.head_settler import HeadSettler

# As services/detector.py's: runs are sent in chunks of this many as the sweep goes, the overdue
# count looks at the deadline every this many entries, and a lapsed backlog is counted this far.
DISPATCH_CHUNK = 100
COUNT_CHECK_EVERY = 256
BACKLOG_COUNT_LIMIT = 10_000


class Tally(Protocol):
    """What the sweep counts, on the detector's result (services/detector.py ``DetectResult``)."""

    items: int
    stopped_early: bool
    backlog: int
    degraded: bool
    missed_recorded: int
    catchups_started: int
    jobs_caught_up: int
    recovery_conflicts: int
    leases_rechecked: int


Result = TypeVar("Result", bound=Tally)
Entries = Callable[[int], Iterator[Item]]


class DueSweep(Generic[Result]):
    """One sweep of ``due`` (the module's docstring). It reuses the detector's own steps unchanged:
    ``check_run``, the check of a run with a lease (``OTHER``); ``after_recovery``, what follows a
    recovery's write (events, metrics, a failed run's dead letter, pause on failure, the run
    waiting behind); ``job_error``, the per-item error report."""

    def __init__(
        self,
        store: Store,
        telemetry: Telemetry,
        clock: Clock,
        cfg: SchedulerConfig,
        *,
        dispatcher: Dispatcher,
        dead_letters: DeadLetters,
        repair: Callable[[str], object],
        entries: Entries,
        check_run: Callable[[Item, int, int, Result], Item | None],
        after_recovery: Callable[[Item, Item, Update, int, int, Result], Item | None],
        job_error: Callable[[Result, str, Exception], None],
    ) -> None:
        self._store = store
        self._telemetry = telemetry
        self._clock = clock
        self._cfg = cfg
        self._dispatcher = dispatcher
        self._definitions = Definitions(store, cfg)
        self._dead_letters = dead_letters
        self._settler = HeadSettler(store, telemetry, cfg)
        self._repair = repair
        self._entries = entries  # every shard's ``due`` entries up to a bound, oldest first
        self._check_run = check_run
        self._after_recovery = after_recovery
        self._job_error = job_error

    def sweep(self, result: Result, budget_left: Callable[[], bool], leases_only: bool) -> None:
        now = self._clock.now_ms()
        # As the lease sweep: an entry counts as lapsed only after the skew allowance.
        expired_before = now - self._cfg.clock_skew_allowance_ms
        degraded = False
        limit: int | None = None
        if not leases_only:
            counted, overdue_heads = self._count(now, expired_before, budget_left)
            if counted == 0:
                return  # nothing lapsed, the usual case: no second pass over the index
            limit = counted
            degraded = overdue_heads > self._cfg.detector_degrade_backlog
            if degraded:
                result.degraded = True
                self._telemetry.event(
                    "detector.degraded", "miss_detector", overdue_jobs_at_least=overdue_heads
                )
        entries = self._entries(expired_before)
        if limit is not None:
            entries = itertools.islice(entries, limit)
        to_dispatch: list[Item] = []
        for handled, entry in enumerate(entries):
            if not budget_left():
                result.stopped_early = True
                if limit is not None:
                    result.backlog += limit - handled
                else:
                    result.backlog += 1 + sum(1 for _ in itertools.islice(entries, BACKLOG_COUNT_LIMIT))
                break
            result.items += 1
            try:
                to_dispatch += self._judge(
                    entry, now, expired_before, degraded, leases_only, result, budget_left
                )
            except StoreError:
                continue  # throttled or unknown: the entry is still lapsed next time
            except Exception as exc:  # one entry's failure must not stop the others
                self._job_error(result, str(entry.get("run_id")), exc)
                continue
            if len(to_dispatch) >= DISPATCH_CHUNK:
                self._dispatcher.dispatch(to_dispatch)  # sent as they come: none held for long
                to_dispatch = []
        self._dispatcher.dispatch(to_dispatch)

    def _count(self, now: int, expired_before: int, budget_left: Callable[[], bool]) -> tuple[int, int]:
        """The lapsed entries, and of them the unclaimed heads past their grace as the index shows
        them (a head's ``check_at`` is its instant plus ``head_check_delay_ms``, until a claim's
        redispatch or a recheck moves it), counted up to the degradation threshold plus what one
        invocation can use, a page at a time, stopped at the deadline: lower bounds then."""
        look = self._cfg.detector_degrade_backlog + self._cfg.detector_max_items
        counted = overdue_heads = 0
        for counted, entry in enumerate(itertools.islice(self._entries(expired_before), look), start=1):
            if _looks_overdue_head(entry, now, self._cfg):
                overdue_heads += 1
            if counted % COUNT_CHECK_EVERY == 0 and not budget_left():
                break
        return counted, overdue_heads

    def _judge(
        self,
        entry: Item,
        now: int,
        expired_before: int,
        degraded: bool,
        leases_only: bool,
        result: Result,
        budget_left: Callable[[], bool],
    ) -> list[Item]:
        """HC7: the entry's item read again, and a head's or claimed run's successor key."""
        run = self._store.get(RUNS, run_key(str(entry["run_id"])))
        successor = None
        lapsed = run is not None and int(run.get("check_at") or expired_before + 1) <= expired_before
        if run is not None and lapsed and is_unstarted_occurrence(run):
            successor = self._store.get(RUNS, {"job_id": run["job_id"], "run_id": next_key(run)})
        judgement = judge_due_entry(run, successor, now, self._cfg)
        if judgement.verdict is DueVerdict.OTHER:
            assert run is not None
            recovered = self._check_run(run, expired_before, now, result)
            return [] if recovered is None else [recovered]
        if judgement.verdict is DueVerdict.SETTLE:
            assert run is not None
            return [] if leases_only else self._settle(run, now, degraded, result, budget_left)
        if judgement.verdict in (DueVerdict.REDISPATCH, DueVerdict.RECHECK):
            assert run is not None and successor is not None
            # Judged again from the run's start window (its definition's ``jitter_seconds``),
            # which the message carries: a run sent with a delay is not redispatched before it.
            definition = self._definitions.load(str(run["job_id"]), str(run["def_hash"]))
            if definition is not None:
                judgement = judge_due_entry(run, successor, now, self._cfg, definition)
            if judgement.verdict is DueVerdict.REDISPATCH:
                return self._redispatch(run, judgement, definition, now, result)
            if judgement.verdict is DueVerdict.RECHECK:
                self._recheck(run, judgement, result)
        return []  # MOVED; TRIGGERS: the trigger's; CLOSED: its change closed it

    def _settle(
        self, head: Item, now: int, degraded: bool, result: Result, budget_left: Callable[[], bool]
    ) -> list[Item]:
        job_id = str(head["job_id"])
        item = self._store.get(JOBS, {"job_id": job_id})
        definition: JobDefinition | None = None
        if item is not None:
            try:
                definition = JobDefinition.from_item(item)
            except InvalidJob:
                definition = None
        if definition is None or definition.definition_hash() != head["def_hash"]:
            # A person changed the job since its head was made, and the registrar has not applied
            # it yet: its change settles the head first (with a stop's reason), so it is applied
            # inline now, as today's catch-up does (services/loaded_job.py); the next sweep
            # judges the head the change left.
            self._repair(job_id)
            return []
        before = result.items

        def left(decided: int) -> bool:
            result.items = before + decided  # the budget counts the occurrences as they land
            return budget_left()

        settled = self._settler.settle(head, now, left, degraded=degraded, definition=definition.to_item())
        result.items = before + len(settled.decided)
        result.missed_recorded += len(settled.missed)
        result.catchups_started += len(settled.to_dispatch)
        if settled.chunks:
            result.jobs_caught_up += 1
        if not settled.complete and not settled.lost_race:
            result.stopped_early = True
            result.backlog += 1
        return settled.to_dispatch

    def _redispatch(
        self, run: Item, judgement: DueJudgement, definition: Item | None, now: int, result: Result
    ) -> list[Item]:
        """The lost dispatch of a claimed run: a new token, a dispatch lease from now, sent again
        (or failed for good after ``MAX_REDISPATCHES``, ended as cancelled if a newer run asked it
        to stop); what follows the write is today's recovery's."""
        update, after = redispatch_head_op(run, now, self._cfg)
        if after["status"] == RunStatus.FAILED.value:
            update = self._dead_letters.mark_recovered(update, run, now)
        elif definition is not None:
            after["definition"] = definition  # the message carries it: no second read to send
        try:
            self._store.write([update])
        except ConditionFailed as lost:
            result.recovery_conflicts += 1
            self._telemetry.event("recovery.lost", run["run_id"], failed=lost.label)
            return []
        assert judgement.lease_until is not None
        sent = self._after_recovery(run, after, update, now, judgement.lease_until, result)
        return [] if sent is None else [sent]

    def _recheck(self, run: Item, judgement: DueJudgement, result: Result) -> None:
        assert judgement.lease_until is not None
        try:
            self._store.update(recheck_claimed_op(run, judgement.lease_until))
        except ConditionFailed:
            return  # started, redispatched or settled meanwhile: nothing to look at
        result.leases_rechecked += 1


def _looks_overdue_head(entry: Item, now: int, cfg: SchedulerConfig) -> bool:
    """An entry the index shows as an unclaimed head past its grace (the degradation's count)."""
    if entry.get("kind") not in TIMED_KINDS or "next_key" not in entry or "scheduled_at" not in entry:
        return False
    at = int(entry["scheduled_at"])
    if int(entry["check_at"]) - at > head_check_delay_ms(cfg):
        # Redispatched or rechecked (a claimed run), or a head written under a longer dispatch
        # lease than the stack's now: not counted (the count is a lower bound).
        return False
    misfire: Any = entry.get("misfire") if isinstance(entry.get("misfire"), dict) else {}
    return is_overdue(at, now, int(misfire.get("grace_seconds", 60)), cfg)
