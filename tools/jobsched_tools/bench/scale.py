"""The scale model (issue 18, part 5): runs/s from measured CPU per run, Lambda's vCPU per memory
size, the worker's real concurrency, SQS and DynamoDB limits, and the template's parameter ranges.

Inputs, each read at run time, nothing about jobsched's own cost hard-coded:

- CPU per run, measured by ``jobsched bench`` (bench/cpu.py): ``trigger_cpu_ms_per_run`` (query,
  claim, send) and ``worker_cpu_ms_per_run`` (start, commit);
- the worker's mean wait per batch for the exact second (bench/worker_wait.py, from the core's
  ``send_delay_seconds`` and the worker's rule);
- write units per run by table and index (bench/write_units.py, metered with DynamoDB's rules);
- the template's parameters: defaults, MinValue/MaxValue/AllowedValues (``TriggerGroups`` is read
  when the template has it, else one trigger invocation per tick).

Limits (AWS documentation, as of this writing):

- Lambda: one vCPU at 1,769 MB, proportional below; up to 6 vCPUs at 10,240 MB, but one Python
  process holds the GIL and uses about one core
  (https://docs.aws.amazon.com/lambda/latest/dg/configuration-memory.html). Regional concurrency
  1,000 by default (adjustable).
- SQS event source mapping (https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html):
  starts at five concurrent batches, adds up to 300 a minute, at most 1,000 batches at once per
  mapping; ``MaximumConcurrency`` 2-1,000 (the template's ``WorkerMaxConcurrency``).
- SQS standard queue: about 120,000 in-flight messages
  (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/quotas-queues.html).
- DynamoDB: 1,000 WCU/s and 3,000 RCU/s per partition (a GSI partition key value is one partition
  for writes: the next-run, lease and due indexes have ``ShardCount``), and 40,000 write request units/s
  per table and per GSI by default on demand (adjustable).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from jobsched_tools.bench import stack_shapes, units, worker_wait, write_units

MB_PER_VCPU = 1_769
LAMBDA_REGIONAL_CONCURRENCY = 1_000
ESM_MAX_BATCHES = 1_000  # concurrent batches one SQS event source mapping processes
SQS_IN_FLIGHT = 120_000
PARTITION_WCU = 1_000
PARTITION_RCU = 3_000
TABLE_DEFAULT_WRU = 40_000
# In-region latencies assumed (not measurable here): a single-item request, and a claim's
# requests in sequence on one claimer thread (read the definition, create the run, advance).
REQUEST_LATENCY_S = 0.006
CLAIM_REQUESTS = 3
TICK_S = 60  # TickRate rate(1 minute); an invocation claims until its deadline (Timeout 60 s)
TRIGGER_TIMEOUT_S = 60
DEADLINE_MARGIN_S = 3  # DeadlineMarginMs default
OTHER_FUNCTIONS = 2  # the detector and the registrar hold a concurrency each
MEMORY_STEPS = (512, 1024, 1769)
TARGETS = (1_000, 10_000, 100_000)


@dataclass(frozen=True)
class Measured:
    trigger_cpu_ms_per_run: float
    worker_cpu_ms_per_run: float
    worker_wait_s_per_batch: float
    units_by_table: dict[str, float]
    read_units_per_run: float
    handler_s: float = 0.1  # the user's handler, overlapped within a batch (record threads)

    @classmethod
    def from_bench(cls, data: dict[str, Any], overlap: str = "skip") -> Measured:
        missing = [k for k in ("trigger_cpu_ms_per_run", "worker_cpu_ms_per_run") if k not in data]
        if missing:
            raise KeyError(f"the bench JSON has no {missing}: run `jobsched bench --json` first")
        # The stack shape that bench run metered (bench/stack_shapes.py; a run before issue 37's
        # shapes metered the legacy claim), so that a JSON's model stays that run's.
        shape = stack_shapes.BY_NAME[str(data.get("claim_shape", stack_shapes.LEGACY.name))]
        units = write_units.measure(overlap, payload_bytes=0, runs=20, heartbeats=0, shape=shape)
        return cls(
            trigger_cpu_ms_per_run=float(data["trigger_cpu_ms_per_run"]),
            worker_cpu_ms_per_run=float(data["worker_cpu_ms_per_run"]),
            worker_wait_s_per_batch=worker_wait.measure()["worker_wait_s_per_batch"],
            units_by_table=units.by_table,
            read_units_per_run=float(data.get("est_read_units_per_run", 0.0)),
        )


@dataclass(frozen=True)
class Settings:
    shard_count: int
    trigger_groups: int
    claim_concurrency: int
    max_claims_per_tick: int
    trigger_memory_mb: int
    worker_memory_mb: int
    worker_max_concurrency: int
    worker_batch: int


# Each setting's template parameter (TriggerGroups may be absent: then 1).
PARAMETERS = {
    "shard_count": "ShardCount",
    "trigger_groups": "TriggerGroups",
    "claim_concurrency": "ClaimConcurrency",
    "max_claims_per_tick": "MaxClaimsPerTick",
    "trigger_memory_mb": "TriggerMemorySize",
    "worker_memory_mb": "WorkerMemorySize",
    "worker_max_concurrency": "WorkerMaxConcurrency",
    "worker_batch": "WorkerBatchSize",
}


def _bound(spec: dict[str, Any], which: str) -> int:
    if "AllowedValues" in spec:
        values = [int(v) for v in spec["AllowedValues"]]
        return max(values) if which == "MaxValue" else min(values)
    return int(spec.get(which, spec["Default"]))


def template_settings(template: dict[str, Any]) -> tuple[Settings, Settings, Settings]:
    """The template's defaults, smallest and largest allowed values, as model settings."""
    params = template["Parameters"]

    def pick(which: str) -> Settings:
        values = {}
        for name, parameter in PARAMETERS.items():
            spec = params.get(parameter)
            if spec is None:
                values[name] = 1  # TriggerGroups not in this template: one invocation per tick
            elif which == "Default":
                values[name] = int(spec["Default"])
            else:
                values[name] = _bound(spec, which)
        return Settings(**values)

    return pick("Default"), pick("MinValue"), pick("MaxValue")


