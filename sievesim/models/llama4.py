"""Llama 4's rules for reading a Hugging Face ``config.json`` (``model_type`` ``llama4`` /
``llama4_text``; transformers' ``Llama4TextConfig``).

* Attention (iRoPE): ``no_rope_layers[i] = 1`` (RoPE) is chunked attention over chunks of
  ``attention_chunk_size`` tokens, ``0`` (NoPE) is global attention (:func:`attention_kinds`).
* MoE placement: ``moe_layers`` (indices, as transformers saves it) or every
  ``interleave_moe_layer_step``-th layer (:func:`mlp_kinds`); the dense layers' FFN is
  ``intermediate_size_mlp`` wide.
* One shared expert of the routed experts' width, without a gate (read in :mod:`~sievesim.models.hf`).
"""
from __future__ import annotations

from .hf_keys import _HF


def is_llama4(model_type: str, top_type: str) -> bool:
    """True when the language model's or the checkpoint's ``model_type`` is a Llama 4 one."""
    return model_type.startswith("llama4") or top_type.startswith("llama4")


def attention_kinds(hf: _HF, num_layers: int) -> list[str]:
    """Llama 4's iRoPE layers: ``no_rope_layers[i] = 1`` (RoPE) is chunked attention over chunks of
    ``attention_chunk_size`` tokens, ``0`` (NoPE) is global attention; an empty or missing list
    means every ``no_rope_layer_interval``-th layer (default 4) is NoPE (transformers' default)."""
    flags = hf.list("no_rope_layers") or []
    if not flags:
        interval = hf.int("no_rope_layer_interval", 4)
        flags = [int((i + 1) % interval != 0) for i in range(num_layers)]
    else:
        hf.consider("no_rope_layer_interval")
        if len(flags) < num_layers or any(f not in (0, 1) or isinstance(f, bool) for f in flags):
            hf.problem("no_rope_layers", flags,
                       f"one 0 (NoPE) or 1 (RoPE) per layer (num_hidden_layers = {num_layers})")
            flags = [1] * num_layers
    chunked = hf.has("attention_chunk_size")
    return ["chunked" if (flag and chunked) else "full" for flag in flags[:num_layers]]


def mlp_kinds(hf: _HF, num_layers: int, llama4: bool) -> list[str] | None:
    """The MLP kind of every layer by Llama 4's keys: ``moe_layers`` when given (it wins over the
    step), else every ``interleave_moe_layer_step``-th layer (default 1) is MoE; None when the
    config has neither key and is no Llama 4 (``llama4``)."""
    moe_layers = hf.index_list("moe_layers", num_layers)
    if moe_layers is not None:
        hf.consider("interleave_moe_layer_step")
        return ["moe" if i in set(moe_layers) else "dense" for i in range(num_layers)]
    if hf.has("interleave_moe_layer_step") or llama4:
        step = hf.int("interleave_moe_layer_step", 1)
        # transformers' Llama4TextConfig: moe_layers = range(step - 1, num_layers, step)
        return ["moe" if i % step == step - 1 else "dense" for i in range(num_layers)]
    return None
