"""The AWS CLI against the local stack, as a user runs it: the real ``jobsched local`` command in a
folder of its own, the real ``aws dynamodb`` commands (awscli, from the dev extra), and the
README's and docs/local.md's shell blocks marked ``<!-- run by tests/local/test_aws_cli.py -->``
run verbatim. The outcome is read from the tables and from the stack's own log lines."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import boto3
import pytest
from jobsched.core.run import parse_run_id
from jobsched_tools.emulator.credentials import DUMMY_AWS_ENV

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
MARKER = "<!-- run by tests/local/test_aws_cli.py -->"
T = TypeVar("T")


@dataclass
class Stack:
    folder: Path
    process: subprocess.Popen[str]
    state: dict[str, Any]
    events: list[dict[str, Any]] = field(default_factory=list)

    def env(self) -> dict[str, str]:
        """What a user's shell has after following the docs: no AWS settings of its own."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_") and k != "VIRTUAL_ENV"}
        # The venv is reached through the folder's .venv link (``. .venv/bin/activate``).
        env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if Path(p) != BIN)
        return env

    def aws_env(self) -> dict[str, str]:
        return {
            **self.env(),
            "PATH": f"{BIN}{os.pathsep}{self.env()['PATH']}",
            "AWS_ENDPOINT_URL": self.state["endpoint_url"],
            **DUMMY_AWS_ENV,
        }

    def aws(self, *args: str) -> str:
        done = subprocess.run(
            [str(BIN / "aws"), "dynamodb", *args],
            cwd=self.folder,
            env=self.aws_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def job(self, job_id: str) -> dict[str, Any] | None:
        client = boto3.client("dynamodb", region_name="us-east-1", endpoint_url=self.state["endpoint_url"])
        item = client.get_item(
            TableName=self.state["jobs_table"], Key={"job_id": {"S": job_id}}, ConsistentRead=True
        ).get("Item")
        return item

    def state_item(self, job_id: str) -> dict[str, Any]:
        """The job's scheduler state (the next run, the slot): jobsched's own item, not the person's."""
        client = boto3.client("dynamodb", region_name="us-east-1", endpoint_url=self.state["endpoint_url"])
        item: dict[str, Any] = client.get_item(
            TableName=self.state["state_table"], Key={"job_id": {"S": job_id}}, ConsistentRead=True
        ).get("Item", {})
        return item

    def runs(self, job_id: str) -> list[dict[str, Any]]:
        client = boto3.client("dynamodb", region_name="us-east-1", endpoint_url=self.state["endpoint_url"])
        pages = client.get_paginator("scan").paginate(
            TableName=self.state["runs_table"],
            FilterExpression="job_id = :j",
            ExpressionAttributeValues={":j": {"S": job_id}},
        )
        return [item for page in pages for item in page.get("Items", [])]

    def events_for(self, name: str, correlation_id: str) -> list[dict[str, Any]]:
        return [
            e
            for e in list(self.events)
            if e.get("event") == name and e.get("correlation_id") == correlation_id
        ]


def wait_for(what: str, probe: Callable[[], T | None], timeout_s: float = 90) -> T:
    """Poll until ``probe`` gives a value. The timeout only ends a run that is already broken."""
    until = time.monotonic() + timeout_s
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > until:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.5)


