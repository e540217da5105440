"""The ``sievesim`` command.

Each subcommand lives in a module of :mod:`sievesim.commands` that exposes
``register(subparsers)``; this file only assembles them and turns user-facing
errors into a one-line message and exit status 2.
"""
from __future__ import annotations

import argparse
import importlib
import sys
import warnings
from typing import Sequence

from . import __version__
from .errors import SievesimError

# Modules under sievesim.commands, in the order their subcommands are listed in --help.
_COMMAND_MODULES = [
    "dram",
    "pim",
    "models",
    "hardware",
    "policy",
    "trace_stats",
    "run",
    "sweep",
    "reproduce",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sievesim",
        description="Simulate MoE decoding on GPUs with HBM-PIM, down to DRAM commands.",
    )
    parser.add_argument("--version", action="version", version=f"sievesim {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _COMMAND_MODULES:
        importlib.import_module(f"sievesim.commands.{name}").register(subparsers)
    return parser


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ANN001
    print(f"sievesim: warning: {message}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        with warnings.catch_warnings():  # a warning (e.g. an unverified model family) is one line too
            warnings.showwarning = _show_warning
            return int(args.func(args) or 0)
    except SievesimError as exc:
        print(f"sievesim: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `sievesim ... | head`
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
