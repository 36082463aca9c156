"""The ``jobsched`` command. Each subcommand lives in its own module with ``register(subparsers)``.

Only the chosen subcommand's module is imported: ``jobsched --help`` and ``jobsched next`` must
not pay for boto3, moto, the simulation and the benchmark (3.6 s on a 2-core machine when every
module was imported up front). ``COMMANDS`` names each subcommand's module and one-line help for
the top-level listing; a test checks it against what the modules register.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

# name -> (module in jobsched_tools.cli, the help line the module gives it)
COMMANDS: dict[str, tuple[str, str]] = {
    "next": ("cmd_next", "print the next occurrences of a schedule expression"),
    "register": ("cmd_jobs", "create or update jobs from a JSON file (object or list)"),
    "list": ("cmd_jobs", "list jobs"),
    "show": ("cmd_jobs", "show a job and its scheduler state"),
    "pause": ("cmd_jobs", "stop scheduling a job (in-flight runs finish)"),
    "resume": ("cmd_jobs", "resume a paused job from its next occurrence"),
    "delete": ("cmd_jobs", "delete a job; its run history stays"),
    "runs": ("cmd_runs", "a job's recent runs, newest first"),
    "describe": ("cmd_describe", "one view of a job: its definition, state, last runs and next instants"),
    "top": ("cmd_top", "a live status view, refreshed in place (bounded reads a refresh)"),
    "trigger": ("cmd_runs", "run a job now, outside its schedule"),
    "backfill": ("cmd_runs", "run the past occurrences in (FROM, TO], missed ones too, each at most once"),
    "dlq": (
        "cmd_dlq",
        "the work queue's dead-letter queue: list its messages, or redrive them to the work queue",
    ),
    "outcomes": ("cmd_outcomes", "outcome events: replay the outcomes of a window on the outcome bus"),
    "import": (
        "cmd_import",
        "register EventBridge Scheduler schedules (get-schedule JSON: a file or a directory) as jobs",
    ),
    "local": ("cmd_local", "run the whole stack locally on moto (no AWS account, no Docker) until Ctrl-C"),
    "demo": ("cmd_local", "a measured minute on the local stack, with a worker SIGKILLed mid-run"),
    "chaos": ("cmd_chaos", "simulate hours of scheduling under injected faults and check exactly-once"),
    "migrate": ("cmd_migrate", "stack migrations (the successor claim: issue 37)"),
    "bench": (
        "cmd_bench",
        "measure throughput, requests and cost per run, start lag and crash recovery locally",
    ),
}


def chosen_command(argv: Sequence[str]) -> str | None:
    """The subcommand named in ``argv``: its first argument that is not an option."""
    for arg in argv:
        if not arg.startswith("-"):
            return arg if arg in COMMANDS else None
    return None


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser with ``command``'s module registered (its options, arguments and handler);
    every other subcommand is listed by name and help only."""
    parser = argparse.ArgumentParser(
        prog="jobsched",
        description="Serverless job scheduler for AWS: each scheduled occurrence runs exactly once.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    module_name = COMMANDS[command][0] if command in COMMANDS else None
    for name, (module, help_text) in COMMANDS.items():
        if module == module_name:
            continue
        subparsers.add_parser(name, help=help_text, add_help=False)
    if module_name is not None:
        importlib.import_module(f"jobsched_tools.cli.{module_name}").register(subparsers)
    return parser


# The exit status of a command whose reader closed the pipe (`jobsched runs JOB | head -3`): what a
# shell reports for a process ended by SIGPIPE, as `cat` is.
BROKEN_PIPE_EXIT = 128 + 13


def main(argv: Sequence[str] | None = None) -> None:
    arguments = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(chosen_command(arguments))
    args = parser.parse_args(arguments)
    try:
        code = args.func(args)
        sys.stdout.flush()
    except BrokenPipeError:
        _quiet_stdout()
        sys.exit(BROKEN_PIPE_EXIT)
    except Exception as exc:
        # Every command: a setup or deployment error (no region or credentials, an endpoint
        # that does not answer, a request AWS refused) is one sentence, not a traceback.
        from jobsched_tools.cli.errors import SETUP_ERROR_EXIT, readable

        what = readable(exc)
        if what is None or os.environ.get("JOBSCHED_TRACEBACK"):
            raise
        print(f"error: {what}", file=sys.stderr)
        sys.exit(SETUP_ERROR_EXIT)
    sys.exit(code)


def _quiet_stdout() -> None:
    """The reader of stdout went away: point stdout at /dev/null, so that the interpreter's own
    flush at exit does not fail again (the Python documentation's recipe for SIGPIPE)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # not a real file (a test's capture): nothing will flush it
        pass


if __name__ == "__main__":
    main()