def load_template(path: Path | None = None) -> dict[str, Any]:
    from jobsched_tools.emulator.provision import load_template as load

    return load(path)


def vcpu(memory_mb: int) -> float:
    return min(1.0, memory_mb / MB_PER_VCPU)


def worker_batch_s(m: Measured, s: Settings) -> float:
    """One worker invocation's billed time for a full batch: the wait for the exact second, the
    start and commit round trips (records overlap on threads), the handler, and every record's CPU
    in turn (one process, one core's share)."""
    cpu = s.worker_batch * m.worker_cpu_ms_per_run / 1000 / vcpu(s.worker_memory_mb)
    return m.worker_wait_s_per_batch + 2 * REQUEST_LATENCY_S + m.handler_s + cpu


def limits(m: Measured, s: Settings) -> dict[str, float]:
    """Runs/s each limit allows at settings ``s``."""
    duty = (TRIGGER_TIMEOUT_S - DEADLINE_MARGIN_S) / TICK_S
    per_invocation_cpu = vcpu(s.trigger_memory_mb) / (m.trigger_cpu_ms_per_run / 1000) * min(1.0, duty)
    worker_concurrency = min(
        s.worker_max_concurrency,
        ESM_MAX_BATCHES,
        LAMBDA_REGIONAL_CONCURRENCY - s.trigger_groups - OTHER_FUNCTIONS,
    )
    batch_s = worker_batch_s(m, s)
    out = {
        "trigger CPU (TriggerGroups x TriggerMemorySize)": s.trigger_groups * per_invocation_cpu,
        "trigger claim latency (TriggerGroups x ClaimConcurrency)": s.trigger_groups
        * s.claim_concurrency
        / (CLAIM_REQUESTS * REQUEST_LATENCY_S),
        "trigger MaxClaimsPerTick per tick": s.trigger_groups * s.max_claims_per_tick / TICK_S,
        "worker concurrency (WorkerMaxConcurrency, ESM, regional)": worker_concurrency
        * s.worker_batch
        / batch_s,
        "SQS in-flight messages (120,000)": SQS_IN_FLIGHT / batch_s,
    }
    for index, label in (
        ("state/next-run", "next-run index"),
        ("runs/lease", "lease index"),
        ("runs/due", "due index"),
    ):
        units = m.units_by_table.get(index, 0.0)
        if units:
            out[f"{label} partitions (ShardCount x 1,000 WCU/s)"] = s.shard_count * PARTITION_WCU / units
    for table, units in m.units_by_table.items():
        if units:
            out[f"{table} on-demand quota (40,000 WRU/s, adjustable)"] = TABLE_DEFAULT_WRU / units
    if m.read_units_per_run:
        claim_index = "next-run" if m.units_by_table.get("state/next-run") else "due"
        out[f"{claim_index} index reads (ShardCount x 3,000 RCU/s)"] = (
            s.shard_count * PARTITION_RCU / m.read_units_per_run
        )
    return out


