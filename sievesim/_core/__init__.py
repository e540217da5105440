"""The Cython engine. Import through :mod:`sievesim.dram`; this package takes arrays, not models.

``Engine`` is imported on first use: the start-up reader (:mod:`._prefetch`) lives here too, and
must be importable before numpy is (it runs while numpy imports)."""
import os
from typing import Any

__all__ = ["Engine", "available_threads"]


def available_threads() -> int:
    """CPU cores this process may run on (here, not in :mod:`.parallel`: ``sievesim dram run``
    asks before it imports numpy)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:          # not on Linux
        return os.cpu_count() or 1


def __getattr__(name: str) -> Any:
    if name == "Engine":
        from ._engine import Engine

        return Engine
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
