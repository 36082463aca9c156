"""One explored world: the real services on the in-memory store, a ledger of what happened and
the checks made at every write; and the wrappers every actor calls through (``ExplorerStore``,
``PointQueue``, ``PointDeadLetters``), which make each store and queue call a scheduling point
(``sched.py``) with the faults the budget still allows as its options. The drive to quiescence
after a schedule is ``drive.py``; the checks after it ``checks.py``.

Everything here is deterministic given the schedule: a ManualClock (each actor sees it through
its own offset), fixed claimer and request ids, a seeded worker RNG.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from jobsched.core import invariants as core_invariants
from jobsched.core.clock import Clock, ManualClock
from jobsched.core.config import SchedulerConfig
from jobsched.core.errors import ConditionFailed, TransientStoreError
from jobsched.core.job import definition_digest
from jobsched.core.policies import MAX_CHAIN_STEPS, UNFINISHED
from jobsched.core.run import run_key
from jobsched.core.transitions import BOOKKEEPING_KEY
from jobsched.core.writes import JOBS, RUNS, STATE, Cond, Delete, Item, Put, Update, WriteOp
from jobsched.ports import INDEX_TABLE, IndexName, OutgoingMessage, Page, SendResult
from jobsched.services.reconciler import DRAIN_HOLD_MS
from jobsched.services.worker import Started
from jobsched.targets.registry import HandlerRegistry

from jobsched_tools.explore.sched import OK, Call, Crash, Scheduler
from jobsched_tools.fakes.memory_queue import MemoryWorkQueue
from jobsched_tools.fakes.memory_store import MemoryStore
from jobsched_tools.fakes.memory_telemetry import MemoryTelemetry
from jobsched_tools.sim.faults import StateMark

CRASH, LOST, STALE, DUP = "crash", "lost", "stale", "dup"
LAG = "lag"  # an eventually consistent GetItem answered one write behind (``ExplorerStore.get``)
UNANSWERED = "unanswered"  # a dead-letter send the job's queue did not answer (issue 38)
TAKE = "take:"  # a worker's receive: which queued message (reorder)
# The indexes a stale read may lag on (``due``: the successor claim's, issue 37; only a successor
# world's store has it).
INDEXES = ("next-run", "lease", "due")
# The writes that move a job past its occurrences without setting its status: only on an active job.
CLAIMS = ("advance job", "settle occurrences")
HANDLER_MS = 45_000  # how long each handler of the drive to quiescence runs (heartbeating)
VISIBILITY_SECONDS = 120


@dataclass(frozen=True)
class Budget:
    """How many of each fault one schedule may use, and per-actor clock offsets to try."""

    crashes: int = 1
    lost: int = 0
    stale: int = 0
    dups: int = 0
    reorder: bool = False
    unanswered: int = 0  # dead-letter sends that fail (``PointDeadLetters``)
    lag: int = 0  # eventually consistent GetItems answered one write behind (``ExplorerStore.get``)


@dataclass(frozen=True)
class Finding:
    check: str
    key: str
    detail: str
    trace: tuple[str, ...]

    def headline(self) -> str:
        return f"{self.check} {self.key}: {self.detail}"


class OffsetClock:
    """One actor's view of the manual clock."""

    def __init__(self, base: Clock, offset_ms: int) -> None:
        self._base = base
        self.offset_ms = offset_ms

    def now_ms(self) -> int:
        return self._base.now_ms() + self.offset_ms


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=repr, separators=(",", ":"))


@dataclass
class Ledger:
    commits: Counter[str] = field(default_factory=Counter)
    marks: list[StateMark] = field(default_factory=list)
    executing: list[tuple[str, str, int]] = field(default_factory=list)  # (job, run, token)
    findings: list[Finding] = field(default_factory=list)
    seen: set[tuple[str, str]] = field(default_factory=set)
    tokens: core_invariants.Tokens = field(default_factory=core_invariants.Tokens)


class ExplorerTables(MemoryStore):
    """The in-memory store without DynamoDB's size checks (the explored items are small; the
    checks cost a third of a schedule's time)."""

    def _check_sizes(self, ops: Sequence[WriteOp], currents: Sequence[Item | None], single: bool) -> None:  # noqa: ARG002
        return None


