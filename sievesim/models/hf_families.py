"""Per-family rules of the Hugging Face reader (:mod:`~sievesim.models.hf`): the small weights a
family carries beyond its shapes, and its multi-token-prediction layers.

Each rule follows the family's modelling code in transformers (or the checkpoint's own
``modeling_*.py``): which projections carry biases, whether q and k are RMS-normalised per head or
over all heads, whether the router has a per-expert bias. A key a rule consults is marked used; a
structural key no rule consults is refused by :func:`~sievesim.models.hf._check_unused_keys`.
"""
from __future__ import annotations

from typing import Any

from .hf_keys import _HF

#: Values of ``qk_norm_type`` (MiniMax-M2) and whether the norm spans all heads.
_QK_NORM_TYPES = {"per_layer": True, "per_head": False}


def family_weights(hf: _HF, model_type: str) -> dict[str, Any]:
    """The :class:`~sievesim.models.ModelSpec` attention and MoE details of a family:

    * attention biases: GPT-OSS on q/k/v/o (unless ``attention_bias`` is false); Qwen2-MoE on
      q/k/v only (no output bias); GLM-4.5 (``glm4_moe``) on q/k/v when ``attention_bias``; Ling
      (``bailing_moe``) on q/k/v when ``use_qkv_bias`` (``use_bias``, biases on the output
      projection and MLPs, is refused); any other family on q/k/v/o when ``attention_bias``;
    * q/k RMSNorm: Qwen3 (all) per head; GLM-4.5 and Ling when ``use_qk_norm``, per head; OLMoE
      always, over all heads; MiniMax-M2 when ``use_qk_norm``, per head or over all heads as
      ``qk_norm_type`` says; Llama 4's ``use_qk_norm`` is a weight-free L2 norm (no weights);
    * Qwen3-Next / Qwen3.5: a gated attention output (unless ``attn_output_gate`` is false);
    * GPT-OSS: attention sinks and expert biases;
    * router bias (one per expert): GPT-OSS; ``topk_method = "noaux_tc"`` (DeepSeek-V3, Kimi-K2,
      MiMo-V2: the score-correction bias), GLM-4.5 and Nemotron-H always (their routers hold the same bias),
      MiniMax-M2 when ``use_routing_bias``, Ling-2.0 when ``moe_router_enable_expert_bias``.
    """
    gpt_oss = model_type == "gpt_oss"
    glm = model_type == "glm4_moe"
    bailing = model_type.startswith("bailing_moe")
    minimax = model_type == "minimax_m2"
    gated = model_type.startswith(("qwen3_next", "qwen3_5")) and hf.bool("attn_output_gate", True)

    attention_bias = qkv_bias = False
    if model_type == "qwen2_moe":      # Qwen2MoeAttention: q/k/v with bias, o without
        qkv_bias = True
    elif glm:                          # Glm4MoeAttention: q/k/v bias = attention_bias, o without
        qkv_bias = hf.bool("attention_bias", False)
    elif bailing:                      # one fused query_key_value projection, bias = use_qkv_bias
        qkv_bias = hf.bool("use_qkv_bias", False)
        if hf.bool("use_bias", False):
            hf.problem("use_bias", True, "false (biases on Ling's output projection and MLPs are not modelled)")
    else:
        attention_bias = hf.bool("attention_bias", gpt_oss)

    qk_norm, over_heads = model_type.startswith(("qwen3", "qwen3_5")), False
    if qk_norm:
        hf.consider("use_qk_norm")     # Qwen3 attention always normalises q and k (Qwen3-Coder says so)
    if glm or bailing:
        qk_norm = hf.bool("use_qk_norm", False)
    elif model_type == "olmoe":        # OlmoeAttention: q_norm over nq * d, k_norm over nkv * d
        qk_norm, over_heads = True, True
    elif minimax:
        qk_norm = hf.bool("use_qk_norm", False)
        hf.consider("qk_norm_type")    # without use_qk_norm there is nothing to normalise
        if qk_norm:
            norm_type = hf.cfg.get("qk_norm_type", "per_layer")
            if norm_type not in _QK_NORM_TYPES:
                hf.problem("qk_norm_type", norm_type, f"one of {sorted(_QK_NORM_TYPES)}")
            over_heads = _QK_NORM_TYPES.get(norm_type, True)
    elif model_type.startswith("llama4"):
        hf.consider("use_qk_norm")     # Llama4TextL2Norm: no weights

    hf.consider("topk_method")
    router_bias = (gpt_oss or glm or model_type == "nemotron_h" or hf.cfg.get("topk_method") == "noaux_tc"
                   or (minimax and hf.bool("use_routing_bias", False))
                   or (bailing and hf.bool("moe_router_enable_expert_bias", False)))
    return dict(attention_bias=attention_bias, qkv_bias=qkv_bias, attention_sinks=gpt_oss, qk_norm=qk_norm,
                qk_norm_over_heads=over_heads, attention_output_gate=gated, expert_bias=gpt_oss,
                router_bias=router_bias)


