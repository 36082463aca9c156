"""Shape f's model extended to eventually consistent reads, long runs (heartbeats, the recheck),
two detectors and worker adoption (docs/proposals/successor-model.md, "Reads, heartbeats,
detectors, adoption"): every set holds at k=2; each new condition part removed alone (or with its
named partners) is caught; the extension's mutants are caught; adoption starts a stale-page claim
at its instant, where the base rule waits for the redispatch.
"""

from __future__ import annotations

import dataclasses

import pytest
from jobsched_tools.successor.search import explore, play
from jobsched_tools.successor.sets import at
from jobsched_tools.successor.sets_reads import READS_MUTANTS, READS_SETS
from jobsched_tools.successor.writes import Protocol


@pytest.mark.parametrize("name", sorted(READS_SETS))
def test_every_reads_set_holds_at_k2(name: str) -> None:
    result = explore(READS_SETS[name], 2)
    assert result.schedules > 0 and not result.truncated
    assert dict(result.counts) == {}, [f.headline() for f in result.first.values()]


def test_a_stale_successor_read_costs_only_a_failed_put() -> None:
    """tickB's eventually consistent read says "absent" after tickA's claim: its put fails on
    ``claim.successor_absent`` (a unit spent), and nothing else happens."""
    script = [
        ("tickA", "rest", ""),
        ("tickB", "through", "(eventual)", "lag"),
        ("tickB", "rest", ""),
    ]
    world = play(READS_SETS["eventual-tick-tick"], script)
    assert world.ledger.races == {"claim.successor_absent": 1}
    assert world.ledger.findings == []


def test_a_stale_absent_makes_the_settle_fail_on_the_successor() -> None:
    """The detector's lagging read of the successor says "absent" after a late claim: the settle
    it then tries fails on ``settle.successor_absent``; without that part it closes a claimed run."""
    script = [
        ("tick", "rest", ""),
        ("detector", "through", "00:10:00Z#1 (eventual)", "lag"),
        ("detector", "rest", ""),
    ]
    world = play(READS_SETS["eventual-settle"], script)
    assert world.ledger.races["settle.successor_absent"] == 1
    assert world.ledger.findings == []
    mutant = play(
        READS_SETS["eventual-settle"], script, Protocol(dropped=frozenset({"settle.successor_absent"}))
    )
    assert "H2_claimed_closed" in {f.check for f in mutant.ledger.findings}


def test_a_stale_present_entry_of_a_committed_run_is_stopped_by_its_status() -> None:
    """The index page and the detector's read of the run both show it running at its old lease,
    after its commit: the recovery fails on ``recover.status_running`` alone (a commit moves no
    token and no lease); without it, a committed run is recovered."""
    script = [
        ("workerA", "rest", ""),
        ("detector", "through", "query due", "stale"),
        ("detector", "through", "(eventual)", "lag"),
        ("detector", "rest", ""),
    ]
    world = play(READS_SETS["stale-entry-committed"], script)
    assert world.ledger.races["recover.status_running"] == 1
    assert world.ledger.findings == []
    mutant = play(
        READS_SETS["stale-entry-committed"], script, Protocol(dropped=frozenset({"recover.status_running"}))
    )
    assert "recovered_not_running" in {f.check for f in mutant.ledger.findings}


@pytest.mark.parametrize(
    ("part", "name", "check"),
    [
        ("recover.lease_as_read", "long-run-heartbeats", "recovered_while_fresh"),
        ("recover.status_running", "stale-entry-committed", "recovered_not_running"),
        ("recheck.status_running", "long-run-heartbeats", "finished_in_due"),
    ],
)
def test_a_reads_part_removed_alone_is_caught(part: str, name: str, check: str) -> None:
    assert check in explore(READS_SETS[name], 2, Protocol(dropped=frozenset({part}))).counts


@pytest.mark.parametrize(
    ("parts", "name", "check"),
    [
        # Two detectors: the second one's recovery of the run the first recovered and workerB
        # started. The new start moved the lease, so the lease part stops it too.
        (("recover.version", "recover.lease_as_read"), "two-detectors", "recovered_while_fresh"),
        (("heartbeat.version", "heartbeat.owner"), "late-heartbeat-recover", "lease_cut"),
    ],
)
def test_a_reads_part_is_caught_with_its_partners(parts: tuple[str, ...], name: str, check: str) -> None:
    assert check in explore(READS_SETS[name], 2, Protocol(dropped=frozenset(parts))).counts


@pytest.mark.parametrize("mutant", sorted(READS_MUTANTS))
def test_the_reads_mutants_are_caught(mutant: str) -> None:
    proto, name, check = READS_MUTANTS[mutant]
    assert check in explore(READS_SETS[name], 2, proto).counts


def test_adoption_starts_a_stale_page_claim_at_its_instant() -> None:
    """HC3: the ad-hoc run relinks the head (version 2), then the claimer's stale page claims it
    and sends version 1. The adopting worker starts it at 00:05; the base rule deletes the message
    and the run waits for the redispatch, which the head's entry (at its instant) allows only
    after 00:05 plus the skew allowance: here the 00:05:10 sweep."""
    actor_set = READS_SETS["adopt-vs-redispatch"]
    script = [("worker", "rest", ""), ("detector", "rest", "")]
    run_id = "j@2026-12-01T00:05:00Z#1"
    adopted = play(actor_set, script)
    plain_actors = tuple(
        dataclasses.replace(a, kind="plain") if a.kind == "adopter" else a for a in actor_set.actors
    )
    waited = play(dataclasses.replace(actor_set, actors=plain_actors), script)
    assert adopted.ledger.findings == [] and waited.ledger.findings == []
    assert adopted.runs()[run_id]["started_at"] == at(5)
    assert waited.runs()[run_id]["started_at"] == at(5, 10)
    assert waited.ledger.races["start.version"] >= 1


def test_two_detectors_race_the_recovery_token() -> None:
    """The part the base model could not exercise (one detector a schedule) stops a write here,
    with the status and lease parts it is partnered with."""
    races = set(explore(READS_SETS["two-detectors"], 2).races)
    assert {"recover.version", "recover.status_running", "recover.lease_as_read"} <= races
