"""The ``sievesim`` command.

Each subcommand lives in a module of :mod:`sievesim.commands` that exposes
``register(subparsers)``; this file only assembles them and turns user-facing
errors into a one-line message and exit status 2.
"""
from __future__ import annotations

import argparse
import gc
import importlib
import os
import re
import sys
import warnings
from typing import NoReturn, Sequence

from . import __version__
from ._validate import (DEFAULT_MAX_MEMORY, DEFAULT_MAX_WORK_S, format_bytes, format_seconds, memory_limit,
                        seconds_arg, size_arg, work_limit)
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
    "serve",
    "sweep",
    "reproduce",
    "plot",
    "calibrate",
]

# The command each name on the command line belongs to: a run of one command imports only its module
# (tests/test_cli.py checks this table against what the modules register).
_COMMAND_OF = {"dram": "dram", "pim": "pim", "models": "models", "model": "models", "hardware": "hardware",
               "policy": "policy", "trace-stats": "trace_stats", "run": "run", "sweep": "sweep",
               "reproduce": "reproduce", "plot": "plot", "serve": "serve", "calibrate": "calibrate"}


def _terminal_columns() -> int:
    """``shutil.get_terminal_size().columns`` without importing shutil (and with it bz2, lzma and
    fnmatch, on every ``dram run``'s start-up, for a width that only ``--help`` uses):
    ``$COLUMNS``, else the width of the terminal of stdout, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
        columns = columns or 80
    return columns


class _Formatter(argparse.HelpFormatter):
    """argparse's help layout, its width found as argparse finds it (:func:`_terminal_columns`)."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None, **kwargs) -> None:
        super().__init__(prog, indent_increment, max_help_position,
                         _terminal_columns() - 2 if width is None else width, **kwargs)


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage error on one line (``--help`` shows the usage)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        # "argument --x: V: expected E" from the value types of sievesim._validate, as field errors read
        m = re.fullmatch(r"argument (?P<arg>[^:]+): (?P<val>.+?): expected (?P<exp>.*)", message)
        if m:
            message = f"{m['arg']} = {m['val']}: expected {m['exp']}"
        self.exit(2, f"sievesim: error: {_one_line(message)} (see {self.prog} --help)\n")


_MAX_MEMORY_HELP = (f"refuse work estimated to need more memory than this (default "
                    f"{format_bytes(DEFAULT_MAX_MEMORY)}; e.g. 16GiB)")


_MAX_WORK_HELP = (f"refuse work estimated to run longer than this (default {format_seconds(DEFAULT_MAX_WORK_S)}; "
                  "e.g. 2h, 90min, 3600)")


def _add_max_memory(parser: argparse.ArgumentParser, top: bool) -> None:
    """``--max-memory`` and ``--max-work`` on the top level and on every subcommand, so they may
    follow the command."""
    parser.add_argument("--max-memory", type=size_arg, metavar="SIZE", help=_MAX_MEMORY_HELP,
                        **({"default": DEFAULT_MAX_MEMORY} if top else {"default": argparse.SUPPRESS}))
    parser.add_argument("--max-work", type=seconds_arg, metavar="DURATION", help=_MAX_WORK_HELP,
                        **({"default": DEFAULT_MAX_WORK_S} if top else {"default": argparse.SUPPRESS}))
    for action in parser._actions:  # noqa: SLF001 - argparse keeps subparsers here
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            for sub in dict.fromkeys(action.choices.values()):
                _add_max_memory(sub, False)


