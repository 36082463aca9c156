"""The worker's wait for the exact second, per batch, on a manual clock (issue 18, part 4).

SQS delays are whole seconds, so a message is delivered at ``send + delay`` while its run is due
at a whole second (schedules have second precision): the worker waits out what is left when it is
early, and starts late by what is over when it is late. The messages of one SendMessageBatch are
sorted by due time and sent together, so they arrive together and share one wait: a batch's
invocation lasts its wait once. This replays the core's ``send_delay_seconds`` and the worker's
rule for every millisecond phase of the send within its second (deterministic, no real time) and
reports the mean wait per batch, the mean and largest lateness it costs, and what the wait is in
Lambda compute.
"""

from __future__ import annotations

import statistics
from typing import Any

from jobsched.core.timing import send_delay_seconds
from jobsched.services.worker import EARLY_WAIT_MAX_MS

T0 = 1_796_083_200_000  # 2026-12-01T00:00:00Z, a whole second
AHEAD_MS = 30_000  # the run is due this far after the second the send falls in


def measure(step_ms: int = 1) -> dict[str, Any]:
    waits: list[int] = []
    lateness: list[int] = []
    due = T0 + AHEAD_MS
    for phase in range(0, 1000, step_ms):
        now = T0 + phase
        arrives = now + send_delay_seconds(due, now) * 1000
        early = due - arrives
        waits.append(early if 0 < early <= EARLY_WAIT_MAX_MS else 0)
        lateness.append(max(0, -early))
    return {
        "worker_wait_s_per_batch": round(statistics.fmean(waits) / 1000, 4),
        "worker_wait_ms_max": max(waits),
        "send_lateness_ms_mean": round(statistics.fmean(lateness), 1),
        "send_lateness_ms_max": max(lateness),
    }


def priced(wait_s_per_batch: float, prices: dict[str, dict[str, Any]], memory_mb: int, batch: int) -> float:
    """The wait in Lambda compute, USD per million runs (arm64, ``memory_mb``, full batches)."""
    gb_s = wait_s_per_batch / batch * memory_mb / 1024
    return round(gb_s * float(prices["lambda"]["arm64_gb_second_usd"]) * 1e6, 4)
