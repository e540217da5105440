"""Read a Hugging Face ``config.json`` as published: :func:`from_hf_config`.

The reading runs in stages, each a function below, in this order: the file and its language model
(``text_config``), the sizes every config gives, the head size, the attention kind of every layer,
the MLP kind of every layer, the expert widths and shared experts, the per-family extra weights;
then the keys nobody read. Every problem a stage finds is collected (:class:`~sievesim.models.hf_keys._HF`)
and all are reported together. What each key means is in :mod:`~sievesim.models.hf_keys`; Llama 4's
own rules are in :mod:`~sievesim.models.llama4`.
"""
from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any, Mapping

from .._inputs import is_int as _is_int, read_text as _read_text
from ..errors import ConfigError, field_error
from . import gemma4, llama4, nemotron_h
from .hf_families import family_attention_problems, family_weights, hybrid_layer_pattern, mtp_layer_count, \
    routing_groups, sliding_layer_shapes, sparse_attention
from .hf_keys import _EXPERT_COUNT_KEYS, _HF, _HF_LAYER_TYPES, _STRUCTURAL_NAME, _TOP_K_KEYS, _TORCH_DTYPE_BYTES, \
    STRUCTURAL_KEYS, VERIFIED_FAMILIES, is_verified_family, no_decode_effect
from .spec import ModelSpec, _kind_problems


class UnverifiedFamilyWarning(UserWarning):
    """A Hugging Face config of a ``model_type`` outside :data:`VERIFIED_FAMILIES` was read."""


