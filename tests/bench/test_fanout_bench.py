"""The fan-out bench (bench/fanout.py) at a tiny size: 1, 2 and 4 trigger processes each dispatch
every due run once between them, and the JSON carries each rate, the ratio and the named limit.
No wall-clock assertions."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest
from jobsched_tools.bench import fanout
from jobsched_tools.bench.stack import BenchSettings, Servers, bench_config
from jobsched_tools.emulator.credentials import DUMMY_AWS_ENV
from jobsched_tools.emulator.local_moto import start_moto_process

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


@pytest.fixture
def servers(monkeypatch: pytest.MonkeyPatch) -> Iterator[Servers]:
    for key, value in DUMMY_AWS_ENV.items():
        monkeypatch.setenv(key, value)
    moto = Servers(start_moto_process(fast_transactions=True), start_moto_process())
    try:
        yield moto
    finally:
        moto.stop()


def test_each_process_count_dispatches_every_run_once(servers: Servers) -> None:
    settings = BenchSettings(dispatch_runs=24)
    figures = fanout.measure(servers, settings, bench_config(settings))
    assert set(figures["fanout_runs_per_s"]) == {"1", "2", "4"}
    for count, phase in figures["fanout_phases"].items():
        # The groups split the jobs between the processes: together they claim each once.
        assert phase["processes"] == int(count)
        assert phase["claimed"] == phase["dispatched"] == settings.dispatch_runs, phase
        assert math.isfinite(figures["fanout_runs_per_s"][count]) and figures["fanout_runs_per_s"][count] > 0
    ratio = figures["fanout_runs_per_s"]["4"] / figures["fanout_runs_per_s"]["1"]
    assert figures["fanout_scaling_ratio"] == pytest.approx(ratio, rel=0.01)
    assert "CPU" in figures["fanout_limit"] or "latency" in figures["fanout_limit"]
