"""A cost-study shape's metered units and what they cost (``ShapeUnits``, ``price``), and the table
docs/proposals/fewer-write-units.md holds (``markdown_table``; the study is bench/unit_shapes.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from jobsched_tools.bench.units import load_prices, unit_prices

# What a run costs besides DynamoDB, from the full bench run of 2026-12-05 (docs/bench-latest.json,
# usd_per_million_runs_by_service): Lambda compute 0.0962 (trigger) + 0.1577 (worker), Lambda
# requests 0.022, SQS 0.12. Every shape makes the same sends, receives and invocations; the
# DynamoDB part is what differs, priced here from the meter in both capacity modes.
OTHER_USD_PER_MILLION = 0.0962 + 0.1577 + 0.022 + 0.12


@dataclass(frozen=True)
class ShapeUnits:
    """One shape's metered units per short run and what they cost."""

    name: str
    summary: str
    write_units_per_run: float  # skip, the default; a TTL removal of an index entry charged
    write_units_per_run_allow: float
    write_units_per_run_4k_payload: float
    write_units_if_ttl_frees_indexes: float
    write_units_per_heartbeat: float
    read_units_added_per_run: float  # beyond the product's metered reads
    by_step: dict[str, float]
    reads: str  # how the reads were counted
    keeps: str  # the guarantees it keeps, or which one it gives up
    gives_up: tuple[str, ...] = ()
    new_fence: str = ""  # a new linearisation point, which the explorer must check before it is built
    product_read_units_per_run: float = 0.0
    usd: dict[str, float] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return self.__dict__.copy()


def price(write_units_per_run: float, read_units_per_run: float) -> dict[str, float]:
    """USD per million runs, on-demand and provisioned at the price table's utilisation
    (bench/units.py ``unit_prices``), with everything but DynamoDB as measured on 2026-12-04."""
    prices, _ = load_prices()
    out = {}
    for mode in ("on_demand", "provisioned"):
        write_usd, read_usd = unit_prices(prices, mode)
        total = write_units_per_run * write_usd + read_units_per_run * read_usd + OTHER_USD_PER_MILLION
        out[mode] = round(total, 2)
    return out


def _units(value: float) -> str:
    return f"{value:g}"


def _gives_up(shape: ShapeUnits) -> str:
    given = ", ".join(shape.gives_up) or "nothing"
    return f"{given}; new fence: {shape.new_fence}" if shape.new_fence else given


def markdown_table(shapes: Sequence[ShapeUnits]) -> str:
    """The table docs/proposals/fewer-write-units.md holds (the test compares the two)."""
    lines = [
        "| shape | write units a run (skip / allow / 4 KiB) | if TTL frees the index | read units added "
        "| $/M on-demand | $/M provisioned | gives up |",
        "|---|---|---|---|---|---|---|",
    ]
    for shape in shapes:
        units = "/".join(
            _units(value)
            for value in (
                shape.write_units_per_run,
                shape.write_units_per_run_allow,
                shape.write_units_per_run_4k_payload,
            )
        )
        free = _units(shape.write_units_if_ttl_frees_indexes)
        usd_od, usd_pr = shape.usd["on_demand"], shape.usd["provisioned"]
        if shape.write_units_if_ttl_frees_indexes != shape.write_units_per_run:
            if_free = (
                shape.usd["on_demand_if_ttl_frees_indexes"],
                shape.usd["provisioned_if_ttl_frees_indexes"],
            )
            free += f" (${if_free[0]:.2f} / ${if_free[1]:.2f})"
        lines.append(
            f"| {shape.name} | {units} | {free} | {shape.read_units_added_per_run:g} | "
            f"{usd_od:.2f} | {usd_pr:.2f} | {_gives_up(shape)} |"
        )
    return "\n".join(lines)
