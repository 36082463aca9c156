"""The overlap policies and the chain walk on shape f's model (docs/proposals/successor-model.md,
"Overlap and the chain walk"): every overlap set holds at k=2 under its policy; each walk rule and
condition part removed alone is caught by a named set, by the invariant named here.
"""

from __future__ import annotations

import pytest
from jobsched_tools.successor.search import explore
from jobsched_tools.successor.sets_overlap import SETS, protocol_for


@pytest.mark.parametrize("name", sorted(SETS))
def test_every_overlap_set_holds_at_k2(name: str) -> None:
    actor_set, _ = SETS[name]
    result = explore(actor_set, 2, protocol_for(name))
    assert result.schedules > 0 and not result.truncated
    assert dict(result.counts) == {}, [f.headline() for f in result.first.values()]


# (removed part or walk rule, the set that catches it, k, the invariant it breaks)
CAUGHT = [
    ("walk.W3", "ovl-overtake-skip", 1, "manual_behind_future"),
    ("walk.W4", "ovl-overtaker-recovered-buffer_one", 1, "waits_cycle"),
    ("walk.W8", "ovl-overtake-long-skip", 1, "overlap_beside"),
    ("promote.at_end", "ovl-promoters-buffer_one", 1, "promotion_owed"),
    ("start.not_overtaken", "ovl-overtake-skip", 1, "overlap_beside"),
    ("start.not_asked_to_stop", "ovl-waiting-race-cancel_other", 1, "started_when_asked_to_stop"),
    # A message from a stale page walks from the link before an ad-hoc relink: its token is the
    # overlap fence (shape f's claim does not read the head's link atomically).
    ("start.version", "ovl-manual-worker-tick-skip", 1, "overlap_beside"),
    ("start.status_scheduled", "ovl-overtake-skip", 1, "I4_stale_start"),
    ("buffer.holder_unfinished", "ovl-overtake-buffer_all", 1, "wait_behind_ended"),
    ("buffer.nobody_waits_behind", "ovl-waiting-race-buffer_one", 1, "more_than_one_waits"),
    ("buffer.holder_not_waiting", "ovl-waiting-race-cancel_other", 1, "more_than_one_waits"),
]


@pytest.mark.parametrize(("part", "name", "k", "check"), CAUGHT)
def test_each_rule_and_part_removed_alone_is_caught(part: str, name: str, k: int, check: str) -> None:
    actor_set, _ = SETS[name]
    result = explore(actor_set, k, protocol_for(name, dropped=frozenset({part})))
    assert check in result.counts, dict(result.counts)


@pytest.mark.parametrize(
    ("parts", "name", "check"),
    [
        # A start changes both: either stops the overtake of a run that started since the walk.
        (("overtake.status_scheduled", "overtake.version"), "ovl-overtake-skip", "overlap_beside"),
        # A promotion changes all three: any one stops the second of two promoters.
        (
            ("promote.status_buffered", "promote.version", "promote.blocked_by"),
            "ovl-promoters-buffer_one",
            "started_twice",
        ),
    ],
)
def test_parts_caught_with_their_partners(parts: tuple[str, ...], name: str, check: str) -> None:
    actor_set, _ = SETS[name]
    for part in parts:
        alone = explore(actor_set, 2, protocol_for(name, dropped=frozenset({part})))
        assert check not in alone.counts, (part, dict(alone.counts))
    together = explore(actor_set, 2, protocol_for(name, dropped=frozenset(parts)))
    assert check in together.counts, dict(together.counts)


def test_w1_alone_is_fenced_by_the_start() -> None:
    """Without W1 the overtaken run walks from its own link, finds the turn free and tries to start:
    ``start.not_overtaken`` stops it (it races only then), and it decides again."""
    actor_set, _ = SETS["ovl-overtake-skip"]
    without = explore(actor_set, 1, protocol_for("ovl-overtake-skip", dropped=frozenset({"walk.W1"})))
    assert dict(without.counts) == {}
    assert "start.not_overtaken" in without.races
