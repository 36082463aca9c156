"""The overlap policies on shape f's chain (docs/design.md, "Overlap: the chain", rules W1-W16),
as pure functions in the model's writes language: the walk's step and the decision, and the
writes a start makes under each policy (start with its overtake marks, skip, buffer), the
promotion at a holder's end, the detector's recheck and the end of a run asked to stop.

Shape f's chain. The claim of N puts N+1 with ``after_run_id`` = N (the run whose successor key
N+1 sits at); an ad-hoc run M takes the head's ``after_run_id`` and the head is relinked behind M
(``writes.adhoc``). So the chain's end is the head's ``after_run_id``, not the state's
``latest_run_id``: the walk reads runs only, from the run's own link (W2), and never the head (it
is the chain's end, after every walker). A claimed, unstarted run is ``scheduled`` (the product's
``pending``).

Every condition part is named (``<write>.<part>``) and removable by ``Protocol.dropped``, as the
model's other writes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from jobsched.core.writes import (
    RUNS,
    Cond,
    Update,
    WriteOp,
    any_of,
    eq,
    exists,
    is_in,
    ne,
    not_exists,
)

from jobsched_tools.successor import writes as w

Policy = Literal["allow", "skip", "buffer_one", "buffer_all", "cancel_other"]
POLICIES: tuple[Policy, ...] = ("allow", "skip", "buffer_one", "buffer_all", "cancel_other")
WAITING_POLICIES = ("buffer_one", "buffer_all", "cancel_other")
ONE_WAITS = ("buffer_one", "cancel_other")

BUFFERED, SKIPPED, FAILED = "buffered", "skipped", "failed"
UNFINISHED = (w.SCHEDULED, w.RUNNING, BUFFERED)
FINISHED = (w.SUCCEEDED, SKIPPED, FAILED)
MAX_CHAIN_STEPS = 8  # the product's is 32; the model's chains are short

RUN, BUFFER, SKIP = "run", "buffer", "skip"


def _parts(proto: w.Protocol, *conds: Cond) -> tuple[Cond, ...]:
    return proto.parts(*conds)


# --- the walk (pure: one step of it, and the decision) ------------------------------------------


def not_yet_due(run: Mapping[str, Any], now: int) -> bool:
    """W3: a claimed timed run that never ran and whose instant is ahead holds no turn for a run
    that starts before it (an ad-hoc run): it is passed over and marked overtaken."""
    return (
        run.get("kind") == w.TIMED
        and run.get("status") == w.SCHEDULED
        and "started_at" not in run
        and int(run["at"]) > now
    )


def waits_for_walker(run: Mapping[str, Any], walker: str) -> bool:
    """W4: a run the walker overtook that has not started since waits for it: passed over."""
    return run.get("status") in (w.SCHEDULED, BUFFERED) and run.get("overtaken_by") == walker


def chain_step(run: Mapping[str, Any] | None) -> tuple[bool, str | None]:
    """W5-W10: whether ``run`` holds the turn, and the run to read next."""
    if run is None:
        return False, None  # W10: expired (never in the model)
    if run.get("status") in UNFINISHED:
        return True, None  # W5
    if run.get("status") == SKIPPED and run.get("blocked_by"):
        return False, str(run["blocked_by"])  # W6
    if (run.get("status") == FAILED and "started_at" not in run) or run.get("overtook"):
        after = run.get("after_run_id")
        return False, str(after) if after else None  # W7, W8
    return False, None  # W10


def decide(policy: Policy, run_id: str, holder: Mapping[str, Any] | None) -> str:
    """W12, W14: ``holder`` the unfinished run the walk found (None: the turn is free)."""
    if policy == "allow" or holder is None or holder.get("run_id") == run_id:
        return RUN
    if policy == "buffer_all":
        return BUFFER
    if (
        policy in ONE_WAITS
        and holder.get("status") != BUFFERED
        and holder.get("buffered_next") in (None, run_id)
    ):
        return BUFFER
    return SKIP


# --- the writes ----------------------------------------------------------------------------------


def start(
    proto: w.Protocol,
    run_id: str,
    version: int,
    now: int,
    passed: Sequence[Mapping[str, Any]],
    finished_overtaker: str | None,
) -> list[WriteOp]:
    """The start under a policy that walked: the run ``scheduled`` at the message's token (the
    model's ``start.*`` parts), not overtaken by an unfinished run, not asked to stop; and, in the
    same transaction, each run passed over as not yet due marked ``overtaken_by`` it (W3)."""
    base = w.start(proto, run_id, version, now)
    overtaken = (
        any_of(
            "start.not_overtaken: an overtaker marked it since the read (W1)",
            not_exists("overtaken_by", "none"),
            eq("overtaken_by", finished_overtaker, "the overtaker the worker read finished"),
        )
        if finished_overtaker is not None
        else not_exists("overtaken_by", "start.not_overtaken: an overtaker marked it since the read (W1)")
    )
    extra = _parts(
        proto,
        overtaken,
        not_exists("cancel_requested", "start.not_asked_to_stop: a cancel_other run asked it to stop"),
    )
    set_ = dict(base.set)
    if passed:
        set_["overtook"] = True
    ops: list[WriteOp] = [
        Update(
            RUNS,
            base.key,
            base.condition + extra,
            base.label,
            set=set_,
            remove=("overtaken_by",) if finished_overtaker is not None else (),
        )
    ]
    for run in passed:
        ops.append(
            Update(
                RUNS,
                w.run_key(str(run["run_id"])),
                _parts(
                    proto,
                    eq(
                        "status",
                        w.SCHEDULED,
                        "overtake.status_scheduled: it started (or ended) since the walk",
                    ),
                    eq("version", run["version"], "overtake.version: a redispatch since the walk"),
                    not_exists("overtaken_by", "overtake.unmarked: another overtaker marked it"),
                ),
                f"overtake {run['run_id']}",
                set={"overtaken_by": run_id},
            )
        )
    return ops


def skip(proto: w.Protocol, run_id: str, version: int, blocked_by: str) -> Update:
    """W13: the run is skipped for the first run its walk passed over, else its holder."""
    return Update(
        RUNS,
        w.run_key(run_id),
        _parts(
            proto,
            eq("status", w.SCHEDULED, "skip.status_scheduled: a duplicate delivery, a start"),
            eq("version", version, "skip.version: a stale message (a relink, a redispatch)"),
        ),
        f"skip {run_id}",
        set={"status": SKIPPED, "blocked_by": blocked_by},
        remove=("check_at", "shard"),
    )


def buffer(
    proto: w.Protocol, policy: Policy, run_id: str, version: int, holder: Mapping[str, Any], now: int
) -> list[WriteOp]:
    """W15, W16: one transaction. The run waits (``buffered``, its own lease, ``blocked_by`` the
    holder); the holder, unfinished and naming no other waiter, names it (``buffered_next``) and,
    under ``cancel_other``, is asked to stop (at the token the walk read). Under ``buffer_one`` and
    ``cancel_other`` nobody waits behind the run and the holder is not waiting itself (W16)."""
    holder_id = str(holder["run_id"])
    run_conds: list[Cond] = [
        eq("status", w.SCHEDULED, "buffer.status_scheduled: a duplicate delivery, a start"),
        eq("version", version, "buffer.version: a stale message (a relink, a redispatch)"),
    ]
    holder_conds: list[Cond] = [
        is_in(
            "status",
            (w.SCHEDULED, w.RUNNING, BUFFERED),
            "buffer.holder_unfinished: the holder ended since the walk (nobody would promote it)",
        ),
        any_of(
            "buffer.holder_free: another run waits behind the holder",
            not_exists("buffered_next", "none"),
            eq("buffered_next", run_id, "this run (a retried write)"),
        ),
    ]
    if policy in ONE_WAITS:
        run_conds.append(
            not_exists("buffered_next", "buffer.nobody_waits_behind: a run waits behind it (W16)")
        )
        holder_conds.append(
            ne("status", BUFFERED, "buffer.holder_not_waiting: the holder waits itself (W16)")
        )
    holder_set: dict[str, Any] = {"buffered_next": run_id}
    if policy == "cancel_other":
        holder_conds.append(
            eq("version", holder["version"], "buffer.holder_version: the request reaches the attempt read")
        )
        holder_set["cancel_requested"] = run_id
    return [
        Update(
            RUNS,
            w.run_key(run_id),
            _parts(proto, *run_conds),
            f"buffer {run_id}",
            set={"status": BUFFERED, "blocked_by": holder_id, "check_at": now + w.DISPATCH_LEASE_MS},
        ),
        Update(
            RUNS,
            w.run_key(holder_id),
            _parts(proto, *holder_conds),
            f"buffer names {holder_id}",
            set=holder_set,
        ),
    ]


def buffer_unnamed(proto: w.Protocol, run_id: str, version: int, holder_id: str, now: int) -> Update:
    """``buffer_all`` behind a holder that names another waiter: the detector promotes it when
    its lease lapses (the product's "buffer unnamed")."""
    return Update(
        RUNS,
        w.run_key(run_id),
        _parts(
            proto,
            eq("status", w.SCHEDULED, "buffer.status_scheduled: a duplicate delivery, a start"),
            eq("version", version, "buffer.version: a stale message (a relink, a redispatch)"),
        ),
        f"buffer {run_id}",
        set={"status": BUFFERED, "blocked_by": holder_id, "check_at": now + w.DISPATCH_LEASE_MS},
    )


def promote(proto: w.Protocol, waiting: Mapping[str, Any], holder_id: str, now: int) -> Update:
    """The waiting run back to ``scheduled`` with a new token and a dispatch lease: it walks again."""
    return Update(
        RUNS,
        w.run_key(str(waiting["run_id"])),
        _parts(
            proto,
            eq("status", BUFFERED, "promote.status_buffered: promoted (or ended) since the read"),
            eq("version", waiting["version"], "promote.version: another promoter since the read"),
            eq("blocked_by", holder_id, "promote.blocked_by: it waits behind another run now"),
        ),
        f"promote {waiting['run_id']}",
        set={
            "status": w.SCHEDULED,
            "version": int(waiting["version"]) + 1,
            "check_at": now + w.DISPATCH_LEASE_MS,
        },
        remove=("blocked_by",),
    )


def recheck(proto: w.Protocol, waiting: Mapping[str, Any], now: int) -> Update:
    """The detector renews the lease of a run that waits behind a holder still unfinished."""
    return Update(
        RUNS,
        w.run_key(str(waiting["run_id"])),
        _parts(
            proto,
            eq("status", BUFFERED, "recheck.status_buffered: promoted since the read"),
            eq("version", waiting["version"], "recheck.version: promoted since the read"),
        ),
        f"recheck {waiting['run_id']}",
        set={"check_at": now + w.DISPATCH_LEASE_MS},
    )


def end_cancelled(proto: w.Protocol, run: Mapping[str, Any]) -> Update:
    """A run asked to stop (``cancel_other``) that never started: its start is refused, so the
    detector ends it, ``failed`` as cancelled (not ``cancelled``: a claimed run is never closed),
    when its dispatch lease lapses."""
    return Update(
        RUNS,
        w.run_key(str(run["run_id"])),
        _parts(
            proto,
            exists("cancel_requested", "end_cancelled.asked: (the request is never withdrawn)"),
            eq("status", w.SCHEDULED, "end_cancelled.status_scheduled: it started or ended since the read"),
            eq("version", run["version"], "end_cancelled.version: a redispatch since the read"),
        ),
        f"end_cancelled {run['run_id']}",
        set={"status": FAILED, "cancelled_by": run["cancel_requested"], "version": int(run["version"]) + 1},
        remove=("check_at", "shard"),
    )


ALL_PARTS = (
    "start.not_overtaken",
    "start.not_asked_to_stop",
    "overtake.status_scheduled",
    "overtake.version",
    "overtake.unmarked",
    "skip.status_scheduled",
    "skip.version",
    "buffer.status_scheduled",
    "buffer.version",
    "buffer.holder_unfinished",
    "buffer.holder_free",
    "buffer.nobody_waits_behind",
    "buffer.holder_not_waiting",
    "buffer.holder_version",
    "promote.status_buffered",
    "promote.version",
    "promote.blocked_by",
    "recheck.status_buffered",
    "recheck.version",
    "end_cancelled.asked",
    "end_cancelled.status_scheduled",
    "end_cancelled.version",
)
