"""What the keys of a Hugging Face ``config.json`` mean to sievesim's reader (:mod:`~sievesim.models.hf`).

The tables: the names one quantity goes by (:data:`_EXPERT_COUNT_KEYS`, :data:`_TOP_K_KEYS`),
the type and range of every key the reader may consult (:data:`_HF_INT_KEYS` and the boolean and
list keys), the families whose reading is checked against published parameter counts
(:data:`VERIFIED_FAMILIES`), the keys that change a model's structure (:data:`STRUCTURAL_KEYS`)
and those known not to (:data:`_NON_STRUCTURAL_KEYS`), and the layer-type names
(:data:`_HF_LAYER_TYPES`); and :class:`_HF`, which reads one config's keys checked against them.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Any, Iterable, Mapping

from .._inputs import is_int as _is_int
from .._validate import Problems, check_int

_EXPERT_COUNT_KEYS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")
_TOP_K_KEYS = ("num_experts_per_tok", "experts_per_token", "moe_topk", "num_experts_per_token", "top_k_experts")
_TORCH_DTYPE_BYTES = {"bfloat16": 2.0, "float16": 2.0, "float32": 4.0, "float8_e4m3fn": 1.0}
_HF_MAX_INT = 1 << 24  # no size or count of a published config comes near (vocabularies < 2**19)
_KNOWN_TORCH_DTYPES = frozenset(_TORCH_DTYPE_BYTES) | {"float64", "float8_e5m2", "auto"}

#: ``model_type`` values whose reading is checked against the publisher's parameter counts
#: (``docs/models.md``, ``tests/test_models.py``), with the models it was checked on. Any other
#: family is read only when every structural key in its config is understood, and is reported as
#: an "unverified family".
VERIFIED_FAMILIES: dict[str, str] = {
    "gpt_oss": "GPT-OSS-20B, GPT-OSS-120B",
    "qwen3_moe": "Qwen3-30B-A3B, Qwen3-235B-A22B, Qwen3-Coder-480B-A35B",
    "qwen3_next": "Qwen3-Next-80B-A3B",
    "qwen3_5_moe": "Qwen3.5-397B-A17B", "qwen3_5_moe_text": "Qwen3.5-397B-A17B",
    "mixtral": "Mixtral-8x7B, Mixtral-8x22B",
    "deepseek_v2": "DeepSeek-V2-Lite", "deepseek_v3": "DeepSeek-V3",
    "llama4": "Llama-4-Scout-17B-16E, Llama-4-Maverick-17B-128E",
    "llama4_text": "Llama-4-Scout-17B-16E, Llama-4-Maverick-17B-128E",
    "kimi_k2": "Kimi-K2-Instruct, Kimi-K2.5", "kimi_k25": "Kimi-K2.5",
    "glm4_moe": "GLM-4.5, GLM-4.5-Air",
    "minimax_m2": "MiniMax-M2.5, MiniMax-M2.7",
    "bailing_moe": "Ling-lite-1.5",
    "olmoe": "OLMoE-1B-7B-0924",
    "qwen2_moe": "Qwen1.5-MoE-A2.7B, Qwen2-57B-A14B",
    "deepseek": "DeepSeekMoE-16B",
    "deepseek_v32": "DeepSeek-V3.2", "glm_moe_dsa": "GLM-5", "mimo_v2_flash": "MiMo-V2-Flash",
    "gemma4": "Gemma-4-26B-A4B", "gemma4_text": "Gemma-4-26B-A4B",
    "nemotron_h": "NVIDIA-Nemotron-3-Nano-30B-A3B",
}

#: Config keys that change a model's structure (layer pattern, expert placement, shared experts,
#: MLP widths, attention kinds, extra weights), with what each means. One of them that the reader
#: did not use for the config at hand is an error naming it: reading on would simulate another model.
STRUCTURAL_KEYS: dict[str, str] = {
    # layer pattern / expert placement
    "first_k_dense_replace": "leading dense layers (DeepSeek)",
    "moe_layer_freq": "every N-th layer is MoE (DeepSeek)",
    "decoder_sparse_step": "every N-th layer is MoE (Qwen)",
    "mlp_only_layers": "dense layers by index (Qwen)",
    "interleave_moe_layer_step": "every N-th layer is MoE (Llama 4)",
    "moe_layers": "MoE layers by index (Llama 4)",
    "moe_layer_start_index": "first MoE layer (ERNIE 4.5)",
    "moe_layer_end_index": "last MoE layer (ERNIE 4.5)",
    "moe_layer_interval": "every N-th layer is MoE (ERNIE 4.5)",
    "moe_layer_frequency": "every N-th layer is MoE (Arctic)",
    "expert_interval": "every N-th layer is MoE",
    "expert_layer_period": "period of MoE layers (Jamba)",
    "expert_layer_offset": "offset of MoE layers (Jamba)",
    "mlp_layer_types": "MLP kind per layer",
    "hybrid_override_pattern": "layer kinds as a pattern string (Nemotron-H)",
    "num_dense_layers": "leading dense layers",
    # shared experts and MLP widths
    "n_shared_experts": "shared experts per MoE layer (DeepSeek)",
    "num_shared_experts": "shared experts per MoE layer",
    "moe_num_shared_experts": "shared experts per MoE layer (ERNIE 4.5)",
    "shared_expert_intermediate_size": "width of the shared expert (Qwen)",
    "moe_shared_expert_intermediate_size": "width of the shared expert",
    "shared_intermediate_size": "width of the shared expert",
    "intermediate_size_mlp": "width of the dense layers' MLP (Llama 4)",
    "dense_intermediate_size": "width of the dense layers' MLP",
    "moe_intermediate_size": "width of one routed expert",
    "mlp_bias": "biases on the MLP projections",
    "parallel_attn_mlp_res": "dense MLP in parallel with the MoE (Arctic)",
    "use_residual": "dense residual MLP beside the experts",
    # attention kinds
    "layer_types": "attention kind per layer",
    "full_attention_interval": "every N-th layer is full attention, the rest linear (Qwen3-Next)",
    "sliding_window": "window of sliding-window layers",
    "use_sliding_window": "whether sliding_window applies",
    "max_window_layers": "layers without the sliding window (Qwen)",
    "sliding_window_pattern": "every N-th layer is global attention (Gemma)",
    "global_attn_every_n_layers": "every N-th layer is global attention",
    "attention_chunk_size": "chunk of chunked-attention layers (Llama 4)",
    "no_rope_layers": "RoPE/NoPE per layer; NoPE layers are global attention (Llama 4)",
    "no_rope_layer_interval": "every N-th layer is NoPE/global (Llama 4)",
    "attn_layer_period": "period of attention layers among Mamba layers (Jamba)",
    "attn_layer_offset": "offset of attention layers among Mamba layers (Jamba)",
    "cross_attention_layers": "cross-attention layers (Mllama)",
    "num_kv_shared_layers": "layers that reuse another layer's KV cache",
    "kv_sharing_layer_map": "layers that reuse another layer's KV cache",
    "attention_k_eq_v": "keys double as values",
    "global_head_dim": "head size of global layers",
    "num_global_key_value_heads": "KV heads of global layers",
    "kv_lora_rank": "MLA latent rank (DeepSeek)",
    "q_lora_rank": "MLA query rank (DeepSeek)",
    "attn_output_gate": "gated attention output (Qwen3-Next)",
    "sparse_attention_config": "sparse attention with an indexer",
    "index_n_heads": "sparse-attention indexer heads (DeepSeek-V3.2)",
    "index_head_dim": "sparse-attention indexer head size (DeepSeek-V3.2)",
    "parallel_attn": "attention and MLP in parallel",
    "hidden_size_per_layer_input": "per-layer input embeddings (Gemma 3n)",
    "ffn_config": "nested MLP/expert configuration (DBRX)",
    "attn_config": "nested attention configuration (DBRX)",
    # more structure, named so that a family whose reader does not use it is refused by name
    "moe_shared_expert_intermediate_size": "width of the shared expert (Ling-2.0, Nemotron-H)",
    "use_qk_norm": "RMSNorm weights on q and k (GLM-4.5, MiniMax-M2, Ling-2.0; Llama 4's is weight-free)",
    "qk_norm_type": "q/k RMSNorm per head or over all heads (MiniMax-M2)",
    "use_qkv_bias": "biases on the q/k/v projections (Ling)",
    "use_bias": "biases on the output projection and MLPs (Ling)",
    "use_routing_bias": "a per-expert router bias (MiniMax-M2)",
    "moe_router_enable_expert_bias": "a per-expert router bias (Ling-2.0)",
    "topk_method": "routing method; noaux_tc carries a per-expert score-correction bias",
    "use_mtp": "multi-token-prediction layers (MiniMax-M2)",
    "num_mtp_modules": "multi-token-prediction modules (MiniMax-M2)",
    "mtp_transformer_layers": "layers per multi-token-prediction module (MiniMax-M2)",
    "enable_moe_block": "an MoE block beside the dense MLP of every layer (Gemma 4)",
    "hybrid_layer_pattern": "sliding-window (1) or full (0) attention per layer (MiMo-V2)",
    "swa_num_attention_heads": "query heads of sliding-window layers (MiMo-V2)",
    "swa_num_key_value_heads": "KV heads of sliding-window layers (MiMo-V2)",
    "swa_head_dim": "head size of sliding-window layers (MiMo-V2)",
    "swa_v_head_dim": "value head size of sliding-window layers (MiMo-V2)",
    "add_swa_attention_sink_bias": "attention sinks on sliding-window layers (MiMo-V2)",
    "add_full_attention_sink_bias": "attention sinks on full-attention layers (MiMo-V2)",
    "v_head_dim": "value head size (MLA; elsewhere values narrower than keys)",
    "qk_head_dim": "query/key head size apart from head_dim (GLM-5)",
    "index_topk": "tokens the sparse-attention indexer selects (DeepSeek-V3.2)",
    "mlp_hidden_act": "MLP activation (relu2 MLPs are not gated: two matrices, not three; read for Nemotron-H)",
    "pruned_heads": "attention heads removed per layer",
    "qkv_bias": "biases on the q/k/v projections",
    "attn_type_list": "softmax (1) or lightning (0) attention per layer (MiniMax)",
    "is_encoder_decoder": "an encoder-decoder model",
    "add_cross_attention": "cross-attention blocks",
}

#: Keys known to have no effect on a decode step (no weight shape, no FLOP, no byte moved or
#: held), each with the reason, grouped by kind. The reader accepts them and lists the ones a config
#: carries under ``ignored_keys`` (``sievesim model show --json``). Keys ending in ``_token_id``,
#: ``_token_ids`` or ``_token_index`` (tokenizer ids) are accepted too (:func:`no_decode_effect`).
NO_DECODE_EFFECT_KEYS: dict[str, str] = {
    **dict.fromkeys((
        "num_beams", "num_beam_groups", "num_return_sequences", "repetition_penalty", "temperature",
        "top_p", "top_k", "typical_p", "do_sample", "max_length", "min_length", "early_stopping",
        "length_penalty", "no_repeat_ngram_size", "encoder_no_repeat_ngram_size", "bad_words_ids",
        "diversity_penalty", "exponential_decay_length_penalty", "forced_bos_token_id",
        "forced_eos_token_id", "remove_invalid_values", "suppress_tokens", "begin_suppress_tokens",
        "output_scores", "return_dict_in_generate"),
        "generation default (sampling and search settings of transformers' generate(); the "
        "simulator decodes one token per request per step whatever they are)"),
    **dict.fromkeys((
        "return_dict", "output_attentions", "output_hidden_states", "torchscript", "use_bfloat16",
        "tf_legacy_loss", "chunk_size_feed_forward", "is_decoder", "tie_encoder_decoder",
        "cross_attention_hidden_size", "id2label", "label2id", "problem_type", "finetuning_task",
        "task_specific_params", "prefix", "tokenizer_class", "_attn_implementation", "_name_or_path",
        "architectures", "model_type", "transformers_version", "auto_map", "_commit_hash"),
        "transformers bookkeeping (what a forward pass returns, labels, class names, versions)"),
    **dict.fromkeys((
        "initializer_range", "attention_dropout", "hidden_dropout", "embedding_dropout",
        "output_dropout", "router_aux_loss_coef", "aux_loss_alpha", "seq_aux", "router_jitter_noise",
        "output_router_logits", "router_z_loss_coef", "pretraining_tp", "ignore_index",
        "rescale_prenorm_residual", "use_cache", "cache_implementation", "ep_size",
        "for_llm_compressor", "num_logits_to_keep", "use_mamba_kernels"),
        "training or serving setting (initialisation, dropout, auxiliary losses, tensor-parallel "
        "training split, cache switches); a decode step computes the same"),
    **dict.fromkeys((
        "rope_theta", "rope_scaling", "rope_parameters", "rope_type", "partial_rotary_factor",
        "rotary_dim", "rotary_pct", "rope_interleave", "indexer_rope_interleave", "swa_rope_theta",
        "max_position_embeddings", "original_max_position_embeddings", "initial_context_length"),
        "rotary position encoding detail (which dimensions rotate at which frequency; the context "
        "limit): the same projections, FLOPs and KV bytes"),
    **dict.fromkeys((
        "hidden_act", "hidden_activation", "rms_norm_eps", "layer_norm_eps", "norm_eps",
        "layernorm_epsilon", "layer_norm_epsilon", "residual_in_fp32", "swiglu_limit",
        "final_logit_softcapping", "attn_logit_softcapping", "query_pre_attn_scalar",
        "attention_value_scale", "attn_temperature_tuning", "attn_scale", "floor_scale",
        "scale_emb", "scale_depth", "dim_model_base", "logits_scaling", "embedding_multiplier",
        "residual_multiplier", "attention_multiplier", "norm_head", "norm_softmax", "clip_qkv"),
        "numeric constant or elementwise function (norm epsilon, activation of a gated MLP, "
        "softcaps, scalings of embeddings, residuals, logits or attention scores, clipping; Ling's "
        "norm_head normalises the LM head's rows): no shape changes"),
    **dict.fromkeys((
        "norm_topk_prob", "routed_scaling_factor", "scoring_func", "score_function"),
        "routing-score detail (softmax or sigmoid, renormalisation, scaling of the "
        "experts' sum): the same experts' shapes and the same top-k"),
    **dict.fromkeys(("torch_dtype", "dtype"),
                    "storage dtype of the checkpoint: sievesim prices bf16 unless quantization_config names "
                    "a format it reads (docs/models.md)"),
    **dict.fromkeys((
        "vision_config", "audio_config", "media_placeholder_token_id", "video_placeholder",
        "use_unified_vision_chunk", "vision_soft_tokens_per_image", "use_bidirectional_attention"),
        "multimodal encoder or placeholder: sievesim simulates the language model's decode only"),
    "bias": "GPT-OSS's unused flag (its biases are counted by family rule)",
}
_NON_STRUCTURAL_KEYS = frozenset(NO_DECODE_EFFECT_KEYS)
_TOKEN_ID_SUFFIXES = ("_token_id", "_token_ids", "_token_index")


def no_decode_effect(key: str) -> str | None:
    """Why ``key`` has no effect on a decode step, or None when it is not known to have none."""
    if key in NO_DECODE_EFFECT_KEYS:
        return NO_DECODE_EFFECT_KEYS[key]
    if key.endswith(_TOKEN_ID_SUFFIXES):
        return "tokenizer id (which token means what; no shape)"
    return None


# Names that suggest structure: an unverified family's key like this, neither used by the reader
# nor known harmless, is refused (it might change the layer pattern, the experts or the attention).
_STRUCTURAL_NAME = re.compile(r"moe|expert|dense|shared|layer|attn|attention|window|mlp|ffn|intermediate|"
                              r"head|lora|kv|sparse|hybrid|chunk|conv|ssm|mamba|state|nextn|mtp|cross|"
                              r"block|group|rank|dim|size|num_|n_")


# Every integer key the reader may consult: what it is, and whether 0 is allowed. Present keys are
# checked all together, before the structure is read, so that one message names every bad value.
_HF_INT_KEYS: dict[str, tuple[str, bool]] = {
    **{k: ("a positive number of routed experts", False) for k in _EXPERT_COUNT_KEYS},
    **{k: ("a positive number of experts per token", False) for k in _TOP_K_KEYS},
    "num_hidden_layers": ("a positive number of layers", False),
    "hidden_size": ("a positive model width", False),
    "num_attention_heads": ("a positive number of heads", False),
    "num_key_value_heads": ("a positive number of KV heads", False),
    "vocab_size": ("a positive vocabulary size", False),
    "head_dim": ("a positive head size", False),
    "q_lora_rank": ("a non-negative rank", True),
    "kv_lora_rank": ("a non-negative rank", True),
    "qk_nope_head_dim": ("a non-negative head size", True),
    "qk_rope_head_dim": ("a non-negative head size", True),
    "v_head_dim": ("a non-negative head size", True),
    "full_attention_interval": ("a positive layer interval", False),
    "sliding_window": ("a positive window (tokens) or null", False),
    "max_window_layers": ("a non-negative layer index", True),
    "attention_chunk_size": ("a positive chunk (tokens)", False),
    "linear_num_key_heads": ("a non-negative number of heads", True),
    "linear_num_value_heads": ("a non-negative number of heads", True),
    "linear_key_head_dim": ("a non-negative head size", True),
    "linear_value_head_dim": ("a non-negative head size", True),
    "linear_conv_kernel_dim": ("a non-negative kernel width", True),
    "interleave_moe_layer_step": ("a positive layer step", False),
    "first_k_dense_replace": ("a non-negative number of layers", True),
    "moe_layer_freq": ("a positive layer frequency, or one 0 (dense) or 1 (MoE) per layer", False),
    "decoder_sparse_step": ("a positive layer step", False),
    "moe_intermediate_size": ("a positive expert width", False),
    "intermediate_size": ("a positive FFN width", False),
    "intermediate_size_mlp": ("a positive dense FFN width", False),
    "n_shared_experts": ("a non-negative number of shared experts", True),
    "shared_expert_intermediate_size": ("a non-negative shared-expert width", True),
    "num_nextn_predict_layers": ("a non-negative number of layers", True),
    "num_mtp_modules": ("a non-negative number of modules", True),
    "mtp_transformer_layers": ("a non-negative number of layers", True),
    "num_shared_experts": ("a non-negative number of shared experts", True),
    "moe_shared_expert_intermediate_size": ("a non-negative shared-expert width", True),
    "mtp_num_hidden_layers": ("a non-negative number of layers", True),
    "no_rope_layer_interval": ("a positive layer interval", False),
    "n_group": ("a positive number of expert groups", False),
    "index_n_heads": ("a positive number of indexer heads", False),
    "index_head_dim": ("a positive indexer head size", False),
    "index_topk": ("a positive number of selected tokens", False),
    "qk_head_dim": ("a positive query/key head size", False),
    "global_head_dim": ("a positive head size", False),
    "num_global_key_value_heads": ("a positive number of KV heads", False),
    "swa_num_attention_heads": ("a positive number of heads", False),
    "swa_num_key_value_heads": ("a positive number of KV heads", False),
    "swa_head_dim": ("a positive head size", False),
    "swa_v_head_dim": ("a positive head size", False),
    "sliding_window_size": ("a positive window (tokens)", False),
    "mamba_num_heads": ("a positive number of Mamba heads", False),
    "mamba_head_dim": ("a positive Mamba head size", False),
    "ssm_state_size": ("a positive SSM state size", False),
    "n_groups": ("a positive number of Mamba B/C groups", False),
    "conv_kernel": ("a positive convolution width", False),
    "topk_group": ("a positive number of expert groups", False),
}
# Integer keys that may also be given as a list, one entry per layer (MiMo-V2's moe_layer_freq).
_HF_INT_OR_LIST_KEYS = frozenset({"moe_layer_freq"})
_HF_BOOL_KEYS = ("use_sliding_window", "tie_word_embeddings", "attention_bias", "attn_output_gate", "use_qk_norm",
                 "use_qkv_bias", "use_bias", "use_routing_bias", "moe_router_enable_expert_bias", "use_mtp",
                 "mamba_proj_bias", "use_conv_bias", "mlp_bias", "add_swa_attention_sink_bias",
                 "add_full_attention_sink_bias", "attention_k_eq_v", "enable_moe_block", "use_double_wide_mlp")
_HF_LIST_KEYS = ("layer_types", "mlp_only_layers", "moe_layers", "no_rope_layers", "attn_type_list",
                 "hybrid_layer_pattern")
_HF_STR_KEYS = {"topk_method": "the routing method, e.g. noaux_tc", "qk_norm_type": "per_layer or per_head",
                "hybrid_override_pattern": "one block kind per layer: M, *, E or -",
                "mlp_hidden_act": "the MLP's activation"}
#: Keys every MoE config gives.
_HF_REQUIRED = ("num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size")
# Keys refused at 0 wherever they appear: read by every family, or (sliding_window) never 0 in a
# real config. Other keys are refused at 0 only when read: a 0 may switch off another family's key.
_HF_NEVER_ZERO = frozenset(_HF_REQUIRED + _EXPERT_COUNT_KEYS + _TOP_K_KEYS + ("num_key_value_heads", "sliding_window"))

#: The ``layer_types`` entries the reader knows, and the attention kind of each.
_HF_LAYER_TYPES = {
    "full_attention": "full", "attention": "full", "global_attention": "full",
    "sliding_attention": "sliding", "sliding_window_attention": "sliding", "local_attention": "sliding",
    "chunked_attention": "chunked",
    "linear_attention": "linear",
}


def is_verified_family(model_type: str) -> bool:
    """True when ``model_type`` is one of :data:`VERIFIED_FAMILIES`."""
    return model_type in VERIFIED_FAMILIES


class _HF:
    """Reads fields of one config dict, records which keys the reader consulted (the rest are
    checked by :func:`sievesim.models.hf._check_unused_keys`) and collects problems, each naming the field and the
    file, so that one message reports them all: :meth:`check_types` first (type and range of
    every key present), then the structure, whose problems :meth:`raise_if_any` reports together."""

    def __init__(self, cfg: Mapping[str, Any], source: str) -> None:
        self.cfg, self.source = cfg, source
        self.used: set[str] = set()
        self.problems = Problems(source)
        self._disagreed: set[str] = set()

    def problem(self, key: str, value: Any, expected: str) -> None:
        self.problems.add(key, value, expected)

    def raise_if_any(self) -> None:
        self.problems.raise_if_any()

    def check_types(self) -> None:
        """Type and range of every key of :data:`_HF_INT_KEYS`, booleans, lists and dtypes present,
        and the keys every config needs."""
        cfg = self.cfg
        for key, (what, allow_zero) in _HF_INT_KEYS.items():
            value = cfg.get(key)
            if value is None or (key in _HF_INT_OR_LIST_KEYS and isinstance(value, list)):
                continue
            if not _is_int(value):
                self.problem(key, value, f"an integer ({what})")
            elif value < 0 or value > _HF_MAX_INT or (value == 0 and not allow_zero and key in _HF_NEVER_ZERO):
                self.problem(key, value, f"{what}, at most {_HF_MAX_INT}")
            elif key == "num_hidden_layers":
                with self.problems.check():
                    check_int(key, value, "layers", source=self.source)
        for key in _HF_BOOL_KEYS:
            if cfg.get(key) is not None and not isinstance(cfg[key], bool):
                self.problem(key, cfg[key], "true or false")
        for key in _HF_LIST_KEYS:
            if cfg.get(key) is not None and not isinstance(cfg[key], list):
                self.problem(key, cfg[key], "a list")
        for key, what in _HF_STR_KEYS.items():
            if cfg.get(key) is not None and not isinstance(cfg[key], str):
                self.problem(key, cfg[key], f"a string ({what})")
        for key in ("torch_dtype", "dtype"):  # the checkpoint's dtype: sievesim prices bf16 unless told
            if cfg.get(key) is not None and (not isinstance(cfg[key], str) or cfg[key] not in _KNOWN_TORCH_DTYPES):
                self.problem(key, cfg[key], f"one of {sorted(_KNOWN_TORCH_DTYPES)}")
        state = cfg.get("mamba_ssm_dtype")
        if state is not None and (not isinstance(state, str) or state not in _TORCH_DTYPE_BYTES):
            self.problem("mamba_ssm_dtype", state, f"one of {sorted(_TORCH_DTYPE_BYTES)}")
        for key in _HF_REQUIRED:
            if cfg.get(key) is None:
                self.problem(key, "<missing>", f"{_HF_INT_KEYS[key][0]} (required)")
        if self.first(_TOP_K_KEYS) is None:
            self.problem(" / ".join(_TOP_K_KEYS), "<missing>", "experts activated per token")
        self.first(_EXPERT_COUNT_KEYS)
        self.raise_if_any()

    def has(self, key: str) -> bool:
        self.used.add(key)
        return self.cfg.get(key) is not None

    def consider(self, *keys: str) -> None:
        """Mark keys as understood though they change nothing here (e.g. a dense width without dense layers)."""
        self.used.update(keys)

    def first(self, keys: Iterable[str]) -> str | None:
        """The first of ``keys`` present; the others, when present too, must agree with it."""
        keys = tuple(keys)
        found = next((k for k in keys if self.cfg.get(k) is not None), None)
        if found is not None:
            self.used.add(found)
            for other in keys:
                if other != found and self.cfg.get(other) is not None:
                    self.used.add(other)
                    if self.cfg[other] != self.cfg[found] and other not in self._disagreed:
                        self._disagreed.add(other)
                        self.problem(other, self.cfg[other], f"{self.cfg[found]!r}, the value of {found} "
                                     "(two names for one quantity must agree)")
        return found

    def int(self, key: str, default: Any = dataclasses.MISSING, *, why: str = "required for this architecture") -> Any:
        """The integer at ``key`` (type and range checked by :meth:`check_types`), ``default`` when
        absent; a missing key without default, or a 0 where the key must be positive, is a
        problem (and reads as 1, so that reading goes on to find the others)."""
        if not self.has(key):
            if default is dataclasses.MISSING:
                self.problem(key, "<missing>", f"{_HF_INT_KEYS[key][0]} ({why})")
                return 1
            return default
        value = self.cfg[key]
        if value == 0 and not _HF_INT_KEYS[key][1]:  # 0 where the reading needs it positive
            self.problem(key, value, f"{_HF_INT_KEYS[key][0]}, at most {_HF_MAX_INT}")
            return 1
        return value

    def bool(self, key: str, default: bool) -> bool:
        self.used.add(key)
        if key not in self.cfg or self.cfg[key] is None:
            return default
        return self.cfg[key]

    def list(self, key: str) -> list[Any] | None:
        return self.cfg[key] if self.has(key) else None

    def index_list(self, key: str, num_layers: int) -> list[int] | None:
        """A list of layer indices in ``[0, num_layers)``, or None when absent (a bad list is a
        problem and reads as empty)."""
        value = self.list(key)
        if value is not None and not all(_is_int(i) and 0 <= i < num_layers for i in value):
            self.problem(key, value, f"a list of layer indices in [0, {num_layers})")
            return []
        return value
