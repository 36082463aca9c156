"""The built-in target handlers reuse one boto3 client per service across runs and threads."""

from __future__ import annotations

import logging
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from jobsched.targets.builtin import register_builtins
from jobsched.targets.registry import HandlerRegistry, RunContext


@dataclass
class Allow:
    allowed_queue_arns: list[str] = field(default_factory=lambda: ["*"])
    allowed_event_bus_arns: list[str] = field(default_factory=lambda: ["*"])
    allowed_function_arns: list[str] = field(default_factory=lambda: ["*"])


class FakeSqs:
    def send_message(self, **kwargs: Any) -> dict[str, Any]:
        return {"MessageId": "m"}


def context(run_id: str) -> RunContext:
    payload = {"queue_url": "https://sqs.us-east-1.amazonaws.com/123456789012/q", "message": {}}
    return RunContext("j", run_id, payload, 0, 1, 1, run_id, logging.getLogger("t"))


def test_one_client_per_service_across_runs_and_threads() -> None:
    built: Counter[str] = Counter()

    def clients(service: str) -> Any:
        built[service] += 1
        return FakeSqs()

    registry = HandlerRegistry()
    register_builtins(registry, Allow(), clients)
    handler = registry.get("sqs_send")
    assert handler is not None
    threads = [threading.Thread(target=handler, args=(context(f"r{i}"),)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    handler(context("again"))
    assert built == {"sqs": 1}
