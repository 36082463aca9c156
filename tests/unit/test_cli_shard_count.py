"""Every command that takes ``--shard-count`` takes it the same way: one definition
(cli/common.py's ``add_shard_count_option``), so the same help, the same default from
``JOBSCHED_SHARD_COUNT`` and the same refusal of a count the template's ShardCount would refuse.
(``describe`` and ``import`` built their own copy. Every copy took ``--shard-count 0`` for
"omitted" and let 300 reach the command, and a ``JOBSCHED_SHARD_COUNT`` that is not a number was
a traceback while the parser was built.)"""

from __future__ import annotations

import argparse

import pytest
from jobsched.core.config import MAX_SHARDS
from jobsched_tools.cli.common import shard_count
from jobsched_tools.cli.main import COMMANDS, build_parser

# The commands on a stack's jobs and runs: each needs the stack's ShardCount to write or read a
# job's shard.
TAKE_IT = [
    "backfill",
    "delete",
    "describe",
    "import",
    "list",
    "pause",
    "register",
    "resume",
    "runs",
    "show",
    "top",
    "trigger",
]
HELP = "the stack's ShardCount (read from the stack or local state when omitted)"


def command_parser(name: str) -> argparse.ArgumentParser:
    parser = build_parser(name)
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    sub: argparse.ArgumentParser = subparsers.choices[name]
    return sub


def shard_count_option(name: str) -> argparse.Action | None:
    return command_parser(name)._option_string_actions.get("--shard-count")


def parse(name: str, *extra: str) -> argparse.Namespace:
    """``jobsched NAME`` with a placeholder for each argument it requires, then ``extra``."""
    required: list[str] = []
    for action in command_parser(name)._actions:
        if not action.option_strings:
            required.append("x")
        elif action.required:
            required += [action.option_strings[0], "x"]
    return build_parser(name).parse_args([name, *required, *extra])


def test_the_commands_that_take_a_shard_count() -> None:
    assert [name for name in sorted(COMMANDS) if shard_count_option(name) is not None] == TAKE_IT


@pytest.mark.parametrize("name", TAKE_IT)
def test_each_command_s_option_is_the_shared_one(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JOBSCHED_SHARD_COUNT", raising=False)
    option = shard_count_option(name)
    assert option is not None
    assert (option.type, option.default, option.help, option.dest) == (shard_count, None, HELP, "shard_count")


@pytest.mark.parametrize("name", TAKE_IT)
def test_each_command_parses_a_shard_count_the_same_way(
    name: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("JOBSCHED_SHARD_COUNT", raising=False)
    assert parse(name).shard_count is None  # omitted: the stack or the local state says
    assert parse(name, "--shard-count", "4").shard_count == 4
    assert parse(name, "--shard-count", str(MAX_SHARDS)).shard_count == MAX_SHARDS
    monkeypatch.setenv("JOBSCHED_SHARD_COUNT", "8")
    assert parse(name).shard_count == 8
    assert parse(name, "--shard-count", "4").shard_count == 4  # the option wins
    monkeypatch.setenv("JOBSCHED_SHARD_COUNT", "")
    assert parse(name).shard_count is None
    for value in ("0", "-1", str(MAX_SHARDS + 1), "four", "4.0"):
        monkeypatch.delenv("JOBSCHED_SHARD_COUNT")
        with pytest.raises(SystemExit) as refused:
            parse(name, "--shard-count", value)
        assert refused.value.code == 2
        assert f"argument --shard-count: {value!r} is not a shard count" in capsys.readouterr().err
        monkeypatch.setenv("JOBSCHED_SHARD_COUNT", value)  # the same refusal from the environment
        with pytest.raises(SystemExit) as refused:
            parse(name)
        assert refused.value.code == 2
        assert f"argument --shard-count: {value!r} is not a shard count" in capsys.readouterr().err
