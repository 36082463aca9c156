"""Cold-start import time of each Lambda function (issue 17): ``import app`` in a fresh
interpreter with the sys.path a Lambda has (the function's folder, the layers' folders, then the
packages), the median of several runs, beside a bare ``import boto3`` measured the same way in the
same run.

The packages are what a Lambda of this template has, no more: a site folder built for the run
that links, from this interpreter's, the layer's locked requirements (its requirements.txt) and
the runtime's boto3 with what it needs (``RUNTIME_DISTRIBUTIONS``); the probe runs without this
venv's own site-packages (``-S``). Its ``awscrt`` and ``pyOpenSSL`` (which botocore and s3transfer
import when they are there: about 100 ms), and the other 120-odd distributions that pydantic's
plugin look-up (``importlib.metadata.distributions()``) would scan, are not on the path, as on
Lambda. The versions are this venv's, and its Python (the runtime's is python3.12).

Each probe then times what the function's first invocation does before its first request
(``cold_first_call_ms``): reading the settings, and building its service with its boto3 clients,
which is where botocore loads the DynamoDB and SQS service models. Work deferred from import to
the first call (a lazy import, a client made on first use) moves from one figure to the other, so
their sum is the cold start a deferral cannot hide. ``cold_import_overhead_ms`` is jobsched's own
share of the import: the function's import less the bare ``import boto3`` of the same run.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
FUNCTIONS = ("trigger", "worker", "miss_detector", "registrar")
LAYERS = (ROOT / "layers" / "jobsched", ROOT / "layers" / "handlers")
LAYER_LOCK = ROOT / "layers" / "jobsched" / "requirements.txt"

# What the Lambda python3.12 runtime provides itself: boto3 and its dependencies.
RUNTIME_DISTRIBUTIONS = ("boto3", "botocore", "s3transfer", "jmespath", "python-dateutil", "six", "urllib3")

# What the template gives every function (import itself reads none of them; Settings is built on
# the first invocation), plus what the Lambda runtime sets.
ENV = {
    "JOBS_TABLE": "jobs",
    "STATE_TABLE": "state",
    "RUNS_TABLE": "runs",
    "WORK_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/work",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
    "AWS_LAMBDA_FUNCTION_NAME": "jobsched-cold-start",
    "POWERTOOLS_SERVICE_NAME": "jobsched",
    "POWERTOOLS_TRACE_DISABLED": "true",
    # template.yaml's ClaimShape default (a new stack's): the successor claim's services.
    "CLAIM_SHAPE": "successor",
}

# What each function's first invocation does before its first AWS request (functions/*/app.py):
# the App (settings) and its service, with the boto3 clients the service is built on. For bare
# boto3, the same two clients, from its default session.
FIRST_CALL = {
    "trigger": "app.app().trigger()",
    "worker": "app.app().worker('cold-start')",
    "miss_detector": "app.app().detector()",
    "registrar": "app.app().registrar()",
    "boto3": "[boto3.client(name) for name in ('dynamodb', 'sqs')]",
}

PROBE = """
import sys, time
sys.path[:0] = {path!r}
wall, cpu = time.perf_counter(), time.process_time()
import {module}
wall_imported, cpu_imported = time.perf_counter(), time.process_time()
{first_call}
wall_done, cpu_done = time.perf_counter(), time.process_time()
spans = (wall_imported - wall, wall_done - wall_imported, cpu_imported - cpu, cpu_done - cpu_imported)
print(*(1000 * t for t in spans))
"""

# One probe's figures, in ms: import and first call, wall-clock and CPU time.
Sample = tuple[float, float, float, float]


def _once(module: str, path: list[str], first_call: str) -> Sample:
    """(import, first call, import CPU, first call CPU), in ms, in a fresh interpreter."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "JOBSCHED"))} | ENV
    probe = PROBE.format(path=path, module=module, first_call=first_call)
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", probe],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd="/",
    )
    if done.returncode != 0:
        raise RuntimeError(f"import {module} failed: {done.stderr[-2000:]}")
    figures = [float(x) for x in done.stdout.strip().splitlines()[-1].split()]
    return figures[0], figures[1], figures[2], figures[3]


