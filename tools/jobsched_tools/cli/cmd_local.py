"""``jobsched local`` (the stack on moto, until Ctrl-C) and ``jobsched demo`` (a measured minute)."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any


def register(subparsers: Any) -> None:
    local = subparsers.add_parser(
        "local",
        help="run the whole stack locally on moto (no AWS account, no Docker) until Ctrl-C",
        description=(
            "Starts a moto server, creates the template's tables and queues, and runs the real Lambda "
            "handlers in separate processes: trigger and miss detector ticks, an SQS poller per worker, "
            "a DynamoDB stream poller for the registrar. Writes .jobsched-local.json (endpoint, tables, "
            "queue) so `jobsched ... --local` and `aws --endpoint-url` can target it."
        ),
    )
    local.add_argument("--port", type=int, default=0, help="moto port (default: any free port)")
    local.add_argument("--workers", type=int, default=3, help="worker processes (default 3)")
    local.add_argument("--triggers", type=int, default=1, help="trigger processes (default 1)")
    local.add_argument("--tick-seconds", type=float, default=5.0, help="trigger tick period (default 5)")
    local.add_argument(
        "--detector-seconds",
        type=float,
        default=5.0,
        help="miss detector sweep period within its once-a-minute invocation (default 5)",
    )
    local.add_argument("--state-file", type=Path, default=Path(".jobsched-local.json"))
    local.add_argument("--view", action="store_true", help="a readable live view instead of JSON lines")
    local.add_argument(
        "--outcomes",
        action="store_true",
        help="outcome events: a bus, a queue subscribed to it, and the outcome publisher on the runs stream",
    )
    local.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="extra setting, e.g. LEASE_SECONDS=10",
    )
    local.set_defaults(func=run_local)

    demo = subparsers.add_parser(
        "demo",
        help="a measured minute on the local stack, with a worker SIGKILLed mid-run",
        description=(
            "Registers sample jobs, runs them on the local stack, SIGKILLs the worker running a sleep "
            "job (its lease stays held), shows the miss detector recover the run for another worker, "
            "drains and prints a summary measured from the run records, then one verdict line. "
            "Exit status 0 when the verdict is PASS (nothing duplicated, lost or left unfinished, and "
            "every killed run recovered), 1 when it is FAIL."
        ),
    )
    demo.add_argument(
        "--seconds", type=float, default=75.0, help="length of the schedule window (default 75)"
    )
    demo.add_argument("--workers", type=int, default=3)
    demo.add_argument("--json", action="store_true", help="end with one JSON line of figures")
    demo.set_defaults(func=run_demo_command)


def run_demo_command(args: argparse.Namespace) -> int:
    from jobsched_tools.local.demo import run_demo

    return run_demo(args.seconds, args.json, args.workers)


def run_local(args: argparse.Namespace) -> int:
    from jobsched_tools.local.demo import View
    from jobsched_tools.local.session import now_ms
    from jobsched_tools.local.stack import LocalStack, StackOptions, StateFileInUse, claim_state_file

    try:
        note = claim_state_file(args.state_file)
    except StateFileInUse as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if note is not None:
        print(f"# {note}", file=sys.stderr, flush=True)
    extra = dict(item.split("=", 1) for item in args.set)
    view = View(now_ms())

    def sink(_name: str, event: dict[str, Any]) -> None:
        if args.view:
            line = view.line(event)
            if line:
                print(line, flush=True)
        else:
            print(json.dumps(event, default=str), flush=True)

    options = StackOptions(
        workers=args.workers,
        triggers=args.triggers,
        tick_seconds=args.tick_seconds,
        detector_seconds=args.detector_seconds,
        port=args.port,
        settings=extra,
        state_file=args.state_file,
        outcomes=args.outcomes,
    )
    stack = LocalStack(options, sink=sink)
    stop = threading.Event()

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    stack.start()
    state = stack.state()
    print(
        f"# jobsched local: endpoint {state['endpoint_url']}, jobs table {state['jobs_table']}, "
        f"runs table {state['runs_table']}, queue {state['work_queue_url']}; state in {args.state_file}. "
        "Ctrl-C stops.",
        flush=True,
    )
    try:
        while not stop.wait(1.0):
            for proc in stack.procs.values():
                if not proc.alive():
                    stack.restart(proc.name)  # as Lambda would start a new environment
    finally:
        stack.stop()
    return 0
