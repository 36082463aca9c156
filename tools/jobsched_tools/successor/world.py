"""One explored world of shape f: the product's in-memory store holding the tables, a small work
queue, the ledger, and the wrappers that make every store and queue call a scheduling point of
the explorer's ``Scheduler`` (``explore/sched.py``).

The store is the product's ``MemoryStore``: it evaluates ``jobsched.core.writes`` conditions and
transactions as DynamoDB does (each item once per transaction, all or nothing), and its runs
table holds every record shape f needs (heads, closure markers, manual runs) under the runs key.
Only the ``due`` index is not one of its indexes (``jobsched.ports.INDEX_KEYS`` is the product's
and is not changed here): ``due_page`` reads it from the runs table as an index would, (shard,
check_at), and a page is frozen at the point it is read. Index lag beyond that is the ``stale``
option of a query: the page as the index held it at the set-up.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from jobsched.core.errors import ConditionFailed
from jobsched.core.writes import RUNS, STATE, Item, Put, Update, WriteOp, failing_parts

from jobsched_tools.explore.sched import OK, Call, Crash, Scheduler
from jobsched_tools.fakes.memory_store import MemoryStore
from jobsched_tools.successor import invariants
from jobsched_tools.successor.ledger import Finding, Ledger
from jobsched_tools.successor.writes import JOB, SHARD, Protocol

CRASH, LOST, STALE, DUP = "crash", "lost", "stale", "dup"


@dataclass(frozen=True)
class Budget:
    """How many of each fault one schedule may use."""

    crashes: int = 0
    lost: int = 0  # lost responses of writes, and lost sends
    stale: int = 0  # index pages served as the index held them at the set-up
    dups: int = 0  # duplicate deliveries


@dataclass
class Message:
    seq: int
    body: dict[str, Any]
    held_by: str | None = None  # a worker holds it (invisible) until it deletes it


def canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=repr, separators=(",", ":"))


class Tables(MemoryStore):
    """The product's in-memory store without its size checks (the model's items are small)."""

    def _check_sizes(self, ops: Sequence[WriteOp], currents: Sequence[Item | None], single: bool) -> None:  # noqa: ARG002
        return None


class World:
    def __init__(self, proto: Protocol, budget: Budget) -> None:
        self.proto = proto
        self.budget = budget
        self.store = Tables()
        self.queue: list[Message] = []
        self.seq = 0
        self.sched = Scheduler()
        self.ledger = Ledger()
        self.trace: list[str] = []
        self.used: Counter[str] = Counter()
        self.snapshot: list[Item] = []  # the runs table at the set-up: a stale page's index
        self.pending: list[Any] = []  # changes whose registrar gave up or died: the reconcile
        self.clock_of_write = 0  # the writer's clock, for the checks of a write

    # --- the ledger ------------------------------------------------------------------------------

    def find(self, check: str, key: str, detail: str) -> None:
        if (check, key) in self.ledger.seen:
            return
        self.ledger.seen.add((check, key))
        self.ledger.findings.append(Finding(check, key, detail, tuple(self.trace)))

    def note(self, line: str) -> None:
        self.trace.append(line)

    def runs(self) -> dict[str, Item]:
        return {str(item["run_id"]): item for item in self.store.tables[RUNS].values()}

    def state(self) -> Item | None:
        return self.store.tables[STATE].get(JOB)

    def check(self) -> None:
        for violation in invariants.check_tables(self.state(), self.runs(), [m.body for m in self.queue]):
            self.find(*violation)

    # --- scheduling points -------------------------------------------------------------------------

    def point(self, kind: str, detail: str, options: tuple[str, ...] = (OK,)) -> str:
        allowed = tuple(o for o in options if o == OK or self.used[o] < self._allowance(o))
        option = self.sched.point(Call(kind, detail, allowed))
        actor = self.sched.actor_here()
        if actor is not None:
            self.note(f"{actor.name}: {detail}" + ("" if option == OK else f" [{option}]"))
            if option != OK:
                self.used[option] += 1
        return option

    def _allowance(self, option: str) -> int:
        return {
            CRASH: self.budget.crashes,
            LOST: self.budget.lost,
            STALE: self.budget.stale,
            DUP: self.budget.dups,
        }[option]

    def seen(self, result: Any) -> Any:
        actor = self.sched.actor_here()
        if actor is not None:
            actor.digest.update(canon(result).encode())
        return result

    def get(self, key: str, what: str = "run") -> Item | None:
        self.point("get", f"get {what} {key}")
        table = STATE if what == "state" else RUNS
        item = self.store.get(table, {"job_id": JOB} if what == "state" else {"job_id": JOB, "run_id": key})
        return self.seen(item)  # type: ignore[no-any-return]

    def runs_of_job(self) -> list[Item]:
        """A strongly consistent query of the job's records (the registrar's and operations')."""
        self.point("query", "query runs of job")
        return self.seen(sorted(copy.deepcopy(list(self.runs().values())), key=lambda r: str(r["run_id"])))  # type: ignore[no-any-return]

    def due_page(self, low: int | None, high: int, stale: bool = False) -> list[Item]:
        """The ``due`` index (shard, check_at): its entries in [low, high], as of now or, with a
        stale option, as of the set-up."""
        option = self.point("query", f"query due [{low}, {high}]", (OK, STALE) if stale else (OK,))
        source = self.snapshot if option == STALE else list(self.runs().values())
        page = [
            copy.deepcopy(item)
            for item in source
            if item.get("shard") == SHARD
            and "check_at" in item
            and (low is None or item["check_at"] >= low)
            and item["check_at"] <= high
        ]
        page.sort(key=lambda item: (item["check_at"], item["run_id"]))
        return self.seen(page)  # type: ignore[no-any-return]

    def write(self, ops: list[WriteOp], detail: str, now: int, faults: bool = True) -> str:
        """One atomic write: ``ok``; raises ConditionFailed; with ``lost`` the write applied and
        the caller is told it failed; with ``crash`` it applied and the caller dies."""
        option = self.point("write", detail, (OK, CRASH, LOST) if faults else (OK,))
        if self.sched.actor_here() is None:
            self.note(f"(serial) at {now}: {detail}")
        before = self.runs()
        self.clock_of_write = now
        try:
            self.store.write(ops)
        except ConditionFailed as failed:
            self.seen(f"failed {failed.op.label}")
            for cond in failing_parts(failed.op.condition, failed.current):
                self.ledger.races[cond.why.split(":", 1)[0]] += 1
            raise
        self.after_write(ops, before)
        self.seen(f"wrote {detail}")
        if option == CRASH:
            raise Crash
        return option

    def after_write(self, ops: Sequence[WriteOp], before: dict[str, Item]) -> None:
        for op in ops:
            self._count(op)
        for violation in invariants.check_write(ops, before, self.runs(), self.ledger, self.clock_of_write):
            self.find(*violation)
        if self.proto.overlap != "allow":  # the overlap policies' invariants (invariants_overlap.py)
            from jobsched_tools.successor import invariants_overlap

            for violation in invariants_overlap.check_write(
                self.proto, ops, before, self.runs(), self.clock_of_write
            ):
                self.find(*violation)
        self.check()

    def _count(self, op: WriteOp) -> None:
        """The ledger: the job's history, and per run its claims, starts, recoveries, commits."""
        if isinstance(op, Update) and op.table == STATE:
            timing = op.set["timing"]
            self.ledger.history.append(
                (self.clock_of_write, op.set["status"], (timing["every"], timing["anchor"]))
            )
        elif isinstance(op, Put) and op.label.startswith("claim "):
            self.ledger.claimed.add(str(op.item["after_run_id"]))
        elif isinstance(op, Update) and op.table == RUNS:
            verb = op.label.split(" ", 1)[0]
            counter = {
                "start": self.ledger.starts,
                "recover": self.ledger.recoveries,
                "commit": self.ledger.commits,
            }
            if verb in counter:
                counter[verb][str(op.key["run_id"])] += 1

    # --- the queue -------------------------------------------------------------------------------

    def send(self, body: dict[str, Any], faults: bool = True) -> None:
        option = self.point(
            "send", f"send {body['run_id']} v{body['version']}", (OK, LOST) if faults else (OK,)
        )
        if option == LOST:
            return
        self.seq += 1
        self.queue.append(Message(self.seq, copy.deepcopy(body)))
        self.check()

    def receive(self, worker: str, faults: bool = True) -> tuple[Message | None, bool]:
        """The oldest visible message, held by ``worker``; with ``dup`` it will come again."""
        option = self.point("receive", "receive", (OK, DUP) if faults else (OK,))
        for message in self.queue:
            if message.held_by is None:
                message.held_by = worker
                self.seen(message.body)
                return message, option == DUP
        self.seen(None)
        return None, False

    def delete_message(self, message: Message) -> None:
        self.queue = [m for m in self.queue if m.seq != message.seq]

    def release_held(self) -> None:
        """Every message a worker held and never deleted (it died) becomes visible again."""
        for message in self.queue:
            message.held_by = None

    # --- state identity --------------------------------------------------------------------------

    def fingerprint(self) -> bytes:
        h = hashlib.blake2b(digest_size=16)
        h.update(self.outcome_key())
        for actor in self.sched.actors:
            h.update(f"{actor.name}:{actor.pc}:{actor.done}:{actor.crashed}".encode())
            h.update(actor.digest.digest())
        h.update(canon(sorted(self.used.items())).encode())
        return h.digest()

    def outcome_key(self) -> bytes:
        h = hashlib.blake2b(digest_size=16)
        for table in (STATE, RUNS):
            h.update(canon(sorted(self.store.tables[table].values(), key=canon)).encode())
        h.update(canon([(m.body, m.held_by) for m in self.queue]).encode())
        h.update(canon((sorted(self.ledger.starts.items()), sorted(self.ledger.recoveries.items()))).encode())
        h.update(canon((self.ledger.history, [repr(p) for p in self.pending])).encode())
        h.update(canon([a.error for a in self.sched.actors]).encode())
        return h.digest()