def from_hf_config(path_or_dict: str | os.PathLike[str] | Mapping[str, Any], *, name: str | None = None,
                   dtype_bytes: float = 2.0) -> ModelSpec:
    """Build a spec from a Hugging Face ``config.json`` as published (or the parsed dict).

    Understands the GPT-OSS, Mixtral, Qwen2-MoE / Qwen3-MoE / Qwen3-Next / Qwen3.5-MoE,
    DeepSeekMoE / DeepSeek-V2/V3, Kimi-K2 / K2.5, GLM-4.5, MiniMax-M2, Ling, OLMoE and Llama 4 field
    names (the per-family small weights: :mod:`~sievesim.models.hf_families`), a nested
    ``text_config`` (multimodal checkpoints: the language model only), ``layer_types``,
    ``full_attention_interval``, ``first_k_dense_replace``, ``moe_layer_freq`` (an integer or a list),
    ``decoder_sparse_step``, ``mlp_only_layers``, ``interleave_moe_layer_step``, ``moe_layers``,
    ``intermediate_size_mlp``, ``no_rope_layers`` and ``attention_chunk_size``.
    Weights are bf16 (``dtype_bytes = 2``) unless told otherwise, as in the Sieve paper;
    ``mamba_ssm_dtype`` sets the linear-attention state width.

    Nothing is guessed: a dense model (no expert-count field), a missing needed field, or a
    structural key (:data:`STRUCTURAL_KEYS`) the reader does not use for this family raises
    :class:`ConfigError` naming it. Keys known to change nothing in a decode step
    (:data:`~sievesim.models.hf_keys.NO_DECODE_EFFECT_KEYS`) are accepted; every key of the language
    model's config that the reader did not use is listed, with the reason, in the spec's
    ``ignored_keys``. A ``model_type`` outside :data:`VERIFIED_FAMILIES` is read only
    when every key that may change its structure is understood, and its ``source`` says
    "unverified family".
    """
    raw, source, name = _read_config(path_or_dict, name)
    cfg = _language_model(raw)
    hf = _HF(cfg, source)
    model_type = str(cfg.get("model_type") or raw.get("model_type") or "")
    top_type = str(raw.get("model_type") or model_type)
    verified = is_verified_family(model_type) or is_verified_family(top_type)
    is_llama4 = llama4.is_llama4(model_type, top_type)

    expert_key = hf.first(_EXPERT_COUNT_KEYS)
    if expert_key is None or cfg[expert_key] == 0:  # not an MoE model: nothing else is worth reporting
        raise field_error(" / ".join(_EXPERT_COUNT_KEYS), "<missing>",
                          f"a routed-expert count: sievesim simulates MoE models and this config "
                          f"(model_type {model_type or '?'!r}, architectures {raw.get('architectures') or []}) "
                          "looks dense or unknown", source=source)
    hf.check_types()  # type and range of every key present, all problems in one message
    hf.used.discard("sliding_window")  # consulted below only where a layer uses it
    num_experts = hf.int(expert_key)
    top_k = hf.int(hf.first(_TOP_K_KEYS) or _TOP_K_KEYS[0])
    num_layers = hf.int("num_hidden_layers")
    hidden = hf.int("hidden_size")
    heads = hf.int("num_attention_heads")
    kv_heads = hf.int("num_key_value_heads", heads)
    vocab = hf.int("vocab_size")

    # From here on every value has its type; structural problems are collected and reported together.
    kw: dict[str, Any] = {}
    is_mla = hf.has("kv_lora_rank")
    head_dim = _head_dim(hf, kw, is_mla, hidden, heads)
    if nemotron_h.is_nemotron_h(model_type, cfg):   # hybrid Mamba-2 / attention / MoE blocks
        attention, mlp = nemotron_h.layer_kinds(hf, num_layers)
        num_layers = len(attention)
        _attention_widths(hf, kw, attention, "hybrid")
        kw.update(nemotron_h.mamba_fields(hf, attention))
    else:
        attention = _layer_attention(hf, kw, num_layers, model_type, is_mla, is_llama4)
        family_attention_problems(hf, model_type, num_layers)
        mlp = _layer_mlp(hf, num_layers, model_type, is_llama4)
    moe_inter, dense_inter = _mlp_widths(hf, mlp, model_type, is_llama4)
    n_shared, shared_inter, shared_gate = _shared_experts(hf, moe_inter, is_llama4)
    if verified:
        family = f"verified family ({VERIFIED_FAMILIES.get(model_type) or VERIFIED_FAMILIES[top_type]})"
    else:
        family = "unverified family: counts not checked against published figures"
    kw.update(
        name=name or model_type or "hf-model",
        num_layers=num_layers, hidden_size=hidden, num_attention_heads=heads,
        num_kv_heads=heads if is_mla else kv_heads, head_dim=head_dim,
        layer_attention=tuple(attention), layer_mlp=tuple(mlp),
        num_experts=num_experts, top_k=top_k, moe_intermediate_size=moe_inter,
        num_shared_experts=n_shared, shared_expert_intermediate_size=shared_inter,
        shared_expert_gate=shared_gate, dense_intermediate_size=dense_inter, vocab_size=vocab,
        tie_word_embeddings=hf.bool("tie_word_embeddings", False), dtype_bytes=dtype_bytes,
        **family_weights(hf, model_type), **routing_groups(hf), **sparse_attention(hf, is_mla),
        num_mtp_layers=mtp_layer_count(hf, model_type),
        source=f"Hugging Face config ({source}; model_type {model_type or '?'}; {family})",
    )
    kw.update(sliding_layer_shapes(hf, attention, is_mla, heads, head_dim))
    if gemma4.is_gemma4(model_type, top_type):   # global layers' own heads, the dense MLP beside the experts
        kw.update(gemma4.gemma4_fields(hf, attention, hidden))
    if not is_mla and heads % kv_heads:
        hf.problem("num_key_value_heads", kv_heads, f"a divisor of num_attention_heads = {heads}")
    for key in ("hidden_act", "hidden_activation", "mlp_hidden_act"):
        if hf.cfg.get(key) in _UNGATED_ACTIVATIONS and key not in hf.used:  # Nemotron-H reads its own  # every MLP sievesim counts is gated (three matrices)
            hf.problem(key, hf.cfg[key], "the activation of a gated MLP (silu, gelu, ...): a "
                       f"{hf.cfg[key]} MLP is not gated (two matrices, not three), which sievesim does not model")
            hf.consider(key)
    hf.consider("quantization_config")  # read below (formats_from_quantization: formats, or a warning)
    kw["ignored_keys"] = _check_unused_keys(hf, model_type, verified)
    hf.raise_if_any()
    spec = _build(kw, source)
    formats = formats_from_quantization(raw.get("quantization_config", cfg.get("quantization_config")), source)
    if formats:
        spec = spec.with_formats(formats)
    if not verified:
        warnings.warn(f"{source}: model_type {model_type or '?'!r} is an unverified family: every structural key "
                      "was understood, but its parameter counts were not checked against published figures",
                      UnverifiedFamilyWarning, stacklevel=2)
    return spec


