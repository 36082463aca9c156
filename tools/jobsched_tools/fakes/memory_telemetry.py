"""Telemetry that keeps events and metrics in lists: tests, the simulation and the demo read them."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any


@dataclass
class RecordedEvent:
    name: str
    correlation_id: str
    fields: dict[str, Any]


@dataclass
class MemoryTelemetry:
    events: list[RecordedEvent] = field(default_factory=list)
    metrics: list[tuple[str, float, str]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def event(self, name: str, correlation_id: str, **fields: Any) -> None:
        with self._lock:
            self.events.append(RecordedEvent(name, correlation_id, fields))

    def metric(self, name: str, value: float, unit: str = "Count") -> None:
        with self._lock:
            self.metrics.append((name, value, unit))

    def named(self, name: str) -> list[RecordedEvent]:
        return [e for e in self.events if e.name == name]

    def metric_sum(self, name: str) -> float:
        return sum(value for metric, value, _ in self.metrics if metric == name)
