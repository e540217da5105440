"""FLOPs and off-chip bytes of the GPU kernels of one layer (roofline inputs, Duplex style).

Every function returns a :class:`~sievesim.costs.GpuWork` (FLOPs, bytes moved between HBM and
the GPU) for ``tokens`` tokens on one GPU; :func:`roofline_s` turns it into seconds. Weights
are read once per kernel (``dense_bytes_per_param``: the non-expert weights' format; the LM head
at ``dtype_bytes``); activations are read and written once (``dtype_bytes`` each).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..costs import GpuWork, attention_shape

__all__ = ["roofline_s", "attention_out_params", "pre_attention", "post_attention", "dense_mlp",
           "shared_expert_gemm", "metadata", "aggregate", "embedding", "lm_head", "expert_io_bytes_per_token",
           "decode_attention_on_gpu", "prefill_attention"]


def roofline_s(work: GpuWork, hardware: Any) -> float:
    """``max(flops / (peak x eff), bytes / (bw x eff))`` [s] on ``hardware.gpu``."""
    gpu = hardware.gpu
    return max(work.flops / (gpu.peak_flops_bf16 * gpu.compute_efficiency),
               work.bytes / (gpu.hbm_bandwidth_bytes_per_s * gpu.memory_efficiency))


def attention_out_params(model: Any, layer: int) -> int:
    """Weights of the attention block's output projection at ``layer`` (the rest is input side)."""
    kind = model.layer_attention[layer]
    h = model.hidden_size
    if kind == "linear":
        return model.linear_num_value_heads * model.linear_value_head_dim * h
    if kind == "mamba":
        return model.mamba_num_heads * model.mamba_head_dim * h
    if kind == "mla":
        return model.num_attention_heads * model.v_head_dim * h
    nq, _, _, dv = model.attention_dims(kind)
    return nq * dv * h + (h if model.attention_bias else 0)


def _act(model: Any, tokens: float, vectors: float = 2.0) -> float:
    return float(tokens) * model.hidden_size * model.dtype_bytes * vectors


def pre_attention(model: Any, layer: int, tokens: int) -> GpuWork:
    """Input RMSNorm and the attention's input projections (QKV, or Gated DeltaNet's in-projections
    and convolution), plus the new tokens' KV-cache write."""
    params = model.attention_params_per_layer(layer) - attention_out_params(model, layer)
    flops = 2.0 * tokens * params + 4.0 * tokens * model.hidden_size
    nbytes = params * model.dense_bytes_per_param + _act(model, tokens, 4.0) + tokens * model.kv_bytes_per_token(layer)
    return GpuWork(flops, nbytes)


def post_attention(model: Any, layer: int, tokens: int) -> GpuWork:
    """Output projection, residual add, post-attention RMSNorm and (MoE layers) the router."""
    params = attention_out_params(model, layer)
    if model.layer_mlp[layer] == "moe":
        params += model.router_params
    flops = 2.0 * tokens * params + 4.0 * tokens * model.hidden_size
    return GpuWork(flops, params * model.dense_bytes_per_param + _act(model, tokens, 4.0))


def dense_mlp(model: Any, tokens: int) -> GpuWork:
    """The dense SwiGLU FFN of a non-MoE layer (weights read once); nothing for a model whose
    non-MoE layers have no MLP (``none``: Nemotron-H)."""
    if "none" in model.layer_mlp:
        return GpuWork(0.0, 0.0)
    params = model.dense_mlp_params
    inter = (model.mlp_matrices - 1) * tokens * model.dense_intermediate_size * model.dtype_bytes * 2
    return GpuWork(2.0 * tokens * params, params * model.dense_bytes_per_param + _act(model, tokens) + inter)


def shared_expert_gemm(model: Any, tokens: int) -> GpuWork:
    """The shared experts' GEMMs on ``tokens`` tokens (their weights are loaded by a separate node)."""
    params = model.shared_expert_params
    inter = ((model.mlp_matrices - 1) * tokens * model.num_shared_experts * model.shared_expert_intermediate_size
             * model.dtype_bytes * 2)
    return GpuWork(2.0 * tokens * params, _act(model, tokens) + inter)


