"""``jobsched bench``: measured throughput, request counts, cost, start lag and crash recovery
(``jobsched_tools.bench.runner``)."""