#: ``quant_method`` values read from ``quantization_config`` (others: a warning, weights stay bf16).
QUANT_METHODS = ("mxfp4", "fp8", "modelopt")


class UnknownQuantizationWarning(UserWarning):
    """A ``quantization_config`` whose method sievesim does not read: the weights stay bf16."""


def formats_from_quantization(qc: Any, source: str = "config.json") -> dict[str, str]:
    """The storage formats a Hugging Face ``quantization_config`` declares, by part (``experts``,
    ``weights``, ``kv``; :mod:`sievesim.formats`).

    * ``quant_method = "mxfp4"`` (GPT-OSS): the routed experts in MXFP4; attention, router,
      embedding and LM head stay bf16 (its ``modules_to_not_convert``).
    * ``quant_method = "fp8"`` (DeepSeek-V3/R1, Qwen3-FP8): every linear weight in FP8, with
      128 x 128 block scales when ``weight_block_size`` says so.
    * ``quant_method = "modelopt"`` with ``quant_algo`` NVFP4 or FP8 (NVIDIA's FP4 checkpoints):
      the experts in that format (and the other linear weights unless ``exclude_modules`` names
      attention), ``kv_cache_quant_algo = "FP8"``: an FP8 KV cache.
    """
    if qc is None:
        return {}
    if not isinstance(qc, Mapping):
        raise field_error("quantization_config", qc, "a table (the checkpoint's quantisation)", source=source)
    method = str(qc.get("quant_method", "")).lower()
    if method == "mxfp4":
        return {"experts": "mxfp4"}
    if method == "fp8":
        block = qc.get("weight_block_size")
        fmt = "fp8-block" if block else "fp8"
        if block is not None and list(block) != [128, 128]:
            raise field_error("quantization_config.weight_block_size", block, "[128, 128] (the block scales "
                              "sievesim's fp8-block format counts)", source=source)
        return {"experts": fmt, "weights": fmt}
    if method == "modelopt":
        algo = str(qc.get("quant_algo", "")).upper()
        fmt = {"NVFP4": "nvfp4", "FP8": "fp8"}.get(algo)
        if fmt is None:
            raise field_error("quantization_config.quant_algo", qc.get("quant_algo"), "NVFP4 or FP8", source=source)
        out = {"experts": fmt}
        excluded = " ".join(str(x) for x in qc.get("exclude_modules", qc.get("ignore", [])) or [])
        if "attn" not in excluded and "attention" not in excluded:
            out["weights"] = fmt
        if str(qc.get("kv_cache_quant_algo", "")).upper() == "FP8":
            out["kv"] = "fp8"
        return out
    warnings.warn(f"{source}: quantization_config.quant_method = {qc.get('quant_method')!r} is not read "
                  f"(one of {list(QUANT_METHODS)}): the weights are taken as bf16; set the formats with "
                  "--weight-format", UnknownQuantizationWarning, stacklevel=3)
    return {}


