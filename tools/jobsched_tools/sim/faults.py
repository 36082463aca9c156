"""Fault injectors: a Store wrapper (throttling, transient errors, lost responses, crashes during a
heartbeat, an interleaved second trigger) and a work queue with send faults and crash points.

The wrappers also keep the simulation's own ledger of what reached the store: every applied
commit with the token it was made with, checked against the run as it was just before the write.
That ledger is what the invariants read, independently of the services' own bookkeeping.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from jobsched.core import invariants as core_invariants
from jobsched.core.clock import Clock
from jobsched.core.errors import ConditionFailed, Throttled, TransientStoreError
from jobsched.core.run import run_key
from jobsched.core.writes import (
    JOBS,
    RUNS,
    STATE,
    Check,
    Cond,
    Delete,
    Item,
    Put,
    Update,
    WriteOp,
    conditions_hold,
)
from jobsched.ports import (
    INDEX_KEYS,
    INDEX_PROJECTION,
    DeadLetterRefused,
    IndexName,
    OutgoingMessage,
    Page,
    SendResult,
    Store,
)
from jobsched.services.definitions import is_snapshot
from jobsched.services.paging import query_all

from jobsched_tools.fakes.memory_queue import MemoryWorkQueue
from jobsched_tools.fakes.memory_store import MemoryStore
from jobsched_tools.sim.scenario import FaultRates

EFFECTS = "effects"
UNFINISHED_STATUSES = frozenset({"pending", "running", "buffered"})


def _waits(run: Item) -> list[str]:
    """The runs ``run`` waits for, by its own attributes (``core_invariants.waits_for``, before
    looking at whether they are unfinished)."""
    if run.get("status") not in UNFINISHED_STATUSES:
        return []
    found = [str(run["blocked_by"])] if run.get("status") == "buffered" and run.get("blocked_by") else []
    if run.get("overtaken_by") and str(run["overtaken_by"]) not in found:
        found.append(str(run["overtaken_by"]))
    return found


class SimCrash(BaseException):
    """The simulated process dies here. A BaseException, so no service's ``except`` swallows it."""


@dataclass(frozen=True)
class StateMark:
    """A job's state item as one write left it: what the invariants need of its history."""

    at: int
    status: str
    timing: tuple[tuple[str, str], ...]
    next_run_at: int | None
    # The last occurrence with a record when the mark was made: where a job finished by its
    # max_runs stops being due (its schedule goes on; a finished schedule's has no more).
    last_scheduled_at: int | None = None


@dataclass
class Ledger:
    """What the store saw, kept by the simulation (not by the services)."""

    commits: dict[str, list[tuple[int, str, int, str]]] = field(default_factory=dict)
    fenced_commits: list[tuple[str, str]] = field(default_factory=list)  # (run_id, detail)
    effect_conflicts: list[tuple[str, str]] = field(default_factory=list)  # (run_id, actor)
    # Each job's state as every write left it (status, timing, next occurrence), in order.
    states: dict[str, list[StateMark]] = field(default_factory=dict)
    # Writes that created a run record, per run id: more than one means a record was overwritten.
    creations: Counter[str] = field(default_factory=Counter)
    # Violations seen at the moment of a write (kind, key, detail).
    seen: list[tuple[str, str, str]] = field(default_factory=list)
    # Runs in `running` whose overlap policy keeps a slot, per job.
    running: dict[str, set[str]] = field(default_factory=dict)
    # core/invariants.py's checks after every write, on the items the write touched (issue 25):
    # violations per invariant, and the first few of each. Reported, not yet failing the run:
    # today's two-write claim breaks some between its writes.
    core: Counter[str] = field(default_factory=Counter)
    core_examples: list[str] = field(default_factory=list)
    tokens: core_invariants.Tokens = field(default_factory=core_invariants.Tokens)
    # action_after_completion: delete (issue 29): when each job's item was deleted after its
    # completion, while it stays deleted (a person's re-creation ends the watch), and how many.
    deleted_after_completion: dict[str, int] = field(default_factory=dict)
    completion_deletes: list[tuple[str, int, int]] = field(default_factory=list)  # (job, at, runs)


