"""The worker's writes before its handler runs, and while it runs: the start (with the overtake of
runs not yet due in the same transaction), the heartbeat, the skip and the buffer at the start,
and the promotion of a run waiting behind a holder that ended.
"""

from __future__ import annotations

from jobsched.core.config import SchedulerConfig
from jobsched.core.run import AWAITING_START, UNFINISHED_STATUSES, RunStatus, run_key
from jobsched.core.transitions.conditions import (
    LEASE_ATTRIBUTES,
    RunItem,
    _dispatch_lease,
    _not_asked_to_stop,
    _run_status,
    _run_token,
    retention_expiry,
)
from jobsched.core.writes import RUNS, Cond, Item, Update, WriteOp, any_of, eq, exists, is_in, ne, not_exists


def start_op(
    run_id: str,
    version: int,
    owner: str,
    lease_until: int,
    now: int,
    overtaken_by: str | None = None,
    overtakes: bool = False,
) -> Update:
    """A worker takes over a run that awaits its start (``AWAITING_START``: ``pending``, or a
    claimed ``scheduled`` run under the successor claim, build plan §1 "start", the model's
    ``start.status_scheduled``): the takeover bumps the fencing token it will hold. The
    job's turn needs no write here: the worker read it from the chain (``core/policies.py``).
    ``overtaken_by``: the run that passed over this one before it came due, which the worker
    found finished (or runs beside it under ``allow``); None: no run may have overtaken it.
    ``overtakes``: this start passes over runs not yet due (``overtake_op``, same transaction):
    the run is marked ``overtook``, so that once finished it passes a later run's walk on to the
    runs it overtook, which may run after it (``core/policies.chain_step``)."""
    overtaken = (
        eq("overtaken_by", overtaken_by, "the run that overtook this one is the one the worker read")
        if overtaken_by is not None
        else not_exists(
            "overtaken_by",
            "no run started before this one came due (``overtake_op``): else the worker must "
            "wait for that run, which the walk back along the chain cannot see",
        )
    )
    return Update(
        RUNS,
        run_key(run_id),
        condition=(
            exists("run_id", "a message for a run that does not exist starts nothing"),
            _run_status(*AWAITING_START),
            _run_token(version),
            overtaken,
            # cancel_other: a run a newer one asked to stop never starts its handler
            # again; the start is refused as a stale message's, and the detector ends the run as
            # cancelled when its dispatch lease lapses (recover_op).
            _not_asked_to_stop(),
        ),
        label="start run",
        set={
            "status": RunStatus.RUNNING.value,
            "version": version + 1,
            "owner": owner,
            "started_at": now,
            "heartbeat_at": now,
            "lease_expires_at": lease_until,
            **({"overtook": True} if overtakes else {}),
        },
        set_if_missing={"first_started_at": now},
        remove=("overtaken_by",) if overtaken_by is not None else (),
    )


def overtake_op(passed: RunItem, starter_id: str) -> Update:
    """In a start's transaction: a run not yet due that the starter passed over is marked, so its
    own start sees the starter. Its token is not moved (its message stays good); the mark is
    conditional on the run as the walk read it, so a run that started or was recovered since
    fails the starter's write, and the starter walks again. The run awaits its start,
    ``pending`` or ``scheduled`` (under the successor claim a claimed run not yet due is
    ``scheduled``: build plan §1 "overtake", W3)."""
    before = passed.get("overtaken_by")
    return Update(
        RUNS,
        run_key(passed["run_id"]),
        condition=(
            _run_status(*AWAITING_START),
            _run_token(passed["version"]),
            (
                eq("overtaken_by", before, "no other run overtook it since the walk read it")
                if before is not None
                else not_exists("overtaken_by", "no other run overtook it since the walk read it")
            ),
        ),
        label="overtake run",
        set={"overtaken_by": starter_id},
    )


def heartbeat_op(run_id: str, version: int, owner: str, lease_until: int, now: int) -> Update:
    return Update(
        RUNS,
        run_key(run_id),
        condition=(
            _run_status(RunStatus.RUNNING),
            _run_token(version),
            eq("owner", owner, "only the worker holding the lease renews it"),
        ),
        label="heartbeat",
        set={"lease_expires_at": lease_until, "heartbeat_at": now},
    )


def skip_at_start_ops(
    run_id: str, version: int, reason: str, blocked_by: str, now: int, cfg: SchedulerConfig
) -> list[WriteOp]:
    """Record the run as skipped. ``blocked_by`` names the unfinished run that holds the job's
    turn, so a later run's walk along the chain goes straight to it. The run awaits its start
    (``pending`` or ``scheduled``: build plan §1 "skip")."""
    return [
        Update(
            RUNS,
            run_key(run_id),
            condition=(_run_status(*AWAITING_START), _run_token(version)),
            label="skip run",
            set={
                "status": RunStatus.SKIPPED.value,
                "version": version + 1,
                "reason": reason,
                "blocked_by": blocked_by,
                "finished_at": now,
                "expires_at": retention_expiry(now, cfg),
            },
            remove=(*LEASE_ATTRIBUTES, "owner"),
        )
    ]


