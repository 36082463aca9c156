"""The successor model's overlap and walk extension on the product's explorer (issue 37;
explore/sets_successor_overlap.py), with ``edit-stale-page`` (HC10) and the legacy conversion on a
migrating stack: every set holds with the real services on the successor world, and each
condition part of the change and the conversion (sim/mutants.py ``SUCCESSOR_SWITCHABLE``,
w3overlap's block) is caught by a set when switched off, or has a reason and a set of partners
switched off together and caught."""

from __future__ import annotations

import pytest
from jobsched.core.head_change import EPOCH
from jobsched.core.writes import STATE
from jobsched_tools.explore import sets_successor, successor
from jobsched_tools.explore.model import JOB_ID
from jobsched_tools.explore.sets_successor_overlap import (
    CATCHERS,
    PAIRS,
    REASONS,
    SETS,
    WALK_CATCHERS,
    WALK_RULES,
    WALK_UNCAUGHT,
    walk_without,
)
from jobsched_tools.sim.mutants import SUCCESSOR_SWITCHABLE, successor_parts, switched_off

ALL = {**sets_successor.SETS, **SETS}
OURS = (
    "head_change_ops:_change_state_version",
    "head_change_ops:_head_scheduled",
    "head_change_ops:_head_version",
    "head_change_ops:_change_marker_absent",
    "head_change_ops:_change_new_head_free",
    "_state_op:_state_unchanged",
    "convert_legacy_ops:_run_is_new",
)
# Preemptions per set: 1, but 0 for the three whose k=1 takes over 10 s on a loaded 2-core machine
# (measured: ovl-manual-worker-tick-dup-skip 23 s, ovl-retime-walk-* 12-16 s) and 2 for the two
# whose race needs two (the claimer's or detector's read before the edit, the change's after).
BOUNDS: dict[str, int] = (
    dict.fromkeys(SETS, 1)
    | dict.fromkeys(
        ("ovl-manual-worker-tick-dup-skip", "ovl-retime-walk-buffer_one", "ovl-retime-walk-cancel_other"), 0
    )
    | {"edit-claim-race": 2, "settle-edit": 2}
)


@pytest.mark.parametrize("name", sorted(SETS))
def test_overlap_change_and_conversion_sets_hold(name: str) -> None:
    result = successor.explore(SETS[name], BOUNDS[name])
    assert result.schedules > 0
    firsts = {check: finding.headline() for check, finding in result.first.items()}
    assert dict(result.counts) == {}, firsts


def test_every_base_set_is_explored_under_each_policy_the_model_names() -> None:
    from jobsched_tools.successor.sets_overlap import SETS as MODEL_SETS

    assert sorted(name for name in SETS if name.startswith("ovl-")) == sorted(MODEL_SETS)
    for name, (_, policy) in MODEL_SETS.items():
        assert SETS[name].overlap == policy


def test_each_part_has_a_catcher_or_a_reason_and_is_switchable() -> None:
    assert set(OURS) <= set(SUCCESSOR_SWITCHABLE) <= set(successor_parts())
    assert set(CATCHERS) | set(REASONS) == set(OURS)
    assert not set(CATCHERS) & set(REASONS)
    paired = {part for parts in PAIRS for part in parts}
    assert set(REASONS) <= paired, "a redundancy is shown by its partners switched off with it"


@pytest.mark.parametrize("part", sorted(CATCHERS))
def test_a_part_switched_off_is_caught(part: str) -> None:
    """The set holds with the part (``test_overlap_change_and_conversion_sets_hold``, and the base
    sets' ``tests/explore/test_successor_explorer.py``); without it, it reports the check."""
    name, k, expected = CATCHERS[part]
    with successor.own_setups(), switched_off(part):
        result = successor.explore(ALL[name], k, stop_on_first=True)
    assert successor.NOT_SUCCESSOR not in result.counts
    assert expected in result.counts, f"{part} not caught by {name}: {dict(result.counts)}"


@pytest.mark.parametrize("parts", sorted(PAIRS), ids="+".join)
def test_redundant_parts_switched_off_together_are_caught(parts: tuple[str, ...]) -> None:
    name, k, expected = PAIRS[parts]
    with successor.own_setups(), switched_off(*parts):
        result = successor.explore(ALL[name], k, stop_on_first=True)
    assert expected in result.counts, f"{parts} not caught by {name}: {dict(result.counts)}"