# ====================================================================== stages of the reading
def _read_config(path_or_dict: str | os.PathLike[str] | Mapping[str, Any],
                 name: str | None) -> tuple[Mapping[str, Any], str, str | None]:
    """The parsed config, where it comes from (for messages), and the model's name (given, or
    the folder holding ``config.json``, or the file's stem)."""
    if isinstance(path_or_dict, Mapping):
        return path_or_dict, name or "config.json", name
    from .._validate import check_name_or_path
    path = Path(check_name_or_path("path_or_dict", path_or_dict, "a config.json path, its folder, or the parsed dict"))
    if path.is_dir():
        path = path / "config.json"
    text = _read_text(path, "config.json")
    from .._inputs import json_int
    try:
        raw = json.loads(text, parse_int=json_int)
    except ConfigError as exc:       # a number of thousands of digits, refused before int()
        raise ConfigError(f"{path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON: {exc}") from None
    except (ValueError, RecursionError) as exc:  # an integer of thousands of digits, deep nesting
        raise ConfigError(f"{path}: not valid JSON: {type(exc).__name__}: {str(exc).splitlines()[0]}") from None
    source = str(path)
    if not isinstance(raw, Mapping):
        raise field_error("config.json", type(raw).__name__, "a JSON object", source=source)
    if name is None:
        name = path.parent.name if path.name == "config.json" and path.parent.name else path.stem
    return raw, source, name


