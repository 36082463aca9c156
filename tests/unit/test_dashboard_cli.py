"""``python -m jobsched_tools.ops.dashboard --help`` prints its usage and writes nothing (it used to
ignore --help and redraw the tracked docs/dashboard.png)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from jobsched_tools.ops import dashboard

PICTURE = Path(__file__).resolve().parents[2] / "docs" / "dashboard.png"


def test_help_prints_usage_and_writes_nothing(tmp_path: Path) -> None:
    before = (PICTURE.read_bytes(), PICTURE.stat().st_mtime_ns)
    done = subprocess.run(
        [sys.executable, "-m", "jobsched_tools.ops.dashboard", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout.startswith("usage: python -m jobsched_tools.ops.dashboard [-h] [--synthetic] [out]")
    assert (PICTURE.read_bytes(), PICTURE.stat().st_mtime_ns) == before
    assert list(tmp_path.iterdir()) == []


def test_an_unknown_option_is_an_error_not_a_file_name(monkeypatch: pytest.MonkeyPatch) -> None:
    def never(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("drew a picture")

    monkeypatch.setattr(dashboard, "render", never)
    monkeypatch.setattr(dashboard, "simulate", never)
    with pytest.raises(SystemExit) as exited:
        dashboard.main(["--synthtic"])
    assert exited.value.code == 2
