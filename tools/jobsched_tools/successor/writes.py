"""Shape f's writes (docs/proposals/fewer-write-units.md, "The successor claim"), as pure functions
in the product's write language (``jobsched.core.writes``): each returns the operations of one
atomic write (one op, or a transaction), every condition a named part.

A part is named by its tag (``claim.successor_absent``); the ``why`` after the tag names the race
it stops. ``Protocol.dropped`` removes parts by tag (the mutants, and the sweep that removes each
part alone); the four mutants of the proposal are switches of their own where they remove more
than a part (a write, or a judgement of the detector's).

Keys. The proposal keys every record of an occurrence by its instant (``run_id_for``), so a
change's new head, a settle's records and a later claim can land on a key an earlier timing left
a record at. ``Protocol.keys = "epoch"`` is the repair the model found (docs, "The model:
results"): a head's key also carries its timing's epoch, the state version of the change that
set the timing, so no record of an older timing lies at a newer timing's key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from jobsched.core.run import manual_run_id, run_id_for
from jobsched.core.writes import (
    RUNS,
    STATE,
    Check,
    Cond,
    Item,
    Put,
    Update,
    WriteOp,
    eq,
    not_exists,
)

JOB = "j"
SHARD = 0
# Statuses: a head and a claimed, unstarted run are "scheduled"; a closure marker is "closed".
SCHEDULED, RUNNING, SUCCEEDED = "scheduled", "running", "succeeded"
MISSED, CANCELLED, CLOSED = "missed", "cancelled", "closed"
END = "end"  # the end marker of a max_runs or one-time job (writes_mis.py): its life's last claim
TIMED, MANUAL = "scheduled", "manual"  # a run's kind
ACTIVE, PAUSED, DELETED = "active", "paused", "deleted"

SECOND = 1_000
DISPATCH_LEASE_MS = 30 * SECOND  # a claimed run's message must start it within this
RUN_LEASE_MS = 30 * SECOND  # a running run heartbeats within this (the model's runs do not)
SKEW_MS = 5 * SECOND  # the skew allowance
GRACE_MS = 60 * SECOND  # a head unclaimed this long past its instant is settled (misfire: skip)
LOOKAHEAD_MS = 90 * SECOND  # the trigger claims occurrences up to now + this
LOOKBACK_MS = 300 * SECOND  # ... and late ones back to now - this


@dataclass(frozen=True)
class Timing:
    """``rate(every)`` from ``anchor``: the occurrences anchor + i * every."""

    every: int
    anchor: int

    def after(self, instant: int) -> int:
        """The first occurrence strictly after ``instant``."""
        if instant < self.anchor:
            return self.anchor
        return self.anchor + ((instant - self.anchor) // self.every + 1) * self.every

    def item(self) -> dict[str, int]:
        return {"every": self.every, "anchor": self.anchor}

    @staticmethod
    def of(item: Mapping[str, Any]) -> Timing:
        return Timing(int(item["every"]), int(item["anchor"]))


@dataclass(frozen=True)
class Protocol:
    """Shape f as the proposal writes it (``keys="instant"``), its repair, and the mutants."""

    keys: Literal["instant", "epoch"] = "epoch"
    dropped: frozenset[str] = frozenset()  # condition parts removed, by tag
    change_marker: bool = True  # mutant 2: a change without its closure marker
    marker_is_claim: bool = False  # mutant 3: the detector takes a closure marker for a claim
    adhoc_check: bool = True  # mutant 4: an ad-hoc run without its ConditionCheck
    epoch_above_read: bool = True  # a change's epoch above the head's too, not the state's alone
    after_through: bool = True  # a change's new head after the last decided occurrence, not now alone
    overlap: str = "allow"  # the job's overlap policy: anything but allow walks (writes_overlap.py)

    def key(self, at: int, epoch: int) -> str:
        base = run_id_for(JOB, at)
        return base if self.keys == "instant" else f"{base}#{epoch}"

    def parts(self, *conds: Cond) -> tuple[Cond, ...]:
        return tuple(c for c in conds if c.why.split(":", 1)[0] not in self.dropped)


def _tag(cond: Cond) -> str:
    return cond.why.split(":", 1)[0]


def tags(ops: list[WriteOp]) -> list[str]:
    """Every condition part's tag in ``ops``, for the sweep that removes each alone."""
    return [_tag(c) for op in ops for c in op.condition]