def rate(m: Measured, s: Settings) -> tuple[float, str]:
    """Runs/s at settings ``s``, and the first limit (the lowest)."""
    name, value = min(limits(m, s).items(), key=lambda kv: kv[1])
    return value, name


@dataclass(frozen=True)
class Plan:
    target: int
    settings: Settings
    runs_per_s: float
    first_limit: str
    reached: bool
    trigger_groups_needed: int  # at TriggerMemorySize 1,769 (one vCPU), whatever the template allows


def _trigger_per_invocation(m: Measured, s: Settings) -> float:
    one = replace(s, trigger_groups=1)
    return min(v for k, v in limits(m, one).items() if k.startswith("trigger"))


def _steps(low: int, high: int) -> list[int]:
    return [mb for mb in MEMORY_STEPS if low <= mb <= high] or [low]


def _size_trigger(m: Measured, target: int, s: Settings, default: Settings, largest: Settings) -> Settings:
    """The fewest trigger invocations at the least memory step that carries ``target``."""
    for memory in _steps(default.trigger_memory_mb, largest.trigger_memory_mb):
        s = replace(s, trigger_memory_mb=memory)
        per_invocation = _trigger_per_invocation(m, s)
        groups = min(largest.trigger_groups, max(default.trigger_groups, math.ceil(target / per_invocation)))
        s = replace(s, trigger_groups=groups)
        if groups * per_invocation >= target:
            break
    return s


def _size_worker(m: Measured, target: int, s: Settings, default: Settings, largest: Settings) -> Settings:
    for memory in _steps(default.worker_memory_mb, largest.worker_memory_mb):
        s = replace(s, worker_memory_mb=memory)
        needed = math.ceil(target / (s.worker_batch / worker_batch_s(m, s)))
        s = replace(
            s,
            worker_max_concurrency=min(
                largest.worker_max_concurrency, max(default.worker_max_concurrency, needed)
            ),
        )
        if s.worker_max_concurrency >= needed:
            break
    return s


def plan(m: Measured, target: int, default: Settings, largest: Settings) -> Plan:
    """The smallest change to the defaults, within the template's ranges, that carries ``target``
    runs/s; or, when nothing allowed does, the largest settings and the limit that stops them."""
    per_tick = max(default.max_claims_per_tick, math.ceil(target * TICK_S))
    s = replace(default, max_claims_per_tick=min(largest.max_claims_per_tick, per_tick))
    s = _size_trigger(m, target, s, default, largest)
    shards = [s.trigger_groups, default.shard_count]
    shards += [
        math.ceil(target * m.units_by_table.get(k, 0) / PARTITION_WCU)
        for k in ("state/next-run", "runs/lease", "runs/due")
    ]
    s = replace(s, shard_count=min(largest.shard_count, max(shards)))
    s = _size_worker(m, target, s, default, largest)
    at_one_vcpu = _trigger_per_invocation(m, replace(largest, trigger_memory_mb=MB_PER_VCPU))
    needed = math.ceil(target / at_one_vcpu)
    value, limit = rate(m, s)
    if value < target:
        s = largest
        value, limit = rate(m, s)
    return Plan(target, s, value, limit, value >= target, needed)


def model(m: Measured, template: dict[str, Any]) -> dict[str, Any]:
    default, _, largest = template_settings(template)
    at_default, default_limit = rate(m, default)
    at_max, max_limit = rate(m, largest)
    return {
        "modelled_runs_per_s_default": round(at_default, 1),
        "modelled_first_limit_default": default_limit,
        "modelled_runs_per_s_max": round(at_max, 1),
        "modelled_first_limit_max": max_limit,
        "modelled_plans": [plan_json(plan(m, target, default, largest)) for target in TARGETS],
        "modelled_capacity": [capacity_plan(m, target) for target in CAPACITY_TARGETS],
    }


CAPACITY_TARGETS = (1_000, 10_000)
HOURS_PER_MONTH = 730


def capacity_plan(
    m: Measured, target: int, prices: dict[str, dict[str, Any]] | None = None
) -> dict[str, Any]:
    """``capacity`` for the measured units (``m``'s CPU figures play no part)."""
    return capacity(m.units_by_table, m.read_units_per_run, target, prices)


