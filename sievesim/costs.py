"""Cost estimates that the expert-partitioning policies use (paper Section 5, Equation 1).

These are the scheduler's *estimates*; the executed times come later from the engine and the
layer DAG. Everything here is plain arithmetic on numbers taken from the model and hardware
specs, so this module never imports the engine (``sievesim._core``) or ``sievesim.dram``.

For one MoE layer on one GPU, with ``E`` the experts of that GPU that received tokens,
``S`` the subset run on its HBM-PIM and ``G = E - S`` the subset run on the GPU::

    T_total(S) = max(T_comm, T_GPU(G), T_PIM(S))
    T_GPU(G)   = max(T_offchip(G), T_comp(G))
    T_PIM(S)   = T_attention + sum_{e in S} t_pim(n_e)                 (tensor-parallel PIM)
               = T_attention + max_u sum_{e in S on unit u} t_unit(n_e)  (expert-parallel PIM)

* ``T_comm``: AllGather of routing maps + dispatch + combine over the interconnect, from the
  routing only (independent of ``S``).
* ``T_offchip(G)``: bytes moved between HBM and the GPU: the layer's non-MoE weights and
  activations, the weights of every expert in ``G`` once (grouped GEMM), and the activations
  of every (token, expert) pair in ``G``; divided by the effective HBM bandwidth.
* ``T_comp(G)``: the layer's non-MoE FLOPs plus ``2 * params_per_expert * tokens(G)``,
  divided by the effective peak.
* ``t_pim(n)``: a :class:`PimCostModel` (roofline :class:`RooflinePimCost`, or the EMA
  :class:`PimCostTable` fed by the engine), which also prices decode attention on PIM.

All times are in seconds, sizes in bytes, rates in FLOP/s and bytes/s.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Hashable, Protocol, Sequence, runtime_checkable

import numpy as np

from ._units import BASE_UNITS, split_unit
from .errors import ConfigError, field_error

__all__ = [
    "DEFAULT_CONTEXT_LEN",
    "UNITS",
    "PimOrganisation",
    "PimCostModel",
    "AttentionShape",
    "RooflinePimCost",
    "PimCostTable",
    "GpuWork",
    "CommBreakdown",
    "CostBreakdown",
    "CostContext",
    "gpu_roofline_time_s",
    "comm_time_s",
    "dispatch_pairs_from_routing",
    "attention_shape",
    "non_moe_work",
    "validate_counts",
    "moe_layer_index",
    "pim_organisation",
    "build_context",
]

#: Context length [tokens] of every request when a command is given none (one default everywhere).
DEFAULT_CONTEXT_LEN = 4096

#: Placement units of expert-parallel PIM (PIMoE), from the finest to the coarsest. A group of ``S``
#: of them is written ``"BASE*S"`` (``"channel*4"``; :func:`sievesim._units.split_unit`).
UNITS: tuple[str, ...] = BASE_UNITS


# --------------------------------------------------------------------------------------------
# PIM organisation and cost models
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PimOrganisation:
    """How the PIM of one GPU is divided (default: B200, 8 HBM3E stacks x 16 channels x 2 PCs)."""

    stacks: int = 8
    channels_per_stack: int = 16
    pseudo_channels_per_channel: int = 2

    def __post_init__(self) -> None:
        for name in ("stacks", "channels_per_stack", "pseudo_channels_per_channel"):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or value < 1:
                raise field_error(f"pim organisation {name}", value, "a positive integer")

    def base_count(self, base: str) -> int:
        """Number of base units (``"pseudo_channel"``, ``"channel"``, ``"stack"``) in one GPU's PIM."""
        if base == "stack":
            return self.stacks
        if base == "channel":
            return self.stacks * self.channels_per_stack
        if base == "pseudo_channel":
            return self.stacks * self.channels_per_stack * self.pseudo_channels_per_channel
        raise field_error("unit", base, f"one of {', '.join(UNITS)}")

    def count(self, unit: str) -> int:
        """Number of placement units of kind ``unit`` in the PIM of one GPU: a base unit, or a group
        ``"BASE*S"`` of ``S`` base units (``count("channel*4")`` = channels / 4; ``S`` must divide
        the number of base units)."""
        base, span = split_unit(unit)
        n = self.base_count(base)
        if n % span:
            raise field_error("unit", unit, f"a group size that divides the GPU's {n} {base}s")
        return n // span


@runtime_checkable
class PimCostModel(Protocol):
    """PIM time estimates of one GPU's HBM-PIM (all its stacks), in seconds."""

    def expert_time_s(self, tokens: int) -> float:
        """One routed expert with ``tokens`` tokens, tensor-parallel across all PIM channels."""
        ...

    def expert_time_on_unit_s(self, tokens: int, unit: str) -> float:
        """One routed expert with ``tokens`` tokens confined to one placement ``unit``
        (``"pseudo_channel"``, ``"channel"``, ``"stack"`` or a group ``"BASE*S"`` of them)."""
        ...

    def attention_time_s(self, batch_context_lens: Sequence[int]) -> float:
        """Decode attention of this GPU's requests (one context length each) at this layer."""
        ...


