"""The successor model's 23 base sets (tools/jobsched_tools/successor/sets.py: ``CORE``,
``NEW_SETS``, ``HARD``), ported to the product's explorer on a successor-shaped stack
(``successor.py``): the same names, actors, times, set-ups and fault budgets, the real services
instead of the model's writes (docs/proposals/successor-claim-build.md §5, row S4-S7).

The model's actors act at absolute times; here a set has a base time (``at``) and each actor a
clock offset from it (``model.ActorSpec.offset_ms``), the explorer's way of an actor acting later.
The model's ``change`` actor is a person's write to the job item then the registrar's apply
(``successor.change``); its ``worker`` with 2 takes two messages (``programs.worker``).

Timings (the model's): ``OLD`` every 5 minutes (00:05, 00:10 ...), ``NEW`` every 3 (00:06 ...),
``TEN`` every 10 (its first, 00:10, is the old head's successor key: where a change's closure
marker goes), ``HALF`` every 150 s (its first after 00:04, 00:05, is the head's own key).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from jobsched.core import head, head_change, head_invariants, run
from jobsched.core.transitions import head_change as head_change_writes
from jobsched.core.transitions import head_recover
from jobsched.core.writes import WriteOp

from jobsched_tools.explore.model import OLD, SECOND, T0, ActorSet, ActorSpec, by_name
from jobsched_tools.explore.world import Budget
from jobsched_tools.sim.mutants import switched_off

NEW = "rate(3 minutes)"
TEN = "rate(10 minutes)"
HALF = "rate(150 seconds)"
MINUTE = 60 * SECOND
WINDOW_END = T0 + 10 * MINUTE  # occurrences up to 00:10 must have their records after the drive


def at(minutes: int, seconds: int = 0) -> int:
    return T0 + minutes * MINUTE + seconds * SECOND


def _a(name: str, kind: str, offset_ms: int = 0, arg: object = None) -> ActorSpec:
    return ActorSpec(name, kind, offset_ms, arg)


def retime(schedule: str) -> str:
    return f"retime:{schedule}"


def _set(
    name: str,
    actors: tuple[ActorSpec, ...],
    when: int = at(4),
    setup: str = "registered",
    budget: Budget | None = None,
    note: str = "",
) -> ActorSet:
    """A set as the model writes it: ``budget`` defaults to the model's (one crash)."""
    return ActorSet(
        name,
        actors,
        setup=setup,
        at=when,
        window_end=WINDOW_END,
        budget=budget if budget is not None else Budget(crashes=1),
        note=note,
    )


FORTY = 40 * SECOND
CORE = by_name(
    _set("tick-tick-crash", (_a("tickA", "tick"), _a("tickB", "tick"))),
    _set("tick-retime", (_a("tick", "tick"), _a("registrar", "change", arg=retime(NEW)))),
    _set("pause-tick", (_a("registrar", "change", arg="pause"), _a("tick", "tick"))),
    _set("tick-manual", (_a("tick", "tick"), _a("manual", "manual"))),
    _set("manual-retime", (_a("manual", "manual"), _a("registrar", "change", arg=retime(NEW)))),
    _set(
        "detector-worker",
        (_a("worker", "worker", arg=2), _a("detector", "detector")),
        when=at(5, 33),
        setup="claimed",
        budget=Budget(crashes=1, dups=1),
        note="00:05 claimed at 00:04: its dispatch lease lapsed as its message arrives, delivered twice",
    ),
)

NEW_SETS = by_name(
    _set(
        "claim-stale-change",
        (_a("tick", "tick"), _a("registrar", "change", arg=retime(TEN))),
        budget=Budget(crashes=1, stale=1),
        note="a frozen claimer's put against a change whose new head is at the old successor key",
    ),
    _set(
        "claim-settle",
        (_a("tick", "tick"), _a("detector", "detector")),
        when=at(6, 10),
        budget=Budget(crashes=1, stale=1),
        note="00:05 unclaimed 70 s past: a late claim against the detector's settle",
    ),
    _set(
        "claim-lost-message",
        (_a("tick", "tick"), _a("detector", "detector", 100 * SECOND), _a("worker", "worker", 100 * SECOND)),
        budget=Budget(crashes=0, lost=1),
        note="the claim lands, its send is lost: the detector dispatches once, after the lease",
    ),
    _set(
        "manual-claim-stale-page",
        (_a("tick", "tick"), _a("manual", "manual")),
        budget=Budget(crashes=1, stale=1),
        note="an ad-hoc run relinks the head while a claimer holds a page from before",
    ),
    _set(
        "pause-resume-same-instant",
        (_a("pause", "change", arg="pause"), _a("resume", "change", arg="resume"), _a("tick", "tick")),
        note="a pause and a resume at 00:04: the resumed head's key is the paused head's",
    ),
)

