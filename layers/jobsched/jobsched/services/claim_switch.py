"""The successor claim's migration switch, written (issue 37; docs/proposals/successor-claim-build.md
§5 "The migration"): ``claim_shape = successor`` on the detector's bookkeeping item (core/
claim_shape.py), conditional on the item's version as the detector writes it
(core/transitions/bookkeeping.py ``bookkeeping_op``).

The write alone, without the deployed-shape check that ``jobsched migrate successor-claim`` makes
first (tools' ops/migrate.py ``switch_on``): the chaos world's migration (sim/migration.py), whose
stack is migrating by construction, sets the switch through this same write.
"""

from __future__ import annotations

from jobsched.core.claim_shape import CLAIM_SHAPE_ATTRIBUTE, ClaimShape, stack_shape
from jobsched.core.errors import ConditionFailed
from jobsched.core.transitions.bookkeeping import BOOKKEEPING_KEY, bookkeeping_op
from jobsched.core.writes import STATE
from jobsched.ports import Store

# Rounds of the switch's write against a detector moving the bookkeeping item at the same time.
SWITCH_TRIES = 5


def write_switch(store: Store, now: int) -> bool:
    """Set the switch. Returns False when it was on already; raises when the bookkeeping item kept
    moving under every round."""
    for _ in range(SWITCH_TRIES):
        current = store.get(STATE, dict(BOOKKEEPING_KEY))
        if stack_shape(current) is ClaimShape.SUCCESSOR:
            return False
        try:
            switched = {CLAIM_SHAPE_ATTRIBUTE: ClaimShape.SUCCESSOR.value}
            store.write([bookkeeping_op(current, switched, (), now)])
        except ConditionFailed:
            continue  # the detector moved its cursor meanwhile: read it again
        return True
    raise RuntimeError("the detector's bookkeeping item kept moving: try again")
