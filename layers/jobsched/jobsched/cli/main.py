"""The ``jobsched`` command. Each subcommand lives in its own module with ``register(subparsers)``."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

COMMAND_MODULES = ("cmd_next", "cmd_ops", "cmd_local", "cmd_chaos", "cmd_bench")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="jobsched",
        description="Serverless job scheduler for AWS: each scheduled occurrence runs exactly once.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"jobsched.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"jobsched.cli.{name}":
                raise
            continue
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    sys.exit(args.func(args))


if __name__ == "__main__":
    main()