def layer_distributions() -> list[str]:
    """The distributions the layer's lock pins (what sam build installs under python/)."""
    lines = (line.split("#")[0].strip() for line in LAYER_LOCK.read_text().splitlines())
    return [line.split("==")[0].strip() for line in lines if "==" in line]


def _link(link: Path, target: Path) -> None:
    if not link.exists() and not link.is_symlink():
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(target)


def lambda_site(into: Path) -> Path:
    """``into`` made a site folder with only the Lambda's packages: for each distribution of the
    runtime and the layer, links to its top-level packages, modules and metadata in this
    interpreter's site-packages (and to the compiled top-level modules, one by one)."""
    for name in (*RUNTIME_DISTRIBUTIONS, *layer_distributions()):
        dist = importlib.metadata.distribution(name)
        for file in dist.files or ():
            top = file.parts[0]
            if top == "..":  # console scripts, outside site-packages
                continue
            if top == "__pycache__":
                _link(into / Path(*file.parts), Path(str(dist.locate_file(file))))
            else:
                _link(into / top, Path(str(dist.locate_file(top))))
    return into


def _probes(site: Path) -> dict[str, tuple[str, list[str]]]:
    """What each probe imports, and from which sys.path: bare boto3, then each function."""
    probes = {"boto3": ("boto3", [str(site)])}
    for name in FUNCTIONS:
        probes[name] = ("app", [str(ROOT / "functions" / name), *(str(p) for p in LAYERS), str(site)])
    return probes


def measure(runs: int = 7) -> dict[str, object]:
    """Per function, the median over ``runs`` fresh interpreters of its import
    (``cold_import_ms``), of its first invocation's set-up (``cold_first_call_ms``), and of the
    import less the bare ``import boto3`` (``cold_import_overhead_ms``); the same in CPU time,
    which other load on the machine disturbs less. The probes take turns, round after round, so
    that a change in the machine's load falls on all of them alike."""
    with tempfile.TemporaryDirectory(prefix="jobsched-lambda-site-") as folder:
        probes = _probes(lambda_site(Path(folder)))
        samples: dict[str, list[Sample]] = {name: [] for name in probes}
        for round_ in range(runs + 1):
            for name, (module, path) in probes.items():
                sample = _once(module, path, FIRST_CALL[name])
                if round_:  # the first round only warms the page cache
                    samples[name].append(sample)

    def median(name: str, figure: int) -> float:
        return round(statistics.median(s[figure] for s in samples[name]), 1)

    def per_function(figure: int) -> dict[str, float]:
        return {name: median(name, figure) for name in FUNCTIONS}

    def overhead(figure: int) -> dict[str, float]:
        return {name: round(median(name, figure) - median("boto3", figure), 1) for name in FUNCTIONS}

    def ratio(import_figure: int, call_figure: int) -> dict[str, float]:
        """The cold start a request waits for (import and first call) over bare boto3's (its
        import and its two clients): the decided bound is 1.5 (issue 37)."""
        bare = median("boto3", import_figure) + median("boto3", call_figure)
        return {
            name: round((median(name, import_figure) + median(name, call_figure)) / bare, 2)
            for name in FUNCTIONS
        }

    return {
        "cold_start_ratio_cpu": ratio(2, 3),
        "cold_start_ratio": ratio(0, 1),
        "cold_import_ms": per_function(0),
        "cold_import_ms_bare_boto3": median("boto3", 0),
        "cold_import_overhead_ms": overhead(0),
        "cold_first_call_ms": per_function(1),
        "cold_first_call_ms_bare_boto3": median("boto3", 1),
        "cold_import_cpu_ms": per_function(2) | {"bare_boto3": median("boto3", 2)},
        "cold_import_overhead_cpu_ms": overhead(2),
        "cold_first_call_cpu_ms": per_function(3) | {"bare_boto3": median("boto3", 3)},
        "cold_import_runs": runs,
        "cold_import_note": "median of fresh interpreters, taking turns, with only the Lambda's "
        "packages (the runtime's boto3 and the layer's lock; no awscrt or pyOpenSSL); first call: "
        "the settings, the service and its DynamoDB and SQS clients (bare boto3: those two clients)",
    }


if __name__ == "__main__":
    print(json.dumps(measure(), indent=2))
