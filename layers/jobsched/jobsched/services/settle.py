"""Settling the occurrences that came due without a claim: run them or record them, never drop them.

Two actors need this, with the same rule and the same writes:

- the miss detector, for a job the trigger fell behind on (an outage): occurrences older than the
  grace meet the job's misfire policy, younger ones run as late runs;
- the registrar, for a job whose timing changes, or that is paused, invalidated or deleted while
  it is behind: the old timing's occurrences that came due before the change are settled first,
  so the switch never skips one silently.

Each chunk is one transaction: the state moved past the chunk (conditional on its version and its
next occurrence) and every record created once (``attribute_not_exists``). Chunks are sized by
bytes as well as by count against DynamoDB's transaction limits, so a large payload never makes
a chunk too big to write, however long the outage was.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from jobsched.core.clock import dt_to_ms, ms_to_dt
from jobsched.core.config import SchedulerConfig
from jobsched.core.errors import ConditionFailed
from jobsched.core.job import Misfire
from jobsched.core.limits import (
    DYNAMODB_MAX_TRANSACTION_BYTES,
    DYNAMODB_MAX_TRANSACTION_ITEMS,
    SAFETY_BYTES,
    chunks_by_size,
    item_size,
)
from jobsched.core.policies import MisfireFate, plan_misfire
from jobsched.core.run import RunKind, RunStatus, run_id_for
from jobsched.core.schedule import Schedule
from jobsched.core.transitions import new_run_item, runs_claimed, settle_ops
from jobsched.core.writes import Item
from jobsched.ports import Store, Telemetry

# Occurrences settled per job per pass: a per-second job down for a day is 86,400; the rest are
# settled by the next pass, from where this one left the job.
MAX_PER_PASS = 2_000
# A chunk's records, with room for the state item's update in the same transaction.
CHUNK_RECORDS = DYNAMODB_MAX_TRANSACTION_ITEMS - 1
STATE_ITEM_ALLOWANCE = 16 * 1024
CHUNK_BYTES = DYNAMODB_MAX_TRANSACTION_BYTES - SAFETY_BYTES - STATE_ITEM_ALLOWANCE
WRITE_TRIES = 3


@dataclass
class Settled:
    records: list[Item] = field(default_factory=list)  # written, oldest first
    to_dispatch: list[Item] = field(default_factory=list)
    complete: bool = False  # every occurrence up to the bound is written (and the switch applied)
    lost_race: bool = False  # the state changed under us: the caller reads it again
    switched: bool = False  # the request's switch was written with the last chunk
    state: Item = field(default_factory=dict)  # the state as our writes left it

    @property
    def missed(self) -> list[Item]:
        return [run for run in self.records if run["status"] == RunStatus.MISSED.value]


@dataclass(frozen=True)
class SettleRequest:
    """What to settle: the state's occurrences from its ``next_run_at`` up to ``late_until``.

    Older than ``overdue_before``: the misfire policy decides (or all missed with ``reason``);
    from ``overdue_before`` on: late runs (or missed with ``reason``). ``snapshot``/``def_hash``:
    the definition the runs carry. ``switch``: the state change applied with the last chunk."""

    schedule: Schedule
    misfire: Misfire
    snapshot: Item | None
    def_hash: str
    overdue_before: int
    late_until: int
    reason: str | None = None
    degraded: bool = False
    switch: tuple[Item, tuple[str, ...]] | None = None
    # ``max_runs``: the runs this settle makes count towards it, and the job finishes with the
    # last one (the detector passes the job's limit; None: not counted).
    max_runs: int | None = None


class Settler:
    def __init__(self, store: Store, telemetry: Telemetry, cfg: SchedulerConfig) -> None:
        self._store = store
        self._telemetry = telemetry
        self._cfg = cfg

    def settle(
        self, state: Item, request: SettleRequest, now: int, budget_left: Callable[[int], bool]
    ) -> Settled:
        """Settle in chunks, oldest first. ``budget_left(records written so far)`` is asked before
        every chunk but the first: a caller out of budget leaves the rest to its next run."""
        done = Settled(state=dict(state))
        instants, truncated = _occurrences(request.schedule, int(state["next_run_at"]), request.late_until)
        if not instants:
            done.complete = True  # nothing came due: the caller applies any switch on its own
            return done
        records = self._records(state, request, instants, truncated, now)
        limited = False
        if request.max_runs is not None and request.max_runs > runs_claimed(state):
            records, limited = _up_to_limit(records, request.max_runs - runs_claimed(state))
            truncated = truncated and not limited
        catchups = int(state.get("catchups", 0))
        chunks = chunks_by_size(records, item_size, CHUNK_RECORDS, CHUNK_BYTES)
        for index, chunk in enumerate(chunks):
            if index and not budget_left(len(done.records)):
                return done
            last_chunk = index == len(chunks) - 1 and not truncated
            following = request.schedule.next_after(ms_to_dt(chunk[-1]["scheduled_at"]))
            resume_at = dt_to_ms(following) if following is not None else None
            if limited and last_chunk:
                resume_at = None  # max_runs reached with this chunk's last run: finished
            catchups += sum(1 for run in chunk if run["kind"] == RunKind.CATCHUP.value)
            switch = request.switch if last_chunk else None
            span = (chunk[0]["scheduled_at"], chunk[-1]["scheduled_at"])
            base = runs_claimed(done.state) if request.max_runs is not None else None
            written = self._write_chunk(done.state, chunk, span, resume_at, catchups, now, switch, base)
            if written is None:
                done.lost_race = True
                return done
            done.state = _after(done.state, chunk, resume_at, catchups, switch, written)
            if base is not None:
                done.state["runs_claimed"] = base + _pending(written)
            done.switched = switch is not None
            done.records += written
            done.to_dispatch += [
                {**run, "definition": request.snapshot}  # the message carries the definition
                for run in written
                if run["status"] == RunStatus.PENDING.value
            ]
            self._report(written)
        done.complete = not truncated
        return done

    def records_for(
        self, state: Item, request: SettleRequest, instants: list[int], now: int, epoch: int | None = None
    ) -> list[Item]:
        """The records of ``instants`` under the request's rule, unwritten: for a writer that
        settles occurrences behind the job's place (the registrar's late record, ``redate_ops``;
        ``epoch``: at their keys in that epoch, the successor claim's redate, HC4)."""
        return self._records(state, request, instants, False, now, epoch)

    def _records(
        self,
        state: Item,
        request: SettleRequest,
        instants: list[int],
        truncated: bool,
        now: int,
        epoch: int | None = None,
    ) -> list[Item]:
        missed = [t for t in instants if t < request.overdue_before]
        late = [t for t in instants if t >= request.overdue_before]
        fates: list[MisfireFate]
        if request.reason is not None:
            fates = [MisfireFate(t, RunStatus.MISSED, request.reason) for t in instants]
        else:
            fates = plan_misfire(
                request.misfire.policy,
                missed,
                request.misfire.max_catchup,
                int(state.get("catchups", 0)),
                request.degraded,
                more_follow=truncated and not late,
            )
            fates += [MisfireFate(t, RunStatus.PENDING, "late within grace") for t in late]
        late_set = set(late) if request.reason is None else set()
        job_id = str(state["job_id"])
        records = []
        for fate in fates:
            kind = RunKind.SCHEDULED if fate.scheduled_at in late_set else RunKind.CATCHUP
            records.append(
                new_run_item(
                    job_id,
                    run_id_for(job_id, fate.scheduled_at, epoch),
                    fate.scheduled_at,
                    request.snapshot if fate.status is RunStatus.PENDING else None,
                    request.def_hash,
                    kind,
                    now,
                    self._cfg,
                    status=fate.status,
                    reason=fate.reason,
                )
            )
            if epoch is not None:
                records[-1]["epoch"] = epoch
        return records

    def _write_chunk(
        self,
        state: Item,
        chunk: list[Item],
        span: tuple[int, int],
        resume_at: int | None,
        catchups: int,
        now: int,
        switch: tuple[Item, tuple[str, ...]] | None,
        base_count: int | None = None,
    ) -> list[Item] | None:
        """Write one chunk, the occurrences ``span`` covers. A record that exists already (a
        backfill made it, and joined the chain then) is left as it is and dropped from the
        chunk, so no occurrence gets two. Any other lost condition is the state moving: None,
        and the caller reads it again. Returns the records written."""
        first, last = span
        records = list(chunk)
        for _ in range(WRITE_TRIES + len(chunk)):
            counted = None if base_count is None else base_count + _pending(records)
            ops = settle_ops(state, records, first, last, resume_at, catchups, now, switch, counted)
            try:
                self._store.write(ops)
            except ConditionFailed as lost:
                puts = ops[1 : 1 + len(records)]
                existing = next((run for run, op in zip(records, puts, strict=True) if lost.op is op), None)
                if existing is None:
                    self._telemetry.event("settle.lost", str(state["job_id"]), failed=lost.label)
                    return None
                records.remove(existing)
                continue
            return records
        return None

    def _report(self, written: list[Item]) -> None:
        for run in written:
            if run["status"] == RunStatus.MISSED.value:
                self._telemetry.event(
                    "run.missed", run["run_id"], scheduled_at=run["scheduled_at"], reason=run.get("reason")
                )
            elif run["kind"] == RunKind.CATCHUP.value:
                self._telemetry.event("run.catchup", run["run_id"], scheduled_at=run["scheduled_at"])
            else:
                self._telemetry.event("run.late", run["run_id"], scheduled_at=run["scheduled_at"])


