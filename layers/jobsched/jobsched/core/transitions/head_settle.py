"""The settle of an overdue head (shape f; docs/proposals/successor-claim-build.md §1 row "settle
chunk", §2 "misfire and catch-up", HC5, HC9; model: ``writes.settle``, ``writes_mis.settle_chunk``).

The miss detector meets a head N in the ``due`` index that no claim took within its grace (its
successor key holds nothing: HC7's judgement, ``head_recover.judge_due_entry``). It decides N and
the occurrences of N's epoch after it up to now in chunks, each **one transaction with no state
item**:

- N decided: ``missed`` (its ``due`` entry removed), or kept as a run (a catch-up, or a late run
  within grace) with a new token and a dispatch lease (``settle.head_scheduled``,
  ``settle.head_version``);
- a record at each later occurrence of the chunk, ``missed`` or a run, as the job's misfire policy
  decides (the product's ``plan_misfire``, fed from the head's ``catchups``); the first put lands
  on N's successor key (``settle.successor_absent``: the race with a late claim of N, HC9), the
  others ``settle.missed_absent``;
- the chunk ends with the next head, at the occurrence after the chunk (the first after now when
  it is the last chunk; an overdue head when more follow, which the next chunk settles), linked
  behind the chain's end (N's ``after_run_id``, or the chunk's last run), ``through`` the chunk's
  last occurrence, carrying the outage's ``catchups`` (``settle.next_head_absent``, or
  ``settle.successor_absent`` when it is N's successor) — or with the end marker when the life
  ends in the chunk (``max_runs`` reached by a run of it, no occurrence left: HC5).

Every chunk leaves a head or writes the end marker (H1), so a settler that dies between chunks
leaves an overdue head for the next pass (level-triggered). When N's successor key is its life's
end marker (N's run would have been the last) and N is missed, the life goes on: that end key is
filled with a closure marker in the same chunk, or a late claim of N could put an end marker there
beside the chunk's next head (the model's rule ``close_end_key``).

Pure, and called by no service yet (build step S8 wires it behind a migration switch).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from jobsched.core.config import SchedulerConfig
from jobsched.core.head import HeadJob, counts_runs, ends_life, head_check_delay_ms, head_item, next_key
from jobsched.core.job import Misfire
from jobsched.core.limits import DYNAMODB_MAX_TRANSACTION_ITEMS
from jobsched.core.policies import plan_misfire
from jobsched.core.run import RunKind, RunStatus, end_run_id, parse_run_id, run_id_for
from jobsched.core.timing import effective_grace_ms, start_at_ms
from jobsched.core.transitions.conditions import (
    _dispatch_lease,
    _head_scheduled,
    _head_version,
    _missed_absent,
    _next_head_absent,
    _settle_successor_absent,
    retention_expiry,
)
from jobsched.core.writes import RUNS, Cond, Item, Put, Update, WriteOp

# Occurrences one chunk decides, N included (§6 q2). A chunk writes N, at most one closure
# marker, a record per later occurrence and the item that ends it: occurrences + 2 operations.
# 96 leaves room for 2 more, and matches what a change's transaction beside a chunk would need
# (state, closed head, marker, new head: 100 - 4). Items are well under 2 KB each, so the 4 MB
# limit is never near.
HEAD_SETTLE_CHUNK = DYNAMODB_MAX_TRANSACTION_ITEMS - 4


@dataclass(frozen=True)
class _Fate:
    at: int
    runs: bool
    reason: str
    overdue: bool
    runs_before: int  # the life's counted runs before this occurrence


@dataclass
class HeadChunk:
    """One chunk of an overdue head's settle, unwritten."""

    ops: list[WriteOp]
    # The runs it makes (N kept, and records that run), as written: the settler sends each
    # (``claimed_run_message``) once the chunk has landed, never before.
    to_dispatch: list[Item] = field(default_factory=list)
    # Every occurrence it decides, N included, as written (telemetry: missed, catch-up, late).
    decided: list[Item] = field(default_factory=list)
    next_head: Item | None = None  # the head it leaves (None: it ended the life)
    end_marker: Item | None = None
    more: bool = False  # the next head is overdue too: the settler settles it next