def capacity(
    units_by_table: dict[str, float],
    read_units_per_run: float,
    target: int,
    prices: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """What ``target`` runs/s need of DynamoDB in each capacity mode, a month, steady: the write
    capacity each table and index must have provisioned (its metered units per run times the rate,
    over the utilisation target tracking holds), and the month's DynamoDB bill on-demand and
    provisioned (writes and reads; storage, streams and the user's handler apart)."""
    prices = prices or units.load_prices()[0]
    provisioned = prices["dynamodb_provisioned"]
    used = float(provisioned["utilization"])
    wcu = {name: math.ceil(target * per_run / used) for name, per_run in sorted(units_by_table.items())}
    rcu = math.ceil(target * read_units_per_run / used)
    seconds = HOURS_PER_MONTH * 3600
    write_units_month = target * sum(units_by_table.values()) * seconds
    on_demand = write_units_month / 1e6 * float(prices["dynamodb"]["write_request_unit_usd_per_million"]) + (
        target
        * read_units_per_run
        * seconds
        / 1e6
        * float(prices["dynamodb"]["read_request_unit_usd_per_million"])
    )
    provisioned_usd = HOURS_PER_MONTH * (
        sum(wcu.values()) * float(provisioned["write_capacity_unit_hour_usd"])
        + rcu * float(provisioned["read_capacity_unit_hour_usd"])
    )
    return {
        "target_runs_per_s": target,
        "utilization": used,
        "provisioned_wcu": wcu,
        "provisioned_rcu_total": rcu,
        "dynamodb_usd_per_month_on_demand": round(on_demand),
        "dynamodb_usd_per_month_provisioned": round(provisioned_usd),
    }


def plan_json(p: Plan) -> dict[str, Any]:
    return {
        "target_runs_per_s": p.target,
        "reached": p.reached,
        "runs_per_s": round(p.runs_per_s, 1),
        "first_limit": p.first_limit,
        "trigger_groups_needed_at_1769_mb": p.trigger_groups_needed,
        "settings": {PARAMETERS[k]: v for k, v in p.settings.__dict__.items()},
    }


def bench_keys(
    cpu_figures: dict[str, Any], read_units_per_run: float, template_path: Path | None = None
) -> dict[str, Any]:
    """The model's figures for the bench JSON, from this run's CPU measurements."""
    units = write_units.measure("skip", payload_bytes=0, runs=20, heartbeats=0)
    m = Measured(
        trigger_cpu_ms_per_run=float(cpu_figures["trigger_cpu_ms_per_run"]),
        worker_cpu_ms_per_run=float(cpu_figures["worker_cpu_ms_per_run"]),
        worker_wait_s_per_batch=worker_wait.measure()["worker_wait_s_per_batch"],
        units_by_table=units.by_table,
        read_units_per_run=read_units_per_run,
    )
    return model(m, load_template(template_path))


def markdown(
    m: Measured, template: dict[str, Any], fmt: Callable[[float], str] = lambda v: f"{v:,.0f}"
) -> str:
    """The table docs/scaling.md carries between its scale-model markers."""
    default, _, largest = template_settings(template)
    rows = [
        "| runs/s | reached | ShardCount | TriggerGroups | TriggerMemorySize | ClaimConcurrency | "
        "MaxClaimsPerTick | WorkerMemorySize | WorkerMaxConcurrency | modelled runs/s | first limit | "
        "trigger invocations needed at 1,769 MB |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]

    def row(label: str, s: Settings, reached: str, needed: str) -> str:
        value, limit = rate(m, s)
        return (
            f"| {label} | {reached} | {s.shard_count} | {s.trigger_groups} | {s.trigger_memory_mb} | "
            f"{s.claim_concurrency} | {s.max_claims_per_tick:,} | {s.worker_memory_mb} | "
            f"{s.worker_max_concurrency} | {fmt(value)} | {limit} | {needed} |"
        )

    rows.append(row("defaults", default, "-", "-"))
    for target in TARGETS:
        p = plan(m, target, default, largest)
        rows.append(
            row(f"{target:,}", p.settings, "yes" if p.reached else "**no**", f"{p.trigger_groups_needed:,}")
        )
    rows.append(row("largest allowed", largest, "-", "-"))
    return "\n".join(rows)