def _language_model(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The language model's keys: a multimodal checkpoint nests them in ``text_config`` (which
    inherits ``tie_word_embeddings`` from the top level)."""
    cfg: dict[str, Any] = dict(raw)
    if isinstance(raw.get("text_config"), Mapping):
        text_cfg = dict(raw["text_config"])
        for key in ("tie_word_embeddings",):
            if key in raw and key not in text_cfg:
                text_cfg[key] = raw[key]
        cfg = text_cfg
    return cfg


def _head_dim(hf: _HF, kw: dict[str, Any], is_mla: bool, hidden: int, heads: int) -> int:
    """Elements per head: MLA's ``qk_nope + qk_rope`` (its ranks go into ``kw``), an explicit
    ``head_dim``, or ``hidden_size / num_attention_heads``."""
    if is_mla:
        kw.update(q_lora_rank=hf.int("q_lora_rank", 0), kv_lora_rank=hf.int("kv_lora_rank"),
                  qk_nope_head_dim=hf.int("qk_nope_head_dim"), qk_rope_head_dim=hf.int("qk_rope_head_dim"),
                  v_head_dim=hf.int("v_head_dim"))
        return kw["qk_nope_head_dim"] + kw["qk_rope_head_dim"]
    if hf.has("head_dim"):
        return hf.int("head_dim")
    if hidden % heads:
        hf.problem("num_attention_heads", heads, f"a divisor of hidden_size = {hidden} (config has no head_dim)")
    return max(hidden // heads, 1)


def _interval_attention(interval: int, num_layers: int) -> list[str]:
    """Qwen3-Next / Qwen3.5: every ``interval``-th layer is full attention, the rest linear."""
    return ["full" if (i + 1) % interval == 0 else "linear" for i in range(num_layers)]


def _layer_attention(hf: _HF, kw: dict[str, Any], num_layers: int, model_type: str, is_mla: bool,
                     is_llama4: bool) -> list[str]:
    """The attention kind of every layer, from the first of: ``layer_types``, Llama 4's RoPE/NoPE
    layers, ``full_attention_interval``, MLA, the sliding window; and into ``kw`` the widths those
    kinds need (window, chunk, linear-attention heads)."""
    hf.consider("use_sliding_window", "max_window_layers")  # read below only where they apply
    layer_types = hf.list("layer_types")
    if layer_types is not None:
        branch = "layer_types"
        attention = _attention_from_layer_types(hf, layer_types, num_layers, is_mla, is_llama4)
    elif hf.has("hybrid_layer_pattern"):   # MiMo-V2
        branch = "hybrid_layer_pattern"
        attention = hybrid_layer_pattern(hf, num_layers)
    elif is_llama4 or hf.has("no_rope_layers"):
        branch = "llama4"
        attention = llama4.attention_kinds(hf, num_layers)
    elif hf.has("full_attention_interval"):
        branch = "interval"
        attention = _interval_attention(hf.int("full_attention_interval"), num_layers)
    elif is_mla:
        branch = "mla"
        attention = ["mla"] * num_layers
    else:
        branch = "sliding_window"
        attention = _sliding_window_attention(hf, num_layers, model_type)
    _attention_widths(hf, kw, attention, branch)
    return attention


def _attention_from_layer_types(hf: _HF, layer_types: list[Any], num_layers: int, is_mla: bool,
                                is_llama4: bool) -> list[str]:
    """``layer_types``, one name per layer (:data:`~sievesim.models.hf_keys._HF_LAYER_TYPES`)."""
    if len(layer_types) < num_layers:
        hf.problem("layer_types", f"<{len(layer_types)} entries>",
                   f"one entry per layer (num_hidden_layers = {num_layers})")
    entries = layer_types[:num_layers]
    _kind_problems("layer_types", entries, tuple(sorted(_HF_LAYER_TYPES)), hf.problems, hf.source)
    attention = [_HF_LAYER_TYPES.get(t, "full") if isinstance(t, str) else "full" for t in entries]
    if is_mla:
        attention = ["mla" if a == "full" else a for a in attention]
    if is_llama4:  # layer_types already says which layers are chunked; RoPE/NoPE changes no cost
        hf.consider("no_rope_layers", "no_rope_layer_interval")
    if hf.has("full_attention_interval"):  # Qwen3.5 gives both: they must agree
        interval = hf.int("full_attention_interval")
        if attention != _interval_attention(interval, num_layers) and len(entries) == num_layers:
            hf.problem("full_attention_interval", interval,
                       "the pattern layer_types gives (every N-th layer full, the rest linear)")
    return attention


def _sliding_window_attention(hf: _HF, num_layers: int, model_type: str) -> list[str]:
    """Full attention, or sliding-window layers where ``sliding_window`` applies: Qwen2/3 slide
    from ``max_window_layers`` on (all layers when it is absent), Mixtral/Mistral everywhere."""
    cfg = hf.cfg
    use_sw = hf.bool("use_sliding_window", True)
    window = cfg.get("sliding_window")
    hf.consider("sliding_window")
    if not (use_sw and window):
        return ["full"] * num_layers
    max_window_layers = hf.int("max_window_layers", num_layers)
    # Qwen2/3 convention: layers >= max_window_layers use the sliding window.
    attention = ["sliding" if (i >= max_window_layers or "max_window_layers" not in cfg) else "full"
                 for i in range(num_layers)]
    if model_type.startswith("mixtral") or model_type.startswith("mistral"):
        attention = ["sliding"] * num_layers
    return attention


def _attention_widths(hf: _HF, kw: dict[str, Any], attention: list[str], branch: str) -> None:
    """Into ``kw``: the window of sliding layers, the chunk of chunked layers, the heads, sizes and
    state width of linear layers; keys no layer kind needs are marked understood."""
    cfg = hf.cfg
    # a window that a branch without sliding layers would drop while use_sliding_window asks for it
    # is left unconsulted, so the structural-key check names it
    window_dropped = branch in ("llama4", "interval", "mla") and cfg.get("use_sliding_window") is not False \
        and bool(cfg.get("sliding_window"))
    if "sliding" in attention:
        kw["sliding_window"] = hf.int("sliding_window", why="the config has sliding-window layers")
    elif not window_dropped:
        hf.consider("sliding_window")  # a window no layer uses (e.g. Qwen's with use_sliding_window false)
    if "chunked" not in attention:
        hf.consider("attention_chunk_size")  # no chunked layer: the chunk changes nothing
    if "chunked" in attention:
        kw["attention_chunk_size"] = hf.int("attention_chunk_size", why="the config has chunked layers")
    if "linear" in attention:
        kw.update(linear_num_key_heads=hf.int("linear_num_key_heads"),
                  linear_num_value_heads=hf.int("linear_num_value_heads"),
                  linear_key_head_dim=hf.int("linear_key_head_dim"),
                  linear_value_head_dim=hf.int("linear_value_head_dim"),
                  linear_conv_kernel_dim=hf.int("linear_conv_kernel_dim"))
        state_dtype = cfg.get("mamba_ssm_dtype")
        hf.consider("mamba_ssm_dtype")
        if state_dtype is not None:
            kw["state_dtype_bytes"] = _TORCH_DTYPE_BYTES[state_dtype]


def _layer_mlp(hf: _HF, num_layers: int, model_type: str, is_llama4: bool) -> list[str]:
    """The MLP kind of every layer: Llama 4's keys, else DeepSeek's leading dense layers and MoE
    frequency, else Qwen's step and dense-layer list."""
    mlp = llama4.mlp_kinds(hf, num_layers, is_llama4)
    if mlp is not None:
        return mlp
    if model_type.startswith("deepseek") or hf.has("first_k_dense_replace") or hf.has("moe_layer_freq"):
        first_dense = hf.int("first_k_dense_replace", 0)
        per_layer = hf.cfg.get("moe_layer_freq")
        if isinstance(per_layer, list):  # MiMo-V2: one 0 (dense) or 1 (MoE) per layer
            hf.used.add("moe_layer_freq")
            if len(per_layer) != num_layers or any(f not in (0, 1) or isinstance(f, bool) for f in per_layer):
                hf.problem("moe_layer_freq", per_layer,
                           f"an integer, or one 0 (dense) or 1 (MoE) per layer (num_hidden_layers = {num_layers})")
                per_layer = [1] * num_layers
            return ["moe" if (i >= first_dense and flag) else "dense" for i, flag in enumerate(per_layer)]
        freq = hf.int("moe_layer_freq", 1)
        return ["moe" if (i >= first_dense and i % freq == 0) else "dense" for i in range(num_layers)]
    step = hf.int("decoder_sparse_step", 1)
    only = hf.list("mlp_only_layers") or []
    if not all(_is_int(i) and 0 <= i < num_layers for i in only):
        hf.problem("mlp_only_layers", only, f"a list of layer indices from 0 to {num_layers - 1}")
    return ["moe" if (i not in only and (i + 1) % step == 0) else "dense" for i in range(num_layers)]


