"""The stack shapes the bench meters side by side (issue 37): which claim indexes the tables have
(template.yaml's ``ClaimShape``, core/claim_shape.py ``DeployedShape``, ``ports.DEPLOYED_INDEXES``)
and which claim the services then make.

- ``successor``: the template's default for a new stack. The runs table has ``due`` alone; every
  job claims from its head (docs/design.md, "The successor claim").
- ``migrating``: deploy 1 of the migration done, the switch not yet on. All three indexes; every
  job claims as before issue 37, and every runs entry is written twice (``lease`` and ``due``):
  the temporary cost between the deploys.
- ``migrating, switched``: ``jobsched migrate successor-claim`` run, deploy 2 not yet. The
  successor claim, with ``lease`` still written beside ``due``.
- ``legacy``: a stack deployed before issue 37 (``next-run`` and ``lease``), today's claim.

Each shape's store is a ``MeteringStore`` (DynamoDB's capacity rules) that charges exactly that
shape's indexes, and its services are wired as the functions wire them for it. Nothing about a
shape's cost is written here: every figure is metered from the product's own writes and reads.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from jobsched.core.claim_shape import CLAIM_SHAPE_ATTRIBUTE, ClaimShape, DeployedShape
from jobsched.core.clock import Clock
from jobsched.core.config import SchedulerConfig
from jobsched.core.transitions.bookkeeping import bookkeeping_op
from jobsched.core.writes import Item, WriteOp
from jobsched.ports import DEPLOYED_INDEXES, WorkQueue
from jobsched.services.detector import MissDetector
from jobsched.services.operations import Operations
from jobsched.services.trigger import Trigger

from jobsched_tools.emulator.claim_indexes import template_shape
from jobsched_tools.emulator.provision import load_template
from jobsched_tools.fakes.memory_telemetry import MemoryTelemetry
from jobsched_tools.fakes.metering import MeteringStore


@dataclass(frozen=True)
class StackShape:
    name: str
    deployed: DeployedShape
    switched: bool  # the migration switch on (it exists, and decides, only while ``migrating``)
    summary: str

    @property
    def indexes(self) -> frozenset[str]:
        return DEPLOYED_INDEXES[self.deployed.value]

    @property
    def claim(self) -> ClaimShape:
        """The claim a new job makes on this stack (core/claim_shape.py ``stack_shape``)."""
        if self.deployed is DeployedShape.SUCCESSOR or (
            self.deployed is DeployedShape.MIGRATING and self.switched
        ):
            return ClaimShape.SUCCESSOR
        return ClaimShape.LEGACY


SUCCESSOR = StackShape(
    "successor",
    DeployedShape.SUCCESSOR,
    False,
    "ClaimShape=successor (a new stack's default): the runs table's due index alone",
)
MIGRATING = StackShape(
    "migrating",
    DeployedShape.MIGRATING,
    False,
    "ClaimShape=migrating, switch off (deploy 1 done): next-run, lease and due; today's claim",
)
SWITCHED = StackShape(
    "migrating, switched",
    DeployedShape.MIGRATING,
    True,
    "ClaimShape=migrating, switch on (before deploy 2): the successor claim, lease still written",
)
LEGACY = StackShape(
    "legacy",
    DeployedShape.LEGACY,
    False,
    "ClaimShape=legacy (a stack deployed before issue 37): next-run and lease; today's claim",
)
SHAPES = (SUCCESSOR, MIGRATING, SWITCHED, LEGACY)
BY_NAME = {shape.name: shape for shape in SHAPES}


def template_default() -> DeployedShape:
    """template.yaml's ``ClaimShape`` default: what a new stack deploys (legacy for a template
    without the parameter: emulator/claim_indexes.py ``template_shape``)."""
    return template_shape(load_template())


def shipped() -> StackShape:
    """The shape a stack gets from the template's defaults: the one the bench prices first."""
    return {shape.deployed: shape for shape in (LEGACY, MIGRATING, SUCCESSOR)}[template_default()]


class ByWriteMeter(MeteringStore):
    """A MeteringStore that also keeps each write's units by table and index
    (``by_write["claim head"] == {"runs": 1, "runs/due": 1}``): what a write costs, and where."""

    def __init__(self, *, indexes: Iterable[str] | None = None) -> None:
        super().__init__(indexes=indexes)
        self.by_write: defaultdict[str, Counter[str]] = defaultdict(Counter)
        self._charging = 0

    def reset_meters(self) -> None:
        super().reset_meters()
        self.by_write.clear()

    def _charge_item(self, op: WriteOp, before: Item | None, after: Item | None, transactional: bool) -> None:
        was = Counter(self.write_units)
        self._charging += 1
        try:
            super()._charge_item(op, before, after, transactional)
        finally:
            self._charging -= 1
        self.by_write[op.label] += self.write_units - was

    def _charge_table(self, op: WriteOp, units: int) -> None:
        if self._charging:  # within _charge_item, which keeps the whole write's units
            super()._charge_table(op, units)
            return
        was = Counter(self.write_units)
        super()._charge_table(op, units)
        self.by_write[op.label] += self.write_units - was


M = TypeVar("M", bound=MeteringStore)


def metered_store(shape: StackShape, store_class: type[M]) -> M:
    """A meter whose tables have ``shape``'s indexes and charge them, and only them (a query of
    any other raises, as DynamoDB rejects a Query naming an index the table lacks), with the
    migration switch written as ``jobsched migrate successor-claim`` writes it when the shape has
    it on."""
    store = store_class(indexes=shape.indexes)
    if shape.switched:
        store.write([bookkeeping_op(None, {CLAIM_SHAPE_ATTRIBUTE: ClaimShape.SUCCESSOR.value}, (), 0)])
    return store


def trigger(
    shape: StackShape, store: MeteringStore, queue: WorkQueue, clock: Clock, cfg: SchedulerConfig
) -> Trigger:
    """The trigger as its function wires it on ``shape``'s stack (runtime/wiring.py)."""
    return Trigger(
        store, queue, MemoryTelemetry(), clock, cfg, parallel_queries=False, deployed=shape.deployed
    )


def detector(
    shape: StackShape, store: MeteringStore, queue: WorkQueue, clock: Clock, cfg: SchedulerConfig
) -> MissDetector:
    """The miss detector as its function wires it."""
    return MissDetector(
        store, queue, MemoryTelemetry(), clock, cfg, parallel_queries=False, deployed=shape.deployed
    )


def operations(
    shape: StackShape, store: MeteringStore, queue: WorkQueue, clock: Clock, cfg: SchedulerConfig
) -> Operations:
    """Operations (and the registrar it applies a change with) as the CLI wires them."""
    return Operations(store, queue, MemoryTelemetry(), clock, cfg, deployed=shape.deployed)


def as_json(shape: StackShape) -> dict[str, Any]:
    return {
        "deployed": shape.deployed.value,
        "switched": shape.switched,
        "indexes": sorted(shape.indexes),
        "claim": shape.claim.value,
        "summary": shape.summary,
    }
