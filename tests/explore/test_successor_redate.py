"""``redate-across-epochs`` (HC4; explore/sets_successor_redate.py) on the product's explorer's
successor world: a resume's late stream record, after the reconcile pass applied the resume, puts
00:05 in the head's epoch beside the pause's cancelled head, against the head's claim, a backfill
of the same key and its own duplicate, or a change applied from its own record (w3floor's
``redate-after-*``). The sets hold at k=1; the redate's record part switched off
(``redate_with_head_ops:_run_is_new``, sim/mutants.py ``SUCCESSOR_SWITCHABLE``) is caught, and so
are the successor registrar without its redate and a later change dropping the floor (00:05 lost).
A job without a head (w9, ``redate-headless-*``: an ``at()`` job the pass applied as finished):
``redate_without_head_ops:_state_unchanged`` switched off is caught, and its ``_run_is_new`` with it
(redundant alone)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import jobsched.core.transitions.head_redate as head_redate
import jobsched.services.registrar as registrar
import pytest
from jobsched.core.transitions.register import REDATE_MARKS
from jobsched.services.head_registrar import HeadRegistrar
from jobsched_tools.explore import successor
from jobsched_tools.explore.sets_successor_redate import REDATE_SETS
from jobsched_tools.sim.mutants import SUCCESSOR_SWITCHABLE, successor_parts, switched_off

RUN_IS_NEW = "redate_with_head_ops:_run_is_new"
HEADLESS_STATE = "redate_without_head_ops:_state_unchanged"
HEADLESS_RUN_IS_NEW = "redate_without_head_ops:_run_is_new"


@pytest.mark.parametrize("name", sorted(REDATE_SETS))
def test_redate_set_holds(name: str) -> None:
    result = successor.explore(REDATE_SETS[name], 1)
    assert result.schedules > 10
    firsts = {check: finding.headline() for check, finding in result.first.items()}
    assert dict(result.counts) == {}, firsts


@contextmanager
def _no_successor_redate() -> Iterator[None]:
    """The successor registrar as wave 2 left it: a late record dates nothing."""
    original = HeadRegistrar._late_record
    HeadRegistrar._late_record = lambda *_args, **_kwargs: False  # type: ignore[method-assign]
    try:
        yield
    finally:
        HeadRegistrar._late_record = original  # type: ignore[method-assign]


@contextmanager
def _floor_dropped() -> Iterator[None]:
    """w3floor's fix undone: a change after the pass drops the floor (as before)."""
    original = head_redate.kept_redate_marks

    def dropping(state: Any, _now: int) -> tuple[dict[str, Any], tuple[str, ...]]:
        return {}, tuple(name for name in REDATE_MARKS if state is not None and name in state)

    head_redate.kept_redate_marks = dropping
    try:
        yield
    finally:
        head_redate.kept_redate_marks = original


@contextmanager
def _no_second_read() -> Iterator[None]:
    """w3floor's read again undone: a record that applied a later item first dates nothing."""
    original = registrar._dates_floor
    registrar._dates_floor = lambda *_args: False
    try:
        yield
    finally:
        registrar._dates_floor = original


# Each mutant: what it does, the set that catches it, and what that set reports.
MUTANTS: dict[str, tuple[Callable[[], AbstractContextManager[None]], str, str]] = {
    RUN_IS_NEW: (lambda: switched_off(RUN_IS_NEW), "redate-across-epochs", "record_overwritten"),
    "no successor redate": (_no_successor_redate, "redate-across-epochs-run", "lost_occurrence"),
    "floor dropped by a later change": (_floor_dropped, "redate-after-retime", "lost_occurrence"),
    "no read again after the record's change": (_no_second_read, "redate-after-pause", "lost_occurrence"),
    # w9: the redate of a job without a head (an at() job the pass applied as finished).
    HEADLESS_STATE: (lambda: switched_off(HEADLESS_STATE), "redate-headless-manual", "overlap"),
    "no headless redate": (_no_successor_redate, "redate-headless-manual", "lost_occurrence"),
}
# Redundant alone (tests/unit/test_head_redate.py
# ``test_a_headless_redates_record_key_is_written_only_with_the_states_version``): every writer of a
# record key in a headless state's epoch moves the state's version; with the state part, caught.
HEADLESS_PAIR = (HEADLESS_STATE, HEADLESS_RUN_IS_NEW)


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_redate_across_epochs_catches(name: str) -> None:
    apply, catcher, expected = MUTANTS[name]
    with successor.own_setups(), apply():
        result = successor.explore(REDATE_SETS[catcher], 1, stop_on_first=True)
    assert successor.NOT_SUCCESSOR not in result.counts
    assert expected in result.counts, dict(result.counts)


def test_the_headless_redate_s_parts_switched_off_together_are_caught() -> None:
    """``redate_without_head_ops:_run_is_new`` alone changes nothing (the state part fails the
    second delivery's write first); with ``_state_unchanged`` off too, the second delivery's put
    replaces the first's record."""
    with successor.own_setups(), switched_off(HEADLESS_RUN_IS_NEW):
        alone = successor.explore(REDATE_SETS["redate-headless-twice"], 1)
    assert alone.schedules > 10 and dict(alone.counts) == {}
    with successor.own_setups(), switched_off(*HEADLESS_PAIR):
        result = successor.explore(REDATE_SETS["redate-headless-twice"], 1, stop_on_first=True)
    assert "record_overwritten" in result.counts, dict(result.counts)


def test_the_redate_s_record_part_is_switchable() -> None:
    assert RUN_IS_NEW in SUCCESSOR_SWITCHABLE
    assert RUN_IS_NEW in successor_parts()
    assert set(HEADLESS_PAIR) <= set(SUCCESSOR_SWITCHABLE) <= set(successor_parts())
