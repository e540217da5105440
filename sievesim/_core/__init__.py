"""The Cython engine. Import through :mod:`sievesim.dram`; this package takes arrays, not models.

``Engine`` is imported on first use: the start-up reader (:mod:`._prefetch`) lives here too, and
must be importable before numpy is (it runs while numpy imports)."""
from typing import Any

__all__ = ["Engine"]


def __getattr__(name: str) -> Any:
    if name == "Engine":
        from ._engine import Engine

        return Engine
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
