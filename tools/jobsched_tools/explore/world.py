"""One explored world: the real services on the in-memory store, behind wrappers that make every
store and queue call a scheduling point (``sched.py``), a ledger of what happened, the drive to
quiescence after a schedule, and the checks.

Everything here is deterministic given the schedule: a ManualClock (each actor sees it through
its own offset), fixed claimer and request ids, a seeded worker RNG.
"""

from __future__ import annotations

import copy
import hashlib
import json
import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from jobsched.core import invariants as core_invariants
from jobsched.core.clock import Clock, ManualClock
from jobsched.core.config import SchedulerConfig
from jobsched.core.dead_letter import PENDING, REFUSED, SENT
from jobsched.core.errors import ConditionFailed, TransientStoreError
from jobsched.core.job import definition_digest
from jobsched.core.policies import UNFINISHED
from jobsched.core.run import run_id_for, run_key
from jobsched.core.writes import JOBS, RUNS, STATE, Cond, Delete, Item, Put, Update, WriteOp
from jobsched.ports import INDEX_TABLE, IndexName, OutgoingMessage, Page, SendResult
from jobsched.services.detector import MissDetector
from jobsched.services.messages import parse_run_message
from jobsched.services.registrar import Registrar
from jobsched.services.trigger import Trigger
from jobsched.services.worker import FENCED_OUT, HandlerResult, Started, Worker
from jobsched.targets.registry import HandlerRegistry

from jobsched_tools.explore.sched import OK, Call, Crash, Scheduler
from jobsched_tools.fakes.memory_queue import MemoryWorkQueue
from jobsched_tools.fakes.memory_store import MemoryStore
from jobsched_tools.fakes.memory_telemetry import MemoryTelemetry
from jobsched_tools.sim.faults import StateMark
from jobsched_tools.sim.invariants import occurrences, segments


class _NullLogger:
    def info(self, msg: object, *args: object, **kwargs: Any) -> None:
        pass

    warning = error = info


_LOG = QUIET_LOG = _NullLogger()
CRASH, LOST, STALE, DUP = "crash", "lost", "stale", "dup"
UNANSWERED = "unanswered"  # a dead-letter send the job's queue did not answer (issue 38)
TAKE = "take:"  # a worker's receive: which queued message (reorder)
INDEXES = ("next-run", "lease")
COMMITTED = ("succeeded", "failed")
POLICY = ("skipped", "missed")
ADHOC = ("manual", "backfill")
# The writes that move a job past its occurrences without setting its status: only on an active job.
CLAIMS = ("advance job", "settle occurrences")
# The drive to quiescence: handlers run this long (heartbeating), and the drive ends this long
# after the window whose occurrences must all have records.
HANDLER_MS = 45_000
DRIVE_AFTER_MS = 150_000
BEAT_MS = 20_000  # the drive's heartbeats: fewer than a worker's, within the 30 s lease
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


