"""`jobsched demo --json` end to end: real processes on moto, one worker SIGKILLed mid-run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

JOBSCHED = Path(sys.executable).with_name("jobsched")


@pytest.mark.slow
@pytest.mark.timeout(600)  # the demo alone may take its 240 s subprocess timeout
def test_demo_recovers_a_killed_worker_without_duplicates_or_losses(tmp_path: Path) -> None:
    env = {**os.environ, "POWERTOOLS_TRACE_DISABLED": "true"}
    env.pop("AWS_ENDPOINT_URL", None)
    done = subprocess.run(
        [str(JOBSCHED), "demo", "--seconds", "30", "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    lines = done.stdout.strip().splitlines()
    assert lines, done.stderr[-3000:]
    figures = json.loads(lines[-1])
    assert figures["duplicate_runs"] == 0, figures
    assert figures["lost_occurrences"] == 0, figures
    assert figures["crashes_injected"] >= 1, figures
    assert figures["leases_recovered"] >= 1, figures
    assert figures["runs_succeeded"] > 0, figures
    # Occurrences fell due, and each has a run (lost_occurrences says the same per occurrence).
    assert 0 < figures["occurrences_due"] <= figures["runs_total"], figures
    assert figures["recovery_s_max"] is not None, figures
    assert figures["verdict"] == "PASS", figures
    assert lines[-2].startswith("demo: PASS - "), lines[-2]  # the verdict, just before the JSON
    assert done.returncode == 0, done.stdout[-3000:]