@dataclass(frozen=True)
class AttentionShape:
    """FLOPs of decode attention of one request at one layer.

    ``flops(L) = flops_per_context_token * min(L, window) + fixed_flops_per_request``;
    ``window=None`` means full attention, linear attention (Gated-DeltaNet) has
    ``flops_per_context_token = 0`` and a fixed state update/readout cost. ``chunk`` (chunked
    attention, Llama 4) replaces ``L`` by the tokens of the current chunk, ``(L - 1) % chunk + 1``.
    """

    flops_per_context_token: float = 0.0
    window: int | None = None
    fixed_flops_per_request: float = 0.0
    chunk: int | None = None

    def total_flops(self, batch_context_lens: Sequence[int] | np.ndarray | int) -> float:
        """Summed FLOPs over the requests whose context lengths are given (tokens)."""
        lens = np.asarray(batch_context_lens, dtype=np.float64).reshape(-1)
        if lens.size == 0:
            return 0.0
        if np.any(lens < 0):
            raise field_error("context length", int(lens.min()), "a non-negative number of tokens")
        if self.window is not None:
            lens = np.minimum(lens, float(self.window))
        if self.chunk:
            lens = np.where(lens > 0, np.mod(lens - 1, float(self.chunk)) + 1, 0.0)
        return float(self.flops_per_context_token * lens.sum()
                     + self.fixed_flops_per_request * lens.size)


class RooflinePimCost:
    """Roofline PIM estimate: ``ops / PIM peak`` (paper Section 5, the cost table's fallback).

    An expert with ``n`` tokens runs as ``n`` GEMVs over its weights: ``n * expert_flops_per_token``
    FLOPs at ``pim_peak_flops`` (all stacks of one GPU). Confined to one placement unit it gets
    that unit's share of the peak (``pim_peak_flops / organisation.count(unit)``).

    Parameters
    ----------
    expert_flops_per_token:
        ``2 * params_per_expert`` [FLOP].
    pim_peak_flops:
        Peak PIM throughput of one GPU's stacks [FLOP/s].
    attention:
        Decode-attention FLOPs per request at this layer.
    organisation:
        Units of the PIM (for expert-parallel placement).
    """

    def __init__(self, expert_flops_per_token: float, pim_peak_flops: float,
                 attention: AttentionShape | None = None,
                 organisation: PimOrganisation | None = None) -> None:
        if not (expert_flops_per_token >= 0 and math.isfinite(expert_flops_per_token)):
            raise field_error("expert_flops_per_token", expert_flops_per_token, "a finite number >= 0")
        if not (pim_peak_flops > 0 and math.isfinite(pim_peak_flops)):
            raise field_error("pim_peak_flops", pim_peak_flops, "a finite number > 0 [FLOP/s]")
        self.expert_flops_per_token = float(expert_flops_per_token)
        self.pim_peak_flops = float(pim_peak_flops)
        self.attention = attention or AttentionShape()
        self.organisation = organisation or PimOrganisation()

    def expert_time_s(self, tokens: int) -> float:
        return tokens * self.expert_flops_per_token / self.pim_peak_flops

    def expert_time_on_unit_s(self, tokens: int, unit: str) -> float:
        return tokens * self.expert_flops_per_token * self.organisation.count(unit) / self.pim_peak_flops

    def attention_time_s(self, batch_context_lens: Sequence[int]) -> float:
        return self.attention.total_flops(batch_context_lens) / self.pim_peak_flops

    def expert_times_s(self, max_tokens: int) -> np.ndarray:
        """``expert_time_s(n)`` for ``n = 0..max_tokens`` as one array (fast path)."""
        return np.arange(max_tokens + 1, dtype=np.float64) * (self.expert_flops_per_token / self.pim_peak_flops)


class PimCostTable:
    """Runtime PIM cost table (paper Section 5): key ``(shape, token count)``, value = time [s].

    ``update(key, observed_s)`` folds an observed engine time into the entry by an exponential
    moving average ``new = (1 - alpha) * old + alpha * observed``; the first observation of a key
    replaces the fallback outright (the roofline is only a one-time fallback). Unseen keys fall
    back to ``fallback`` (e.g. :class:`RooflinePimCost`).

    As a :class:`PimCostModel` it looks up ``(expert_shape, n)`` for tensor-parallel experts,
    ``((expert_shape, unit), n)`` for an expert on one unit, and
    ``(attention_shape, sum of context lengths)`` for attention (then falls back).
    """

    def __init__(self, fallback: PimCostModel, alpha: float = 0.5,
                 expert_shape: Hashable = "expert", attention_shape: Hashable = "attention") -> None:
        if not (0.0 < alpha <= 1.0):
            raise field_error("alpha", alpha, "a smoothing factor in (0, 1]")
        self.fallback = fallback
        self.alpha = float(alpha)
        self.expert_shape = expert_shape
        self.attention_shape = attention_shape
        self._table: dict[tuple[Hashable, int], float] = {}
        #: Incremented by every update, so that callers can cache derived arrays.
        self.version = 0

    def __len__(self) -> int:
        return len(self._table)

    def __contains__(self, key: object) -> bool:
        return key in self._table

    def get(self, key: tuple[Hashable, int]) -> float | None:
        """The observed (smoothed) time of ``key``, or ``None`` when it was never observed."""
        return self._table.get(key)

    def update(self, key: tuple[Hashable, int], observed_s: float) -> float:
        """Fold one observed time [s] into ``key``; returns the new entry."""
        if not (observed_s >= 0 and math.isfinite(observed_s)):
            raise field_error("observed_s", observed_s, "a finite time >= 0 [s]")
        old = self._table.get(key)
        new = float(observed_s) if old is None else (1.0 - self.alpha) * old + self.alpha * float(observed_s)
        self._table[key] = new
        self.version += 1
        return new

    def items(self) -> list[tuple[tuple[Hashable, int], float]]:
        return sorted(self._table.items(), key=lambda kv: repr(kv[0]))

    def expert_time_s(self, tokens: int) -> float:
        value = self._table.get((self.expert_shape, int(tokens)))
        return self.fallback.expert_time_s(tokens) if value is None else value

    def expert_time_on_unit_s(self, tokens: int, unit: str) -> float:
        value = self._table.get(((self.expert_shape, unit), int(tokens)))
        return self.fallback.expert_time_on_unit_s(tokens, unit) if value is None else value

    def attention_time_s(self, batch_context_lens: Sequence[int]) -> float:
        lens = np.asarray(batch_context_lens, dtype=np.int64).reshape(-1)
        value = self._table.get((self.attention_shape, int(lens.sum())))
        return self.fallback.attention_time_s(lens) if value is None else value


