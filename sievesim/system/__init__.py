"""The system: one decode step of a model on G GPUs with HBM-PIM, executed as a dependency graph.

``simulate_step(model, hardware, gpus=G, policy=..., batch=B)`` returns a :class:`StepResult`
(executed step time, the policy's Equation-1 estimate beside it, per-layer times, busy time per
resource, per-PIM-unit busy time, experts on each side). :mod:`sievesim.system.dag` is the
general executor underneath; :mod:`sievesim.system.chrome` exports a schedule for Perfetto.
See docs/system.md.
"""
from __future__ import annotations

from .dag import Contention, Graph, Schedule, execute
from .step import GPU_ONLY, LearnedPimCost, StepResult, StepSimulator, parse_prefill, simulate_step

__all__ = ["simulate_step", "StepSimulator", "StepResult", "GPU_ONLY", "LearnedPimCost", "parse_prefill",
           "Graph", "Contention", "Schedule", "execute"]
