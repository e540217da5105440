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
    peak_mb: float      # peak resident memory (ru_maxrss), MB
    stdout: str


def run_measured(cmd: list[str], cwd: str | None = None) -> Measured:
    """Run ``cmd`` to its end and measure it. Wall time, CPU time and peak resident memory are the
    child's own (``os.wait4``): the whole process, interpreter start-up included.
    ``cwd``: where it runs (not the repository, so that ``python -m sievesim`` imports the package
    that ``PYTHONPATH`` names)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, cwd=cwd)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode:
            raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {err.read().strip()[-500:]}")
        return Measured(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, out.read())


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
