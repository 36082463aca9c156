"""Which actor owns an occurrence: the trigger (on time or late within grace) or the miss
detector (overdue). One rule for both, so they never compete for the same occurrence."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from jobsched.core.config import SchedulerConfig


def effective_grace_ms(grace_seconds: int, cfg: SchedulerConfig) -> int:
    return min(grace_seconds, cfg.trigger_lookback_seconds) * 1000


def is_overdue(occurrence_ms: int, now_ms: int, grace_seconds: int, cfg: SchedulerConfig) -> bool:
    """True when the occurrence is later than its grace: a misfire, not merely a late start."""
    return occurrence_ms < now_ms - effective_grace_ms(grace_seconds, cfg)


def worker_lease_until(now_ms: int, deadline_ms: int, cfg: SchedulerConfig, margin_ms: int = 2000) -> int:
    """A running worker's lease never reaches past its own Lambda deadline (plus a small margin):
    when the runtime kills a timed-out or crashed worker, the lock lapses within seconds, not
    after a long job's full length."""
    return min(now_ms + cfg.lease_seconds * 1000, deadline_ms + margin_ms)


# How late a message may be sent to arrive, rather than early. SQS delays are whole seconds, so a
# message arrives up to a second off its instant; the worker waits out an early arrival, and that
# wait is billed Lambda time. Rounding to the nearest second halves the largest wait and cuts the
# mean wait per batch from ~0.5 s to ~0.125 s, for at most 0.5 s of lateness (start lag stays
# within a second, with half of it left for delivery; issue 18, bench/worker_wait.py).
SEND_LATE_TOLERANCE_MS = 500


def send_delay_seconds(due_ms: int, now_ms: int) -> int:
    """SQS delays are whole seconds up to 900: the nearest whole second (``SEND_LATE_TOLERANCE_MS``).
    The message arrives at most half a second early, and the worker waits out the remainder, or at
    most half a second late, and the worker starts at once."""
    return max(0, min(900, (due_ms - now_ms + SEND_LATE_TOLERANCE_MS) // 1000))


def start_offset_ms(run_id: str, window_seconds: int) -> int:
    """How long after its instant a run starts, in ``[0, window]`` (``jitter_seconds``): a digest
    of the run id, so every actor that sends the run (the claim, a recovery, a settle, a backfill,
    a retry of a lost send) derives the same offset, and the run's identity, its record and its
    exactly-once are untouched. A manual run (``@manual:``) starts when it is asked for."""
    if window_seconds <= 0 or "@manual:" in run_id:
        return 0
    digest = hashlib.blake2b(run_id.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % (window_seconds * 1000 + 1)


def start_at_ms(run_id: str, scheduled_at: int, definition: Mapping[str, Any] | None) -> int:
    """When the run starts: its instant plus its offset in the definition's window. The
    occurrence is *due* at its instant (it is claimed, overdue, missed and overtaken by its
    instant); only its start, its send delay and its start lag use this (docs/design.md)."""
    window = int((definition or {}).get("jitter_seconds") or 0)
    return scheduled_at + start_offset_ms(run_id, window)
