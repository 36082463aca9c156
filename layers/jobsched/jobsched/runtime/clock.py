"""The one place jobsched reads the wall clock."""

from __future__ import annotations

import time


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


def sleep_ms(ms: int) -> None:
    if ms > 0:
        time.sleep(ms / 1000)