def routing_groups(hf: _HF) -> dict[str, Any]:
    """Group-limited routing (DeepSeek-V2/V3, read as their ``MoEGate`` does): ``n_group`` groups of
    consecutive experts, a token's experts from its ``topk_group`` best groups, unless
    ``topk_method`` is ``"greedy"`` (DeepSeek-V2-Lite: plain top-k). One group is no groups."""
    groups, chosen = hf.int("n_group", 1), hf.int("topk_group", None)
    if groups == 1 or hf.cfg.get("topk_method") == "greedy":
        return {}
    return {"expert_groups": groups, "top_k_groups": chosen if chosen is not None else groups}


def mtp_layer_count(hf: _HF, model_type: str) -> int:
    """Multi-token-prediction layers shipped with the checkpoint (not simulated, not counted):
    DeepSeek/GLM/Kimi ``num_nextn_predict_layers``, Qwen3.5 ``mtp_num_hidden_layers``, MiniMax-M2
    ``num_mtp_modules * mtp_transformer_layers`` when ``use_mtp``."""
    count = hf.int("num_nextn_predict_layers", 0) or hf.int("mtp_num_hidden_layers", 0)
    if model_type == "minimax_m2" and hf.bool("use_mtp", False):
        count = hf.int("num_mtp_modules", why="use_mtp is true") * hf.int("mtp_transformer_layers", 1)
    return count


def sparse_attention(hf: _HF, is_mla: bool) -> dict[str, Any]:
    """DeepSeek sparse attention (DeepSeek-V3.2 ``deepseek_v32``, GLM-5 ``glm_moe_dsa``) on MLA
    layers: ``index_n_heads``, ``index_head_dim``, ``index_topk``; and GLM-5's MLA head sizes,
    ``qk_head_dim`` (must be ``qk_nope_head_dim + qk_rope_head_dim``) and ``head_dim`` (the rotary
    part, ``qk_rope_head_dim``). Outside MLA these keys are left unread (refused by name)."""
    if not is_mla:
        return {}
    out: dict[str, Any] = {}
    if any(hf.cfg.get(k) is not None for k in ("index_n_heads", "index_head_dim", "index_topk")):
        out = dict(index_n_heads=hf.int("index_n_heads", why="the config has a sparse-attention indexer"),
                   index_head_dim=hf.int("index_head_dim", why="the config has a sparse-attention indexer"),
                   index_topk=hf.int("index_topk", why="the config has a sparse-attention indexer"))
    qk = hf.int("qk_nope_head_dim", 0) + hf.int("qk_rope_head_dim", 0)
    if hf.has("qk_head_dim") and hf.int("qk_head_dim") != qk:
        hf.problem("qk_head_dim", hf.cfg["qk_head_dim"], f"qk_nope_head_dim + qk_rope_head_dim = {qk}")
    if hf.has("head_dim") and hf.int("head_dim") != hf.int("qk_rope_head_dim", 0):
        hf.problem("head_dim", hf.cfg["head_dim"], f"qk_rope_head_dim = {hf.cfg.get('qk_rope_head_dim')} (an MLA "
                   "config's head_dim is its rotary part)")
    return out


