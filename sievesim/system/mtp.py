"""Multi-token-prediction (MTP) decoding in a decode step: the draft passes, the verification rows,
the accepted tokens.

With ``mtp_tokens = k > 0`` (a model with MTP layers, ``num_mtp_layers > 0``: DeepSeek-V3, Qwen3.5)
every decode request of a step

* first runs ``k`` sequential draft passes of the MTP module on its one token (:func:`draft_work`:
  the embedding, the ``2h -> h`` projection of the normed embedding and hidden state, one
  transformer layer shaped as the model's last, the shared LM head), one graph node per pass and
  GPU (:func:`add_draft_passes`);
* then verifies in the main model ``1 + k`` token rows (its token and the ``k`` drafts): the
  routing draws ``B (1 + k)`` rows, every GEMM, the dispatch and the experts see them, and decode
  attention reads each request's KV cache once with ``1 + k`` queries (:mod:`sievesim.system.figure8`);
* emits ``1 + a + a^2 + ... + a^k`` tokens on average (:func:`tokens_per_request`), ``a`` the
  acceptance rate of a draft token given that the ones before it were accepted.

Simplifications (docs/models.md): the draft layer's routed experts are priced as the GPU experts
path of one GPU's share of the layer (each GPU reads its share of the experts the batch activates,
expected over uniform routing, and computes its share of the token-expert pairs), without dispatch
or combine; the draft's attention runs on the GPU even when the main layers' runs on PIM, and the
MTP layer's own KV cache is not counted in the capacity check.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..costs import GpuWork
from ..costs.gpu import shared_expert_work
from ..errors import field_error
from . import gpu_ops

__all__ = ["DEFAULT_ACCEPTANCE", "check_mtp", "tokens_per_request", "draft_work", "add_draft_passes",
           "append_draft_rows"]

#: Acceptance rate of a draft token: DeepSeek-V3 Technical Report (arXiv:2412.19437), section 5.4.3:
#: "the acceptance rate of the second token prediction ranges between 85% and 90%"; the low end.
DEFAULT_ACCEPTANCE = 0.85


def check_mtp(model: Any, mtp_tokens: Any, acceptance: Any) -> tuple[Any, int, float]:
    """The model with ``mtp_tokens`` set (``None``: the model's own), the draft tokens k and the
    acceptance rate (``None``: :data:`DEFAULT_ACCEPTANCE`). A model without MTP layers refuses
    k > 0 (``ModelSpec`` validation); a bad value raises a field error."""
    from .._validate import check_int
    if mtp_tokens is not None:
        if isinstance(mtp_tokens, bool) or not isinstance(mtp_tokens, (int, np.integer)):
            raise field_error("mtp_tokens", mtp_tokens, "a non-negative integer (draft tokens per request per step)")
        check_int("mtp_tokens", int(mtp_tokens), "layers", lo=0, hi=16)
        if int(mtp_tokens) != model.mtp_tokens:
            model = model.replace(mtp_tokens=int(mtp_tokens))
    k = int(model.mtp_tokens)
    if acceptance is None:
        a = DEFAULT_ACCEPTANCE
    else:
        if isinstance(acceptance, bool) or not isinstance(acceptance, (int, float, np.integer, np.floating)) \
                or not 0.0 <= float(acceptance) <= 1.0:
            raise field_error("mtp_acceptance", acceptance, "an acceptance rate in [0, 1]")
        if not k:
            raise field_error("mtp_acceptance", acceptance, "only with mtp_tokens > 0")
        a = float(acceptance)
    return model, k, a


def tokens_per_request(k: int, acceptance: float) -> float:
    """Tokens a request emits per step: its own plus the accepted drafts, ``1 + a + ... + a^k``
    (draft ``i`` counts only if drafts ``1..i-1`` were accepted)."""
    return 1.0 + sum(acceptance ** i for i in range(1, k + 1))


def draft_work(model: Any, full_model: Any, tokens: int, context_lens: np.ndarray, batch: int,
               gpus: int) -> tuple[GpuWork, GpuWork]:
    """FLOPs and HBM bytes of one draft pass of the MTP module on one GPU with ``tokens`` requests
    at ``context_lens``: embedding, the ``2h -> h`` projection (two RMSNorms before it), the last
    layer's attention block, its MoE (shared experts on the GPU's tokens; routed experts: 1/G of the
    batch's, ``batch`` requests over ``gpus`` GPUs) and the LM head: the work beside attention, and
    the decode attention. ``model`` is one GPU's share (tensor-parallel attention), ``full_model``
    the whole model (its routing)."""
    layer = model.num_layers - 1
    h = model.hidden_size
    proj = 2 * h * h
    work = (gpu_ops.embedding(model, tokens)
            + GpuWork(2.0 * tokens * proj + 8.0 * tokens * h,
                      proj * model.dense_bytes_per_param + tokens * h * model.dtype_bytes * 5.0)
            + gpu_ops.pre_attention(model, layer, tokens)
            + gpu_ops.post_attention(model, layer, tokens))
    if model.layer_mlp[layer] == "moe":
        E, K, ppe = full_model.num_experts, full_model.top_k, full_model.params_per_expert
        activated = E * (1.0 - (1.0 - K / E) ** batch)          # expected distinct experts, uniform routing
        routed = GpuWork(2.0 * ppe * batch * K / gpus, activated * ppe * full_model.expert_bytes_per_param / gpus
                         + tokens * K * h * model.dtype_bytes * 2.0)
        work = work + routed + shared_expert_work(model, tokens) + gpu_ops.aggregate(model, tokens)
    elif model.layer_mlp[layer] == "dense":
        work = work + gpu_ops.dense_mlp(model, tokens)
    return work + gpu_ops.lm_head(model, tokens), gpu_ops.decode_attention_on_gpu(model, layer, context_lens)


def add_draft_passes(b: Any, mb: int) -> None:
    """The ``k`` draft passes of every GPU for micro-batch ``mb``, chained after its embedding (one
    node of kind ``mtp_draft`` per pass, its time the sum of its kernels' under the step's GPU model)."""
    sim = b.sim
    m, k = sim.model, sim.mtp_tokens
    rows = b.mb_rows[mb]
    dec = rows[rows < sim.batch]
    for g in range(sim.gpus):
        lens = b.ctx_lens[dec] if sim.tp_attention else b.ctx_lens[dec[b.owner[dec] == g]]
        if not lens.size:
            continue
        rest, attention = draft_work(m, sim.full_model, int(lens.size), lens, sim.batch, sim.gpus)
        work = rest + attention
        t = b.roof(rest) + b.roof(attention) if b.roofline else (        # 9 kernels per pass: 3 + attention's 1 + 5 more
            b.gm.kernel_s(rest, "dense_mlp", m.weight_tensor_core) + b.gm.attention_s(attention)
            + 5 * b.gm.fixed_s("embedding"))
        for i in range(k):
            b.prev[(mb, g)] = b.graph.add(f"MTP draft {i + 1} g{g} mb{mb}", t, b.r_gpu_hbm[g], [b.prev[(mb, g)]],
                                          gpu=g, layer=-1, kind="mtp_draft", microbatch=mb, tokens=int(lens.size),
                                          **b.work(work))


def append_draft_rows(ids: np.ndarray | None, draft_ids: np.ndarray | None, owner: np.ndarray, mb: np.ndarray,
                      decode_owner: np.ndarray, decode_mb: np.ndarray, k: int
                      ) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
    """The step's rows with the ``k B`` verification rows appended after the decode and prefill
    rows (draft ``j`` of request ``i`` at ``B + P + j B + i``), on their request's GPU and micro-batch."""
    if ids is not None and draft_ids is not None:
        ids = np.concatenate([ids, draft_ids])
    return ids, np.concatenate([owner, np.tile(decode_owner, k)]), np.concatenate([mb, np.tile(decode_mb, k)])
