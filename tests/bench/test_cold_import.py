"""The cold-import probe (bench/cold_import.py) imports what a Lambda has and nothing else: the
runtime's boto3 and the layer's locked requirements, not this venv's 130-odd other distributions
(awscrt, pyOpenSSL, moto, ...), which would change what boto3 and pydantic import at cold start."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from jobsched_tools.bench import cold_import


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return cold_import.lambda_site(tmp_path_factory.mktemp("lambda-site"))


def test_the_site_holds_the_runtime_s_and_the_layer_s_packages_only(site: Path) -> None:
    names = {path.name for path in site.iterdir()}
    for package in ("boto3", "botocore", "s3transfer", "pydantic", "pydantic_core", "aws_lambda_powertools"):
        assert package in names, package
    assert "typing_extensions.py" in names and "six.py" in names
    for absent in ("awscrt", "OpenSSL", "moto", "yaml", "pydantic_settings", "dotenv"):
        assert absent not in names, absent


def test_a_probe_sees_the_site_and_not_this_venv(site: Path) -> None:
    import_ms, first_call_ms, import_cpu_ms, first_call_cpu_ms = cold_import._once(
        "boto3", [str(site)], cold_import.FIRST_CALL["boto3"]
    )
    assert min(import_ms, first_call_ms, import_cpu_ms, first_call_cpu_ms) > 0
    with pytest.raises(RuntimeError, match="No module named 'moto'"):
        cold_import._once("moto", [str(site)], "")


# What a function's cold start must not pay for (issue 27, item 10), checked by what is imported
# rather than by timing it: each function's `import app` in a fresh interpreter that sees what a
# Lambda sees (the probe's own path and environment), then what it left behind.
AFTER_IMPORT = """
import gc, json, sys
sys.path[:0] = {path!r}
import app
print(json.dumps({{"modules": sorted(sys.modules), "gc_enabled": gc.isenabled(),
                  "frozen": gc.get_freeze_count()}}))
"""


@pytest.fixture(scope="module")
def imported(site: Path) -> dict[str, dict[str, object]]:
    """Per function, what its ``import app`` left: its modules and the collector's state."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "JOBSCHED"))}
    found = {}
    for name, (module, path) in cold_import._probes(site).items():
        if module != "app":
            continue
        done = subprocess.run(
            [sys.executable, "-I", "-S", "-c", AFTER_IMPORT.format(path=path)],
            capture_output=True,
            text=True,
            timeout=120,
            env=env | cold_import.ENV,
            cwd="/",
            check=True,
        )
        found[name] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


@pytest.mark.parametrize("function", cold_import.FUNCTIONS)
def test_a_function_s_imports_are_frozen_out_of_the_collector_s_passes(
    imported: dict[str, dict[str, object]], function: str
) -> None:
    """runtime/coldstart.py: on a Lambda, what the import made is moved to the permanent
    generation (tens of thousands of objects), and the collector is running again."""
    state = imported[function]
    assert state["gc_enabled"] is True
    assert isinstance(state["frozen"], int) and state["frozen"] > 50_000


# Imported by no function at its cold start: asyncio and Powertools' batch utility, with its
# data_classes package of every event class (runtime/batch.py replaces them: 30-odd ms of the
# worker's and the registrar's import); the adapters only some configurations use, which the
# wiring imports when configured (outcome events, the trigger's group invoker); the tooling.
NOT_AT_COLD_START = (
    "asyncio",
    "aws_lambda_powertools.utilities.batch",
    "aws_lambda_powertools.utilities.data_classes",
    "aws_lambda_powertools.utilities.parser",
    "jobsched.adapters.outcome_events",
    "jobsched.runtime.outcomes",
    "jobsched.adapters.lambda_invoker",
    "jobsched.services.operations",
    "jobsched_tools",
    "pydantic_settings",
)


@pytest.mark.parametrize("function", cold_import.FUNCTIONS)
def test_a_function_s_import_leaves_out_what_it_does_not_use(
    imported: dict[str, dict[str, object]], function: str
) -> None:
    modules = imported[function]["modules"]
    assert isinstance(modules, list)
    assert [name for name in NOT_AT_COLD_START if name in modules] == []
