"""Shared set-up of the successor claim's unit tests (test_head_*.py): a job's head, written to the
product's in-memory store, and reads of the runs partition by run id."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from jobsched.core.clock import dt_to_ms
from jobsched.core.config import SchedulerConfig
from jobsched.core.head import HeadJob, head_check_delay_ms, head_item
from jobsched.core.job import JobDefinition
from jobsched.core.run import run_id_for
from jobsched.core.writes import RUNS, Item, Put, WriteOp, not_exists
from jobsched_tools.fakes.memory_store import MemoryStore

CFG = SchedulerConfig()
T0 = dt_to_ms(datetime(2026, 12, 5, 0, 0, tzinfo=UTC))
SECOND = 1_000
MINUTE = 60 * SECOND


def definition(**changes: Any) -> JobDefinition:
    fields: dict[str, Any] = {"job_id": "j", "schedule": "rate(5 minutes)", "target": "noop"}
    fields.update(changes)
    return JobDefinition.model_validate(fields)


def job(**changes: Any) -> HeadJob:
    return HeadJob.of_definition(definition(**changes))


def head(at: int = T0, epoch: int = 1, the_job: HeadJob | None = None, **options: Any) -> Item:
    options.setdefault("through", at - 5 * MINUTE)
    return head_item(
        the_job or job(),
        at,
        epoch,
        shard_count=CFG.shard_count,
        check_delay_ms=head_check_delay_ms(CFG),
        **options,
    )


def key(at: int, epoch: int = 1) -> str:
    return run_id_for("j", at, epoch)


def store_with(*items: Item) -> MemoryStore:
    store = MemoryStore()
    for item in items:
        store.write([Put(RUNS, item, (not_exists("run_id", "set-up"),), "set-up")])
    return store


def get(store: MemoryStore, run_id: str) -> Item | None:
    return store.get(RUNS, {"job_id": "j", "run_id": run_id})


def without(ops: list[WriteOp], part: str) -> list[WriteOp]:
    """``ops`` with every condition part whose ``why`` starts with the model tag ``part`` removed:
    the mutation each new part's test is checked against."""
    return [replace(op, condition=tuple(c for c in op.condition if not c.why.startswith(part))) for op in ops]
