"""The worker as the Lambda event source mapping feeds it (receive up to 10, process, delete the
batch), on one phase's stack: the counts phase drains a tick's runs this way, and the live phases'
pollers (bench/live.py) feed their workers the same batches."""

from __future__ import annotations

import logging
import time
from typing import cast

from jobsched.core.config import SchedulerConfig
from jobsched.runtime.clock import SystemClock
from jobsched.services.messages import parse_run_message
from jobsched.services.worker import Worker
from jobsched.targets.registry import HandlerRegistry, RunContext, RunLogger

from jobsched_tools.bench.stack import CRASH, NOOP, BenchStack, now_ms
from jobsched_tools.fakes.memory_telemetry import MemoryTelemetry

ESM_BATCH = 10


def _registry() -> HandlerRegistry:
    registry = HandlerRegistry()

    def noop(_context: RunContext) -> None:
        return None

    registry.add(NOOP, noop)
    registry.add(CRASH, noop)
    return registry


def _run_logger(run_id: str) -> RunLogger:
    return cast(RunLogger, logging.getLogger(f"jobsched_tools.bench.{run_id}"))


def bench_worker(stack: BenchStack, cfg: SchedulerConfig, name: str) -> Worker:
    def sleep(ms: int) -> None:
        time.sleep(ms / 1000)

    return Worker(
        stack.store,
        stack.queue,
        MemoryTelemetry(),
        SystemClock(),
        cfg,
        _registry(),
        name,
        logger_for=_run_logger,
        sleep_ms=sleep,
    )


def esm_drain(stack: BenchStack, worker: Worker, expected: int, timeout_s: float = 60.0) -> int:
    """Feed the worker as the event source mapping does: receive 10, process, delete the batch."""
    deadline = time.monotonic() + timeout_s
    while stack.visible() < expected and time.monotonic() < deadline:
        time.sleep(0.05)
    processed = 0
    while processed < expected and time.monotonic() < deadline:
        response = stack.sqs.receive_message(
            QueueUrl=stack.res.work_queue_url, MaxNumberOfMessages=ESM_BATCH, WaitTimeSeconds=1
        )
        messages = response.get("Messages", [])
        for message in messages:
            worker.process(parse_run_message(message["Body"]), now_ms() + 60_000)
        if messages:
            stack.sqs.delete_message_batch(
                QueueUrl=stack.res.work_queue_url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": message["ReceiptHandle"]}
                    for i, message in enumerate(messages)
                ],
            )
        processed += len(messages)
    return processed
