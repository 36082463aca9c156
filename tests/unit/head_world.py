"""A job under the successor claim on the product's in-memory store, for the tests of the writes
that join the chain through the head (test_head_adhoc.py, test_head_redate.py,
test_head_finish.py, test_head_convert.py): its state, its head, and the racers those writes
meet (a claim of the head, a settle, a change), each applied as one write."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from jobsched.core.clock import dt_to_ms
from jobsched.core.config import SchedulerConfig
from jobsched.core.errors import ConditionFailed
from jobsched.core.head import HeadJob, head_check_delay_ms, head_item, is_unstarted_occurrence
from jobsched.core.job import JobDefinition
from jobsched.core.run import RunKind, RunStatus, run_id_for, run_key
from jobsched.core.transitions import new_run_item
from jobsched.core.transitions.head_claim import claim_head_op
from jobsched.core.writes import RUNS, STATE, Cond, Item, Put, Update, WriteOp
from jobsched_tools.fakes.memory_store import MemoryStore

CFG = SchedulerConfig()
MINUTE = 60_000
T0 = dt_to_ms(datetime(2026, 12, 5, 0, 0, tzinfo=UTC))  # the head's instant
EPOCH = 2  # the head's epoch: the state's version, as the change that made the head set it


def definition(**changes: Any) -> JobDefinition:
    fields: dict[str, Any] = {"job_id": "j", "schedule": "rate(5 minutes)", "target": "noop"}
    fields.update(changes)
    return JobDefinition.model_validate(fields)


JOB = HeadJob.of_definition(definition())
SNAPSHOT = definition().to_item()


def state_item(**changes: Any) -> Item:
    """A converted state: no ``next_run_at`` and no ``latest_run_id`` (the head carries them)."""
    item: Item = {
        "job_id": "j",
        "status": "active",
        "version": EPOCH,
        "epoch": EPOCH,  # the epoch of the state's last change (head_change.EPOCH)
        "def_hash": JOB.def_hash,
        "timing": dict(JOB.timing),
        "misfire": dict(JOB.misfire),
        "head_at": T0,
    }
    item.update(changes)
    return item


def world(head_at: int = T0, after: str | None = "j@prev", **head_changes: Any) -> tuple[MemoryStore, Item]:
    """A store holding the state and the job's head at ``head_at`` (epoch ``EPOCH``)."""
    store = MemoryStore()
    store.write([Put(STATE, state_item(), (), "seed state")])
    head = head_item(
        JOB,
        head_at,
        EPOCH,
        through=head_at - 5 * MINUTE,
        shard_count=CFG.shard_count,
        check_delay_ms=head_check_delay_ms(CFG),
        after_run_id=after,
    )
    head.update(head_changes)
    store.write([Put(RUNS, head, (), "seed head")])
    return store, head


def get(store: MemoryStore, run_id: str) -> Item | None:
    return store.get(RUNS, run_key(run_id))


def items(store: MemoryStore) -> list[Item]:
    return [dict(item) for item in store.tables[RUNS].values()]


def find_head(store: MemoryStore) -> Item:
    """The job's head as HC12 finds it: the unstarted timed occurrence whose successor is absent."""
    runs = {str(item["run_id"]): item for item in items(store)}
    found = [item for item in runs.values() if is_unstarted_occurrence(item) and item["next_key"] not in runs]
    assert len(found) == 1, found
    return found[0]


def claim(store: MemoryStore, head: Item, claimer: str = "t/1") -> Item:
    """The claim of ``head``: the product's one put at its ``next_key`` (``head_claim``)."""
    put = claim_head_op(head, int(head["scheduled_at"]) - MINUTE, claimer, CFG)
    store.write([put])
    return dict(put.item)


def close(store: MemoryStore, head: Item, status: str) -> None:
    """A settle (``missed``) or a change (``cancelled``) closing the head: status and token move."""
    store.write(
        [
            Update(
                RUNS,
                run_key(str(head["run_id"])),
                (),
                "close head",
                set={"status": status, "version": int(head["version"]) + 1},
                remove=("check_at", "lease_shard"),
            )
        ]
    )


def manual_run(request: str = "r1", now: int = T0 - MINUTE) -> Item:
    run_id = f"j@manual:{request}"
    return new_run_item("j", run_id, now, SNAPSHOT, JOB.def_hash, RunKind.MANUAL, now, CFG)


def record(at: int, epoch: int | None, made_as: RunStatus, **extra: Any) -> Item:
    """A record of the occurrence ``at`` at its key in ``epoch`` (None: a legacy id), made as a
    pending run or a missed record and then given ``made_as`` and ``extra``."""
    made = RunStatus.MISSED if made_as is RunStatus.MISSED else RunStatus.PENDING
    kind = RunKind.CATCHUP if made is RunStatus.MISSED else RunKind.SCHEDULED
    snapshot = None if made is RunStatus.MISSED else SNAPSHOT
    item = new_run_item("j", run_id_for("j", at, epoch), at, snapshot, JOB.def_hash, kind, T0, CFG, made)
    item["status"] = made_as.value
    if epoch is not None:
        item["epoch"] = epoch
    item.update(extra)
    return item


def seed(store: MemoryStore, *seeded: Item) -> None:
    for item in seeded:
        store.write([Put(RUNS, item, (), f"seed {item['run_id']}")])


def write(store: MemoryStore, ops: list[WriteOp]) -> ConditionFailed | None:
    """Apply ``ops`` as one write: None if it landed, else the failure (nothing written)."""
    try:
        store.write(ops)
    except ConditionFailed as lost:
        return lost
    return None


def without(ops: list[WriteOp], part: Cond) -> list[WriteOp]:
    """``ops`` with the condition part ``part`` removed wherever it appears (a mutant)."""
    return [replace(op, condition=tuple(c for c in op.condition if c != part)) for op in ops]


def snapshot(store: MemoryStore) -> dict[str, Any]:
    return {name: {repr(k): dict(v) for k, v in table.items()} for name, table in store.tables.items()}