class FaultyStore:
    """Wraps a Store. With ``enabled``, each call may be throttled or fail transiently before it
    happens, and each write may be applied and then lose its response (TransientStoreError)."""

    def __init__(
        self,
        inner: Store,
        rng: random.Random,
        rates: FaultRates,
        counts: Counter[str],
        clock: Clock,
        log: Callable[[str, str, str, str], None],
    ) -> None:
        self.inner = inner
        self.rng = rng
        self.rates = rates
        self.counts = counts
        self.clock = clock
        self.log = log
        self.enabled = False
        self.actor = "setup"
        self.ledger = Ledger()
        # Set by the world: called once, inside a trigger's claim, to run another tick interleaved.
        self.interleave: Callable[[], None] | None = None
        # Set by the world: called once, with the job id, just before a claim creates its run.
        self.before_create: Callable[[str], None] | None = None
        # Set by the world: the next claim lands and its claimer dies (before it sends the run);
        # then ``after_mid_claim_crash`` is called with the job id.
        self.crash_after_create = False
        self.after_mid_claim_crash: Callable[[str], None] | None = None
        # Set by the world: the next heartbeat write crashes its worker ("before" or "after" it lands).
        self.heartbeat_crash: str | None = None
        # Set by the world: called with a job id after every write to a job item (the stream).
        self.on_job_write: Callable[[str], object] | None = None
        # Set by the world: called with a run id just before the detector's recovery write.
        self.before_recovery: Callable[[str], None] | None = None
        # How far any actor's clock may be off: a recovery of a lease renewed beyond it is live.
        self.skew_bound_ms = 0
        # Set by the world: stretches in which capacity runs short (FaultRates.capacity_squeezes).
        self.squeezes: list[tuple[int, int]] = []

    # --- faults --------------------------------------------------------------------------------

    def _before_call(self, what: str) -> None:
        if not self.enabled:
            return
        now = self.clock.now_ms()
        squeezed = any(start <= now < end for start, end in self.squeezes)
        if self.rng.random() < (self.rates.squeeze_throttle if squeezed else self.rates.store_throttle):
            self.counts["store_throttle"] += 1
            self.log(self.actor, "fault.store_throttle", what, "")
            raise Throttled(f"injected throttling on {what}")
        if self.rng.random() < self.rates.store_transient:
            self.counts["store_transient"] += 1
            self.log(self.actor, "fault.store_transient", what, "")
            raise TransientStoreError(f"injected transient error on {what}")

    def _after_write(self, what: str) -> None:
        if self.enabled and self.rng.random() < self.rates.store_lost_response:
            self.counts["store_lost_response"] += 1
            self.log(self.actor, "fault.store_lost_response", what, "")
            raise TransientStoreError(f"injected lost response: {what} was applied")

    # --- Store ---------------------------------------------------------------------------------

    def get(self, table: str, key: Item, consistent: bool = True) -> Item | None:
        self._before_call(f"get {_key_text(key)}")
        return self.inner.get(table, key, consistent)

    def query(
        self,
        index: IndexName,
        partition: Any,
        sort_from: int | None = None,
        sort_to: int | None = None,
        limit: int = 100,
        cursor: dict[str, Any] | None = None,
        consistent: bool = False,
    ) -> Page:
        self._before_call(f"query {index}/{partition}")
        return self.inner.query(index, partition, sort_from, sort_to, limit, cursor, consistent)

    def scan(self, table: str, limit: int = 100, cursor: dict[str, Any] | None = None) -> Page:
        return self.inner.scan(table, limit, cursor)

    def batch_get(self, table: str, keys: Sequence[Item], consistent: bool = False) -> list[Item]:
        self._before_call(f"batch_get {table} ({len(keys)} keys)")
        return self.inner.batch_get(table, keys, consistent)

    def delete(self, table: str, key: Item, condition: tuple[Cond, ...] = (), label: str = "delete") -> None:
        self._before_call(f"delete {_key_text(key)}")
        self.inner.delete(table, key, condition, label)
        self._observe_delete(table, key)

    def write(self, ops: Sequence[WriteOp]) -> None:
        what = ", ".join(f"{op.label} {_op_key(op)}" for op in ops[:3]) + (" ..." if len(ops) > 3 else "")
        self._before_call(what)
        if self.interleave is not None and any(op.label == "advance job" for op in ops):
            interleave, self.interleave = self.interleave, None
            interleave()
        if self.before_create is not None:
            created = next((op for op in ops if op.label == "create run" and isinstance(op, Put)), None)
            if created is not None:
                before_create, self.before_create = self.before_create, None
                before_create(str(created.item["job_id"]))
        if self.before_recovery is not None and self.actor == "detector":
            for op in ops:
                if op.label == "recover run" and isinstance(op, Update):
                    self.before_recovery(str(op.key["run_id"]))
        pre = self._commit_preimages(ops)
        runs_before = self._run_preimages(ops)
        try:
            self.inner.write(ops)
        except ConditionFailed as lost:
            self._note_effect_conflict(ops, lost)
            raise
        self._record_commits(ops, pre)
        self._observe(ops, runs_before)
        created = next((op for op in ops if op.label == "create run" and isinstance(op, Put)), None)
        if self.crash_after_create and created is not None:
            self.crash_after_create = False
            self.counts["trigger_crash_mid_claim"] += 1
            if self.after_mid_claim_crash is not None:
                self.after_mid_claim_crash(str(created.item["job_id"]))
            raise SimCrash("crashed after a claim landed, before it sent")
        self._after_write(what)

    def update(self, op: Update) -> Item:
        what = f"{op.label} {_op_key(op)}"
        crash = self.heartbeat_crash if op.label == "heartbeat" else None
        if crash is not None:
            self.heartbeat_crash = None
            if crash == "before":
                raise SimCrash("worker crashed sending its heartbeat")
        self._before_call(what)
        pre = self._commit_preimages([op])
        runs_before = self._run_preimages([op])
        result = self.inner.update(op)
        self._record_commits([op], pre)
        self._observe([op], runs_before)
        if crash == "after":
            raise SimCrash("worker crashed right after its heartbeat landed")
        self._after_write(what)
        return result

    # --- what every write did, seen by the simulation ------------------------------------------

    def _run_preimages(self, ops: Sequence[WriteOp]) -> dict[str, Item | None]:
        return {
            str(_run_key(op)): self.inner.get(RUNS, run_key(_run_key(op)))
            for op in ops
            if op.table == RUNS and not isinstance(op, Check)
        }

    def _observe(self, ops: Sequence[WriteOp], runs_before: dict[str, Item | None]) -> None:
        """After a write landed: note the state items and runs it changed, and any invariant it
        broke at that moment (a record created twice, two slot-holding runs of one job running,
        an unfinished run without a lease, a recovery of a lease a heartbeat had renewed)."""
        now = self.clock.now_ms()
        for op in ops:  # first: the stream's registrar below moves the state on at once
            if isinstance(op, Delete) and op.table == JOBS and op.label == "delete after completion":
                self._completion_delete(str(op.key["job_id"]), now)
        for op in ops:
            if op.table == STATE and not isinstance(op, Check):
                job_id = str(op.item["job_id"] if isinstance(op, Put) else op.key["job_id"])
                if not is_snapshot({"job_id": job_id}):  # a definition snapshot is not a job's state
                    # A registration's write dates its change (``changed_at``): when a late or
                    # lost stream record's change took effect, which can be before this write.
                    dated = op.set.get("changed_at") if isinstance(op, Update) else None
                    self.note_state(job_id, self.inner.get(STATE, {"job_id": job_id}), dated)
            elif op.table == JOBS and self.on_job_write is not None:
                self.on_job_write(str(op.item["job_id"] if isinstance(op, Put) else op.key["job_id"]))
        for op in ops:
            if op.table != RUNS or isinstance(op, Check):
                continue
            run_id = str(_run_key(op))
            before, after = runs_before.get(run_id), self.inner.get(RUNS, run_key(run_id))
            if isinstance(op, Put):
                self.ledger.creations[run_id] += 1
                if before is not None:
                    self._violate("record_overwritten", run_id, f"{self.actor}'s {op.label} replaced it")
            if after is not None:
                self._observe_run(run_id, op.label, before, after, now)
        self._check_core(ops, runs_before)

    # Checkable on the items one write touched (the chain's reachability and the messages' links
    # need the whole job and the queue: ``invariants.check`` runs those on the final tables).
    LOCAL_INVARIANTS = (
        core_invariants.ONE_RECORD,
        core_invariants.TOKEN_DECREASED,
        core_invariants.NO_WALK,
        core_invariants.BEYOND_POSITION,
    )

    def _check_core(self, ops: Sequence[WriteOp], runs_before: dict[str, Item | None]) -> None:
        runs = [
            self.inner.get(RUNS, run_key(str(_run_key(op))))
            for op in ops
            if op.table == RUNS and not isinstance(op, Check)
        ]
        written = [run for run in runs if run is not None]
        jobs = {str(run["job_id"]) for run in written}
        jobs |= {
            str(op.key["job_id"])
            for op in ops
            if op.table == STATE and isinstance(op, Update) and not is_snapshot({"job_id": op.key["job_id"]})
        }
        states = [state for state in (self.inner.get(STATE, {"job_id": job}) for job in jobs) if state]
        self.note_core(
            core_invariants.check(states, written, None, self.ledger.tokens, self.LOCAL_INVARIANTS)
        )
        self._check_waits(written, runs_before)
        for run in written:  # I9: a named wait is owed its promotion (a read or two, at a wait only)
            before = runs_before.get(str(run["run_id"]))
            self.note_core(core_invariants.owed_promotion(before, run, self._read_run))

    def _check_waits(self, written: Sequence[Item], runs_before: dict[str, Item | None]) -> None:
        """The waits-for relation stays acyclic (``core_invariants.WAITS_ACYCLIC``): a new cycle
        goes through a wait this write made (a run newly buffered behind a run, or newly
        overtaken), so only the run waited for is followed, along the relation, back to the
        waiter: a few reads, and only at such a write (a lease renewal makes no new wait)."""
        for run in written:
            run_id = str(run["run_id"])
            before = runs_before.get(run_id) or {}
            new = set(_waits(run)) - set(_waits(before))
            for target in sorted(new):
                path = self._waits_path(target, run_id)
                if path is not None:
                    cycle = " -> ".join([*path, run_id])
                    self.note_core([core_invariants.Violation(core_invariants.WAITS_ACYCLIC, run_id, cycle)])

    def _read_run(self, run_id: str) -> Item | None:
        return self.inner.get(RUNS, run_key(run_id))

    def _waits_path(self, start: str, goal: str) -> list[str] | None:
        """The runs from ``start`` to ``goal`` along the waits-for relation, if ``goal`` is reached
        (bounded: a line of waiting runs is read at most 64 deep)."""
        todo: list[list[str]] = [[start]]
        seen: set[str] = set()
        while todo and len(seen) < 64:
            path = todo.pop()
            if path[-1] == goal:
                return path
            if path[-1] in seen:
                continue
            seen.add(path[-1])
            run = self.inner.get(RUNS, run_key(path[-1]))
            if run is None:
                continue
            # A finished run waits for nothing (``_waits``), so a path through one ends there.
            todo += [[*path, other] for other in _waits(run)]
        return None

    def note_core(self, found: Sequence[core_invariants.Violation]) -> None:
        for violation in found:
            self.ledger.core[violation.invariant] += 1
            if len(self.ledger.core_examples) < 20:
                self.ledger.core_examples.append(f"{violation} ({self.actor})")

    def _completion_delete(self, job_id: str, now: int) -> None:
        """The moment a job's item was deleted after its completion (services/completion.py): the
        job must be complete then. Its state finished, and none of its runs pending, running or
        buffered (read here from the tables, not from what the service read)."""
        runs = [run for run in self._runs_of(job_id)]
        unfinished = sorted(str(r["run_id"]) for r in runs if r.get("status") in UNFINISHED_STATUSES)
        if unfinished:
            self._violate(
                "deleted_before_complete", job_id, f"{len(unfinished)} runs not ended, {unfinished[0]} first"
            )
        state = self.inner.get(STATE, {"job_id": job_id})
        if state is None or state.get("status") != "finished":
            status = None if state is None else state.get("status")
            self._violate("deleted_before_complete", job_id, f"its state was {status}, not finished")
        self.ledger.deleted_after_completion[job_id] = now
        self.ledger.completion_deletes.append((job_id, now, len(runs)))

    def _runs_of(self, job_id: str) -> list[Item]:
        if isinstance(self.inner, MemoryStore):
            return [r for r in self.inner.tables[RUNS].values() if r.get("job_id") == job_id]
        return list(query_all(self.inner, "runs-of-job", job_id))

    def _watch_deleted(self, job_id: str, run_id: str, label: str, before: Item | None, after: Item) -> None:
        """No run of a job deleted after its completion is made or starts while its item stays
        deleted: nothing of it was left to run. A person's re-creation of the item ends the watch
        (the new life's runs are its own)."""
        since = self.ledger.deleted_after_completion.get(job_id)
        if since is None:
            return
        started = after.get("status") == "running" and (before is None or before.get("status") != "running")
        if before is not None and not started:
            return
        if self.inner.get(JOBS, {"job_id": job_id}) is not None:
            del self.ledger.deleted_after_completion[job_id]  # re-created: a new life
            return
        what = "made" if before is None else "started"
        self._violate("ran_after_deletion", run_id, f"{what} by {self.actor}'s {label}, deleted at {since}")

    def _observe_run(self, run_id: str, label: str, before: Item | None, after: Item, now: int) -> None:
        status = after.get("status")
        job_id = str(after.get("job_id"))
        self._watch_deleted(job_id, run_id, label, before, after)
        holders = self.ledger.running.setdefault(job_id, set())
        was_running = before is not None and before.get("status") == "running"
        if status == "running" and not was_running and _keeps_slot(after):
            others = sorted(holders - {run_id})
            if others:
                self._violate("overlap_violated", run_id, f"started while {others[0]} runs (overlap policy)")
            holders.add(run_id)
        elif status != "running":
            holders.discard(run_id)
        unfinished = status not in ("succeeded", "failed", "skipped", "missed", "cancelled")
        if unfinished and not all(name in after for name in ("lease_expires_at", "check_at", "lease_shard")):
            self._violate("run_without_lease", run_id, f"{status} after {self.actor}'s {label}")
        asked_to_stop = before.get("cancel_requested") if before is not None else None
        if label == "recover run" and asked_to_stop and status == "pending":
            # cancel_other: a run asked to stop is ended as cancelled, never run again.
            self._violate(
                "cancelled_run_redispatched", run_id, f"asked to stop by {asked_to_stop}, sent again"
            )
        if label == "recover run" and before is not None:
            renewed = int(before.get("lease_expires_at") or 0)
            if renewed > now + self.skew_bound_ms:
                self._violate(
                    "live_lease_recovered", run_id, f"its lease ran to {renewed} ({renewed - now} ms ahead)"
                )

    def note_state(self, job_id: str, state: Item | None, dated: int | None = None) -> None:
        if state is None:
            return
        timing = tuple(sorted((state.get("timing") or {}).items()))
        next_run = state.get("next_run_at")
        at = self.clock.now_ms() if dated is None else min(self.clock.now_ms(), int(dated))
        mark = StateMark(at, str(state.get("status")), timing, next_run, state.get("last_scheduled_at"))
        marks = self.ledger.states.setdefault(job_id, [])
        if not marks or (marks[-1].status, marks[-1].timing, marks[-1].next_run_at) != (
            mark.status,
            mark.timing,
            mark.next_run_at,
        ):
            marks.append(mark)

    def _observe_delete(self, table: str, key: Item) -> None:
        if table == JOBS and self.on_job_write is not None:
            self.on_job_write(str(key["job_id"]))

    def _violate(self, kind: str, key: str, detail: str) -> None:
        self.ledger.seen.append((kind, key, detail))
        self.log(self.actor, f"ledger.{kind}", key, detail)

    # --- the ledger ----------------------------------------------------------------------------

    def _commit_preimages(self, ops: Sequence[WriteOp]) -> dict[int, Item | None]:
        return {
            index: self.inner.get(RUNS, dict(op.key))
            for index, op in enumerate(ops)
            if isinstance(op, Update) and op.table == RUNS and op.label.startswith("commit ")
        }

    def _record_commits(self, ops: Sequence[WriteOp], pre: dict[int, Item | None]) -> None:
        now = self.clock.now_ms()
        for index, before in pre.items():
            op = ops[index]
            assert isinstance(op, Update)
            run_id = str(op.key["run_id"])
            held = int(op.set["version"]) - 1
            self.ledger.commits.setdefault(run_id, []).append((now, self.actor, held, op.label))
            self.log(self.actor, "ledger.commit", f"{run_id} {op.label} token={held}", "")
            current = None if before is None else before.get("version")
            status = None if before is None else before.get("status")
            if before is None or current != held or status not in ("running", "pending"):
                detail = (
                    f"{self.actor} committed with token {held}; the run was {status} at version {current}"
                )
                self.ledger.fenced_commits.append((run_id, detail))

    def _note_effect_conflict(self, ops: Sequence[WriteOp], lost: ConditionFailed) -> None:
        if lost.op is not ops[0] and lost.op.table == EFFECTS:
            # The fenced commit (operation 0) held, yet the effect was applied already: a second
            # commit of the same run got through the fence.
            first = ops[0]
            run_id = str(first.key["run_id"]) if isinstance(first, Update) else "?"
            self.ledger.effect_conflicts.append((run_id, self.actor))
            self.log(self.actor, "ledger.effect_conflict", run_id, "")


