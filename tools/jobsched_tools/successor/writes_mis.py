"""Shape f's writes for misfire policies, ``max_runs`` and one-time jobs, and backfill, in the
model's write language (``writes.py``): each a pure function returning one atomic write, every
condition a named part that ``Protocol.dropped`` removes.

- **The settle of an overdue head under a misfire policy** (``settle_chunk``): the head N and the
  occurrences after it up to now, at most ``chunk`` of them per transaction (the product's
  ``CHUNK_RECORDS``), get their fates from the product's own ``plan_misfire`` fed from the head
  (its ``catchups``): overdue ones (older than now - grace) by the policy, younger ones as late
  runs. N is closed ``missed`` or kept as a run; the records after it are put at their keys of
  N's epoch; the chunk ends with the next head at the first occurrence after the chunk (carrying
  the outage's ``catchups``), or with the end marker. The first put lands on N's successor key:
  the race with a late claim.
- **The end of a life** (``max_runs``, a one-time job's ``until``): a head carries ``runs_before``
  (scheduled runs of the life before it); a head whose run would be the last has as successor
  the end marker's key ``j@end:<its instant>#<epoch>``, so its claim puts the end marker instead
  of a head and no claim can follow. A settle that leaves the life going past a missed last head
  fills that end key with a closure marker (the rule found here: without it a late claim's end
  marker and the settle's next head both land).
- **Backfill** (``backfill``): an ad-hoc run of a past instant. It reruns the instant's ``missed``
  record in place, or puts a record at the instant's backfill key, and relinks the head as any
  ad-hoc run does; it is refused at or after the head (HC11): that instant is not decided yet.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from jobsched.core.job import MisfirePolicy
from jobsched.core.policies import plan_misfire
from jobsched.core.run import RunStatus, run_id_for
from jobsched.core.writes import RUNS, Check, Item, Put, Update, WriteOp, eq, not_exists

from jobsched_tools.successor import writes as w

BACKFILL = "backfill"  # a run's kind: a person's run of a past instant
LIVE = (w.SCHEDULED, w.RUNNING, w.SUCCEEDED, w.MISSED)  # a record that decides its instant


@dataclass(frozen=True)
class MisProtocol(w.Protocol):
    """Shape f with a misfire policy, a life's end and backfill; each rule has a switch."""

    policy: MisfirePolicy = MisfirePolicy.SKIP
    max_catchup: int = 1
    chunk: int = 2  # occurrences one settle transaction decides (the product's CHUNK_RECORDS)
    max_runs: int | None = None
    until: int | None = None  # the last occurrence (a one-time job, a schedule's end)
    # The rules, each removable (the mutants):
    carry_catchups: bool = True  # a chunk's head carries the outage's catch-up count
    more_follow: bool = True  # run_once runs nothing of a chunk that more chunks follow
    resume_after_chunk: bool = True  # a chunk's head is the first occurrence after the chunk
    close_end_key: bool = True  # a settle missing a last head fills its end key
    refuse_at_head: bool = True  # a backfill at or after the head is refused (HC11)
    change_settles_first: bool = True  # a change meeting a due head settles it under the policy


def end_key(at: int, epoch: int) -> str:
    return f"{w.JOB}@end:{at}#{epoch}"


def is_end_key(key: str) -> bool:
    return key.startswith(f"{w.JOB}@end:")


def backfill_key(at: int) -> str:
    """A backfilled instant no record holds: no timing's epoch (0), one key per instant."""
    return f"{run_id_for(w.JOB, at)}#0"


def last_of_life(proto: MisProtocol, next_at: int, runs_before: int) -> bool:
    """Would this occurrence's run be its life's last?"""
    if proto.max_runs is not None and runs_before + 1 >= proto.max_runs:
        return True
    return proto.until is not None and next_at > proto.until


def shape(proto: MisProtocol, item: Item, runs_before: int) -> Item:
    """A head (or a record) of a life: its count, and the end marker's key as its successor when
    its run would be the last."""
    shaped = {**item, "runs_before": runs_before}
    if last_of_life(proto, int(item["next_at"]), runs_before):
        shaped["next_key"] = end_key(int(item["at"]), int(item["epoch"]))
    return shaped