def status_of(stack: Stack, job_id: str) -> str | None:
    item = stack.job(job_id)
    return item["status"]["S"] if item and "status" in item else None


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    folder = tmp_path_factory.mktemp("user")
    (folder / ".venv").symlink_to(BIN.parent)  # the clone's .venv, as `make install` left it
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    process = subprocess.Popen(
        [str(BIN / "jobsched"), "local"],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    events: list[dict[str, Any]] = []

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith("{"):
                try:
                    events.append(json.loads(line))
                except ValueError:
                    continue

    threading.Thread(target=read, daemon=True).start()
    try:
        state_file = folder / ".jobsched-local.json"
        wait_for("the state file", lambda: state_file.exists() or None, 120)
        state = json.loads(state_file.read_text())
        procs = {"registrar-1", "trigger-1", "detector-1", "worker-1", "worker-2", "worker-3"}
        wait_for(
            "every process ready",
            lambda: procs <= {e.get("proc") for e in list(events) if e.get("event") == "local.ready"} or None,
            120,
        )
        yield Stack(folder, process, state, events)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def marked_blocks(document: Path) -> list[str]:
    """The fenced shell blocks right after a MARKER line, in order."""
    pattern = re.compile(re.escape(MARKER) + r"\n```(?:sh|bash)\n(.*?)\n```", re.DOTALL)
    return pattern.findall(document.read_text(encoding="utf-8"))


def run_verbatim(stack: Stack, blocks: list[str], *extra: str) -> str:
    script = "\n".join(["set -eo pipefail", *blocks, *extra]) + "\n"
    done = subprocess.run(
        ["bash", "-c", script], cwd=stack.folder, env=stack.env(), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    return done.stdout


def next_occurrence(stack: Stack, job_id: str) -> int:
    """The job's next occurrence as its stack's shape keeps it: a legacy state's ``next_run_at``,
    or on a successor stack (the template's default) its head: the state's epoch's last
    ``scheduled`` item (a claimed run stays ``scheduled`` until its start; core/head.py)."""
    state = stack.state_item(job_id)
    if "next_run_at" in state:
        return int(state["next_run_at"]["N"])
    epoch = int(state["epoch"]["N"])
    heads = [
        int(run["scheduled_at"]["N"])
        for run in stack.runs(job_id)
        if run["status"]["S"] == "scheduled" and parse_run_id(run["run_id"]["S"]).epoch == epoch
    ]
    assert heads, stack.runs(job_id)
    return max(heads)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_job_put_after_skipped_occurrences_is_registered_run_paused_edited_and_deleted(
    stack: Stack,
) -> None:
    # Skipped occurrences first: each run sleeps longer than the period, and overlap is skip.
    stack.aws(
        "put-item",
        "--table-name",
        stack.state["jobs_table"],
        "--item",
        json.dumps(
            {
                "job_id": {"S": "slowpoke"},
                "schedule": {"S": "rate(10 seconds)"},
                "target": {"S": "example.sleep"},
                "payload": {"S": json.dumps({"seconds": 25})},
                "overlap": {"S": "skip"},
            }
        ),
    )
    wait_for(
        "a skipped occurrence",
        lambda: [r for r in stack.runs("slowpoke") if r["status"]["S"] == "skipped"] or None,
    )

    # Register with a raw put-item, after those skips.
    table = stack.state["jobs_table"]
    stack.aws(
        "put-item",
        "--table-name",
        table,
        "--item",
        json.dumps(
            {
                "job_id": {"S": "cli-job"},
                "schedule": {"S": "rate(10 seconds)"},
                "target": {"S": "log"},
                "payload": {"S": json.dumps({"from": "aws cli"})},
            }
        ),
    )
    assert wait_for("cli-job active", lambda: status_of(stack, "cli-job")) == "active"
    assert stack.events_for("job.scheduled", "cli-job")
    wait_for(
        "a succeeded run of cli-job",
        lambda: [r for r in stack.runs("cli-job") if r["status"]["S"] == "succeeded"] or None,
    )

    # Pause.
    key = json.dumps({"job_id": {"S": "cli-job"}})
    stack.aws(
        "update-item",
        "--table-name",
        table,
        "--key",
        key,
        "--update-expression",
        "SET enabled = :off",
        "--expression-attribute-values",
        json.dumps({":off": {"BOOL": False}}),
    )
    assert wait_for("cli-job paused", lambda: status_of(stack, "cli-job") == "paused" or None)
    paused = stack.job("cli-job")
    assert paused is not None and "next_run_at" not in stack.state_item("cli-job")

    # Edit: a new schedule, enabled again; the registrar reschedules from the next occurrence.
    before = paused["def_hash"]["S"]
    stack.aws(
        "update-item",
        "--table-name",
        table,
        "--key",
        key,
        "--update-expression",
        "SET enabled = :on, schedule = :s",
        "--expression-attribute-values",
        json.dumps({":on": {"BOOL": True}, ":s": {"S": "rate(15 seconds)"}}),
    )

    def rescheduled() -> dict[str, Any] | None:
        item = stack.job("cli-job")
        active = item and item.get("status", {}).get("S") == "active" and item["def_hash"]["S"] != before
        return item if active else None

    edited = wait_for("cli-job rescheduled", rescheduled)
    assert edited is not None
    next_run = next_occurrence(stack, "cli-job")
    assert next_run % 15_000 == 0  # rate(15 seconds), counted from the epoch

    # Delete: the registrar sees it; the run history stays.
    stack.aws("delete-item", "--table-name", table, "--key", key)
    wait_for("job.deleted for cli-job", lambda: stack.events_for("job.deleted", "cli-job") or None)
    assert stack.job("cli-job") is None
    assert stack.runs("cli-job")

    failures = [
        e for e in list(stack.events) if e.get("event") in ("batch.record_failed", "local.invocation_failed")
    ]
    assert failures == []


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_docs_local_md_talking_to_it_runs_verbatim(stack: Stack) -> None:
    blocks = marked_blocks(ROOT / "docs" / "local.md")
    assert len(blocks) == 5
    out = run_verbatim(stack, blocks)

    # get-item's answer, printed by the second block, three seconds after the put.
    assert re.search(r'"status":\s*\{\s*"S":\s*"active"', out), out
    # The query found the job's succeeded runs.
    assert re.search(r'"S":\s*"succeeded"', out), out
    # The last block paused, rescheduled and deleted it.
    wait_for("job.deleted for hello", lambda: stack.events_for("job.deleted", "hello") or None)
    assert stack.job("hello") is None


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_readme_put_item_on_the_local_stack_runs_verbatim(stack: Stack) -> None:
    blocks = marked_blocks(ROOT / "README.md")
    assert len(blocks) == 2
    # ... and what the README says to run next.
    run_verbatim(stack, blocks)
    assert wait_for("nightly-report active", lambda: status_of(stack, "nightly-report")) == "active"
    out = run_verbatim(stack, blocks[:1], "jobsched show nightly-report --local")
    assert "status: active" in out and "next_run_at:" in out