def _expert_time_array(pim: PimCostModel, max_tokens: int, unit: str | None = None) -> np.ndarray:
    """``t(n)`` for ``n = 0..max_tokens`` (``t(0) = 0``), using a vectorised method when the cost
    model offers one (``expert_times_s(max_tokens)``, ``expert_times_on_unit_s(max_tokens, unit)``)."""
    if unit is None and hasattr(pim, "expert_times_s"):
        arr = np.asarray(pim.expert_times_s(max_tokens), dtype=np.float64)
    elif unit is not None and hasattr(pim, "expert_times_on_unit_s"):
        arr = np.asarray(pim.expert_times_on_unit_s(max_tokens, unit), dtype=np.float64)
    elif unit is None:
        arr = np.array([0.0] + [pim.expert_time_s(n) for n in range(1, max_tokens + 1)], dtype=np.float64)
    else:
        arr = np.array([0.0] + [pim.expert_time_on_unit_s(n, unit) for n in range(1, max_tokens + 1)],
                       dtype=np.float64)
    if getattr(pim, "arrays_checked", False):   # the model checked its own arrays when it built them
        return arr
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ConfigError("PIM cost model returned a negative or non-finite time")
    return arr


# --------------------------------------------------------------------------------------------
# GPU roofline and interconnect
# --------------------------------------------------------------------------------------------
def gpu_roofline_time_s(flops: float, bytes_moved: float, peak_flops: float, hbm_bytes_per_s: float,
                        compute_efficiency: float = 1.0, memory_efficiency: float = 1.0) -> float:
    """``max(flops / (peak * eff_c), bytes / (bw * eff_m))`` [s] of one GPU op (Duplex style)."""
    return max(flops / (peak_flops * compute_efficiency), bytes_moved / (hbm_bytes_per_s * memory_efficiency))


@dataclass(frozen=True)
class GpuWork:
    """FLOPs and off-chip bytes of the non-MoE work of one layer on one GPU."""

    flops: float = 0.0
    bytes: float = 0.0

    def __add__(self, other: "GpuWork") -> "GpuWork":
        return GpuWork(self.flops + other.flops, self.bytes + other.bytes)


@dataclass(frozen=True)
class CommBreakdown:
    """Interconnect time of one MoE layer on one GPU [s] (the busiest GPU when from routing)."""

    allgather_s: float
    dispatch_s: float
    combine_s: float

    @property
    def total_s(self) -> float:
        return self.allgather_s + self.dispatch_s + self.combine_s


def comm_time_s(*, num_gpus: int, local_tokens: int, top_k: int, hidden_size: int, dtype_bytes: float,
                dispatch_send_tokens: float, dispatch_recv_tokens: float, bandwidth_bytes_per_s: float,
                latency_s: float, routing_bytes_per_choice: float = 8.0) -> CommBreakdown:
    """Link time of the AllGather of routing maps, the token dispatch and the combine.

    * AllGather: every GPU receives the routing maps of the other ``G - 1`` GPUs
      (``local_tokens * top_k * routing_bytes_per_choice`` bytes each: int32 id + fp32 weight).
    * Dispatch: ``dispatch_send_tokens`` token vectors leave this GPU and ``dispatch_recv_tokens``
      arrive (``hidden_size * dtype_bytes`` each); send and receive use separate directions, so
      the phase takes the larger of the two. Combine is the reverse transfer.
    * Each phase adds ``latency_s``; with one GPU nothing crosses the link.
    """
    if num_gpus <= 1:
        return CommBreakdown(0.0, 0.0, 0.0)
    bw = bandwidth_bytes_per_s
    map_bytes = local_tokens * top_k * routing_bytes_per_choice
    allgather = latency_s + (num_gpus - 1) * map_bytes / bw
    vec = hidden_size * dtype_bytes
    dispatch = latency_s + max(dispatch_send_tokens, dispatch_recv_tokens) * vec / bw
    combine = latency_s + max(dispatch_send_tokens, dispatch_recv_tokens) * vec / bw
    return CommBreakdown(allgather, dispatch, combine)


