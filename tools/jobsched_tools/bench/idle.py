"""What a stack with no jobs costs a month (issue 27, item 7): ``idle_usd_per_month``.

The scheduled functions run whatever the load: the trigger ticks every minute (a fan-out tick
plus one invocation per other shard group) and the miss detector sweeps every minute. Each idle
invocation is run here on the in-memory store, as the Lambda entry point runs it (the template's
default settings, Powertools telemetry), and measured: its CPU time, its DynamoDB queries, the
rounds of them it waits for, the bytes it logs and the metrics it emits, and the time it spends
asleep (the detector between sweeps). Billed time is then the CPU time at the function's share of
a vCPU (with botocore's CPU per request, which the in-memory store does not spend), plus each
sequential round of requests at an in-region latency, plus the sleep.

Per function, a month (730 hours, AWS's pricing month) of:
- Lambda requests and compute (arm64 GB-seconds at the template's memory);
- DynamoDB reads: each query of an empty index page costs half a read request unit;
- CloudWatch Logs ingestion: the function's own lines plus Lambda's platform lines;
- the worker: no invocation, but Lambda's SQS poller long-polls the empty queue (billed SQS
  requests); the registrar and the outcome publisher: nothing (Lambda's reads of a DynamoDB
  stream are free, and a stack with no jobs writes no record to invoke them with).
Fixed costs that do not depend on invocations are added for ``idle_usd_per_month_all_in``
(issue 35, item 13), each part named: the CloudWatch alarms the template makes at its defaults
(counted from template.yaml, conditions evaluated), the dashboard (off by default:
DashboardEnabled), and the custom metrics an idle invocation publishes (none: a zero count is not
published). What costs nothing idle is listed with its reason. Prices: config/prices.toml.
"""

from __future__ import annotations

import io
import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from jobsched.core.clock import ManualClock
from jobsched.core.config import SchedulerConfig
from jobsched.runtime.telemetry import PowertoolsTelemetry
from jobsched.services.detector import MissDetector
from jobsched.services.fanout import TriggerInvocation
from jobsched.services.trigger import Trigger

from jobsched_tools.bench import cpu
from jobsched_tools.fakes.memory_queue import MemoryWorkQueue
from jobsched_tools.fakes.memory_store import MemoryStore

MINUTES_PER_MONTH = 730 * 60
# In-region request latencies assumed (cpu.WRITE_LATENCY_S is the same figure for a write).
QUERY_LATENCY_S = cpu.WRITE_LATENCY_S
INVOKE_LATENCY_S = 0.02  # an asynchronous Lambda Invoke: 202 Accepted
# botocore's client CPU per request (signing, serialising, parsing), which the in-memory store
# does not spend: README, "a bare conditional write 2.5-2.8 ms" (bench cpu.bare_write_cpu_ms).
BOTOCORE_CPU_MS_PER_REQUEST = 2.8
# Lambda's own lines per invocation in JSON log format (platform.start, platform.report).
PLATFORM_LOG_BYTES = 450
# Lambda's SQS poller on an empty queue: five long polls of 20 s each at a time.
SQS_POLLS_PER_MINUTE = 5 * 3


class CountingStore(MemoryStore):
    """The in-memory store, counting queries (the only requests an idle invocation makes)."""

    queries = 0

    def query(self, *args: Any, **kwargs: Any) -> Any:
        type(self).queries += 1
        return super().query(*args, **kwargs)


class CountingInvoker:
    invoked = 0

    def invoke(self, _event: dict[str, Any]) -> None:
        CountingInvoker.invoked += 1


@dataclass(frozen=True)
class Invocation:
    cpu_ms: float
    queries: int
    query_rounds: int  # sequential rounds of queries (a parallel read of all shards is one)
    invokes: int
    slept_ms: int
    log_bytes: int
    metrics: tuple[str, ...]


def _telemetry() -> tuple[PowertoolsTelemetry, io.StringIO, Metrics]:
    out = io.StringIO()
    logger = Logger(service=f"idle-{uuid.uuid4().hex[:6]}", logger_handler=logging.StreamHandler(out))
    metrics = Metrics(namespace="Jobsched", service="idle")
    return PowertoolsTelemetry(logger, metrics), out, metrics


def _measure(run: Callable[[PowertoolsTelemetry, ManualClock], int], query_rounds: int) -> Invocation:
    telemetry, out, metrics = _telemetry()
    metrics.clear_metrics()
    clock = ManualClock(1_796_083_200_000)
    CountingStore.queries = CountingInvoker.invoked = 0
    started = time.process_time()
    slept = run(telemetry, clock)
    cpu_ms = (time.process_time() - started) * 1000
    names = tuple(sorted(metrics.metric_set))
    blob = json.dumps(metrics.serialize_metric_set()) if names else ""
    metrics.clear_metrics()
    return Invocation(
        cpu_ms=cpu_ms,
        queries=CountingStore.queries,
        query_rounds=query_rounds,
        invokes=CountingInvoker.invoked,
        slept_ms=slept,
        log_bytes=len(out.getvalue().encode()) + len(blob) + PLATFORM_LOG_BYTES,
        metrics=names,
    )


