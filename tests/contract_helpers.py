"""Run ``sievesim.cli.main`` in-process and check the input contract on what it printed.

The contract (docs/architecture.md, "Input contract"): a command either succeeds (exit 0) or
refuses its input with exit status 2 and exactly one line on stderr that names the field or the
file; never a traceback, never a hang, never memory beyond the limit.
"""
from __future__ import annotations

import contextlib
import io
import resource
import signal
import time
from dataclasses import dataclass

from sievesim.cli import main

#: stderr of a refusal starts with one of these (the CLI's own line or argparse's usage line).
ERROR_PREFIXES = ("sievesim: error: ",)


@dataclass
class CliResult:
    rc: int
    out: str
    err: str
    seconds: float


class CaseTimeout(Exception):
    """Raised inside the command when a case runs past its time limit."""


def _alarm(signum, frame):  # noqa: ARG001
    raise CaseTimeout()


def run_cli(argv: list[str], *, timeout_s: float = 10.0, memory_bytes: int | None = None) -> CliResult:
    """``main(argv)`` with stdout/stderr captured, under a time limit (SIGALRM) and, optionally, an
    address-space limit of ``memory_bytes`` above what the process already holds."""
    out, err = io.StringIO(), io.StringIO()
    old_handler = signal.signal(signal.SIGALRM, _alarm)
    old_limit = resource.getrlimit(resource.RLIMIT_AS)
    if memory_bytes is not None:
        with open("/proc/self/statm") as fh:
            current = int(fh.read().split()[0]) * resource.getpagesize()
        resource.setrlimit(resource.RLIMIT_AS, (current + memory_bytes, old_limit[1]))
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    t0 = time.perf_counter()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main([str(a) for a in argv])
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_handler)
        resource.setrlimit(resource.RLIMIT_AS, old_limit)
    return CliResult(rc, out.getvalue(), err.getvalue(), time.perf_counter() - t0)


def run_cli_forked(argv: list[str], *, timeout_s: float = 10.0, memory_bytes: int | None = None) -> CliResult:
    """:func:`run_cli` in a forked child: a hard time limit (the child is killed, even inside the
    compiled engine, where SIGALRM cannot interrupt) and an address-space limit that leaves this
    process alone. An exception that escapes ``main`` comes back as exit -1 with its traceback."""
    import json
    import os
    import select
    import traceback

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: run, report, leave without running any of the parent's cleanup
        try:
            os.close(r)
            try:
                res = run_cli(argv, timeout_s=timeout_s * 2, memory_bytes=memory_bytes)
                payload = [res.rc, res.out[:4000], res.err[:4000], res.seconds]
            except BaseException as exc:  # noqa: BLE001 - a bug: report it to the parent
                payload = [-1, "", "".join(traceback.format_exception(exc))[-4000:], 0.0]
            data = json.dumps(payload).encode()
            while data:
                data = data[os.write(w, data):]
        finally:
            os._exit(0)
    os.close(w)
    chunks, t0 = [], time.perf_counter()
    try:
        while True:
            left = timeout_s - (time.perf_counter() - t0)
            if left <= 0 or not select.select([r], [], [], left)[0]:
                os.kill(pid, signal.SIGKILL)
                raise AssertionError(f"no result within {timeout_s} s (a hang): {argv}")
            chunk = os.read(r, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(r)
        os.waitpid(pid, 0)
    rc, out, err, seconds = json.loads(b"".join(chunks) or b'[-9, "", "the child died without a result", 0]')
    return CliResult(rc, out, err, seconds)


def assert_refused(res: CliResult, *needles: str) -> str:
    """Exit 2 with one stderr error line that contains every one of ``needles``; returns the line.
    Warning lines (``sievesim: warning: ...``, e.g. an unverified model family) may stand before it."""
    lines = [ln for ln in res.err.strip().splitlines() if not ln.startswith("sievesim: warning: ")]
    assert res.rc == 2, f"exit {res.rc}, expected 2; stderr: {res.err!r}; stdout: {res.out[:300]!r}"
    assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}: {res.err!r}"
    assert lines[0].startswith(ERROR_PREFIXES), lines[0]
    assert "out of memory" not in lines[0], f"a runaway allocation, not a refusal: {lines[0]}"
    for needle in needles:
        assert needle in lines[0], f"{needle!r} not in {lines[0]!r}"
    return lines[0]


def assert_contract(res: CliResult) -> None:
    """Success, or a one-line refusal (for generated inputs whose outcome is not known)."""
    if res.rc == 0:
        assert "Traceback" not in res.err, res.err
        return
    assert res.rc != -1, f"an exception escaped main():\n{res.err}"
    assert_refused(res)
