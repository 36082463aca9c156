"""The successor model's misfire / ``max_runs`` / backfill sets (tools/jobsched_tools/successor/
sets_mis.py) on the product's explorer on a successor-shaped stack (``successor.py``): the same
names, actors, times and fault budgets, the real services (the trigger's claim of a life's last
run and its finish write, the detector's chunked settle under the job's misfire policy, the
operations' backfill through the head), and two sets of the finish write the model does not
model (``finish-*``).

The model's actors act at absolute times; here a set's base time (``at``) is its earliest actor's
and the others act later by their clock offset. Where the model names an instant with no record
before the head (00:02), the product's backfill takes occurrences of the job's schedule only:
that instant is 23:55 of the day before (``BEFORE``), an occurrence before the job was registered,
which holds no record either. The model settles in chunks of two occurrences (an outage takes
two transactions); the product's chunk is ``head_settle.HEAD_SETTLE_CHUNK``, so the outage sets
run with chunks of two (``SMALL_CHUNKS``, ``explore``).

Each part of the extension's writes (core/transitions/head_*.py) has here the set that catches it
switched off (``CATCHERS``), or a written reason it cannot be caught alone (``UNCAUGHT``), backed
where it says "redundant" by the partners it is caught with (``PAIRS``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from functools import partial
from typing import Any

from jobsched.core import head_invariants
from jobsched.core.transitions import head_settle

from jobsched_tools.explore import successor
from jobsched_tools.explore.model import MINUTE, T0, ActorSet, ActorSpec, by_name
from jobsched_tools.explore.search import Result
from jobsched_tools.explore.sets_successor import NEW, at, patched, retime
from jobsched_tools.explore.world import Budget

BEFORE = T0 - 5 * MINUTE  # 23:55: an occurrence of the timing before the job was registered
OUTAGE = at(20, 50)
LATE_TICK = at(19, 50)  # a trigger behind the detector's clock: its page still holds 00:15
# The model's trigger claims a head of any age; the product's only within the job's grace
# (``trigger_lookback_seconds`` capped by it). With 5 minutes, the late tick claims 00:15 (4:50
# old by its clock), and the detector's fates are the model's: 00:05, 00:10, 00:15 overdue (older
# than 20:50 - 5 min), 00:20 late.
OUTAGE_GRACE_S = 300
# The late claim of a head the detector finds overdue (60 s grace): a tick 50 s after it, whose
# clock is 20 s behind the detector's.
LATE_CLAIM, SETTLE = at(5, 50), at(6, 10)


def _a(name: str, kind: str, when: int, base: int, arg: object = None) -> ActorSpec:
    return ActorSpec(name, kind, when - base, arg)


def _misfire(policy: str, grace_seconds: int = 60) -> tuple[tuple[str, Any], ...]:
    return (("misfire", {"policy": policy, "grace_seconds": grace_seconds, "max_catchup": 1}),)


def _mis_set(
    name: str,
    actors: Sequence[tuple[str, str, int, object]],
    *,
    job: tuple[tuple[str, Any], ...] = _misfire("skip"),
    setup: str = "registered",
    budget: Budget | None = None,
    window_end: int = at(10),
    schedule: str = "rate(5 minutes)",
    note: str = "",
) -> ActorSet:
    base = min(when for _, _, when, _ in actors)
    return ActorSet(
        name,
        tuple(_a(actor, kind, when, base, arg) for actor, kind, when, arg in actors),
        setup=setup,
        at=base,
        window_end=window_end,
        budget=budget if budget is not None else Budget(crashes=1),
        schedule=schedule,
        job=job,
        note=note,
    )


def _outage(name: str, policy: str, *more: tuple[str, str, int, object], note: str) -> ActorSet:
    actors = (("detector", "detector", OUTAGE, None), ("tick", "tick", LATE_TICK, None), *more)
    return _mis_set(name, actors, job=_misfire(policy, OUTAGE_GRACE_S), window_end=at(25), note=note)


def _backfill(instant: int) -> tuple[int, int]:
    """The range of one occurrence (``Operations.backfill`` runs those in (start, end])."""
    return (instant - MINUTE, instant)


SETS_MIS: dict[str, ActorSet] = by_name(
    # Misfire: an outage settled in two chunks, against a late claim of the chunk's head.
    _outage("outage-skip", "skip", note="skip: 00:05, 00:10, 00:15 missed, 00:20 late, in two chunks"),
    _outage(
        "outage-run-all",
        "run_all",
        note="run_all (max_catchup 1): 00:05 runs, 00:10 and 00:15 missed, 00:20 late",
    ),
    _outage("outage-run-once", "run_once", note="run_once: 00:15 runs, 00:05 and 00:10 missed, 00:20 late"),
    _outage(
        "outage-change",
        "run_all",
        ("registrar", "change", OUTAGE, "pause"),
        note="a pause meets the overdue head: it settles it under the policy first",
    ),
    # max_runs and one-time jobs: the end marker.
    _mis_set(
        "last-claim-change",
        (("tick", "tick", at(4), None), ("registrar", "change", at(4), retime(NEW))),
        job=(("max_runs", 1), *_misfire("skip")),
        budget=Budget(crashes=1, stale=1),
        window_end=at(20),
        note="max_runs 1: the claim of 00:05 puts the end marker; a retime races it",
    ),
    _mis_set(
        "last-claim-settle",
        (("tick", "tick", LATE_CLAIM, None), ("detector", "detector", SETTLE, None)),
        job=(("max_runs", 1), *_misfire("skip")),
        budget=Budget(crashes=1, stale=1),
        window_end=at(20),
        note="max_runs 1: 00:05 unclaimed 70 s past: the late claim (the end) against the settle",
    ),
    _mis_set(
        "max-runs-chain",
        (("tickA", "tick", at(4), None), ("tickB", "tick", at(9), None), ("worker", "worker", at(9), 2)),
        job=(("max_runs", 2), *_misfire("skip")),
        budget=Budget(crashes=1, lost=1),
        window_end=at(20),
        note="max_runs 2: two claims, the second puts the end marker; nothing after it",
    ),
    _mis_set(
        "one-time-settle",
        (("tick", "tick", LATE_CLAIM, None), ("detector", "detector", SETTLE, None)),
        job=_misfire("run_once"),
        schedule="at(2026-12-01T00:05:00)",
        budget=Budget(crashes=1, stale=1),
        window_end=at(20),
        note="at(00:05), run_once: 00:05 overdue: the settle's run and end against a late claim",
    ),
    # Backfill: one live record per instant.
    _mis_set(
        "backfill-settle",
        (("backfill", "backfill", at(11, 10), _backfill(at(10))), ("detector", "detector", at(11, 10), None)),
        budget=Budget(crashes=1, lost=1),
        note="00:05 and 00:10 overdue: a backfill of 00:10 against their settle: refused, or the rerun",
    ),
    _mis_set(
        "backfill-past-settle",
        (("backfill", "backfill", at(11, 10), _backfill(BEFORE)), ("detector", "detector", at(11, 10), None)),
        note="23:55 (no record, before the overdue head) backfilled: its relink against the settle",
    ),
    _mis_set(
        "backfill-backfill",
        (
            ("backfillA", "backfill", at(6, 30), _backfill(at(5))),
            ("backfillB", "backfill", at(6, 30), _backfill(at(5))),
            ("worker", "worker", at(6, 30), None),
        ),
        setup="settled",
        budget=Budget(lost=1),
        note="00:05 missed: two backfills of it (rerun in place once), one started as B reads",
    ),
    _mis_set(
        "backfill-two-instants",
        (
            ("backfillA", "backfill", at(6, 30), _backfill(at(5))),
            ("backfillB", "backfill", at(6, 30), _backfill(BEFORE)),
        ),
        setup="settled",
        budget=Budget(),
        note="00:05 missed: its rerun and a backfill of 23:55 relink one head",
    ),
    _mis_set(
        "backfill-same-instant",
        (
            ("backfillA", "backfill", at(6, 30), _backfill(BEFORE)),
            ("backfillB", "backfill", at(6, 30), _backfill(BEFORE)),
            ("worker", "worker", at(6, 30), None),
        ),
        setup="settled",
        budget=Budget(),
        note="23:55 (no record) backfilled twice at once: one record at its backfill key",
    ),
    _mis_set(
        "backfill-tick",
        (
            ("backfill", "backfill", at(8, 40), _backfill(BEFORE)),
            ("tick", "tick", at(8, 40), None),
            ("registrar", "change", at(8, 40), retime(NEW)),
        ),
        setup="settled",
        note="23:55 (no record) backfilled against the claim of 00:10 and a retime",
    ),
    # The model's ``manual-lost-response`` with its retry (the base port's manual actor gives up
    # when its answer is lost): the ad-hoc run's own put against the request sent again.
    _mis_set(
        "manual-retry-lost-response",
        (("manual", "manual_retry", at(4), None), ("worker", "worker", at(4), 2)),
        job=(),
        setup="claimed",
        budget=Budget(crashes=0, lost=1),
        note="an ad-hoc request whose answer is lost is sent again; 00:05, claimed, lies behind it",
    ),
    # The finish write (HC5; not in the model): the trigger's, after its claim put the end marker.
    _mis_set(
        "finish-raise",
        (("tick", "tick", at(4), None), ("registrar", "change", at(4), "max_runs:2")),
        job=(("max_runs", 1), *_misfire("skip")),
        budget=Budget(crashes=1),
        window_end=at(12),
        note="max_runs 1: the claim of 00:05 ends the life; a raise to 2 races the trigger's finish",
    ),
)
# The outage sets: the settle takes two chunks (as the model's ``chunk=2``).
CHUNKED = frozenset(name for name in SETS_MIS if name.startswith("outage-"))


@contextmanager
def small_chunks(occurrences: int = 2) -> Iterator[None]:
    """The settler's chunks of ``occurrences`` (the product's default decides 96 at once)."""
    with patched(head_settle, "settle_head_ops", lambda original: partial(original, chunk=occurrences))():
        yield


def explore(
    name: str, k: int, stop_on_first: bool = False, invariants: Sequence[str] = successor.ALL_SUCCESSOR
) -> Result:
    """``successor.explore`` of one of these sets, with its chunking."""
    chunks: AbstractContextManager[None] = small_chunks() if name in CHUNKED else nullcontext()
    with chunks:
        return successor.explore(SETS_MIS[name], k, invariants, stop_on_first=stop_on_first)


# --- the model's mutants of the misfire rules, as product mutants ----------------------------------


@contextmanager
def _in_settle(name: str, replacement: Callable[[Any], Any]) -> Iterator[None]:
    """``name`` replaced in core/transitions/head_settle.py alone (the settle's own use of it)."""
    original = getattr(head_settle, name)
    setattr(head_settle, name, replacement(original))
    try:
        yield
    finally:
        setattr(head_settle, name, original)


def _each_chunk_alone(original: Callable[..., Any]) -> Callable[..., Any]:
    """``more_follow=False``: ``run_once`` runs each chunk's latest overdue occurrence, though
    more chunks of the outage follow (two runs of one outage)."""
    return lambda *args, **_kwargs: original(*args[:5], more_follow=False)


def _catchups_forgotten(original: Callable[..., Any]) -> Callable[..., Any]:
    """``carry_catchups=False``: a chunk's next head starts the outage's catch-up count again."""

    def item(*args: Any, **kwargs: Any) -> Any:
        if "catchups" in kwargs:
            kwargs["catchups"] = 0
        return original(*args, **kwargs)

    return item


# Each: the model's switch, the product's code it undoes, the set that catches it (k=0), and what
# it reports. The model's other four are not ported: ``resume_after_chunk`` and ``close_end_key``
# have no seam short of editing the settle (the product refuses a chunk whose end misses the head's
# successor key, ``settle_head_ops``' ValueError); ``change_settles_first`` is the registrar's
# ``SettleFirst``; ``refuse_at_head`` undone puts a backfill at the head's successor key, which the
# same transaction's check reads: DynamoDB refuses it (one item twice).
MUTANTS_MIS: dict[str, tuple[str, Callable[[], AbstractContextManager[None]], str, str]] = {
    "run_once runs each chunk's latest (no more_follow)": (
        "more_follow=False",
        lambda: _in_settle("plan_misfire", _each_chunk_alone),
        "outage-run-once",
        successor.POLICY_FATE,
    ),
    "a chunk's head forgets the outage's catch-ups": (
        "carry_catchups=False",
        lambda: _in_settle("head_item", _catchups_forgotten),
        "outage-run-all",
        successor.POLICY_FATE,
    ),
}


# --- the parts: each one's catcher, or why it has none ------------------------------------------------

# Each part switched off alone (``sim/mutants.switched_off``): the set that catches it, at k, and
# what it reports (the set holds with the part on: tests/explore/test_successor_mis_explorer.py).
CATCHERS: dict[str, tuple[str, int, str]] = {
    # A raise of max_runs (a new life: a head of a new epoch, the state's version moved) lands
    # between the trigger's read and its finish write: the job reads finished beside its head.
    "finish_life_ops:_state_as_read": ("finish-raise", 1, head_invariants.ONE_HEAD),
    # The request sent again after its answer was lost puts the run over itself, linked behind
    # itself (the model's ``adhoc.run_absent``, ``manual-lost-response``: I3).
    "adhoc_run_with_head_ops:_adhoc_run_absent": (
        "manual-retry-lost-response",
        1,
        head_invariants.UNREACHABLE,
    ),
    # A late claim of the head (its end marker, max_runs 1) lands between the detector's read and
    # its settle: the settle's closure of the end key overwrites it (the model's
    # ``catchup.successor_absent``; also outage-skip, outage-run-all, one-time-settle).
    "settle_head_ops:_settle_successor_absent": ("last-claim-settle", 1, head_invariants.CLAIMED_CLOSED),
    # A backfill's relink of the head lands between the detector's read and its settle: the
    # settle links its records behind the head's old link, and the backfill's run falls out of
    # the chain (the model's ``catchup.head_version``).
    "_decide_head:_head_version": ("backfill-past-settle", 1, head_invariants.UNREACHABLE),
}
# Parts no set catches alone, and why (the form of tests/sim/test_switches.py ``UNCAUGHT``): a
# reason that says "redundant" is backed by ``PAIRS``; the others by a test that the explored
# outcomes are the same without the part.
UNCAUGHT: dict[str, str] = {
    "_decide_head:_head_scheduled": "redundant: every write that takes a head out of scheduled (its "
    "start, a change's close, a settle) moves its version, and a head leaves scheduled only once its "
    "successor key is written (a claim before its start, a change's marker, a settle's first put): "
    "the head's version part and the chunk's successor part fail first (the model's "
    "catchup.head_scheduled; the pair: PAIRS)",
    "backfill_with_head_ops:_backfill_record_absent": "redundant: every backfill relinks the head in "
    "its transaction, on the head's version as read, and reads the job again before it tries again "
    "(an instant with a record then 'ran already'), so two puts at one backfill key race on the head's "
    "version first (the model's backfill.run_absent; the pair: PAIRS)",
    "settle_head_ops:_missed_absent": "never fails: keys after the head's successor, in its epoch, are "
    "written only by the claims of their predecessors, which need that successor first, and the chunk's "
    "first put holds it (settle_head_ops:_settle_successor_absent fails first); a backfill writes before "
    "the head only, a change in a new epoch (the model's settle.missed_absent; the explored outcomes "
    "are the same without it)",
    "settle_head_ops:_next_head_absent": "never fails, as settle_head_ops:_missed_absent: the next head's "
    "key lies after the chunk's first put (the model's settle.next_head_absent; the explored outcomes "
    "are the same without it)",
    "_closed_end_key:_settle_successor_absent": "not reached: its one caller, settle_head_ops, always "
    "passes its own successor part (the closure of the end key is the chunk's first put, at the head's "
    "successor key), so this fallback is never built; switching that part off "
    "(settle_head_ops:_settle_successor_absent) is what takes the end key's condition away, and "
    "last-claim-settle catches it",
    "finish_life_ops:_end_marker_written": "never fails: the finish write is built from an end marker "
    "read at its key (the trigger's after its claim, the reconcile pass's, an ad-hoc request's), and "
    "no write moves an end marker (every put at an end key is conditional on attribute_not_exists; "
    "none updates or deletes one); it stops a finish only when a put's condition is gone "
    "(with settle_head_ops:_settle_successor_absent off the settle's closure overwrites the marker; "
    "the explored outcomes are the same without it)",
}
# The redundant parts switched off with their partners: the set that catches them, k, the report.
PAIRS: dict[tuple[str, ...], tuple[str, int, str]] = {
    ("_decide_head:_head_scheduled", "settle_head_ops:_settle_successor_absent"): (
        "last-claim-settle",
        1,
        head_invariants.CLAIMED_CLOSED,
    ),
    ("backfill_with_head_ops:_backfill_record_absent", "relink_head_ops:_head_version"): (
        "backfill-same-instant",
        1,
        "record_overwritten",
    ),
}
# The parts whose reason says the explored outcomes do not change without them, and the sets that
# build them: (set, bound, the settle's chunk: None for the product's 96). A chunk of three puts
# a second record after the head (``_missed_absent``; the first is at the head's successor key).
SAME_OUTCOMES: dict[str, tuple[tuple[str, int, int | None], ...]] = {
    "settle_head_ops:_missed_absent": (("outage-skip", 1, 3), ("outage-run-all", 1, None)),
    "settle_head_ops:_next_head_absent": (("outage-run-once", 1, 2), ("last-claim-settle", 1, None)),
    "finish_life_ops:_end_marker_written": (("last-claim-settle", 1, None), ("finish-raise", 0, None)),
}