def _command_in(argv: Sequence[str] | None) -> str | None:
    """The command that ``argv`` names (its first word that is not a top-level option), if any."""
    words = iter(argv or ())
    for word in words:
        if word == "--max-memory":
            next(words, None)               # its value
        elif word in ("--", "-h", "--help"):
            return None                     # the top-level help lists every command
        elif not word.startswith("-"):
            return word
    return None


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The ``sievesim`` parser; with ``argv`` naming a known command, only that command's module is
    imported and registered (start-up of e.g. ``sievesim dram run`` pays for no other command's
    imports); otherwise every command, for ``--help`` and for the error that lists them."""
    parser = _Parser(
        prog="sievesim",
        description="Simulate MoE decoding on GPUs with HBM-PIM, down to DRAM commands.",
    )
    parser.add_argument("--version", action="version", version=f"sievesim {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    command = _command_in(argv)
    modules = [_COMMAND_OF[command]] if command in _COMMAND_OF else _COMMAND_MODULES
    for name in modules:
        importlib.import_module(f"sievesim.commands.{name}").register(subparsers)
    _add_max_memory(parser, True)
    return parser


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ANN001
    print(f"sievesim: warning: {message}", file=sys.stderr)


def _error(message: str) -> int:
    print(f"sievesim: error: {message}", file=sys.stderr)
    return 2


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit status (2 for bad input, with one line on stderr).

    A ``dram`` command runs with the cyclic garbage collector off (restored on return): its
    objects are a few large arrays freed by reference counting, and the collections that imports
    set off cost 3-4 ms of a process's 0.12 s floor (``python benchmarks/process_floor.py``).

    The last line of defence: a file that cannot be read or written (``OSError``), bytes that are
    not UTF-8, input nested too deeply to parse and running out of memory become one line naming
    the file or the value. Any other exception is a bug and keeps its traceback.
    """
    for stream in (sys.stdout, sys.stderr):
        # a path with bytes that are not UTF-8 (or any non-ASCII name under PYTHONIOENCODING=ascii)
        # is printed with backslash escapes rather than failing with UnicodeEncodeError
        if hasattr(stream, "reconfigure"):
            try:
                stream.reconfigure(errors="backslashreplace")
            except (ValueError, OSError):   # a closed or detached stream
                pass
    if argv is None:
        argv = sys.argv[1:]
    collecting = gc.isenabled()
    if _command_in(argv) == "dram":
        # no DRAM command does linear algebra, but importing numpy starts OpenBLAS's worker
        # threads, which spin for about 0.1 s of CPU: on a small machine, the time of a core that
        # the engine's threads need (a setting of the user's own is kept)
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
        gc.disable()
    try:
        return _run(argv)
    finally:
        if collecting:
            gc.enable()


def console() -> NoReturn:
    """The ``sievesim`` program (and ``python -m sievesim``): :func:`main` on the command line,
    then exit with its status.

    A ``dram`` command's process ends without the interpreter's teardown (``os._exit`` once stdout
    and stderr are flushed, as mypy ends its runs): freeing numpy's and every other module's
    objects one by one took 14-16 ms of the 0.10-0.11 s that a short run takes in all
    (``python benchmarks/process_floor.py``: its ``sievesim dram run`` row against its last),
    and a ``dram`` command leaves nothing for it to do (its files are closed and its threads
    joined when :func:`main` returns). A flush that fails (a closed pipe) exits the usual way.
    Other commands (plots, Dask clients) exit the usual way. For the same reason a ``dram``
    command's garbage collector stays off to the end: turned back on, the first allocation
    after :func:`main` would go through every object the imports made."""
    argv = sys.argv[1:]
    dram = _command_in(argv) == "dram"
    if dram:
        gc.disable()                    # (main() then leaves it off)
    status = main(argv)
    if dram:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError):
            pass                        # the interpreter's own exit reports it, as before
        else:
            os._exit(status)
    sys.exit(status)


def _run(argv: Sequence[str]) -> int:
    parser = build_parser(argv)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, usage errors
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        with warnings.catch_warnings(), memory_limit(args.max_memory), work_limit(args.max_work):
            warnings.showwarning = _show_warning  # a warning (e.g. an unverified model family) is one line too
            return int(args.func(args) or 0)
    except SievesimError as exc:
        return _error(_one_line(exc))
    except BrokenPipeError:  # e.g. `sievesim ... | head`
        return 0
    except KeyboardInterrupt as exc:   # Ctrl-C: one line (a command may say how to resume), exit 130
        print(f"sievesim: interrupted{': ' + str(exc) if str(exc) else ''}", file=sys.stderr)
        return 130
    except UnicodeDecodeError as exc:
        return _error(f"input is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); "
                      "expected a UTF-8 file")
    except OSError as exc:
        if exc.filename is None:     # no file named: writing the output (stdout) failed, e.g. a full disk
            return _error(f"standard output: cannot write ({exc.strerror or _one_line(exc)})")
        return _error(f"{exc.filename}: cannot open ({exc.strerror or _one_line(exc)})")
    except MemoryError:
        return _error("out of memory: the input asks for more memory than this machine has; expected "
                      "smaller sizes (see `sievesim --help` for --max-memory)")
    except RecursionError:
        return _error("input nested too deeply to read; expected a flat file (tables and lists a few levels deep)")


if __name__ == "__main__":  # pragma: no cover
    console()
