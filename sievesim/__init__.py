"""sievesim: MoE decoding on GPUs with HBM-PIM, from DRAM commands up to expert-partitioning policies.

Layers point down (see docs/architecture.md): cli -> policies/costs -> workload/models/hardware ->
pim -> dram -> _core (Cython engine). Importing :mod:`sievesim` is cheap; the
engine is loaded when a DRAM/PIM function is first used.
"""
from __future__ import annotations

__version__ = "0.1.0"

from ._validate import memory_limit
from .errors import ConfigError, SievesimError, TraceError

__all__ = ["__version__", "SievesimError", "ConfigError", "TraceError", "memory_limit", "simulate_step",
           "simulate_serving"]


def __getattr__(name: str):
    """``sievesim.simulate_step`` without importing the system layer (and the engine) up front."""
    if name == "simulate_step":
        from .system import simulate_step
        return simulate_step
    if name == "simulate_serving":
        from .serving import simulate_serving
        return simulate_serving
    raise AttributeError(f"module 'sievesim' has no attribute {name!r}")
