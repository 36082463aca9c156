"""Which claim protocol a job runs under: today's (``legacy``: the state's ``next-run`` entry and
the claim transaction) or the successor claim (``successor``: the job's head in the runs table's
``due`` index; issue 37, docs/proposals/successor-claim-build.md §5 "The migration").

The stack's switch is the ``claim_shape`` attribute of the detector's bookkeeping item
(core/transitions/bookkeeping.py ``BOOKKEEPING_KEY``): absent means ``legacy``. An operator sets
it with no deploy once every function runs code that knows both shapes. A job's own shape
follows from its state item, so both shapes coexist while the switch converts jobs one by one:

- a state with a ``next-run`` entry (``next_run_at`` or ``sched_shard``) is ``legacy``: it is
  claimed as today until a trigger or the reconcile pass converts it (one transaction);
- a state that records its change's ``epoch`` is ``successor``: the job's position is its head;
- a job without a state (its first registration) takes the stack's switch.

Pure: the callers read the items.
"""

from __future__ import annotations

from enum import StrEnum

from jobsched.core.head_change import EPOCH
from jobsched.core.state import INDEX_ATTRIBUTES
from jobsched.core.writes import Item

CLAIM_SHAPE_ATTRIBUTE = "claim_shape"


class ClaimShape(StrEnum):
    LEGACY = "legacy"
    SUCCESSOR = "successor"


class DeployedShape(StrEnum):
    """Which claim indexes the stack's tables have: template.yaml's ``ClaimShape`` parameter,
    passed to every function as ``CLAIM_SHAPE`` (ports.DEPLOYED_INDEXES lists each one's indexes).

    - ``legacy``: ``next-run`` and ``lease``; every job claims as before issue 37.
    - ``migrating``: all three (deploy 1 of the plan's §5 migration); the bookkeeping item's switch
      decides (``jobsched migrate successor-claim``).
    - ``successor``: ``due`` only (deploy 2, and a new stack's default); every job claims from its
      head, and nothing may query ``next-run`` or ``lease``.
    """

    LEGACY = "legacy"
    MIGRATING = "migrating"
    SUCCESSOR = "successor"


def stack_shape(bookkeeping: Item | None, deployed: DeployedShape = DeployedShape.MIGRATING) -> ClaimShape:
    """The stack's switch, from the detector's bookkeeping item as read (None: never written),
    under the deployed indexes: ``legacy`` and ``successor`` decide it whatever the item says
    (a stack without ``due`` cannot claim from it; one without ``next-run`` cannot claim from
    that); ``migrating`` leaves it to the item. An unknown value reads as ``legacy``: code that
    does not know a later shape keeps claiming the way it knows, and the switch is only ever set
    by ``jobsched migrate``."""
    if deployed is DeployedShape.LEGACY:
        return ClaimShape.LEGACY
    if deployed is DeployedShape.SUCCESSOR:
        return ClaimShape.SUCCESSOR
    value = (bookkeeping or {}).get(CLAIM_SHAPE_ATTRIBUTE)
    return ClaimShape.SUCCESSOR if value == ClaimShape.SUCCESSOR.value else ClaimShape.LEGACY


def job_shape(state: Item | None, stack: ClaimShape) -> ClaimShape:
    """The protocol a job's next change or claim follows (see the module's docstring)."""
    if state is None:
        return stack
    if any(name in state for name in INDEX_ATTRIBUTES):
        return ClaimShape.LEGACY
    if EPOCH in state:
        return ClaimShape.SUCCESSOR
    # A state that left ``next-run`` under today's protocol (paused, invalid, finished, deleted)
    # and was never changed under the successor claim: its next change follows the stack.
    return stack