HARD = by_name(
    _set(
        "pause-resume-marker",
        (
            _a("pause", "change", arg="pause"),
            _a("resume", "change", 90 * SECOND, "resume"),
            _a("tick", "tick"),
        ),
        note="resumed at 00:05:30: the first occurrence is the paused head's successor (its marker)",
    ),
    _set(
        "retime-onto-head",
        (_a("tick", "tick"), _a("registrar", "change", arg=retime(HALF))),
        note="the new timing's first occurrence, 00:05, is the head's own key",
    ),
    _set(
        "retime-onto-claimed",
        (_a("tick", "tick"), _a("registrar", "change", arg=retime(HALF))),
        when=at(4, 30),
        setup="claimed",
        note="00:05 claimed: the new timing (00:05, 00:07:30) must start after it",
    ),
    _set(
        "retime-there-and-back",
        (
            _a("registrarA", "change", arg=retime(TEN)),
            _a("registrarB", "change", arg=retime(OLD)),
            _a("tick", "tick"),
        ),
        budget=Budget(crashes=0),
        note="5 to 10 minutes and back: markers of one timing at keys the other reaches later",
    ),
    _set(
        "settle-change",
        (_a("detector", "detector"), _a("registrar", "change", arg="pause"), _a("tick", "tick")),
        when=at(6, 10),
        budget=Budget(crashes=1, stale=1),
        note="00:05 unclaimed 70 s past: the detector's settle, a pause and a late claim, on one key",
    ),
    _set(
        "worker-recover",
        (_a("workerA", "worker"), _a("detector", "detector", FORTY), _a("workerB", "worker", FORTY)),
        when=at(5),
        setup="claimed",
        note="00:05 starts at 00:05 and outlives its 30 s lease: a recovery against its commit",
    ),
    _set(
        "manual-settle",
        (_a("manual", "manual"), _a("detector", "detector")),
        when=at(6, 10),
        note="00:05 unclaimed 70 s past: an ad-hoc run relinks the head the detector settles",
    ),
    _set(
        "manual-lost-response",
        (_a("manual", "manual"), _a("worker", "worker", arg=2)),
        setup="claimed",
        budget=Budget(crashes=0, lost=1),
        note="an ad-hoc request whose answer is lost tries again; 00:05, claimed, lies behind it",
    ),
    _set(
        "delete-tick-manual",
        (_a("registrar", "change", arg="delete"), _a("tick", "tick"), _a("manual", "manual")),
        budget=Budget(crashes=1, stale=1),
        note="a delete against a claim and an ad-hoc run: the deleted job keeps no head",
    ),
    _set(
        "manual-manual",
        (_a("manualA", "manual"), _a("manualB", "manual")),
        note="two ad-hoc runs relink one head",
    ),
    _set(
        "paused-resume-retime",
        (_a("resume", "change", arg="resume"), _a("registrar", "change", arg=retime(NEW))),
        setup="paused",
        note="paused at 00:03 (no head): a resume and a retime, both on the state alone",
    ),
    _set(
        "stale-claim-across-settle",
        (_a("tick", "tick"), _a("detector", "detector", 55 * SECOND), _a("worker", "worker", 55 * SECOND)),
        when=at(6, 10),
        budget=Budget(crashes=0, stale=1, dups=1),
        note="a frozen claimer holding 00:05's entry across its settle, and the next head's claim",
    ),
)

SETS: dict[str, ActorSet] = {**CORE, **NEW_SETS, **HARD}


# --- the model's mutants and repairs, as product mutants -------------------------------------------
#
# Each: what it does to the product, and the set that must catch it (the model's catcher). Two
# map to condition parts (``sim/mutants.py`` switches, ``<write>:<part>``: ``SUCCESSOR_SWITCHABLE``
# lifts the ``head_*`` skip for them); the others are code, not conditions, and are patched here
# where the product decides them.


def patched(module: ModuleType, name: str, replacement: Any) -> Callable[[], AbstractContextManager[None]]:
    """Replace ``name`` in ``module`` and in every ``jobsched.`` module that imported it by name
    (a function looks a name up in its own module's namespace)."""

    @contextmanager
    def patch() -> Iterator[None]:
        original = getattr(module, name)
        holders = [
            m
            for n, m in sorted(sys.modules.items())
            if n.startswith("jobsched.") and vars(m).get(name) is original
        ]
        for holder in holders:
            setattr(holder, name, replacement(original))
        try:
            yield
        finally:
            for holder in holders:
                setattr(holder, name, original)

    return patch


def _switch(*switches: str) -> Callable[[], AbstractContextManager[None]]:
    return lambda: switched_off(*switches)


def _both(*mutants: Callable[[], AbstractContextManager[None]]) -> Callable[[], AbstractContextManager[None]]:
    @contextmanager
    def both() -> Iterator[None]:
        with ExitStack() as stack:
            for mutant in mutants:
                stack.enter_context(mutant())
            yield

    return both


# The redispatch's own parts (the model's ``redispatch.status_scheduled``, ``redispatch.version``):
# mutant 3 alone is equivalent (H3 holds by the change's one transaction, so the run the detector
# would dispatch is already closed, and these parts stop its write); with them off it is caught
# (tests/explore/test_successor_model.py ``test_the_marker_mutant_is_stopped_by_the_redispatch_fence``).
REDISPATCH_FENCE = (
    "redispatch_head_op:_redispatch_status_scheduled",
    "redispatch_head_op:_redispatch_version",
)


