"""``jobsched ... --local`` needs nothing but the local stack's state file: the shard count, the
region and the credentials come from it. Without a running stack, or without AWS settings for a
real deployment, the user reads one line saying what to do, not a traceback."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from jobsched.core.job import JobDefinition
from jobsched.core.state import Registration
from jobsched_tools.api import connect
from jobsched_tools.cli.main import main
from jobsched_tools.deployment import TargetError
from jobsched_tools.emulator.credentials import DUMMY_ACCESS_KEY_ID, DUMMY_SECRET_ACCESS_KEY, LOCAL_REGION
from jobsched_tools.emulator.local_moto import LocalMoto, start_moto_server
from jobsched_tools.emulator.provision import Resources, provision
from moto import mock_aws

JOB = {"job_id": "hello", "schedule": "rate(10 minutes)", "target": "log", "payload": {"hi": 1}}
NO_AWS_SETTINGS = (
    "AWS_DEFAULT_REGION",
    "AWS_REGION",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SECURITY_TOKEN",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_ENDPOINT_URL",
)


@pytest.fixture
def bare_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A shell with no AWS settings at all, in an empty folder."""
    for name in NO_AWS_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def local_stack_state(bare_env: Path) -> Iterator[tuple[LocalMoto, Resources]]:
    """A moto server with the stack's tables and the state file `jobsched local` writes."""
    with start_moto_server() as moto:
        session = boto3.session.Session(
            aws_access_key_id=DUMMY_ACCESS_KEY_ID,
            aws_secret_access_key=DUMMY_SECRET_ACCESS_KEY,
            region_name=LOCAL_REGION,
        )
        dynamodb = session.client("dynamodb", endpoint_url=moto.endpoint_url)
        sqs = session.client("sqs", endpoint_url=moto.endpoint_url)
        resources = provision(dynamodb, sqs, prefix="clilocal", parameters={"ClaimShape": "legacy"})
        (bare_env / ".jobsched-local.json").write_text(json.dumps(state(moto.endpoint_url, resources)))
        yield moto, resources
        moto.reset()