def register(proto: MisProtocol, timing: w.Timing, now: int) -> list[WriteOp]:
    ops = w.register(proto, timing, now)
    head = ops[1]
    assert isinstance(head, Put)
    return [ops[0], replace(head, item=shape(proto, head.item, 0))]


def end_marker(head: Mapping[str, Any], now: int, by: str, runs: int) -> Item:
    return {
        "job_id": w.JOB,
        "run_id": head["next_key"],
        "kind": w.END,
        "status": w.END,
        "at": head["at"],
        "epoch": head["epoch"],
        "after_run_id": head["run_id"],
        "runs": runs,
        "claimed_at": now,
        "claimed_by": by,
    }


def claim(proto: MisProtocol, head: Mapping[str, Any], now: int, claimer: str) -> Put:
    """The claim: the successor head, or, for the life's last run, the end marker (one put)."""
    runs = int(head.get("runs_before", 0)) + 1
    if is_end_key(str(head["next_key"])):
        why = "end.successor_absent: a racing claimer, a settle, a change's closure marker, a retry"
        item = end_marker(head, now, claimer, runs)
        return Put(RUNS, item, proto.parts(not_exists("run_id", why)), f"claim {head['run_id']} (end)")
    put = w.claim(proto, head, now, claimer)
    return replace(put, item=shape(proto, put.item, runs))


@dataclass
class Chunk:
    ops: list[WriteOp]
    runs: list[Item]  # the runs it made, to send once it lands (their item as written)
    next_head: str | None  # the head it leaves (None: the life ended)
    more: bool  # occurrences due beyond it: the settler writes the next chunk


def _record(
    proto: MisProtocol, head: Mapping[str, Any], at: int, status: str, fate: str, now: int, runs_before: int
) -> Item:
    timing, epoch = w.Timing.of(head["timing"]), int(head["epoch"])
    decided = "run" if status == w.SCHEDULED else "missed"
    item = w.head_item(
        proto, at, epoch, timing, None, at, claimed_at=now, fate=fate, settled_at=now, decided=decided
    )
    item = shape(proto, item, runs_before)
    item["status"] = status
    if status == w.SCHEDULED:
        item["check_at"] = now + w.DISPATCH_LEASE_MS  # its message starts it within the lease
    else:
        item.pop("check_at")
        item.pop("shard")
    return item


@dataclass
class _Plan:
    kept: list[tuple[int, bool, str, int]]  # (instant, runs, fate, runs of the life before it)
    ended: bool  # the life's last run (or occurrence) is in the chunk
    more: bool  # occurrences due beyond the chunk
    resume: int  # the occurrence after the chunk
    catchups: int  # the outage's catch-up runs, this chunk's included
    runs_before: int  # the life's runs after the chunk


def _plan(proto: MisProtocol, head: Mapping[str, Any], now: int) -> _Plan:
    """The chunk's fates: the product's ``plan_misfire`` fed from the head (its ``catchups``)."""
    timing = w.Timing.of(head["timing"])
    instants = [int(head["at"])]
    at = int(head["next_at"])

    def due(t: int) -> bool:
        return t <= now and (proto.until is None or t <= proto.until)

    while len(instants) < proto.chunk and due(at):
        instants.append(at)
        at = timing.after(at)
    more = due(at)
    overdue = [t for t in instants if t < now - w.GRACE_MS]
    late = [t for t in instants if t >= now - w.GRACE_MS]
    catchups = int(head.get("catchups", 0))
    follow = more and not late and proto.more_follow
    fates = plan_misfire(proto.policy, overdue, proto.max_catchup, catchups, False, follow)
    decided = [(f.scheduled_at, f.status is RunStatus.PENDING, f.reason) for f in fates]
    decided += [(t, True, "late within grace") for t in late]
    plan = _Plan([], False, more, at, catchups, int(head.get("runs_before", 0)))
    for t, runs, fate in decided:
        plan.kept.append((t, runs, fate, plan.runs_before))
        if runs:
            plan.catchups += 1 if t in overdue else 0
            plan.runs_before += 1
            if proto.max_runs is not None and plan.runs_before >= proto.max_runs:
                plan.ended = True
                break
    if not plan.ended and proto.until is not None and at > proto.until:
        plan.ended = True  # no occurrence after the chunk's last: the life ends with it
    plan.more = more and not plan.ended
    return plan