def run_key(run_id: str) -> Item:
    return {"job_id": JOB, "run_id": run_id}


STATE_KEY: Item = {"job_id": JOB}


def head_item(
    proto: Protocol, at: int, epoch: int, timing: Timing, after: str | None, through: int, **extra: Any
) -> Item:
    """A timed run made one occurrence ahead: the head. It carries what a claim needs (its
    timing, its successor's instant and key) and its ``due`` entry (``shard``, ``check_at``)."""
    next_at = timing.after(at)
    return {
        "job_id": JOB,
        "run_id": proto.key(at, epoch),
        "kind": TIMED,
        "status": SCHEDULED,
        "at": at,
        "epoch": epoch,
        "timing": timing.item(),
        "next_at": next_at,
        "next_key": proto.key(next_at, epoch),
        "after_run_id": after,
        "through": through,  # the last occurrence decided before this one (claimed or settled)
        "version": 1,
        "shard": SHARD,
        "check_at": at,
        **extra,
    }


def register(proto: Protocol, timing: Timing, now: int) -> list[WriteOp]:
    """The set-up: the state and the first head (the registrar's first claim)."""
    state = {"job_id": JOB, "status": ACTIVE, "version": 1, "timing": timing.item(), "through": now}
    head = head_item(proto, timing.after(now), 1, timing, None, now)
    return [
        Put(STATE, state, (not_exists("job_id", "register: a job registered once"),), "register state"),
        Put(RUNS, head, (not_exists("run_id", "register: the first head"),), "register head"),
    ]


def claim(proto: Protocol, head: Mapping[str, Any], now: int, claimer: str) -> Put:
    """The claim of ``head`` (as its ``due`` entry shows it): one plain put of its successor."""
    timing = Timing.of(head["timing"])
    item = head_item(
        proto,
        int(head["next_at"]),
        int(head["epoch"]),
        timing,
        str(head["run_id"]),
        int(head["at"]),
        claimed_at=now,
        claimed_by=claimer,
    )
    assert item["run_id"] == head["next_key"]
    why = "claim.successor_absent: a racing claimer, a settle, a change's closure marker, a retry"
    return Put(RUNS, item, proto.parts(not_exists("run_id", why)), f"claim {head['run_id']}")


def start(proto: Protocol, run_id: str, version: int, now: int) -> Update:
    return Update(
        RUNS,
        run_key(run_id),
        proto.parts(
            eq("status", SCHEDULED, "start.status_scheduled: a duplicate delivery, a closed head"),
            eq("version", version, "start.version: a stale message (a redispatch, a relink)"),
        ),
        f"start {run_id}",
        set={"status": RUNNING, "version": version + 1, "check_at": now + RUN_LEASE_MS, "started_at": now},
    )


def commit(proto: Protocol, run_id: str, token: int) -> Update:
    return Update(
        RUNS,
        run_key(run_id),
        proto.parts(
            eq("status", RUNNING, "commit.status_running: a commit after a recovery"),
            eq("version", token, "commit.version: a commit by a worker the detector replaced"),
        ),
        f"commit {run_id}",
        set={"status": SUCCEEDED, "committed_token": token},
        remove=("check_at", "shard"),
    )


def redispatch(proto: Protocol, run: Mapping[str, Any], now: int) -> Update:
    """A claimed run whose message never started it: a new token, and its message again."""
    return Update(
        RUNS,
        run_key(str(run["run_id"])),
        proto.parts(
            eq(
                "status", SCHEDULED, "redispatch.status_scheduled: a start, a change, a settle since the read"
            ),
            eq("version", run["version"], "redispatch.version: a relink or a redispatch since the read"),
        ),
        f"redispatch {run['run_id']}",
        set={"version": int(run["version"]) + 1, "check_at": now + DISPATCH_LEASE_MS},
    )


