"""Issue 28: a second `jobsched local` in the same folder must not take over a running stack's
state file (and delete it on exit); a stale file is taken over, with a note."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from jobsched_tools.cli.main import main
from jobsched_tools.local.stack import LocalStack, StackOptions, claim_state_file


@pytest.fixture
def listening() -> Iterator[str]:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield f"http://127.0.0.1:{server.getsockname()[1]}"


def dead_pid() -> int:
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    return done.pid


def write_state(path: Path, pid: int, endpoint: str) -> str:
    text = json.dumps({"endpoint_url": endpoint, "pid": pid, "jobs_table": "jobsched-local-jobs"})
    path.write_text(text)
    return text


def test_a_second_local_refuses_a_running_stacks_state_file(
    tmp_path: Path, listening: str, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / ".jobsched-local.json"
    text = write_state(state, os.getpid(), listening)
    with pytest.raises(SystemExit) as exited:
        main(["local", "--state-file", str(state)])
    assert exited.value.code == 2
    assert capsys.readouterr().err == (
        f"error: {state} names a local stack that is running (pid {os.getpid()}, {listening}): use that "
        "one (`jobsched ... --local`), stop it first (Ctrl-C in its terminal), or start this one in "
        "another folder or with --state-file OTHER.json\n"
    )
    assert state.read_text() == text  # untouched


def test_a_stale_state_file_is_taken_over_with_a_note(tmp_path: Path, listening: str) -> None:
    state = tmp_path / ".jobsched-local.json"
    pid = dead_pid()
    write_state(state, pid, listening)  # the process is gone (its port reused by someone else)
    assert claim_state_file(state) == (
        f"note: {state} named a local stack that is no longer running (pid {pid}, {listening}); "
        "taking it over"
    )
    write_state(state, os.getpid(), "http://127.0.0.1:9")  # alive, but nothing answers there
    assert claim_state_file(state) is not None
    assert claim_state_file(tmp_path / "none.json") is None


def test_a_stack_removes_the_state_file_at_exit_only_if_it_is_its_own(tmp_path: Path) -> None:
    state = tmp_path / ".jobsched-local.json"
    stack = LocalStack(StackOptions(state_file=state))

    class Moto:
        endpoint_url = "http://127.0.0.1:5000"

        def stop(self) -> None:
            pass

    stack.moto = Moto()  # type: ignore[assignment]
    write_state(state, os.getpid() + 1, Moto.endpoint_url)  # another stack's
    stack.stop()
    assert state.exists()
    write_state(state, os.getpid(), Moto.endpoint_url)
    stack.stop()
    assert not state.exists()
