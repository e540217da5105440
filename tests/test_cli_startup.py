"""Start-up of one command: `sievesim dram run` imports only the dram command's module (and what it
needs), and the table that maps command names to modules matches what the modules register."""
from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys

import pytest

from sievesim import cli


def test_command_table_matches_the_modules():
    found = {}
    for module in cli._COMMAND_MODULES:          # noqa: SLF001
        sub = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(f"sievesim.commands.{module}").register(sub)
        found.update({name: module for name in sub.choices})
    assert found == cli._COMMAND_OF              # noqa: SLF001


@pytest.mark.parametrize("argv, command", [
    (["dram", "run", "x"], "dram"), (["--max-memory", "1GiB", "pim", "gemv"], "pim"),
    (["--max-memory=1GiB", "trace-stats"], "trace-stats"), (["-h", "dram"], None), (["--version"], None),
    ([], None), (["nosuch"], "nosuch")])
def test_the_command_is_found_past_top_level_options(argv, command):
    assert cli._command_in(argv) == command      # noqa: SLF001


def test_help_still_lists_every_command(capsys):
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    for name in cli._COMMAND_OF:                 # noqa: SLF001
        assert name in out
    assert cli.main(["nosuch"]) == 2
    assert "invalid choice" in capsys.readouterr().err


def test_dram_run_imports_no_other_command():
    code = ("import sys, io, contextlib\nfrom sievesim.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
            "    rc = main(['dram', 'run', 'synthetic:stream:200', '--json'])\n"
            "print(rc, sorted(m for m in sys.modules if m.startswith('sievesim')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    rc, mods = done.stdout.split(" ", 1)
    assert rc == "0"
    loaded = set(json.loads(mods.replace("'", '"')))
    assert "sievesim.commands.dram" in loaded
    others = {f"sievesim.commands.{m}" for m in cli._COMMAND_MODULES if m != "dram"}   # noqa: SLF001
    assert not loaded & (others | {"sievesim.costs", "sievesim.policies", "sievesim.system", "sievesim.pim"})


@pytest.mark.parametrize("preset, argv, expected", [
    (None, ["dram", "run", "synthetic:stream:200", "--json"], "1"),     # no spinning OpenBLAS threads
    ("3", ["dram", "run", "synthetic:stream:200", "--json"], "3"),      # the user's own setting is kept
    (None, ["models"], None),                                            # other commands leave it alone
])
def test_dram_commands_start_no_blas_threads(preset, argv, expected):
    import os
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if preset is not None:
        env["OPENBLAS_NUM_THREADS"] = preset
    code = ("import os, io, contextlib\nfrom sievesim.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    rc = main({argv!r})\n"
            "print(rc, os.environ.get('OPENBLAS_NUM_THREADS'))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert done.stdout.split() == ["0", str(expected)]


@pytest.mark.parametrize("argv, collecting", [(["dram", "configs"], False), (["models"], True)])
def test_dram_commands_run_without_the_cyclic_gc_and_restore_it(monkeypatch, argv, collecting):
    import gc

    seen = []
    monkeypatch.setattr(cli, "_run", lambda args: seen.append(gc.isenabled()) or 0)
    assert gc.isenabled()
    assert cli.main(argv) == 0
    assert seen == [collecting] and gc.isenabled()


_CONSOLE = ("import atexit, sys\n"
            "atexit.register(lambda: print('teardown', file=sys.stderr))\n"
            "sys.argv = ['sievesim'] + sys.argv[1:]\n"
            "from sievesim.cli import console\n"
            "console()\n")


@pytest.mark.parametrize("argv, status, skips_teardown", [
    (["dram", "configs"], 0, True),                          # a dram command: no teardown, all of its output
    (["dram", "run", "synthetic:nosuch:5"], 2, True),        # its exit status kept
    (["models"], 0, False),                                  # other commands exit the usual way
])
def test_the_program_skips_the_teardown_after_a_dram_command(tmp_path, argv, status, skips_teardown):
    out = tmp_path / "out.txt"
    with open(out, "w") as fh:      # a file, not a terminal: stdout is block-buffered, so only a flush saves it
        done = subprocess.run([sys.executable, "-c", _CONSOLE, *argv], stdout=fh, stderr=subprocess.PIPE, text=True)
    assert done.returncode == status
    assert ("teardown" not in done.stderr) == skips_teardown
    whole = subprocess.run([sys.executable, "-c", "import sys\nfrom sievesim.cli import main\nsys.exit(main())",
                            *argv], capture_output=True, text=True)
    assert out.read_text() == whole.stdout and whole.returncode == status


def test_python_dash_m_runs_the_program():
    done = subprocess.run([sys.executable, "-m", "sievesim", "dram", "configs"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip()


@pytest.mark.parametrize("columns", [None, "50", "200", "abc", "0", "-3"])
def test_the_help_width_is_shutils_without_shutil(monkeypatch, columns):
    import shutil

    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    assert cli._terminal_columns() == shutil.get_terminal_size().columns      # noqa: SLF001
    parser = cli.build_parser(["dram"])
    assert parser._get_formatter()._width == shutil.get_terminal_size().columns - 2   # noqa: SLF001


def test_a_streamed_dram_run_of_a_yaml_imports_no_pathlib_or_shutil(tmp_path):
    """About 6 ms of a `dram run`'s start-up (docs/dram.md); whatever the interpreter imported
    before the command (an editable install's finder imports pathlib) does not count."""
    from test_dram_engine import RAMULATOR_YAML

    cfg = tmp_path / "r.yaml"
    cfg.write_text(RAMULATOR_YAML)
    trace = tmp_path / "t.trace"
    trace.write_text("".join(f"LD 0x{64 * i:x}\n" for i in range(3000)))
    code = ("import sys, io, contextlib\nbefore = set(sys.modules)\nfrom sievesim.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    rc = main(['dram', 'run', {str(trace)!r}, '--config', {str(cfg)!r}, '--json', '--stream'])\n"
            "print(rc, sorted(m for m in ('pathlib', 'shutil') if m in set(sys.modules) - before))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["0", "[]"]
