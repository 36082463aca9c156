"""DynamoDB capacity units and list-price cost of a run, from measured item sizes and request counts.

Formula (documented in docs/benchmarks.md):

- item size: attribute names plus values, as DynamoDB sizes them (strings and binary by UTF-8
  length, numbers ~1 byte per two significant digits plus one, booleans and nulls 1 byte, maps and
  lists 3 bytes plus 1 per element plus their contents);
- a standard write costs ``ceil(size / 1 KB)`` write units, sized by the larger of the item before
  and after; in a transaction every item costs twice that;
- every global secondary index the write touches costs one more write of the index entry (our
  indexes project ALL, so the entry is the item): one put when the item enters the index, one
  delete when it leaves it, a delete plus a put when its index key changes, and one put when a
  projected attribute changes with the key unchanged. Index writes are never doubled by transactions;
- an eventually consistent query costs ``ceil(bytes returned / 4 KB) / 2`` read units per page.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

KB = 1024
READ_CHUNK = 4 * KB

DEFAULT_PRICES: dict[str, dict[str, Any]] = {
    "dynamodb": {"write_request_unit_usd_per_million": 0.625, "read_request_unit_usd_per_million": 0.125},
    "sqs": {"standard_request_usd_per_million": 0.40},
    "lambda": {"request_usd_per_million": 0.20, "gb_second_usd": 0.0000166667},
    "eventbridge_scheduler": {"invocation_usd_per_million": 1.00},
    "baseline": {"usd_per_million_runs": 2.45, "description": "EventBridge Scheduler + Lambda + idempotency"},
}


def _number_size(value: int | float | Decimal) -> int:
    digits = str(abs(Decimal(str(value)).normalize())).replace(".", "").lstrip("0") or "0"
    return (len(digits) + 1) // 2 + 1


def value_size(value: Any) -> int:
    if value is None or isinstance(value, bool):
        return 1
    if isinstance(value, int | float | Decimal):
        return _number_size(value)
    if isinstance(value, str):
        return len(value.encode())
    if isinstance(value, bytes):
        return len(value)
    if isinstance(value, dict):
        return 3 + sum(1 + len(str(k).encode()) + value_size(v) for k, v in value.items())
    if isinstance(value, list | tuple | set):
        return 3 + sum(1 + value_size(v) for v in value)
    return len(str(value).encode())


def item_size(item: dict[str, Any]) -> int:
    """DynamoDB's size of an item, in bytes."""
    return sum(len(name.encode()) + value_size(value) for name, value in item.items() if value is not None)


def write_units(size: int, transactional: bool = False) -> int:
    units = max(1, math.ceil(size / KB))
    return 2 * units if transactional else units


def index_units(size: int, change: str) -> int:
    """Write units of one GSI for one item write: change is enter, leave, rekey, update or none."""
    per_write = max(1, math.ceil(size / KB))
    return {"enter": 1, "leave": 1, "rekey": 2, "update": 1, "none": 0}[change] * per_write


def query_read_units(bytes_returned: int) -> float:
    return max(1, math.ceil(bytes_returned / READ_CHUNK)) * 0.5


@dataclass(frozen=True)
class RunUnits:
    claim: int
    start: int
    commit: int

    @property
    def total(self) -> int:
        return self.claim + self.start + self.commit


def run_write_units(job_size: int, run_size: int, uses_slot: bool) -> RunUnits:
    """Estimated write units of one run that finishes within one lease (claim, start, commit).

    Tables and indexes: jobs (index next-run: sched_shard/next_run_at), runs (index lease:
    lease_shard/lease_expires_at; index job-runs: job_id/scheduled_at, keys only, so a run's
    later updates do not write it).
    """
    # Claim: TransactWriteItems(advance job, put run). The job's next_run_at changes (next-run
    # rekey; a one-off job leaving the index costs less, we count the recurring case); the run
    # enters lease and job-runs.
    claim = (
        write_units(job_size, True)
        + write_units(run_size, True)
        + index_units(job_size, "rekey")
        + index_units(run_size, "enter")
        + index_units(run_size, "enter")
    )
    # Start: UpdateItem(run) renews lease_expires_at (lease rekey); job-runs (keys only) is not
    # written. With the overlap slot it is a transaction that also sets the job's active_run_id
    # (next-run entry update).
    start = write_units(run_size, uses_slot) + index_units(run_size, "rekey")
    # Commit: UpdateItem(run) removes the lease (lease leave); with the slot a transaction that
    # also releases it.
    commit = write_units(run_size, uses_slot) + index_units(run_size, "leave")
    if uses_slot:
        start += write_units(job_size, True) + index_units(job_size, "update")
        commit += write_units(job_size, True) + index_units(job_size, "update")
    return RunUnits(claim, start, commit)


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


def usd_per_million_runs(inputs: CostInputs, prices: dict[str, dict[str, Any]]) -> dict[str, float]:
    """Cost of a million runs by service, and the total (Lambda duration excluded)."""
    ddb = prices["dynamodb"]
    parts = {
        "dynamodb_writes": inputs.write_units * float(ddb["write_request_unit_usd_per_million"]),
        "dynamodb_reads": inputs.read_units * float(ddb["read_request_unit_usd_per_million"]),
        "sqs": inputs.sqs_requests * float(prices["sqs"]["standard_request_usd_per_million"]),
        "lambda_requests": inputs.lambda_requests * float(prices["lambda"]["request_usd_per_million"]),
    }
    rounded = {name: round(value, 4) for name, value in parts.items()}
    rounded["total"] = round(sum(parts.values()), 4)
    return rounded
