"""The simulation's own ledger of what reached the store, kept by the fault-injecting store's
wrapper (sim/faults.py ``FaultyStore``), independently of the services' own bookkeeping: every
applied commit with the token it was made with, checked against the run as it was just before
the write; each job's state as every write left it; and the violations seen at the moment of a
write (a record created twice, two slot-holding runs of one job running, an unfinished run
without a lease, a recovery of a lease a heartbeat had renewed, a wait cycle, a run of a job
deleted after its completion). That ledger is what the invariants read (sim/invariants.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from jobsched.core import head_invariants
from jobsched.core import invariants as core_invariants
from jobsched.core.clock import Clock
from jobsched.core.errors import ConditionFailed
from jobsched.core.head import is_end_marker
from jobsched.core.head_change import EPOCH, HEAD_AT
from jobsched.core.run import NOT_RUN, RunStatus, run_key
from jobsched.core.state import life_of
from jobsched.core.writes import (
    JOBS,
    RUNS,
    STATE,
    Check,
    Delete,
    Item,
    Put,
    Update,
    WriteOp,
)
from jobsched.ports import (
    Store,
)
from jobsched.services.definitions import is_snapshot
from jobsched.services.paging import query_all

from jobsched_tools.fakes.memory_store import MemoryStore

EFFECTS = "effects"
# The state write of a legacy state's conversion (core/transitions/head_convert.py ``_state_op``).
CONVERSION = "convert to the successor claim"
UNFINISHED_STATUSES = frozenset({"scheduled", "pending", "running", "buffered"})
MARKERS = (RunStatus.CLOSED.value, RunStatus.END.value)  # the successor claim's markers: not runs


def _waits(run: Item) -> list[str]:
    """The runs ``run`` waits for, by its own attributes (``core_invariants.waits_for``, before
    looking at whether they are unfinished)."""
    if run.get("status") not in UNFINISHED_STATUSES:
        return []
    found = [str(run["blocked_by"])] if run.get("status") == "buffered" and run.get("blocked_by") else []
    if run.get("overtaken_by") and str(run["overtaken_by"]) not in found:
        found.append(str(run["overtaken_by"]))
    return found


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
    # The successor claim (issue 37): the instant of the head the state's last change made (the
    # state's ``head_at``; the state has no ``next_run_at``), the first occurrence of its stretch.
    head_at: int | None = None
    # When the write landed: ``at`` is the change's date (``changed_at``), which a late stream
    # record puts before it. Until the write lands the store still reads the mark before it, so
    # a claim made in between runs as claimed (docs/design.md, "A change is dated when it was made").
    landed: int | None = None


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
    # The successor claim (issue 37): each occurrence's live records (not markers or cancelled
    # heads; ``head_invariants.is_live_record``), per (job, instant), over every epoch's id; and
    # the writes that made a second one live beside one already there, per instant.
    live_at: dict[tuple[str, int], set[str]] = field(default_factory=dict)
    # When each run id first became a live record there (a head put, a settle's record).
    live_since: dict[str, int] = field(default_factory=dict)
    # When each run id's record was first created (today's claim: one record per id): a record
    # made before a late-dated change landed ran as claimed (invariants ``_claimed_before_landing``).
    created_at: dict[str, int] = field(default_factory=dict)
    instant_creations: Counter[str] = field(default_factory=Counter)
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
    # completion, while it stays deleted (a person's re-creation ends the watch), and how many;
    # the life its state followed then (core/state.py ``life_of``): a later life is a new job's.
    deleted_after_completion: dict[str, int] = field(default_factory=dict)
    life_at_completion_delete: dict[str, int] = field(default_factory=dict)
    completion_deletes: list[tuple[str, int, int]] = field(default_factory=list)  # (job, at, runs)
    # For ``skipped_without_holder``, by count of writes landed: when each run's token was last
    # written, and the last write at which each run was unfinished (just before it or after it).
    writes: int = 0
    token_written_at: dict[str, int] = field(default_factory=dict)
    unfinished_at: dict[str, int] = field(default_factory=dict)
    # A migrating world (sim/migration.py): the conversions of legacy states that landed, per job
    # and per actor (the trigger, the registrar, the detector's reconcile pass).
    conversions: Counter[str] = field(default_factory=Counter)
    conversion_actors: Counter[str] = field(default_factory=Counter)


class LedgerKeeper:
    """What every write did, seen by the simulation: mixed into ``FaultyStore`` (sim/faults.py),
    which calls these around each write and sets what they read of it."""

    inner: Store
    clock: Clock
    actor: str
    log: Callable[[str, str, str, str], None]
    ledger: Ledger
    on_job_write: Callable[[str], object] | None
    skew_bound_ms: int
    # The world is successor-shaped (issue 37): the per-instant view of the runs is kept.
    successor: bool = False
    # The world migrates mid-run (sim/migration.py): a write to a job still legacy (its state
    # has no epoch) is checked as today's, one to a converted job as the successor claim's.
    migrating: bool = False
    head_writes: head_invariants.WriteLedger
    head_write_slack_ms: int
    dispatch_lease_ms: int
    skew_allowance_ms: int

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
            if op.label == CONVERSION and isinstance(op, Update):
                self.ledger.conversions[str(op.key["job_id"])] += 1
                self.ledger.conversion_actors[self.actor.split("-", 1)[0]] += 1
            if op.table == STATE and not isinstance(op, Check):
                job_id = str(op.item["job_id"] if isinstance(op, Put) else op.key["job_id"])
                if not is_snapshot({"job_id": job_id}):  # a definition snapshot is not a job's state
                    # A registration's write dates its change (``changed_at``): when a late or
                    # lost stream record's change took effect, which can be before this write.
                    dated = op.set.get("changed_at") if isinstance(op, Update) else None
                    self.note_state(job_id, self.inner.get(STATE, {"job_id": job_id}), dated)
            elif op.table == JOBS and self.on_job_write is not None:
                self.on_job_write(str(op.item["job_id"] if isinstance(op, Put) else op.key["job_id"]))
        self.ledger.writes += 1
        self._observe_runs(ops, runs_before, now)
        self._check_core(ops, runs_before)

    def _observe_runs(self, ops: Sequence[WriteOp], runs_before: dict[str, Item | None], now: int) -> None:
        if self.successor:
            self._note_instants(ops, runs_before)
        for op in ops:
            if op.table != RUNS or isinstance(op, Check):
                continue
            run_id = str(_run_key(op))
            before, after = runs_before.get(run_id), self.inner.get(RUNS, run_key(run_id))
            self._skip_held(run_id, before, after)
            if before is None and after is not None:
                self.ledger.created_at.setdefault(run_id, now)
            if isinstance(op, Put):
                self.ledger.creations[run_id] += 1
                if before is not None:
                    self._violate("record_overwritten", run_id, f"{self.actor}'s {op.label} replaced it")
            if after is not None:
                self._observe_run(run_id, op.label, before, after, now)

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
        if self.migrating:
            # Each job by its shape as this write left it: a legacy job's write keeps today's
            # checks (one record per occurrence, nothing beyond its next-run position).
            legacy = {str(state["job_id"]) for state in states if EPOCH not in state}
            for local, is_legacy in ((self.LOCAL_INVARIANTS, True), (self.SUCCESSOR_LOCAL_INVARIANTS, False)):
                mine = [s for s in states if (str(s["job_id"]) in legacy) is is_legacy]
                theirs = [r for r in written if (str(r["job_id"]) in legacy) is is_legacy]
                if mine or theirs:
                    self.note_core(core_invariants.check(mine, theirs, None, self.ledger.tokens, local))
        else:
            local = self.SUCCESSOR_LOCAL_INVARIANTS if self.successor else self.LOCAL_INVARIANTS
            self.note_core(core_invariants.check(states, written, None, self.ledger.tokens, local))
        if self.successor:
            self._check_head_write(runs_before)
        self._check_waits(written, runs_before)
        for run in written:  # I9: a named wait is owed its promotion (a read or two, at a wait only)
            before = runs_before.get(str(run["run_id"]))
            self.note_core(core_invariants.owed_promotion(before, run, self._read_run))

    # A successor-shaped world (issue 37): one record per occurrence and a record beyond the
    # position read today's ids and next-run entry; core/head_invariants.py stands for them.
    SUCCESSOR_LOCAL_INVARIANTS = (core_invariants.TOKEN_DECREASED, core_invariants.NO_WALK)

    def _check_head_write(self, runs_before: dict[str, Item | None]) -> None:
        """core/head_invariants.py's checks of one write (I4', H2's claim of a closed head, a live
        run fenced, a redispatch before its lease, a relink): the runs it wrote, before and after,
        with their neighbours in the chain (predecessor and successor key), read as they are now
        (a write changes only its own items)."""
        before = {run_id: item for run_id, item in runs_before.items() if item is not None}
        after = {
            run_id: item
            for run_id in runs_before
            for item in (self.inner.get(RUNS, run_key(run_id)),)
            if item is not None
        }
        near = {
            str(item[name])
            for item in (*before.values(), *after.values())
            for name in ("after_run_id", "next_key")
            if item.get(name) is not None
        } - set(runs_before)
        for run_id in sorted(near):
            try:
                item = self.inner.get(RUNS, run_key(run_id))
            except ValueError:
                continue
            if item is not None:
                before[run_id] = after[run_id] = item
        # ``now`` is the writer's clock in check_write; each actor's is off the world's by up to
        # ``head_write_slack_ms`` (and the claim's ``claimed_at``, a lease's expiry, are written
        # in another's clock, which the product's skew allowance covers): a redispatch or a
        # recovery is early only past that, as ``live_lease_recovered`` judges today's recovery.
        slack = self.head_write_slack_ms
        self.note_core(
            head_invariants.check_write(
                before,
                after,
                self.clock.now_ms() + slack,
                self.head_writes,
                dispatch_lease_ms=self.dispatch_lease_ms,
                skew_ms=self.skew_allowance_ms,
                changed=list(runs_before),
            )
        )

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
        self.ledger.life_at_completion_delete[job_id] = life_of(state)
        self.ledger.completion_deletes.append((job_id, now, len(runs)))

    def _runs_of(self, job_id: str) -> list[Item]:
        if isinstance(self.inner, MemoryStore):
            return [r for r in self.inner.tables[RUNS].values() if r.get("job_id") == job_id]
        return list(query_all(self.inner, "runs-of-job", job_id))

    def _watch_deleted(self, job_id: str, run_id: str, label: str, before: Item | None, after: Item) -> None:
        """No run of a job deleted after its completion is made or starts while its item stays
        deleted: nothing of it was left to run. A person's re-creation of the item ends the watch
        (the new life's runs are its own): seen as the item there now, or as a later life on the
        state (re-created, registered, and deleted again since: a person's writes reach the table
        unwatched). A record made ``missed`` for an occurrence due by the delete is no run: a late
        stream record dating the change the reconcile pass applied provisionally records it
        after the delete (core/transitions/register.py ``redate_window``, "job deleted before it
        ran"), as ``nothing_lost`` asks of every occurrence the job was due."""
        since = self.ledger.deleted_after_completion.get(job_id)
        if since is None:
            return
        started = after.get("status") == "running" and (before is None or before.get("status") != "running")
        if before is not None and not started:
            return
        life = self.ledger.life_at_completion_delete.get(job_id, 1)
        recreated = life_of(self.inner.get(STATE, {"job_id": job_id})) > life
        if recreated or self.inner.get(JOBS, {"job_id": job_id}) is not None:
            del self.ledger.deleted_after_completion[job_id]  # re-created: a new life
            return
        if before is None and after.get("status") in NOT_RUN and int(after.get("scheduled_at") or 0) <= since:
            return
        what = "made" if before is None else "started"
        self._violate("ran_after_deletion", run_id, f"{what} by {self.actor}'s {label}, deleted at {since}")

    def _skip_held(self, run_id: str, before: Item | None, after: Item | None) -> None:
        """``skip`` (promises.md row 8): a run recorded skipped names (``blocked_by``) a run that
        was unfinished at some moment since the skipped run's token took the value the skip
        replaces (its walk read it then); the explorer's ``World._skips_held`` says why not at
        the write itself. Then notes this write for later skips."""
        ledger = self.ledger
        moved = (before or {}).get("version") != (after or {}).get("version")
        if after is not None and after.get("status") == "skipped" and moved:  # a skip's write
            named = str(after.get("blocked_by"))
            holder = self.inner.get(RUNS, run_key(named))
            last_unfinished = ledger.unfinished_at.get(named)
            if (holder is None or holder.get("status") not in UNFINISHED_STATUSES) and (
                last_unfinished is None or last_unfinished < ledger.token_written_at.get(run_id, 0)
            ):
                state = "absent" if holder is None else holder.get("status")
                detail = f"skipped for {named}, {state} since its walk"
                self._violate("skipped_without_holder", run_id, detail)
        if moved or (before is None) != (after is None):
            ledger.token_written_at[run_id] = ledger.writes
        statuses = ((before or {}).get("status"), (after or {}).get("status"))
        if any(status in UNFINISHED_STATUSES for status in statuses):
            ledger.unfinished_at[run_id] = ledger.writes

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
        unfinished = status not in ("succeeded", "failed", "skipped", "missed", "cancelled", *MARKERS)
        leased = all(name in after for name in ("lease_expires_at", "check_at", "lease_shard"))
        if status == RunStatus.SCHEDULED.value:
            # The successor claim (issue 37, plan §0): a head or a claimed run not yet started has
            # its ``due`` entry for a lease (the detector redispatches it from there, HC3).
            leased = all(name in after for name in ("check_at", "lease_shard"))
        if unfinished and not leased:
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
        head_at = state.get(HEAD_AT)
        mark = StateMark(
            at,
            str(state.get("status")),
            timing,
            next_run,
            state.get("last_scheduled_at"),
            None if head_at is None else int(head_at),
            self.clock.now_ms(),
        )
        self._add_mark(job_id, mark)

    def _add_mark(self, job_id: str, mark: StateMark) -> None:
        marks = self.ledger.states.setdefault(job_id, [])
        if not marks or (marks[-1].status, marks[-1].timing, marks[-1].next_run_at, marks[-1].head_at) != (
            mark.status,
            mark.timing,
            mark.next_run_at,
            mark.head_at,
        ):
            marks.append(mark)

    def _note_instants(self, ops: Sequence[WriteOp], runs_before: dict[str, Item | None]) -> None:
        """The successor claim's per-instant view of one write (issue 37, plan §4 chaos row): every
        run item it touched is filed under its job and instant while it is a live record, and a
        write that leaves two live records at one instant (two epochs' ids, or an id re-created)
        is a record created twice. An end marker it writes finishes the job's stretch at the
        marker's instant (the life's last head), as today's ``finished`` state does: the state
        says ``active`` until the finish write (H1: "active, no head, end marker")."""
        touched: list[tuple[str, int, str]] = []
        for op in ops:
            if op.table != RUNS or isinstance(op, Check):
                continue
            run_id = str(_run_key(op))
            parts = head_invariants.id_parts(run_id)
            if parts is None or parts.instant_ms is None:
                continue
            after = self.inner.get(RUNS, run_key(run_id))
            if parts.kind == "end":
                # Only an end marker ends the life: a settle that decides a life's last head
                # missed closes its end key with a closure marker (``closed``), and the life goes
                # on to the next head (a miss is no run of ``max_runs``).
                if after is not None and runs_before.get(run_id) is None and is_end_marker(after):
                    self._end_marker(parts.job_id, parts.instant_ms)
                continue
            if parts.kind != "timed":
                continue
            place = (parts.job_id, parts.instant_ms)
            live = self.ledger.live_at.setdefault(place, set())
            was_live = run_id in live
            if after is not None and head_invariants.is_live_record(after):
                live.add(run_id)
                self.ledger.live_since.setdefault(run_id, self.clock.now_ms())
                if not was_live:
                    touched.append((parts.job_id, parts.instant_ms, run_id))
            else:
                live.discard(run_id)
        for job_id, instant, run_id in touched:
            if len(self.ledger.live_at[(job_id, instant)]) > 1:
                self.ledger.instant_creations[f"{job_id}@{instant}"] += 1
                others = sorted(self.ledger.live_at[(job_id, instant)] - {run_id})
                self._violate("record_created_twice", run_id, f"{self.actor}'s write beside live {others}")

    def _end_marker(self, job_id: str, last_head_at: int) -> None:
        marks = self.ledger.states.get(job_id) or []
        if marks and marks[-1].status == "active":
            last = marks[-1]
            finished = StateMark(self.clock.now_ms(), "finished", last.timing, None, last_head_at)
            self._add_mark(job_id, finished)

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


def _run_key(op: WriteOp) -> Any:
    return op.item["run_id"] if isinstance(op, Put) else op.key["run_id"]


def _keeps_slot(run: Item) -> bool:
    # Only a run that will run carries its overlap policy (core/transitions/claim.py new_run_item).
    return "overlap" in run and run["overlap"] != "allow"