def state(endpoint: str, resources: Resources) -> dict[str, Any]:
    # The keys LocalStack.state() writes.
    return {
        "endpoint_url": endpoint,
        "region": LOCAL_REGION,
        "aws_access_key_id": DUMMY_ACCESS_KEY_ID,
        "aws_secret_access_key": DUMMY_SECRET_ACCESS_KEY,
        "jobs_table": resources.jobs_table,
        "state_table": resources.state_table,
        "runs_table": resources.runs_table,
        "work_queue_url": resources.work_queue_url,
        "dead_letter_queue_url": resources.dead_letter_queue_url,
        "jobs_stream_arn": resources.jobs_stream_arn,
        "ledger_table": "clilocal-ledger",
        "shard_count": 4,
        "settings": {"SHARD_COUNT": "4"},
        "pid": 1,
    }


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        main(list(args))
        code = 0
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.usefixtures("local_stack_state")
def test_register_list_show_runs_with_only_the_state_file(
    bare_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (bare_env / "job.json").write_text(json.dumps(JOB))

    code, out, err = run_cli(capsys, "register", "job.json", "--local")
    assert (code, err) == (0, "")
    assert "hello: scheduled" in out

    code, out, err = run_cli(capsys, "list", "--local", "--json")
    assert (code, err) == (0, "")
    (job,) = json.loads(out)
    assert job["job_id"] == "hello" and job["status"] == "active"
    assert 0 <= int(job["sched_shard"]) < 4  # the stack's own shard count, from the state file

    code, out, err = run_cli(capsys, "show", "hello", "--local")
    assert (code, err) == (0, "") and "schedule: rate(10 minutes)" in out

    code, out, err = run_cli(capsys, "runs", "hello", "--local")
    assert (code, err) == (0, "") and out.startswith("SCHEDULED")


def test_a_state_file_without_a_running_stack_says_to_start_it(
    bare_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    stale = Resources("t-jobs", "t-state", "t-runs", f"http://127.0.0.1:{port}/q", "dlq", "rf", None)
    (bare_env / ".jobsched-local.json").write_text(json.dumps(state(f"http://127.0.0.1:{port}", stale)))

    for command in (["list"], ["show", "hello"], ["runs", "hello"]):
        code, out, err = run_cli(capsys, *command, "--local")
        assert code == 2 and out == ""
        assert err.startswith("error: the local stack in .jobsched-local.json")
        assert "start the local stack with `jobsched local`" in err
        assert "Traceback" not in err


@pytest.mark.usefixtures("bare_env")
def test_no_state_file_says_to_start_the_stack(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "list", "--local")
    assert code == 2 and "start the local stack with `jobsched local`" in err


@pytest.mark.usefixtures("bare_env")
def test_a_deployment_without_region_or_credentials_is_a_readable_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    target = [
        "--jobs-table",
        "j",
        "--state-table",
        "s",
        "--runs-table",
        "r",
        "--queue-url",
        "https://sqs.example/q",
        "--shard-count",
        "4",
    ]
    code, _, err = run_cli(capsys, "list", *target)
    assert code == 2 and err.startswith("error: no AWS region")

    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    code, _, err = run_cli(capsys, "list", *target)
    assert code == 2 and err.startswith("error: no AWS credentials")


@pytest.mark.usefixtures("local_stack_state")
def test_the_local_stack_is_never_chosen_without_local(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = run_cli(capsys, "list")
    assert (code, out) == (2, "")
    assert err == (
        "error: which deployment? give --stack-name, or --jobs-table/--state-table/--runs-table/"
        "--queue-url (or JOBSCHED_* variables), or --local "
        "(.jobsched-local.json is here: add --local to use the local stack)\n"
    )
    # --local is explicit: it wins over a deployment named in the environment.
    for name in ("JOBS", "STATE", "RUNS"):
        monkeypatch.setenv(f"JOBSCHED_{name}_TABLE", f"elsewhere-{name.lower()}")
    monkeypatch.setenv("JOBSCHED_QUEUE_URL", "https://sqs.eu-west-1.amazonaws.com/1/elsewhere")
    code, out, err = run_cli(capsys, "list", "--local", "--json")
    assert (code, err, json.loads(out)) == (0, "", [])


@pytest.mark.usefixtures("local_stack_state")
def test_the_python_api_reaches_the_local_stack() -> None:
    ops = connect(local=True)
    outcome = ops.register(
        JobDefinition(job_id="from-python", schedule="rate(10 minutes)", target="log", payload={"a": 1})
    )
    assert outcome is Registration.SCHEDULED
    assert [job["job_id"] for job in ops.list_jobs()] == ["from-python"]


@pytest.mark.usefixtures("bare_env")
def test_the_python_api_says_in_a_sentence_that_a_stack_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    with mock_aws(), pytest.raises(TargetError) as raised:
        connect(stack_name="no-such-stack")
    assert str(raised.value) == (
        "there is no CloudFormation stack named 'no-such-stack' in eu-west-1: check the name and the "
        "region (AWS_DEFAULT_REGION), or deploy it first (sam deploy)"
    )
    assert raised.value.__cause__ is None and raised.value.__suppress_context__
    with pytest.raises(TargetError) as raised:
        connect(local=True)
    assert str(raised.value) == (
        "no .jobsched-local.json here: start the local stack with `jobsched local` (in this folder) first"
    )


@pytest.mark.skipif(not (Path(sys.executable).parent / "aws").exists(), reason="no awscli in this venv")
def test_aws_sqs_needs_endpoint_url_on_the_local_stack(
    local_stack_state: tuple[LocalMoto, Resources], bare_env: Path
) -> None:
    """docs/local.md: awscli v1 sends `aws sqs` to queue.amazonaws.com whatever AWS_ENDPOINT_URL
    (or AWS_ENDPOINT_URL_SQS) says; `--endpoint-url "$AWS_ENDPOINT_URL"` reaches the stack."""
    moto, resources = local_stack_state
    env = {
        **os.environ,
        "AWS_ENDPOINT_URL": moto.endpoint_url,
        "AWS_ENDPOINT_URL_SQS": moto.endpoint_url,
        "AWS_DEFAULT_REGION": LOCAL_REGION,
        "AWS_ACCESS_KEY_ID": DUMMY_ACCESS_KEY_ID,
        "AWS_SECRET_ACCESS_KEY": DUMMY_SECRET_ACCESS_KEY,
        "AWS_MAX_ATTEMPTS": "1",
    }
    command = [str(Path(sys.executable).parent / "aws"), "sqs", "get-queue-attributes"]
    command += ["--queue-url", resources.work_queue_url, "--attribute-names", "ApproximateNumberOfMessages"]

    def aws(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*command, *extra], env=env, cwd=bare_env, capture_output=True, text=True, timeout=120
        )

    assert aws("--cli-connect-timeout", "3", "--cli-read-timeout", "3").returncode != 0
    done = aws("--endpoint-url", moto.endpoint_url)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"Attributes": {"ApproximateNumberOfMessages": "0"}}
