"""The built-in target handlers reuse one boto3 client per service across runs and threads, and
check a queue URL against the allowed ARNs in any partition and URL form (issue 27, 11b)."""

from __future__ import annotations

import logging
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest
from jobsched.targets.builtin import NotAllowed, _queue_arn, register_builtins
from jobsched.targets.registry import HandlerRegistry, RunContext

ACCOUNT = "123456789012"


@dataclass
class Allow:
    allowed_queue_arns: list[str] = field(default_factory=lambda: ["*"])
    allowed_event_bus_arns: list[str] = field(default_factory=lambda: ["*"])
    allowed_function_arns: list[str] = field(default_factory=lambda: ["*"])
    allowed_state_machine_arns: list[str] = field(default_factory=lambda: ["*"])
    allowed_task_definition_arns: list[str] = field(default_factory=lambda: ["*"])
    allowed_task_role_arns: list[str] = field(default_factory=lambda: ["*"])


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


@pytest.mark.parametrize(
    ("url", "arn"),
    [
        ("https://sqs.us-east-1.amazonaws.com/123456789012/q", "arn:aws:sqs:us-east-1:123456789012:q"),
        ("https://sqs.eu-west-1.amazonaws.com/123456789012/q/", "arn:aws:sqs:eu-west-1:123456789012:q"),
        (
            "https://sqs.cn-north-1.amazonaws.com.cn/123456789012/q",
            "arn:aws-cn:sqs:cn-north-1:123456789012:q",
        ),
        (
            "https://sqs.us-gov-west-1.amazonaws.com/123456789012/q",
            "arn:aws-us-gov:sqs:us-gov-west-1:123456789012:q",
        ),
        ("https://queue.amazonaws.com/123456789012/q", "arn:aws:sqs:us-east-1:123456789012:q"),  # legacy
        ("https://eu-west-1.queue.amazonaws.com/123456789012/q", "arn:aws:sqs:eu-west-1:123456789012:q"),
        ("http://localhost:5000/123456789012/q", "arn:aws:sqs:ap-south-1:123456789012:q"),  # own region
    ],
)
def test_a_queue_url_s_arn_has_its_region_and_partition(
    url: str, arn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_REGION", "ap-south-1")
    assert _queue_arn(url) == arn


def test_sqs_send_to_a_queue_in_another_partition_is_checked_against_its_arn() -> None:
    registry = HandlerRegistry()
    arn = "arn:aws-cn:sqs:cn-north-1:123456789012:q"
    register_builtins(registry, Allow(allowed_queue_arns=[arn]), clients=lambda _s: FakeSqs())
    handler = registry.get("sqs_send")
    assert handler is not None
    host = "https://sqs.cn-north-1.amazonaws.com.cn/123456789012"
    log = logging.getLogger("t")
    ok = RunContext("j", "r", {"queue_url": f"{host}/q", "message": {}}, 0, 1, 1, "r", log)
    assert handler(ok) == {"message_id": "m"}
    other = RunContext("j", "r", {"queue_url": f"{host}/other", "message": {}}, 0, 1, 1, "r", log)
    with pytest.raises(NotAllowed, match="arn:aws-cn:sqs:cn-north-1:123456789012:other"):
        handler(other)


def test_a_later_registration_s_allow_lists_apply() -> None:
    """The runtime's registry is process-wide: an App built again with other settings (a test, the
    local stack after reset_app) must check against its own lists, not the first App's."""
    registry = HandlerRegistry()
    register_builtins(registry, Allow(allowed_queue_arns=[]), clients=lambda _s: FakeSqs())
    handler = registry.get("sqs_send")
    assert handler is not None
    with pytest.raises(NotAllowed):
        handler(context("r1"))
    register_builtins(registry, Allow(allowed_queue_arns=["arn:aws:sqs:us-east-1:123456789012:q"]))
    assert handler(context("r2")) == {"message_id": "m"}
