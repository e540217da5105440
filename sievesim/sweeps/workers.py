"""Worker processes that die with their parent.

A :class:`concurrent.futures.ProcessPoolExecutor` whose parent is killed with SIGKILL leaves its
workers running (their parent becomes PID 1) until they are killed by hand. The pools that
sievesim starts (:func:`process_pool`) give each worker two guards, set up before it takes its
first task:

* on Linux, ``prctl(PR_SET_PDEATHSIG, SIGKILL)``: the kernel kills the worker as soon as its
  parent dies;
* everywhere, a daemon thread that checks every :data:`WATCHDOG_INTERVAL_S` seconds whether the
  parent is still the process that started the worker, and ends the worker when it is not.

``ProcessPoolExecutor(max_workers=N, initializer=die_with_parent, initargs=(os.getpid(),))`` gives a
pool of one's own the same guards.
"""
from __future__ import annotations

import concurrent.futures as cf
import os
import signal
import sys
import threading
import time

__all__ = ["die_with_parent", "process_pool", "WATCHDOG_INTERVAL_S"]

#: Seconds between two checks of the watchdog thread.
WATCHDOG_INTERVAL_S = 0.5
_PR_SET_PDEATHSIG = 1


def _pdeathsig() -> bool:
    """Ask the Linux kernel to SIGKILL this process when its parent thread ends; False elsewhere."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch(parent: int) -> None:
    while True:
        if os.getppid() != parent:
            os._exit(1)
        time.sleep(WATCHDOG_INTERVAL_S)


def die_with_parent(parent: int) -> None:
    """Pool initializer: end this worker when process ``parent`` (the pool's owner) dies, and leave
    Ctrl-C to the parent (which reports the interruption once and says how to resume)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _pdeathsig()
    if os.getppid() != parent:     # the parent died before the guard was set
        os._exit(1)
    threading.Thread(target=_watch, args=(parent,), name="sievesim-parent-watchdog", daemon=True).start()


def process_pool(max_workers: int) -> cf.ProcessPoolExecutor:
    """A process pool of ``max_workers`` workers that die with this process (SIGKILL included)."""
    return cf.ProcessPoolExecutor(max_workers=max_workers, initializer=die_with_parent, initargs=(os.getpid(),))