def _median(samples: list[Invocation]) -> Invocation:
    ordered = sorted(samples, key=lambda s: s.cpu_ms)
    return ordered[len(ordered) // 2]


def measure(cfg: SchedulerConfig | None = None, runs: int = 5) -> dict[str, Invocation]:
    """One idle invocation of each kind, the median of ``runs`` by CPU time."""
    cfg = cfg or SchedulerConfig()

    def trigger(event: dict[str, Any]) -> Callable[[PowertoolsTelemetry, ManualClock], int]:
        def run(telemetry: PowertoolsTelemetry, clock: ManualClock) -> int:
            store = CountingStore()
            service = Trigger(store, MemoryWorkQueue(clock), telemetry, clock, cfg)
            invocation = TriggerInvocation(service, CountingInvoker, telemetry, cfg)
            invocation.handle(event, "idle", clock.now_ms() + 60_000)
            return 0

        return run

    def detector(telemetry: PowertoolsTelemetry, clock: ManualClock) -> int:
        slept = 0

        def sleep(ms: int) -> None:
            nonlocal slept
            slept += ms
            clock.advance(ms)

        store = CountingStore()
        service = MissDetector(store, MemoryWorkQueue(clock), telemetry, clock, cfg, parallel_queries=True)
        service.sweep("idle", clock.now_ms() + 60_000, cfg.detector_sweep_seconds * 1000, sleep)
        return slept

    groups = cfg.groups_per_tick
    kinds = {
        "trigger_tick": (trigger({"source": "aws.events", "detail-type": "Scheduled Event"}), 1),
        "trigger_group": (trigger({"group": 1, "groups": groups}), 1),
        # A full sweep reads both indexes over every shard (two parallel rounds), then the next
        # lease lapse and the jobs due (one round each).
        "miss_detector": (detector, 4),
    }
    return {
        name: _median([_measure(run, rounds) for _ in range(runs)]) for name, (run, rounds) in kinds.items()
    }


def usd_per_month(
    invocations: dict[str, Invocation], prices: dict[str, dict[str, Any]], cfg: SchedulerConfig | None = None
) -> dict[str, Any]:
    """``idle_usd_per_month`` by function and in total, with the figures it is made of."""
    cfg = cfg or SchedulerConfig()
    lam, ddb = prices["lambda"], prices["dynamodb"]
    gb_s = float(lam["arm64_gb_second_usd"])
    per_request = float(lam["request_usd_per_million"]) / 1e6
    per_read_unit = float(ddb["read_request_unit_usd_per_million"]) / 1e6
    per_log_byte = float(prices["cloudwatch"]["logs_ingestion_usd_per_gb"]) / 1024**3
    trigger_mb = cpu.template_memory_mb("TriggerMemorySize")
    detector_mb = cpu.FUNCTION_MEMORY_MB

    def billed_s(call: Invocation, memory_mb: int) -> float:
        client_cpu_ms = (call.queries + call.invokes) * BOTOCORE_CPU_MS_PER_REQUEST
        return (
            (call.cpu_ms + client_cpu_ms) / 1000 / cpu.vcpu(memory_mb)
            + call.query_rounds * QUERY_LATENCY_S
            + (INVOKE_LATENCY_S if call.invokes else 0.0)
            + call.slept_ms / 1000
        )

    def monthly(call: Invocation, memory_mb: int, per_minute: float) -> dict[str, float]:
        count = per_minute * MINUTES_PER_MONTH
        parts = {
            "lambda_requests": count * per_request,
            "lambda_compute": count * billed_s(call, memory_mb) * memory_mb / 1024 * gb_s,
            "dynamodb_reads": count * call.queries * 0.5 * per_read_unit,
            "logs": count * call.log_bytes * per_log_byte,
        }
        return {k: round(v, 4) for k, v in parts.items()} | {"total": round(sum(parts.values()), 4)}

    tick, group, sweep = (
        invocations["trigger_tick"],
        invocations["trigger_group"],
        invocations["miss_detector"],
    )
    trigger_tick = monthly(tick, trigger_mb, 1)
    trigger_groups = monthly(group, trigger_mb, cfg.groups_per_tick - 1)
    by_function = {
        "trigger": round(trigger_tick["total"] + trigger_groups["total"], 4),
        "miss_detector": monthly(sweep, detector_mb, 1)["total"],
        "worker": round(
            SQS_POLLS_PER_MINUTE
            * MINUTES_PER_MONTH
            * float(prices["sqs"]["standard_request_usd_per_million"])
            / 1e6,
            4,
        ),
        "registrar": 0.0,
        # With an outcome bus: idle, no run is written, so the runs stream has no record and the
        # publisher is never invoked; Lambda's stream reads are free. Its four alarms are fixed
        # costs, $0.40 a month (idle_fixed_usd_per_month_note).
        "outcome_publisher": 0.0,
    }
    metrics = sorted({*tick.metrics, *group.metrics, *sweep.metrics})
    return {
        "idle_usd_per_month": round(sum(by_function.values()), 4),
        "idle_usd_per_month_by_function": by_function,
        "idle_usd_per_month_parts": {
            "trigger_tick": trigger_tick,
            "trigger_groups": trigger_groups,
            "miss_detector": monthly(sweep, detector_mb, 1),
        },
        "idle_billed_ms": {
            "trigger_tick": round(billed_s(tick, trigger_mb) * 1000, 2),
            "trigger_group": round(billed_s(group, trigger_mb) * 1000, 2),
            "miss_detector": round(billed_s(sweep, detector_mb) * 1000, 2),
        },
        "idle_invocation": {
            name: {
                "cpu_ms": round(call.cpu_ms, 2),
                "queries": call.queries,
                "slept_ms": call.slept_ms,
                "log_bytes": call.log_bytes,
                "metrics": list(call.metrics),
            }
            for name, call in invocations.items()
        },
        "idle_custom_metrics": metrics,
        **all_in(round(sum(by_function.values()), 4), metrics, prices),
    }


def template_resources(parameters: dict[str, str] | None = None) -> dict[str, int]:
    """How many of each resource type template.yaml makes with ``parameters`` (the defaults
    otherwise), each resource's Condition evaluated as CloudFormation would."""
    from jobsched_tools.emulator.provision import load_template
    from jobsched_tools.iam.policy import Stack

    template = load_template()
    stack = Stack(template, parameters or {})
    counts: dict[str, int] = {}
    for resource in template["Resources"].values():
        condition = resource.get("Condition")
        if condition is None or stack.condition(condition):
            counts[resource["Type"]] = counts.get(resource["Type"], 0) + 1
    return counts


def all_in(
    invocations_usd: float, custom_metrics: list[str], prices: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """``idle_usd_per_month_all_in``: the invocations' cost plus what the stack costs by being
    there, at the template's defaults, each part named."""
    cloudwatch = prices["cloudwatch"]
    made = template_resources()
    alarms = made.get("AWS::CloudWatch::Alarm", 0)
    dashboards = made.get("AWS::CloudWatch::Dashboard", 0)
    parts = {
        "invocations": invocations_usd,  # idle_usd_per_month: Lambda, DynamoDB reads, logs, SQS polls
        "alarms": round(alarms * float(cloudwatch["alarm_usd_per_month"]), 4),
        # Beyond an account's first three; off at the defaults (DashboardEnabled).
        "dashboard": round(dashboards * float(cloudwatch["dashboard_usd_per_month"]), 4),
        "custom_metrics": round(len(custom_metrics) * float(cloudwatch["custom_metric_usd_per_month"]), 4),
    }
    return {
        "idle_usd_per_month_all_in": round(sum(parts.values()), 4),
        "idle_usd_per_month_all_in_parts": parts,
        "idle_usd_per_month_all_in_counts": {
            "alarms": alarms,
            "dashboards": dashboards,
            "custom_metrics": len(custom_metrics),
        },
        "idle_usd_per_month_all_in_free": {
            "dynamodb": "on-demand tables bill requests and storage: no item, no charge beyond the "
            "idle reads counted; point-in-time recovery bills per GB of table size",
            "eventbridge_rules": "scheduled rules invoking Lambda are not charged "
            "(https://aws.amazon.com/eventbridge/pricing/)",
            "codedeploy": "deployments to Lambda are not charged (https://aws.amazon.com/codedeploy/pricing/)",
            "streams": "Lambda's reads of DynamoDB streams are not charged; no job, no record",
            "log_storage": "the few MB a month idle at $0.03 per GB-month, kept LogRetentionDays",
        },
    }


def bench_keys(prices: dict[str, dict[str, Any]], runs: int = 5) -> dict[str, Any]:
    cfg = SchedulerConfig()
    return usd_per_month(measure(cfg, runs), prices, cfg)


if __name__ == "__main__":
    from jobsched_tools.bench.units import load_prices

    print(json.dumps(bench_keys(load_prices()[0]), indent=2))