def _without_marker(original: Callable[..., list[WriteOp]]) -> Callable[..., list[WriteOp]]:
    """Mutant 2: a change writes no closure marker at the old head's successor key."""

    def ops(*args: Any, **kwargs: Any) -> list[WriteOp]:
        return [op for op in original(*args, **kwargs) if op.label != head_change_writes.MARKER_LABEL]

    return ops


def _marker_is_claim(_original: Callable[[Mapping[str, Any]], bool]) -> Callable[[Mapping[str, Any]], bool]:
    """Mutant 3: the detector's judgement of a ``due`` entry reads no closure marker (it takes
    one at the head's successor key for a claim)."""
    return lambda _item: False


def _instant_keys(original: Callable[..., str]) -> Callable[..., str]:
    """Repair 1 undone: an occurrence's key is its instant alone, no epoch (the proposal as
    written, ``Protocol(keys="instant")``)."""

    def run_id_for(job_id: str, at: int, epoch: int = 0) -> str:  # noqa: ARG001
        return original(job_id, at)

    return run_id_for


def _epoch_from_state(original: Callable[[Mapping[str, Any]], int]) -> Callable[[Mapping[str, Any]], int]:
    """Repair 2 undone (``epoch_above_read=False``): a change's epoch is above the state's version
    only, not the head's and end marker's it read (``head_change.ChangeRead.of``)."""

    def epoch_of(item: Mapping[str, Any]) -> int:
        caller = sys._getframe(1)
        if caller.f_code.co_name == "<listcomp>" and caller.f_back is not None:
            caller = caller.f_back
        return 0 if caller.f_code.co_name == "of" else original(item)

    return epoch_of


def _after_now(original: Any) -> Any:
    """Repair 3 undone (``after_through=False``): a change's new head comes after the change's
    time alone, not after the last occurrence decided (``through``). The product computes both
    from one read (``head_change.ChangeRead``): its ``through`` is set to the change's time, which
    the new head's ``through`` then carries too (the model keeps it; a closer cut needs a seam in
    ``plan_head_change``), and so is its floor of the newest live record read (``recorded``,
    which holds the claimed run too)."""

    def of(*args: Any, **kwargs: Any) -> Any:
        read = original(*args, **kwargs)
        return dataclasses.replace(read, through=read.at, recorded=read.at)

    return classmethod(lambda _cls, *args, **kwargs: of(*args, **kwargs))


@contextmanager
def _patched_attr(owner: Any, name: str, replacement: Callable[[Any], Any]) -> Iterator[None]:
    original = owner.__dict__[name]
    setattr(owner, name, replacement(getattr(owner, name)))
    try:
        yield
    finally:
        setattr(owner, name, original)


@dataclass(frozen=True)
class Mutant:
    name: str
    model: str  # the model's protocol switch
    apply: Callable[[], AbstractContextManager[None]]
    catcher: str  # the set that must catch it (the model's)
    expected: str  # what the catcher reports (k=1)


MUTANTS: dict[str, Mutant] = {
    m.name: m
    for m in (
        Mutant(
            "claim without attribute_not_exists",
            "dropped claim.successor_absent",
            _switch("claim_head_op:_successor_absent"),
            "claim-stale-change",
            head_invariants.ONE_LIVE_RECORD,
        ),
        Mutant(
            "change without its closure marker",
            "change_marker=False",
            patched(head_change_writes, "head_change_ops", _without_marker),
            "claim-stale-change",
            head_invariants.ONE_HEAD,
        ),
        Mutant(
            "detector takes a closure marker for a claim",
            "marker_is_claim=True",
            _both(patched(head_recover, "is_closure_marker", _marker_is_claim), _switch(*REDISPATCH_FENCE)),
            "settle-change",
            head_invariants.CLOSED_HEAD,
        ),
        Mutant(
            "ad-hoc run without its ConditionCheck",
            "adhoc_check=False",
            _switch("relink_head_ops:_relink_successor_absent"),
            "tick-manual",
            head_invariants.ADHOC_BEHIND_CLAIMED,
        ),
    )
}
REPAIRS: dict[str, Mutant] = {
    m.name: m
    for m in (
        Mutant(
            "instant keys",
            'keys="instant"',
            patched(run, "run_id_for", _instant_keys),
            "retime-onto-claimed",
            head_invariants.ONE_LIVE_RECORD,
        ),
        Mutant(
            "epoch above the state's version only",
            "epoch_above_read=False",
            patched(head, "epoch_of", _epoch_from_state),
            "retime-there-and-back",
            "unexpected_exception",  # DynamoDB refuses a transaction touching one item twice
        ),
        Mutant(
            "new head after the change's time only",
            "after_through=False",
            lambda: _patched_attr(head_change.ChangeRead, "of", _after_now),
            "retime-onto-claimed",
            head_invariants.ONE_LIVE_RECORD,
        ),
    )
}