def dispatch_pairs_from_routing(expert_ids: np.ndarray, num_experts: int, num_gpus: int
                                ) -> tuple[np.ndarray, np.ndarray]:
    """Token vectors each GPU sends and receives in the dispatch, from the routing.

    ``expert_ids`` is ``[B, top_k]`` (global expert ids). Tokens are data-parallel (token ``i`` lives
    on GPU ``i * G // B``), experts expert-parallel (expert ``e`` on GPU ``e * G // E``). A token
    goes once to every *other* GPU that holds at least one of its experts (as DeepEP does).
    Returns ``(send[G], recv[G])`` in token vectors.
    """
    ids = np.asarray(expert_ids)
    if ids.ndim != 2:
        raise field_error("routing shape", ids.shape, "[tokens, top_k]")
    b = ids.shape[0]
    if ids.size and (ids.min() < 0 or ids.max() >= num_experts):
        raise field_error("routing expert id", int(ids.min() if ids.min() < 0 else ids.max()),
                          f"an id in [0, {num_experts})")
    src = (np.arange(b) * num_gpus) // max(b, 1)
    dst = (ids.astype(np.int64) * num_gpus) // num_experts
    reach = np.zeros((b, num_gpus), dtype=bool)
    reach[np.repeat(np.arange(b), ids.shape[1]), dst.reshape(-1)] = True
    reach[np.arange(b), src] = False  # local experts need no transfer
    send = np.bincount(src, weights=reach.sum(axis=1), minlength=num_gpus)
    recv = reach.sum(axis=0).astype(np.float64)
    return send.astype(np.float64), recv


# --------------------------------------------------------------------------------------------
# Model-derived work (through the ModelSpec interface, read with getattr)
# --------------------------------------------------------------------------------------------
def _layer_kind(model: Any, layer: int) -> str:
    kinds = tuple(getattr(model, "layer_attention", ()) or ())
    return kinds[layer] if 0 <= layer < len(kinds) else "full"


def attention_shape(model: Any, layer: int) -> AttentionShape:
    """Decode-attention FLOPs per request at ``layer`` of ``model`` (a ``ModelSpec``).

    Per context token every KV element is multiplied by each query head of its group (GQA group
    ``num_attention_heads / num_kv_heads``), 2 FLOPs per MAC: ``2 * kv_elems * group``.
    MLA: the latent (``kv_lora_rank + qk_rope_head_dim`` elements) is read by every head for the
    score and again for the value: ``4 * latent * heads``. Sliding layers cap the context at
    ``sliding_window``, chunked layers at the current chunk. Linear-attention (Gated-DeltaNet) layers read and update a fixed state
    of ``linear_num_value_heads * linear_key_head_dim * linear_value_head_dim`` elements per
    request: ``4 * state_elems`` FLOPs per step (its cost grows with the batch, not the context).
    """
    kind = _layer_kind(model, layer)
    heads = float(model.num_attention_heads)
    kv_heads = float(getattr(model, "num_kv_heads", heads) or heads)
    if kind == "linear":
        nv = float(getattr(model, "linear_num_value_heads", 0) or 0)
        dk = float(getattr(model, "linear_key_head_dim", 0) or 0)
        dv = float(getattr(model, "linear_value_head_dim", 0) or 0)
        state = nv * dk * dv
        if state == 0:  # no Gated-DeltaNet fields: a head_dim x head_dim state per query head
            state = heads * float(model.head_dim) ** 2
        return AttentionShape(0.0, None, 4.0 * state)
    elem = float(getattr(model, "kv_bytes_per_element", getattr(model, "dtype_bytes", 2)))
    kv_elems = float(model.kv_bytes_per_token(layer)) / elem
    if kind == "mla":
        return AttentionShape(4.0 * kv_elems * heads)
    group = heads / kv_heads if kv_heads > 0 else 1.0
    window = chunk = None
    if kind == "sliding":
        w = getattr(model, "sliding_window", None)
        window = int(w) if w else None
    if kind == "chunked":
        c = getattr(model, "attention_chunk_size", None)
        chunk = int(c) if c else None
    return AttentionShape(2.0 * kv_elems * group, window, chunk=chunk)


