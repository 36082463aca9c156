"""Conditions removed on purpose, to show the simulation can fail.

Each mutant takes one named condition part out of ``core/transitions.py`` (it always holds), or
one rule out of ``core/policies.py``, for the length of a ``with`` block. A chaos run under a
mutant must report violations of the invariant that condition protects; ``jobsched chaos
--mutant NAME`` runs one, and tests/sim/test_chaos.py keeps a test for each.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from jobsched.core import policies, transitions
from jobsched.core.writes import Cond, Update, WriteOp

# What each removed condition lets through, and the invariant that must then report it.
MUTANTS: dict[str, str] = {
    "fencing": "the commit's fencing token: a zombie worker commits (fenced_out_commit)",
    "lease": "recovery's lease-as-read: a live, renewed lease is recovered (live_lease_recovered)",
    "slot": "the chain's rule that an unfinished run holds the job's turn: two runs of a skip job "
    "run at once (overlap_violated)",
    "claim": "the claim's run-is-new: a claim overwrites a backfilled run (record_overwritten)",
    "advance": "the claim's state-as-read (version): a claim made from a state read before a manual "
    "run joined the chain links its run behind the old end, beside the manual run (overlap_violated)",
    "heartbeat": "the heartbeat's token and owner: a stalled worker that wakes after its run was "
    "recovered renews the lease of the run's new holder to its own deadline, and the detector "
    "then fails the live run (stale_heartbeat)",
    "settle": "the settle's state-as-read: a catch-up chunk written over a state an ad-hoc run "
    "moved links behind the old chain end, beside the ad-hoc run (overlap_violated)",
    "walk": "a run failed without starting passes the walk to its predecessor: a later run starts "
    "while the predecessor still runs (overlap_violated)",
    "overtake": "the start's overtaken_by: an occurrence that a manual run passed over before it "
    "came due starts beside that manual run (overlap_violated)",
    "completion": "the delete after completion's every-run-ended: a finished job's item is deleted "
    "while its last run is still pending or running (deleted_before_complete)",
    "cancel": "recovery's no-cancel-request: a cancel_other holder asked to stop after the "
    "detector read it is redispatched, and its handler runs again (cancelled_run_redispatched)",
}


def _holds(why: str) -> Cond:
    # A comparison with a value no item has: true whenever the attribute is there or not.
    return Cond("ne", "version", f"mutant: {why}", -1)


def _without_fencing(_version: int) -> Cond:
    return _holds("no fencing token")


def _without_lease_check(_run: dict[str, Any]) -> Cond:
    return _holds("no lease-as-read")


def _turn_always_free(_run: dict[str, Any] | None) -> tuple[bool, str | None]:
    return False, None  # no run holds the job's turn: every start finds it free


def _claim_unchecked(original: Callable[..., list[WriteOp]]) -> Callable[..., list[WriteOp]]:
    def claim(*args: Any, **kwargs: Any) -> list[WriteOp]:
        create, *rest = original(*args, **kwargs)
        return [replace(create, condition=()), *rest]

    return claim


def _advance_unchecked(original: Callable[..., list[WriteOp]]) -> Callable[..., list[WriteOp]]:
    def claim(*args: Any, **kwargs: Any) -> list[WriteOp]:
        create, advance = original(*args, **kwargs)
        return [
            create,
            replace(advance, condition=tuple(c for c in advance.condition if c.attr != "version")),
        ]

    return claim


def _heartbeat_unchecked(original: Callable[..., Update]) -> Callable[..., Update]:
    def heartbeat(*args: Any, **kwargs: Any) -> Update:
        op = original(*args, **kwargs)
        return replace(op, condition=tuple(c for c in op.condition if c.attr not in ("version", "owner")))

    return heartbeat


def _start_unchecked(original: Callable[..., Update]) -> Callable[..., Update]:
    def start(*args: Any, **kwargs: Any) -> Update:
        op = original(*args, **kwargs)
        return replace(op, condition=tuple(c for c in op.condition if c.attr != "overtaken_by"))

    return start


def _settle_unchecked(original: Callable[..., list[WriteOp]]) -> Callable[..., list[WriteOp]]:
    def settle(*args: Any, **kwargs: Any) -> list[WriteOp]:
        state_op, *records = original(*args, **kwargs)
        kept = tuple(c for c in state_op.condition if c.attr != "version")
        return [replace(state_op, condition=kept), *records]

    return settle


def _failed_frees_the_turn(original: Callable[..., tuple[bool, str | None]]) -> Callable[..., Any]:
    def step(run: dict[str, Any] | None) -> tuple[bool, str | None]:
        if run is not None and run.get("status") == "failed":
            return False, None
        return original(run)

    return step


def _service_patch(name: str) -> tuple[Any, str, Any]:
    """The mutants that replace what a service imported from the core."""
    import jobsched.services.completion as completion
    import jobsched.services.settle as settle
    import jobsched.services.worker as worker

    if name == "heartbeat":
        return (worker, "heartbeat_op", _heartbeat_unchecked(transitions.heartbeat_op))
    if name == "settle":
        return (settle, "settle_ops", _settle_unchecked(transitions.settle_ops))
    if name == "overtake":
        return (worker, "start_op", _start_unchecked(transitions.start_op))
    return (completion, "UNFINISHED", frozenset())  # completion: no run counts as not ended


@contextmanager
def mutant(name: str) -> Iterator[None]:
    """Run the block with one condition removed (see ``MUTANTS``)."""
    import jobsched.services.chain as chain
    import jobsched.services.trigger as trigger

    patches: list[tuple[Any, str, Any]] = []
    if name == "fencing":
        patches.append((transitions, "_run_token", _without_fencing))
    elif name == "lease":
        patches.append((transitions, "_lease_as_read", _without_lease_check))
    elif name == "slot":
        patches.append((chain, "chain_step", _turn_always_free))
    elif name == "claim":
        unchecked = _claim_unchecked(transitions.claim_ops)
        patches += [(transitions, "claim_ops", unchecked), (trigger, "claim_ops", unchecked)]
    elif name == "advance":
        unversioned = _advance_unchecked(transitions.claim_ops)
        patches += [(transitions, "claim_ops", unversioned), (trigger, "claim_ops", unversioned)]
    elif name in ("heartbeat", "settle", "overtake", "completion"):
        patches.append(_service_patch(name))
    elif name == "cancel":
        patches.append((transitions, "_not_asked_to_stop", lambda: _holds("no cancel-request check")))
    elif name == "walk":
        patches.append((chain, "chain_step", _failed_frees_the_turn(policies.chain_step)))
    else:
        raise ValueError(f"unknown mutant {name!r}; one of {', '.join(MUTANTS)}")
    saved = [(owner, attr, getattr(owner, attr)) for owner, attr, _ in patches]
    try:
        for owner, attr, replacement in patches:
            setattr(owner, attr, replacement)
        yield
    finally:
        for owner, attr, original in saved:
            setattr(owner, attr, original)
