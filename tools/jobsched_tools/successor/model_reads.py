"""Shape f's model extended to eventually consistent reads, long runs (heartbeats, the recheck),
two detectors and worker adoption (docs/proposals/successor-model.md, "Reads, heartbeats,
detectors, adoption"). The base model's world and actors are unchanged; this module adds:

- ``ReadsWorld``: the world with two more faults, a heartbeat that never lands (``drop``) and an
  eventually consistent GetItem that returns the item as it was at the set-up (``lag``: an older
  version, or absent for an item written since; records are never deleted before their
  retention, so a stale read can only lag), and the checks below after every write;
- the actors: ``long`` (a worker that started a run at the set-up, heartbeats, then commits),
  ``sweeper`` (the detector with the product's lease rules: recheck a renewed lease, recover a
  lapsed one conditional on the lease as read), ``tick_ec`` (the trigger reading the successor
  eventually consistent) and ``adopter`` (a worker that adopts a `scheduled` run's version, HC3).

The checks (invariant names as the findings carry them):

- ``recovered_while_fresh``: a recovery by a detector of a run whose lease, as stored when the
  recovery lands, ends after the detector's now minus the skew allowance (the heartbeat is fresh);
- ``recovered_not_running``: a recovery of a run that is not running (a commit, or another
  detector's recovery, since the read);
- ``lease_cut``: a heartbeat that shortens the stored lease (a stale holder's);
- ``lease_hidden``: a running run whose ``due`` entry is absent or keyed after its lease, so a
  detector sweeping at the lease's end plus the skew allowance would not meet it (judged for a
  run started with a lease, ``lease_token``: the drive's base worker starts without one);
- ``recovery_late``: a detector that swept at or after a run's lease end plus the skew allowance,
  from an index page that did not lag, left that run (unchanged since its read) running;
- ``finished_in_due``: a run that is neither scheduled nor running holds a ``due`` entry (read by
  every sweep until its retention);
- ``H2prime_unclaimed_message``: a queued message names a timed `scheduled` run whose successor is
  not a run (the build plan's H2', which worker adoption rests on);
- ``retry_before_backoff``: a recovered run (a retry) started by a message other than the
  recovery's, whose delay is the backoff (worker adoption of a `pending` run).

Only actors' writes are judged by ``recovered_while_fresh``: the drive to quiescence (the base
model's, serial, after every actor finished or died) recovers by ``check_at`` alone.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jobsched.core.errors import ConditionFailed
from jobsched.core.writes import RUNS, Item, Put, Update, WriteOp, failing_parts

from jobsched_tools.explore.sched import OK, Crash
from jobsched_tools.successor import writes as w
from jobsched_tools.successor import writes_reads as wr
from jobsched_tools.successor.invariants import Violation
from jobsched_tools.successor.model import PROGRAMS, ActorSpec, message
from jobsched_tools.successor.sets import at as minute_at
from jobsched_tools.successor.world import CRASH, LOST, STALE, Budget, World

DROP, LAG = "drop", "lag"
LONG_AT = minute_at(5)  # the long run: the set-up's claimed 00:05, started at 00:05
FRESH, NOT_RUNNING, CUT = "recovered_while_fresh", "recovered_not_running", "lease_cut"
HIDDEN, LATE, LEAK = "lease_hidden", "recovery_late", "finished_in_due"
H2P, EARLY_RETRY = "H2prime_unclaimed_message", "retry_before_backoff"


@dataclass(frozen=True)
class ReadsBudget(Budget):
    dropped: int = 0  # heartbeats that never land
    lag: int = 0  # eventually consistent GetItems answered as at the set-up


class ReadsWorld(World):
    def __init__(self, proto: w.Protocol, budget: Budget) -> None:
        super().__init__(proto, budget)
        self.started_by: dict[str, int] = {}  # run id -> the token of the message starting it

    def _allowance(self, option: str) -> int:
        budget = self.budget
        if option == DROP:
            return budget.dropped if isinstance(budget, ReadsBudget) else 0
        if option == LAG:
            return budget.lag if isinstance(budget, ReadsBudget) else 0
        return super()._allowance(option)

    def get_eventual(self, key: str) -> Item | None:
        """An eventually consistent GetItem: now, or (``lag``) as the item was at the set-up."""
        option = self.point("get", f"get run {key} (eventual)", (OK, LAG))
        if option == LAG:
            old = {str(item["run_id"]): item for item in self.snapshot}
            return self.seen(copy.deepcopy(old.get(key)))  # type: ignore[no-any-return]
        return self.seen(self.store.get(RUNS, w.run_key(key)))  # type: ignore[no-any-return]

    def beat(self, op: Update, now: int) -> bool:
        """A heartbeat: it lands (True), never lands (``drop``: False), or lands and the worker
        dies (``crash``). Raises ConditionFailed when it is refused."""
        option = self.point("write", op.label, (OK, DROP, CRASH))
        if option == DROP:
            return False
        before = self.runs()
        self.clock_of_write = now
        try:
            self.store.write([op])
        except ConditionFailed as failed:
            self.seen(f"failed {failed.op.label}")
            for cond in failing_parts(failed.op.condition, failed.current):
                self.ledger.races[cond.why.split(":", 1)[0]] += 1
            raise
        self.after_write([op], before)
        self.seen(f"wrote {op.label}")
        if option == CRASH:
            raise Crash
        return True

    def after_write(self, ops: Sequence[WriteOp], before: dict[str, Item]) -> None:
        super().after_write(ops, before)
        in_actor = self.sched.actor_here() is not None
        for violation in check_reads_write(
            ops, before, self.runs(), self.clock_of_write, self.started_by, in_actor
        ):
            self.find(*violation)

    def check(self) -> None:
        super().check()
        for violation in check_reads_tables(self.runs(), [m.body for m in self.queue]):
            self.find(*violation)


# --- the checks ------------------------------------------------------------------------------------


def check_reads_write(
    ops: Sequence[WriteOp],
    before: Mapping[str, Item],
    runs: Mapping[str, Item],
    now: int,
    started_by: Mapping[str, int],
    in_actor: bool,
) -> list[Violation]:
    found: list[Violation] = []
    for op in ops:
        if not isinstance(op, Update) or op.table != RUNS:
            continue
        run_id = str(op.key["run_id"])
        verb = op.label.split(" ", 1)[0]
        was = before.get(run_id)
        if verb == "recover":
            if was is None or was["status"] != w.RUNNING:
                found.append((NOT_RUNNING, run_id, f"recovered while {was and was['status']}"))
            elif in_actor and "lease_expires_at" in was and int(was["lease_expires_at"]) > now - w.SKEW_MS:
                found.append((FRESH, run_id, f"recovered at {now}, leased to {was['lease_expires_at']}"))
        elif verb == "heartbeat":
            after = runs.get(run_id, {})
            if (
                was is not None
                and "lease_expires_at" in was
                and int(after.get("lease_expires_at", 0)) < int(was["lease_expires_at"])
            ):
                found.append(
                    (CUT, run_id, f"lease {was['lease_expires_at']} cut to {after['lease_expires_at']}")
                )
        elif verb == "start" and in_actor and was is not None and "retry_at" in was and run_id in started_by:
            token = started_by[run_id]
            if token != was["version"]:
                found.append(
                    (EARLY_RETRY, run_id, f"a retry of token {was['version']} started by message {token}")
                )
    return found


def check_reads_tables(runs: Mapping[str, Item], messages: Sequence[Mapping[str, Any]]) -> list[Violation]:
    found: list[Violation] = []
    for run_id, run in runs.items():
        leased = (
            run["status"] == w.RUNNING
            and run.get("lease_token") == run["version"]
            and "lease_expires_at" in run
        )
        if leased and ("check_at" not in run or int(run["check_at"]) > int(run["lease_expires_at"])):
            found.append(
                (HIDDEN, run_id, f"due at {run.get('check_at')}, leased to {run['lease_expires_at']}")
            )
        if "check_at" in run and run["status"] not in (w.SCHEDULED, w.RUNNING):
            found.append((LEAK, run_id, f"{run['status']} with a due entry at {run['check_at']}"))
    for body in messages:
        queued = runs.get(str(body["run_id"]))
        if queued is None or queued.get("kind") != w.TIMED or queued["status"] != w.SCHEDULED:
            continue
        successor = runs.get(str(queued["next_key"]))
        if successor is None or successor["status"] == w.CLOSED:
            found.append((H2P, str(queued["run_id"]), f"message v{body['version']}, successor {successor}"))
    return found


# --- the actors ------------------------------------------------------------------------------------


def _world(world: World) -> ReadsWorld:
    assert isinstance(world, ReadsWorld), "the extension's actors run in a ReadsWorld"
    return world


def _adopts_pending(world: World) -> bool:
    return isinstance(world.proto, wr.ReadsProtocol) and world.proto.adopt_pending


def _write(world: World, ops: list[WriteOp], detail: str, now: int) -> bool:
    try:
        return world.write(ops, detail, now) != LOST
    except ConditionFailed:
        return False


def long(world: World, spec: ActorSpec) -> None:
    """The worker of the run the set-up started (token 2): a heartbeat at each of ``beats``, then
    the commit at ``commit_at``. A refused heartbeat stops it: its lease was taken (the product
    cancels the handler), and it does not commit."""
    rw = _world(world)
    beats, commit_at = spec.arg
    run_id, token = world.proto.key(LONG_AT, 1), 2
    for at in beats:
        try:
            rw.beat(wr.heartbeat(world.proto, run_id, token, "workerA", at), at)
        except ConditionFailed:
            world.note(f"{spec.name}: fenced out at its heartbeat: the handler stops")
            return
    done = w.commit(world.proto, run_id, token)
    with contextlib.suppress(ConditionFailed):
        world.write([done], done.label, commit_at)


def sweeper(world: World, spec: ActorSpec) -> None:
    """The detector with the product's lease rules, one sweep at each time in ``spec.arg`` (or at
    ``spec.at``). Its GetItems are strongly consistent, as the product's are; ``sweeper_ec``'s
    are eventually consistent."""
    rw = _world(world)
    for now in spec.arg or (spec.at,):
        lagged_before = world.used[STALE] + world.used[LAG]
        page = world.due_page(None, now - w.SKEW_MS, stale=True)
        at_read = copy.deepcopy(world.runs())
        for entry in page:
            run_id = str(entry["run_id"])
            run = rw.get_eventual(run_id) if spec.kind == "sweeper_ec" else world.get(run_id)
            if (
                run is not None
                and run.get("check_at") is not None
                and int(run["check_at"]) <= now - w.SKEW_MS
            ):
                _judge(rw, run, now, spec.kind == "sweeper_ec")
        if world.used[STALE] + world.used[LAG] == lagged_before:  # the bound holds without lag
            _check_late(world, at_read, now)


def _judge(world: ReadsWorld, run: Item, now: int, eventual: bool) -> None:
    """One entry whose ``check_at`` came: recheck a renewed lease, recover a lapsed one; for a
    claimed run, the base model's rules (settle an overdue head, redispatch a lost dispatch)."""
    proto, run_id = world.proto, str(run["run_id"])
    if run["status"] == w.RUNNING:
        lease = run.get("lease_expires_at")
        if lease is not None and int(lease) > now - w.SKEW_MS:
            _write(world, [wr.recheck(proto, run, now)], f"recheck {run_id}", now)
        else:
            _write_and_send(world, wr.recover_leased(proto, run, now), run, now)
    elif run["status"] == w.SCHEDULED and (run["kind"] == w.MANUAL or "retry_at" in run):
        _write_and_send(world, w.redispatch(proto, run, now), run, now)
    elif run["status"] == w.SCHEDULED:
        key = str(run["next_key"])
        successor = world.get_eventual(key) if eventual else world.get(key)
        if successor is None:
            if now > int(run["at"]) + w.GRACE_MS:
                _write(world, w.settle(proto, run, now), f"settle {run_id}", now)
        elif successor["status"] != w.CLOSED and now >= (
            int(successor.get("claimed_at", 0)) + w.DISPATCH_LEASE_MS + w.SKEW_MS
        ):
            _write_and_send(world, w.redispatch(proto, run, now), run, now)