class LeaseIndexedMemoryStore(MemoryStore):
    """MemoryStore whose ``lease`` index query looks only at leased runs: the simulation's runs
    table grows to tens of thousands of items and the detector queries it every minute. Same
    answers as MemoryStore (the items are filtered and ordered by the same rules)."""

    def __init__(self, extra_keys: dict[str, tuple[str, ...]] | None = None) -> None:
        super().__init__(extra_keys)
        self._leased: dict[Any, None] = {}  # the runs table's keys (job_id, run_id) of leased runs

    def get(self, table: str, key: Item, consistent: bool = True) -> Item | None:  # noqa: ARG002 - always consistent
        with self._lock:
            self._count("GetItem")
            item = self._table(table).get(self._key_value(table, key))
            return _copy(item) if item is not None else None

    def update(self, op: Update) -> Item:
        self._validate(op)
        with self._lock:
            self._count("UpdateItem")
            current = self._table(op.table).get(self._target(op))
            self._check_sizes([op], [current], single=True)
            if not conditions_hold(op.condition, current):
                raise ConditionFailed(0, op, _copy(current))
            updated: Item = _copy(self._apply(op))
            return updated

    def _apply(self, op: WriteOp) -> Item:
        item = self._apply_fast(op)
        if op.table == RUNS and not isinstance(op, Check):
            key = self._target(op)
            if "check_at" in item and "lease_shard" in item:
                self._leased[key] = None
            else:
                self._leased.pop(key, None)
        return item

    def _apply_fast(self, op: WriteOp) -> Item:
        """MemoryStore._apply with a plain-data copy instead of copy.deepcopy (items hold only
        dicts, lists and scalars), the simulation's hottest path."""
        table = self._table(op.table)
        if isinstance(op, Check):
            return {}
        if isinstance(op, Delete):
            table.pop(self._target(op), None)
            return {}
        if isinstance(op, Put):
            item = {k: _copy(v) for k, v in op.item.items() if v is not None}
            table[self._target(op)] = item
            return item
        key_value = self._target(op)
        old = table.get(key_value)
        # Stored items are never handed out or mutated in place, so the new version may share
        # the unchanged nested values of the old one.
        item = dict(old) if old is not None else dict(op.key)
        for name, value in op.set.items():
            if value is None:
                item.pop(name, None)
            else:
                item[name] = _copy(value)
        for name, value in op.set_if_missing.items():
            if value is not None and (old is None or name not in old):
                item[name] = _copy(value)
        for name, amount in op.add.items():
            item[name] = int(item.get(name, 0)) + amount
        for name in op.remove:
            item.pop(name, None)
        table[key_value] = item
        return item

    def query(
        self,
        index: IndexName,
        partition: Any,
        sort_from: int | None = None,
        sort_to: int | None = None,
        limit: int = 100,
        cursor: dict[str, Any] | None = None,
        consistent: bool = False,
    ) -> Page:
        if index != "lease":
            return super().query(index, partition, sort_from, sort_to, limit, cursor, consistent)
        pk, sk = INDEX_KEYS[index]
        with self._lock:
            self._count("Query")
            runs = self.tables[RUNS]
            matches = []
            for key in self._leased:
                item = runs.get(key)
                if (
                    item is not None
                    and pk in item
                    and item[pk] == partition
                    and type(item[pk]) is type(partition)
                    and sk in item
                    and (sort_from is None or item[sk] >= sort_from)
                    and (sort_to is None or item[sk] <= sort_to)
                ):
                    matches.append(item)
            matches.sort(key=lambda item: (item[sk], item["run_id"]))
            if cursor is not None:
                after = (cursor[sk], cursor["run_id"])
                matches = [m for m in matches if (m[sk], m["run_id"]) > after]
            page = matches[:limit]
            more = len(matches) > limit
            next_cursor = {sk: page[-1][sk], "run_id": page[-1]["run_id"]} if more and page else None
            projected = INDEX_PROJECTION[index]  # the lease index holds keys only, as on DynamoDB
            return Page([{k: item[k] for k in projected if k in item} for item in page], next_cursor)


