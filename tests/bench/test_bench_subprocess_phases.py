"""The bench's phases that start interpreters of their own, run for real at the smoke test's sizes
and checked as the smoke test checked them when it ran them itself (it now runs beside this file:
issue 35 item 15). The fan-out's spawned triggers: test_fanout_bench.py."""

from __future__ import annotations

from typing import Any

import pytest
from jobsched_tools.bench import cold_import, memory

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
FUNCTIONS = {"trigger", "worker", "miss_detector", "registrar"}


def test_cold_imports_of_each_function_beside_a_bare_boto3() -> None:
    result: dict[str, Any] = cold_import.measure(runs=1)
    assert set(result["cold_import_ms"]) == FUNCTIONS
    assert all(ms > 0 for ms in result["cold_import_ms"].values())
    bare = result["cold_import_ms_bare_boto3"]
    assert bare > 0
    # Jobsched's own share: the function's import less the bare boto3's; and the first call's set-up.
    for name, ms in result["cold_import_ms"].items():
        assert result["cold_import_overhead_ms"][name] == pytest.approx(ms - bare)
        assert result["cold_first_call_ms"][name] > 0


def test_peak_memory_of_each_function_at_its_largest_settings() -> None:
    """Issue 18: each function at most the 256 MB target, and above its baseline."""
    result = memory.measure()
    assert set(result["peak_rss_mb"]) == FUNCTIONS
    for function, peak in result["peak_rss_mb"].items():
        assert result["baseline_rss_mb"][function] <= peak <= 256, (function, peak)