def settle_chunk(proto: MisProtocol, head: Mapping[str, Any], now: int) -> Chunk:
    """One chunk of an overdue head's settle (see the module's docstring)."""
    epoch = int(head["epoch"])
    plan = _plan(proto, head, now)
    kept, ended, more = plan.kept, plan.ended, plan.more
    decide = _head_op(proto, head, kept[0], now)
    ops: list[WriteOp] = [decide]
    made: list[Item] = []
    n_runs = kept[0][1]
    chain = str(head["run_id"]) if n_runs else head.get("after_run_id")
    if n_runs:
        made.append({**head, **decide.set})
    first_why = "catchup.successor_absent: a late claim landed first"
    successor = str(head["next_key"])  # the key the first put lands on
    # N's run would have been its life's last, but N is missed: the life goes on. Its end key is
    # filled, or a late claim of N could put the end marker beside the next head.
    if is_end_key(successor) and not (ended and len(kept) == 1) and proto.close_end_key:
        marker = {"job_id": w.JOB, "run_id": successor, "status": w.CLOSED, "at": head["at"]}
        marker.update({"closes_epoch": epoch, "closed_by": "settle"})
        ops.append(Put(RUNS, marker, proto.parts(not_exists("run_id", first_why)), "catchup closes end"))
        first_why = ""
    for t, runs, fate, before in kept[1:]:
        item = _record(proto, head, t, w.SCHEDULED if runs else w.MISSED, fate, now, before)
        if runs:
            item["after_run_id"] = chain
            chain = str(item["run_id"])
            made.append(item)
        why = first_why or "catchup.record_absent: a record"
        first_why = ""
        ops.append(Put(RUNS, item, proto.parts(not_exists("run_id", why)), f"catchup record {t}"))
    next_head = _tail(proto, head, plan, ops, chain, first_why, now)
    return Chunk(ops, made, next_head, more)


def _tail(
    proto: MisProtocol,
    head: Mapping[str, Any],
    plan: _Plan,
    ops: list[WriteOp],
    chain: str | None,
    first_why: str,
    now: int,
) -> str | None:
    """The chunk's end: the end marker at the last run's end key, or the next head (returned)."""
    timing, epoch = w.Timing.of(head["timing"]), int(head["epoch"])
    kept, last = plan.kept, plan.kept[-1]
    why = first_why or "catchup.next_head_absent: a record"
    if plan.ended:
        last_item = ops[-1].item if isinstance(ops[-1], Put) and len(kept) > 1 else dict(head)
        marker = end_marker(
            {**last_item, "next_key": end_key(last[0], epoch)}, now, "settle", plan.runs_before
        )
        marker["after_run_id"] = chain
        ops.append(Put(RUNS, marker, proto.parts(not_exists("run_id", why)), "catchup end marker"))
        if len(kept) > 1:
            _point(ops, len(ops) - 2, str(marker["run_id"]))
        return None
    resume = plan.resume if proto.resume_after_chunk or not plan.more else timing.after(now)
    extra = {"claimed_at": now, "catchups": plan.catchups if proto.carry_catchups else 0}
    new = shape(proto, w.head_item(proto, resume, epoch, timing, chain, last[0], **extra), plan.runs_before)
    ops.append(Put(RUNS, new, proto.parts(not_exists("run_id", why)), "catchup next head"))
    if len(kept) > 1:
        _point(ops, len(ops) - 2, str(new["run_id"]))
    return str(new["run_id"])


def _head_op(
    proto: MisProtocol, head: Mapping[str, Any], fate: tuple[int, bool, str, int], now: int
) -> Update:
    """N decided: kept as a run (a new token, its message sent once the chunk lands) or missed."""
    runs = fate[1]
    n_set: Item = {"version": int(head["version"]) + 1, "fate": fate[2], "settled_at": now}
    n_set["decided"] = "run" if runs else "missed"
    if runs:
        n_set["check_at"] = now + w.DISPATCH_LEASE_MS
    else:
        n_set["status"] = w.MISSED
    return Update(
        RUNS,
        w.run_key(str(head["run_id"])),
        proto.parts(
            eq("status", w.SCHEDULED, "catchup.head_scheduled: the head was claimed late or closed"),
            eq("version", head["version"], "catchup.head_version: a relink or a redispatch since the read"),
        ),
        f"catchup {head['run_id']}",
        set=n_set,
        remove=() if runs else ("check_at", "shard"),
    )