class _Tables(MemoryStore):
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
        self.inner = _Tables()
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
        self.registry = HandlerRegistry()
        self.registry.add("t", lambda _ctx: None)
        self.dead_letter_queue = PointDeadLetters(self)  # every job's own dead-letter queue

    # --- the ledger ----------------------------------------------------------------------------

    def find(self, check: str, key: str, detail: str) -> None:
        if (check, key) in self.ledger.seen:
            return
        self.ledger.seen.add((check, key))
        self.ledger.findings.append(Finding(check, key, detail, tuple(self.trace)))

    def note(self, line: str) -> None:
        self.trace.append(line)

    def after_write(self, ops: Sequence[WriteOp]) -> None:
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
        self._waits_owed(ops)
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
        self._point(Call("get", f"get {table} {_key(key)}"))
        item = self.inner.get(table, key, consistent)
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
        view = MemoryStore()
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
    allows; every letter that reached it is kept for the checks (``_dead_letters``)."""

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


# --- services as each actor sees them ------------------------------------------------------------


class Services:
    """The services built on one store, queue and clock (an actor's, or the drive's)."""

    def __init__(self, world: World, store: Any, queue: Any, clock: Clock, name: str) -> None:
        cfg = world.cfg
        self.clock = clock
        self.registrar_inline = Registrar(store, world.telemetry, clock, cfg, queue, report=False)
        self.trigger = Trigger(
            store,
            queue,
            world.telemetry,
            clock,
            cfg,
            parallel_queries=False,
            claim_concurrency=1,
            registrar=self.registrar_inline,
            claimer_id=name,
        )
        early = Trigger(
            store,
            queue,
            world.telemetry,
            clock,
            cfg,
            parallel_queries=False,
            claim_concurrency=1,
            claimer_id=name,
        )
        self.registrar = Registrar(
            store,
            world.telemetry,
            clock,
            cfg,
            queue,
            known_targets={"t"},
            claim_now=lambda job_id: early.claim_now(job_id, "registrar"),
        )
        self.detector = MissDetector(
            store,
            queue,
            world.telemetry,
            clock,
            cfg,
            parallel_queries=False,
            registrar=self.registrar_inline,
            dead_letter_sender=world.dead_letter_queue,
        )
        self.worker = Worker(
            store,
            queue,
            world.telemetry,
            clock,
            cfg,
            world.registry,
            name,
            logger_for=lambda _run_id: _LOG,
            rng=random.Random(0),
            dead_letter_sender=world.dead_letter_queue,
        )
        from jobsched.services.operations import Operations

        self.ops = Operations(store, queue, world.telemetry, clock, cfg)


# --- the drive to quiescence and the final checks -------------------------------------------------


@dataclass
class _Running:
    started: Started
    receipt: str
    began: int
    beat: int


def quiesce(world: World, redeliver_registration: bool) -> None:
    """Drive everything to quiescence on the base clock: the stream's retry of a registration
    that did not finish, ticks once a minute up to the window's end, the detector, and workers
    draining the queue (each handler runs ``handler_ms``, heartbeating). Deterministic."""
    # The drive's calls go through the same wrappers (no actor: no scheduling point), so its
    # writes are checked and its commits counted like the explored actors'.
    drive = Services(world, world.store, world.queue, world.clock, "drive")
    if redeliver_registration:
        drive.registrar.apply(world.job_id)
        world.after_write([])
    running: list[_Running] = []
    catch_up_until = world.window_end + DRIVE_AFTER_MS
    end = catch_up_until + 10 * 60_000  # a bound: the drive ends when nothing is left to happen
    next_tick = world.clock.now_ms()
    while world.clock.now_ms() <= end:
        now = world.clock.now_ms()
        if next_tick <= now <= world.window_end:
            drive.trigger.tick(f"drive-{now}")
            next_tick = now + 60_000
        # After the window, overdue occurrences are not caught up any more (nothing would end).
        drive.detector.run(f"drive-{now}", leases_only=now > catch_up_until)
        _deliver(world, drive.worker, running)
        _progress(world, drive.worker, running)
        world.after_write([])
        wake = _next_event(world, running, next_tick, catch_up_until)
        if wake is None:
            break
        world.clock.set(wake)


def _deliver(world: World, worker: Worker, running: list[_Running]) -> None:
    while True:
        batch = world.mq.receive(10)
        if not batch:
            return
        for receipt, body in batch:
            begun = worker.begin(parse_run_message(body), world.clock.now_ms() + 900_000)
            if isinstance(begun, Started):
                world.exec_start(begun)
                now = world.clock.now_ms()
                running.append(_Running(begun, receipt, now, now))
            else:
                world.mq.delete(receipt)


def _progress(world: World, worker: Worker, running: list[_Running]) -> None:
    now = world.clock.now_ms()
    beat_ms = BEAT_MS
    for entry in list(running):
        if now - entry.began >= world.handler_ms:
            running.remove(entry)
            worker.finish(entry.started, HandlerResult(True))
            world.exec_end(entry.started)
            world.mq.delete(entry.receipt)
        elif now - entry.beat >= beat_ms:
            entry.beat = now
            if not worker.heartbeat(entry.started):
                running.remove(entry)
                worker.finish(entry.started, FENCED_OUT)
                world.exec_end(entry.started)
                world.mq.delete(entry.receipt)


def _next_event(world: World, running: list[_Running], next_tick: int, catch_up_until: int) -> int | None:
    """The next instant something can happen in the drive, or None when nothing can."""
    now = world.clock.now_ms()
    cfg = world.cfg
    times: list[int] = []
    if next_tick <= world.window_end:
        times.append(next_tick)
    visible = world.mq.next_visible_at_ms()
    if visible is not None:
        times.append(visible)
    for entry in running:
        times.append(min(entry.began + world.handler_ms, entry.beat + BEAT_MS))
    for run in world.inner.tables[RUNS].values():
        if "check_at" in run:
            times.append(int(run["check_at"]) + cfg.clock_skew_allowance_ms + 1)
    for state in world.inner.tables[STATE].values():
        if state.get("status") == "active" and "next_run_at" in state:
            grace = int((state.get("misfire") or {}).get("grace_seconds", 60))
            overdue = int(state["next_run_at"]) + min(grace, cfg.trigger_lookback_seconds) * 1000 + 1
            if overdue <= catch_up_until:
                times.append(overdue)
    later = [t for t in times if t > now]
    return min(later) if later else None


def final_checks(world: World, skew_ms: int) -> None:
    """What must hold once everything settled: a record for every due occurrence (or a change's
    withdrawal within the clock skew of it), no record of an instant that was never due, at most
    one commit per run, no run left unfinished, and a manual run never skipped behind a run that
    was not due yet."""
    runs = {str(r["run_id"]): r for r in world.inner.tables[RUNS].values()}
    for run_id, count in world.ledger.commits.items():
        if count > 1:
            world.find("duplicate_commit", run_id, f"{count} commits")
    allowed = _occurrence_records(world, runs, skew_ms)
    for run_id, run in sorted(runs.items()):
        at = int(run["scheduled_at"])
        if run.get("kind") not in ADHOC and at <= world.window_end and at not in allowed:
            world.find("run_not_due", run_id, "a record of an instant that was no due occurrence")
        if run.get("status") in UNFINISHED:
            world.find("unfinished_after_drive", run_id, f"still {run.get('status')}")
        if run.get("kind") == "manual" and run.get("status") == "skipped":
            _manual_skipped_behind_future(world, run_id, run, runs, skew_ms)
    _persons_last_word(world)
    _dead_letters(world, runs)
    for actor in world.sched.actors:
        if actor.error is not None:
            world.find("unexpected_exception", actor.name, actor.error)
    for event in world.telemetry.named("job.error"):
        world.find("job_error", event.correlation_id, str(event.fields.get("error")))
    if world.extra_check is not None:
        world.extra_check(world)


def _manual_skipped_behind_future(
    world: World, run_id: str, run: Item, runs: dict[str, Item], skew_ms: int
) -> None:
    """A manual run is skipped only behind a run that is due (promises.md row 11): the walk passes
    over a run not due yet by the walker's clock (``policies.not_yet_due``). The holder's instant
    and the skip's ``finished_at`` come from two actors' clocks (a manual holder's instant is its
    person's clock), which may differ by the skew the product allows
    (``SchedulerConfig.clock_skew_allowance_ms``), or by the explored offsets when those are wider
    (two clocks each ``skew_ms`` off): the skip is judged late by that much, as the lease checks
    judge expiry. An instant up to the allowance ahead is due by some clock within it."""
    holder = runs.get(str(run.get("blocked_by")), {})
    allowance = max(world.cfg.clock_skew_allowance_ms, 2 * skew_ms)
    if int(holder.get("scheduled_at", 0)) > int(run.get("finished_at", 0)) + allowance:
        world.find(
            "manual_skipped_behind_future",
            run_id,
            f"skipped behind {run.get('blocked_by')}, not due until {holder.get('scheduled_at')}",
        )


def _persons_last_word(world: World) -> None:
    """A person's last write to the job item stands: a delete is not undone by jobsched's own
    writes (a report, a pause), and a paused job is never deleted (it is not complete)."""
    item = world.inner.get(JOBS, {"job_id": world.job_id})
    if world.person_last == "delete" and item is not None:
        world.find("deleted_job_recreated", world.job_id, f"the item is back: {sorted(item)}")
    if world.person_last == "pause" and item is None:
        world.find("paused_job_deleted", world.job_id, "a person paused it; jobsched deleted it")
    if world.person_last == "reput":
        # Registered again (after a delete): a new life, whose occurrences run (issue 34 item 2:
        # a max_runs count must not outlive the job item it counted for).
        scheduled = [
            r
            for r in world.inner.tables[RUNS].values()
            if r.get("kind") == "scheduled" and int(r["scheduled_at"]) > world.person_at
        ]
        if not scheduled and any(
            t > world.person_at and t <= world.window_end
            for t in occurrences(_timing(world), world.person_at, world.window_end)
        ):
            world.find("reregistered_job_never_runs", world.job_id, "no run of its new life")


def _dead_letters(world: World, runs: dict[str, Item]) -> None:
    """Issue 38, as the chaos checker's ``dead_letters``: after the drive (whose detector pays
    every debt its lease sweep finds) nothing is still owed, every run recorded sent reached its
    queue, and no letter is for a run that did not fail. And a settled debt leaves no
    ``check_at`` (data-model.md: a finished run keeps it only while a dead letter is owed)."""
    letters = {str(letter["run_id"]) for letter in world.dead_letter_queue.sent}
    for run_id, run in sorted(runs.items()):
        owed = run.get("dead_letter")
        if owed == PENDING:
            world.find("dead_letter_owed", run_id, "its dead letter is still owed after the drive")
        elif owed == SENT and run_id not in letters:
            world.find("dead_letter_unsent", run_id, "recorded sent, but no letter reached the queue")
        if owed in (SENT, REFUSED) and "check_at" in run:
            world.find("dead_letter_check_at_left", run_id, f"settled ({owed}), it still has check_at")
    for run_id in sorted(letters):
        status = runs.get(run_id, {}).get("status")
        if status != "failed":
            world.find("dead_letter_for_unfailed", run_id, f"a letter for a {status} run")


def _timing(world: World) -> tuple[tuple[str, str], ...]:
    item = world.inner.get(JOBS, {"job_id": world.job_id}) or {}
    return tuple(sorted({"schedule": str(item.get("schedule")), "timezone": "UTC"}.items()))


def _occurrence_records(world: World, runs: dict[str, Item], skew_ms: int) -> set[int]:
    """Every occurrence that came due while the job was active (the state's history: its marks)
    has one record; returns the instants a scheduled record may have (claimed ahead, too)."""
    ahead = world.cfg.lookahead_seconds * 1000 + 2 * skew_ms + 2_000
    due: set[int] = set()
    allowed: set[int] = set()
    at_a_change: set[int] = set()
    for span in segments(_dated_by_records(world), world.window_end):
        stretch = occurrences(span.timing, span.start, min(span.end, world.window_end))
        due.update(stretch)
        allowed.update(occurrences(span.timing, span.start, span.end + ahead))
        if span.end < world.window_end:
            at_a_change.update(t for t in stretch if t > span.end - skew_ms - 1_000)
    for occurrence in sorted(due):
        run_id = run_id_for(world.job_id, occurrence)
        status = runs.get(run_id, {}).get("status")
        if occurrence in at_a_change and status in (None, "cancelled"):
            continue
        if status not in COMMITTED and status not in POLICY:
            world.find("lost_occurrence", run_id, f"due, and {status or 'absent'} after the drive")
    return allowed


def _dated_by_records(world: World) -> list[StateMark]:
    """The state's history, with each stretch that a person's write started dated from the write
    when its stream record was delivered (late, after the reconcile pass dated the change when it
    first saw it): the timing's occurrences after the write are due, whichever of the record and
    the pass applied the change first (issue 34 item 4; chaos's ``after_writes``)."""
    marks = list(world.ledger.marks)
    for written in world.records_delivered:
        for index, mark in enumerate(marks):
            opens = mark.status == "active" and (index == 0 or marks[index - 1].status != "active")
            if not opens or mark.at < written or mark.next_run_at is None:
                continue
            due = occurrences(mark.timing, written + 1, int(mark.next_run_at))
            marks[index] = replace(mark, at=written, next_run_at=min([*due, int(mark.next_run_at)]))
            break
    return marks
