"""The result of :func:`sievesim.system.simulate_step`: executed and estimated times of the measured
steps, and the executed nodes of the last one (:meth:`StepResult.nodes`)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from .dag import Schedule

__all__ = ["StepResult", "StepNode"]


@dataclass(frozen=True)
class StepNode:
    """One executed node of a step's graph (one row of :meth:`StepResult.nodes`).

    Times are seconds from the start of the step. The work fields say what the node stands for
    where the simulator knows it, else ``None``: ``tokens`` (token vectors it processes; for
    attention the decode requests), ``context_tokens`` (attention: KV-cache tokens read),
    ``experts`` (global ids of the routed experts it runs or loads), ``bytes`` (HBM bytes of GPU
    kernels and weight loads, link bytes of AllGather/dispatch/combine), ``flops`` (floating-point
    operations), ``engine_cycles`` (PIM nodes: the cycle-accurate engine's time in memory
    command-clock cycles, tCK; for PIMoE the busiest unit's), ``energy_j`` (the node's energy [J],
    docs/energy.md; None without an energy model).
    """

    id: int
    name: str
    kind: str
    layer: int | None           # -1: embedding; num_layers: the LM head
    gpu: int | None
    microbatch: int | None
    resources: tuple[str, ...]  # e.g. ("g0.gpu", "g0.hbm"); () for the decision
    start_s: float
    end_s: float
    depends_on: tuple[int, ...]
    tokens: int | None = None
    context_tokens: int | None = None
    experts: tuple[int, ...] | None = None
    bytes: float | None = None
    flops: float | None = None
    engine_cycles: int | None = None
    energy_j: float | None = None

    @property
    def duration_s(self) -> float:
        """Executed duration [s] (contention included)."""
        return self.end_s - self.start_s


_WORK = ("tokens", "context_tokens", "bytes", "flops", "engine_cycles", "energy_j")


def schedule_nodes(schedule: Schedule) -> list[StepNode]:
    """The nodes of an executed schedule as :class:`StepNode` records, in the order they were added."""
    g = schedule.graph
    out = []
    for i, name in enumerate(g.names):
        meta = g.meta[i]
        gpu = meta.get("gpu")
        experts = meta.get("experts")
        if isinstance(experts, np.ndarray):
            local = np.flatnonzero(experts)
            experts = tuple(int(x) for x in local + (int(gpu or 0) * experts.size))
        work = {k: meta.get(k) for k in _WORK}
        out.append(StepNode(i, name, str(meta.get("kind", "")), meta.get("layer"), gpu, meta.get("microbatch"),
                            tuple(g.resources[i]), float(schedule.start[i]), float(schedule.end[i]),
                            tuple(sorted(g.deps[i])), experts=experts, **work))
    return out


@dataclass(repr=False)
class StepResult:
    """Results of :func:`simulate_step`, averaged over the measured steps (times in seconds).

    ``to_dict()`` gives the flat JSON record that ``sievesim run --json`` prints; fields whose
    names start with ``wall_`` are the simulator's own timings (not deterministic).
    ``pim_unit_busy_s`` lists every PIM unit of every GPU (GPU-major; the unit is PIMoE's, else a
    channel): attention (all units) plus expert work; ``pim_unit_expert_busy_s`` the expert work
    alone (Figure 10's imbalance). :meth:`nodes` lists the executed nodes of the last measured
    step (:meth:`to_records`, :meth:`to_pandas` as plain dicts or a data frame).

    Fields: ``settings`` (what produced it, as ``to_dict`` starts), ``step_times_s`` and
    ``estimated_step_times_s`` (per measured step [s]), ``layer_time_s`` and
    ``estimated_layer_time_s`` (per layer, mean over the steps [s]), ``experts_on_gpu`` and
    ``experts_on_pim`` (activated experts per layer, summed over GPUs, mean over steps),
    ``busy_s`` (busy time per resource kind and GPU [s]), ``scheduler_us`` (modelled decision
    latency per layer and GPU [us]), ``early_load_bytes`` and ``early_load_wasted_bytes`` (per step
    [bytes]), ``memory_per_gpu_bytes`` (HBM use of the most loaded GPU [bytes]),
    ``wall_decision_us`` and ``wall_step_s`` (the simulator's own wall-clock timings).
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
    #: Energy of a step [J] by resource kind (``gpu_compute``, ``hbm``, ``pim``, ``link``,
    #: ``static``) and ``total``, mean over the measured steps; None without an energy model.
    energy_j: dict[str, float] | None = None
    #: Tokens each decode request emits per step: 1, or with MTP decoding (``mtp_tokens = k``) its
    #: own plus the expected accepted drafts, ``1 + a + ... + a^k`` (``a``: ``mtp_acceptance``).
    tokens_per_request_per_step: float = 1.0

    @property
    def step_time_s(self) -> float:
        """Executed decode step time [s], the mean over the measured steps."""
        return float(np.mean(self.step_times_s))

    @property
    def step_time_std_s(self) -> float:
        """Standard deviation of the executed step time over the measured steps [s] (0 for one step)."""
        return float(np.std(self.step_times_s))

    @property
    def estimated_step_time_s(self) -> float:
        """The policy's own estimate of the step [s] (Equation 1 summed over layers), mean over the steps."""
        return float(np.mean(self.estimated_step_times_s))

    @property
    def throughput_tokens_per_s_per_gpu(self) -> float:
        """Decode tokens per second per GPU: ``B / T_step / G`` (times ``tokens_per_request_per_step``
        with MTP decoding: accepted tokens only)."""
        tokens = self.settings["batch"] * self.tokens_per_request_per_step    # B x 1.0 is B, to the bit
        return tokens / self.step_time_s / self.settings["gpus"]

    @property
    def interactivity_tokens_per_s_per_user(self) -> float:
        """Tokens per second each request sees: ``1 / T_step`` (times ``tokens_per_request_per_step``)."""
        return self.tokens_per_request_per_step / self.step_time_s

    def to_dict(self) -> dict[str, Any]:
        """One flat JSON-ready record: the settings, then the results with their units in their names
        (``step_time_s`` [s], ``throughput_tokens_per_s_per_gpu`` [tokens/s], ``layer_time_s`` [s] per
        layer, ``busy_s`` [s] per resource kind and GPU, ``*_bytes`` [bytes], ``scheduler_us`` [us],
        ...); what ``sievesim run --json`` prints and a sweep row holds."""
        out = dict(self.settings)
        out.update({
            "step_time_s": self.step_time_s,
            "estimated_step_time_s": self.estimated_step_time_s,
            "estimate_over_executed": self.estimated_step_time_s / self.step_time_s,
            "throughput_tokens_per_s_per_gpu": self.throughput_tokens_per_s_per_gpu,
            "interactivity_tokens_per_s_per_user": self.interactivity_tokens_per_s_per_user,
            **({"tokens_per_request_per_step": self.tokens_per_request_per_step}
               if self.tokens_per_request_per_step != 1.0 else {}),
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
        if self.energy_j is not None:
            e = self.energy_j
            out["energy_j"] = e["total"]
            out["energy_breakdown_j"] = {k: v for k, v in e.items() if k != "total"}
            tokens = self.settings["batch"] * self.tokens_per_request_per_step     # accepted tokens (MTP)
            out["tokens_per_joule"] = tokens / e["total"] if e["total"] > 0 else 0.0
            out["average_power_w_per_gpu"] = e["total"] / self.step_time_s / self.settings["gpus"]
        return out

    # ------------------------------------------------------------------ the notebook API
    def nodes(self) -> list[StepNode]:
        """Every executed node of the last measured step, in the order the graph was built: name,
        kind, layer, GPU, micro-batch, resources, start and end [s] and the work it stands for
        (:class:`StepNode`). Empty when the schedule was not kept."""
        return schedule_nodes(self.schedule) if self.schedule is not None else []

    def to_records(self) -> list[dict[str, Any]]:
        """:meth:`nodes` as plain dicts (one per node; ``duration_s`` added), ready for JSON or a data frame."""
        out = []
        for n in self.nodes():
            rec = asdict(n)
            rec["duration_s"] = n.duration_s
            out.append(rec)
        return out

    def to_pandas(self) -> Any:
        """:meth:`to_records` as a ``pandas.DataFrame`` (needs pandas: ``pip install 'sievesim[pandas]'``)."""
        try:
            import pandas as pd
        except ImportError:
            from ..errors import ConfigError
            raise ConfigError("to_pandas needs pandas: pip install 'sievesim[pandas]' "
                              "(or use to_records(), a list of dicts)") from None
        return pd.DataFrame(self.to_records())

    def __repr__(self) -> str:
        s = self.settings
        unit = f"({s['pimoe_unit']})" if s.get("pimoe_unit") else ""
        spread = f" +- {self.step_time_std_s * 1e3:.3f}" if len(self.step_times_s) > 1 else ""
        return (f"<StepResult {s.get('model')} on {s.get('gpus')} x {s.get('hardware')}, policy "
                f"{s.get('policy')}{unit}, B={s.get('batch')}: step {self.step_time_s * 1e3:.3f}{spread} ms "
                f"(estimate {self.estimated_step_time_s * 1e3:.3f} ms), "
                f"{self.throughput_tokens_per_s_per_gpu:.1f} tok/s/GPU, "
                f"{self.interactivity_tokens_per_s_per_user:.1f} tok/s/user; {len(self.step_times_s)} step(s) "
                f"after {s.get('warmup')} warm-up>")