def settle_head_ops(
    head: Mapping[str, Any],
    now: int,
    cfg: SchedulerConfig,
    *,
    degraded: bool = False,
    chunk: int = HEAD_SETTLE_CHUNK,
    reason: str | None = None,
    until: int | None = None,
) -> HeadChunk:
    """The first chunk of the settle of ``head`` (as read; the chunk is conditional on its status
    and version) at ``now``. ``degraded``: the detector's overload flag (``run_all`` coalesced to
    ``run_once``, as today). The next chunk, if ``more``, settles the head this one leaves.

    The registrar's settle before a change (core/head_change.py ``SettleFirst``, its
    ``Settlement``): ``until``, the change's time, bounds the occurrences decided (None: ``now``,
    the detector's); ``reason`` records every one of them ``missed`` with it (a pause, a delete,
    an invalid item: today's ``SettleRequest.reason``) instead of the misfire policy's fates."""
    if not 1 <= chunk <= HEAD_SETTLE_CHUNK:
        raise ValueError(f"a chunk decides 1 to {HEAD_SETTLE_CHUNK} occurrences, not {chunk}")
    job = HeadJob.of_head(head)
    epoch = int(head["epoch"])
    horizon = now if until is None else until
    fates, after, ended, catchups, runs_before = _plan(job, head, now, cfg, degraded, chunk, reason, horizon)
    more = after is not None and after <= horizon and not ended
    result = HeadChunk(ops=[], more=more)
    n_fate = fates[0]
    decide_n = _decide_head(head, n_fate, now, cfg)
    result.ops.append(decide_n)
    n_after = {**head, **decide_n.set}
    for name in decide_n.remove:
        n_after.pop(name, None)
    result.decided.append(n_after)
    chain = str(head["run_id"]) if n_fate.runs else head.get("after_run_id")
    if n_fate.runs:
        result.to_dispatch.append(n_after)
    first_part: Cond | None = _settle_successor_absent()  # the first put lands on N's successor key
    if ends_life(head) and not (ended and len(fates) == 1):
        # N's run would have been the life's last, but N is missed: the life goes on past N.
        result.ops.append(_closed_end_key(head, now, cfg, first_part))
        first_part = None
    records: list[tuple[Item, Cond]] = []
    for previous, fate in pairwise(fates):
        item = _record(job, fate, epoch, previous.at, chain, now, cfg)
        if fate.runs:
            chain = str(item["run_id"])
            result.to_dispatch.append(item)
        records.append((item, first_part or _missed_absent()))
        result.decided.append(item)
        first_part = None
    last = fates[-1].at
    tail_part = first_part or _next_head_absent()
    tail: Item
    if ended:
        tail = result.end_marker = _end_marker(head, fates[-1], chain, runs_before, now, cfg)
    else:
        assert after is not None  # not ended: an occurrence follows the chunk
        tail = result.next_head = head_item(
            job,
            after,
            epoch,
            through=last,
            shard_count=cfg.shard_count,
            check_delay_ms=head_check_delay_ms(cfg),
            runs_before=runs_before,
            after_run_id=chain,
            catchups=catchups,
            claimed_at=now,
        )
    if not records and first_part is not None and tail["run_id"] != next_key(head):
        # The chunk's end would not fill N's successor key, and N would read as a head again.
        raise ValueError(f"{head['run_id']}: next_key {next_key(head)} is not {tail['run_id']}")
    _link_keys([item for item, _ in records], str(tail["run_id"]))
    result.ops += [Put(RUNS, item, (part,), f"settle record {item['run_id']}") for item, part in records]
    result.ops.append(Put(RUNS, tail, (tail_part,), "settle end marker" if ended else "settle next head"))
    return result


def _plan(
    job: HeadJob,
    head: Mapping[str, Any],
    now: int,
    cfg: SchedulerConfig,
    degraded: bool,
    chunk: int,
    reason: str | None,
    horizon: int,
) -> tuple[list[_Fate], int | None, bool, int, int]:
    """The chunk's fates, the occurrence after it, whether the life ends in it, and the outage's
    catch-ups and the life's counted runs after it. Occurrences older than now - grace meet the
    misfire policy; younger ones run late, as today's settle (services/settle.py) decides; with a
    ``reason``, every one is ``missed`` with it (a catch-up's kind, as today's settle records
    them). Occurrences after ``horizon`` are left to the head the chunk leaves."""
    instants = [int(head["scheduled_at"])]
    after = job.next_after(instants[0])
    while len(instants) < chunk and after is not None and after <= horizon:
        instants.append(after)
        after = job.next_after(after)
    more = after is not None and after <= horizon
    misfire = Misfire.model_validate(dict(job.misfire))
    overdue_before = now - effective_grace_ms(misfire.grace_seconds, cfg)
    overdue = [t for t in instants if t < overdue_before]
    late = [t for t in instants if t >= overdue_before]
    catchups = int(head.get("catchups") or 0)
    decided: list[tuple[int, bool, str, bool]]
    if reason is not None:
        decided = [(t, False, reason, True) for t in instants]
    else:
        planned = plan_misfire(
            misfire.policy, overdue, misfire.max_catchup, catchups, degraded, more_follow=more and not late
        )
        decided = [(f.scheduled_at, f.status is RunStatus.PENDING, f.reason, True) for f in planned]
        decided += [(t, True, "late within grace", False) for t in late]
    counted = counts_runs(job)
    runs_before = int(head.get("runs_before") or 0)
    fates: list[_Fate] = []
    ended = False
    for at, runs, reason, is_overdue in decided:
        fates.append(_Fate(at, runs, reason, is_overdue, runs_before))
        if not runs:
            continue
        catchups += 1 if is_overdue else 0
        if counted:
            runs_before += 1
            if job.max_runs is not None and runs_before >= job.max_runs:
                ended = True  # max_runs reached by this run: the occurrences after it are not due
                break
    if not ended and after is None:
        ended = True  # no occurrence after the chunk's last: the life ends with it
    next_at = None if ended else after
    return fates, next_at, ended, catchups, runs_before


