"""What the command modules share: the stack's operations for a command's options, the output
(human-readable tables by default, ``--json`` for scripts) and the shape of their parsers."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, TypeAlias

from jobsched.core.config import MAX_SHARDS
from jobsched.services.operations import Operations

from jobsched_tools.deployment import add_target_options, resolve_target


def operations(args: argparse.Namespace) -> Operations:
    from jobsched_tools.api import operations_for

    return operations_for(resolve_target(args), args.shard_count)


def table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> str:
    cells = [list(map(str, headers))] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def emit(args: argparse.Namespace, data: Any, human: Callable[[Any], str]) -> int:
    print(json.dumps(data, default=str, sort_keys=True) if args.json else human(data))
    return 0


def count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


def first_line(text: str) -> str:
    return text.splitlines()[0] if text else ""


def parse_instant(value: str) -> datetime:
    moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def guarded(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """A command's handler. Errors of setup or deployment are turned into one sentence by main()
    for every command (cli/errors.py), so nothing is caught here; kept as the commands' one
    wrapper."""
    return func


Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def add_command(
    subparsers: Subparsers, name: str, func: Callable[[argparse.Namespace], int], help_text: str
) -> argparse.ArgumentParser:
    """A command on a stack's jobs and runs: its parser, with the options to name the stack,
    ``--json`` and ``--shard-count``."""
    parser = subparsers.add_parser(name, help=help_text, description=help_text)
    add_target_options(parser)
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    add_shard_count_option(parser)
    parser.set_defaults(func=guarded(func))
    return parser


def add_shard_count_option(parser: argparse.ArgumentParser) -> None:
    """``--shard-count``, one definition for every command that takes it: the stack's ShardCount,
    else ``JOBSCHED_SHARD_COUNT``, else None (the stack or the local state says). A value outside
    the template's ShardCount range is refused by argparse (exit status 2) whichever way it
    came: argparse converts a string default with the option's type, so a bad
    ``JOBSCHED_SHARD_COUNT`` is an ``error:`` line, not a traceback while the parser is built."""
    parser.add_argument(
        "--shard-count",
        type=shard_count,
        default=os.environ.get("JOBSCHED_SHARD_COUNT") or None,
        help="the stack's ShardCount (read from the stack or local state when omitted)",
    )


def shard_count(text: str) -> int:
    """A shard count as the template's ShardCount parameter takes it: a whole number from 1 to
    MAX_SHARDS. (0 was taken for "omitted", and a count above the limit reached the command: a
    validation error of SchedulerConfig's, or ``top`` reading shards the stack does not have.)"""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_SHARDS:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a shard count: give the stack's ShardCount, a whole number from 1 to "
            f"{MAX_SHARDS} (--shard-count or JOBSCHED_SHARD_COUNT)"
        )
    return value


def action_command(subparsers: Subparsers, name: str, help_text: str, description: str) -> Subparsers:
    """A command made of actions (``jobsched dlq redrive``, ``jobsched outcomes replay``): its
    parser, which requires an ACTION; returns the subparsers to add the actions to."""
    parser = subparsers.add_parser(name, help=help_text, description=description)

    def usage(_args: argparse.Namespace) -> int:  # not reached: ACTION is required
        parser.print_usage(sys.stderr)
        return 2

    parser.set_defaults(func=usage)
    return parser.add_subparsers(dest="action", required=True, metavar="ACTION")
