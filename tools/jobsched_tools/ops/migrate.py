"""The migration switch of the successor claim (issue 37; docs/proposals/successor-claim-build.md
§5 "The migration"), as ``jobsched migrate successor-claim`` sets and checks it.

An existing stack is deployed ``ClaimShape=legacy`` (``next-run`` and ``lease``). Its migration:
deploy ``ClaimShape=migrating`` (adds ``due``: deploy 1) -> ``switch_on`` -> ``check`` until every
condition holds -> deploy ``ClaimShape=successor`` (deletes ``next-run`` and ``lease``: deploy 2).
The deployed shape is read from the tables themselves (``deployed_shape``: which claim indexes
they have), not from what a stack's parameters say, so a deploy that failed half-way is seen.

- ``switch_on``: writes ``claim_shape = successor`` on the detector's bookkeeping item (core/
  claim_shape.py, with core/transitions/bookkeeping.py ``bookkeeping_op``, conditional on the
  item's version as the detector writes it), refusing (``NotMigrating``, saying what to deploy)
  unless the tables are deployed ``migrating`` with ``due`` ACTIVE: a legacy stack's functions
  never read the switch and its tables lack ``due``; a successor stack needs none.
- ``check``: each condition of §5 "Between the deploys" that can be verified from the tables:
  the stack deployed ``migrating`` with ``due`` ACTIVE, the switch, no state still in ``next-run``
  (a fresh Scan count) and the last whole reconcile pass counted none, every ``next-run`` shard's
  Query empty, and every lease entry also in ``due``. "Every function runs the new code" cannot
  be read from the tables: it is listed as not checked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from jobsched.core.claim_shape import CLAIM_SHAPE_ATTRIBUTE, ClaimShape, DeployedShape, stack_shape
from jobsched.core.transitions.bookkeeping import BOOKKEEPING_KEY
from jobsched.core.writes import STATE, Item
from jobsched.ports import DEPLOYED_INDEXES, DUE_INDEX, Store
from jobsched.services.claim_switch import write_switch
from jobsched.services.head_reconciler import LEGACY_LAST_PASS, LEGACY_LAST_PASS_AT
from jobsched.services.paging import query_all

SCAN_PAGE = 100
# Lease entries compared with ``due`` per shard (the check's cost stays bounded).
LEASES_COMPARED = 100
CLAIM_INDEXES = frozenset().union(*DEPLOYED_INDEXES.values())


class NotMigrating(RuntimeError):
    """The stack is not deployed ``ClaimShape=migrating`` with its ``due`` index ACTIVE: the
    message says what to deploy (or wait for)."""


NoDueIndex = NotMigrating  # its name before the stack's shape was a parameter


@dataclass(frozen=True)
class Deployed:
    """The tables' claim indexes: each one's status by name, and the shape they make (None: no
    shape's, as between the two tables' updates of a deploy that failed half-way)."""

    indexes: dict[str, str]

    @property
    def shape(self) -> DeployedShape | None:
        present = frozenset(self.indexes)
        for shape in DeployedShape:
            if DEPLOYED_INDEXES[shape.value] == present:
                return shape
        return None

    def describe(self) -> str:
        shape = self.shape.value if self.shape is not None else "none of legacy, migrating, successor"
        found = ", ".join(f"{name} {status}" for name, status in sorted(self.indexes.items())) or "none"
        return f"ClaimShape {shape} (claim indexes: {found})"


def deployed_shape(dynamodb: Any, state_table: str, runs_table: str) -> Deployed:
    """The claim indexes the state and runs tables have (DescribeTable), with their status."""
    indexes: dict[str, str] = {}
    for table in (state_table, runs_table):
        described = dynamodb.describe_table(TableName=table)["Table"]
        for index in described.get("GlobalSecondaryIndexes") or []:
            name = str(index.get("IndexName"))
            if name in CLAIM_INDEXES:
                indexes[name] = str(index.get("IndexStatus") or "ACTIVE")
    return Deployed(indexes)


def due_index_status(dynamodb: Any, runs_table: str) -> str | None:
    """The runs table's ``due`` index status (``ACTIVE``, ``CREATING``, ...), None if it has none."""
    table = dynamodb.describe_table(TableName=runs_table)["Table"]
    for index in table.get("GlobalSecondaryIndexes") or []:
        if index.get("IndexName") == DUE_INDEX:
            return str(index.get("IndexStatus") or "ACTIVE")
    return None


