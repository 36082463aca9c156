"""The Lambda layer holds only what the five functions run (issue 17): importing a function never
imports the tools (the CLI, the local stack, the simulation, the benchmark), moto, PyYAML or
matplotlib, and no module of the runtime package names them."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = ROOT / "layers" / "jobsched" / "jobsched"
FUNCTIONS = ("trigger", "worker", "miss_detector", "registrar", "outcome_publisher")
TOOLING = ("jobsched_tools", "moto", "yaml", "matplotlib", "pytest", "hypothesis")
# Not in the layer any more, for their import time (issue 17): Settings reads os.environ itself.
DROPPED = ("pydantic_settings", "dotenv")

PROBE = """
import json, os, sys
sys.path[:0] = [{function!r}, {handlers!r}]
os.environ.update(JOBS_TABLE="jobs", STATE_TABLE="state", RUNS_TABLE="runs", WORK_QUEUE_URL="q",
                  AWS_DEFAULT_REGION="us-east-1", POWERTOOLS_TRACE_DISABLED="true")
import app
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in {tooling!r})))
print(json.dumps(sorted(m for m in sys.modules if m.startswith("aws_lambda_powertools.utilities.parser"))))
"""


@pytest.mark.parametrize("function", FUNCTIONS)
def test_a_function_imports_no_tooling(function: str) -> None:
    probe = PROBE.format(
        function=str(ROOT / "functions" / function),
        handlers=str(ROOT / "layers" / "handlers"),
        tooling=[*TOOLING, *DROPPED],
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-2]) == []
    # Nor Powertools' parser: its pydantic models cost about 100 ms of cold start, unused (the
    # batch module builds them when pydantic is imported before it; see the worker's app.py).
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def test_no_runtime_module_names_the_tooling() -> None:
    """Statically too, lazy imports included: the layer's folder is the runtime and nothing else."""
    offenders = []
    for path in RUNTIME.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [
                f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] in (*TOOLING, *DROPPED)
            ]
    assert offenders == []
