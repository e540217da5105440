"""The result of :func:`sievesim.system.simulate_step`: executed and estimated times of the measured steps."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .dag import Schedule

__all__ = ["StepResult"]


@dataclass
class StepResult:
    """Results of :func:`simulate_step`, averaged over the measured steps (times in seconds).

    ``to_dict()`` gives the flat JSON record that ``sievesim run --json`` prints; fields whose
    names start with ``wall_`` are the simulator's own timings (not deterministic).
    ``pim_unit_busy_s`` lists every PIM unit of every GPU (GPU-major; the unit is PIMoE's, else a
    channel): attention (all units) plus expert work; ``pim_unit_expert_busy_s`` the expert work
    alone (Figure 10's imbalance).
    """

    settings: dict[str, Any]
    step_times_s: list[float]
    estimated_step_times_s: list[float]
    layer_time_s: list[float]
    estimated_layer_time_s: list[float]
    experts_on_gpu: list[float]
    experts_on_pim: list[float]
    busy_s: dict[str, list[float]]
    pim_unit: str
    pim_unit_busy_s: list[float]
    pim_unit_expert_busy_s: list[float]
    scheduler_us: float
    early_load_bytes: float
    early_load_wasted_bytes: float
    memory_per_gpu_bytes: dict[str, float]
    wall_decision_us: float
    wall_step_s: float
    schedule: Schedule | None = field(default=None, repr=False)

    @property
    def step_time_s(self) -> float:
        return float(np.mean(self.step_times_s))

    @property
    def estimated_step_time_s(self) -> float:
        return float(np.mean(self.estimated_step_times_s))

    @property
    def throughput_tokens_per_s_per_gpu(self) -> float:
        """Decode tokens per second per GPU: ``B / T_step / G``."""
        return self.settings["batch"] / self.step_time_s / self.settings["gpus"]

    @property
    def interactivity_tokens_per_s_per_user(self) -> float:
        """Tokens per second each request sees: ``1 / T_step``."""
        return 1.0 / self.step_time_s

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.settings)
        out.update({
            "step_time_s": self.step_time_s,
            "estimated_step_time_s": self.estimated_step_time_s,
            "estimate_over_executed": self.estimated_step_time_s / self.step_time_s,
            "throughput_tokens_per_s_per_gpu": self.throughput_tokens_per_s_per_gpu,
            "interactivity_tokens_per_s_per_user": self.interactivity_tokens_per_s_per_user,
            "step_times_s": list(self.step_times_s),
            "estimated_step_times_s": list(self.estimated_step_times_s),
            "experts_on_gpu": float(sum(self.experts_on_gpu)),
            "experts_on_pim": float(sum(self.experts_on_pim)),
            "experts_on_gpu_per_layer": list(self.experts_on_gpu),
            "experts_on_pim_per_layer": list(self.experts_on_pim),
            "layer_time_s": list(self.layer_time_s),
            "estimated_layer_time_s": list(self.estimated_layer_time_s),
            "busy_s": {k: list(v) for k, v in self.busy_s.items()},
            "pim_unit": self.pim_unit,
            "pim_unit_busy_s": list(self.pim_unit_busy_s),
            "pim_unit_expert_busy_s": list(self.pim_unit_expert_busy_s),
            "scheduler_us": self.scheduler_us,
            "early_load_bytes": self.early_load_bytes,
            "early_load_wasted_bytes": self.early_load_wasted_bytes,
            "memory_per_gpu_bytes": dict(self.memory_per_gpu_bytes),
            "wall_decision_us": self.wall_decision_us,
            "wall_step_s": self.wall_step_s,
        })
        return out
