"""Helpers for the whole-process benchmarks: run a command and measure it, keep a core busy."""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time
from typing import Iterator, NamedTuple

BUSY_LOOP = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"


class Measured(NamedTuple):
    wall_s: float       # wall-clock seconds, start to exit
    cpu_s: float        # user + system CPU seconds of the process (all its threads)
    peak_mb: float      # peak resident memory of the command itself, MB (see run_measured)
    stdout: str


# A child forked from this (large) process starts with its resident set, and Linux keeps that
# high-water mark across exec: ru_maxrss of a direct child is never below this process's size.
# GNU time forks the command from its own small process and reports the command's own peak (%M).
_GNU_TIME = "/usr/bin/time"


def sievesim_program() -> list[str]:
    """The installed ``sievesim`` program beside this Python (what a user runs: the command the
    issue measures); ``python -m sievesim`` where there is none."""
    import shutil

    found = shutil.which("sievesim", path=os.path.dirname(sys.executable))
    return [found] if found else [sys.executable, "-m", "sievesim"]


def run_measured(cmd: list[str], cwd: str | None = None) -> Measured:
    """Run ``cmd`` to its end and measure it. Wall time and CPU time are the child's own
    (``os.wait4``): the whole process, interpreter start-up included. Peak resident memory: the
    command's own, through GNU time's ``%M`` where ``/usr/bin/time`` exists (it forks the command
    from a small process); else ``ru_maxrss``, which is at least this process's size.
    ``cwd``: where it runs (not the repository, so that ``python -m sievesim`` imports the package
    that ``PYTHONPATH`` names)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err, \
            tempfile.NamedTemporaryFile("w+", suffix=".peak") as peak:
        gnu_time = os.access(_GNU_TIME, os.X_OK)
        run = [_GNU_TIME, "-f", "%M", "-o", peak.name, *cmd] if gnu_time else cmd
        t0 = time.perf_counter()
        proc = subprocess.Popen(run, stdout=out, stderr=err, cwd=cwd)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode:
            raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {err.read().strip()[-500:]}")
        peak_kb = int(peak.read().split()[-1]) if gnu_time else usage.ru_maxrss
        return Measured(wall, usage.ru_utime + usage.ru_stime, peak_kb / 1024, out.read())


@contextlib.contextmanager
def busy_core(seconds: float) -> Iterator[subprocess.Popen]:
    """One single-threaded busy process (a Python loop) that ends by itself after ``seconds`` and
    is killed on exit from the block."""
    proc = subprocess.Popen([sys.executable, "-c", BUSY_LOOP.format(seconds=float(seconds))])
    try:
        time.sleep(0.2)                 # let it start spinning
        yield proc
    finally:
        proc.kill()
        proc.wait()
