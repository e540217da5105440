"""The two GPU models that price the GPU's kernels and the links' collectives of a step (seconds).

* ``"roofline"``: the Sieve paper's (Duplex's): every op takes ``max(flops / peak, bytes / bw)``
  at the BF16 peak and the full bandwidth (``compute_efficiency`` and ``memory_efficiency`` of the
  hardware, 1.0 in every preset), a link transfer ``latency + bytes / bandwidth``, no fixed costs.
  ``sievesim reproduce`` uses it; its numbers are the paper's reading, bit for bit.
* ``"calibrated"``: each kernel from its shape on a real GPU: a fixed cost per kernel launched (a
  CUDA graph's launch gap, and the kernel's ramp and tail), the bandwidth a memory-bound kernel reaches and the FLOP/s a
  GEMM reaches as shares of the peaks, the tensor-core peak of the format it computes in, M-tile
  padding in the grouped GEMM, decode attention at its own achieved bandwidth, collectives on
  measured latency + size curves, and a serving engine's per-iteration overhead. Every constant is
  a hardware field with its published source (docs/hardware.md); ``sievesim calibrate`` fits them
  to a user's own measurements.

Both are built from a :class:`~sievesim.hardware.HardwareSpec` by :func:`gpu_model`; the step
(:mod:`sievesim.system.figure8`) asks its model for every GPU and link node's duration.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import field_error
from .gpu import GpuWork

__all__ = ["GPU_MODELS", "DEFAULT_GPU_MODEL", "DISPATCH_MODES", "check_dispatch", "KERNELS_PER_NODE", "attention_node_kind", "GpuModel", "RooflineGpuModel",
           "CalibratedGpuModel", "gpu_model", "check_gpu_model_name"]

#: The GPU models, by name.
GPU_MODELS: tuple[str, ...] = ("roofline", "calibrated")
#: The model ``run``, ``serve`` and ``sweep`` use unless told otherwise (``reproduce``: roofline).
DEFAULT_GPU_MODEL = "calibrated"

#: DeepEP's dispatch/combine kernels across nodes: pure RDMA once per GPU (the default: what decode
#: deployments run, CUDA-graph compatible) or once per node, forwarded over NVLink (docs/hardware.md).
DISPATCH_MODES: tuple[str, ...] = ("low-latency", "normal")


def check_dispatch(mode: Any, field: str = "dispatch") -> str:
    """``mode`` if it is one of :data:`DISPATCH_MODES`, else a clear error."""
    if not isinstance(mode, str) or mode not in DISPATCH_MODES:
        raise field_error(field, mode, f"one of {list(DISPATCH_MODES)} (DeepEP's pure-RDMA low-latency kernels, "
                                       "or its normal kernels: once per node, forwarded over NVLink)")
    return mode


#: Kernels one node of Figure 8's graph launches in a decode step, counted in vLLM's model code
#: (``qwen3_moe.py``, ``gpt_oss.py``, ``deepseek_v2.py``'s ``DeepseekV2MLAAttention.forward`` and its
#: MLA decode path, ``qwen3_next.py``; CUDA-graph replay; docs/hardware.md): each pays
#: ``kernel_launch_s + kernel_ramp_s`` under the calibrated model. ``NODE.KIND`` is the count for
#: one attention kind where it differs.
KERNELS_PER_NODE: dict[str, int] = {
    "embedding": 1,          # embedding gather
    "pre_attention": 4,      # fused residual-add + RMSNorm, QKV GEMM, RoPE, KV-cache write
    "pre_attention.qk_norm": 6,      # ... + q and k RMSNorms (Qwen3)
    "pre_attention.mla": 8,  # fused add + RMSNorm, fused q_a/kv_a GEMM, q_a and kv_a RMSNorms, q_b GEMM,
                             # RoPE, absorbed W_UK batched GEMM, latent-cache write
    "pre_attention.linear": 4,       # fused add + RMSNorm, two input projections, causal convolution
    "attention": 1,          # decode attention (FlashInfer / FlashMLA / FlashAttention; the recurrence)
    "prefill_attention": 1,  # prefill attention of the chunk
    "post_attention": 3,     # O-proj GEMM, fused residual-add + RMSNorm, router GEMM
    "post_attention.mla": 4,         # ... + absorbed W_UV batched GEMM
    "post_attention.linear": 4,      # ... + gated RMSNorm
    "dense_mlp": 3,          # gate/up GEMM, SiLU-and-mul, down GEMM
    "metadata": 2,           # top-k softmax, token sort by expert (moe_align_block_size)
    "shared_gemm": 3,        # shared expert: gate/up GEMM, SiLU-and-mul, down GEMM
    "gemm": 3,               # fused MoE: grouped gate/up GEMM, SiLU-and-mul, grouped down GEMM
    "aggregate": 1,          # weighted sum of the experts' outputs (moe_sum)
    "lm_head": 2,            # final RMSNorm, LM-head GEMM (sampling: the step overhead)
    "pim_attention": 1,      # the PIM attention program, launched by the GPU
    "pim_experts": 2,        # the PIM experts' gate/up and down GEMV programs
}


def attention_node_kind(node: str, attention_kind: str, qk_norm: bool = False) -> str:
    """The :data:`KERNELS_PER_NODE` key of a pre- or post-attention node of an attention kind."""
    if attention_kind in ("mla", "linear") and f"{node}.{attention_kind}" in KERNELS_PER_NODE:
        return f"{node}.{attention_kind}"
    if qk_norm and f"{node}.qk_norm" in KERNELS_PER_NODE:
        return f"{node}.qk_norm"
    return node


def check_gpu_model_name(name: Any, field: str = "gpu_model") -> str:
    """``name`` if it is one of :data:`GPU_MODELS` (case-insensitive), else a clear error."""
    key = name.strip().lower() if isinstance(name, str) else None
    if key not in GPU_MODELS:
        raise field_error(field, name, f"one of {list(GPU_MODELS)} (the paper's roofline, or the GPU "
                                       "calibrated on published kernel measurements)")
    return key


class GpuModel:
    """What the step asks of a GPU model (seconds; bytes; FLOPs). Subclasses set the rates."""

    name = ""
    #: FLOP/s of the routed experts' GEMMs; bytes/s of weight streaming (what Equation 1 sees).
    expert_flops_s: float
    stream_bytes_s: float

    def __init__(self, hardware: Any, dispatch: str = "low-latency") -> None:
        self.hw = hardware
        #: DeepEP's kernels across nodes (:data:`DISPATCH_MODES`).
        self.dispatch = check_dispatch(dispatch)

    def kernel_s(self, work: GpuWork, kind: str, tensor_core: str = "bf16") -> float:
        """One graph node of GPU work (``kind`` as in :data:`KERNELS_PER_NODE`)."""
        raise NotImplementedError

    def attention_s(self, work: GpuWork) -> float:
        """Decode attention on the GPU (the GPU-only reference)."""
        raise NotImplementedError

    def grouped_gemm_s(self, tokens: np.ndarray, flops_per_token: float, io_bytes_per_token: float) -> float:
        """Compute of a grouped GEMM over experts with ``tokens[i]`` tokens each (weights apart)."""
        raise NotImplementedError

    def grouped_gemm_rows_s(self, tokens: np.ndarray, flops_per_token: float, io_bytes_per_token: float) -> np.ndarray:
        """:meth:`grouped_gemm_s` of each row of ``tokens`` (one grouped GEMM per row; a 0 is an
        expert not in it)."""
        return np.array([self.grouped_gemm_s(row[row > 0], flops_per_token, io_bytes_per_token)
                         for row in np.asarray(tokens)], dtype=np.float64)

    def fixed_s(self, kind: str) -> float:
        """Fixed cost of a node of ``kind`` (0 for the roofline)."""
        return 0.0

    def allgather_s(self, bytes_per_gpu: float, gpus: int) -> float:
        """All-gather in which each GPU contributes ``bytes_per_gpu``."""
        raise NotImplementedError

    def alltoall_s(self, num_bytes: float) -> float:
        """Time [s] of a dispatch or combine in which this GPU sends (and receives) ``num_bytes``
        (a number, or an array of them for every GPU at once: an array of times)."""
        raise NotImplementedError

    def allreduce_s(self, num_bytes: float, gpus: int) -> float:
        """All-reduce of ``num_bytes`` per GPU (tensor-parallel attention)."""
        raise NotImplementedError

    def dispatch_s(self, intra_bytes: float, inter_bytes: float) -> float:
        """A dispatch or combine over two levels: ``intra_bytes`` over NVLink to GPUs of this GPU's
        node and ``inter_bytes`` over its NIC to the other nodes, both at once (in either mode: the
        normal kernels' volumes differ, :mod:`sievesim.system.routing_volumes`, not the line rates)."""
        intra = self.alltoall_s(intra_bytes) if intra_bytes > 0 else 0.0
        return max(intra, self.scaleout_s(inter_bytes) if inter_bytes > 0 else 0.0)

    def scaleout_s(self, num_bytes: float) -> float:
        """``num_bytes`` sent by one GPU over the scale-out network in a dispatch or combine."""
        raise NotImplementedError

    def _scaleout(self) -> tuple[float, float]:
        """The scale-out network's line rate [bytes/s] and latency [s]."""
        link = self.hw.interconnect
        if link.scaleout_bandwidth_bytes_per_s_per_direction is None or link.scaleout_latency_s is None:
            raise field_error("interconnect.scaleout_bandwidth_bytes_per_s_per_direction", None,
                              "a scale-out network for GPUs in more than one node (docs/hardware.md, 'Nodes')")
        return float(link.scaleout_bandwidth_bytes_per_s_per_direction), float(link.scaleout_latency_s)

    def _nodes(self, gpus: int) -> int:
        return self.hw.interconnect.nodes(gpus)

    def step_overhead_s(self, requests: int) -> float:
        """Serving engine's time per iteration of ``requests`` requests beside the GPU's kernels."""
        return 0.0

    def describe(self) -> dict[str, Any]:
        """The model's name and constants (what every output records)."""
        return {"name": self.name}


class RooflineGpuModel(GpuModel):
    """The Sieve paper's GPU (Duplex's roofline; see the module docstring)."""

    name = "roofline"

    def __init__(self, hardware: Any, dispatch: str = "low-latency") -> None:
        super().__init__(hardware, dispatch)
        gpu = hardware.gpu
        self._flops = gpu.peak_flops_bf16 * gpu.compute_efficiency
        self._bytes = gpu.hbm_bandwidth_bytes_per_s * gpu.memory_efficiency
        self.expert_flops_s = self._flops
        self.stream_bytes_s = self._bytes
        self.attention_bytes_s = self._bytes
        link = hardware.interconnect
        self._link_bw = float(link.bandwidth_bytes_per_s_per_direction)
        self._link_lat = float(link.latency_s)

    def kernel_s(self, work: GpuWork, kind: str, tensor_core: str = "bf16") -> float:
        return max(work.flops / self._flops, work.bytes / self._bytes)

    def attention_s(self, work: GpuWork) -> float:
        return max(work.flops / self._flops, work.bytes / self._bytes)

    def grouped_gemm_s(self, tokens: np.ndarray, flops_per_token: float, io_bytes_per_token: float) -> float:
        total = float(np.add.reduce(tokens))
        return max(flops_per_token * total / self._flops, io_bytes_per_token * total / self._bytes)

    def allgather_s(self, bytes_per_gpu: float, gpus: int) -> float:
        nodes = self._nodes(gpus)
        if nodes > 1:   # NVLink inside the node, the NIC for the other nodes' maps, at once
            bw, lat = self._scaleout()
            per = gpus // nodes
            return max(self._link_lat + (per - 1) * bytes_per_gpu / self._link_bw,
                       lat + (gpus - per) * bytes_per_gpu / bw)
        return self._link_lat + (gpus - 1) * bytes_per_gpu / self._link_bw if gpus > 1 else 0.0

    def alltoall_s(self, num_bytes: float) -> float:
        return self._link_lat + num_bytes / self._link_bw

    def scaleout_s(self, num_bytes: float) -> float:
        bw, lat = self._scaleout()
        return lat + num_bytes / bw

    def allreduce_s(self, num_bytes: float, gpus: int) -> float:
        """A ring all-reduce at the link's bandwidth: ``latency + 2 (G-1)/G x bytes / bw`` (the NIC's
        when the GPUs span nodes)."""
        if gpus <= 1:
            return 0.0
        if self._nodes(gpus) > 1:
            bw, lat = self._scaleout()
            return lat + 2.0 * (gpus - 1) / gpus * num_bytes / bw
        return self._link_lat + 2.0 * (gpus - 1) / gpus * num_bytes / self._link_bw


class CalibratedGpuModel(GpuModel):
    """Kernels priced from their shape on a real GPU (see the module docstring; every constant is a
    hardware field: ``kernel_launch_s``, ``kernel_bandwidth_fraction``, ``kernel_flops_fraction``,
    ``attention_bandwidth_fraction``, ``gemm_tile_tokens``, ``step_overhead_s``, the format peaks,
    and the interconnect's collective curves)."""

    name = "calibrated"

    def __init__(self, hardware: Any, expert_tensor_core: str = "bf16", dispatch: str = "low-latency") -> None:
        super().__init__(hardware, dispatch)
        gpu = hardware.gpu
        missing = gpu.calibration_missing()
        if missing:
            raise field_error(f"gpu.{missing[0]}", None, f"a value for the calibrated GPU model (hardware "
                              f"{hardware.name!r} also lacks: {', '.join(missing[1:]) or 'nothing else'}); "
                              "set them in a hardware file with base = a preset, or use --gpu-model roofline")
        self._gpu = gpu
        self._launch = float(gpu.kernel_launch_s) + float(gpu.kernel_ramp_s)
        # the roofline's efficiencies (1.0 in every preset) scale the peaks under both models, so
        # that an edited hardware file means the same thing to both
        self._flops_fraction = float(gpu.kernel_flops_fraction) * gpu.compute_efficiency
        bw = gpu.hbm_bandwidth_bytes_per_s * gpu.memory_efficiency
        self.stream_bytes_s = bw * float(gpu.kernel_bandwidth_fraction)
        self.attention_bytes_s = bw * float(gpu.attention_bandwidth_fraction)
        self._tile = int(gpu.gemm_tile_tokens)
        self.expert_flops_s = self.flops_s(expert_tensor_core)
        self._link = hardware.interconnect

    def flops_s(self, tensor_core: str = "bf16") -> float:
        """FLOP/s a large GEMM reaches in a format's tensor-core class."""
        return self._gpu.peak_flops(tensor_core) * self._flops_fraction

    def fixed_s(self, kind: str) -> float:
        return KERNELS_PER_NODE[kind] * self._launch

    def kernel_s(self, work: GpuWork, kind: str, tensor_core: str = "bf16") -> float:
        return self.fixed_s(kind) + max(work.flops / self.flops_s(tensor_core), work.bytes / self.stream_bytes_s)

    def attention_s(self, work: GpuWork) -> float:
        return self.fixed_s("attention") + max(work.flops / self.flops_s("bf16"), work.bytes / self.attention_bytes_s)

    def grouped_gemm_s(self, tokens: np.ndarray, flops_per_token: float, io_bytes_per_token: float) -> float:
        """Tensor cores compute whole M tiles: an expert with ``t`` tokens costs ``ceil(t / tile)``
        tiles' FLOPs; activations move at the streaming bandwidth."""
        t = np.asarray(tokens, dtype=np.float64)
        padded = float(np.add.reduce(np.ceil(t / self._tile))) * self._tile
        total = float(np.add.reduce(t))
        return max(flops_per_token * padded / self.expert_flops_s, io_bytes_per_token * total / self.stream_bytes_s)

    def grouped_gemm_rows_s(self, tokens: np.ndarray, flops_per_token: float, io_bytes_per_token: float) -> np.ndarray:
        """:meth:`grouped_gemm_s` of every row at once (the same floats: the tiles and tokens summed
        are whole numbers, exact in any order)."""
        t = np.asarray(tokens, dtype=np.float64)
        padded = np.add.reduce(np.ceil(t / self._tile), axis=1) * self._tile
        total = np.add.reduce(t, axis=1)
        return np.maximum(flops_per_token * padded / self.expert_flops_s, io_bytes_per_token * total / self.stream_bytes_s)

    def allgather_s(self, bytes_per_gpu: float, gpus: int) -> float:
        """An all-gather on the all-reduce curve: its latency, and ``(G-1) x bytes`` at the bus
        bandwidth (across nodes: the other nodes' maps over the NIC at the same time)."""
        if gpus <= 1:
            return 0.0
        link = self._link
        link._need_collectives("allreduce_latency_s", "allreduce_bandwidth_bytes_per_s")
        lat = max(link.allreduce_latency_s, link.latency_s)
        nodes = self._nodes(gpus)
        per = gpus // nodes
        inside = lat + (per - 1) * bytes_per_gpu / link.collective_bandwidth("allreduce") if per > 1 else 0.0
        if nodes > 1:
            bw, s_lat = self._scaleout()
            return max(inside, max(lat, s_lat) + (gpus - per) * bytes_per_gpu / bw)
        return inside

    def alltoall_s(self, num_bytes: float) -> float:
        return self._link.alltoall_time_s(num_bytes)

    def _scaleout_curve(self) -> tuple[float, float]:
        """DeepEP's measured RDMA curve (``scaleout_alltoall_*``): its fixed time [s] (at least the
        network's latency) and bandwidth [bytes/s] (at most the NIC's line rate)."""
        link = self._link
        bw, lat = self._scaleout()
        if link.scaleout_alltoall_latency_s is None or link.scaleout_alltoall_bandwidth_bytes_per_s is None:
            raise field_error("interconnect.scaleout_alltoall_bandwidth_bytes_per_s", None,
                              "a measured dispatch/combine over the scale-out network for the calibrated GPU model "
                              "(docs/hardware.md, 'Nodes')")
        return max(link.scaleout_alltoall_latency_s, lat), min(link.scaleout_alltoall_bandwidth_bytes_per_s, bw)

    def scaleout_s(self, num_bytes: float) -> float:
        lat, bw = self._scaleout_curve()
        return lat + num_bytes / bw

    def dispatch_s(self, intra_bytes: float, inter_bytes: float) -> float:
        """One dispatch kernel moving data over NVLink and the NIC at once: its fixed time once (the
        larger of the two curves'), then the slower of the two transfers. The normal kernels move
        theirs at DeepEP's normal-kernel bandwidths (``forwarded_alltoall_bandwidth_bytes_per_s``,
        ``scaleout_forwarded_bandwidth_bytes_per_s``, at most the line rates) after the same fixed
        time: DeepEP publishes none for them, so it is a lower bound."""
        link = self._link
        s_lat, s_bw = self._scaleout_curve()
        lat = max(link.alltoall_latency_s, link.latency_s, s_lat)
        if self.dispatch == "normal":
            nvl, rdma = self._forwarded()
            return lat + max(intra_bytes / nvl, inter_bytes / rdma)
        return lat + max(intra_bytes / link.collective_bandwidth("alltoall"), inter_bytes / s_bw)

    def _forwarded(self) -> tuple[float, float]:
        """The normal kernels' NVLink and RDMA bandwidths [bytes/s], each at most its line rate."""
        link = self._link
        for f in ("forwarded_alltoall_bandwidth_bytes_per_s", "scaleout_forwarded_bandwidth_bytes_per_s"):
            if getattr(link, f) is None:
                raise field_error(f"interconnect.{f}", None, "a measured bandwidth of DeepEP's normal kernels for "
                                  "dispatch 'normal' under the calibrated GPU model (docs/hardware.md, 'Nodes')")
        return (min(link.forwarded_alltoall_bandwidth_bytes_per_s, link.bandwidth_bytes_per_s_per_direction),
                min(link.scaleout_forwarded_bandwidth_bytes_per_s, self._scaleout()[0]))

    def allreduce_s(self, num_bytes: float, gpus: int) -> float:
        """On the measured NCCL curve; across nodes its latency and the NIC's line rate bound it."""
        if gpus > 1 and self._nodes(gpus) > 1:
            link = self._link
            bw, lat = self._scaleout()
            link._need_collectives("allreduce_latency_s", "allreduce_bandwidth_bytes_per_s")
            return (max(link.allreduce_latency_s, lat)
                    + 2.0 * (gpus - 1) / gpus * num_bytes / min(link.collective_bandwidth("allreduce"), bw))
        return self._link.allreduce_time_s(num_bytes, gpus)

    def step_overhead_s(self, requests: int) -> float:
        return float(self._gpu.step_overhead_s_per_request) * requests

    def describe(self) -> dict[str, Any]:
        gpu, link = self._gpu, self._link
        out: dict[str, Any] = {"name": self.name}
        from ..hardware.spec import COLLECTIVE_FIELDS, GPU_KERNEL_FIELDS
        out.update({f: getattr(gpu, f) for f in GPU_KERNEL_FIELDS})
        out.update({f: getattr(link, f) for f in COLLECTIVE_FIELDS if getattr(link, f) is not None})
        return out


def gpu_model(name: str, hardware: Any, expert_tensor_core: str = "bf16", dispatch: str = "low-latency") -> GpuModel:
    """The GPU model called ``name`` (:data:`GPU_MODELS`) on ``hardware``, its dispatch across nodes
    by DeepEP's ``dispatch`` kernels (:data:`DISPATCH_MODES`)."""
    key = check_gpu_model_name(name)
    if key == "roofline":
        return RooflineGpuModel(hardware, dispatch)
    return CalibratedGpuModel(hardware, expert_tensor_core, dispatch)
