"""Every read a run makes is metered by reader and priced (issue 37): the bench's
``est_read_units_per_run`` is the meter's, and the cost study prices the same figure."""

from __future__ import annotations

import pytest
from jobsched_tools.bench import read_units, stack_shapes, unit_shapes
from jobsched_tools.bench.stack_shapes import LEGACY, SHAPES, SUCCESSOR


def test_every_unit_the_meter_charges_is_attributed_to_a_reader_and_a_request() -> None:
    """A read the ReadMeter does not attribute (a new kind of request, a reader outside the
    measured steps) would be charged by the MeteringStore and priced by nobody: it fails here."""
    for shape in SHAPES:
        store = stack_shapes.metered_store(shape, read_units.ReadMeter)
        reads = read_units.measure("skip", store=store, shape=shape)
        attributed = sum(store.units.values()) + sum(store.page_floor.values())
        assert attributed == pytest.approx(store.read_units), shape.name
        assert {reader for reader, _ in store.units} | set(store.page_floor) <= set(read_units.READERS)
        assert sum(reads.by_request.values()) == pytest.approx(reads.read_units_per_run, abs=1e-3)


def test_skip_reads_the_job_at_the_claim_and_the_run_before_at_the_start() -> None:
    """The default policy at steady state: the trigger's strongly consistent GetItem of the job
    item at each claim (load_job, 1 unit) and the worker's of the run before it (1 unit), beside
    each entry's share of the trigger's pages. ``allow`` walks no chain."""
    skip, allow = read_units.measure("skip", shape=LEGACY), read_units.measure("allow", shape=LEGACY)
    assert skip.by_request["trigger: GetItem jobs"] == 1
    assert skip.by_request["worker: GetItem runs"] == 1
    assert 0 < skip.by_request["trigger: Query next-run"] < 0.1
    assert "worker: GetItem runs" not in allow.by_request
    assert skip.read_units_per_run == pytest.approx(allow.read_units_per_run + 1)
    # A short run commits before its check time: the detector reads no run for it, only pages,
    # whose half-unit minimum is paid per sweep (the idle cost), not per run.
    assert skip.by_reader["detector"] == 0 and skip.page_floor_by_reader["detector"] > 0


def test_the_cost_study_prices_the_reads_the_bench_prices() -> None:
    product = next(shape for shape in unit_shapes.measure_shapes() if shape.name == "product")
    legacy = read_units.measure("skip", shape=LEGACY)
    assert product.product_read_units_per_run == round(legacy.read_units_per_run, 3)


def test_a_successor_run_reads_its_heads_successor_and_due_pages() -> None:
    """On the template's default shape (``successor``) the trigger reads each head's successor
    key before its put (eventually consistent, half a unit: the item is absent) and pages `due`,
    not next-run; the job item at the claim and the run before it at skip's start stay as they
    are. The units are the meter's, not a model's."""
    skip = read_units.measure("skip", shape=SUCCESSOR)
    legacy = read_units.measure("skip", shape=LEGACY)
    assert skip.by_request["trigger: GetItem runs"] == 0.5
    assert 0 < skip.by_request["trigger: Query due"] < 0.1
    assert skip.by_request.get("trigger: Query next-run", 0) == 0
    assert skip.by_request["trigger: GetItem jobs"] == legacy.by_request["trigger: GetItem jobs"]
    assert skip.by_request["worker: GetItem runs"] == legacy.by_request["worker: GetItem runs"]
