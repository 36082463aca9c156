"""Issue 36 item 11: every command, against an endpoint that does not answer or a deployment that
refuses, prints one sentence on stderr and exits non-zero: no botocore traceback. (`list --stack-name`
printed 92 lines, `dlq redrive` 87.)"""

from __future__ import annotations

import socket
from typing import Any

import jobsched.adapters.aws
import pytest
from jobsched_tools.cli.main import main
from jobsched_tools.emulator.provision import Resources
from test_cli_ops import stack_args


@pytest.fixture
def unreachable(monkeypatch: pytest.MonkeyPatch) -> str:
    """An endpoint on 127.0.0.1 that refuses connections (a port just closed), with credentials
    and a region, and clients that try once with a short timeout, so the test is quick."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    endpoint = f"http://127.0.0.1:{port}"
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    real = jobsched.adapters.aws.client_config

    def once(**kwargs: Any) -> Any:
        return real(**{**kwargs, "max_attempts": 1, "connect_timeout": 0.5, "read_timeout": 0.5})

    monkeypatch.setattr(jobsched.adapters.aws, "client_config", once)
    return endpoint


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main(list(args))
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


def tables(queue: str = "http://127.0.0.1:1/123456789012/q") -> list[str]:
    return ["--jobs-table", "j", "--state-table", "s", "--runs-table", "r", "--queue-url", queue]


@pytest.mark.parametrize(
    "command",
    [
        ["list", "--stack-name", "jobsched"],
        ["show", "nightly", "--stack-name", "jobsched"],
        ["dlq", "redrive", *tables(), "--dlq-url", "DLQ"],
        ["dlq", "list", *tables(), "--dlq-url", "DLQ"],
        ["top", "--once", *tables(), "--shard-count", "4"],
        ["list", *tables(), "--shard-count", "4"],
    ],
    ids=lambda c: " ".join(c[:2]) + (" --stack-name" if "--stack-name" in c else ""),
)
def test_an_unreachable_endpoint_is_one_sentence(
    capsys: pytest.CaptureFixture[str], unreachable: str, command: list[str]
) -> None:
    command = [arg.replace("DLQ", f"{unreachable}/123456789012/dlq") for arg in command]
    code, out, err = run(capsys, *command)
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1, err
    assert err.startswith("error: ") and "Traceback" not in err
    assert f"127.0.0.1:{unreachable.rsplit(':', 1)[1]}" in err  # where it tried


def test_a_request_the_deployment_refuses_is_one_sentence(
    capsys: pytest.CaptureFixture[str], resources: Resources
) -> None:
    """A queue that does not exist (a wrong --dlq-url): AWS's refusal, in a line."""
    missing = resources.dead_letter_queue_url.rsplit("/", 1)[0] + "/no-such-queue"
    target = stack_args(resources)
    for action in ("list", "redrive"):
        code, out, err = run(capsys, "dlq", action, *target, "--dlq-url", missing)
        assert (code, out) == (2, "")
        assert err.startswith("error: AWS refused GetQueueAttributes: ") and len(err.splitlines()) == 1, err


@pytest.mark.usefixtures("unreachable")
def test_the_traceback_behind_a_sentence_on_request(monkeypatch: pytest.MonkeyPatch) -> None:
    from botocore.exceptions import EndpointConnectionError

    monkeypatch.setenv("JOBSCHED_TRACEBACK", "1")
    with pytest.raises(EndpointConnectionError):
        main(["list", "--stack-name", "jobsched"])
