"""DynamoDB item sizes and the list-price cost of a run, from measured units and request counts.

The write units themselves are metered (fakes/metering.py applies DynamoDB's capacity rules to
every write the services make; bench/write_units.py runs short jobs through it). The formula it
applies is documented, with DynamoDB's own pages cited, in docs/benchmarks.md. Here:

- item size: core/limits.py's ``item_size`` (the one DynamoDB's limits are enforced with);
- an eventually consistent query costs ``ceil(bytes returned / 4 KB) / 2`` read units per page.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

KB = 1024
READ_CHUNK = 4 * KB

DEFAULT_PRICES: dict[str, dict[str, Any]] = {
    "dynamodb": {"write_request_unit_usd_per_million": 0.625, "read_request_unit_usd_per_million": 0.125},
    "dynamodb_provisioned": {
        "write_capacity_unit_hour_usd": 0.00065,
        "read_capacity_unit_hour_usd": 0.00013,
        "utilization": 0.70,
    },
    "sqs": {"standard_request_usd_per_million": 0.40},
    "lambda": {
        "request_usd_per_million": 0.20,
        "gb_second_usd": 0.0000166667,
        "arm64_gb_second_usd": 0.0000133334,
    },
    "eventbridge_scheduler": {"invocation_usd_per_million": 1.00},
    "cloudwatch": {
        "alarm_usd_per_month": 0.10,
        "dashboard_usd_per_month": 3.00,
        "custom_metric_usd_per_month": 0.30,
        "logs_ingestion_usd_per_gb": 0.50,
    },
    "baseline": {"usd_per_million_runs": 2.45, "description": "EventBridge Scheduler + Lambda + idempotency"},
}


def query_read_units(bytes_returned: int) -> float:
    return max(1, math.ceil(bytes_returned / READ_CHUNK)) * 0.5


def find_prices(start: Path | None = None) -> Path | None:
    """config/prices.toml in the current folder or a parent, else next to the package's repo."""
    for base in (start or Path.cwd(), Path(__file__).resolve()):
        for folder in (base, *base.parents):
            candidate = folder / "config" / "prices.toml"
            if candidate.is_file():
                return candidate
    return None


def load_prices(path: Path | None = None) -> tuple[dict[str, dict[str, Any]], str]:
    """The price table and where it came from (a file, or the built-in copy of the same numbers)."""
    source = path or find_prices()
    if source is None:
        return DEFAULT_PRICES, "built-in defaults"
    with open(source, "rb") as handle:
        data = tomllib.load(handle)
    merged = {section: {**values, **data.get(section, {})} for section, values in DEFAULT_PRICES.items()}
    return merged, project_relative(source)


def project_relative(path: Path) -> str:
    """``path`` as committed output records it: relative to the project root (the nearest folder
    above it with a pyproject.toml), else to the current folder, else its name alone; never the
    absolute path of the machine it ran on."""
    resolved = path.resolve()
    roots = [folder for folder in resolved.parents if (folder / "pyproject.toml").is_file()][:1]
    for root in (*roots, Path.cwd().resolve()):
        if resolved.is_relative_to(root):
            return resolved.relative_to(root).as_posix()
    return resolved.name


@dataclass(frozen=True)
class CostInputs:
    write_units: float
    read_units: float
    sqs_requests: float
    lambda_requests: float


def unit_prices(
    prices: dict[str, dict[str, Any]], mode: str = "on_demand", utilization: float | None = None
) -> tuple[float, float]:
    """USD per million write units and per million read units, on-demand or provisioned.

    Provisioned: a capacity unit held for an hour serves 3,600 unit-seconds, of which auto scaling's
    target tracking keeps ``utilization`` in use (the rest is headroom, paid all the same), so a
    million units cost ``1e6 / 3600 / utilization`` unit-hours. A write capacity unit is one write of
    up to 1 KB a second, and a transactional write takes two, as on-demand counts write request
    units; a read capacity unit is one strongly consistent read of up to 4 KB a second, as a read
    request unit (https://aws.amazon.com/dynamodb/pricing/provisioned/). So the same metered units
    price both modes.
    """
    if mode == "on_demand":
        ddb = prices["dynamodb"]
        return float(ddb["write_request_unit_usd_per_million"]), float(
            ddb["read_request_unit_usd_per_million"]
        )
    provisioned = prices["dynamodb_provisioned"]
    used = float(provisioned["utilization"] if utilization is None else utilization)
    unit_hours = 1e6 / 3600 / used
    return (
        unit_hours * float(provisioned["write_capacity_unit_hour_usd"]),
        unit_hours * float(provisioned["read_capacity_unit_hour_usd"]),
    )


def usd_per_million_runs(
    inputs: CostInputs, prices: dict[str, dict[str, Any]], mode: str = "on_demand"
) -> dict[str, float]:
    """Cost of a million runs by service, and the total (Lambda duration excluded), with the tables
    on-demand or provisioned (``unit_prices``)."""
    write_unit_usd, read_unit_usd = unit_prices(prices, mode)
    parts = {
        "dynamodb_writes": inputs.write_units * write_unit_usd,
        "dynamodb_reads": inputs.read_units * read_unit_usd,
        "sqs": inputs.sqs_requests * float(prices["sqs"]["standard_request_usd_per_million"]),
        "lambda_requests": inputs.lambda_requests * float(prices["lambda"]["request_usd_per_million"]),
    }
    rounded = {name: round(value, 4) for name, value in parts.items()}
    rounded["total"] = round(sum(parts.values()), 4)
    return rounded