def non_moe_work(model: Any, layer: int, local_tokens: int) -> GpuWork:
    """FLOPs and off-chip bytes of the GPU's non-MoE work at one MoE layer (decode).

    QKV/O projections (``attention_params_per_layer``), router (``router_params``), shared experts
    (``shared_expert_params``), two RMSNorms, and the KV-cache write of the new tokens.
    Weights move once; activations of ``local_tokens`` tokens are read and written once per op.
    Decode attention itself runs on PIM and is not here.
    """
    h = float(model.hidden_size)
    dtype = float(getattr(model, "dtype_bytes", 2))
    ebytes = float(getattr(model, "expert_bytes_per_param", dtype))
    b = float(local_tokens)
    attn_params = float(model.attention_params_per_layer(layer))
    router_params = float(getattr(model, "router_params", h * float(model.num_experts)))
    shared_params = float(getattr(model, "shared_expert_params",
                                  float(getattr(model, "num_shared_experts", 0) or 0) * 3.0 * h
                                  * float(getattr(model, "shared_expert_intermediate_size", 0) or 0)))
    flops = 2.0 * b * (attn_params + router_params + shared_params) + 2.0 * 4.0 * b * h  # GEMMs + 2 norms
    n_ops = 3 + (1 if shared_params else 0)  # attention projections, router, norms (+ shared experts)
    act_bytes = b * h * dtype * 2.0 * n_ops
    kv_write = b * float(model.kv_bytes_per_token(layer))
    weight_bytes = (attn_params + router_params) * dtype + shared_params * ebytes
    return GpuWork(flops, weight_bytes + act_bytes + kv_write)


# --------------------------------------------------------------------------------------------
# The cost context the policies see
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CostBreakdown:
    """Estimated times of one partition [s]; ``unit_busy_s`` only for expert-parallel PIM."""

    t_total_s: float
    t_comm_s: float
    t_gpu_s: float
    t_offchip_s: float
    t_comp_s: float
    t_pim_s: float
    t_attention_s: float
    unit_busy_s: np.ndarray | None = None

    def as_dict(self) -> dict[str, Any]:
        d = {k: float(getattr(self, k)) for k in ("t_total_s", "t_comm_s", "t_gpu_s", "t_offchip_s",
                                                    "t_comp_s", "t_pim_s", "t_attention_s")}
        if self.unit_busy_s is not None:
            d["unit_busy_s"] = [float(x) for x in self.unit_busy_s]
        return d


