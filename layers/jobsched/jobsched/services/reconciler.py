"""Level-triggered registration: the miss detector compares job items with their states.

The registrar is edge-triggered: it acts on a stream record. A record that fails for good (its
retries exhausted, sent to the failure queue) leaves its change unapplied, and nothing else
would apply it: the trigger and the detector only look at active jobs in the next-run index. So
each detector invocation also walks the jobs table, a bounded slice at a time, and compares
every job item with its state (``core/state.py`` ``differences``). A difference that lasts is a
change the registrar never applied: the reconciler applies it (``Registrar.apply``, the same
conditional writes) and logs it (``job.reconciled``, with what differed) and counts it
(``JobsReconciled``).

A difference is applied only once it has lasted ``SUSPECT_AFTER_MS``: a change whose stream
record is on its way (the usual case, well under a second) is left to the registrar function,
which knows when it was made and claims its first occurrence at once. The reconciler dates the
change by when it first saw it, so occurrences due after that are run late or recorded, not
dropped. A job registered under another ``ShardCount`` is moved at once (no stream record is
coming for that).

A job the stack's allow-lists made invalid differs from nothing when the stack lists its
destination later (no write to its item, no record): each pass checks such a job against the
lists as they are now and registers it, report and all, when they allow it (``_revalidate``).

The detector's bookkeeping item (``core/transitions/bookkeeping.py`` ``BOOKKEEPING_KEY``) keeps the place in
the jobs table (DynamoDB's Scan cursor), the differences seen and not yet applied, and the
highest ShardCount whose shards may still hold entries of either index (``shard_high``): while
it is above ShardCount the detector also sweeps those shards (expired leases and overdue jobs)
and moves the jobs still indexed there onto the shards the trigger queries
(docs/deploy.md, "Changing ShardCount"). Every change of the item is one write conditional on
its version, so two overlapping invocations never both move the cursor.

With the successor claim's migration switch on (the bookkeeping item's ``claim_shape``; issue 37,
build plan §5 and HC5), each job the pass reads also goes through services/head_reconciler.py: a
legacy state is converted, and a life whose end marker exists but whose finish write was lost is
finished. The pass counts the legacy states it met (``LegacyStates``, ``reconcile.successor_claim``)
and keeps the last whole pass's count on the bookkeeping item for ``jobsched migrate
successor-claim --check``. With the switch off the pass is today's.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from jobsched.core.claim_shape import ClaimShape, DeployedShape, stack_shape
from jobsched.core.clock import Clock
from jobsched.core.config import SchedulerConfig
from jobsched.core.errors import ConditionFailed, StoreError
from jobsched.core.job import JOB_ID_PATTERN, definition_digest
from jobsched.core.state import Registration, differences
from jobsched.core.transitions import BOOKKEEPING_KEY, bookkeeping_op
from jobsched.core.writes import JOBS, STATE, Item
from jobsched.ports import BATCH_GET_MAX_KEYS, IndexName, Store, Telemetry
from jobsched.services.completion import Completed, Completer, asks_delete
from jobsched.services.head_reconciler import HeadReconciler, count_legacy_states
from jobsched.services.paging import query_all
from jobsched.services.registrar import Registrar, refused_only_by_allow_lists

# Job items compared per detector invocation (one reconcile run per invocation, in its first
# sweep), read a Scan page at a time: a full pass over 10,000 jobs takes 20 invocations, 20
# minutes at the once-a-minute schedule (docs/design.md, "Lost stream records").
RECONCILE_JOBS_PER_RUN = 500
SCAN_PAGE = BATCH_GET_MAX_KEYS
# A difference is applied once it has lasted this long: a stream record in flight is not lost.
SUSPECT_AFTER_MS = 60_000
# Differences remembered between runs (about 100 bytes each on the bookkeeping item); more are
# seen again, and remembered, on the next pass.
MAX_SUSPECTS = 1_000
# Dropped shards must be found empty in both indexes this long before the detector stops
# sweeping them: a function version still running with the old ShardCount (a deployment's
# canary) may write there meanwhile.
DRAIN_HOLD_MS = 3_600_000

_JOB_ID = re.compile(JOB_ID_PATTERN)
# What differed, in the log, for an invalid job the stack's allow-lists allow now (``_revalidate``).
ALLOWED_NOW = "status invalid -> the stack's allow-lists allow its destinations now"


@dataclass
class Reconciled:
    checked: int = 0  # job items compared
    reconciled: int = 0  # differences applied
    suspected: int = 0  # differences seen and remembered, to apply if they last
    resharded: int = 0  # jobs moved off a dropped shard
    revalidated: int = 0  # of reconciled: invalid jobs the stack's allow-lists allow now, registered
    errors: int = 0
    passes_completed: int = 0
    lost_cursor: bool = False  # another invocation moved the bookkeeping first
    # With the successor claim's migration switch on (issue 37, build plan §5, HC5):
    legacy_states: int = 0  # states met still in next-run (each converted, or tried)
    converted: int = 0  # of legacy_states: converted to the successor claim
    finished: int = 0  # lives whose end marker was written and whose finish write was lost
    # action_after_completion: delete (services/completion.py)
    completion: Completed = field(default_factory=Completed)


class Reconciler:
    def __init__(
        self,
        store: Store,
        telemetry: Telemetry,
        clock: Clock,
        cfg: SchedulerConfig,
        registrar: Registrar,
        deployed: DeployedShape = DeployedShape.MIGRATING,
    ) -> None:
        self._store = store
        self._deployed = deployed  # the stack's claim indexes (template.yaml's ClaimShape)
        self._telemetry = telemetry
        self._clock = clock
        self._cfg = cfg
        self._registrar = registrar
        self._completer = Completer(store, telemetry, registrar)
        self._heads = HeadReconciler(store, telemetry, clock, cfg)
        # The shards the detector sweeps: ShardCount, or more while dropped shards drain.
        self.shard_span = cfg.shard_count
        self._item: Item | None = None
        self._loaded = False

    def load(self) -> None:
        """Read the bookkeeping: the detector does this before its first sweep, so that the
        sweep covers dropped shards (``shard_span``) from the start."""
        try:
            self._item = self._store.get(STATE, dict(BOOKKEEPING_KEY))
        except StoreError:
            return  # the run reads it again
        self._loaded = True
        recorded = int(self._item.get("shard_high", 0)) if self._item is not None else 0
        self.shard_span = max(recorded, self._cfg.shard_count)

    @property
    def claim_shape(self) -> ClaimShape:
        """The stack's migration switch (core/claim_shape.py), from the bookkeeping item as last
        read: the detector takes its ``due`` sweep from this read, not from one of its own.
        Legacy and successor stacks decide it by their indexes alone."""
        return stack_shape(self._item, self._deployed)

    def run(self, budget_left: Callable[[], bool], deadline_ms: int | None = None) -> Reconciled:
        done = Reconciled()
        now = self._clock.now_ms()
        if not self._loaded:
            self.load()
            if not self._loaded:
                return done  # the next invocation reads it
        item, self._loaded = self._item, False
        sets: Item = {}
        remove: list[str] = []
        self._shards(item, now, sets, remove, budget_left, deadline_ms, done)
        successor = stack_shape(item, self._deployed) is ClaimShape.SUCCESSOR
        self._scan(item, now, sets, budget_left, deadline_ms, done, successor)
        try:
            self._store.update(bookkeeping_op(item, sets, tuple(remove), now))
        except ConditionFailed:
            done.lost_cursor = True  # an overlapping invocation moved it: it goes on from there
        except StoreError:
            pass  # this run's slice is compared again next time
        self._telemetry.metric("JobsReconciled", done.reconciled)
        self._telemetry.metric("JobsRevalidated", done.revalidated)
        self._telemetry.metric("JobsDeletedAfterCompletion", done.completion.deleted)
        if successor:
            # The migration's counts (build plan §5): the detector's one-line summary is today's,
            # so they get their own line while the switch is on.
            self._telemetry.metric("LegacyStates", done.legacy_states)
            self._telemetry.metric("LivesFinished", done.finished)
            self._telemetry.event(
                "reconcile.successor_claim",
                "reconciler",
                legacy_states=done.legacy_states,
                converted=done.converted,
                finished=done.finished,
                passes_completed=done.passes_completed,
            )
        return done

    # --- dropped shards ---------------------------------------------------------------------------

    def _shards(
        self,
        item: Item | None,
        now: int,
        sets: Item,
        remove: list[str],
        budget_left: Callable[[], bool],
        deadline_ms: int | None,
        done: Reconciled,
    ) -> None:
        count = self._cfg.shard_count
        recorded = int(item.get("shard_high", count)) if item is not None else count
        high = max(recorded, count)
        if high > count:
            if self._drain(range(count, high), budget_left, deadline_ms, done):
                since = int(item.get("drained_since", now)) if item is not None else now
                if now - since >= DRAIN_HOLD_MS:
                    high = count
                    remove.append("drained_since")
                else:
                    sets["drained_since"] = since
            else:
                remove.append("drained_since")
        if high != recorded or item is None or "shard_high" not in item:
            sets["shard_high"] = high
        self.shard_span = high

    def _drain(
        self, shards: range, budget_left: Callable[[], bool], deadline_ms: int | None, done: Reconciled
    ) -> bool:
        """Move the jobs indexed on ``shards`` (beyond ShardCount) onto the shards the trigger
        queries. True when both indexes hold nothing on them (the lease sweep recovers leases
        there, and a heartbeat or a recovery writes a run's new lease on a queried shard). With
        the switch on, ``due`` in place of ``lease`` (HC13): it holds every lease and every head,
        and a head on a dropped shard stays there until it is claimed or settled."""
        leases: IndexName = "due" if self.claim_shape is ClaimShape.SUCCESSOR else "lease"
        # A stack deployed ``successor`` has no next-run: its legacy states are converted as the
        # pass walks them, and a converted state is on no shard.
        positions = self._deployed is not DeployedShape.SUCCESSOR
        empty = True
        for shard in shards:
            try:
                if self._store.query(leases, shard, limit=1).items:
                    empty = False
                for state in query_all(self._store, "next-run", shard) if positions else ():
                    empty = False
                    if not budget_left():
                        return False
                    job_id = str(state["job_id"])
                    if self._apply(job_id, ["sched_shard beyond ShardCount"], None, deadline_ms, done):
                        done.resharded += 1
            except StoreError:
                return False
        return empty

    # --- the jobs table ---------------------------------------------------------------------------

    def _scan(
        self,
        item: Item | None,
        now: int,
        sets: Item,
        budget_left: Callable[[], bool],
        deadline_ms: int | None,
        done: Reconciled,
        successor: bool = False,
    ) -> None:
        cursor = item.get("cursor") if item is not None else None
        passes = int(item.get("passes", 0)) if item is not None else 0
        suspects: dict[str, Any] = dict(item.get("suspects") or {}) if item is not None else {}
        self._recheck(suspects, now, passes, deadline_ms, done)
        while done.checked < RECONCILE_JOBS_PER_RUN and budget_left():
            try:
                page = self._store.scan(JOBS, SCAN_PAGE, cursor)
                jobs = [job for job in page.items if _JOB_ID.match(str(job.get("job_id")))]
                keys = [{"job_id": job["job_id"]} for job in jobs]
                states = {str(s["job_id"]): s for s in self._store.batch_get(STATE, keys)}
            except StoreError:
                break  # this page is read again next time
            for job in jobs:
                state = states.get(str(job["job_id"]))
                if successor and state is not None:
                    state = self._walk_head(job, state, done)
                self._compare(job, state, now, passes, suspects, deadline_ms, done)
                if asks_delete(job):
                    self._complete(job, state, done)
            done.checked += len(page.items)
            cursor = page.cursor
            if cursor is None:
                # A pass is complete: a difference not seen again in it is gone (its job item was
                # deleted, or the registrar applied it).
                suspects = {job_id: s for job_id, s in suspects.items() if int(s["pass"]) >= passes}
                passes += 1
                done.passes_completed += 1
                break
        if successor:
            started_fresh = item is None or item.get("cursor") is None
            count_legacy_states(item, sets, done.legacy_states, started_fresh, done.passes_completed > 0, now)
        sets["cursor"] = cursor
        sets["passes"] = passes
        sets["suspects"] = suspects

    def _walk_head(self, job: Item, state: Item, done: Reconciled) -> Item:
        """With the migration switch on: convert a legacy state, or finish a life whose finish
        write was lost (services/head_reconciler.py). Isolated as every job is: a store error
        leaves it for the next pass, any other failure is ``job.error``."""
        job_id = str(job["job_id"])
        try:
            walked = self._heads.walk(job, state)
        except StoreError as exc:
            self._telemetry.event(
                "job.reconcile_deferred", job_id, error=f"{type(exc).__name__}: {exc}"[:500]
            )
            return state
        except Exception as exc:  # one job's failure must not stop the others
            done.errors += 1
            self._telemetry.event(
                "job.error", job_id, actor="reconciler", error=f"{type(exc).__name__}: {exc}"[:500]
            )
            self._telemetry.metric("JobErrors", 1)
            return state
        done.legacy_states += walked.legacy
        done.converted += walked.converted
        done.finished += walked.finished
        return walked.state

    def _recheck(
        self, suspects: dict[str, Any], now: int, passes: int, deadline_ms: int | None, done: Reconciled
    ) -> None:
        """Differences that have lasted ``SUSPECT_AFTER_MS``, read again at once (up to a
        BatchGetItem's worth a run) rather than when the scan comes round: a lost change is then
        applied a minute or two after the pass first saw it, however long the pass."""
        ripe = [job_id for job_id, seen in suspects.items() if int(seen["seen_at"]) <= now - SUSPECT_AFTER_MS]
        keys = [{"job_id": job_id} for job_id in ripe[:BATCH_GET_MAX_KEYS]]
        if not keys:
            return
        try:
            jobs = {str(j["job_id"]): j for j in self._store.batch_get(JOBS, keys)}
            states = {str(s["job_id"]): s for s in self._store.batch_get(STATE, keys)}
        except StoreError:
            return  # the scan or the next run reads them
        for key in keys:
            job_id = key["job_id"]
            job = jobs.get(job_id)
            if job is None:
                suspects.pop(job_id, None)  # deleted: its REMOVE record, or the trigger, handles it
                continue
            self._compare(job, states.get(job_id), now, passes, suspects, deadline_ms, done)

    def _compare(
        self,
        job: Item,
        state: Item | None,
        now: int,
        passes: int,
        suspects: dict[str, Any],
        deadline_ms: int | None,
        done: Reconciled,
    ) -> None:
        job_id = str(job["job_id"])
        found = differences(job, state, self._cfg.shard_count)
        if not found:
            suspects.pop(job_id, None)
            self._revalidate(job, state, deadline_ms, done)
            return
        if all(what.startswith("sched_shard") for what in found):
            self._apply(job_id, found, None, deadline_ms, done)  # no stream record will come
            return
        digest = definition_digest(job)
        seen = suspects.get(job_id)
        if seen is not None and seen.get("digest") == digest:
            if int(seen["seen_at"]) <= now - SUSPECT_AFTER_MS:
                # Lasted: its stream record is lost. Dated when first seen (at the latest, the
                # change was made then), so what came due since is run late or recorded.
                if self._apply(job_id, found, int(seen["seen_at"]), deadline_ms, done):
                    suspects.pop(job_id, None)
                return
            seen["pass"] = passes
            return
        if len(suspects) < MAX_SUSPECTS or job_id in suspects:
            suspects[job_id] = {"digest": digest, "seen_at": now, "pass": passes}
            done.suspected += 1

    def _revalidate(self, job: Item, state: Item | None, deadline_ms: int | None, done: Reconciled) -> None:
        """A job the stack's allow-lists made invalid stays invalid when the stack lists its
        destination later: its job item is unchanged, so no stream record comes, and its state
        follows the item. So each pass checks such a job (``refused_only_by_allow_lists``) against
        the lists as they are now, with no store call, and registers it if they allow it, writing
        its report too (no registrar function sees it otherwise). Only with a registrar that
        checks the lists: one that does not would make every such job valid."""
        if not (self._registrar.checks_allow_lists and refused_only_by_allow_lists(job, state)):
            return
        job_id = str(job["job_id"])
        try:
            allowed = self._registrar.valid_now(job)
        except Exception as exc:  # one job's failure must not stop the others
            done.errors += 1
            self._telemetry.event(
                "job.error", job_id, actor="reconciler", error=f"{type(exc).__name__}: {exc}"[:500]
            )
            self._telemetry.metric("JobErrors", 1)
            return
        if not allowed:
            return  # still refused: nothing written
        if self._apply(job_id, [ALLOWED_NOW], None, deadline_ms, done, report=True):
            done.revalidated += 1

    def _complete(self, job: Item, state: Item | None, done: Reconciled) -> None:
        """``action_after_completion: delete``: level-triggered, on every job item the pass reads
        (services/completion.py), isolated: a store error defers the job, any other failure is
        ``job.error``; both are logged and counted, and the job is looked at again next pass."""
        try:
            self._completer.consider(job, state, done.completion)
        except StoreError as exc:  # throttled, transient, a lost response: the next pass reads again
            done.completion.deferred += 1
            self._telemetry.event(
                "job.delete_after_completion_deferred",
                str(job["job_id"]),
                error=f"{type(exc).__name__}: {exc}"[:500],
            )
            self._telemetry.metric("DeletesAfterCompletionDeferred", 1)
        except Exception as exc:  # one job's failure must not stop the others
            done.errors += 1
            self._telemetry.event(
                "job.error",
                str(job["job_id"]),
                actor="completion",
                error=f"{type(exc).__name__}: {exc}"[:500],
            )
            self._telemetry.metric("JobErrors", 1)

    def _apply(
        self,
        job_id: str,
        found: list[str],
        changed_at: int | None,
        deadline_ms: int | None,
        done: Reconciled,
        report: bool | None = None,
    ) -> bool:
        """Apply the registrar to one job, isolated: a failure is logged and counted, and the
        job is compared again on the next pass."""
        try:
            # Dated when first seen: provisional, the change's own record may yet date it.
            provisional = changed_at is not None
            outcome = self._registrar.apply(
                job_id, deadline_ms, changed_at=changed_at, provisional=provisional, report=report
            )
        except StoreError as exc:  # throttled, transient, a lost response: the next pass applies it
            self._telemetry.event(
                "job.reconcile_deferred", job_id, differed=found, error=f"{type(exc).__name__}: {exc}"[:500]
            )
            return False
        except Exception as exc:  # one job's failure must not stop the others
            done.errors += 1
            self._telemetry.event(
                "job.error", job_id, actor="reconciler", error=f"{type(exc).__name__}: {exc}"[:500]
            )
            self._telemetry.metric("JobErrors", 1)
            return False
        if outcome is Registration.CONFLICT:
            return False
        done.reconciled += 1
        self._telemetry.event(
            "job.reconciled", job_id, differed=found, outcome=outcome.value, changed_at=changed_at
        )
        return True
