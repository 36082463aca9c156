"""Shape f, the successor claim, as an explored model (docs/proposals/successor-model.md, "The
model: results"): every set holds at k=2 with the repaired keys; the proposal as written (every
record keyed by its instant) fails; the proposal's four mutants and the repairs' own are caught.
"""

from __future__ import annotations

import pytest
from jobsched_tools.successor.search import explore, play
from jobsched_tools.successor.sets import MUTANTS, SETS
from jobsched_tools.successor.writes import ALL_PARTS, Protocol

AS_WRITTEN = Protocol(keys="instant")


@pytest.mark.parametrize("name", sorted(SETS))
def test_every_set_holds_at_k2(name: str) -> None:
    result = explore(SETS[name], 2)
    assert result.schedules > 0 and not result.truncated
    assert dict(result.counts) == {}, [f.headline() for f in result.first.values()]


def test_the_sets_race_every_condition_part() -> None:
    """Each named part stops some write in some explored schedule, but four that nothing in the
    model races (the docs say why: one detector; keys of an epoch only its head names)."""
    raced: set[str] = set()
    for name in (
        "settle-change",
        "worker-recover",
        "manual-lost-response",
        "manual-retime",
        "retime-there-and-back",
        "tick-manual",
    ):
        raced |= set(explore(SETS[name], 2).races)
    unraced = {"recover.version", "settle.missed_absent", "settle.next_head_absent", "change.new_head_free"}
    assert set(ALL_PARTS) - raced == unraced


@pytest.mark.parametrize(
    ("name", "check"),
    [
        # 5 to 3 minutes: 00:15, the old head's successor, holds a closure marker; the new timing's
        # claim of 00:12 meets it, and 00:12 is a head behind a marker that nothing runs.
        ("tick-retime", "H3_closed_head"),
        ("tick-retime", "occurrence_lost"),
        # 5 to 10 minutes: the closure marker and the new head are one key in one transaction.
        ("claim-stale-change", "actor_error"),
        # A resume's first occurrence is the paused (cancelled) head's key: its put never lands.
        ("pause-resume-same-instant", "change_never_applied"),
        ("retime-onto-head", "actor_error"),
        ("retime-onto-claimed", "H1_one_head"),
    ],
)
def test_the_proposal_as_written_fails(name: str, check: str) -> None:
    result = explore(SETS[name], 1, AS_WRITTEN)
    assert check in result.counts


def test_a_stale_claimer_meets_the_closure_marker() -> None:
    """The frozen trigger read the head and its empty successor key; the retime closes the head;
    the thawed put fails on the marker (its only condition part), and nothing is violated."""
    script = [
        ("tick", "through", "get run"),
        ("registrar", "rest", ""),
        ("tick", "rest", ""),
    ]
    world = play(SETS["claim-stale-change"], script)
    assert world.ledger.races["claim.successor_absent"] == 1
    assert world.ledger.findings == []
    as_written = play(SETS["claim-stale-change"], script, AS_WRITTEN)
    assert "a transaction may touch each item only once" in as_written.ledger.findings[0].detail


@pytest.mark.parametrize(
    ("mutant", "check"),
    [
        ("claim without attribute_not_exists", "occurrence_started_twice"),
        ("change without its closure marker", "H1_one_head"),
        ("ad-hoc run without its ConditionCheck", "adhoc_behind_claimed"),
    ],
)
def test_the_proposals_mutants_are_caught(mutant: str, check: str) -> None:
    proto, name = MUTANTS[mutant]
    assert check in explore(SETS[name], 2, proto).counts


def test_the_marker_mutant_is_stopped_by_the_redispatch_fence() -> None:
    """A detector that takes a closure marker for a claim is equivalent alone: H3 holds by the
    change's one transaction, so the run it would dispatch is already closed, and its redispatch's
    own parts stop the write (they race under the mutant only). With both removed, it is caught."""
    proto, name = MUTANTS["detector takes a closure marker for a claim"]
    alone = explore(SETS[name], 2, proto)
    assert dict(alone.counts) == {}
    assert {"redispatch.status_scheduled", "redispatch.version"} <= set(alone.races)
    assert not {"redispatch.status_scheduled", "redispatch.version"} & set(explore(SETS[name], 2).races)
    partners = frozenset({"redispatch.status_scheduled", "redispatch.version"})
    with_partners = Protocol(marker_is_claim=True, dropped=partners)
    assert "redispatched_early" in explore(SETS[name], 2, with_partners).counts
    assert dict(explore(SETS[name], 2, Protocol(dropped=partners)).counts) == {}


def test_a_change_epoch_from_the_state_alone_is_caught() -> None:
    """The repair's own condition: a state read before a racing change would reuse that change's
    epoch, and so its head's key, in one transaction (DynamoDB refuses it)."""
    result = explore(SETS["retime-there-and-back"], 2, Protocol(epoch_above_read=False))
    assert "actor_error" in result.counts


def test_a_change_heading_its_timing_after_now_alone_is_caught() -> None:
    """The first-occurrence rule: a retime at 00:04:30 to 150 s, 00:05 claimed, heads 00:07:30;
    heading the first occurrence after now alone (00:05) runs 00:05 twice."""
    result = explore(SETS["retime-onto-claimed"], 2, Protocol(after_through=False))
    assert "occurrence_started_twice" in result.counts


@pytest.mark.parametrize(
    ("part", "name", "check"),
    [
        ("claim.successor_absent", "claim-settle", "H2_claimed_closed"),
        ("start.version", "detector-worker", "I4_stale_start"),
        ("commit.version", "worker-recover", "stale_commit"),
        ("recover.status_running", "worker-recover", "committed_twice"),
        ("settle.head_version", "manual-settle", "I3_unreachable"),
        ("settle.successor_absent", "claim-settle", "H2_claimed_closed"),
        ("change.state_version", "paused-resume-retime", "H1_one_head"),
        ("change.head_version", "manual-retime", "I3_unreachable"),
        ("change.marker_absent", "tick-retime", "H2_claimed_closed"),
        ("adhoc.run_absent", "manual-lost-response", "I3_unreachable"),
        ("adhoc.head_version", "manual-manual", "I3_unreachable"),
        ("adhoc.successor_absent", "tick-manual", "adhoc_behind_claimed"),
    ],
)
def test_a_condition_part_removed_alone_is_caught(part: str, name: str, check: str) -> None:
    assert check in explore(SETS[name], 2, Protocol(dropped=frozenset({part}))).counts


@pytest.mark.parametrize(
    ("parts", "name", "check"),
    [
        # Every write that moves a run out of scheduled also bumps its token.
        (("start.status_scheduled", "start.version"), "detector-worker", "started_twice"),
        # Every write that moves a run out of running bumps its token, but the commit itself.
        (("commit.status_running", "commit.version"), "worker-recover", "committed_twice"),
        # A redispatch sets no status: each part alone is covered by the other.
        (("redispatch.status_scheduled", "redispatch.version"), "detector-worker", "live_run_fenced"),
        # Every write that takes the head out of scheduled writes its successor key too.
        (("settle.head_scheduled", "settle.successor_absent"), "claim-settle", "H2_claimed_closed"),
        (("change.head_scheduled", "change.marker_absent"), "tick-retime", "H2_claimed_closed"),
        (
            ("adhoc.head_scheduled", "adhoc.head_version", "adhoc.successor_absent"),
            "manual-retime",
            "I3_unreachable",
        ),
    ],
)
def test_a_redundant_part_is_caught_with_its_partners(parts: tuple[str, ...], name: str, check: str) -> None:
    assert check in explore(SETS[name], 2, Protocol(dropped=frozenset(parts))).counts
