"""Time enters the core only through a Clock, so every rule can be tested at any instant."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int:
        """Milliseconds since the Unix epoch, UTC."""
        ...


class ManualClock:
    """A clock that moves only when told to: tests and the chaos simulation drive it."""

    def __init__(self, start_ms: int = 0) -> None:
        self._now_ms = start_ms

    def now_ms(self) -> int:
        return self._now_ms

    def advance(self, ms: int) -> None:
        if ms < 0:
            raise ValueError("a manual clock never goes backwards; model skew with SkewedClock")
        self._now_ms += ms

    def set(self, now_ms: int) -> None:
        self._now_ms = now_ms


class SkewedClock:
    """Another actor's view of the same time, off by a fixed skew (the chaos simulation's clock skew)."""

    def __init__(self, base: Clock, skew_ms: int) -> None:
        self._base = base
        self.skew_ms = skew_ms

    def now_ms(self) -> int:
        return self._base.now_ms() + self.skew_ms


class Waiter(Protocol):
    """How a worker waits for its handler between heartbeats: injected like the clock, so that
    tests drive the heartbeats with a manual clock instead of sleeping."""

    def wait(self, done: threading.Event, timeout_ms: int) -> bool:
        """Wait until ``done`` is set or ``timeout_ms`` passed; True when it is set."""
        ...


class EventWaiter:
    """Waits on the event itself (the runtime's waiter: the time passes for real)."""

    def wait(self, done: threading.Event, timeout_ms: int) -> bool:
        return done.wait(timeout=timeout_ms / 1000)


class ManualWaiter:
    """Lets ``timeout_ms`` pass on a ManualClock at once. ``on_wait`` runs after each wait (a test
    lets its handler finish from there). The handler runs on a thread of its own, so the waiter
    then gives it ``yield_s`` of real time to reach ``done``; the outcome never depends on that
    time, only how many waits it takes."""

    def __init__(self, clock: ManualClock, on_wait: Callable[[], None] | None = None, yield_s: float = 0.05):
        self._clock = clock
        self._on_wait = on_wait
        self._yield_s = yield_s
        self.waits = 0

    def wait(self, done: threading.Event, timeout_ms: int) -> bool:
        if done.is_set():
            return True
        self._clock.advance(timeout_ms)
        self.waits += 1
        if self._on_wait is not None:
            self._on_wait()
        return done.wait(timeout=self._yield_s)


def ms_to_dt(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def dt_to_ms(dt: datetime) -> int:
    if dt.tzinfo is None:
        raise ValueError("naive datetime: jobsched only handles timezone-aware instants")
    return int(dt.timestamp() * 1000)


def iso_z(ms: int) -> str:
    """UTC instant as ``YYYY-MM-DDTHH:MM:SSZ`` (millisecond part only when non-zero)."""
    dt = ms_to_dt(ms)
    if ms % 1000:
        return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")
