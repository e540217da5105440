"""What every node function of one step shares (:class:`StepBuild`) and the plain per-layer
contexts they read (:class:`LayerBatch`, :class:`LayerRouting`, :class:`GpuPartition`); the node
functions are :mod:`sievesim.system.figure8`'s. Durations are seconds."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..costs import CostContext
from . import gpu_ops
from .dag import Graph

__all__ = ["StepBuild", "LayerBatch", "LayerRouting", "GpuPartition"]


@dataclass
class StepBuild:
    """What every node function of one step shares: the simulator, the graph being built, the
    step's per-request data, the hardware rates, and the step's accumulators."""

    sim: Any                        # the StepSimulator (its model, hardware, policy, engine times)
    graph: Graph
    ids: np.ndarray | None          # routing ids (T, L_moe, K), or None for a count-only source
    counts_all: np.ndarray          # (L_moe, E) tokens per expert of the whole step
    owner: np.ndarray               # owner GPU of each token row
    mb_rows: list[np.ndarray]       # rows of each micro-batch
    ctx_lens: np.ndarray            # decode context lengths [tokens]
    flops_s: float                  # GPU FLOP/s (peak x efficiency)
    bytes_s: float                  # GPU HBM bytes/s (peak x efficiency)
    link_bw: float                  # bytes/s per direction
    link_lat: float                 # s
    dynamic: bool                   # the policy decides at run time (its decision has a latency)
    gm: Any = None                  # the GPU model (sievesim.costs.gpu_model) pricing GPU and link nodes
    # accumulators
    prev: dict[tuple[int, int], int] = field(default_factory=dict)      # last node of (micro-batch, GPU)
    layer_est: np.ndarray = field(default=None)                         # Equation-1 estimate per layer [s]
    n_gpu_exp: np.ndarray = field(default=None)
    n_pim_exp: np.ndarray = field(default=None)
    agg_nodes: list[list[int]] = field(default_factory=list)            # last nodes of each layer
    embedding_nodes: list[int] = field(default_factory=list)            # every GPU's embedding node
    observed: dict[str | None, list[np.ndarray]] = field(default_factory=lambda: {None: []})
    attn_ratio: dict[str, list[float]] = field(default_factory=dict)    # engine / roofline attention
    unit_attention_nodes: list[tuple[int, int]] = field(default_factory=list)
    unit_expert_nodes: list[tuple[int, int, np.ndarray | None]] = field(default_factory=list)
    decisions: int = 0
    wall_decide: float = 0.0
    decision_s: float = 0.0                                             # modelled latencies, summed [s]
    early_load_bytes: float = 0.0
    early_load_wasted_bytes: float = 0.0                                # loaded early, then run on PIM
    memo: dict[tuple, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        layers = self.sim.model.num_layers
        self.layer_est = np.zeros(layers)
        self.n_gpu_exp = np.zeros(layers)
        self.n_pim_exp = np.zeros(layers)
        self.agg_nodes = [[] for _ in range(layers)]
        gpus = range(self.sim.gpus)
        # each GPU's resource tuples, built once (every node names one of them)
        self.r_gpu_hbm = [self.res(g, "gpu", "hbm") for g in gpus]
        self.r_gpu = [self.res(g, "gpu") for g in gpus]
        self.r_hbm = [self.res(g, "hbm") for g in gpus]
        self.r_pim = [self.res(g, "pim") for g in gpus]
        self.r_link = [self.res(g, "tx", "rx") for g in gpus]

    def res(self, g: int, *kinds: str) -> tuple[str, ...]:
        """Resource names of GPU ``g`` (``g0.gpu``, ``g0.hbm``, ``g0.pim``, ``g0.tx``, ``g0.rx``)."""
        names = self.sim._resource_names
        key = (g, kinds)
        out = names.get(key)
        if out is None:
            out = names[key] = tuple(f"g{g}.{k}" for k in kinds)
        return out

    def roof(self, work: gpu_ops.GpuWork) -> float:
        """GPU roofline time [s] of ``work`` (the estimates beside the executed graph)."""
        return gpu_ops.roofline_s(work, self.sim.hw)

    @property
    def roofline(self) -> bool:    # the paper's GPU model: its expressions are kept as they were
        return self.gm.name == "roofline"

    def kernel(self, work: gpu_ops.GpuWork, kind: str, tensor_core: str = "bf16") -> float:
        """Duration [s] of a GPU node of ``kind`` doing ``work``, under the step's GPU model."""
        return gpu_ops.roofline_s(work, self.sim.hw) if self.roofline else self.gm.kernel_s(work, kind, tensor_core)

    def work(self, work: gpu_ops.GpuWork) -> dict[str, float]:
        """Node metadata of GPU work: its FLOPs and HBM bytes (``nodes()``, the Chrome trace)."""
        return {"flops": float(work.flops), "bytes": float(work.bytes)}

    def engine_cycles(self, seconds: float) -> int:
        """Engine time [s] of a PIM node in memory command-clock cycles (tCK)."""
        tck = self.memo.get(("tck",))
        if tck is None:
            tck = self.memo[("tck",)] = self.sim.engine_times.device._base.tck_ns * 1e-9
        return int(round(seconds / tck))

    def cached_work(self, key: tuple, fn: Callable[[], gpu_ops.GpuWork], kind: str,
                    tensor_core: str = "bf16") -> tuple[float, dict[str, float]]:
        """GPU work that repeats across the layers of one kind, computed once per step: its
        time [s] as a node of ``kind`` (:meth:`kernel`) and its node metadata (:meth:`work`)."""
        value = self.memo.get(key)
        if value is None:
            work = fn()
            value = self.memo[key] = (self.kernel(work, kind, tensor_core), self.work(work))
        return value

    def cached(self, key: tuple, fn: Callable[[], float]) -> float:
        """A duration that repeats across the layers of one kind, computed once per step."""
        value = self.memo.get(key)
        if value is None:
            value = self.memo[key] = fn()
        return value