def recover(proto: Protocol, run: Mapping[str, Any], now: int) -> Update:
    """A running run past its lease (its worker died): back to scheduled, a new token, resent."""
    return Update(
        RUNS,
        run_key(str(run["run_id"])),
        proto.parts(
            eq("status", RUNNING, "recover.status_running: a commit since the read"),
            eq("version", run["version"], "recover.version: a recovery since the read"),
        ),
        f"recover {run['run_id']}",
        set={"status": SCHEDULED, "version": int(run["version"]) + 1, "check_at": now + DISPATCH_LEASE_MS},
    )


def _close_head(proto: Protocol, head: Mapping[str, Any], status: str, tag: str, label: str) -> Update:
    return Update(
        RUNS,
        run_key(str(head["run_id"])),
        proto.parts(
            eq("status", SCHEDULED, f"{tag}.head_scheduled: the head was claimed late, started or closed"),
            eq("version", head["version"], f"{tag}.head_version: a relink or a redispatch since the read"),
        ),
        label,
        set={"status": status, "version": int(head["version"]) + 1},
        remove=("check_at", "shard"),
    )


def settle(proto: Protocol, head: Mapping[str, Any], now: int) -> list[WriteOp]:
    """Misfire ``skip``: the overdue head and every occurrence up to now are missed; the next head
    is the first occurrence after now. The successor key's put is the race with a late claim."""
    timing, epoch = Timing.of(head["timing"]), int(head["epoch"])
    ops: list[WriteOp] = [_close_head(proto, head, MISSED, "settle", f"settle {head['run_id']}")]
    at = int(head["next_at"])
    last = int(head["at"])
    first = True
    while at <= now:
        why = (
            "settle.successor_absent: a late claim landed first"
            if first
            else "settle.missed_absent: a record"
        )
        missed = {"job_id": JOB, "run_id": proto.key(at, epoch), "kind": TIMED, "status": MISSED, "at": at}
        ops.append(Put(RUNS, missed, proto.parts(not_exists("run_id", why)), f"settle missed {at}"))
        last, at, first = at, timing.after(at), False
    new = head_item(proto, at, epoch, timing, head.get("after_run_id"), last)
    why = (
        "settle.successor_absent: a late claim landed first" if first else "settle.next_head_absent: a record"
    )
    ops.append(Put(RUNS, new, proto.parts(not_exists("run_id", why)), "settle next head"))
    return ops


@dataclass(frozen=True)
class Intent:
    """A person's change, as the registrar applies it."""

    kind: Literal["retime", "pause", "resume", "delete"]
    timing: Timing | None = None


@dataclass
class ChangePlan:
    ops: list[WriteOp] = field(default_factory=list)
    new_head: str | None = None