class ExplorerQueue(MemoryWorkQueue):
    """The memory queue, plus taking one chosen message whatever its delay (an explored worker
    acts at its own clock's time)."""

    def queued(self) -> list[tuple[int, dict[str, Any], int]]:
        """(seq, body, receive count) of every message, oldest first."""
        with self._lock:
            return [(m.seq, m.body, m.receive_count) for m in self._messages.values()]

    def take(self, seq: int) -> tuple[str, dict[str, Any]] | None:
        with self._lock:
            message = self._messages.get(seq)
            if message is None:
                return None
            message.receive_count += 1
            message.receipt = f"{seq}:{message.receive_count}"
            message.visible_at_ms = self.clock.now_ms() + self.visibility_timeout_ms
            return message.receipt, copy.deepcopy(message.body)

    def state(self) -> list[tuple[int, str, int, int]]:
        with self._lock:
            return [
                (m.seq, _canon(m.body), m.visible_at_ms, m.receive_count) for m in self._messages.values()
            ]

    def restore(self, messages: dict[int, Any], seq: int) -> None:
        with self._lock:
            self._messages = copy.deepcopy(messages)
            self._seq = seq

    def snapshot(self) -> tuple[dict[int, Any], int]:
        with self._lock:
            return copy.deepcopy(self._messages), self._seq