def require_migrating(deployed: Deployed, runs_table: str) -> None:
    """Raise ``NotMigrating`` with what to deploy unless the tables are deployed ``migrating``."""
    shape = deployed.shape
    if shape is DeployedShape.LEGACY:
        raise NotMigrating(
            f"the stack is deployed ClaimShape=legacy: the runs table {runs_table} has no "
            f"'{DUE_INDEX}' index. Deploy it with ClaimShape=migrating first (the migration's deploy "
            "1, which adds the index and has every function read the switch), then set the switch"
        )
    if shape is DeployedShape.SUCCESSOR:
        raise NotMigrating(
            "the stack is deployed ClaimShape=successor: it has no 'next-run' or 'lease' index and "
            "every job claims from its head already; there is no switch to set"
        )
    if shape is None:
        raise NotMigrating(
            f"the tables are deployed as no shape ({deployed.describe()}): a deploy is under way or "
            "failed half-way. Deploy ClaimShape=migrating (or wait for the deploy to finish) first"
        )
    status = deployed.indexes[DUE_INDEX]
    if status != "ACTIVE":
        raise NotMigrating(
            f"the runs table's '{DUE_INDEX}' index is {status}, not ACTIVE yet: wait for its backfill"
        )


def switch_on(store: Store, dynamodb: Any, state_table: str, runs_table: str, now: int) -> bool:
    """Set the switch (services/claim_switch.py). Returns False when it was on already. Raises
    ``NotMigrating``."""
    require_migrating(deployed_shape(dynamodb, state_table, runs_table), runs_table)
    return write_switch(store, now)


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


def check(store: Store, dynamodb: Any, state_table: str, runs_table: str, shard_count: int) -> Check:
    """§5 "Between the deploys", each condition verified where the tables tell. Only the indexes
    the tables have are queried."""
    done = Check()
    deployed = deployed_shape(dynamodb, state_table, runs_table)
    migrating = deployed.shape is DeployedShape.MIGRATING
    done.conditions.append(Condition("deployed", migrating, deployed.describe()))
    status = deployed.indexes.get(DUE_INDEX)
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
    done.conditions.append(Condition("legacy states", fresh == 0, f"{fresh} states still in next-run now"))
    last = book.get(LEGACY_LAST_PASS)
    if last is None:
        passed = "no whole reconcile pass counted since the switch"
    else:
        at = book.get(LEGACY_LAST_PASS_AT)
        passed = f"the last whole reconcile pass counted {last}" + (
            f" (at {at} ms)" if at is not None else ""
        )
    done.conditions.append(Condition("reconcile pass", last is not None and int(last) == 0, passed))
    shards = max(shard_count, int(book.get("shard_high") or 0))
    if "next-run" in deployed.indexes:
        busy = [shard for shard in range(shards) if store.query("next-run", shard, limit=1).items]
        detail = f"{shards} shards queried; " + (f"entries on shards {busy}" if busy else "all empty")
        done.conditions.append(Condition("next-run empty", not busy, detail))
    if "lease" in deployed.indexes and status == "ACTIVE":
        missing = _leases_not_in_due(store, shards)
        detail = f"{shards} shards compared; " + (
            f"not in due: {missing[:5]}" if missing else "every lease in due"
        )
        done.conditions.append(Condition("leases in due", not missing, detail))
    return done


def _leases_not_in_due(store: Store, shards: int) -> list[str]:
    """The lease entries (up to ``LEASES_COMPARED`` a shard, earliest first) that ``due`` lacks on
    the same shard over the same ``check_at`` range: every in-flight run must be in ``due`` before
    deploy 2 deletes ``lease`` (the two share their key attributes, so this holds unless ``due``
    is still backfilling or was made wrong)."""
    missing: list[str] = []
    for shard in range(shards):
        leases = store.query("lease", shard, limit=LEASES_COMPARED).items
        if not leases:
            continue
        low = min(int(entry["check_at"]) for entry in leases)
        high = max(int(entry["check_at"]) for entry in leases)
        in_due = {str(entry["run_id"]) for entry in query_all(store, "due", shard, low, high)}
        missing += [str(entry["run_id"]) for entry in leases if str(entry["run_id"]) not in in_due]
    return missing
