"""Conditions removed on purpose, to show the simulation can fail.

Each mutant takes one named condition part out of ``core/transitions.py`` (it always holds), or
one rule out of ``core/policies.py``, for the length of a ``with`` block. A chaos run under a
mutant must report violations of the invariant that condition protects; ``jobsched chaos
--mutant NAME`` runs one, and tests/sim/test_chaos.py keeps a test for each.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from jobsched.core import transitions
from jobsched.core.writes import Cond, Put

# What each removed condition lets through, and the invariant that must then report it.
MUTANTS: dict[str, str] = {
    "fencing": "the commit's fencing token: a zombie worker commits (fenced_out_commit)",
    "lease": "recovery's lease-as-read: a live, renewed lease is recovered (live_lease_recovered)",
    "slot": "the chain's rule that an unfinished run holds the job's turn: two runs of a skip job "
    "run at once (overlap_violated)",
    "claim": "the claim's run-is-new: a claim overwrites a backfilled run (record_overwritten)",
    "adopt": "the adoption of a half-made claim's run by whoever moves its job past it: the run "
    "starts outside the job's chain, beside a later run (overlap_violated)",
    "fence": "a change's cancellation of the occurrence it withdraws: a claim that read the job "
    "before the change makes its run outside the job's chain, to start beside a later run "
    "(overlap_violated)",
}


def _holds(why: str) -> Cond:
    # A comparison with a value no item has: true whenever the attribute is there or not.
    return Cond("ne", "version", f"mutant: {why}", -1)


def _no_unfinished_claim(_store: object, _state: object) -> None:
    return None


def _nothing_withdrawn(*_args: object) -> None:
    return None


def _without_fencing(_version: int) -> Cond:
    return _holds("no fencing token")


def _without_lease_check(_run: dict[str, Any]) -> Cond:
    return _holds("no lease-as-read")


def _turn_always_free(_run: dict[str, Any] | None) -> tuple[bool, str | None]:
    return False, None  # no run holds the job's turn: every start finds it free


def _claim_unchecked(original: Callable[..., Put]) -> Callable[..., Put]:
    def create(*args: Any, **kwargs: Any) -> Put:
        op = original(*args, **kwargs)
        return Put(op.table, op.item, (), op.label)

    return create


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
    elif name == "adopt":
        import jobsched.services.detector as detector
        import jobsched.services.registrar as registrar
        import jobsched.services.settle as settle

        patches += [
            (module, "unfinished_claim", _no_unfinished_claim) for module in (detector, registrar, settle)
        ]
    elif name == "fence":
        import jobsched.services.registrar as registrar

        patches.append((registrar, "withdrawn_occurrence", _nothing_withdrawn))
    elif name == "claim":
        unchecked = _claim_unchecked(transitions.create_run_op)
        patches += [(transitions, "create_run_op", unchecked), (trigger, "create_run_op", unchecked)]
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