class World:
    """The store, the queue, the clock, the ledger and the scheduler of one schedule."""

    def __init__(self, cfg: SchedulerConfig, budget: Budget, write_invariants: Sequence[str]) -> None:
        self.cfg = cfg
        self.budget = budget
        self.write_invariants = tuple(write_invariants)
        self.clock = ManualClock(0)
        self.inner = ExplorerTables()
        self.mq = ExplorerQueue(self.clock, visibility_timeout_seconds=VISIBILITY_SECONDS)
        self.store = ExplorerStore(self)
        self.queue = PointQueue(self)
        self.telemetry = MemoryTelemetry()
        self.sched = Scheduler()
        self.ledger = Ledger()
        self.trace: list[str] = []
        self.used: Counter[str] = Counter()
        # The last two images of each state and run item (a stale index read sees the older).
        self.previous: dict[tuple[str, Any], Item | None] = {}
        self.window_end = 0  # occurrences up to here must have their records after the drive
        self.job_id = "j"
        self.overlap = "skip"
        # The job as set up (a person's re-put writes it again): schedule, after-completion action
        # and more definition fields.
        self.schedule = ""
        self.after_completion = "none"
        self.job: tuple[tuple[str, Any], ...] = ()
        self.person_last: str | None = None  # the last change a person wrote to the job item
        self.person_at = 0  # when (the person's clock)
        # A person's change was written and its registration has not finished (the registrar
        # crashed or failed): the stream delivers the record again in the drive.
        self.registration_pending = False
        # The instants of the people's writes whose stream records were delivered late (after the
        # reconcile pass may have applied them): the change counts from the write (issue 34 item 4).
        self.records_delivered: list[int] = []
        self.extra_check: Callable[[World], None] | None = None
        self.handler_ms = HANDLER_MS  # how long each handler of the drive runs
        # The services wired as the functions wire them on a stack migrating to the successor
        # claim (runtime/wiring.py: the trigger reads the switch, the worker adopts scheduled
        # runs); off here, so today's world makes exactly today's calls (successor.py sets them).
        self.read_claim_shape = False
        self.adopt_scheduled = False
        self.registry = HandlerRegistry()
        self.registry.add("t", lambda _ctx: None)
        self.dead_letter_queue = PointDeadLetters(self)  # every job's own dead-letter queue
        # For the skip's holder (``_skips_held``), by write count: not part of the fingerprint, so
        # the exploration is the same with the check as without it.
        self.writes = 0
        self.token_written_at: dict[str, int] = {}
        self.unfinished_at: dict[str, int] = {}
        # For ``_skips_walked``: the runs each reader (an actor by name; None, the drive and the
        # set-ups, which run one call at a time) read since its last write that landed, each with
        # whether it read it unfinished. An actor's is a function of what it has seen (its digest
        # in the fingerprint), so this too leaves the exploration as it is.
        self.walk_reads: dict[str | None, dict[str, bool]] = {}

    # --- the ledger ----------------------------------------------------------------------------

    def find(self, check: str, key: str, detail: str) -> None:
        if (check, key) in self.ledger.seen:
            return
        self.ledger.seen.add((check, key))
        self.ledger.findings.append(Finding(check, key, detail, tuple(self.trace)))

    def note(self, line: str) -> None:
        self.trace.append(line)

    def after_write(self, ops: Sequence[WriteOp]) -> None:
        self.writes += 1
        for op in ops:
            if isinstance(op, Update) and op.table == RUNS and op.label.startswith("commit "):
                self.ledger.commits[str(op.key["run_id"])] += 1
                # The run's execution ends with its commit: what its worker does after it (the
                # promotion of a run waiting behind it) overlaps nothing.
                run_id = str(op.key["run_id"])
                self.ledger.executing = [e for e in self.ledger.executing if e[1] != run_id]
            if (
                isinstance(op, Update)
                and op.label in CLAIMS
                and "status" not in op.set
                and (self.inner.tables[STATE].get(self.job_id) or {}).get("status") != "active"
            ):
                # design.md: a change takes effect from the first occurrence not yet claimed; a
                # claim (or settle) that read the job before a pause or delete loses its write.
                state = self.inner.tables[STATE].get(self.job_id) or {}
                self.find("claimed_while_inactive", self.job_id, f"{op.label} on a {state.get('status')} job")
            if isinstance(op, Delete) and op.table == JOBS and op.label == "delete after completion":
                # action_after_completion: the item goes only once every run of the job ended.
                unfinished = [
                    r["run_id"] for r in self.inner.tables[RUNS].values() if r["status"] in UNFINISHED
                ]
                if unfinished:
                    self.find("deleted_before_complete", self.job_id, f"runs not ended: {unfinished}")
        dated = next(
            (op.set.get("changed_at") for op in ops if isinstance(op, Update) and op.table == STATE), None
        )
        self._mark(self.inner.tables[STATE].get(self.job_id), dated)
        self._one_waits()
        self._skips_held(ops)
        self._skips_walked(ops)
        self._note_runs(ops)
        self._waits_owed(ops)
        self._drain_held(ops)
        self.check_invariants()

    def _one_waits(self) -> None:
        """``buffer_one`` and ``cancel_other``: at most one run waits (README, ``overlap``); a
        backfill run waits at the end of the line instead of being skipped, so it is not counted."""
        waiting = sorted(
            str(run["run_id"])
            for run in self.inner.tables[RUNS].values()
            if run.get("status") == "buffered"
            and run.get("kind") != "backfill"
            and run.get("overlap") in ("buffer_one", "cancel_other")
        )
        if len(waiting) > 1:
            self.find("more_than_one_waits", self.job_id, f"{', '.join(waiting)} wait at once")

    def _skips_held(self, ops: Sequence[WriteOp]) -> None:
        """``skip``: a run is recorded skipped only because another run of the job holds the turn
        (README, ``overlap``; promises.md row 8). The run the skip names (``blocked_by``: the
        holder, or the first run the walk passed over as not yet due, W13, itself pending) was
        unfinished at some moment since the skipped run's token took the value the skip replaces:
        the worker's walk read it then (the message carries that token, and the walk follows the
        message). Not necessarily at the write: the skip has no condition on the holder, which may
        end between the walk's read and the write (explorer ``workers``, k=2), and a decision taken
        on a read is the read's. A skip of a run whose token moved since its walk (a redispatch,
        a promotion) may name a run that ended before that move: reported here."""
        for op in ops:
            if not isinstance(op, Update) or op.table != RUNS or op.set.get("status") != "skipped":
                continue
            run_id = str(op.key["run_id"])
            named = str(op.set.get("blocked_by"))
            holder = self.inner.get(RUNS, run_key(named))
            if holder is not None and holder.get("status") in UNFINISHED:
                continue
            last_unfinished = self.unfinished_at.get(named)
            since = self.token_written_at.get(run_id, 0)
            if last_unfinished is None or last_unfinished < since:
                state = "absent" if holder is None else holder.get("status")
                self.find(
                    "skipped_without_holder",
                    run_id,
                    f"skipped for {named}, {state} since before the skipped run's token was written",
                )

    def _reader(self) -> str | None:
        actor = self.sched.actor_here()
        return actor.name if actor is not None else None

    def note_run_read(self, key: Item, item: Item | None) -> None:
        """A reader's GetItem of a run, as its walk reads the chain (``_skips_walked``)."""
        reads = self.walk_reads.setdefault(self._reader(), {})
        run_id = str(key.get("run_id"))
        reads[run_id] = reads.get(run_id, False) or (item is not None and item.get("status") in UNFINISHED)

    def landed(self) -> None:
        """The reader's write landed: its next decision reads afresh."""
        self.walk_reads.pop(self._reader(), None)

    def _skips_walked(self, ops: Sequence[WriteOp]) -> None:
        """``skip`` at the decision (README, ``overlap``: "skipped while another run of the job
        runs"; design.md, the walk's rules): the run a skip names (``blocked_by``) is one the
        skipping worker's walk read unfinished, since its last write that landed: the holder it
        ended at (W5, W1's overtaker) or the first run it passed over as not yet due (W13). The
        one exception is a walk that ran out (W11): the run after the last one read stands for an
        unknown turn, and such a walk read ``MAX_CHAIN_STEPS`` runs, each once (W9: a
        step never reads a run the walk has read). ``_skips_held`` allows a holder unfinished at
        any moment since the skipped run's token was written, which a walk that loops between a
        finished overtaker and the run skipped for it meets (W9 removed: a skip for a run that
        ended before the walk began, on a token written before it ended)."""
        reads = self.walk_reads.get(self._reader(), {})
        for op in ops:
            if not isinstance(op, Update) or op.table != RUNS or op.set.get("status") != "skipped":
                continue
            named = str(op.set.get("blocked_by"))
            if reads.get(named) or len(reads) >= MAX_CHAIN_STEPS:
                continue
            seen = "never read it" if named not in reads else "read it ended"
            self.find(
                "skip_holder_not_walked",
                str(op.key["run_id"]),
                f"skipped for {named}: its walk {seen} ({len(reads)} runs read, within the walk's bound)",
            )

    def _note_runs(self, ops: Sequence[WriteOp]) -> None:
        """For ``_skips_held``: when each run's token was last written, and the last write at
        which each run was unfinished (just before it or after it)."""
        for op in ops:
            if op.table != RUNS:
                continue
            target = self.inner._target(op)
            before = self.previous.get((RUNS, target))
            after = self.inner.tables[RUNS].get(target)
            run_id = str((after or before or {}).get("run_id", target))
            moved = (before or {}).get("version") != (after or {}).get("version")
            if moved or (before is None) != (after is None):
                self.token_written_at[run_id] = self.writes
            if (before or {}).get("status") in UNFINISHED or (after or {}).get("status") in UNFINISHED:
                self.unfinished_at[run_id] = self.writes

    def _waits_owed(self, ops: Sequence[WriteOp]) -> None:
        """I9, a named wait is owed its promotion (``core_invariants.owed_promotion``): checked at
        the write, on the runs it changed (the tables alone cannot tell a promotion on its way,
        between a holder's end and its promoter's write, from one nobody owes)."""
        for op in ops:
            if not isinstance(op, Update) or op.table != RUNS:
                continue
            after = self.inner.get(RUNS, op.key)
            if after is None:
                continue
            before = self.previous.get((RUNS, self.inner._target(op)))
            found = core_invariants.owed_promotion(
                before, after, lambda run_id: self.inner.get(RUNS, run_key(run_id))
            )
            for violation in found:
                self.find(violation.invariant, violation.key, violation.detail)

    def _drain_held(self, ops: Sequence[WriteOp]) -> None:
        """Dropped shards are swept until found empty for ``DRAIN_HOLD_MS`` (deploy.md, Changing
        ShardCount; promises.md row 29): the detector's bookkeeping lowers ``shard_high`` only over
        an image whose ``drained_since`` is at least the hold before the write (its ``updated_at``).
        A write over an image without it (a detector found the shards in use since) or with a later
        one cuts the hold short, and a canary's next write there is never swept again."""
        for op in ops:
            if not isinstance(op, Update) or op.table != STATE or op.key != BOOKKEEPING_KEY:
                continue
            before = self.previous.get((STATE, self.inner._target(op)))
            after = self.inner.get(STATE, BOOKKEEPING_KEY)
            if before is None or after is None:
                continue
            if int(after.get("shard_high", 0)) >= int(before.get("shard_high", 0)):
                continue
            since = before.get("drained_since")
            if since is None or int(after["updated_at"]) - int(since) < DRAIN_HOLD_MS:
                self.find(
                    "drain_hold_cut",
                    str(BOOKKEEPING_KEY["job_id"]),
                    f"shard_high {before.get('shard_high')} -> {after.get('shard_high')} at "
                    f"{after['updated_at']} over drained_since {since}",
                )

    def _mark(self, state: Item | None, dated: int | None = None) -> None:
        """The state's history for the nothing-lost check; a registration's write dates its
        change (``changed_at``), as in the chaos checker (sim/faults.py)."""
        if state is None:
            return
        timing = tuple(sorted((state.get("timing") or {}).items()))
        mark = StateMark(
            self.clock.now_ms() if dated is None else min(self.clock.now_ms(), int(dated)),
            str(state.get("status")),
            timing,
            state.get("next_run_at"),
            state.get("last_scheduled_at"),
        )
        last = self.ledger.marks[-1] if self.ledger.marks else None
        if last is None or (last.status, last.timing, last.next_run_at) != (
            mark.status,
            mark.timing,
            mark.next_run_at,
        ):
            self.ledger.marks.append(mark)

    def overdue_times(self, until: int) -> list[int]:
        """When the drive's detector next finds an occurrence overdue (up to ``until``): the
        state's ``next-run`` position plus its misfire grace."""
        times: list[int] = []
        for state in self.inner.tables[STATE].values():
            if state.get("status") == "active" and "next_run_at" in state:
                grace = int((state.get("misfire") or {}).get("grace_seconds", 60))
                overdue = int(state["next_run_at"]) + min(grace, self.cfg.trigger_lookback_seconds) * 1000 + 1
                if overdue <= until:
                    times.append(overdue)
        return times

    def check_invariants(self) -> None:
        if not self.write_invariants:
            return
        found = core_invariants.check(
            self.inner.tables[STATE].values(),
            self.inner.tables[RUNS].values(),
            [body for _, body, _ in self.mq.queued()],
            self.ledger.tokens,
            self.write_invariants,
        )
        for violation in found:
            self.find(violation.invariant, violation.key, violation.detail)

    def check_pause(self, job_before: Item | None) -> None:
        """pause_on_failure: the pause lands on the definition a failed run ran under, never on a
        person's edit made since (README: "Never over a person's newer edit")."""
        failed = {r.get("def_hash") for r in self.inner.tables[RUNS].values() if r.get("status") == "failed"}
        if job_before is None:
            self.find("paused_deleted_job", self.job_id, "the pause re-created a deleted job item")
        elif definition_digest(job_before) not in failed:
            self.find("pause_over_edit", self.job_id, "the pause landed on a definition no failed run ran")

    def exec_start(self, started: Started) -> None:
        message = started.message
        run = self.inner.get(RUNS, run_key(message.run_id)) or {}
        started_before = int(run.get("first_started_at") or 0) < int(run.get("started_at") or 0)
        if run.get("cancel_requested") and started_before:
            # cancel_other: a run asked to stop whose worker died ends cancelled (issue 34 item 3):
            # its handler, which ran before, never runs again before the run that replaced it.
            self.find(
                "stopped_run_restarted",
                message.run_id,
                f"asked to stop by {run['cancel_requested']}, its handler starts again",
            )
        if started.definition.overlap.value != "allow":
            others = [run for job, run, _ in self.ledger.executing if job == message.job_id]
            if others:
                self.find("overlap", message.run_id, f"started while {others[0]} runs (overlap policy)")
        self.ledger.executing.append((message.job_id, message.run_id, started.token))

    def exec_end(self, started: Started) -> None:
        entry = (started.message.job_id, started.message.run_id, started.token)
        if entry in self.ledger.executing:
            self.ledger.executing.remove(entry)

    # --- state identity ------------------------------------------------------------------------

    def fingerprint(self) -> bytes:
        h = hashlib.blake2b(digest_size=16)
        for table in (JOBS, STATE, RUNS):
            h.update(_canon(sorted(self.inner.tables[table].values(), key=_canon)).encode())
        h.update(_canon(self.mq.state()).encode())
        h.update(_canon(sorted(self.ledger.executing)).encode())
        h.update(_canon(sorted(self.dead_letter_queue.sent, key=_canon)).encode())
        for actor in self.sched.actors:
            h.update(f"{actor.name}:{actor.pc}:{actor.done}:{actor.crashed}".encode())
            h.update(actor.digest.digest())
        h.update(_canon(sorted(self.used.items())).encode())
        return h.digest()

    def outcome_key(self) -> bytes:
        """What the drive to quiescence and the final checks depend on (not how the actors got
        here): the tables, the queue, the state's history, the commits, what is pending."""
        h = hashlib.blake2b(digest_size=16)
        for table in (JOBS, STATE, RUNS):
            h.update(_canon(sorted(self.inner.tables[table].values(), key=_canon)).encode())
        h.update(_canon(self.mq.state()).encode())
        h.update(repr((self.ledger.marks, sorted(self.ledger.commits.items()))).encode())
        h.update(repr((self.registration_pending, [a.error for a in self.sched.actors])).encode())
        h.update(repr(self.records_delivered).encode())
        h.update(_canon(sorted(self.dead_letter_queue.sent, key=_canon)).encode())
        return h.digest()

    def seen_by_actor(self, result: Any) -> None:
        actor = self.sched.actor_here()
        if actor is not None:
            actor.digest.update(_canon(result).encode())

    # --- options at a point --------------------------------------------------------------------

    def write_options(self, person: bool) -> tuple[str, ...]:
        if person:
            return (OK,)
        options = [OK]
        if self.used[CRASH] < self.budget.crashes:
            options.append(CRASH)
        if self.used[LOST] < self.budget.lost:
            options.append(LOST)
        return tuple(options)