def _point(ops: list[WriteOp], index: int, key: str) -> None:
    """The chunk's last record's successor is the item that ends the chunk (a mutant's head may
    lie elsewhere than its timing's next occurrence)."""
    op = ops[index]
    if isinstance(op, Put):
        ops[index] = replace(op, item={**op.item, "next_key": key})


def backfill(
    proto: MisProtocol, head: Mapping[str, Any], runs: Mapping[str, Mapping[str, Any]], at: int, now: int
) -> tuple[Item, list[WriteOp]]:
    """A person's run of the past instant ``at``. Raises ``Refused`` (nothing written) at or after
    the head (HC11: not decided yet) or when the instant has a record that ran or runs."""
    if proto.refuse_at_head and at >= int(head["at"]):
        raise Refused(f"{at} is not settled yet: the detector settles it; backfill it then")
    if at > now:
        raise Refused(f"{at} is in the future: backfill covers past instants")
    records = [r for r in runs.values() if r.get("at") == at and r.get("kind") in (w.TIMED, BACKFILL)]
    live = [r for r in records if r["status"] in LIVE]
    if any(r["status"] != w.MISSED for r in live):
        raise Refused(f"{at} has a record that ran or runs")
    relink = Update(
        RUNS,
        w.run_key(str(head["run_id"])),
        proto.parts(
            eq("status", w.SCHEDULED, "backfill.head_scheduled: the head was closed or settled"),
            eq("version", head["version"], "backfill.head_version: a relink or a settle since the read"),
        ),
        f"adhoc relinks {head['run_id']}",  # the ad-hoc relink's checks apply (check_adhoc)
        set={"version": int(head["version"]) + 1},
    )
    lease = {"shard": w.SHARD, "check_at": now + w.DISPATCH_LEASE_MS, "claimed_at": now}
    if live:
        missed = live[0]
        run: Item = {**missed, "status": w.SCHEDULED, "kind": BACKFILL, "version": int(missed["version"]) + 1}
        run.update({**lease, "after_run_id": head.get("after_run_id")})
        op: WriteOp = Update(
            RUNS,
            w.run_key(str(missed["run_id"])),
            proto.parts(
                eq("status", w.MISSED, "backfill.record_missed: a racing backfill reran it"),
                eq("version", missed["version"], "backfill.record_version: a racing backfill since the read"),
            ),
            f"backfill reruns {missed['run_id']}",
            set={k: run[k] for k in ("status", "kind", "version", "after_run_id", *lease)},
        )
    else:
        run = {"job_id": w.JOB, "run_id": backfill_key(at), "kind": BACKFILL, "status": w.SCHEDULED, "at": at}
        run.update({"version": 1, "after_run_id": head.get("after_run_id"), **lease})
        why = "backfill.run_absent: a racing backfill of the instant"
        op = Put(RUNS, run, proto.parts(not_exists("run_id", why)), f"backfill {at}")
    relink = replace(relink, set={**relink.set, "after_run_id": run["run_id"]})
    check = proto.parts(
        not_exists("run_id", "backfill.successor_absent: a claim landed (relink the new head)")
    )
    ops: list[WriteOp] = [op, relink]
    if check:
        ops.append(Check(RUNS, w.run_key(str(head["next_key"])), check, "backfill successor absent"))
    return run, ops


class Refused(Exception):
    """A backfill refused with a clear reason; nothing is written."""


MIS_PARTS = (
    "end.successor_absent",
    "catchup.head_scheduled",
    "catchup.head_version",
    "catchup.successor_absent",
    "catchup.record_absent",
    "catchup.next_head_absent",
    "backfill.head_scheduled",
    "backfill.head_version",
    "backfill.record_missed",
    "backfill.record_version",
    "backfill.run_absent",
    "backfill.successor_absent",
)
