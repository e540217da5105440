"""GPU roofline, interconnect and the model-derived GPU work of a layer (times in seconds, bytes, FLOPs)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import field_error
from .pim_cost import AttentionShape


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
    score and again for the value: ``4 * latent * heads``; with a DSA indexer (DeepSeek-V3.2) over
    at most ``index_topk`` tokens, plus the indexer's ``2 * index_n_heads * (index_head_dim + 1)``
    per context token (its heads' scores and their weighted sum). Sliding layers cap the context at
    ``sliding_window``, chunked layers at the current chunk. Linear-attention (Gated-DeltaNet) layers read and update a fixed state
    of ``linear_num_value_heads * linear_key_head_dim * linear_value_head_dim`` elements per
    request: ``4 * state_elems`` FLOPs per step (its cost grows with the batch, not the context).
    Mamba-2 layers likewise: ``6 * state_elems`` (decay, rank-1 update, readout: a multiply per element
    for the decay, a multiply-add for the update and one for the readout).
    """
    kind = _layer_kind(model, layer)
    heads = float(model.num_attention_heads)
    kv_heads = float(getattr(model, "num_kv_heads", heads) or heads)
    if kind == "mamba":   # Mamba-2: decay, B x^T update and C readout of a heads x head_dim x N state
        state = float(model.mamba_num_heads * model.mamba_head_dim * model.mamba_state_size)
        return AttentionShape(0.0, None, 6.0 * state)
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
        index = float(getattr(model, "index_head_dim", 0) or 0)
        if index:   # DSA: the indexer's heads score every token; attention reads the index_topk selected
            nh = float(model.index_n_heads)
            return AttentionShape(4.0 * (kv_elems - index) * heads, int(model.index_topk),
                                  flops_per_any_context_token=2.0 * index * nh + 2.0 * nh)
        return AttentionShape(4.0 * kv_elems * heads)
    if hasattr(model, "attention_dims"):   # per-kind shapes (MiMo-V2, Gemma 4)
        _, nkv, d, dv = model.attention_dims(kind)
        kv_heads, kv_elems = float(nkv), float(nkv * (d + dv))   # values read even where keys double as them
    group = heads / kv_heads if kv_heads > 0 else 1.0
    window = chunk = None
    if kind == "sliding":
        w = getattr(model, "sliding_window", None)
        window = int(w) if w else None
    if kind == "chunked":
        c = getattr(model, "attention_chunk_size", None)
        chunk = int(c) if c else None
    return AttentionShape(2.0 * kv_elems * group, window, chunk=chunk)


def shared_expert_work(model: Any, local_tokens: int) -> GpuWork:
    """FLOPs and off-chip bytes of the shared experts on ``local_tokens`` tokens (decode): their
    weights once, activations in and out; zero for a model without shared experts."""
    if not getattr(model, "num_shared_experts", 0):
        return GpuWork()
    h = float(model.hidden_size)
    b = float(local_tokens)
    params = float(model.shared_expert_params)
    ebytes = float(getattr(model, "expert_bytes_per_param", getattr(model, "dtype_bytes", 2)))
    act = b * h * float(getattr(model, "dtype_bytes", 2)) * 2.0
    return GpuWork(2.0 * b * params, params * ebytes + act)


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
    wbytes = float(getattr(model, "dense_bytes_per_param", dtype))
    weight_bytes = (attn_params + router_params) * wbytes + shared_params * ebytes
    return GpuWork(flops, weight_bytes + act_bytes + kv_write)