class SimQueue(MemoryWorkQueue):
    """MemoryWorkQueue with send faults and a crash point: ``crash_next_send`` makes the next send
    raise SimCrash (the sender dies after its writes, before the messages leave)."""

    def __init__(
        self,
        clock: Clock,
        visibility_timeout_seconds: int,
        rng: random.Random,
        rates: FaultRates,
        counts: Counter[str],
    ) -> None:
        super().__init__(clock, visibility_timeout_seconds)
        self.rng = rng
        self.rates = rates
        self.counts = counts
        self.enabled = False
        self.crash_next_send = False
        self.fail_message = self._fail_message
        self.fail_request = self._fail_request

    def _fail_message(self, _message: OutgoingMessage) -> bool:
        if self.enabled and self.rng.random() < self.rates.sqs_send_failure:
            self.counts["sqs_send_failure"] += 1
            return True
        return False

    def _fail_request(self, _messages: Sequence[OutgoingMessage]) -> bool:
        if self.enabled and self.rng.random() < self.rates.sqs_request_failure:
            self.counts["sqs_request_failure"] += 1
            return True
        return False

    def send(self, messages: Sequence[OutgoingMessage]) -> SendResult:
        if self.crash_next_send:
            self.crash_next_send = False
            self.counts["trigger_crash_before_send"] += 1
            raise SimCrash("crashed after claiming, before sending")
        return super().send(messages)

    def inject(self, body: dict[str, Any], delay_seconds: int) -> None:
        """Queue a copy of a message (a duplicate delivery), bypassing the send faults."""
        enabled, self.enabled = self.enabled, False
        try:
            super().send([OutgoingMessage("dup", body, delay_seconds)])
        finally:
            self.enabled = enabled