def change(
    proto: Protocol,
    state: Mapping[str, Any],
    head: Mapping[str, Any] | None,
    runs: Mapping[str, Mapping[str, Any]],
    intent: Intent,
    now: int,
    name: str,
) -> ChangePlan:
    """One transaction: the state's version; the head closed (cancelled, or missed if due) with a
    closure marker at its successor key; the new timing's head. ``runs`` are the job's records as
    read: a closure marker at the new head's key is reused, as the proposal's table says."""
    # The new epoch (and state version) is above every epoch read: a state read before a racing
    # change would otherwise name the new head with that change's epoch, at that change's head key
    # (a transaction touching one item twice: DynamoDB refuses it, not a condition that fails).
    read = int(head["epoch"]) if head is not None and proto.epoch_above_read else 0
    version = max(int(state["version"]), read) + 1
    status = {"retime": state["status"], "pause": PAUSED, "resume": ACTIVE, "delete": DELETED}[intent.kind]
    timing = intent.timing if intent.timing is not None else Timing.of(state["timing"])
    after = head.get("after_run_id") if head is not None else state.get("chain_end")
    through = int(head["through"]) if head is not None else int(state["through"])
    plan = ChangePlan()
    state_set: Item = {"version": version, "status": status, "timing": timing.item(), "last_change": name}
    state_set.update({"chain_end": after, "through": through, "applied": [*state.get("applied", ()), name]})
    plan.ops.append(
        Update(
            STATE,
            STATE_KEY,
            proto.parts(
                eq("version", state["version"], "change.state_version: another change since the read")
            ),
            f"change {name}",
            set=state_set,
        )
    )
    if head is not None:
        closed = MISSED if int(head["at"]) <= now else CANCELLED
        plan.ops.append(_close_head(proto, head, closed, "change", f"change closes {head['run_id']}"))
        if proto.change_marker:
            marker = {
                "job_id": JOB,
                "run_id": head["next_key"],
                "status": CLOSED,
                "at": head["next_at"],
                "closes_epoch": head["epoch"],
                "closed_by": version,
            }
            why = "change.marker_absent: a claim landed first (N runs; the change closes N+1)"
            plan.ops.append(Put(RUNS, marker, proto.parts(not_exists("run_id", why)), "change marker"))
    if status == ACTIVE:
        at = timing.after(max(now, through) if proto.after_through else now)
        new = head_item(proto, at, version, timing, after, through)
        reuse = runs.get(str(new["run_id"]), {}).get("status") == CLOSED
        cond = (
            eq("status", CLOSED, "change.new_head_free: a marker at the key is reused")
            if reuse
            else not_exists("run_id", "change.new_head_free: a racing change's head")
        )
        plan.ops.append(Put(RUNS, new, proto.parts(cond), "change new head"))
        plan.new_head = str(new["run_id"])
    return plan


def adhoc(proto: Protocol, head: Mapping[str, Any], request: str, now: int) -> tuple[Item, list[WriteOp]]:
    """A manual run M joins the chain in front of the head: put M, relink the head behind it
    (a version bump, so a message from before fails its start), and check the head unclaimed."""
    run = {
        "job_id": JOB,
        "run_id": manual_run_id(JOB, request),
        "kind": MANUAL,
        "status": SCHEDULED,
        "after_run_id": head.get("after_run_id"),
        "version": 1,
        "claimed_at": now,
        "shard": SHARD,
        "check_at": now + DISPATCH_LEASE_MS,
    }
    ops: list[WriteOp] = [
        Put(RUNS, run, proto.parts(not_exists("run_id", "adhoc.run_absent: a retried request")), "adhoc run"),
        Update(
            RUNS,
            run_key(str(head["run_id"])),
            proto.parts(
                eq("status", SCHEDULED, "adhoc.head_scheduled: the head was closed or settled"),
                eq("version", head["version"], "adhoc.head_version: a relink or a redispatch since the read"),
            ),
            f"adhoc relinks {head['run_id']}",
            set={"after_run_id": run["run_id"], "version": int(head["version"]) + 1},
        ),
    ]
    check = proto.parts(not_exists("run_id", "adhoc.successor_absent: a claim landed (relink the new head)"))
    if proto.adhoc_check and check:
        ops.append(Check(RUNS, run_key(str(head["next_key"])), check, "adhoc successor absent"))
    return run, ops


# Every condition part's tag, for the sweep that removes each alone.
ALL_PARTS = (
    "claim.successor_absent",
    "start.status_scheduled",
    "start.version",
    "commit.status_running",
    "commit.version",
    "redispatch.status_scheduled",
    "redispatch.version",
    "recover.status_running",
    "recover.version",
    "settle.head_scheduled",
    "settle.head_version",
    "settle.successor_absent",
    "settle.missed_absent",
    "settle.next_head_absent",
    "change.state_version",
    "change.head_scheduled",
    "change.head_version",
    "change.marker_absent",
    "change.new_head_free",
    "adhoc.run_absent",
    "adhoc.head_scheduled",
    "adhoc.head_version",
    "adhoc.successor_absent",
)
