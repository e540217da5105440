"""Nemotron-H's rules for reading a Hugging Face ``config.json`` (``model_type`` ``nemotron_h``;
the checkpoint's own ``configuration_nemotron_h.py`` / ``modeling_nemotron_h.py``).

* ``hybrid_override_pattern`` gives one block per character: ``M`` a Mamba-2 mixer, ``*`` softmax
  attention, ``E`` an MoE MLP, ``-`` a dense MLP. Each block is a residual RMSNorm + one of them.
  A sievesim layer is a mixer and the MLP block that follows it, if any (:func:`layer_kinds`):
  ``"ME"`` is one layer (``mamba``, ``moe``), a lone ``"M"`` one layer without an MLP (``none``).
* The Mamba-2 mixer (:func:`mamba_fields`): ``mamba_num_heads`` heads of ``mamba_head_dim``
  (its inner width is their product, not ``expand * hidden_size``), ``n_groups`` B/C groups of
  ``ssm_state_size``, a ``conv_kernel``-tap convolution with a bias (``use_conv_bias``), no
  projection biases (``mamba_proj_bias``); its state is kept in ``mamba_ssm_cache_dtype``.
* The MLPs: squared-ReLU (``mlp_hidden_act = "relu2"``) experts and shared expert of two matrices
  (up, down; no gate), one shared expert of ``moe_shared_expert_intermediate_size``, a router with a
  per-expert score-correction bias.
"""
from __future__ import annotations

from typing import Any

from .hf_keys import _HF, _TORCH_DTYPE_BYTES

#: ``hybrid_override_pattern`` characters: mixers and MLPs, with their sievesim kind.
MIXERS = {"M": "mamba", "*": "full"}
MLPS = {"E": "moe", "-": "dense"}
#: Activations of Nemotron-H's MLPs without a gate (up, activation, down).
UNGATED = frozenset({"relu2", "relu_squared", "squared_relu"})
#: Keys of Nemotron-H's config that change nothing in a decode step, with why (marked read).
_NO_EFFECT = ("chunk_size", "expand", "mamba_hidden_act", "time_step_floor", "time_step_max", "time_step_min",
              "time_step_limit", "mamba_chunk_size")


def is_nemotron_h(model_type: str, cfg: Any) -> bool:
    """True for a Nemotron-H config (its ``model_type``, or a ``hybrid_override_pattern``)."""
    return model_type == "nemotron_h" or cfg.get("hybrid_override_pattern") is not None


def layer_kinds(hf: _HF, num_blocks: int) -> tuple[list[str], list[str]]:
    """The attention and MLP kind of every sievesim layer from ``hybrid_override_pattern``: a mixer
    (``M``, ``*``) and the MLP block after it (``E``; none when the next block is a mixer). An MLP
    block without a mixer before it, a dense ``-`` block beside MoE blocks, or a pattern of another
    length than ``num_hidden_layers`` is a problem naming the key."""
    pattern = hf.cfg.get("hybrid_override_pattern")
    hf.consider("hybrid_override_pattern")
    expected = (f"one of {sorted(MIXERS)} (Mamba-2, attention) or {sorted(MLPS)} (MoE, dense MLP) per block, "
                f"{num_blocks} blocks (num_hidden_layers), each MLP block after a mixer block")
    if not isinstance(pattern, str) or len(pattern) != num_blocks or not pattern \
            or any(c not in MIXERS and c not in MLPS for c in pattern):
        hf.problem("hybrid_override_pattern", pattern, expected)
        return ["full"], ["moe"]
    attention: list[str] = []
    mlp: list[str] = []
    for c in pattern:
        if c in MIXERS:
            attention.append(MIXERS[c])
            mlp.append("none")
        elif not mlp or mlp[-1] != "none":
            hf.problem("hybrid_override_pattern", pattern, expected)
            return ["full"], ["moe"]
        else:
            mlp[-1] = MLPS[c]
    if "dense" in mlp:
        hf.problem("hybrid_override_pattern", pattern, "no dense MLP block ('-') in a model with MoE blocks "
                   "('E'): layers without an MLP beside dense ones are not modelled")
    return attention, mlp


def mamba_fields(hf: _HF, attention: list[str]) -> dict[str, Any]:
    """The :class:`~sievesim.models.ModelSpec` Mamba-2 fields and state width (when a layer is ``mamba``),
    and the MLP's gating (``mlp_gated`` false for a squared-ReLU MLP); keys that change nothing in a
    decode step are marked read."""
    hf.consider(*_NO_EFFECT)
    out: dict[str, Any] = {}
    act = hf.cfg.get("mlp_hidden_act")
    hf.consider("mlp_hidden_act")
    if act is not None:
        if act in UNGATED:
            out["mlp_gated"] = False
        elif act != "silu":
            hf.problem("mlp_hidden_act", act, f"one of {sorted(UNGATED)} (Nemotron-H's MLPs without a gate) or silu")
    if hf.bool("mlp_bias", False):
        hf.problem("mlp_bias", True, "false (biases on the MLP projections are not modelled)")
    if "mamba" not in attention:
        hf.consider("mamba_num_heads", "mamba_head_dim", "ssm_state_size", "n_groups", "conv_kernel",
                    "mamba_proj_bias", "use_conv_bias", "mamba_ssm_cache_dtype")
        return out
    out.update(mamba_num_heads=hf.int("mamba_num_heads"), mamba_head_dim=hf.int("mamba_head_dim"),
               mamba_state_size=hf.int("ssm_state_size"), mamba_groups=hf.int("n_groups", 1),
               mamba_conv_kernel=hf.int("conv_kernel"))
    if out["mamba_num_heads"] % out["mamba_groups"]:
        hf.problem("n_groups", out["mamba_groups"], f"a divisor of mamba_num_heads = {out['mamba_num_heads']} "
                   "(groups of heads sharing B and C)")
    if hf.bool("mamba_proj_bias", False):
        hf.problem("mamba_proj_bias", True, "false (biases on the Mamba projections are not modelled)")
    if not hf.bool("use_conv_bias", True):
        hf.problem("use_conv_bias", False, "true (a Mamba convolution without its bias is not modelled)")
    state = hf.cfg.get("mamba_ssm_cache_dtype")
    hf.consider("mamba_ssm_cache_dtype")
    if state is not None:
        if isinstance(state, str) and state in _TORCH_DTYPE_BYTES:
            out["state_dtype_bytes"] = _TORCH_DTYPE_BYTES[state]
        else:
            hf.problem("mamba_ssm_cache_dtype", state, f"one of {sorted(_TORCH_DTYPE_BYTES)}")
    return out