def _write_and_send(world: World, op: Update, run: Item, now: int) -> None:
    if _write(world, [op], op.label, now):
        world.send(message(run, int(op.set["version"])))


def _check_late(world: World, at_read: Mapping[str, Item], now: int) -> None:
    """``recovery_late``: a run running since the page was read, unchanged, and lapsed by now
    minus the skew allowance, was not recovered by this sweep."""
    for run_id, run in world.runs().items():
        read = at_read.get(run_id)
        lease = run.get("lease_expires_at")
        if (
            run["status"] == w.RUNNING
            and lease is not None
            and int(lease) + w.SKEW_MS <= now
            and read is not None
            and (read["version"], read.get("lease_expires_at")) == (run["version"], lease)
        ):
            world.find(LATE, run_id, f"swept at {now}, leased to {lease}, still running")


def tick_ec(world: World, spec: ActorSpec) -> None:
    """The base model's trigger, its read of each successor eventually consistent (the product's
    GetItem at half the read cost). The read after a lost answer stays strongly consistent."""
    rw, now = _world(world), spec.at
    proto = world.proto
    page = world.due_page(now - w.LOOKBACK_MS, now + w.LOOKAHEAD_MS, stale=True)
    for entry in page:
        if entry.get("kind") != w.TIMED or entry["status"] != w.SCHEDULED:
            continue
        key = str(entry["next_key"])
        successor = rw.get_eventual(key)
        if successor is not None:
            if successor.get("claimed_by") == spec.name and successor.get("after_run_id") == entry["run_id"]:
                world.send(message(entry, int(entry["version"])))
            continue
        put: Put = w.claim(proto, entry, now, spec.name)
        try:
            option = world.write([put], put.label, now)
        except ConditionFailed:
            world.note(f"{spec.name}: the put failed (a unit spent)")
            continue
        if option == LOST:
            again = world.get(key)
            if again is None or again.get("claimed_by") != spec.name:
                continue
        world.send(message(entry, int(entry["version"])))