@dataclass
class LayerBatch:
    """One micro-batch of one layer: which rows, and per GPU its tokens, decode contexts and prompts."""

    layer: int
    kind: str                       # attention kind of the layer
    is_moe: bool
    mb: int                         # micro-batch index
    rows: np.ndarray                # token rows of the micro-batch
    own: np.ndarray                 # owner GPU of each row
    tokens_g: list[int]             # tokens per GPU (decode requests + prefill tokens)
    lens_g: list[np.ndarray]        # decode context lengths per GPU [tokens]
    pf_g: list[list[int]]           # prefill prompt lengths per GPU [tokens]


@dataclass
class LayerRouting:
    """The routing of one MoE layer's micro-batch and the link times it implies."""

    counts: np.ndarray              # (E,) tokens per expert
    lid: np.ndarray | None          # (rows, K) expert ids, or None
    send: np.ndarray                # token vectors each GPU sends (dispatch)
    recv: np.ndarray                # token vectors each GPU receives
    comm_ag: float                  # AllGather time in the policy's T_comm [s]
    t_disp: list[float]             # dispatch (and combine) time per GPU [s]
    own_counts: np.ndarray | None   # (G, E) tokens of each GPU's own requests per expert (early loads)
    mb_tokens: int                  # tokens of the micro-batch over all GPUs


@dataclass
class GpuPartition:
    """The policy's split of one GPU's activated experts at one layer."""

    counts: np.ndarray              # (E/G,) tokens per local expert
    on_gpu: np.ndarray              # bool mask of activated experts on the GPU
    on_pim: np.ndarray              # bool mask of activated experts on PIM
    n_gpu: int
    n_pim: int
    gpu_tokens: float               # tokens of the GPU experts
    part: Any                       # the policy's Partition (its unit and unit_of for PIMoE)
    ctx: CostContext                # the policy's cost context (its estimate of every term)
    decision_s: float               # modelled latency of the decision [s]
