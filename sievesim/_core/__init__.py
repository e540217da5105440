"""The Cython engine. Import through :mod:`sievesim.dram`; this package takes arrays, not models."""
from ._engine import Engine

__all__ = ["Engine"]