def adopter(world: World, spec: ActorSpec) -> None:
    """The base model's worker (a start with a lease, one point, the commit); as ``adopter``, with HC3's
    adoption: a start refused on a run that reads `scheduled` (strongly consistent) and is not a
    retry starts again with the run's own version. ``adopt_pending`` (the mutant) adopts a retry
    too. As ``plain``, the base worker's rule: a refused message is deleted."""
    rw, proto, now = _world(world), world.proto, spec.at
    for _ in range(int(spec.arg or 1)):
        held, dup = world.receive(spec.name, faults=True)
        if held is None:
            return
        run_id, token = str(held.body["run_id"]), int(held.body["version"])
        sent = token  # the message's own token: a retry's is the recovery's
        started = _start(rw, run_id, token, now, sent, spec.name)
        if started == "refused" and spec.kind == "adopter":
            run = world.get(run_id)
            if (
                run is not None
                and run["status"] == w.SCHEDULED
                and ("retry_at" not in run or _adopts_pending(world))
            ):
                world.note(f"{spec.name}: adopts {run_id} v{run['version']} (message v{token})")
                token = int(run["version"])
                started = _start(rw, run_id, token, now, sent, spec.name)
        if started == "lost":
            held.held_by = None
            continue
        if started == "refused":
            world.delete_message(held)
            continue
        done = w.commit(proto, run_id, token + 1)
        with contextlib.suppress(ConditionFailed):
            world.write([done], done.label, now)
        if dup:
            held.held_by = None
        else:
            world.delete_message(held)


def _start(world: ReadsWorld, run_id: str, token: int, now: int, sent: int, owner: str) -> str:
    world.started_by[run_id] = sent
    op = wr.start_leased(world.proto, run_id, token, now, owner)
    try:
        return "lost" if world.write([op], op.label, now) == LOST else "started"
    except ConditionFailed:
        return "refused"
    finally:
        world.started_by.pop(run_id, None)


def register_programs() -> None:
    """The extension's actor kinds, in the base model's table (the sets name them by kind)."""
    PROGRAMS.setdefault("long", long)
    PROGRAMS.setdefault("sweeper", sweeper)
    PROGRAMS.setdefault("tick_ec", tick_ec)
    PROGRAMS.setdefault("adopter", adopter)
    PROGRAMS.setdefault("plain", adopter)
    PROGRAMS.setdefault("sweeper_ec", sweeper)
