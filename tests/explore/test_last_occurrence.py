"""A life's last occurrence is no occurrence "at a change" (docs/promises.md, "Every due
occurrence"): the exception that lets an occurrence due within the clock skew of a change go
unrecorded (the change may have withdrawn it) is limited to stretches a change ended. A life
its own schedule ends (an ``at()`` job's only occurrence, a ``max_runs`` life's last, an
``end`` date) ends its stretch at its last occurrence too; before, that occurrence was excused
like a change's, and a product that never ran it went unreported by all three lost-occurrence
checks (the product explorer's, the successor explorer's and chaos's; chaos's seed:
tests/sim/test_chaos.py ``MUTANT_RUNS["last_claim"]``). The mutant ``last_claim``
(sim/mutants.py) drops that occurrence on both paths."""

from __future__ import annotations

from jobsched_tools.explore import successor
from jobsched_tools.explore.model import MINUTE, T0, ActorSet
from jobsched_tools.explore.scenarios import actor_spec
from jobsched_tools.explore.search import explore
from jobsched_tools.explore.sets_successor_mis import explore as explore_mis
from jobsched_tools.sim.invariants import occurrences, segments, withdrawable
from jobsched_tools.sim.ledger import StateMark
from jobsched_tools.sim.mutants import mutant

RATE = (("schedule", "rate(1 minute)"), ("timezone", "UTC"))
WINDOW_END = T0 + 60 * MINUTE
MARGIN = 3_000  # the clock skew and a second


def _stretch(marks: list[StateMark]) -> tuple[bool, set[int]]:
    (span,) = segments(marks, WINDOW_END)
    stretch = occurrences(span.timing, span.start, min(span.end, WINDOW_END))
    return span.by_change, withdrawable(span, stretch, WINDOW_END, MARGIN)


def test_only_a_change_withdraws_an_occurrence_at_a_stretch_s_end() -> None:
    """A pause 1 s after 00:05 came due may have withdrawn it (by the pausing actor's clock it was
    not due yet); a life finished by its schedule at 00:05 withdrew nothing: 00:05 must run."""
    active = StateMark(T0, "active", RATE, T0 + MINUTE, None)
    paused = StateMark(T0 + 5 * MINUTE + 1_000, "paused", RATE, None, None)
    assert _stretch([active, paused]) == (True, {T0 + 5 * MINUTE})
    finished = StateMark(T0 + 4 * MINUTE, "finished", RATE, None, T0 + 5 * MINUTE)
    assert _stretch([active, finished]) == (False, set())
    # A retime (a new timing) ends the stretch by a change too; the window's end withdraws nothing.
    two_minutes = (("schedule", "rate(2 minutes)"),)
    retimed = StateMark(T0 + 5 * MINUTE + 1_000, "active", two_minutes, T0 + 6 * MINUTE)
    (span, _) = segments([active, retimed], WINDOW_END)
    assert span.by_change
    assert _stretch([active]) == (False, set())


def _claimed_and_run(name: str, **fields: object) -> ActorSet:
    return ActorSet(name, (actor_spec("tick", "tick"), actor_spec("worker", "worker")), **fields)  # type: ignore[arg-type]


def test_the_explorer_reports_a_life_s_last_occurrence_never_run() -> None:
    """Today's claim: a tick at 00:04 claims a one-time job's 00:05 (and a ``max_runs`` 1 life's),
    a worker runs it. Under ``last_claim`` the claim finishes the job without its run."""
    for actor_set in (
        _claimed_and_run("at-claim", schedule="at(2026-12-01T00:05:00)"),
        _claimed_and_run("max-runs-claim", job=(("max_runs", 1),)),
    ):
        assert dict(explore(actor_set, 0).counts) == {}
        with mutant("last_claim"):
            result = explore(actor_set, 0)
        assert set(result.counts) == {"lost_occurrence"}, dict(result.counts)


def test_the_successor_explorer_reports_a_life_s_last_occurrence_never_run() -> None:
    """The successor claim: the claim of ``at(00:05)``'s head puts the end marker; under
    ``last_claim`` the finish write cancels the head before it starts. The head invariants (H2,
    H4) catch that write too; the final checks alone (no write invariants) must report the loss."""
    assert dict(explore_mis("one-time-settle", 0, invariants=()).counts) == {}
    with successor.own_setups(), mutant("last_claim"):
        result = explore_mis("one-time-settle", 0, invariants=())
    assert set(result.counts) == {"lost_occurrence"}, dict(result.counts)
