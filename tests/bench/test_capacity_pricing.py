"""Issue 37: the same metered units priced on-demand and provisioned, and the baseline (EventBridge
Scheduler, a Lambda target and Powertools' idempotency table) priced both ways from its measured
writes."""

from __future__ import annotations

import pytest
from jobsched_tools.bench import baseline, units


def test_a_provisioned_unit_is_an_hour_of_capacity_at_the_utilisation() -> None:
    prices = units.DEFAULT_PRICES
    write, read = units.unit_prices(prices, "provisioned", utilization=1.0)
    # A million units at 100 % use: 277.8 unit-hours.
    assert write == pytest.approx(1e6 / 3600 * 0.00065)
    assert read == pytest.approx(1e6 / 3600 * 0.00013)
    at_70, _ = units.unit_prices(prices, "provisioned", utilization=0.7)
    assert at_70 == pytest.approx(write / 0.7)
    assert units.unit_prices(prices) == (0.625, 0.125)


def test_provisioned_pays_above_its_break_even_utilisation() -> None:
    """deploy.md's break-even: provisioned costs less than on-demand per unit above ~29 % use."""
    prices = units.DEFAULT_PRICES
    on_demand, _ = units.unit_prices(prices)
    assert units.unit_prices(prices, "provisioned", utilization=0.30)[0] < on_demand
    assert units.unit_prices(prices, "provisioned", utilization=0.28)[0] > on_demand


def test_the_same_inputs_price_both_modes() -> None:
    inputs = units.CostInputs(write_units=10, read_units=0.04, sqs_requests=0.3, lambda_requests=0.11)
    on_demand = units.usd_per_million_runs(inputs, units.DEFAULT_PRICES)
    provisioned = units.usd_per_million_runs(inputs, units.DEFAULT_PRICES, mode="provisioned")
    assert on_demand["dynamodb_writes"] == pytest.approx(6.25)
    assert provisioned["dynamodb_writes"] == pytest.approx(10 * 1e6 / 3600 * 0.00065 / 0.7, abs=1e-4)
    assert (
        provisioned["sqs"] == on_demand["sqs"]
        and provisioned["lambda_requests"] == on_demand["lambda_requests"]
    )


def test_the_baseline_writes_are_measured_from_powertools() -> None:
    measured = baseline.measure(invocations=4)
    # Powertools' idempotency today: an INPROGRESS put and a COMPLETED update per fresh event.
    assert measured["idempotency_write_units_per_run"] == 2.0
    on_demand = baseline.usd_per_million_runs(
        measured, units.DEFAULT_PRICES, *units.unit_prices(units.DEFAULT_PRICES)
    )
    assert on_demand["total"] == pytest.approx(2.45)
    provisioned = baseline.usd_per_million_runs(
        measured, units.DEFAULT_PRICES, *units.unit_prices(units.DEFAULT_PRICES, "provisioned")
    )
    assert provisioned["total"] < on_demand["total"]


def test_the_scale_model_sizes_provisioned_capacity_from_metered_units() -> None:
    from jobsched_tools.bench import scale

    m = scale.Measured(
        trigger_cpu_ms_per_run=6.5,
        worker_cpu_ms_per_run=5.0,
        worker_wait_s_per_batch=0.5,
        units_by_table={"runs": 5.0, "state": 2.0},
        read_units_per_run=0.0,
    )
    plan = scale.capacity_plan(m, 1_000, units.DEFAULT_PRICES)
    # 5,000 units/s on the runs table held at 70 %: 7,143 WCU provisioned.
    assert plan["provisioned_wcu"] == {"runs": 7_143, "state": 2_858}
    hours = scale.HOURS_PER_MONTH
    assert plan["dynamodb_usd_per_month_provisioned"] == round((7_143 + 2_858) * 0.00065 * hours)
    assert plan["dynamodb_usd_per_month_on_demand"] == round(7_000 * 3600 * hours / 1e6 * 0.625)
    assert plan["dynamodb_usd_per_month_provisioned"] < plan["dynamodb_usd_per_month_on_demand"]
