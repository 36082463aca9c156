"""Shape f's model extended to misfire policies, ``max_runs`` and one-time jobs, and backfill
(docs/proposals/successor-model.md, "Misfire policies, the end of a life, and backfill"): every
set holds at k=2 with the rules; each rule's mutant and each condition part removed is caught.
"""

from __future__ import annotations

import pytest
from jobsched.core.job import MisfirePolicy
from jobsched_tools.successor.search import explore, play
from jobsched_tools.successor.sets import at
from jobsched_tools.successor.sets_mis import MUTANTS_MIS, SETS_MIS
from jobsched_tools.successor.writes import Protocol
from jobsched_tools.successor.writes_mis import MisProtocol


@pytest.mark.parametrize("name", sorted(SETS_MIS))
def test_every_set_holds_at_k2(name: str) -> None:
    result = explore(SETS_MIS[name], 2)
    assert result.schedules > 0 and not result.truncated
    assert dict(result.counts) == {}, [f.headline() for f in result.first.values()]


@pytest.mark.parametrize(
    ("mutant", "checks"),
    [
        ("run_once runs each chunk's latest (no more_follow)", {"policy_fate"}),
        ("a chunk's head forgets the outage's catch-ups", {"policy_fate"}),
        ("a chunk's head after now, not after the chunk", {"occurrence_lost"}),
        ("a change closes a due head missed (no settle first)", {"policy_fate", "occurrence_lost"}),
        ("a settle leaves a missed last head's end key empty", {"late_run_claimed", "after_end"}),
        ("a backfill at the head (no refusal)", {"one_live_record"}),
    ],
)
def test_each_rules_mutant_is_caught(mutant: str, checks: set[str]) -> None:
    proto, name = MUTANTS_MIS[mutant]
    assert checks <= set(explore(SETS_MIS[name], 2, proto).counts)


def test_a_change_deciding_only_the_head_loses_the_occurrences_after_it_even_under_skip() -> None:
    """The model's change rule (a due head closed missed) decides one occurrence: a pause that
    meets a head three occurrences behind leaves 00:10 and 00:15 with no record."""
    proto = MisProtocol(change_settles_first=False)
    assert "occurrence_lost" in explore(SETS_MIS["outage-change"], 1, proto).counts


def test_an_abandoned_chunked_settle_leaves_no_gap() -> None:
    """The detector dies after its first chunk ([00:05, 00:10]): the head that chunk left (00:15,
    overdue, carrying the outage's one catch-up) is the next sweep's, and run_all's budget holds
    across the two sweeps: 00:05 runs, 00:10 and 00:15 are missed, 00:20 runs late."""
    script = [("tick", "rest", ""), ("detector", "through", "settle chunk", "crash")]
    world = play(SETS_MIS["outage-run-all"], script)
    assert any(line.endswith("[crash]") and "settle chunk" in line for line in world.trace)
    assert world.ledger.findings == []
    timed = {int(r["at"]): r for r in world.runs().values() if r.get("kind") == "scheduled"}
    fates = [(timed[at(m)]["status"], timed[at(m)].get("decided")) for m in (5, 10, 15, 20)]
    assert fates == [("succeeded", "run"), ("missed", "missed"), ("missed", "missed"), ("succeeded", "run")]
    resumed = [line for line in world.trace if line.startswith("(serial)") and "settle chunk" in line]
    assert resumed and "00:15:00Z" in resumed[0]  # the next sweep, from the head the chunk left


@pytest.mark.parametrize(
    ("part", "name", "check"),
    [
        ("end.successor_absent", "last-claim-change", "H2_claimed_closed"),
        ("catchup.successor_absent", "last-claim-settle", "late_run_claimed"),
        ("catchup.successor_absent", "outage-run-all", "H2_claimed_closed"),
        ("catchup.head_version", "backfill-past-settle", "I3_unreachable"),
        ("backfill.head_version", "backfill-two-instants", "I3_unreachable"),
        ("backfill.successor_absent", "backfill-tick", "adhoc_behind_claimed"),
    ],
)
def test_a_condition_part_removed_alone_is_caught(part: str, name: str, check: str) -> None:
    assert check in explore(SETS_MIS[name], 2, Protocol(dropped=frozenset({part}))).counts


@pytest.mark.parametrize(
    ("parts", "name", "check"),
    [
        # Every write that takes the head out of scheduled writes its successor key too.
        (("catchup.head_scheduled", "catchup.successor_absent"), "last-claim-settle", "H2_claimed_closed"),
        (
            ("backfill.head_scheduled", "backfill.head_version", "backfill.successor_absent"),
            "backfill-tick",
            "adhoc_behind_claimed",
        ),
        # A rerun, or a put at the backfill key, relinks the head in its transaction: two
        # backfills of one instant race on the head's version first.
        (
            ("backfill.record_missed", "backfill.record_version", "backfill.head_version"),
            "backfill-backfill",
            "started_twice",
        ),
        (("backfill.run_absent", "backfill.head_version"), "backfill-same-instant", "started_twice"),
    ],
)
def test_a_redundant_part_is_caught_with_its_partners(parts: tuple[str, ...], name: str, check: str) -> None:
    assert check in explore(SETS_MIS[name], 2, Protocol(dropped=frozenset(parts))).counts


def test_the_policies_differ_on_one_outage() -> None:
    """The sets' policies are what the oracle checks: one outage, three fates (serially)."""
    ran: dict[MisfirePolicy, list[int]] = {}
    for name in ("outage-skip", "outage-run-all", "outage-run-once"):
        world = play(SETS_MIS[name], [])
        proto = world.proto
        assert isinstance(proto, MisProtocol) and world.ledger.findings == []
        ran[proto.policy] = sorted(
            int(r["at"])
            for r in world.runs().values()
            if r.get("decided") == "run" and "late" not in r["fate"]
        )
    assert ran[MisfirePolicy.SKIP] == []
    assert len(ran[MisfirePolicy.RUN_ALL]) == 1 and len(ran[MisfirePolicy.RUN_ONCE]) == 1
    assert ran[MisfirePolicy.RUN_ALL][0] < ran[MisfirePolicy.RUN_ONCE][0]  # the oldest, the latest


@pytest.mark.parametrize(
    ("early", "name", "check"),
    [
        # Heads that never name the end key: claims go on past max_runs, and no end marker lands.
        (None, "max-runs-chain", "runs_beyond_max"),
        (None, "one-time-settle", "not_finished"),
        # The end key one run early: the life ends short of max_runs.
        (2, "max-runs-chain", "runs_short"),
    ],
)
def test_the_life_checks_can_fail(
    monkeypatch: pytest.MonkeyPatch, early: int | None, name: str, check: str
) -> None:
    from jobsched_tools.successor import writes_mis

    def last_of_life(proto: MisProtocol, next_at: int, runs_before: int) -> bool:
        del next_at
        return early is not None and proto.max_runs is not None and runs_before + early >= proto.max_runs

    monkeypatch.setattr(writes_mis, "last_of_life", last_of_life)
    assert check in explore(SETS_MIS[name], 1).counts
