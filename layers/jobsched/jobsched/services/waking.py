"""Waking the miss detector when a lease is made outside a tick (issue 34 item 10).

With ``DetectorIdleReturn`` (the default) a detector invocation that finds no lease held and no
job due before its deadline plus the lookahead returns after its first sweep. A tick's claims are
foreseen by that check; a lease made by anything else after the invocation returned is not: the
registrar's claim of a new (resumed, re-timed) job's first occurrence and its late runs, and the
operations API's manual runs and backfills (``jobsched trigger``, ``jobsched backfill``). If that
run's worker died, its recovery would wait for the next scheduled invocation, up to a minute.

So whoever makes such a lease wakes the detector: one asynchronous invocation (Lambda answers 202
at once) whose event says how long to stay awake (``awake_until_ms``): past the moment that lease,
and any made in the next ``WAKE_EVERY_MS``, can first become recoverable (the dispatch lease, or a
worker's lease, plus the skew allowance). The woken invocation sweeps as any invocation does and
does not return idle before then, even if its first read of the eventually consistent lease index
missed the new lease. A process wakes it at most once per ``WAKE_EVERY_MS``: a registrar applying
thousands of new jobs sends one invocation per 20 s, not one per job. Best effort: a wake that
fails is logged (``detector.wake_failed``) and the next scheduled invocation recovers the run, as
before this existed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jobsched.core.clock import Clock
from jobsched.core.config import SchedulerConfig
from jobsched.ports import Telemetry

# At most one wake per process this often. The woken invocation stays awake until every lease made
# in this window can have lapsed: WAKE_EVERY_MS + a lease + the skew allowance + a second, 53 s at
# the defaults, within the detector's 60 s timeout less its deadline margin.
WAKE_EVERY_MS = 20_000
WAKE_SLACK_MS = 1_000
# After a wake that failed (throttled, a deploy moving the alias), the next lease tries again, but
# not before this: a burst of leases does not become a burst of failing invokes.
WAKE_RETRY_MS = 1_000

WakeSender = Callable[[dict[str, Any]], None]


def awake_until(now: int, cfg: SchedulerConfig) -> int:
    """Until when a detector woken at ``now`` must sweep: every lease made from ``now`` until the
    next wake can be sent has become recoverable by then."""
    lease_ms = max(cfg.dispatch_lease_seconds, cfg.lease_seconds) * 1000
    return now + WAKE_EVERY_MS + lease_ms + cfg.clock_skew_allowance_ms + WAKE_SLACK_MS


class DetectorWake:
    def __init__(
        self, send: WakeSender | None, telemetry: Telemetry, clock: Clock, cfg: SchedulerConfig
    ) -> None:
        self._send = send
        self._telemetry = telemetry
        self._clock = clock
        self._cfg = cfg
        self._quiet_until = 0

    def lease_made(self, key: str) -> None:
        """A lease was made outside a tick (``key``: its run or job, for the log)."""
        if self._send is None:
            return
        now = self._clock.now_ms()
        if now < self._quiet_until:
            return  # the invocation woken last stays awake past this lease's lapse
        until = awake_until(now, self._cfg)
        try:
            self._send({"awake_until_ms": until, "woken_by": key[:500]})
        except Exception as exc:  # best effort: the next scheduled invocation recovers the run
            self._quiet_until = now + WAKE_RETRY_MS  # tried again by a later lease, not by every one
            self._telemetry.event(
                "detector.wake_failed", key[:500], error=f"{type(exc).__name__}: {exc}"[:500]
            )
            return
        self._quiet_until = now + WAKE_EVERY_MS
        self._telemetry.event("detector.woken", key[:500], awake_until_ms=until)
