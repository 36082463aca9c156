"""The bench meters what ships (issue 37 item 4): a run on each stack shape, its units metered from
the product's own writes (bench/stack_shapes.py, bench/shape_figures.py), and the prices, the
scale model and the job change computed from them. Nothing here states a figure the product does
not produce: each assertion compares the meter with DynamoDB's rules or with another shape."""

from __future__ import annotations

import functools
from typing import Any

import pytest
from jobsched.core.claim_shape import DeployedShape
from jobsched.core.run import run_key
from jobsched.core.writes import RUNS, STATE, Put
from jobsched.ports import DEPLOYED_INDEXES
from jobsched_tools.bench import scale, shape_figures, stack_shapes, units
from jobsched_tools.bench.stack_shapes import LEGACY, MIGRATING, SHAPES, SUCCESSOR, SWITCHED
from jobsched_tools.bench.write_units import RunUnits, measure
from jobsched_tools.emulator.provision import load_template


@functools.cache
def run_units(name: str, overlap: str = "skip") -> RunUnits:
    return measure(overlap, runs=5, heartbeats=1, shape=stack_shapes.BY_NAME[name])


@functools.cache
def figures() -> dict[str, Any]:
    return shape_figures.measure("skip")


def test_the_bench_prices_the_templates_default_shape() -> None:
    """The shape the bench prices first is the one template.yaml deploys by default (its
    ``ClaimShape`` parameter; a template without it deploys legacy's indexes)."""
    default = load_template()["Parameters"].get("ClaimShape", {}).get("Default", "legacy")
    assert stack_shapes.shipped().deployed is DeployedShape(default)
    assert stack_shapes.shipped().indexes == DEPLOYED_INDEXES[default]
    assert figures()["shipped"] == stack_shapes.shipped().name


def test_a_successor_run_writes_the_runs_table_and_due_alone() -> None:
    """A short run on a stack deployed ``successor``: the claim is one put of the next head
    (its item and its `due` entry), the start one update, the commit one update that takes the
    run out of `due`. No write touches the state table: a claim that went back to moving the
    state (today's transaction) fails here, whatever it cost."""
    for overlap in ("skip", "allow"):
        run = run_units(SUCCESSOR.name, overlap)
        assert run.by_write == {
            "claim head": {"runs": 1, "runs/due": 1},
            "start run": {"runs": 1},
            "commit succeeded": {"runs": 1, "runs/due": 1},
            "heartbeat": {"runs": 1},
        }
        assert set(run.by_table) == {"runs", "runs/due"}
        assert run.write_units_per_run == sum(
            sum(tables.values()) for label, tables in run.by_write.items() if label != "heartbeat"
        )
    # The payload stays off the run item (its digest travels instead), as on legacy stacks.
    assert measure("skip", payload_bytes=4096, runs=5, heartbeats=0, shape=SUCCESSOR).write_units_per_run == (
        run_units(SUCCESSOR.name).write_units_per_run
    )


def test_the_migrations_shapes_cost_each_index_the_other_shape_lacks() -> None:
    """Between the deploys every runs entry is written in both `lease` and `due`: ``migrating``
    (switch off) is legacy plus a `due` entry in and out, ``migrating, switched`` is successor
    plus a `lease` entry in and out. Anything else that moved is a change of the claim itself."""
    legacy, migrating = run_units(LEGACY.name), run_units(MIGRATING.name)
    successor, switched = run_units(SUCCESSOR.name), run_units(SWITCHED.name)
    assert migrating.by_table == legacy.by_table | {"runs/due": legacy.by_table["runs/lease"]}
    assert switched.by_table == successor.by_table | {"runs/lease": successor.by_table["runs/due"]}
    assert migrating.write_units_per_run == legacy.write_units_per_run + legacy.by_table["runs/lease"]
    assert switched.write_units_per_run == successor.write_units_per_run + successor.by_table["runs/due"]
    assert successor.write_units_per_run < switched.write_units_per_run < legacy.write_units_per_run


def test_a_shapes_meter_charges_only_the_indexes_its_tables_have() -> None:
    """An item carrying the keys of every index (a run has `lease_shard` and `check_at`, which
    `lease` and `due` share; a legacy state `sched_shard` and `next_run_at`) is charged only in the
    indexes its shape's tables have."""
    for shape in SHAPES:
        store = stack_shapes.metered_store(shape, stack_shapes.ByWriteMeter)
        store.reset_meters()
        store.write([Put(RUNS, {**run_key("j@1"), "lease_shard": 1, "check_at": 5}, (), "run")])
        store.write([Put(STATE, {"job_id": "j", "sched_shard": 1, "next_run_at": 5}, (), "state")])
        indexes = {name.split("/")[1] for name in store.write_units if "/" in name}
        assert indexes == shape.indexes, shape.name


