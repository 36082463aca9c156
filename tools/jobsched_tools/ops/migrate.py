"""The migration switch of the successor claim (issue 37; docs/proposals/successor-claim-build.md
§5 "The migration"), as ``jobsched migrate successor-claim`` sets and checks it. Part of an
unfinished migration: not yet documented to users as ready.

- ``switch_on``: writes ``claim_shape = successor`` on the detector's bookkeeping item (core/
  claim_shape.py, with core/transitions/bookkeeping.py ``bookkeeping_op``, conditional on the
  item's version as the detector writes it), refusing (``NoDueIndex``) when the runs table lacks
  an ACTIVE ``due`` index: with the switch on, the trigger and the detector find heads only there.
- ``check``: each condition of §5 "Between the deploys" that can be verified from the tables:
  the ``due`` index, the switch, no state still in ``next-run`` (a fresh Scan count, beside the
  last whole reconcile pass's count), and every ``next-run`` shard's Query empty. "Every function
  runs the new code" cannot be read from the tables: it is listed as not checked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from jobsched.core.claim_shape import CLAIM_SHAPE_ATTRIBUTE, ClaimShape, stack_shape
from jobsched.core.errors import ConditionFailed
from jobsched.core.transitions.bookkeeping import BOOKKEEPING_KEY, bookkeeping_op
from jobsched.core.writes import STATE, Item
from jobsched.ports import DUE_INDEX, Store
from jobsched.services.head_reconciler import LEGACY_LAST_PASS, LEGACY_LAST_PASS_AT

# Rounds of the switch's write against a detector moving the bookkeeping item at the same time.
SWITCH_TRIES = 5
SCAN_PAGE = 100


class NoDueIndex(RuntimeError):
    """The runs table lacks the ``due`` index, or it is still being built."""


def due_index_status(dynamodb: Any, runs_table: str) -> str | None:
    """The runs table's ``due`` index status (``ACTIVE``, ``CREATING``, ...), None if it has none."""
    table = dynamodb.describe_table(TableName=runs_table)["Table"]
    for index in table.get("GlobalSecondaryIndexes") or []:
        if index.get("IndexName") == DUE_INDEX:
            return str(index.get("IndexStatus") or "ACTIVE")
    return None


def require_due_index(dynamodb: Any, runs_table: str) -> None:
    status = due_index_status(dynamodb, runs_table)
    if status is None:
        raise NoDueIndex(
            f"the runs table {runs_table} has no '{DUE_INDEX}' index: deploy the release that adds it "
            "(the migration's deploy 1) before setting the switch"
        )
    if status != "ACTIVE":
        raise NoDueIndex(
            f"the runs table's '{DUE_INDEX}' index is {status}, not ACTIVE yet: wait for its backfill"
        )


def switch_on(store: Store, dynamodb: Any, runs_table: str, now: int) -> bool:
    """Set the switch. Returns False when it was on already. Raises ``NoDueIndex``."""
    require_due_index(dynamodb, runs_table)
    for _ in range(SWITCH_TRIES):
        current = store.get(STATE, dict(BOOKKEEPING_KEY))
        if stack_shape(current) is ClaimShape.SUCCESSOR:
            return False
        try:
            store.write(
                [bookkeeping_op(current, {CLAIM_SHAPE_ATTRIBUTE: ClaimShape.SUCCESSOR.value}, (), now)]
            )
        except ConditionFailed:
            continue  # the detector moved its cursor meanwhile: read it again
        return True
    raise RuntimeError("the detector's bookkeeping item kept moving: try again")


@dataclass
class Condition:
    name: str
    holds: bool | None  # None: not checked (it cannot be read from the tables)
    detail: str


@dataclass
class Check:
    conditions: list[Condition] = field(default_factory=list)

    @property
    def all_hold(self) -> bool:
        return all(c.holds for c in self.conditions if c.holds is not None)


def legacy_states(store: Store) -> int:
    """A fresh count of the states still in ``next-run`` (a Scan of the state table)."""
    counted = 0
    cursor = None
    while True:
        page = store.scan(STATE, SCAN_PAGE, cursor)
        counted += sum(1 for item in page.items if item.get("next_run_at") is not None)
        cursor = page.cursor
        if cursor is None:
            return counted


def check(store: Store, dynamodb: Any, runs_table: str, shard_count: int) -> Check:
    """§5 "Between the deploys", each condition verified where the tables tell."""
    done = Check()
    status = due_index_status(dynamodb, runs_table)
    done.conditions.append(
        Condition(
            "due index", status == "ACTIVE", f"the runs table's '{DUE_INDEX}' index: {status or 'absent'}"
        )
    )
    done.conditions.append(
        Condition("new code", None, "every function runs the release with the successor claim: not checked")
    )
    book: Item = store.get(STATE, dict(BOOKKEEPING_KEY)) or {}
    switched = stack_shape(book) is ClaimShape.SUCCESSOR
    done.conditions.append(
        Condition("switch", switched, f"claim_shape: {book.get(CLAIM_SHAPE_ATTRIBUTE) or 'legacy'}")
    )
    fresh = legacy_states(store)
    last = book.get(LEGACY_LAST_PASS)
    passed = (
        f"the last whole reconcile pass counted {last}"
        + (f" (at {book.get(LEGACY_LAST_PASS_AT)} ms)" if book.get(LEGACY_LAST_PASS_AT) is not None else "")
        if last is not None
        else "no whole reconcile pass counted yet since the switch"
    )
    done.conditions.append(
        Condition("legacy states", fresh == 0, f"{fresh} states still in next-run now; {passed}")
    )
    shards = max(shard_count, int(book.get("shard_high") or 0))
    busy = [shard for shard in range(shards) if store.query("next-run", shard, limit=1).items]
    detail = f"{shards} shards queried; " + (f"entries on shards {busy}" if busy else "all empty")
    done.conditions.append(Condition("next-run empty", not busy, detail))
    return done