# --- the scheduling points: the Store, WorkQueue and dead-letter queue every actor calls through ---


class ExplorerStore:
    """The Store every explored actor uses: each call is a scheduling point."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.inner = world.inner

    def _point(self, call: Call) -> str:
        option = self.world.sched.point(call)
        if self.world.sched.actor_here() is not None:
            actor = self.world.sched.actor_here()
            name = actor.name if actor is not None else "?"
            self.world.note(f"{name}: {call.detail}" + ("" if option == OK else f" [{option}]"))
            if option != OK:
                self.world.used[option.split(":")[0]] += 1
        return option

    def get(self, table: str, key: Item, consistent: bool = True) -> Item | None:
        """A GetItem; an eventually consistent one may (``Budget.lag``) answer with the item as it
        was before its last write (absent, if that write created it), as a lagging replica does:
        DynamoDB's eventually consistent reads "might not reflect the results of a recently
        completed write operation" (its Developer Guide, "Read consistency")."""
        lag = not consistent and self.world.used[LAG] < self.world.budget.lag
        option = self._point(Call("get", f"get {table} {_key(key)}", (OK, LAG) if lag else (OK,)))
        item = self.inner.get(table, key, consistent)
        target = (table, self.inner._key_value(table, key))
        if option == LAG and target in self.world.previous:
            before = self.world.previous[target]
            item = copy.deepcopy(before) if before is not None else None
        if table == RUNS:
            self.world.note_run_read(key, item)
        self.world.seen_by_actor(item)
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
        stale = index in INDEXES and not consistent and self.world.used[STALE] < self.world.budget.stale
        option = self._point(Call("query", f"query {index}", (OK, STALE) if stale else (OK,)))
        if option == STALE:
            page = self._stale(INDEX_TABLE[index]).query(index, partition, sort_from, sort_to, limit, cursor)
        else:
            page = self.inner.query(index, partition, sort_from, sort_to, limit, cursor, consistent)
        self.world.seen_by_actor([page.items, page.cursor])
        return page

    def _stale(self, table: str) -> MemoryStore:
        """The table with each item one write behind (an index lagging its table)."""
        view = MemoryStore(extra_indexes=self.inner.extra_indexes)
        rows = dict(self.inner.tables[table])
        for (name, key), before in self.world.previous.items():
            if name != table:
                continue
            if before is None:
                rows.pop(key, None)
            else:
                rows[key] = before
        view.tables[table] = rows
        return view

    def scan(self, table: str, limit: int = 100, cursor: dict[str, Any] | None = None) -> Page:
        self._point(Call("scan", f"scan {table}"))
        page = self.inner.scan(table, limit, cursor)
        self.world.seen_by_actor([page.items, page.cursor])
        return page

    def batch_get(self, table: str, keys: Sequence[Item], consistent: bool = False) -> list[Item]:
        self._point(Call("batch_get", f"batch_get {table} x{len(keys)}"))
        items = self.inner.batch_get(table, keys, consistent)
        self.world.seen_by_actor(items)
        return items

    def write(self, ops: Sequence[WriteOp]) -> None:
        person = any(op.label.startswith("person") for op in ops)
        what = ", ".join(f"{op.label} {_op_key(op)}" for op in ops)
        option = self._point(Call("write", f"write {what}", self.world.write_options(person)))
        self._apply(ops, option, lambda: self.inner.write(ops))

    def update(self, op: Update) -> Item:
        person = op.label.startswith("person")
        what = f"{op.label} {_op_key(op)}"
        option = self._point(Call("update", f"update {what}", self.world.write_options(person)))
        result: list[Item] = []
        self._apply([op], option, lambda: result.append(self.inner.update(op)))
        return result[0]

    def delete(self, table: str, key: Item, condition: tuple[Cond, ...] = (), label: str = "delete") -> None:
        person = label.startswith("person")
        option = self._point(Call("delete", f"{label} {_key(key)}", self.world.write_options(person)))
        self._apply(
            [Update(table, key, condition, label)],
            option,
            lambda: self.inner.delete(table, key, condition, label),
        )

    def _apply(self, ops: Sequence[WriteOp], option: str, write: Callable[[], None]) -> None:
        keys = [(op.table, self.inner._target(op)) for op in ops if op.table in (STATE, RUNS)]
        before = {k: copy.deepcopy(self.inner.tables[k[0]].get(k[1])) for k in keys}
        paused = [op for op in ops if isinstance(op, Update) and op.label == "pause on failure"]
        job_before = copy.deepcopy(self.inner.get(JOBS, paused[0].key)) if paused else None
        try:
            write()
        except ConditionFailed as lost:
            self.world.seen_by_actor(["lost", lost.op_index, lost.current])
            raise
        self.world.previous.update(before)
        for op in ops:
            if isinstance(op, Put) and op.table == RUNS and before.get((RUNS, self.inner._target(op))):
                # I1: a record is created once (``attribute_not_exists``), never put over another.
                self.world.find("record_overwritten", _op_key(op), f"{op.label} replaced it")
        if paused:
            self.world.check_pause(job_before)
        self.world.seen_by_actor("written")
        self.world.after_write(ops)
        self.world.landed()
        if option == CRASH:
            raise Crash
        if option == LOST:
            raise TransientStoreError("explorer: the write landed, its response was lost")


