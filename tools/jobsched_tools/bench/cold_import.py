"""Cold-start import time of each Lambda function (issue 17): ``import app`` in a fresh
interpreter with the sys.path a Lambda has (the function's folder, then the layers' folders), the
median of several runs, beside a bare ``import boto3`` measured the same way in the same run.

The Lambda runtime's boto3 comes without ``awscrt`` and ``pyOpenSSL``; this venv has both (the AWS
CLI, SAM CLI and moto bring them), and botocore and s3transfer import them when they are there
(``BOTO_DISABLE_CRT=true`` turns off botocore's use of awscrt, not s3transfer's import of it). So
each probe hides those two packages (an import of them fails, as on Lambda): the figures are what
a Lambda would import, without about 100 ms that only this machine pays.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
FUNCTIONS = ("trigger", "worker", "miss_detector", "registrar")
LAYERS = (ROOT / "layers" / "jobsched", ROOT / "layers" / "handlers")

# What the template gives every function (import itself reads none of them; Settings is built on
# the first invocation), plus what the Lambda runtime sets.
ENV = {
    "JOBS_TABLE": "jobs",
    "STATE_TABLE": "state",
    "RUNS_TABLE": "runs",
    "WORK_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/work",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
    "POWERTOOLS_SERVICE_NAME": "jobsched",
    "POWERTOOLS_TRACE_DISABLED": "true",
    "BOTO_DISABLE_CRT": "true",
}

# Packages this venv has and the Lambda runtime does not: the probe makes importing them fail.
ABSENT_ON_LAMBDA = ("awscrt", "_awscrt", "OpenSSL")

PROBE = """
import sys, time
sys.path[:0] = {path!r}
class _Absent:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {absent!r}:
            raise ImportError(name + " is not in the Lambda runtime")
        return None
sys.meta_path.insert(0, _Absent())
start = time.perf_counter()
import {module}
print((time.perf_counter() - start) * 1000)
"""


def _once(module: str, path: list[str]) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "JOBSCHED"))} | ENV
    done = subprocess.run(
        [sys.executable, "-I", "-c", PROBE.format(path=path, module=module, absent=ABSENT_ON_LAMBDA)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd="/",
    )
    if done.returncode != 0:
        raise RuntimeError(f"import {module} failed: {done.stderr[-2000:]}")
    return float(done.stdout.strip().splitlines()[-1])


def site_packages() -> list[str]:
    """The interpreter's own site-packages (boto3, Powertools, pydantic), as the Lambda runtime
    and the layer's python/ folder provide them; -I drops the rest (cwd, PYTHONPATH, user site)."""
    return [p for p in sys.path if p.endswith("site-packages")]


def measure(runs: int = 7) -> dict[str, object]:
    """``{"cold_import_ms": {function: median ms}, "cold_import_ms_bare_boto3": median ms}``."""
    sites = site_packages()
    layers = [str(p) for p in LAYERS]
    bare = [_once("boto3", sites) for _ in range(runs)]
    per_function = {}
    for name in FUNCTIONS:
        path = [str(ROOT / "functions" / name), *layers, *sites]
        per_function[name] = round(statistics.median(_once("app", path) for _ in range(runs)), 1)
    return {
        "cold_import_ms": per_function,
        "cold_import_ms_bare_boto3": round(statistics.median(bare), 1),
        "cold_import_runs": runs,
        "cold_import_note": "median of fresh interpreters; awscrt and pyOpenSSL hidden (not in Lambda)",
    }


if __name__ == "__main__":
    print(json.dumps(measure(), indent=2))
