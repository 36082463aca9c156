"""``make install`` says what it is doing: a line before each step, and pip's own listing of the
packages during the long one (it used to print nothing for about two minutes)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_install_announces_its_steps_and_lets_pip_list_packages(tmp_path: Path) -> None:
    # -n: print the recipe's commands without running them; -B: as if nothing were installed.
    done = subprocess.run(
        ["make", "-n", "-B", "install", f"VENV={tmp_path / 'venv'}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    lines = done.stdout.splitlines()
    dev_install = next(i for i, line in enumerate(lines) if "pip install" in line and ".[dev]" in line)
    announced = [line for line in lines[:dev_install] if line.startswith("echo") and "make install:" in line]
    assert any("about 2 minutes" in line for line in announced)
    assert any("installing jobsched[dev]" in line for line in announced)
    assert " -q" not in lines[dev_install]  # pip prints each package it collects and installs
    assert any(line.startswith("echo") and "make install: done" in line for line in lines[dev_install:])


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_install_keeps_the_tools_apart_and_the_lock_in_the_test_venv(tmp_path: Path) -> None:
    """Issue 35 item 16: .venv gets jobsched[dev] constrained to the layer's lock; the SAM CLI,
    cfn-lint and the AWS CLI (which pin pydantic and botocore) go to their own venv, whose commands
    are linked into .venv/bin."""
    venv, tools = tmp_path / "venv", tmp_path / "tools"
    done = subprocess.run(
        ["make", "-n", "-B", "install", f"VENV={venv}", f"TOOLS_VENV={tools}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    lines = done.stdout.splitlines()
    dev_install = next(line for line in lines if "pip install" in line and ".[dev]" in line)
    assert dev_install.startswith(f"{venv}/bin/pip ") and "-c layers/jobsched/requirements.txt" in dev_install
    tools_install = next(line for line in lines if "pip install" in line and "--group tools" in line)
    assert tools_install.startswith(f"{tools}/bin/pip ")
    links = next(line for line in lines if "ln -sf" in line)
    assert all(tool in links for tool in ("sam", "cfn-lint", "aws"))
    assert f"ln -sf {tools}/bin/$tool {venv}/bin/$tool" in links
