"""``jobsched --help`` and ``jobsched next`` import only what they use: no boto3, moto,
Powertools, simulation or benchmark (importing every subcommand up front took 3.6 s to start).
Checked by what a fresh interpreter has imported, not by a stopwatch."""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys

import pytest
from jobsched_tools.cli.main import COMMANDS, build_parser

HEAVY = (
    "boto3",
    "botocore",
    "moto",
    "aws_lambda_powertools",
    "pydantic",
    "jobsched_tools.bench",
    "jobsched_tools.sim",
)

PROBE = """
import json, sys
from jobsched_tools.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


def imported_by(*argv: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, check=True, timeout=60
    )
    modules: list[str] = json.loads(done.stderr.strip().splitlines()[-1])
    return modules


@pytest.mark.parametrize(
    "argv",
    [("--help",), ("next", "rate(5 minutes)"), ("next", "cron(0 3 * * ? *)", "--tz", "Europe/Berlin")],
)
def test_help_and_next_import_nothing_heavy(argv: tuple[str, ...]) -> None:
    modules = imported_by(*argv)
    heavy = [m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)]
    assert heavy == []
    commands = {m for m in modules if m.startswith("jobsched_tools.cli.cmd_")}
    assert commands <= {"jobsched_tools.cli.cmd_next"}


def test_the_command_table_matches_what_the_modules_register() -> None:
    parser = argparse.ArgumentParser(prog="jobsched")
    subparsers = parser.add_subparsers(dest="command")
    registered: dict[str, str] = {}
    owner: dict[str, str] = {}
    for module in sorted({module for module, _ in COMMANDS.values()}):
        before = {action.dest for action in subparsers._choices_actions}
        importlib.import_module(f"jobsched_tools.cli.{module}").register(subparsers)
        for action in subparsers._choices_actions:
            registered[action.dest] = str(action.help)
            if action.dest not in before:
                owner[action.dest] = module
    assert registered == {name: help_text for name, (_, help_text) in COMMANDS.items()}
    assert owner == {name: module for name, (module, _) in COMMANDS.items()}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_command_gets_its_own_options_and_handler(name: str) -> None:
    parser = build_parser(name)
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    sub = subparsers.choices[name]
    assert callable(sub.get_default("func"))