def _pending(records: list[Item]) -> int:
    return sum(1 for run in records if run["status"] == RunStatus.PENDING.value)


def _up_to_limit(records: list[Item], left: int) -> tuple[list[Item], bool]:
    """The records up to the ``left``-th run that will run (``max_runs``), and whether the limit
    is reached there (the occurrences after it get no record: the job is finished before them)."""
    runs = 0
    for index, run in enumerate(records):
        if run["status"] == RunStatus.PENDING.value:
            runs += 1
            if runs >= left:
                return records[: index + 1], True
    return records, False


def _occurrences(schedule: Schedule, first: int, until: int) -> tuple[list[int], bool]:
    """The occurrences from ``first`` (the state's next one) up to ``until``, at most
    ``MAX_PER_PASS``; and whether more follow within the bound."""
    instants: list[int] = []
    cursor: int | None = first
    while cursor is not None and cursor <= until:
        if len(instants) >= MAX_PER_PASS:
            return instants, True
        instants.append(cursor)
        following = schedule.next_after(ms_to_dt(cursor))
        cursor = dt_to_ms(following) if following is not None else None
    return instants, False


def _after(
    state: Item,
    chunk: list[Item],
    resume_at: int | None,
    catchups: int,
    switch: tuple[Item, tuple[str, ...]] | None,
    written: list[Item],
) -> dict[str, Any]:
    """The state as one chunk's write left it (so the next chunk needs no read)."""
    after = {**state, "version": state["version"] + 1, "catchups": catchups}
    runs = [run for run in written if run["status"] == RunStatus.PENDING.value]
    if runs:
        after["latest_run_id"] = runs[-1]["run_id"]
    after["last_scheduled_at"] = max(chunk[-1]["scheduled_at"], int(state.get("last_scheduled_at") or 0))
    if resume_at is None:
        after["status"] = "finished"
        after.pop("next_run_at", None)
        after.pop("sched_shard", None)
    else:
        after["next_run_at"] = resume_at
    if switch is not None:
        sets, remove = switch
        for name in remove:
            after.pop(name, None)
        after.update(sets)
    return after