def test_prices_are_the_metered_units_at_each_modes_unit_price() -> None:
    """Each shape's price, both modes, is its metered units times the unit prices of
    config/prices.toml (bench/units.py ``unit_prices``), plus the same costs besides DynamoDB."""
    prices, _ = units.load_prices()
    for name, shape in figures()["shapes"].items():
        for mode, usd in shape["usd_per_million_runs"].items():
            write_usd, read_usd = units.unit_prices(prices, mode)
            assert usd["dynamodb_writes"] == pytest.approx(shape["write_units_per_run"] * write_usd, abs=1e-4)
            assert usd["dynamodb_reads"] == pytest.approx(shape["read_units_per_run"] * read_usd, abs=1e-4)
            parts = sum(value for part, value in usd.items() if part != "total")
            assert usd["total"] == pytest.approx(parts, abs=1e-3), (name, mode)


def test_the_default_shape_meets_issue_37s_targets_and_the_legacy_one_does_not() -> None:
    """Targets (issue 37): at most $6.00 a million runs on-demand, $2.45 provisioned at 70 %
    (EventBridge Scheduler with an idempotency table, on-demand). Priced from this meter's units."""
    shapes = figures()["shapes"]
    successor, legacy = (
        shapes[SUCCESSOR.name]["usd_per_million_runs"],
        shapes[LEGACY.name]["usd_per_million_runs"],
    )
    assert successor["on_demand"]["total"] <= 6.00 and successor["provisioned"]["total"] <= 2.45
    assert legacy["on_demand"]["total"] > 6.00 and legacy["provisioned"]["total"] > 2.45
    baseline = figures()["baseline"]["usd_per_million_runs"]
    assert baseline["on_demand"]["total"] == pytest.approx(2.45, abs=0.01)


def test_the_scale_model_provisions_the_metered_units_of_each_index() -> None:
    """At 1,000 and 10,000 runs a second each table and index is provisioned its metered units
    per short run times the rate over the utilisation: on a successor stack the runs table and
    `due`, nothing on the state table."""
    for shape in (SUCCESSOR, LEGACY):
        steady = measure("skip", runs=5, heartbeats=0, shape=shape)
        plans = figures()["shapes"][shape.name]["capacity"]
        assert [plan["target_runs_per_s"] for plan in plans] == list(scale.CAPACITY_TARGETS)
        for plan in plans:
            assert set(plan["provisioned_wcu"]) == set(steady.by_table)
            for name, wcu in plan["provisioned_wcu"].items():
                assert wcu == pytest.approx(plan["target_runs_per_s"] * steady.by_table[name] / 0.7, abs=1)
    successor_wcu = figures()["shapes"][SUCCESSOR.name]["capacity"][0]["provisioned_wcu"]
    assert set(successor_wcu) == {"runs", "runs/due"}


def test_a_successor_job_change_is_one_transaction_that_closes_the_head() -> None:
    """A retime on a successor stack: the state, the closed head, its marker and the new head
    (the change transaction, design.md); metered, beside the first registration's state and head."""
    change = figures()["shapes"][SUCCESSOR.name]["job_change"]
    assert {"change state", "change closes head", "change marker", "change new head"} <= set(
        change["retime"]["by_write"]
    )
    assert {"change state", "change new head"} <= set(change["register"]["by_write"])
    assert "state/next-run" not in change["retime"]["by_table"]
    assert "runs/due" in change["retime"]["by_table"]


def test_an_idle_successor_stack_reads_only_due() -> None:
    """A tick and a sweep on a stack deployed ``successor`` page `due` and nothing else (its tables
    have no `next-run` or `lease`, and the meter refuses a query of either, as DynamoDB would);
    the month of them is priced from the pages' metered units."""
    idle = figures()["shapes"][SUCCESSOR.name]["idle"]
    prices, _ = units.load_prices()
    for stack in idle.values():
        for actor in ("tick", "sweep"):
            assert stack[actor]["requests_by_index_or_table"] == ["Query due"], actor
        month = (stack["tick"]["read_units"] + stack["sweep"]["read_units"]) * shape_figures.MINUTES_PER_MONTH
        assert stack["read_units_per_month"] == round(month)
        read_usd = float(prices["dynamodb"]["read_request_unit_usd_per_million"])
        assert stack["usd_per_month_on_demand"] == pytest.approx(month / 1e6 * read_usd, abs=1e-4)


def test_at_the_defaults_a_successor_tick_may_read_a_claimed_run_again() -> None:
    """A claimed run keeps its head's `check_at` until it commits, so a tick a minute with a 90 s
    lookahead meets some claimed runs a second time before their instant, and reads their
    successor again; a legacy run is never read by the trigger. Measured on a timeline, not
    modelled: the figure is between one read a run and two."""
    shapes = figures()["shapes"]
    successor = shapes[SUCCESSOR.name]["read_units_at_defaults"]["read_units_by_request"]
    once = shapes[SUCCESSOR.name]["read_units_by_request"]["trigger: GetItem runs"]
    assert once < successor["trigger: GetItem runs"] < 2 * once
    legacy = shapes[LEGACY.name]["read_units_at_defaults"]["read_units_by_request"]
    assert "trigger: GetItem runs" not in legacy
    assert legacy["trigger: GetItem jobs"] == successor["trigger: GetItem jobs"] == 1
