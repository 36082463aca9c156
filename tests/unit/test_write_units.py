"""The write-unit meter applies DynamoDB's capacity rules (docs/benchmarks.md, "Write units"), and
a run's metered units hold to issue 14's figures. Each rule is checked on a hand-sized write, so
that a meter that stopped doubling transactions, or stopped charging an index, fails here before
it flatters the benchmark."""

from __future__ import annotations

from jobsched.core.run import run_key
from jobsched.core.writes import RUNS, STATE, Put, Update
from jobsched_tools.bench import due_entry_proposal
from jobsched_tools.bench.write_units import by_phase, measure
from jobsched_tools.fakes.metering import MeteringStore

STATE_ITEM = {"job_id": "j", "version": 1, "status": "active", "sched_shard": 0, "next_run_at": 1000}


def charged(store: MeteringStore, label: str) -> int:
    return int(store.by_label[label])


def test_a_standard_write_costs_one_unit_per_kilobyte_of_the_larger_image() -> None:
    store = MeteringStore()
    store.write([Put(RUNS, {**run_key("j@small"), "pad": "x" * 900}, condition=(), label="small")])
    store.write([Put(RUNS, {**run_key("j@big"), "pad": "x" * 2_500}, condition=(), label="big")])
    # Shrinking an item is charged by its size before the write.
    store.update(Update(RUNS, run_key("j@big"), condition=(), label="shrink", remove=("pad",)))
    assert (charged(store, "small"), charged(store, "big"), charged(store, "shrink")) == (1, 3, 3)


def test_a_transaction_doubles_each_item_but_not_its_index_writes() -> None:
    store = MeteringStore()
    store.write(
        [
            Put(RUNS, run_key("j@a"), condition=(), label="txn"),  # enters no index
            Put(STATE, dict(STATE_ITEM), condition=(), label="txn"),  # enters next-run: +1
        ]
    )
    assert charged(store, "txn") == 2 + 2 + 1


def test_an_index_is_written_when_its_key_or_a_projected_attribute_changes() -> None:
    store = MeteringStore()
    store.write([Put(STATE, dict(STATE_ITEM), condition=(), label="enter")])
    store.update(Update(STATE, {"job_id": "j"}, condition=(), label="rekey", set={"next_run_at": 2000}))
    store.update(Update(STATE, {"job_id": "j"}, condition=(), label="projected", set={"version": 2}))
    # active_run_id is not projected into next-run: only the item is written.
    store.update(
        Update(STATE, {"job_id": "j"}, condition=(), label="unprojected", set={"active_run_id": "r"})
    )
    store.update(Update(STATE, {"job_id": "j"}, condition=(), label="leave", remove=("next_run_at",)))
    assert [charged(store, label) for label in ("enter", "rekey", "projected", "unprojected", "leave")] == [
        2,
        3,
        2,
        1,
        2,
    ]


def test_a_run_costs_no_more_than_measured_and_its_payload_adds_nothing() -> None:
    allow, skip = measure("allow", runs=5, heartbeats=2), measure("skip", runs=5, heartbeats=0)
    payload = measure("allow", payload_bytes=4096, runs=5, heartbeats=0)
    # Issue 25: the claim is one transaction (its two items doubled, their index entries not):
    # 7 units, against 5 for the same writes made plainly; 10 a run, the accepted ceiling.
    assert allow.write_units_per_run <= 10
    assert allow.by_step["create run"] == 2 + 1 and allow.by_step["advance job"] == 2 + 2
    # The overlap chain: skip, the default, writes what allow writes (no slot taken or released).
    assert skip.write_units_per_run == allow.write_units_per_run
    assert allow.write_units_per_heartbeat <= 1
    # The run item holds the definition's digest: a 4 KiB payload adds no write unit (target <= 4).
    assert payload.write_units_per_run == allow.write_units_per_run
    # A claim writes no job item, so it never wakes the registrar through the stream.
    assert allow.registrar_records_per_run == skip.registrar_records_per_run == 0
    phases = by_phase(allow)
    assert sum(phases.values()) == allow.write_units_per_run and phases["claim"] > 0


def test_the_due_entry_proposal_saves_the_next_run_move_and_keeps_a_heartbeat_at_one_unit() -> None:
    """docs/proposals/due-entry-on-runs.md: its figure is metered beside the product's, on the same
    meter. The saving must come from the index (one entry per run, never re-keyed by a claim).
    The proposal's claim is two plain writes; the product's is one transaction (issue 25), which
    costs 3 units more than the same writes made plainly (8 before it)."""
    product = measure("skip", runs=5, heartbeats=1)
    proposal = due_entry_proposal.measure(state_advance=True, runs=5)
    index_units = {name: units for name, units in proposal.by_table.items() if "/" in name}
    product_index_units = {name: units for name, units in product.by_table.items() if "/" in name}
    assert sum(index_units.values()) == 2 and sum(product_index_units.values()) == 4
    assert proposal.by_step["claim: take run"] == 1  # the claim moves no index key
    assert proposal.write_units_per_run == product.write_units_per_run - 3 <= 7
    assert proposal.write_units_per_heartbeat == product.write_units_per_heartbeat == 1
    assert due_entry_proposal.measure(state_advance=False, runs=5).write_units_per_run == 6


def test_the_due_entry_proposal_made_atomic_saves_nothing() -> None:
    """Issue 37's decision (docs/proposals/due-entry-on-runs.md, "Decision"): with its claim as
    one transaction, as every claim has been since issue 25, the proposal meters what the product
    does (the transaction charges its three items twice); only the variant that drops the state's
    advance, moving the job's fence onto run items, saves two units."""
    product = measure("skip", runs=5, heartbeats=1)
    atomic = due_entry_proposal.measure(state_advance=True, runs=5, atomic=True)
    assert atomic.write_units_per_run == product.write_units_per_run == 10
    assert due_entry_proposal.measure(state_advance=False, runs=5, atomic=True).write_units_per_run == 8