class PointQueue:
    """The WorkQueue every explored actor uses: a send is a scheduling point."""

    def __init__(self, world: World) -> None:
        self.world = world

    def send(self, messages: Sequence[OutgoingMessage]) -> SendResult:
        world = self.world
        options = [OK]
        if world.used[DUP] < world.budget.dups:
            options.append(DUP)
        if world.used[CRASH] < world.budget.crashes:
            options.append(CRASH)
        runs = ",".join(f"{m.body.get('run_id')}v{m.body.get('version')}" for m in messages)
        option = world.store._point(Call("send", f"send {runs}", tuple(options)))
        result = world.mq.send(messages)
        if option == DUP:
            world.mq.send(messages)
        world.seen_by_actor("sent")
        world.check_invariants()
        if option == CRASH:
            raise Crash
        return result


class PointDeadLetters:
    """A job's own dead-letter queue (issue 38), as the explored actors send to it: each send is
    a scheduling point, which fails (the queue did not answer) while the budget's ``unanswered``
    allows; every letter that reached it is kept for the checks (``check_dead_letters``)."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.sent: list[dict[str, Any]] = []

    def send(self, queue_arn: str, body: str, deduplication_id: str) -> None:  # noqa: ARG002
        world = self.world
        options = (OK, UNANSWERED) if world.used[UNANSWERED] < world.budget.unanswered else (OK,)
        option = world.store._point(Call("send", f"send dead letter {deduplication_id}", options))
        if option == UNANSWERED:
            world.seen_by_actor("unanswered")
            raise ConnectionError("explorer: the dead-letter queue did not answer")
        self.sent.append(json.loads(body))
        world.seen_by_actor("sent")


def _key(key: Item) -> str:
    return ",".join(str(v) for v in key.values())


def _op_key(op: WriteOp) -> str:
    if isinstance(op, Put):
        return str(op.item.get("run_id") or op.item.get("job_id"))
    return str(op.key.get("run_id") or op.key.get("job_id"))
