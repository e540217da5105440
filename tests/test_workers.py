"""Pool workers die with their parent, SIGKILL included (sievesim.workers)."""
from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest
from conftest import subprocess_env

ROOT = pathlib.Path(__file__).resolve().parents[1]
ENV = subprocess_env()


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie that nobody reaped counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    if int(fh.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(entry))
            except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
                continue
    return out


def _gone_within(pids: list[int], seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        left = [p for p in pids if _alive(p)]
        if not left:
            return []
        time.sleep(0.05)
    return [p for p in pids if _alive(p)]


pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc to find the workers")


@pytest.mark.slow
def test_sigkill_of_a_sweep_leaves_no_worker_after_5_s(tmp_path):
    cmd = [sys.executable, "-m", "sievesim", "sweep", "--model", "qwen3-30b-a3b", "--batch",
           ",".join(str(b) for b in range(1, 41)), "--steps", "50", "--point", "estimate", "--jobs", "2",
           "--quiet", "--out", str(tmp_path / "o")]
    proc = subprocess.Popen(cmd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        workers: list[int] = []
        while time.monotonic() < deadline and proc.poll() is None:
            workers = _children(proc.pid)
            if len(workers) >= 2 and (tmp_path / "o" / "results.jsonl").exists():
                break
            time.sleep(0.05)
        assert proc.poll() is None and len(workers) >= 2, "the sweep ended before it could be killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        left = _gone_within(workers, 5.0)
        for pid in left:        # do not leave them behind when the test fails
            os.kill(pid, signal.SIGKILL)
        assert left == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_the_watchdog_alone_ends_a_worker_whose_parent_died():
    """Without the Linux death signal (other systems), the watchdog thread ends the worker."""
    script = ("import os, time\n"
              "from sievesim.workers import _watch\n"
              "parent = os.getpid()\n"          # before the fork: the child may first run after the kill
              "pid = os.fork()\n"
              "if pid == 0:\n"
              "    _watch(parent)\n"
              "print(pid, flush=True)\n"
              "time.sleep(60)\n")
    middle = subprocess.Popen([sys.executable, "-c", script], env=ENV, stdout=subprocess.PIPE, text=True)
    try:
        worker = int(middle.stdout.readline())
        assert _alive(worker)
        middle.send_signal(signal.SIGKILL)
        middle.wait()
        assert _gone_within([worker], 5.0) == []
    finally:
        if middle.poll() is None:
            middle.kill()
            middle.wait()
