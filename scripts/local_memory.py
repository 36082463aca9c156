"""Measure the local stack's memory over a long session at the demo's load, and its exit time.

    python scripts/local_memory.py --minutes 30 --every 60 [--output FILE.json]

Starts ``jobsched local`` (the real command, in a temporary folder), registers the demo's six
jobs with a window as long as the session, samples the resident memory (VmRSS) of the command's
process (which hosts moto) and of each child every ``--every`` seconds, then sends SIGTERM and
times the exit. Prints one line per sample and, last, one JSON object with the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(p) for p in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def register_demo_jobs(state_file: Path, minutes: float) -> list[str]:
    from jobsched_tools.api import operations_for
    from jobsched_tools.deployment import Target
    from jobsched_tools.local.demo import demo_jobs
    from jobsched_tools.local.stack import read_state, state_env

    state = read_state(state_file)
    os.environ.update(state_env(state))
    target = Target(state["jobs_table"], state["runs_table"], state["work_queue_url"], state["endpoint_url"])
    ops = operations_for(target, int(state["shard_count"]))
    start = (int(time.time()) + 6) * 1000
    jobs = demo_jobs(state["ledger_table"], start, start + int(minutes * 60_000))
    for job in jobs:
        ops.register(job)
    return [job.job_id for job in jobs]


def count_runs(state_file: Path) -> dict[str, int]:
    from jobsched.adapters.aws import make_client
    from jobsched_tools.local.stack import read_state

    state = read_state(state_file)
    client = make_client("dynamodb", state["endpoint_url"], state["region"])
    counts: dict[str, int] = {}
    paginator = client.get_paginator("scan")
    for page in paginator.paginate(
        TableName=state["runs_table"], ProjectionExpression="#s", ExpressionAttributeNames={"#s": "status"}
    ):
        for item in page.get("Items", []):
            status = item["status"]["S"]
            counts[status] = counts.get(status, 0) + 1
    return counts


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--every", type=float, default=60.0, help="seconds between samples")
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="jobsched-mem-"))
    state_file = folder / ".jobsched-local.json"
    jobsched = Path(sys.executable).with_name("jobsched")
    log = (folder / "local.log").open("wb")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    process = subprocess.Popen(
        [str(jobsched), "local", "--state-file", str(state_file)],
        cwd=folder,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        until = time.monotonic() + 120
        while not state_file.exists() and time.monotonic() < until:
            time.sleep(0.5)
        time.sleep(8)  # the processes' cold starts
        register_demo_jobs(state_file, args.minutes)
        samples: list[dict[str, Any]] = []
        began = time.monotonic()
        while True:
            elapsed = time.monotonic() - began
            kids = {pid: rss_mb(pid) for pid in children(process.pid)}
            sample = {
                "t_s": round(elapsed),
                "main_mb": round(rss_mb(process.pid) or 0, 1),
                "children_mb": round(sum(v or 0 for v in kids.values()), 1),
                "children": len(kids),
            }
            sample["total_mb"] = round(sample["main_mb"] + sample["children_mb"], 1)
            samples.append(sample)
            print(json.dumps(sample), flush=True)
            if elapsed >= args.minutes * 60:
                break
            time.sleep(args.every)
        runs = count_runs(state_file)
        t0 = time.monotonic()
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=180)
            exit_s: float | None = round(time.monotonic() - t0, 2)
        except subprocess.TimeoutExpired:
            exit_s = None
        result = {
            "minutes": args.minutes,
            "start": samples[0],
            "end": samples[-1],
            "max_total_mb": max(s["total_mb"] for s in samples),
            "runs": runs,
            "exit_on_sigterm_s": exit_s,
            "log": str(folder / "local.log"),
        }
        if args.output is not None:
            args.output.write_text(json.dumps({"samples": samples, **result}, indent=2) + "\n")
        print(json.dumps(result), flush=True)
        return 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


if __name__ == "__main__":
    sys.exit(main())