@dataclass
class CostContext:
    """Everything a policy needs to price a partition of one GPU's experts at one layer.

    Times in seconds, bytes, FLOPs; ``gpu_flops_per_s`` and ``gpu_bytes_per_s`` are effective
    (peak times the efficiency factors). ``batch`` is the global batch ``B`` (tokens of this
    step), so a valid count vector has every count <= ``batch`` and sums to at most
    ``batch * top_k``. ``num_experts`` is the number of experts this GPU holds (valid local ids
    are ``0..num_experts-1``).
    """

    t_comm_s: float
    t_attention_s: float
    gpu_fixed: GpuWork
    gpu_flops_per_s: float
    gpu_bytes_per_s: float
    expert_bytes: float
    expert_flops_per_token: float
    expert_io_bytes_per_token: float
    pim: PimCostModel
    batch: int
    top_k: int
    num_experts: int
    organisation: PimOrganisation = field(default_factory=PimOrganisation)
    comm: CommBreakdown | None = None
    #: Index of this layer among the model's MoE layers (0 = the first). Only PIMoE's static
    #: placement depends on it (its round robin continues from layer to layer).
    moe_layer: int = 0

    def __post_init__(self) -> None:
        for name in ("t_comm_s", "t_attention_s", "expert_bytes", "expert_flops_per_token",
                     "expert_io_bytes_per_token"):
            v = getattr(self, name)
            if not (v >= 0 and math.isfinite(v)):
                raise field_error(name, v, "a finite number >= 0")
        for name in ("gpu_flops_per_s", "gpu_bytes_per_s"):
            v = getattr(self, name)
            if not (v > 0 and math.isfinite(v)):
                raise field_error(name, v, "a finite number > 0")
        for name in ("batch", "top_k", "num_experts", "moe_layer"):
            v = getattr(self, name)
            if not isinstance(v, (int, np.integer)) or v < 0:
                raise field_error(name, v, "a non-negative integer")
        self._tables: dict[str | None, np.ndarray] = {}
        self._tables_version = getattr(self.pim, "version", None)
        # Constants of T_GPU(k experts, x tokens) = max(off0 + off_e*k + off_t*x, comp0 + comp_t*x).
        self._off0 = self.gpu_fixed.bytes / self.gpu_bytes_per_s
        self._off_e = self.expert_bytes / self.gpu_bytes_per_s
        self._off_t = self.expert_io_bytes_per_token / self.gpu_bytes_per_s
        self._comp0 = self.gpu_fixed.flops / self.gpu_flops_per_s
        self._comp_t = self.expert_flops_per_token / self.gpu_flops_per_s
        # off0 + off_e * k for k = 1..num_experts, the same expression the scalar walk evaluates
        self._offbase = self._off0 + self._off_e * np.arange(1, max(self.num_experts, 1) + 1, dtype=np.float64)

    # -- tables --------------------------------------------------------------------------------
    def pim_times(self, unit: str | None = None) -> np.ndarray:
        """``t(n)`` for ``n = 0..batch`` [s]: tensor-parallel (``unit=None``) or on one unit.

        Cached; rebuilt when the cost model is a :class:`PimCostTable` that was updated since.
        """
        version = getattr(self.pim, "version", None)
        if version != self._tables_version:
            self._tables.clear()
            self._tables_version = version
        arr = self._tables.get(unit)
        if arr is None:
            if unit is not None:
                self.organisation.count(unit)  # validates the name
            arr = _expert_time_array(self.pim, self.batch, unit)
            self._tables[unit] = arr
        return arr

    # -- the terms of Equation 1 -----------------------------------------------------------------
    def gpu_time_s(self, n_gpu_experts: int, gpu_tokens: float) -> tuple[float, float, float]:
        """``(T_GPU, T_offchip, T_comp)`` [s] with ``n_gpu_experts`` experts and ``gpu_tokens``
        (token, expert) pairs on the GPU, non-MoE work included."""
        off = self._off0 + self._off_e * n_gpu_experts + self._off_t * gpu_tokens
        comp = self._comp0 + self._comp_t * gpu_tokens
        return max(off, comp), off, comp

    def moe_gpu_time_s(self, n_gpu_experts: int, gpu_tokens: float) -> float:
        """GPU time of the routed experts alone (no non-MoE work) [s] (what PIMoE balances)."""
        return max(self._off_e * n_gpu_experts + self._off_t * gpu_tokens, self._comp_t * gpu_tokens)

    def evaluate(self, counts: Sequence[int] | np.ndarray, on_pim: Sequence[bool] | np.ndarray,
                 unit: str | None = None, unit_of: np.ndarray | None = None) -> CostBreakdown:
        """Estimated times of a partition.

        ``counts[i]`` tokens of expert ``i``; ``on_pim[i]`` True when it runs on PIM (inactive
        experts, count 0, cost nothing either way). With ``unit`` and ``unit_of`` (unit index of
        each expert) the PIM runs expert-parallel: ``T_PIM = T_attention + max_u busy_u``.
        """
        c = np.asarray(counts, dtype=np.int64).reshape(-1)
        pim = np.asarray(on_pim, dtype=bool).reshape(-1)
        if pim.shape != c.shape:
            raise field_error("partition length", pim.size, f"{c.size} (one flag per expert)")
        gpu = (~pim) & (c > 0)
        t_gpu, t_off, t_comp = self.gpu_time_s(int(gpu.sum()), float(c[gpu].sum()))
        busy = None
        if unit is None:
            t_pim = self.t_attention_s + float(self.pim_times()[c[pim]].sum())
        else:
            if unit_of is None:
                raise ConfigError("expert-parallel evaluation needs unit_of (the unit of each expert)")
            table = self.pim_times(unit)
            busy = np.bincount(np.asarray(unit_of)[pim], weights=table[c[pim]],
                               minlength=self.organisation.count(unit))
            t_pim = self.t_attention_s + (float(busy.max()) if busy.size else 0.0)
        total = max(self.t_comm_s, t_gpu, t_pim)
        return CostBreakdown(total, self.t_comm_s, t_gpu, t_off, t_comp, t_pim, self.t_attention_s, busy)

    def prefix_totals(self, sorted_desc: np.ndarray, pim_desc: np.ndarray | None = None,
                      p_all: float | None = None) -> np.ndarray:
        """``T_total`` of every prefix cut of counts sorted in descending order [s].

        Element ``k`` (``0..m``) is the estimate with the ``k`` most popular experts on the GPU
        and the rest on PIM (tensor-parallel). ``T_PIM(k) = P_all - cumsum_k`` with
        ``P_all = T_attention + sum(t(n))`` summed once, so every policy that walks the sorted list
        (Sieve, Oracle) sees bit-identical values. ``pim_desc`` (``t(n)`` of ``sorted_desc``) and
        ``p_all`` may be passed when the caller has them.
        """
        s = np.asarray(sorted_desc, dtype=np.int64)
        m = s.size
        pt = self.pim_times()[s] if pim_desc is None else pim_desc
        if p_all is None:
            p_all = self.t_attention_s + float(np.add.reduce(pt))
        out = np.empty(m + 1, dtype=np.float64)
        out[0] = max(self.t_comm_s, self._off0, self._comp0, p_all)
        if m:
            tok = np.cumsum(s)
            off = self._offbase[:m] + self._off_t * tok
            comp = self._comp0 + self._comp_t * tok
            np.maximum(off, comp, out=off)
            p = p_all - np.cumsum(pt)
            np.maximum(off, p, out=off)
            np.maximum(off, self.t_comm_s, out=out[1:])
        return out


_DEFAULT_IDS: dict[int, np.ndarray] = {}


def default_ids(n: int) -> np.ndarray:
    """``arange(n)`` (cached, read-only): the ids of counts given without ids."""
    ids = _DEFAULT_IDS.get(n)
    if ids is None:
        ids = np.arange(n, dtype=np.int64)
        ids.flags.writeable = False
        _DEFAULT_IDS[n] = ids
    return ids