def metadata(model: Any, global_tokens: int, local_experts: int) -> GpuWork:
    """Reading the gathered routing map (int32 id + fp32 weight per choice) and writing one
    fixed-size index tensor per local expert (int32 per token slot)."""
    nbytes = global_tokens * model.top_k * 8.0 + local_experts * global_tokens * 4.0
    return GpuWork(float(global_tokens * model.top_k), nbytes)


def aggregate(model: Any, tokens: int) -> GpuWork:
    """Weighted sum of each token's ``top_k`` expert outputs (+ the shared output) and residual add."""
    vectors = model.top_k + model.num_shared_experts + 2
    return GpuWork(2.0 * tokens * vectors * model.hidden_size, _act(model, tokens, vectors + 1))


def expert_io_bytes_per_token(model: Any) -> float:
    """Activation bytes one token moves through one routed expert [bytes]: its input, the gate/up
    outputs, the down projection's input and its output."""
    return model.dtype_bytes * (2.0 * model.hidden_size + 2.0 * model.moe_intermediate_size)


def embedding(model: Any, tokens: int) -> GpuWork:
    """Embedding rows of the step's tokens (a gather: one row read and written per token)."""
    return GpuWork(0.0, _act(model, tokens))


def lm_head(model: Any, tokens: int) -> GpuWork:
    """Final RMSNorm and the LM head for the tokens that produce logits."""
    params = model.lm_head_params
    return GpuWork(2.0 * tokens * params + 4.0 * tokens * model.hidden_size,
                   params * model.dtype_bytes + _act(model, tokens) + tokens * model.vocab_size * 4.0)


def decode_attention_on_gpu(model: Any, layer: int, context_lens, queries: int = 1) -> GpuWork:
    """Decode attention of requests with these context lengths, on the GPU (the GPU-only reference):
    the KV cache (or the linear-attention or Mamba state, read and written) crosses the HBM bus
    once; with a DSA indexer, every token's indexer key and the ``index_topk`` selected latents.
    ``queries``: query tokens per request (``1 + mtp_tokens`` when MTP decoding verifies its draft
    tokens): the FLOPs and the query/output activations scale with it, the KV bytes do not."""
    lens = np.asarray(context_lens)
    if lens.dtype.kind not in "iu":
        lens = np.asarray([int(x) for x in lens.ravel()], dtype=np.int64)   # as int() reads each
    lens = lens.ravel()
    flops = attention_shape(model, layer).total_flops(lens)
    kind = model.layer_attention[layer]
    if kind == "linear":
        nbytes = 2.0 * model.linear_state_bytes_per_layer * lens.size
    elif kind == "mamba":
        nbytes = 2.0 * model.mamba_state_bytes_per_layer * lens.size
    elif kind == "mla" and model.index_topk:   # DSA: every indexer key, the selected tokens' latents
        elem = model.kv_bytes_per_element
        latent = (model.kv_lora_rank + model.qk_rope_head_dim) * elem
        nbytes = (int(np.minimum(lens, model.index_topk).sum()) * latent
                  + int(lens.sum()) * model.index_head_dim * elem)
    else:
        per_token = model.kv_bytes_per_token(layer)
        nbytes = int(model.kv_tokens_held_many(layer, lens).sum()) * per_token
    return GpuWork(flops * queries, nbytes + _act(model, int(lens.size) * queries, 2.0))


def prefill_attention(model: Any, layer: int, prompt_lens) -> GpuWork:
    """Causal self-attention of whole prompts on the GPU (prefill attention is compute-bound and
    stays on the GPU): ``2 x`` the decode FLOPs summed over the prompt's positions; linear layers
    run their chunked recurrence (the state update per token)."""
    shape = attention_shape(model, layer)
    flops = 0.0
    nbytes = 0.0
    for L in (int(x) for x in prompt_lens):
        if shape.flops_per_context_token:
            w = shape.window
            # sum over positions p = 1..L of min(p, window) context tokens
            if w is None or L <= w:
                ctx_sum = L * (L + 1) / 2.0
            else:
                ctx_sum = w * (w + 1) / 2.0 + (L - w) * w
            flops += shape.flops_per_context_token * ctx_sum
        flops += shape.fixed_flops_per_request * L + shape.flops_per_any_context_token * L * (L + 1) / 2.0
        nbytes += L * model.kv_bytes_per_token(layer)
    return GpuWork(flops, nbytes)