def _run_key(op: WriteOp) -> Any:
    return op.item["run_id"] if isinstance(op, Put) else op.key["run_id"]


def _keeps_slot(run: Item) -> bool:
    # Only a run that will run carries its overlap policy (core/transitions/claim.py new_run_item).
    return "overlap" in run and run["overlap"] != "allow"


def _copy(value: Any) -> Any:
    """A deep copy of plain data (dicts, lists, scalars), several times faster than deepcopy."""
    kind = type(value)
    if kind is dict:
        return {k: _copy(v) for k, v in value.items()}
    if kind is list:
        return [_copy(v) for v in value]
    return value


def _key_text(key: Item) -> str:
    return ",".join(str(v) for v in key.values())


def _op_key(op: WriteOp) -> str:
    if isinstance(op, Put):
        return str(op.item.get("run_id") or op.item.get("job_id") or op.item.get("pk"))
    return _key_text(op.key)


# A dead-letter queue SQS refuses every send to (``dead_letter_queue_refuses``).
REFUSING_DEAD_LETTER_QUEUE = "arn:aws:sqs:us-east-1:123456789012:sim-deleted-dead-letters"


class SimDeadLetters:
    """A job's dead-letter queue: keeps every letter sent, and fails a send at a seeded rate."""

    def __init__(self, rng: random.Random, failure: float) -> None:
        self._rng = rng
        self._failure = failure
        self.sent: list[dict[str, Any]] = []
        self.failed = 0
        self.refused = 0

    def send(self, queue_arn: str, body: str, deduplication_id: str) -> None:  # noqa: ARG002
        if queue_arn == REFUSING_DEAD_LETTER_QUEUE:
            self.refused += 1
            raise DeadLetterRefused("injected: the queue does not exist: create it or change the job")
        if self._rng.random() < self._failure:
            self.failed += 1
            raise ConnectionError("injected: the dead-letter queue did not answer")
        self.sent.append(json.loads(body))