def _kind(fate: _Fate) -> RunKind:
    return RunKind.CATCHUP if fate.overdue else RunKind.SCHEDULED


def _decide_head(head: Mapping[str, Any], fate: _Fate, now: int, cfg: SchedulerConfig) -> Update:
    """N decided: kept as a run (a new token, its ``due`` entry a dispatch lease ahead) or
    ``missed`` (out of ``due``, history from now). ``head_version`` moves with ``version``."""
    version = int(head["version"]) + 1
    sets: Item = {
        "version": version,
        "head_version": version,
        "kind": _kind(fate).value,
        "reason": fate.reason,
        "settled_at": now,
    }
    remove: tuple[str, ...] = ()
    if fate.runs:
        sets.update(_run_lease(head, now, cfg))
    else:
        sets.update(status=RunStatus.MISSED.value, finished_at=now, expires_at=retention_expiry(now, cfg))
        remove = ("check_at", "lease_shard", "lease_expires_at")
    return Update(
        RUNS,
        {"job_id": head["job_id"], "run_id": head["run_id"]},
        condition=(_head_scheduled("settle"), _head_version("settle", int(head["version"]))),
        label=f"settle head {head['run_id']}",
        set=sets,
        remove=remove,
    )


def _run_lease(run: Mapping[str, Any], now: int, cfg: SchedulerConfig) -> Item:
    """A run the settle makes: its message is sent when the chunk lands, and must start it within
    the dispatch lease, counted from its start (its window, ``jitter_seconds``, is not known here:
    the message's definition carries it; the start then meets a recheck, HC8)."""
    start = start_at_ms(str(run["run_id"]), int(run["scheduled_at"]), None)
    return _dispatch_lease(str(run["run_id"]), max(start, now) + cfg.dispatch_lease_seconds * 1000, cfg)


def _record(
    job: HeadJob,
    fate: _Fate,
    epoch: int,
    previous: int,
    chain: str | None,
    now: int,
    cfg: SchedulerConfig,
) -> Item:
    """A later occurrence's record in N's epoch: a run (``scheduled``, linked behind ``chain``,
    claimed: its successor is written in the same chunk) or ``missed``."""
    item = head_item(
        job,
        fate.at,
        epoch,
        through=previous,
        shard_count=cfg.shard_count,
        check_delay_ms=head_check_delay_ms(cfg),
        runs_before=fate.runs_before,
        after_run_id=chain if fate.runs else None,
        claimed_at=now,
        kind=_kind(fate),
    )
    item.update(reason=fate.reason, settled_at=now)
    if fate.runs:
        item.update(_run_lease(item, now, cfg))
    else:
        item.update(status=RunStatus.MISSED.value, finished_at=now, expires_at=retention_expiry(now, cfg))
        for name in ("check_at", "lease_shard"):
            item.pop(name)
    return item


def _closed_end_key(head: Mapping[str, Any], now: int, cfg: SchedulerConfig, part: Cond | None) -> Put:
    marker: Item = {
        "job_id": head["job_id"],
        "run_id": next_key(head),
        "status": RunStatus.CLOSED.value,
        "version": 1,
        "epoch": int(head["epoch"]),
        "closes_epoch": int(head["epoch"]),
        "closed_by": "settle",
        "expires_at": retention_expiry(now, cfg),
    }
    return Put(RUNS, marker, (part or _settle_successor_absent(),), "settle closes end key")


def _end_marker(
    head: Mapping[str, Any], last: _Fate, chain: str | None, runs: int, now: int, cfg: SchedulerConfig
) -> Item:
    """The end marker a chunk that ends the life writes, at the end key of the life's last
    occurrence (``last``, run or missed), in the claim's shape (``head_claim.end_marker_item``):
    ``last_run_id``/``last_run_at`` that occurrence, ``after_run_id`` the chain's end."""
    epoch, job_id = int(head["epoch"]), str(head["job_id"])
    marker: Item = {
        "job_id": job_id,
        "run_id": end_run_id(job_id, last.at, epoch),
        "status": RunStatus.END.value,
        "version": 1,
        "epoch": epoch,
        "last_run_id": run_id_for(job_id, last.at, epoch),
        "last_run_at": last.at,
        "claimed_by": "settle",
        "claimed_at": now,
        "expires_at": retention_expiry(now, cfg),
    }
    if chain is not None:
        marker["after_run_id"] = chain
    if counts_runs(head):
        marker.update(runs_claimed=runs, max_runs=int(head["max_runs"]))
    return marker


def _link_keys(records: list[Item], tail_key: str) -> None:
    """Each record's successor key is the item written after it in the chunk (the next record, or
    the chunk's end), so a run of the chunk is a claimed run by H2's test whatever its count
    said, and a reader following successor keys meets no gap."""
    if not records:
        return  # N alone: its own successor key is the chunk's end
    keys = [str(record["run_id"]) for record in records[1:]] + [tail_key]
    for record, successor in zip(records, keys, strict=True):
        record["next_key"] = successor
        parts = parse_run_id(successor)
        if parts.kind == "timed" and parts.instant_ms is not None:
            record["next_at"] = parts.instant_ms
        else:
            record.pop("next_at", None)