def validate_counts(counts: Any, ctx: CostContext, expert_ids: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """Check a count vector against the context; returns ``(counts int64, expert_ids int64)``.

    Errors (:class:`ConfigError`): non-integer or negative counts, a count above the batch (a token
    selects an expert at most once), counts summing to more than ``batch * top_k``, expert ids that
    are not unique, out of ``[0, num_experts)`` or not one per count.
    """
    c = np.asarray(counts)
    if c.ndim != 1:
        raise field_error("counts", f"array of shape {c.shape}", "a flat list of token counts, one per expert")
    if c.size and c.dtype.kind not in "iu":
        if c.dtype.kind == "f" and np.all(np.isfinite(c)) and np.all(c == np.round(c)):
            c = c.astype(np.int64)
        elif c.dtype.kind == "b":
            raise field_error("counts", c.tolist()[:8], "integer token counts")
        else:
            bad = [x for x in c.tolist() if not (isinstance(x, (int, float)) and float(x).is_integer())][:1]
            raise field_error("count", bad[0] if bad else c.dtype, "an integer number of tokens")
    c = c.astype(np.int64, copy=False)
    if c.size:
        low = int(c.min())
        if low < 0:
            i = int(np.argmin(c))
            raise field_error(f"counts[{i}]", low, "a non-negative number of tokens")
        high = int(c.max())
        if high > ctx.batch:
            i = int(np.argmax(c))
            raise field_error(f"counts[{i}]", high,
                              f"at most the batch size B = {ctx.batch} (a token picks an expert once)")
        total = int(c.sum())
        if total > ctx.batch * ctx.top_k:
            raise field_error("sum of counts", total,
                              f"at most B x top_k = {ctx.batch} x {ctx.top_k} = {ctx.batch * ctx.top_k}")
    if expert_ids is None:
        if c.size > ctx.num_experts:
            raise field_error("number of counts", c.size,
                              f"at most {ctx.num_experts} (the experts this GPU holds)")
        ids = default_ids(c.size)
    else:
        ids = np.asarray(expert_ids)
        if ids.ndim != 1 or ids.size != c.size:
            raise field_error("expert_ids", f"{ids.size} ids", f"{c.size} ids, one per count")
        if ids.size and ids.dtype.kind not in "iu":
            raise field_error("expert_ids", ids.dtype, "integer expert ids")
        ids = ids.astype(np.int64, copy=False)
        if ids.size:
            if ids.min() < 0 or ids.max() >= ctx.num_experts:
                bad = int(ids.min() if ids.min() < 0 else ids.max())
                raise field_error("expert id", bad, f"an id in [0, {ctx.num_experts})")
            uniq, cnt = np.unique(ids, return_counts=True)
            if np.any(cnt > 1):
                raise field_error("expert id", int(uniq[cnt > 1][0]), "unique ids (this one repeats)")
    return c, ids


# --------------------------------------------------------------------------------------------
# Building a context from the specs
# --------------------------------------------------------------------------------------------
def _get(obj: Any, path: str, default: Any = None) -> Any:
    for part in path.split("."):
        if obj is None:
            return default
        obj = getattr(obj, part, None)
    return default if obj is None else obj


def pim_organisation(hardware: Any) -> PimOrganisation:
    """PIM units of one GPU from the hardware spec (defaults: 16 channels x 2 PCs per stack)."""
    stacks = int(_get(hardware, "gpu.num_hbm_stacks", 8))
    pim = getattr(hardware, "pim", None)
    dram = getattr(hardware, "dram", None)
    ch = None
    pc = None
    for src in (pim, dram):
        ch = ch or getattr(src, "channels_per_stack", None) or getattr(src, "channels", None)
        pc = pc or getattr(src, "pseudo_channels_per_channel", None)
    return PimOrganisation(stacks, int(ch or 16), int(pc or 2))


_organisation = pim_organisation   # the older private name


def pim_peak_flops(hardware: Any) -> float:
    """Peak PIM FLOP/s of one GPU: ``hardware.pim_peak_flops``, else ``ratio x HBM bw x 2 FLOP/MAC
    / dtype bytes`` (op/B = 1 for bf16 at a 16x internal bandwidth)."""
    peak = getattr(hardware, "pim_peak_flops", None)
    if callable(peak):
        peak = peak()
    if peak:
        return float(peak)
    ratio = float(_get(hardware, "pim.internal_bandwidth_ratio", 16.0))
    return ratio * float(hardware.gpu.hbm_bandwidth_bytes_per_s)


def default_layer(model: Any) -> int:
    """The layer a one-layer estimate uses by default: the first MoE layer with full or MLA
    attention (the most expensive attention on PIM), else the first MoE layer."""
    kinds = tuple(getattr(model, "layer_attention", ()) or ())
    mlp = tuple(getattr(model, "layer_mlp", ()) or ("moe",) * len(kinds))
    moe = [i for i in range(len(kinds)) if i < len(mlp) and mlp[i] == "moe"] or list(range(len(kinds)))
    return next((i for i in moe if kinds[i] in ("full", "mla")), moe[0] if moe else 0)


def moe_layer_index(model: Any, layer: int) -> int:
    """Index of ``layer`` among the MoE layers of ``model`` (0 when the model lists none or the
    layer is not one of them)."""
    moe = tuple(getattr(model, "moe_layer_indices", ()) or ())
    return moe.index(layer) if layer in moe else 0


def build_context(model: Any, hardware: Any, num_gpus: int, batch: int, *,
                  layer: int | None = None,
                  context_lens: Sequence[int] | int | None = None,
                  counts: Sequence[int] | np.ndarray | None = None,
                  routing: np.ndarray | None = None,
                  pim: PimCostModel | None = None,
                  gpu_index: int = 0) -> CostContext:
    """A :class:`CostContext` for one MoE layer on one GPU.

    Parameters
    ----------
    model, hardware:
        A ``ModelSpec`` and a ``HardwareSpec`` (``sievesim.models`` / ``sievesim.hardware``).
    num_gpus:
        ``G``; experts are split ``E / G`` per GPU, requests ``B / G`` per GPU.
    batch:
        ``B``, decode tokens of the step over all GPUs.
    layer:
        Layer index for the attention kind; default: the first MoE layer with full or MLA
        attention (the most expensive attention on PIM), else the first MoE layer.
    context_lens:
        Context length of each of this GPU's requests (tokens), or one length for all of them;
        default 0 (no attention cost).
    counts:
        Token counts of this GPU's experts; used for the dispatch volume when ``routing`` is not
        given: ``(G - 1) / G`` of the (token, expert) pairs come from other GPUs, and by symmetry
        as many leave. ``routing`` (``[B, top_k]`` global expert ids) gives the exact volumes.
    pim:
        The PIM cost model; default :class:`RooflinePimCost` from the specs.
    """
    if not isinstance(num_gpus, (int, np.integer)) or num_gpus < 1:
        raise field_error("gpus", num_gpus, "a positive integer")
    if not isinstance(batch, (int, np.integer)) or batch < 0:
        raise field_error("batch", batch, "a non-negative integer")
    e_total = int(model.num_experts)
    if e_total % num_gpus:
        raise field_error("gpus", num_gpus, f"a divisor of the model's {e_total} experts")
    e_local = e_total // num_gpus
    top_k = int(model.top_k)
    h = int(model.hidden_size)
    dtype = float(getattr(model, "dtype_bytes", 2))
    kinds = tuple(getattr(model, "layer_attention", ()) or ())
    if layer is None:
        layer = default_layer(model)
    if kinds and not (0 <= layer < len(kinds)):
        raise field_error("layer", layer, f"a layer index in [0, {len(kinds)})")
    mlp_kinds = tuple(getattr(model, "layer_mlp", ()) or ())
    if mlp_kinds and layer < len(mlp_kinds) and mlp_kinds[layer] != "moe":
        raise field_error("layer", layer, f"a MoE layer (layer {layer} of {getattr(model, 'name', 'the model')} "
                          f"is {mlp_kinds[layer]!r})")
    local = -(-batch // num_gpus)  # ceil: the busiest GPU's requests
    if context_lens is None:
        lens = np.zeros(local, dtype=np.int64)
    elif np.ndim(context_lens) == 0:
        lens = np.full(local, int(context_lens), dtype=np.int64)
    else:
        lens = np.asarray(context_lens, dtype=np.int64).reshape(-1)
    if lens.size and lens.min() < 0:
        raise field_error("context length", int(lens.min()), "a non-negative number of tokens")

    gpu = hardware.gpu
    ceff = float(getattr(gpu, "compute_efficiency", 1.0) or 1.0)
    meff = float(getattr(gpu, "memory_efficiency", 1.0) or 1.0)
    org = pim_organisation(hardware)
    params = float(model.params_per_expert)
    expert_bytes = float(getattr(model, "bytes_per_expert", params * dtype) or params * dtype)
    # (params_per_expert includes GPT-OSS's expert biases; 2 FLOPs per weight per token)
    inter = float(model.moe_intermediate_size)
    if pim is None:
        pim = RooflinePimCost(2.0 * params, pim_peak_flops(hardware), attention_shape(model, layer), org)

    if routing is not None:
        send, recv = dispatch_pairs_from_routing(routing, e_total, num_gpus)
        s_tok, r_tok = float(send[gpu_index]), float(recv[gpu_index])
    else:
        pairs = float(np.sum(counts)) if counts is not None else float(batch * top_k) / num_gpus
        r_tok = s_tok = pairs * (num_gpus - 1) / num_gpus
    comm = comm_time_s(num_gpus=num_gpus, local_tokens=local, top_k=top_k, hidden_size=h,
                       dtype_bytes=dtype, dispatch_send_tokens=s_tok, dispatch_recv_tokens=r_tok,
                       bandwidth_bytes_per_s=float(hardware.interconnect.bandwidth_bytes_per_s_per_direction),
                       latency_s=float(hardware.interconnect.latency_s))
    return CostContext(
        t_comm_s=comm.total_s,
        t_attention_s=float(pim.attention_time_s(lens)),
        gpu_fixed=non_moe_work(model, layer, local),
        gpu_flops_per_s=float(gpu.peak_flops_bf16) * ceff,
        gpu_bytes_per_s=float(gpu.hbm_bandwidth_bytes_per_s) * meff,
        expert_bytes=expert_bytes,
        expert_flops_per_token=2.0 * params,
        expert_io_bytes_per_token=dtype * (2.0 * h + 2.0 * inter),
        pim=pim,
        batch=int(batch),
        top_k=top_k,
        num_experts=e_local,
        organisation=org,
        comm=comm,
        moe_layer=moe_layer_index(model, layer),
    )


def context_from_numbers(**kwargs: Any) -> CostContext:
    """A :class:`CostContext` from plain numbers (tests, what-if studies); see its fields."""
    return CostContext(**kwargs)

