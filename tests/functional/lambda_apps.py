"""The Lambda entry points (functions/*/app.py) as the tests load them, with the sample events and a
fake Lambda context. A helper module, not a test module: tests import it; the ``aws`` fixture that
runs them on moto is in conftest.py."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
EVENTS = ROOT / "events"
NOW = 1_796_209_900_000  # 2026-12-02T11:11:40Z: after the sample events' occurrences


class FakeContext:
    function_name = "jobsched-test"
    function_version = "$LATEST"
    memory_limit_in_mb = 256
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:jobsched-test"
    log_group_name = "/aws/lambda/jobsched-test"
    log_stream_name = "2026/12/02/[$LATEST]0123456789abcdef"

    def __init__(self, request_id: str) -> None:
        self.aws_request_id = request_id

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


def load_app(name: str) -> ModuleType:
    path = ROOT / "functions" / name / "app.py"
    spec = importlib.util.spec_from_file_location(f"jobsched_test_app_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def event(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((EVENTS / name).read_text())
    return loaded
