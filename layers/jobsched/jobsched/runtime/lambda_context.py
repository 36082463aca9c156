"""The Lambda deadline as an instant on the system clock."""

from __future__ import annotations

from typing import Protocol

from jobsched.runtime.clock import SystemClock


class HasRemainingTime(Protocol):
    def get_remaining_time_in_millis(self) -> int: ...


def deadline_ms(context: HasRemainingTime) -> int:
    return SystemClock().now_ms() + context.get_remaining_time_in_millis()
