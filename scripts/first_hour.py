"""A first hour on the local stack, as a transcript: what a new user types and what they see.

    .venv/bin/python scripts/first_hour.py            # print the transcript (markdown)
    .venv/bin/python scripts/first_hour.py --write    # and put it in docs/local.md

It starts ``jobsched local --view`` in a scratch folder, runs each step of ``STEPS`` there (the
``jobsched`` and ``aws`` commands for real, as a person would in a second terminal), and prints
each command with its output and exit status exactly as they came. Nothing in the transcript is
written by hand: every output is true of the run that produced it. A step whose exit status is
not the one it expects stops the script with exit status 1 (the transcript would not say what the
docs around it say). The ``jobsched local --view`` lines printed meanwhile end the transcript.

tests/unit/test_first_hour.py checks, without running anything, that the transcript in
docs/local.md is this script's (the same commands) and that each ``jobsched`` command in it still
parses.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "local.md"
BEGIN = "<!-- first-hour: begin (scripts/first_hour.py --write) -->"
END = "<!-- first-hour: end -->"

HELLO = {"job_id": "hello", "schedule": "rate(1 minute)", "target": "log", "payload": {"hi": 1}}
ETL = [
    {
        "job_id": "etl.extract",
        "schedule": "cron(0 2 * * ? *)",
        "timezone": "Europe/Paris",
        "target": "log",
        "group": "etl",
    },
    {
        "job_id": "etl.load",
        "schedule": "cron(30 2 * * ? *)",
        "timezone": "Europe/Paris",
        "target": "log",
        "group": "etl",
    },
]
FLAKY = {
    "job_id": "flaky",
    "schedule": "rate(1 hour)",
    "target": "example.flaky",
    "payload": {"fail_attempts": 1},
    "retry": {"max_attempts": 3, "backoff_seconds": 1, "max_backoff_seconds": 2},
}
# A body the worker refuses (no version, no definition): poison, to the dead-letter queue.
POISON = json.dumps({"job_id": "hello", "run_id": "hello@manual:by-hand"})


@dataclass(frozen=True)
class Step:
    """One thing the person does. ``command``: a shell command line as shown (``{queue}`` and
    ``{endpoint}`` are the stack's, filled in when run and shown filled in); ``files``: files it
    writes first, shown as ``cat > FILE``; ``expect``: its exit status."""

    say: str
    command: str
    expect: int = 0
    files: tuple[tuple[str, str], ...] = ()
    wait_after: float = 0.0  # seconds to let the stack work before the next step (shown as sleep)


STEPS: tuple[Step, ...] = (
    Step("Nothing is registered yet.", "jobsched list --local"),
    Step(
        "A job is a JSON object: an id, a schedule, a target and its payload.",
        "jobsched register hello.json --local",
        files=(("hello.json", json.dumps(HELLO, indent=2)),),
    ),
    Step("Every field with the value in effect, defaults included.", "jobsched show hello --local"),
    Step(
        "What a schedule means, before using it.",
        "jobsched next 'cron(0 9 ? * MON-FRI *)' --tz Europe/Berlin --count 3",
    ),
    Step(
        "Run it now, outside its schedule.", "jobsched trigger hello --local --request-id first", wait_after=4
    ),
    Step("The same request id runs once.", "jobsched trigger hello --local --request-id first"),
    Step("Its runs, newest first.", "jobsched runs hello --local"),
    Step(
        "Two jobs in a group.",
        "jobsched register etl.json --local",
        files=(("etl.json", json.dumps(ETL, indent=2)),),
    ),
    Step("The group's jobs.", "jobsched list --group etl --local"),
    Step("Pause the group.", "jobsched pause --group etl --local"),
    Step("Again: nothing to do, and it says so.", "jobsched pause --group etl --local"),
    Step("Resume it.", "jobsched resume --group etl --local"),
    Step(
        "A job whose first attempt fails: it is retried.",
        "jobsched register flaky.json --local",
        files=(("flaky.json", json.dumps(FLAKY, indent=2)),),
    ),
    Step("", "jobsched trigger flaky --local --request-id try", wait_after=8),
    Step(
        "The run succeeded at its second attempt (the first one's error is not its note).",
        "jobsched runs flaky --local",
    ),
    Step("The live view, once.", "jobsched top --once --local"),
    Step(
        "A message the worker cannot read (written by hand to the work queue) goes to the dead-letter queue.",
        "aws sqs send-message --endpoint-url {endpoint} --queue-url {queue} --message-body '"
        + POISON
        + "' --output text --query MD5OfMessageBody",
        wait_after=8,
    ),
    Step("What is on the dead-letter queue, and why (nothing is moved).", "jobsched dlq list --local"),
    Step(
        "Move it back once: it fails again, and the redrive does not loop.",
        "jobsched dlq redrive --local",
        wait_after=8,
    ),
    Step("", "jobsched dlq list --local"),
    Step("A job that does not exist.", "jobsched show nosuch --local", expect=2),
    Step("Without --local the CLI does not guess the deployment.", "jobsched list", expect=2),
    Step("Delete the job; its runs stay as history.", "jobsched delete hello --local"),
    Step("", "jobsched runs hello --local"),
)


def command_lines(markdown: str) -> list[str]:
    """The command lines (``$ ...``) of a transcript."""
    return [
        line[2:] for line in markdown.splitlines() if line.startswith("$ ") and not line.startswith("$ cat >")
    ]


def transcript_section(doc: str) -> str:
    start, end = doc.index(BEGIN) + len(BEGIN), doc.index(END)
    return doc[start:end]


def shown(step: Step) -> str:
    return step.command.replace("{endpoint}", '"$AWS_ENDPOINT_URL"').replace("{queue}", '"$WORK_QUEUE"')


def run(folder: Path, env: dict[str, str]) -> tuple[str, bool]:
    state = json.loads((folder / ".jobsched-local.json").read_text())
    fill = {"endpoint": state["endpoint_url"], "queue": state["work_queue_url"]}
    out: list[str] = []
    ok = True
    for step in STEPS:
        if step.say:
            out += ["", step.say, ""]
        out.append("```console")
        for name, text in step.files:
            (folder / name).write_text(text + "\n")
            out += [f"$ cat > {name} <<'EOF'", text, "EOF"]
        started = time.monotonic()
        # An `aws` step runs in bash with the two variables it is shown with set, as the person's
        # shell has them (docs/local.md, "Talking to it").
        aws = step.command.startswith("aws ")
        done = subprocess.run(
            ["bash", "-c", shown(step)] if aws else shlex.split(step.command),
            cwd=folder,
            env={**env, "AWS_ENDPOINT_URL": fill["endpoint"], "WORK_QUEUE": fill["queue"]} if aws else env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        took = time.monotonic() - started
        out.append(f"$ {shown(step)}")
        out += [line.rstrip() for line in (done.stdout + done.stderr).rstrip("\n").splitlines()]
        if done.returncode != 0:
            out.append(f"(exit status {done.returncode})")
        out.append("```")
        print(f"# {took:5.1f} s, exit {done.returncode}: {shown(step)}", file=sys.stderr, flush=True)
        if done.returncode != step.expect:
            print(f"# expected exit status {step.expect}", file=sys.stderr)
            ok = False
        if step.wait_after:
            time.sleep(step.wait_after)
    return "\n".join(out), ok


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--write", action="store_true", help=f"put the transcript in {DOC.relative_to(ROOT)}")
    args = parser.parse_args()
    bin_dir = Path(sys.executable).parent
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "COLUMNS": "120",
    }
    for name in ("AWS_ENDPOINT_URL", "AWS_PROFILE", "JOBSCHED_STACK_NAME", "JOBSCHED_JOBS_TABLE"):
        env.pop(name, None)
    with tempfile.TemporaryDirectory(prefix="jobsched-first-hour-") as scratch:
        folder = Path(scratch)
        log = (folder / "view.log").open("w")
        stack = subprocess.Popen(
            [str(bin_dir / "jobsched"), "local", "--view"],
            cwd=folder,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 120
            while not (folder / ".jobsched-local.json").exists():
                if stack.poll() is not None or time.monotonic() > deadline:
                    print((folder / "view.log").read_text(), file=sys.stderr)
                    return 1
                time.sleep(0.5)
            time.sleep(2)
            body, ok = run(folder, env)
        finally:
            stack.send_signal(signal.SIGINT)
            stack.wait(timeout=60)
            log.close()
        view = [
            line
            for line in (folder / "view.log").read_text().splitlines()
            if line.strip() and not line.startswith("#")
        ]
    transcript = "\n".join(
        [
            body,
            "",
            "Meanwhile, in the first terminal, `jobsched local --view` printed:",
            "",
            "```console",
            *view,
            "```",
        ]
    )
    print(transcript)
    if args.write:
        doc = DOC.read_text()
        start, end = doc.index(BEGIN) + len(BEGIN), doc.index(END)
        DOC.write_text(doc[:start] + "\n" + transcript + "\n" + doc[end:])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
