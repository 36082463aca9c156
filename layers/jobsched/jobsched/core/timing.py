"""Which actor owns an occurrence: the trigger (on time or late within grace) or the miss
detector (overdue). One rule for both, so they never compete for the same occurrence."""

from __future__ import annotations

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