def hybrid_layer_pattern(hf: _HF, num_layers: int) -> list[str]:
    """MiMo-V2's ``hybrid_layer_pattern``: one 1 (sliding-window attention) or 0 (full) per layer."""
    flags = hf.list("hybrid_layer_pattern") or []
    if len(flags) != num_layers or any(f not in (0, 1) or isinstance(f, bool) for f in flags):
        hf.problem("hybrid_layer_pattern", flags, f"one 1 (sliding window) or 0 (full attention) for each of the "
                   f"{num_layers} layers")
        return ["full"] * num_layers
    return ["sliding" if f else "full" for f in flags]


def sliding_layer_shapes(hf: _HF, attention: list[str], is_mla: bool, heads: int, head_dim: int) -> dict[str, Any]:
    """Softmax layers whose shapes differ by kind (MiMo-V2): values narrower than keys (``v_head_dim``
    outside MLA), the sliding layers' KV heads (``swa_num_key_value_heads``; their query heads and
    head sizes, ``swa_num_attention_heads``, ``swa_head_dim``, ``swa_v_head_dim``, must be the full
    layers'), attention sinks on the sliding layers or on all (``add_swa_attention_sink_bias``,
    ``add_full_attention_sink_bias``; sinks on the full layers alone are not modelled)."""
    swa_keys = ("swa_num_attention_heads", "swa_num_key_value_heads", "swa_head_dim", "swa_v_head_dim",
                "sliding_window_size", "add_swa_attention_sink_bias", "add_full_attention_sink_bias")
    if is_mla:
        return {}
    out: dict[str, Any] = {}
    v = hf.int("v_head_dim", 0)
    if v and v != head_dim:
        out["v_head_dim"] = v
    if "sliding" not in attention:   # no sliding layer: their shapes change nothing
        hf.consider(*swa_keys[:5], "add_swa_attention_sink_bias")
    else:
        same = (("swa_num_attention_heads", heads), ("swa_head_dim", head_dim), ("swa_v_head_dim", v or head_dim))
        for key, want in same:
            if hf.has(key) and hf.int(key) != want:
                hf.problem(key, hf.cfg[key], f"{want}, as the full-attention layers (only the sliding layers' KV "
                           "heads may differ)")
        if hf.has("swa_num_key_value_heads"):
            out["sliding_num_kv_heads"] = hf.int("swa_num_key_value_heads")
            if heads % out["sliding_num_kv_heads"]:
                hf.problem("swa_num_key_value_heads", out["sliding_num_kv_heads"],
                           f"a divisor of num_attention_heads = {heads}")
        window = hf.cfg.get("sliding_window")
        if hf.has("sliding_window_size") and window is not None and hf.int("sliding_window_size") != window:
            hf.problem("sliding_window_size", hf.cfg["sliding_window_size"], f"sliding_window = {window}")
        if hf.bool("add_swa_attention_sink_bias", False):
            out["sliding_attention_sinks"] = True
    if hf.bool("add_full_attention_sink_bias", False):
        if "sliding" in attention and not out.get("sliding_attention_sinks"):
            hf.problem("add_full_attention_sink_bias", True, "false, or sinks on the sliding layers too "
                       "(sinks on the full-attention layers alone are not modelled)")
        out["attention_sinks"] = True
        out.pop("sliding_attention_sinks", None)
    return out


def family_attention_problems(hf: _HF, model_type: str, num_layers: int) -> None:
    """Attention a family declares that sievesim does not model: MiniMax's ``attn_type_list`` must
    give softmax attention (1) in every layer (MiniMax-M2 writes one per layer; MiniMax-Text-01 /
    M1's lightning-attention layers, 0, are not modelled)."""
    kinds = hf.list("attn_type_list") if model_type.startswith("minimax") else None
    if kinds is not None and (len(kinds) < num_layers or any(k != 1 or isinstance(k, bool) for k in kinds)):
        hf.problem("attn_type_list", kinds, f"1 (softmax attention) for each of the {num_layers} layers: "
                   "lightning-attention layers (0) are not modelled")
