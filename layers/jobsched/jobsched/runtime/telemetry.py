"""Telemetry through Powertools: one structured JSON log line per event, carrying the correlation
id (the run id for anything about a run, the invocation's request id for a tick), and EMF metrics.
"""

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
        # A count of zero is not published: CloudWatch bills each custom metric for every hour it
        # receives a value, and an idle stack's zeros (Claims, Backlog, LeasesRecovered, ...) were
        # about $2.70 a month (issue 35, item 13). No alarm needs them: every Jobsched alarm fires
        # above a threshold and reads missing data as not breaching, the same as a zero. Durations
        # (StartLag 0 ms) are kept, so their percentiles stay true.
        if unit == "Count" and value == 0:
            return
        if self._metrics is not None:
            with _METRICS_LOCK:
                self._metrics.add_metric(name=name, unit=_UNITS.get(unit, MetricUnit.Count), value=value)


def bind_run(logger: Logger, run_id: str) -> Logger:
    """The logger a run's handler gets: every line logged in this context, by the handler through
    this logger or through standard logging's ``jobsched.*`` loggers (which propagate to it),
    carries ``correlation_id`` = the run id. Powertools' thread-safe keys live in a contextvar:
    they bind the current thread's context only (the worker runs each record in a context of its
    own, and each handler thread in a copy of it), so the concurrent runs of one batch never
    share them, unlike ``append_keys``, which is per logger."""
    logger.thread_safe_append_keys(correlation_id=run_id)
    return logger