#: Activations used only in MLPs without a gate (Nemotron's squared ReLU).
_UNGATED_ACTIVATIONS = frozenset({"relu2", "relu_squared", "squared_relu"})

# Families whose intermediate_size is the dense FFN's, never the expert's: their expert width is
# moe_intermediate_size, and a config without it is refused rather than read with the dense width.
_EXPERT_WIDTH_APART = ("qwen", "deepseek", "kimi", "glm4_moe", "bailing")


def _mlp_widths(hf: _HF, mlp: list[str], model_type: str, is_llama4: bool) -> tuple[int, int]:
    """The intermediate size of one routed expert and of the dense layers' FFN (0 without dense layers)."""
    if hf.has("moe_intermediate_size"):
        moe_inter = hf.int("moe_intermediate_size")
    elif model_type.startswith(_EXPERT_WIDTH_APART):  # these give the expert width apart, always
        hf.problem("moe_intermediate_size", "<missing>", f"the expert width (model_type {model_type!r} "
                   "keeps intermediate_size for dense layers)")
        moe_inter = 1
    else:  # GPT-OSS, Mixtral, Llama 4: intermediate_size is the expert's
        moe_inter = hf.int("intermediate_size", why="the expert width, as the config has no moe_intermediate_size")
    dense_inter = 0
    if "dense" in mlp:
        if is_llama4 or hf.has("intermediate_size_mlp"):
            dense_inter = hf.int("intermediate_size_mlp", why="the config has dense layers")
        elif not hf.has("moe_intermediate_size"):
            if not model_type.startswith(_EXPERT_WIDTH_APART):  # else named above
                hf.problem("moe_intermediate_size", "<missing>",
                           "the expert width, distinct from intermediate_size (config has dense layers)")
        else:
            dense_inter = hf.int("intermediate_size", why="the dense FFN width: the config has dense layers")
    else:  # no dense layer: the dense widths change nothing
        hf.consider("intermediate_size", "intermediate_size_mlp")
    return moe_inter, dense_inter