def test_the_conversion_set_starts_from_a_legacy_state_on_a_switched_on_stack() -> None:
    """``convert-old-claim``'s set-up: the job registered before the switch (in next-run, no
    epoch), the switch on after; the drive converts it (the after-drive check that the job is
    successor-shaped holds: ``test_overlap_change_and_conversion_sets_hold``)."""
    world = successor.build(SETS["convert-old-claim"], (0, 0))
    state = world.inner.get(STATE, {"job_id": JOB_ID})
    assert state is not None and EPOCH not in state and state.get("next_run_at") is not None
    from jobsched.core.claim_shape import ClaimShape, stack_shape
    from jobsched.core.transitions.bookkeeping import BOOKKEEPING_KEY

    assert stack_shape(world.inner.get(STATE, dict(BOOKKEEPING_KEY))) == ClaimShape.SUCCESSOR


def test_the_edit_is_a_change_that_keeps_the_instant() -> None:
    """HC10 on the product: an edit closes 00:05#1 (its marker at 00:10#1) and heads 00:05#2."""
    world = successor.play(SETS["edit-claim-race"], [("registrar", "rest", "")])
    runs = world.runs_by_id()
    assert runs["j@2026-12-01T00:05:00Z#1"]["status"] == "cancelled"
    assert runs["j@2026-12-01T00:10:00Z#1"]["status"] == "closed"
    assert "j@2026-12-01T00:05:00Z#2" in runs


# --- the walk's rules on the successor stack (the model's overlap.WALK_RULES) ---------------------------


def test_each_walk_rule_has_a_catcher_or_a_reason() -> None:
    assert set(WALK_CATCHERS) | set(WALK_UNCAUGHT) == set(WALK_RULES)
    assert not set(WALK_CATCHERS) & set(WALK_UNCAUGHT)


@pytest.mark.parametrize("rule", sorted(WALK_CATCHERS))
def test_a_walk_without_a_rule_is_caught(rule: str) -> None:
    """The walk's rules decide from reads (no condition part): each is taken out of the product's
    walk, and the world's existing checks (a run waiting for itself through others, a manual run
    skipped behind a run not due) report it on a set that holds with it."""
    name, k, expected = WALK_CATCHERS[rule]
    with successor.own_setups(), walk_without(rule):
        result = successor.explore(SETS[name], k, stop_on_first=True)
    assert expected in result.counts, f"the walk without {rule} not caught by {name}: {dict(result.counts)}"


def test_the_walk_without_w9_skips_behind_a_finished_run() -> None:
    """``WALK_CATCHERS["W9"]``, shown: the mutant's walk loops to its bound and 00:10 is recorded
    skipped for a run that had ended. ``skipped_without_holder`` allows it (00:10's token dates from
    the set-up's relink, before the overtaker ended); ``skip_holder_not_walked`` reports it: the walk
    read two runs, and the overtaker only ended."""
    with successor.own_setups(), walk_without("W9"):
        world = successor.play(SETS["ovl-overtaker-recovered-skip"], [])
    ten = world.runs_by_id()["j@2026-12-01T00:10:00Z#1"]
    assert ten["status"] == "skipped"
    assert world.runs_by_id()[str(ten["blocked_by"])]["status"] == "succeeded"
    found = [(f.check, f.key) for f in world.ledger.findings]
    assert found == [("skip_holder_not_walked", "j@2026-12-01T00:10:00Z#1")]
    world = successor.play(SETS["ovl-overtaker-recovered-skip"], [])
    assert world.runs_by_id()["j@2026-12-01T00:10:00Z#1"]["status"] == "succeeded"
    assert not world.ledger.findings


def test_the_walk_without_w9_is_caught_on_today_s_path() -> None:
    """The same set on today's path (sets_core.py ``overtaker-recovered-skip``, which
    tests/explore/test_explorer.py explores at k=2 with W9: it holds). There 00:10's record is made
    by its claim, after the overtaker ended, so ``skipped_without_holder`` reports it too."""
    from jobsched_tools.explore.scenarios import OVERTAKES
    from jobsched_tools.explore.search import explore

    with walk_without("W9"):
        result = explore(OVERTAKES["overtaker-recovered-skip"], 0, stop_on_first=True)
    assert {"skip_holder_not_walked", "skipped_without_holder"} <= set(result.counts), dict(result.counts)


def test_edit_stale_page_needs_the_claims_condition() -> None:
    """HC10's stale page: a claimer holding a page of the head from before the edit meets the
    change's marker (or the new head's claim) and sends nothing; without the claim's only
    condition (``claim_head_op:_successor_absent``, caught already by ``claim-stale-change``) its
    put replaces what the change or the change's claim wrote."""
    with successor.own_setups(), switched_off("claim_head_op:_successor_absent"):
        result = successor.explore(SETS["edit-stale-page"], 1, stop_on_first=True)
    assert "record_overwritten" in result.counts, dict(result.counts)