def buffer_at_start_ops(
    run_id: str,
    version: int,
    holder: RunItem,
    now: int,
    cfg: SchedulerConfig,
    cancel: bool = False,
    register: bool = True,
    alone: bool = False,
) -> list[WriteOp]:
    """Park the run behind the run holding the job's turn, and name it on the holder, so that
    the holder's end promotes it (``promote_op``). One transaction: the holder's condition is
    what makes the wait end. It keeps a lease, renewed by the miss detector while the holder
    runs: every run that is not finished holds a lease, so none can wait forever unseen.

    ``cancel`` (``cancel_other``): the same write asks the holder to stop (``cancel_requested``),
    conditional on the holder's token as read, so the request reaches the attempt that was read;
    its worker sees the mark in its next heartbeat's response and sets ``ctx.cancelled``.
    ``register`` False (``buffer_all`` only, when the holder names another waiting run): the
    run waits without being named; its lease brings it to the miss detector, which promotes it
    to decide again (``recheck_buffered_ops``: nobody names it, so it is not waiting).

    ``alone`` (``buffer_one`` and ``cancel_other``, a run not from a backfill: at most one run
    waits, walk rule W16): the run waits only if nobody waits behind it and its holder is not
    waiting itself, both as written. Two runs in one chain can each find their holder free of
    waiters at once (a manual run behind a pending 00:05 waits behind it; 00:05 then finds the
    running run before it): one of the two writes must fail, whichever lands first.

    The run awaits its start (``pending`` or ``scheduled``), and its holder may be a claimed run
    that has not started, ``scheduled`` under the successor claim (build plan §1 "buffer", W5,
    W15): under ``buffer_all`` a manual run behind a claimed occurrence not yet due waits behind
    it, and ``cancel_other`` asks such a holder to stop, so its start is refused."""
    holder_conditions: tuple[Cond, ...] = (
        is_in(
            "status",
            [status.value for status in UNFINISHED_STATUSES],
            "the holder has not finished since we read it (else this run would wait for "
            "an end that already happened, and wait until its lease lapses); a backfill or "
            "buffer_all run may wait behind a run that waits itself",
        ),
        any_of(
            "one run waits behind a holder (buffer_all: each waiting run behind its own)",
            not_exists("buffered_next", "nothing waits yet"),
            eq("buffered_next", run_id, "this run waits already (a retried write)"),
        ),
    )
    holder_sets: Item = {"buffered_next": run_id}
    if cancel:
        holder_conditions += (_run_token(int(holder["version"])),)
        holder_sets["cancel_requested"] = run_id
    own_conditions: tuple[Cond, ...] = (_run_status(*AWAITING_START), _run_token(version))
    if alone:
        holder_conditions += (_holder_not_waiting(),)
        own_conditions += (_nobody_waits_behind(),)
    own = Update(
        RUNS,
        run_key(run_id),
        condition=own_conditions,
        label="buffer run",
        set={
            "status": RunStatus.BUFFERED.value,
            "version": version + 1,
            "buffered_at": now,
            "blocked_by": holder["run_id"],
            **_dispatch_lease(run_id, now + cfg.dispatch_lease_seconds * 1000, cfg),
        },
        remove=("owner",),
    )
    if not register:
        return [own]
    return [
        own,
        Update(
            RUNS,
            run_key(holder["run_id"]),
            condition=holder_conditions,
            label="wait behind holder",
            set=holder_sets,
        ),
    ]


def _holder_not_waiting() -> Cond:
    return ne(
        "status",
        RunStatus.BUFFERED.value,
        "the holder does not wait itself (buffer_one, cancel_other: at most one run waits; W16)",
    )


def _nobody_waits_behind() -> Cond:
    return not_exists(
        "buffered_next",
        "nobody waits behind this run (buffer_one, cancel_other: at most one run waits; the run "
        "that found a waiter behind it is skipped, and its end promotes the waiter: W16)",
    )


def promote_op(buffered: RunItem, holder_id: str, now: int, cfg: SchedulerConfig) -> tuple[Update, RunItem]:
    """The holder ended: the run waiting behind it becomes pending again, with a fresh dispatch
    lease, to be sent and to decide again at its start."""
    lease = _dispatch_lease(buffered["run_id"], now + cfg.dispatch_lease_seconds * 1000, cfg)
    promoted = {**buffered, "status": RunStatus.PENDING.value, "version": buffered["version"] + 1, **lease}
    update = Update(
        RUNS,
        run_key(buffered["run_id"]),
        condition=(
            _run_status(RunStatus.BUFFERED),
            _run_token(buffered["version"]),  # promoted once: a second promoter's write fails
            eq("blocked_by", holder_id, "the run waits behind this holder, not another"),
        ),
        label="promote buffered run",
        set={"status": RunStatus.PENDING.value, "version": promoted["version"], **lease},
    )
    return update, promoted