def _shared_experts(hf: _HF, moe_inter: int, is_llama4: bool) -> tuple[int, int, bool]:
    """Shared experts per MoE layer, the width of one, and whether a sigmoid gate scales them:
    Llama 4's one ungated expert of the routed width; DeepSeek's ``n_shared_experts`` (Ling's
    ``num_shared_experts``), each of ``moe_intermediate_size`` unless
    ``moe_shared_expert_intermediate_size`` gives the width of one; Qwen's one gated expert of
    ``shared_expert_intermediate_size``."""
    if is_llama4:  # Llama4TextMoe: one shared expert of intermediate_size, no gate
        return 1, moe_inter, False
    count_key = hf.first(("n_shared_experts", "num_shared_experts"))
    if count_key is not None:  # DeepSeek / Ling: n shared experts, ungated
        n_shared = hf.int(count_key)
        width = moe_inter
        if hf.has("moe_shared_expert_intermediate_size") and n_shared:
            width = hf.int("moe_shared_expert_intermediate_size")
            if n_shared > 1:  # one width for several experts: per expert or in all? Not guessed
                hf.problem("moe_shared_expert_intermediate_size", width,
                           f"absent when {count_key} = {n_shared} > 1 (whether it is the width of one "
                           "shared expert or of all is not known for this family)")
        else:
            hf.consider("moe_shared_expert_intermediate_size")
        return n_shared, width if n_shared else 0, False
    if hf.has("shared_expert_intermediate_size") and hf.cfg["shared_expert_intermediate_size"] != 0:
        # Qwen2-MoE / Qwen3-Next / Qwen3.5: one gated shared expert
        return 1, hf.int("shared_expert_intermediate_size"), True
    return 0, 0, False


def _build(kw: dict[str, Any], source: str) -> ModelSpec:
    """The spec of what was read; a rule of the spec it breaks is reported against the file."""
    try:
        return ModelSpec(**kw)
    except ConfigError as exc:  # what the reading gives breaks a rule of the spec: name the file
        msg = str(exc)
        prefix = f"model {kw['name']!r}: "
        raise ConfigError(f"{source}: as read, {msg[len(prefix):]}" if msg.startswith(prefix) else msg) from None


# ====================================================================== keys nobody read
def _unset(value: Any) -> bool:
    """A value that switches nothing on (absent, null, false, 0, empty)."""
    return value is None or value is False or (_is_int(value) and value == 0) or value in ("", [], {})


def _check_unused_keys(hf: _HF, model_type: str, verified: bool) -> tuple[tuple[str, str], ...]:
    """The keys the reader did not use, each with why it changes nothing in a decode step
    (``ignored_keys``); structural keys the reader did not use, and keys whose names suggest
    structure that are neither used nor known to have no effect (in any family: a verified family's
    published files carry none, so such a key marks a variant the reader was not checked on), are
    problems instead, all named in one message."""
    unhandled, unknown, ignored = [], [], []
    for key, value in hf.cfg.items():
        if key in hf.used:
            continue
        why = no_decode_effect(key)
        if why is not None:
            ignored.append((key, why))
        elif _unset(value):
            ignored.append((key, f"set to {value!r}, which switches nothing on"))
        elif key in STRUCTURAL_KEYS:
            unhandled.append(f"{key} ({STRUCTURAL_KEYS[key]})")
        elif _STRUCTURAL_NAME.search(key):
            unknown.append(key)
        else:
            ignored.append((key, "not read: not a structural key, and its name suggests no shape"))
    family = f"model_type {model_type or '?'!r}"
    if unhandled:
        hf.problem(", ".join(unhandled), "<not handled>",
                   f"only structural keys that sievesim's reader handles for {family}: reading "
                   "on would simulate a different model (write a sievesim TOML instead, docs/models.md)")
    if unknown:
        checked = ("a verified family, but its published files carry no such key" if verified
                   else "an unverified family")
        hf.problem(", ".join(unknown), "<not understood>",
                   f"only keys sievesim understands: {family} is {checked}; a config is read only when "
                   "every key that may change its structure is understood, or is known to change "
                   "nothing in a decode step (write a sievesim TOML instead, docs/models.md)")
    return tuple(sorted(ignored))
