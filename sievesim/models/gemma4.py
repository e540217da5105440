"""Gemma 4's rules for reading a Hugging Face ``config.json`` (``model_type`` ``gemma4`` / text config
``gemma4_text``; transformers' ``Gemma4TextConfig`` and the checkpoint's tensors).

* Attention from ``layer_types``: sliding-window layers of ``head_dim`` with ``num_key_value_heads``,
  global (full) layers of ``global_head_dim`` with ``num_global_key_value_heads``; with
  ``attention_k_eq_v`` the global layers have no value projection and use (and cache) their keys as
  values. Per-head q and k RMSNorms (``q_norm``, ``k_norm``; the value norm has no weights).
* ``enable_moe_block``: every layer runs a dense GeGLU MLP of ``intermediate_size`` beside its MoE
  block (``num_experts`` of ``moe_intermediate_size``, top ``top_k_experts``); both see every token
  and their outputs add, as a shared expert's do: read as one shared expert of ``intermediate_size``.
* The small weights beyond those shapes, per layer: seven RMSNorms instead of two (around the
  attention, the dense MLP and the MoE block), the router's input scale (``h``), its per-expert output
  scale (``E``: counted as the router's bias) and a layer scalar: ``extra_layer_params = 6h + 1``.
"""
from __future__ import annotations

from typing import Any

from .hf_keys import _HF

#: Keys of Gemma 4's config read here, or known to change nothing in its decode step when off.
_OFF_WHEN_ZERO = ("hidden_size_per_layer_input", "num_kv_shared_layers")


def is_gemma4(model_type: str, top_type: str) -> bool:
    """True when the language model's or the checkpoint's ``model_type`` is a Gemma 4 one."""
    return model_type.startswith("gemma4") or top_type.startswith("gemma4")


def gemma4_fields(hf: _HF, attention: list[str], hidden: int) -> dict[str, Any]:
    """The :class:`~sievesim.models.ModelSpec` fields of a Gemma 4 config beyond the common reading:
    the global layers' head size and KV heads, keys as values, the dense MLP beside the MoE block as a
    shared expert, q/k norms, the router's per-expert scale and the small per-layer weights."""
    out: dict[str, Any] = dict(qk_norm=True, router_bias=True, extra_layer_params=6 * hidden + 1)
    if "full" in attention:
        out["full_head_dim"] = hf.int("global_head_dim", why="Gemma 4's global layers have their own head size")
        out["full_num_kv_heads"] = hf.int("num_global_key_value_heads", why="Gemma 4's global layers have their "
                                          "own KV heads")
        out["full_k_eq_v"] = hf.bool("attention_k_eq_v", False)
        heads = hf.cfg.get("num_attention_heads")
        if isinstance(heads, int) and heads % out["full_num_kv_heads"]:
            hf.problem("num_global_key_value_heads", out["full_num_kv_heads"], f"a divisor of num_attention_heads "
                       f"= {heads}")
    else:
        hf.consider("global_head_dim", "num_global_key_value_heads", "attention_k_eq_v")
    if not hf.bool("enable_moe_block", False):
        hf.problem("enable_moe_block", hf.cfg.get("enable_moe_block"), "true (a Gemma 4 with experts runs its MoE "
                   "block beside the dense MLP)")
    out.update(num_shared_experts=1, shared_expert_intermediate_size=hf.int(
        "intermediate_size", why="the dense MLP beside Gemma 4's MoE block"))
    if hf.bool("use_double_wide_mlp", False):
        hf.problem("use_double_wide_mlp", True, "false (a double-wide dense MLP is not modelled)")
    for key in _OFF_WHEN_ZERO:   # per-layer input embeddings, layers sharing another's KV cache
        if hf.cfg.get(key):
            hf.problem(key, hf.cfg[key], "0 (not modelled)")
        hf.consider(key)
    if not hf.cfg.get("hidden_size_per_layer_input"):
        hf.consider("vocab_size_per_layer_input")   # the per-layer inputs' vocabulary: unused without them
    return out
