"""``jobsched bench``: measured throughput, request counts, cost, start lag and crash recovery."""

from jobsched_tools.bench.runner import BenchSettings, run_bench

__all__ = ["BenchSettings", "run_bench"]
