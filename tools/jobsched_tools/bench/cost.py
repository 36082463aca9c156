"""The bench's cost of a run in both capacity modes (issue 37), beside the baseline it is compared
with: the same metered units priced on-demand and provisioned (bench/units.py)."""

from __future__ import annotations

from typing import Any

from jobsched_tools.bench import baseline, units


def capacity_modes(
    default: dict[str, Any], on_demand: dict[str, float], prices: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """The same metered units priced with the tables provisioned at the price table's utilisation,
    beside on-demand, and the baseline (EventBridge Scheduler, a Lambda target and Powertools'
    idempotency table, its writes measured) priced both ways (issue 37)."""
    provisioned = units.usd_per_million_runs(
        units.CostInputs(
            write_units=default["est_write_units_per_run"],
            read_units=default["est_read_units_per_run"],
            sqs_requests=default["sqs_requests_per_run"],
            lambda_requests=default["lambda_requests_per_run"],
        ),
        prices,
        mode="provisioned",
    )
    parts = {k: v for k, v in provisioned.items() if k != "total"}
    parts |= {k: v for k, v in on_demand.items() if k.startswith("lambda_compute")}
    provisioned = parts | {"total": round(sum(parts.values()), 4)}
    measured = baseline.measure()
    baselines = {
        mode: baseline.usd_per_million_runs(measured, prices, *units.unit_prices(prices, mode))
        for mode in ("on_demand", "provisioned")
    }
    return {
        "usd_per_million_runs_provisioned": provisioned["total"],
        "usd_per_million_runs_provisioned_by_service": provisioned,
        "provisioned_utilization": float(prices["dynamodb_provisioned"]["utilization"]),
        "baseline_usd_per_million_runs": baselines["on_demand"]["total"],
        "baseline_usd_per_million_runs_provisioned": baselines["provisioned"]["total"],
        "baseline_by_service": baselines,
        "baseline_measured": measured,
        "baseline_description": str(prices["baseline"]["description"]),
    }
