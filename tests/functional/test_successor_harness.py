"""The functional harness's successor stack (``build(kind, successor=True)``): the ``due`` index
exists and the migration switch reads ``successor``; a default stack has neither."""

from __future__ import annotations

import pytest
from harness import KINDS, build
from jobsched.core.claim_shape import ClaimShape, stack_shape
from jobsched.core.transitions.bookkeeping import BOOKKEEPING_KEY
from jobsched.core.writes import STATE


@pytest.mark.parametrize("kind", KINDS)
def test_a_successor_stack_has_the_switch_on_and_the_due_index(kind: str) -> None:
    with build(kind, successor=True) as env:
        assert stack_shape(env.store.get(STATE, dict(BOOKKEEPING_KEY))) is ClaimShape.SUCCESSOR
        assert env.store.query("due", 0, 0, 10**15).items == []


@pytest.mark.parametrize("kind", KINDS)
def test_a_default_stack_has_neither(kind: str) -> None:
    with build(kind) as env:
        assert stack_shape(env.store.get(STATE, dict(BOOKKEEPING_KEY))) is ClaimShape.LEGACY
        with pytest.raises(ValueError):
            env.store.query("due", 0, 0, 10**15)
