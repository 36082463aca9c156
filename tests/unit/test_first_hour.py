"""docs/local.md's first-hour transcript is scripts/first_hour.py's, and its commands still parse:
cheap (no stack is started), so a renamed option or a changed step shows here, and the fix is to
run ``scripts/first_hour.py --write`` again."""

from __future__ import annotations

import importlib.util
import shlex
import sys
from pathlib import Path
from types import ModuleType

import pytest
from jobsched_tools.cli.main import build_parser, chosen_command

ROOT = Path(__file__).resolve().parents[2]


def first_hour() -> ModuleType:
    spec = importlib.util.spec_from_file_location("first_hour", ROOT / "scripts" / "first_hour.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["first_hour"] = module
    spec.loader.exec_module(module)
    return module


def test_the_transcript_in_the_docs_is_the_scripts() -> None:
    script = first_hour()
    transcript = script.transcript_section((ROOT / "docs" / "local.md").read_text())
    commands = script.command_lines(transcript)
    assert commands == [script.shown(step) for step in script.STEPS]
    # Each step's exit status is the one it expects (the script stops otherwise): shown when not 0.
    statuses = [line for line in transcript.splitlines() if line.startswith("(exit status ")]
    assert statuses == [f"(exit status {step.expect})" for step in script.STEPS if step.expect]


@pytest.mark.parametrize("step", first_hour().STEPS, ids=lambda step: step.command[:50])
def test_each_jobsched_command_of_the_transcript_parses(step: object) -> None:
    command = shlex.split(step.command)  # type: ignore[attr-defined]
    if command[0] != "jobsched":
        return
    args = command[1:]
    parsed = build_parser(chosen_command(args)).parse_args(args)
    assert callable(parsed.func)
