"""Telemetry through Powertools: one structured JSON log line per event, carrying the correlation
id (the run id for anything about a run, the invocation id for a tick), and EMF metrics."""

from __future__ import annotations

import threading
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

_UNITS = {"Count": MetricUnit.Count, "Milliseconds": MetricUnit.Milliseconds, "Seconds": MetricUnit.Seconds}

# Powertools' Metrics.add_metric takes no lock: it appends to a metric set shared by every Metrics
# instance and flushes it at 100 values, so concurrent callers (the trigger's sender threads, the
# worker's record threads) lose and duplicate values. One lock for all, as the set is shared.
_METRICS_LOCK = threading.Lock()


class PowertoolsTelemetry:
    def __init__(self, logger: Logger, metrics: Metrics | None = None) -> None:
        self._logger = logger
        self._metrics = metrics

    def event(self, name: str, correlation_id: str, **fields: Any) -> None:
        # The correlation id is set per event (not per invocation): one worker batch carries
        # several runs, and each line must be findable by its own run id.
        self._logger.info(name, extra={"event": name, "correlation_id": correlation_id, **fields})

    def metric(self, name: str, value: float, unit: str = "Count") -> None:
        if self._metrics is not None:
            with _METRICS_LOCK:
                self._metrics.add_metric(name=name, unit=_UNITS.get(unit, MetricUnit.Count), value=value)


class BoundLogger:
    """A handler's logger: every line carries its run's correlation id. (Powertools' append_keys
    is per logger, shared by the runs of one batch, so binding is done per call instead.)"""

    def __init__(self, logger: Logger, correlation_id: str) -> None:
        self._logger = logger
        self._correlation_id = correlation_id

    def _extra(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        return {"extra": {**kwargs.pop("extra", {}), "correlation_id": self._correlation_id}, **kwargs}

    def info(self, msg: object, *args: object, **kwargs: Any) -> None:
        self._logger.info(msg, *args, **self._extra(kwargs))

    def warning(self, msg: object, *args: object, **kwargs: Any) -> None:
        self._logger.warning(msg, *args, **self._extra(kwargs))

    def error(self, msg: object, *args: object, **kwargs: Any) -> None:
        self._logger.error(msg, *args, **self._extra(kwargs))
