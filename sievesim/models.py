"""MoE model specifications: presets, TOML files and Hugging Face ``config.json``.

A :class:`ModelSpec` carries exactly what the simulator needs about one Mixture-of-Experts
transformer: the kind of every layer (attention: full / sliding-window / linear (Gated DeltaNet) /
MLA; MLP: MoE or dense), the tensor shapes, and the storage widths. Everything else -- parameter
counts, bytes per expert, KV-cache bytes, linear-attention state -- is *derived* from those shapes
by the properties below, never stored.

Units: sizes called ``*_size`` / ``*_dim`` / ``*_rank`` are element counts; ``*_bytes`` are bytes;
parameter counts are numbers of scalar weights; ``sliding_window`` is in tokens.

Three ways to get a spec (see ``docs/models.md``)::

    get_model("gpt-oss-120b")               # a preset (sievesim/data/models/<name>.toml)
    get_model("my_model.toml")              # a TOML file in sievesim's own schema
    get_model("path/to/config.json")        # a Hugging Face config.json, as published
"""
from __future__ import annotations

import dataclasses
import difflib
import json
import math
import os
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from ._inputs import is_int as _is_int, read_text as _read_text, read_toml as _read_toml
from ._validate import BOUNDS, Problems, check_int
from .errors import ConfigError, field_error

__all__ = [
    "ATTENTION_KINDS",
    "MLP_KINDS",
    "ModelSpec",
    "STRUCTURAL_KEYS",
    "UnverifiedFamilyWarning",
    "VERIFIED_FAMILIES",
    "chunked_attended_tokens",
    "from_hf_config",
    "is_verified_family",
    "get_model",
    "list_models",
    "load_model_toml",
    "model_from_dict",
    "model_to_dict",
    "save_model_toml",
]

#: Per-layer attention kinds. ``full``: softmax attention over the whole context (GQA/MHA/MQA);
#: ``sliding``: softmax attention over the last ``sliding_window`` tokens; ``chunked``: softmax
#: attention over the tokens of the current chunk of ``attention_chunk_size`` tokens (Llama 4's
#: local layers: a token at position ``p`` sees positions ``C * (p // C) .. p``); ``linear``: Gated
#: DeltaNet (Qwen3-Next / Qwen3.5), a fixed-size recurrent state instead of a KV cache; ``mla``:
#: DeepSeek multi-head latent attention (compressed KV cache of ``kv_lora_rank + qk_rope_head_dim``).
ATTENTION_KINDS: tuple[str, ...] = ("full", "sliding", "chunked", "linear", "mla")
#: Attention kinds with a per-head K/V cache (projections and KV bytes as in standard GQA).
_SOFTMAX_GQA_KINDS: tuple[str, ...] = ("full", "sliding", "chunked")
#: Per-layer MLP kinds: ``moe`` (router + routed experts (+ shared experts)) or ``dense`` (one SwiGLU FFN).
MLP_KINDS: tuple[str, ...] = ("moe", "dense")

_PRESET_DIR = Path(__file__).resolve().parent / "data" / "models"

# Fields that must be positive integers, with a short description used in error messages.
_POSITIVE_INT_FIELDS = {
    "num_layers": "number of transformer layers",
    "hidden_size": "model width (elements)",
    "num_attention_heads": "number of query heads",
    "num_kv_heads": "number of key/value heads",
    "head_dim": "elements per attention head",
    "num_experts": "number of routed experts per MoE layer",
    "top_k": "routed experts activated per token",
    "moe_intermediate_size": "intermediate size of one routed expert (elements)",
    "vocab_size": "vocabulary size (tokens)",
}


# The bound (sievesim._validate.BOUNDS) of each integer field; the others are dimensions.
_FIELD_BOUND = {"num_layers": "layers", "num_attention_heads": "heads", "num_kv_heads": "heads",
                "num_experts": "experts", "top_k": "experts", "vocab_size": "vocab",
                "num_shared_experts": "experts", "linear_num_key_heads": "heads",
                "linear_num_value_heads": "heads", "num_mtp_layers": "layers"}


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def chunked_attended_tokens(context_len: int, chunk: int) -> int:
    """Tokens the newest of ``context_len`` tokens attends to under chunked attention with chunks
    of ``chunk`` tokens: the tokens of its own chunk, ``(context_len - 1) % chunk + 1`` (0 for an
    empty context; ``context_len`` when ``chunk`` is 0)."""
    if context_len <= 0:
        return 0
    return (context_len - 1) % chunk + 1 if chunk > 0 else context_len


@dataclass(frozen=True)
class ModelSpec:
    """Shapes of one MoE transformer (decoder only; embeddings, layers, final norm, LM head).

    Every routed/shared expert and every dense FFN is a SwiGLU block of three matrices
    (gate ``h x I``, up ``h x I``, down ``I x h``). Construction validates all fields and raises
    :class:`~sievesim.errors.ConfigError` naming the first bad field and its value.
    """

    name: str
    #: Number of transformer layers (MTP / draft layers excluded, see ``num_mtp_layers``).
    num_layers: int
    #: Model width ``h`` (elements).
    hidden_size: int
    #: Query heads of softmax-attention layers (full / sliding / MLA).
    num_attention_heads: int
    #: Key/value heads of full/sliding layers (GQA groups). For MLA equal to the query heads.
    num_kv_heads: int
    #: Elements per query/key/value head of full/sliding layers (explicit ``head_dim`` in the HF
    #: config wins over ``hidden_size / num_attention_heads``). For MLA: ``qk_nope + qk_rope``.
    head_dim: int
    #: Attention kind of every layer, one of :data:`ATTENTION_KINDS`.
    layer_attention: tuple[str, ...]
    #: MLP kind of every layer, one of :data:`MLP_KINDS`.
    layer_mlp: tuple[str, ...]
    #: Routed experts per MoE layer.
    num_experts: int
    #: Routed experts activated per token (the config's value; ``with_top_k`` overrides it).
    top_k: int
    #: Intermediate size ``I`` of one routed expert (elements).
    moe_intermediate_size: int
    #: Vocabulary size (tokens); embedding and LM head are ``vocab_size x hidden_size``.
    vocab_size: int
    #: Shared (always-active) experts per MoE layer.
    num_shared_experts: int = 0
    #: Intermediate size of *one* shared expert (elements); 0 when there is none.
    shared_expert_intermediate_size: int = 0
    #: Intermediate size of the dense FFN of ``dense`` layers (elements); 0 when there is none.
    dense_intermediate_size: int = 0
    #: True when the LM head shares the input-embedding matrix.
    tie_word_embeddings: bool = False
    #: Window of ``sliding`` layers (tokens); None when there is no sliding layer.
    sliding_window: int | None = None
    #: Chunk of ``chunked`` layers (tokens; Llama 4's ``attention_chunk_size``); None when there is none.
    attention_chunk_size: int | None = None
    #: Bytes per stored element of weights and activations (2 = bf16, the default everywhere).
    dtype_bytes: float = 2.0
    #: Per-part override: bytes per routed/shared-expert weight (e.g. 0.53125 for MXFP4); None = dtype_bytes.
    expert_dtype_bytes: float | None = None
    #: Per-part override: bytes per KV-cache element; None = dtype_bytes.
    kv_dtype_bytes: float | None = None
    #: Bytes per element of the linear-attention recurrent state (often fp32 = 4); None = dtype_bytes.
    state_dtype_bytes: float | None = None
    # --- attention details (parameter counting) ---
    #: q/k/v/o projections carry biases (GPT-OSS).
    attention_bias: bool = False
    #: One learned attention-sink logit per query head per layer (GPT-OSS).
    attention_sinks: bool = False
    #: RMSNorm on q and k per head (Qwen3): ``2 * head_dim`` weights per layer.
    qk_norm: bool = False
    #: Sigmoid output gate on full-attention layers (Qwen3-Next / Qwen3.5): q projection is doubled.
    attention_output_gate: bool = False
    # --- MLA (DeepSeek-V2/V3); all 0 when absent ---
    #: Rank of the query compression (0 = q is projected directly from the hidden state).
    q_lora_rank: int = 0
    #: Rank of the compressed KV latent (elements cached per token per MLA layer, with the rope part).
    kv_lora_rank: int = 0
    #: Per-head q/k dimension without rotary embedding (elements).
    qk_nope_head_dim: int = 0
    #: Per-head q/k rotary dimension (elements; the rope key is shared by all heads and cached).
    qk_rope_head_dim: int = 0
    #: Per-head value dimension (elements).
    v_head_dim: int = 0
    # --- Gated DeltaNet linear attention (Qwen3-Next / Qwen3.5); all 0 when absent ---
    linear_num_key_heads: int = 0
    linear_num_value_heads: int = 0
    #: Elements per linear-attention key head.
    linear_key_head_dim: int = 0
    #: Elements per linear-attention value head.
    linear_value_head_dim: int = 0
    #: Causal depthwise convolution width (taps) over q/k/v.
    linear_conv_kernel_dim: int = 0
    # --- MoE details ---
    #: Routed experts carry biases on gate/up (``2I``) and down (``h``) projections (GPT-OSS).
    expert_bias: bool = False
    #: The router has one bias (or score-correction bias, DeepSeek-V3) per expert.
    router_bias: bool = False
    #: A scalar sigmoid gate ``h -> 1`` on the shared-expert output (Qwen2-MoE / Qwen3-Next / 3.5).
    shared_expert_gate: bool = False
    #: Multi-token-prediction layers shipped with the checkpoint; not simulated and not counted.
    num_mtp_layers: int = 0
    #: Where the values come from (free text, for humans; not part of equality or hashing).
    source: str = field(default="", compare=False)

    # ------------------------------------------------------------------ validation
    def __post_init__(self) -> None:
        name_ok = isinstance(self.name, str) and bool(self.name)
        src = f"model {self.name!r}" if name_ok else "model"
        # Types and ranges of every field first, all problems in one message; then meaning.
        problems = Problems(src)
        _field_problems({f: getattr(self, f) for f in _FIELD_NAMES}, problems, src)
        problems.raise_if_any()
        # Per-layer kinds: accept any sequence, store tuples (the dataclass is frozen and hashable).
        for fname in ("layer_attention", "layer_mlp"):
            object.__setattr__(self, fname, tuple(getattr(self, fname)))

        with problems.check():
            if self.top_k > self.num_experts:
                raise field_error("top_k", self.top_k, f"at most num_experts = {self.num_experts}", source=src)
        with problems.check():
            if "moe" not in self.layer_mlp:
                raise field_error("layer_mlp", "<no 'moe' layer>",
                                  "at least one MoE layer (sievesim simulates MoE models)", source=src)
        with problems.check():
            if "dense" in self.layer_mlp and self.dense_intermediate_size <= 0:
                raise field_error("dense_intermediate_size", self.dense_intermediate_size,
                                  "a positive integer (the model has dense layers)", source=src)
        with problems.check():
            if self.num_shared_experts > 0 and self.shared_expert_intermediate_size <= 0:
                raise field_error("shared_expert_intermediate_size", self.shared_expert_intermediate_size,
                                  f"a positive integer (num_shared_experts = {self.num_shared_experts})",
                                  source=src)
        with problems.check():
            if self.num_shared_experts == 0 and self.shared_expert_gate:
                raise field_error("shared_expert_gate", True, "false when num_shared_experts = 0", source=src)
        kinds_present = set(self.layer_attention)
        with problems.check():
            if kinds_present & set(_SOFTMAX_GQA_KINDS) and self.num_attention_heads % self.num_kv_heads:
                raise field_error("num_kv_heads", self.num_kv_heads,
                                  f"a divisor of num_attention_heads = {self.num_attention_heads}", source=src)
        with problems.check():
            if "sliding" in kinds_present and self.sliding_window is None:
                raise field_error("sliding_window", None,
                                  "a positive window in tokens (the model has sliding layers)", source=src)
        with problems.check():
            if "chunked" in kinds_present and self.attention_chunk_size is None:
                raise field_error("attention_chunk_size", None,
                                  "a positive chunk in tokens (the model has chunked layers)", source=src)
        for kind, fnames, what in (
                ("mla", ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"), "MLA"),
                ("linear", ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                            "linear_value_head_dim", "linear_conv_kernel_dim"), "linear-attention")):
            if kind in kinds_present:
                for fname in fnames:
                    with problems.check():
                        if getattr(self, fname) <= 0:
                            raise field_error(fname, getattr(self, fname),
                                              f"a positive integer (the model has {what} layers)", source=src)
        with problems.check():
            if "linear" in kinds_present and self.linear_num_key_heads > 0 \
                    and self.linear_num_value_heads % self.linear_num_key_heads:
                raise field_error("linear_num_value_heads", self.linear_num_value_heads,
                                  f"a multiple of linear_num_key_heads = {self.linear_num_key_heads}", source=src)
        problems.raise_if_any()

    # ------------------------------------------------------------------ layers
    @property
    def moe_layer_indices(self) -> tuple[int, ...]:
        """Indices (0-based) of the MoE layers, in order."""
        return tuple(i for i, kind in enumerate(self.layer_mlp) if kind == "moe")

    @property
    def num_moe_layers(self) -> int:
        """Number of MoE layers."""
        return len(self.moe_layer_indices)

    @property
    def num_dense_layers(self) -> int:
        """Number of layers with a dense FFN instead of MoE."""
        return self.num_layers - self.num_moe_layers

    def layers_of_kind(self, kind: str) -> tuple[int, ...]:
        """Indices of the layers whose attention kind is ``kind`` (one of :data:`ATTENTION_KINDS`)."""
        if kind not in ATTENTION_KINDS:
            raise field_error("attention kind", kind, f"one of {list(ATTENTION_KINDS)}")
        return tuple(i for i, k in enumerate(self.layer_attention) if k == kind)

    def _check_layer(self, layer: int) -> int:
        if not _is_int(layer) or not 0 <= layer < self.num_layers:
            raise field_error("layer", layer, f"a layer index in [0, {self.num_layers})", source=f"model {self.name!r}")
        return layer

    # ------------------------------------------------------------------ widths
    @property
    def expert_bytes_per_param(self) -> float:
        """Bytes per routed/shared-expert weight (``expert_dtype_bytes`` or ``dtype_bytes``)."""
        return self.dtype_bytes if self.expert_dtype_bytes is None else self.expert_dtype_bytes

    @property
    def kv_bytes_per_element(self) -> float:
        """Bytes per KV-cache element (``kv_dtype_bytes`` or ``dtype_bytes``)."""
        return self.dtype_bytes if self.kv_dtype_bytes is None else self.kv_dtype_bytes

    @property
    def state_bytes_per_element(self) -> float:
        """Bytes per element of the linear-attention recurrent state."""
        return self.dtype_bytes if self.state_dtype_bytes is None else self.state_dtype_bytes

    # ------------------------------------------------------------------ experts
    @property
    def params_per_expert(self) -> int:
        """Weights of one routed expert: ``3 * h * I`` (+ ``2I + h`` biases when ``expert_bias``)."""
        h, i = self.hidden_size, self.moe_intermediate_size
        return 3 * h * i + ((2 * i + h) if self.expert_bias else 0)

    @property
    def bytes_per_expert(self) -> float:
        """Bytes of one routed expert's weights (``params_per_expert * expert_bytes_per_param``)."""
        return self.params_per_expert * self.expert_bytes_per_param

    @property
    def flops_per_token_per_expert(self) -> int:
        """FLOPs one token spends in one routed expert: ``2 * 3 * h * I`` (multiply-adds x 2)."""
        return 2 * 3 * self.hidden_size * self.moe_intermediate_size

    @property
    def shared_expert_params(self) -> int:
        """Weights of all shared experts of one MoE layer (+ the ``h -> 1`` gate when present)."""
        per = 3 * self.hidden_size * self.shared_expert_intermediate_size
        return self.num_shared_experts * per + (self.hidden_size if self.shared_expert_gate else 0)

    @property
    def shared_expert_bytes(self) -> float:
        """Bytes of all shared experts of one MoE layer."""
        return self.shared_expert_params * self.expert_bytes_per_param

    @property
    def router_params(self) -> int:
        """Weights of one MoE layer's router (``h * E`` + ``E`` bias when ``router_bias``)."""
        return self.hidden_size * self.num_experts + (self.num_experts if self.router_bias else 0)

    @property
    def routed_expert_params_per_layer(self) -> int:
        """Weights of all routed experts of one MoE layer."""
        return self.num_experts * self.params_per_expert

    @property
    def dense_mlp_params(self) -> int:
        """Weights of the dense SwiGLU FFN of one ``dense`` layer (0 when there is none)."""
        return 3 * self.hidden_size * self.dense_intermediate_size

    # ------------------------------------------------------------------ attention
    def attention_params_per_layer(self, layer: int) -> int:
        """Weights of the attention block of ``layer`` (projections, biases, sinks, q/k norms).

        ``full``/``sliding``: ``h*(nq*d*(2 if output gate)) + 2*h*nkv*d + nq*d*h``;
        ``mla``: q (low-rank or direct), kv_a (latent + rope key), kv_b, o, latent norms;
        ``linear`` (Gated DeltaNet): qkvz and ba input projections, depthwise conv, ``A_log``,
        ``dt_bias``, gated RMSNorm, output projection. Layer norms are counted separately.
        """
        kind = self.layer_attention[self._check_layer(layer)]
        return self._attention_params(kind)

    def _attention_params(self, kind: str) -> int:
        h = self.hidden_size
        if kind in _SOFTMAX_GQA_KINDS:
            nq, nkv, d = self.num_attention_heads, self.num_kv_heads, self.head_dim
            q_out = nq * d * (2 if self.attention_output_gate else 1)
            params = h * q_out + 2 * h * nkv * d + nq * d * h
            if self.attention_bias:
                params += q_out + 2 * nkv * d + h
            if self.attention_sinks:
                params += nq
            if self.qk_norm:
                params += 2 * d
            return params
        if kind == "mla":
            nq = self.num_attention_heads
            qk = self.qk_nope_head_dim + self.qk_rope_head_dim
            if self.q_lora_rank:
                q = h * self.q_lora_rank + self.q_lora_rank + self.q_lora_rank * nq * qk
            else:
                q = h * nq * qk
            kv = (h * (self.kv_lora_rank + self.qk_rope_head_dim) + self.kv_lora_rank
                  + self.kv_lora_rank * nq * (self.qk_nope_head_dim + self.v_head_dim))
            o = nq * self.v_head_dim * h
            return q + kv + o
        if kind == "linear":
            nk, nv = self.linear_num_key_heads, self.linear_num_value_heads
            key_dim, value_dim = nk * self.linear_key_head_dim, nv * self.linear_value_head_dim
            in_qkvz = h * (2 * key_dim + 2 * value_dim)
            in_ba = h * 2 * nv
            conv = (2 * key_dim + value_dim) * self.linear_conv_kernel_dim
            out = value_dim * h
            return in_qkvz + in_ba + conv + 2 * nv + self.linear_value_head_dim + out
        raise AssertionError(kind)  # pragma: no cover - validated in __post_init__

    def kv_bytes_per_token(self, layer: int) -> float:
        """KV-cache bytes one token adds at ``layer``: ``2*nkv*d`` elements (full/sliding),
        ``kv_lora_rank + qk_rope_head_dim`` (MLA), 0 (linear attention keeps a fixed state)."""
        kind = self.layer_attention[self._check_layer(layer)]
        return self._kv_elements(kind) * self.kv_bytes_per_element

    def _kv_elements(self, kind: str) -> int:
        if kind in _SOFTMAX_GQA_KINDS:
            return 2 * self.num_kv_heads * self.head_dim
        if kind == "mla":
            return self.kv_lora_rank + self.qk_rope_head_dim
        return 0

    @property
    def kv_bytes_per_token_per_layer(self) -> tuple[float, ...]:
        """KV-cache bytes per token of every layer (a tuple of ``num_layers`` values; 0 for linear)."""
        return tuple(self._kv_elements(k) * self.kv_bytes_per_element for k in self.layer_attention)

    @property
    def kv_bytes_per_token_all_layers(self) -> float:
        """KV-cache bytes one token adds over all layers (sliding layers counted in full)."""
        return float(sum(self.kv_bytes_per_token_per_layer))

    def kv_tokens_held(self, layer: int, context_len: int) -> int:
        """Tokens whose K/V ``layer`` keeps (and the newest token attends to) for a request of
        ``context_len`` tokens: ``min(context_len, sliding_window)`` for sliding layers,
        ``(context_len - 1) % attention_chunk_size + 1`` for chunked layers (the current chunk),
        0 for linear layers."""
        kind = self.layer_attention[self._check_layer(layer)]
        if not _is_int(context_len) or context_len < 0:
            raise field_error("context_len", context_len, "a non-negative integer (tokens)")
        if kind == "linear":
            return 0
        if kind == "sliding":
            return min(context_len, int(self.sliding_window or context_len))
        if kind == "chunked":
            return chunked_attended_tokens(context_len, int(self.attention_chunk_size or 0))
        return context_len

    @property
    def linear_state_bytes_per_layer(self) -> float:
        """Bytes of one request's Gated-DeltaNet state in one linear layer: recurrent state
        ``nv * dk * dv`` (state dtype) + convolution state ``(2*nk*dk + nv*dv) * (kernel - 1)`` (model dtype).
        0 when the model has no linear layer."""
        if "linear" not in self.layer_attention:
            return 0.0
        nk, nv = self.linear_num_key_heads, self.linear_num_value_heads
        dk, dv = self.linear_key_head_dim, self.linear_value_head_dim
        recurrent = nv * dk * dv * self.state_bytes_per_element
        conv = (2 * nk * dk + nv * dv) * (self.linear_conv_kernel_dim - 1) * self.dtype_bytes
        return float(recurrent + conv)

    @property
    def linear_state_bytes_per_request(self) -> float:
        """Bytes of one request's linear-attention state over all linear layers (independent of length)."""
        return self.linear_state_bytes_per_layer * self.layer_attention.count("linear")

    def kv_cache_bytes_per_request(self, context_len: int) -> float:
        """Bytes of one request's KV cache + linear state over all layers at ``context_len`` tokens."""
        total = 0.0
        for layer, kind in enumerate(self.layer_attention):
            total += self.kv_tokens_held(layer, context_len) * self._kv_elements(kind) * self.kv_bytes_per_element
        return total + self.linear_state_bytes_per_request

    # ------------------------------------------------------------------ totals
    @property
    def embedding_params(self) -> int:
        """Weights of the input embedding (``vocab_size * hidden_size``)."""
        return self.vocab_size * self.hidden_size

    @property
    def lm_head_params(self) -> int:
        """Weights the LM head reads per token (``vocab_size * hidden_size``, tied or not)."""
        return self.vocab_size * self.hidden_size

    def layer_params(self, layer: int) -> int:
        """All weights of ``layer``: attention, two RMSNorms, and its MLP (all experts)."""
        layer = self._check_layer(layer)
        mlp = (self.router_params + self.routed_expert_params_per_layer + self.shared_expert_params
               if self.layer_mlp[layer] == "moe" else self.dense_mlp_params)
        return self._attention_params(self.layer_attention[layer]) + 2 * self.hidden_size + mlp

    def active_layer_params(self, layer: int) -> int:
        """Weights of ``layer`` that one token reads: as :meth:`layer_params` with ``top_k`` routed experts."""
        layer = self._check_layer(layer)
        mlp = (self.router_params + self.top_k * self.params_per_expert + self.shared_expert_params
               if self.layer_mlp[layer] == "moe" else self.dense_mlp_params)
        return self._attention_params(self.layer_attention[layer]) + 2 * self.hidden_size + mlp

    @property
    def total_params(self) -> int:
        """All weights: embedding, layers, final norm, and the LM head unless tied (MTP layers excluded)."""
        layers = sum(self.layer_params(i) for i in range(self.num_layers))
        head = 0 if self.tie_word_embeddings else self.lm_head_params
        return self.embedding_params + layers + self.hidden_size + head

    @property
    def active_params(self) -> int:
        """Weights one decode token reads: layers with ``top_k`` routed experts (+ shared, router),
        final norm and LM head; the input embedding is a row lookup and is *not* counted."""
        layers = sum(self.active_layer_params(i) for i in range(self.num_layers))
        return layers + self.hidden_size + self.lm_head_params

    @property
    def active_params_with_embedding(self) -> int:
        """``active_params`` plus the input-embedding matrix (Qwen/Mistral model-card convention)."""
        return self.active_params + (0 if self.tie_word_embeddings else self.embedding_params)

    @property
    def routed_expert_params(self) -> int:
        """Weights of all routed experts of all MoE layers."""
        return self.num_moe_layers * self.routed_expert_params_per_layer

    @property
    def non_embedding_params(self) -> int:
        """``total_params`` without the embedding and (untied) LM head."""
        return self.total_params - self.embedding_params - (0 if self.tie_word_embeddings else self.lm_head_params)

    @property
    def total_bytes(self) -> float:
        """Bytes of all weights, experts at ``expert_bytes_per_param``, the rest at ``dtype_bytes``."""
        expert = self.num_moe_layers * (self.routed_expert_params_per_layer + self.shared_expert_params)
        return expert * self.expert_bytes_per_param + (self.total_params - expert) * self.dtype_bytes

    # ------------------------------------------------------------------ variants
    def with_top_k(self, k: int) -> "ModelSpec":
        """A copy that activates ``k`` routed experts per token (validated: ``1 <= k <= num_experts``)."""
        return dataclasses.replace(self, top_k=k)

    def replace(self, **changes: Any) -> "ModelSpec":
        """A validated copy with ``changes`` applied (``dataclasses.replace``)."""
        unknown = sorted(set(changes) - {f.name for f in dataclasses.fields(self)})
        if unknown:
            raise _unknown_field(unknown[0], f"model {self.name!r}")
        return dataclasses.replace(self, **changes)

    def summary(self) -> dict[str, Any]:
        """All fields plus the derived figures, JSON-ready (what ``sievesim model show --json`` prints)."""
        out: dict[str, Any] = {"name": self.name}
        out.update(model_to_dict(self, compact=False))
        out["layer_attention"] = list(self.layer_attention)
        out["layer_mlp"] = list(self.layer_mlp)
        out.update({
            "moe_layers": self.num_moe_layers,
            "moe_layer_indices": list(self.moe_layer_indices),
            "dense_layers": self.num_dense_layers,
            "attention_layer_counts": {k: self.layer_attention.count(k) for k in ATTENTION_KINDS
                                       if k in self.layer_attention},
            "params_per_expert": self.params_per_expert,
            "bytes_per_expert": self.bytes_per_expert,
            "shared_expert_params_per_layer": self.shared_expert_params,
            "routed_expert_params": self.routed_expert_params,
            "total_params": self.total_params,
            "active_params": self.active_params,
            "active_params_with_embedding": self.active_params_with_embedding,
            "non_embedding_params": self.non_embedding_params,
            "total_bytes": self.total_bytes,
            "kv_bytes_per_token_all_layers": self.kv_bytes_per_token_all_layers,
            "linear_state_bytes_per_request": self.linear_state_bytes_per_request,
        })
        return out


# ====================================================================== dict / TOML
_FIELD_NAMES = tuple(f.name for f in dataclasses.fields(ModelSpec))
_DEFAULTS = {f.name: f.default for f in dataclasses.fields(ModelSpec) if f.default is not dataclasses.MISSING}
_NON_NEGATIVE_INT_FIELDS = (
    "num_shared_experts", "shared_expert_intermediate_size", "dense_intermediate_size", "q_lora_rank",
    "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "linear_num_key_heads",
    "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim", "linear_conv_kernel_dim",
    "num_mtp_layers")
_BOOL_FIELDS = ("tie_word_embeddings", "attention_bias", "attention_sinks", "qk_norm", "attention_output_gate",
                "expert_bias", "router_bias", "shared_expert_gate")
_DTYPE_FIELDS = ("dtype_bytes", "expert_dtype_bytes", "kv_dtype_bytes", "state_dtype_bytes")


def _field_problems(values: Mapping[str, Any], problems: Problems, src: str) -> None:
    """Type and range of each field present in ``values`` (ModelSpec field names), one problem each."""
    def check(fname: str, test: Any) -> None:
        if fname in values:
            with problems.check():
                test(values[fname])

    def name(value: Any) -> None:
        if not isinstance(value, str) or not value:
            raise field_error("name", value, "a non-empty string", source=src)

    def positive(fname: str) -> Any:
        def test(value: Any) -> None:
            if not _is_int(value):
                raise field_error(fname, value, f"an integer ({_POSITIVE_INT_FIELDS[fname]})", source=src)
            if value <= 0:
                raise field_error(fname, value, f"a positive integer ({_POSITIVE_INT_FIELDS[fname]})", source=src)
            check_int(fname, value, _FIELD_BOUND.get(fname, "dimension"), source=src)
        return test

    def non_negative(fname: str) -> Any:
        def test(value: Any) -> None:
            if not _is_int(value):
                raise field_error(fname, value, "an integer", source=src)
            if value < 0:
                raise field_error(fname, value, "a non-negative integer", source=src)
            check_int(fname, value, _FIELD_BOUND.get(fname, "dimension"), lo=0, source=src)
        return test

    def boolean(fname: str) -> Any:
        def test(value: Any) -> None:
            if not isinstance(value, bool):
                raise field_error(fname, value, "true or false", source=src)
        return test

    def dtype(fname: str) -> Any:
        def test(value: Any) -> None:
            if value is None and fname != "dtype_bytes":
                return
            if not _is_number(value) or not math.isfinite(value) or not 0 < value <= 16:
                raise field_error(fname, value, "a positive number of bytes per element, at most 16 (2 = bf16)",
                                  source=src)
        return test

    def tokens_or_none(fname: str, what: str) -> Any:
        def test(value: Any) -> None:
            if value is not None and (not _is_int(value) or value <= 0):
                raise field_error(fname, value, f"a positive {what} in tokens or none", source=src)
            if value is not None:
                check_int(fname, value, "context", lo=1, source=src)
        return test

    def source(value: Any) -> None:
        if not isinstance(value, str):
            raise field_error("source", value, "a string", source=src)

    check("name", name)
    for fname in _POSITIVE_INT_FIELDS:
        check(fname, positive(fname))
    for fname in _NON_NEGATIVE_INT_FIELDS:
        check(fname, non_negative(fname))
    for fname in _BOOL_FIELDS:
        check(fname, boolean(fname))
    for fname in _DTYPE_FIELDS:
        check(fname, dtype(fname))
    check("sliding_window", tokens_or_none("sliding_window", "window"))
    check("attention_chunk_size", tokens_or_none("attention_chunk_size", "chunk"))
    check("source", source)
    n = values.get("num_layers")
    n_ok = _is_int(n) and 1 <= n <= BOUNDS["layers"].hi
    for fname, kinds in (("layer_attention", ATTENTION_KINDS), ("layer_mlp", MLP_KINDS)):
        if fname not in values:
            continue
        value = values[fname]
        with problems.check():
            if isinstance(value, str) or not isinstance(value, (list, tuple)):
                raise field_error(fname, value, f"a list of one of {list(kinds)} per layer", source=src)
            if n_ok and len(value) != n:
                raise field_error(fname, f"<{len(value)} entries>",
                                  f"one entry per layer (num_layers = {n})", source=src)
        if isinstance(value, (list, tuple)):
            _kind_problems(fname, value, kinds, problems, src)


def _kind_problems(fname: str, value: Iterable[Any], kinds: tuple[str, ...], problems: Problems,
                   src: str) -> None:
    """One problem per distinct unknown kind in a per-layer list, naming every layer that has it."""
    bad: dict[str, tuple[Any, list[int]]] = {}
    for i, kind in enumerate(value):
        if not isinstance(kind, str) or kind not in kinds:
            bad.setdefault(repr(kind), (kind, []))[1].append(i)
    for kind, layers in bad.values():
        with problems.check():
            close = difflib.get_close_matches(str(kind), kinds, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            where = ", ".join(map(str, layers[:8])) + (f", ... ({len(layers)} layers)" if len(layers) > 8 else "")
            raise field_error(f"{fname}[{where}]", kind, f"one of {list(kinds)}{hint}", source=src)


# Keys of the compact TOML layout that stand for layer_attention / layer_mlp.
_LAYOUT_KEYS = ("attention", "attention_pattern", "dense_layers")


def _unknown_field(key: str, source: str | None) -> ConfigError:
    close = difflib.get_close_matches(key, _FIELD_NAMES + _LAYOUT_KEYS, n=3)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    return field_error(key, "<unknown field>", f"one of the ModelSpec fields{hint}", source=source)  # type: ignore[return-value]


def _shortest_period(seq: tuple[str, ...]) -> tuple[str, ...]:
    n = len(seq)
    for p in range(1, n + 1):
        if n % p == 0 and seq == seq[:p] * (n // p):
            return seq[:p]
    return seq  # pragma: no cover - p = n always matches


def model_to_dict(spec: ModelSpec, *, compact: bool = True) -> dict[str, Any]:
    """The spec as a plain dict (TOML/JSON-ready; ``None`` values are left out).

    With ``compact`` the per-layer lists are written as ``attention_pattern`` (the shortest
    repeating pattern of ``layer_attention``) and ``dense_layers`` (indices of the dense layers),
    and fields equal to their default are left out; :func:`model_from_dict` reads both forms.
    """
    out: dict[str, Any] = {}
    for fname in _FIELD_NAMES:
        value = getattr(spec, fname)
        if value is None:
            continue
        if compact and fname in _DEFAULTS and value == _DEFAULTS[fname] and type(value) is type(_DEFAULTS[fname]):
            continue
        if fname == "layer_attention" and compact:
            pattern = _shortest_period(value)
            if len(pattern) == 1:
                out["attention"] = pattern[0]
            elif len(pattern) < len(value):
                out["attention_pattern"] = list(pattern)
            else:
                out["layer_attention"] = list(value)
            continue
        if fname == "layer_mlp" and compact:
            out["dense_layers"] = [i for i, k in enumerate(value) if k == "dense"]
            continue
        out[fname] = list(value) if isinstance(value, tuple) else value
    return out


def model_from_dict(data: Mapping[str, Any], *, source: str | None = None) -> ModelSpec:
    """Build a spec from a dict in sievesim's schema (see :func:`model_to_dict`); unknown keys are errors.

    ``num_layers`` plus one of ``layer_attention`` (per layer), ``attention_pattern`` (repeated
    over the layers) or ``attention`` (one kind for all layers); ``layer_mlp`` (per layer) or
    ``dense_layers`` (indices; all other layers are MoE; default none).
    """
    if not isinstance(data, Mapping):
        raise field_error("model", type(data).__name__, "a table of ModelSpec fields", source=source)
    src = source or f"model {data.get('name', '?')!r}"
    problems = Problems(src)
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        if key not in _FIELD_NAMES and key not in _LAYOUT_KEYS:
            with problems.check():
                raise _unknown_field(key, src)
        elif key not in _LAYOUT_KEYS:
            kwargs[key] = value
    for required in ("name", "num_layers", "hidden_size", "num_attention_heads", "num_kv_heads",
                     "num_experts", "top_k", "moe_intermediate_size", "vocab_size"):
        if required not in kwargs:
            with problems.check():
                raise field_error(required, "<missing>", "a value (required field)", source=src)
    _field_problems(kwargs, problems, src)
    n = kwargs.get("num_layers")
    n_ok = _is_int(n) and 1 <= n <= BOUNDS["layers"].hi
    h, nq = kwargs.get("hidden_size"), kwargs.get("num_attention_heads")
    if "head_dim" not in kwargs and _is_int(h) and _is_int(nq) and h > 0 and nq > 0:
        with problems.check():
            if h % nq:
                raise field_error("num_attention_heads", nq,
                                  f"a divisor of hidden_size = {h} (or give head_dim explicitly)", source=src)
        kwargs["head_dim"] = h // nq
    given = [k for k in ("layer_attention", "attention_pattern", "attention") if k in data]
    with problems.check():
        if len(given) != 1:
            raise field_error("layer_attention", given or "<missing>",
                              "exactly one of layer_attention, attention_pattern, attention", source=src)
    if len(given) == 1 and n_ok and "attention" in data:
        attention = data["attention"]
        with problems.check():
            if not isinstance(attention, str) or attention not in ATTENTION_KINDS:
                close = difflib.get_close_matches(str(attention), ATTENTION_KINDS, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise field_error("attention", attention, f"one of {list(ATTENTION_KINDS)}{hint}", source=src)
        kwargs["layer_attention"] = (attention,) * n
    elif len(given) == 1 and n_ok and "attention_pattern" in data:
        pattern = data["attention_pattern"]
        with problems.check():
            if isinstance(pattern, str) or not isinstance(pattern, (list, tuple)) or not pattern or n % len(pattern):
                raise field_error("attention_pattern", pattern,
                                  f"a non-empty list whose length divides num_layers = {n}", source=src)
            _kind_problems("attention_pattern", pattern, ATTENTION_KINDS, problems, src)
            kwargs["layer_attention"] = tuple(pattern) * (n // len(pattern))
    with problems.check():
        if "layer_mlp" in data and "dense_layers" in data:
            raise field_error("dense_layers", data["dense_layers"], "not given together with layer_mlp",
                              source=src)
    if "layer_mlp" not in data and n_ok:
        dense = data.get("dense_layers", [])
        with problems.check():
            if isinstance(dense, str) or not isinstance(dense, (list, tuple)) \
                    or not all(_is_int(i) and 0 <= i < n for i in dense):
                raise field_error("dense_layers", dense, f"a list of layer indices in [0, {n})", source=src)
            kwargs["layer_mlp"] = tuple("dense" if i in set(dense) else "moe" for i in range(n))
    problems.raise_if_any()
    try:
        return ModelSpec(**kwargs)
    except ConfigError as exc:  # meaning: name the file rather than the model
        prefix = f"model {kwargs['name']!r}: "
        msg = str(exc)
        if source and msg.startswith(prefix):
            raise ConfigError(f"{source}: {msg[len(prefix):]}") from None
        raise


def load_model_toml(path: str | os.PathLike[str]) -> ModelSpec:
    """Read a model spec from a TOML file (keys as in :func:`model_to_dict`, optionally under ``[model]``)."""
    path = Path(path)
    data = _read_toml(path)
    if set(data) == {"model"} and isinstance(data["model"], dict):
        data = data["model"]
    return model_from_dict(data, source=str(path))


def save_model_toml(spec: ModelSpec, path: str | os.PathLike[str]) -> None:
    """Write ``spec`` to ``path`` as TOML (compact layout; :func:`load_model_toml` reads it back equal)."""
    import tomli_w

    text = "# sievesim model spec (see docs/models.md); sizes in elements, *_bytes in bytes\n"
    text += tomli_w.dumps(model_to_dict(spec, compact=True))
    Path(path).write_text(text, encoding="utf-8")


# ====================================================================== presets
def list_models() -> list[str]:
    """Names of the preset models (``sievesim/data/models/*.toml``), sorted."""
    return sorted(p.stem for p in _PRESET_DIR.glob("*.toml"))


def _preset_path(name: str) -> Path | None:
    key = name.strip().lower()
    path = _PRESET_DIR / f"{key}.toml"
    return path if path.is_file() else None


def get_model(name_or_path: str | os.PathLike[str], *, top_k: int | None = None) -> ModelSpec:
    """A spec from a preset name (case-insensitive), a ``.toml`` file, or an HF ``config.json``
    (a ``.json`` file or a directory holding ``config.json``). ``top_k`` overrides the routed top-k.

    An unknown name raises :class:`ConfigError` listing the nearest preset names.
    """
    text = os.fspath(name_or_path)
    spec: ModelSpec
    preset = _preset_path(text) if isinstance(name_or_path, str) else None
    if preset is not None:
        spec = load_model_toml(preset)
    else:
        path = Path(text)
        if path.is_dir() and (path / "config.json").is_file():
            path = path / "config.json"
        if path.is_file() and path.suffix.lower() == ".toml":
            spec = load_model_toml(path)
        elif path.is_file() and path.suffix.lower() == ".json":
            spec = from_hf_config(path)
        elif path.is_file():
            raise field_error("model", text, "a .toml spec or a Hugging Face config.json")
        else:
            names = list_models()
            close = difflib.get_close_matches(text.lower(), names, n=3, cutoff=0.4)
            hint = f"; nearest: {', '.join(close)}" if close else ""
            raise field_error("model", text, f"a preset name ({', '.join(names)}), a .toml file "
                              f"or a config.json path{hint}")
    return spec.with_top_k(top_k) if top_k is not None else spec


# ====================================================================== Hugging Face config.json
_EXPERT_COUNT_KEYS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")
_TOP_K_KEYS = ("num_experts_per_tok", "experts_per_token", "moe_topk", "num_experts_per_token")
_TORCH_DTYPE_BYTES = {"bfloat16": 2.0, "float16": 2.0, "float32": 4.0, "float8_e4m3fn": 1.0}
_HF_MAX_INT = 1 << 24  # no size or count of a published config comes near (vocabularies < 2**19)
_KNOWN_TORCH_DTYPES = frozenset(_TORCH_DTYPE_BYTES) | {"float64", "float8_e5m2", "auto"}

#: ``model_type`` values whose reading is checked against the publisher's parameter counts
#: (``docs/models.md``, ``tests/test_models.py``), with the models it was checked on. Any other
#: family is read only when every structural key in its config is understood, and is reported as
#: an "unverified family".
VERIFIED_FAMILIES: dict[str, str] = {
    "gpt_oss": "GPT-OSS-20B, GPT-OSS-120B",
    "qwen3_moe": "Qwen3-30B-A3B, Qwen3-235B-A22B",
    "qwen3_next": "Qwen3-Next-80B-A3B",
    "qwen3_5_moe": "Qwen3.5-397B-A17B", "qwen3_5_moe_text": "Qwen3.5-397B-A17B",
    "mixtral": "Mixtral-8x7B, Mixtral-8x22B",
    "deepseek_v2": "DeepSeek-V2-Lite", "deepseek_v3": "DeepSeek-V3",
    "llama4": "Llama-4-Scout-17B-16E, Llama-4-Maverick-17B-128E",
    "llama4_text": "Llama-4-Scout-17B-16E, Llama-4-Maverick-17B-128E",
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
}

#: Keys known not to change the time or memory of a decode step: numerics, routing-score details,
#: position encodings, token ids, training and serving flags.
_NON_STRUCTURAL_KEYS = frozenset({
    "architectures", "model_type", "transformers_version", "_name_or_path", "auto_map", "torch_dtype",
    "dtype", "quantization_config", "use_cache", "cache_implementation", "bos_token_id", "eos_token_id",
    "pad_token_id", "hidden_act", "initializer_range", "rms_norm_eps", "layer_norm_eps", "norm_eps",
    "attention_dropout", "hidden_dropout", "rope_theta", "rope_scaling", "rope_parameters",
    "partial_rotary_factor", "max_position_embeddings", "router_aux_loss_coef", "output_router_logits",
    "router_jitter_noise", "norm_topk_prob", "routed_scaling_factor", "scoring_func", "n_group",
    "topk_group", "aux_loss_alpha", "seq_aux", "ep_size", "tie_word_embeddings", "use_qk_norm",
    "attn_temperature_tuning", "attn_scale", "floor_scale", "for_llm_compressor", "swiglu_limit",
    "initial_context_length", "pretraining_tp", "bias", "vision_config",
})
# Names that suggest structure: an unverified family's key like this, neither used by the reader
# nor known harmless, is refused (it might change the layer pattern, the experts or the attention).
_STRUCTURAL_NAME = re.compile(r"moe|expert|dense|shared|layer|attn|attention|window|mlp|ffn|intermediate|"
                              r"head|lora|kv|sparse|hybrid|chunk|conv|ssm|mamba|state|nextn|mtp|cross|"
                              r"block|group|rank|dim|size|num_|n_")


def _unset(value: Any) -> bool:
    """A value that switches nothing on (absent, null, false, 0, empty)."""
    return value is None or value is False or (_is_int(value) and value == 0) or value in ("", [], {})


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
    "moe_layer_freq": ("a positive layer frequency", False),
    "decoder_sparse_step": ("a positive layer step", False),
    "moe_intermediate_size": ("a positive expert width", False),
    "intermediate_size": ("a positive FFN width", False),
    "intermediate_size_mlp": ("a positive dense FFN width", False),
    "n_shared_experts": ("a non-negative number of shared experts", True),
    "shared_expert_intermediate_size": ("a non-negative shared-expert width", True),
    "num_nextn_predict_layers": ("a non-negative number of layers", True),
    "mtp_num_hidden_layers": ("a non-negative number of layers", True),
    "no_rope_layer_interval": ("a positive layer interval", False),
}
_HF_BOOL_KEYS = ("use_sliding_window", "tie_word_embeddings", "attention_bias", "attn_output_gate")
_HF_LIST_KEYS = ("layer_types", "mlp_only_layers", "moe_layers", "no_rope_layers")
#: Keys every MoE config gives.
_HF_REQUIRED = ("num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size")
# Keys refused at 0 wherever they appear: read by every family, or (sliding_window) never 0 in a
# real config. Other keys are refused at 0 only when read: a 0 may switch off another family's key.
_HF_NEVER_ZERO = frozenset(_HF_REQUIRED + _EXPERT_COUNT_KEYS + _TOP_K_KEYS + ("num_key_value_heads", "sliding_window"))


class _HF:
    """Reads fields of one config dict, records which keys the reader consulted (the rest are
    checked by :func:`_check_unused_keys`) and collects problems, each naming the field and the
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
            if value is None:
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


def _check_unused_keys(hf: _HF, model_type: str, verified: bool) -> None:
    """Structural keys the reader did not use (and, for an unverified family, keys whose names
    suggest structure and that are neither used nor known harmless) are problems, all named in one."""
    unhandled, unknown = [], []
    for key, value in hf.cfg.items():
        if key in hf.used or _unset(value):
            continue
        if key in STRUCTURAL_KEYS:
            unhandled.append(f"{key} ({STRUCTURAL_KEYS[key]})")
        elif not verified and key not in _NON_STRUCTURAL_KEYS and _STRUCTURAL_NAME.search(key):
            unknown.append(key)
    family = f"model_type {model_type or '?'!r}"
    if unhandled:
        hf.problem(", ".join(unhandled), "<not handled>",
                   f"only structural keys that sievesim's reader handles for {family}: reading "
                   "on would simulate a different model (write a sievesim TOML instead, docs/models.md)")
    if unknown:
        hf.problem(", ".join(unknown), "<not understood>",
                   f"only keys sievesim understands: {family} is an unverified family, read only "
                   "when every key that may change its structure is understood (write a sievesim "
                   "TOML instead, docs/models.md)")


_HF_LAYER_TYPES = {
    "full_attention": "full", "attention": "full", "global_attention": "full",
    "sliding_attention": "sliding", "sliding_window_attention": "sliding", "local_attention": "sliding",
    "chunked_attention": "chunked",
    "linear_attention": "linear",
}


def is_verified_family(model_type: str) -> bool:
    """True when ``model_type`` is one of :data:`VERIFIED_FAMILIES`."""
    return model_type in VERIFIED_FAMILIES


def from_hf_config(path_or_dict: str | os.PathLike[str] | Mapping[str, Any], *, name: str | None = None,
                   dtype_bytes: float = 2.0) -> ModelSpec:
    """Build a spec from a Hugging Face ``config.json`` as published (or the parsed dict).

    Understands the GPT-OSS, Mixtral, Qwen2-MoE / Qwen3-MoE / Qwen3-Next / Qwen3.5-MoE,
    DeepSeek-V2/V3 and Llama 4 field names, a nested ``text_config`` (multimodal checkpoints: the
    language model only), ``layer_types``, ``full_attention_interval``, ``first_k_dense_replace``,
    ``moe_layer_freq``, ``decoder_sparse_step``, ``mlp_only_layers``, ``interleave_moe_layer_step``,
    ``moe_layers``, ``intermediate_size_mlp``, ``no_rope_layers`` and ``attention_chunk_size``.
    Weights are bf16 (``dtype_bytes = 2``) unless told otherwise, as in the Sieve paper;
    ``mamba_ssm_dtype`` sets the linear-attention state width.

    Nothing is guessed: a dense model (no expert-count field), a missing needed field, or a
    structural key (:data:`STRUCTURAL_KEYS`) the reader does not use for this family raises
    :class:`ConfigError` naming it. A ``model_type`` outside :data:`VERIFIED_FAMILIES` is read only
    when every key that may change its structure is understood, and its ``source`` says
    "unverified family".
    """
    if isinstance(path_or_dict, Mapping):
        raw: Mapping[str, Any] = path_or_dict
        source = name or "config.json"
    else:
        path = Path(path_or_dict)
        if path.is_dir():
            path = path / "config.json"
        text = _read_text(path, "config.json")
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}: not valid JSON: {exc}") from None
        except (ValueError, RecursionError) as exc:  # an integer of thousands of digits, deep nesting
            raise ConfigError(f"{path}: not valid JSON: {type(exc).__name__}: {str(exc).splitlines()[0]}") from None
        source = str(path)
        if not isinstance(raw, Mapping):
            raise field_error("config.json", type(raw).__name__, "a JSON object", source=source)
        if name is None:
            name = path.parent.name if path.name == "config.json" and path.parent.name else path.stem
    cfg: dict[str, Any] = dict(raw)
    if isinstance(raw.get("text_config"), Mapping):  # multimodal: the language model lives here
        text_cfg = dict(raw["text_config"])
        for key in ("tie_word_embeddings",):
            if key in raw and key not in text_cfg:
                text_cfg[key] = raw[key]
        cfg = text_cfg
    hf = _HF(cfg, source)
    model_type = str(cfg.get("model_type") or raw.get("model_type") or "")
    top_type = str(raw.get("model_type") or model_type)
    verified = is_verified_family(model_type) or is_verified_family(top_type)
    archs = raw.get("architectures") or []
    llama4 = model_type.startswith("llama4") or top_type.startswith("llama4")

    expert_key = hf.first(_EXPERT_COUNT_KEYS)
    if expert_key is None or cfg[expert_key] == 0:  # not an MoE model: nothing else is worth reporting
        raise field_error(" / ".join(_EXPERT_COUNT_KEYS), "<missing>",
                          f"a routed-expert count: sievesim simulates MoE models and this config "
                          f"(model_type {model_type or '?'!r}, architectures {archs}) looks dense or unknown",
                          source=source)
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
    is_mla = hf.has("kv_lora_rank")
    kw: dict[str, Any] = {}
    if is_mla:
        kw.update(q_lora_rank=hf.int("q_lora_rank", 0), kv_lora_rank=hf.int("kv_lora_rank"),
                  qk_nope_head_dim=hf.int("qk_nope_head_dim"), qk_rope_head_dim=hf.int("qk_rope_head_dim"),
                  v_head_dim=hf.int("v_head_dim"))
        head_dim = kw["qk_nope_head_dim"] + kw["qk_rope_head_dim"]
    elif hf.has("head_dim"):
        head_dim = hf.int("head_dim")
    else:
        if hidden % heads:
            hf.problem("num_attention_heads", heads, f"a divisor of hidden_size = {hidden} (config has no head_dim)")
        head_dim = max(hidden // heads, 1)

    # ---- attention kind per layer
    hf.consider("use_sliding_window", "max_window_layers")  # read below only where they apply
    layer_types = hf.list("layer_types")
    if layer_types is not None:
        if len(layer_types) < num_layers:
            hf.problem("layer_types", f"<{len(layer_types)} entries>",
                       f"one entry per layer (num_hidden_layers = {num_layers})")
        entries = layer_types[:num_layers]
        _kind_problems("layer_types", entries, tuple(sorted(_HF_LAYER_TYPES)), hf.problems, source)
        attention = [_HF_LAYER_TYPES.get(t, "full") if isinstance(t, str) else "full" for t in entries]
        if is_mla:
            attention = ["mla" if a == "full" else a for a in attention]
        branch = "layer_types"
        if llama4:  # layer_types already says which layers are chunked; RoPE/NoPE changes no cost
            hf.consider("no_rope_layers", "no_rope_layer_interval")
        if hf.has("full_attention_interval"):  # Qwen3.5 gives both: they must agree
            interval = hf.int("full_attention_interval")
            implied = ["full" if (i + 1) % interval == 0 else "linear" for i in range(num_layers)]
            if attention != implied and len(entries) == num_layers:
                hf.problem("full_attention_interval", interval,
                           "the pattern layer_types gives (every N-th layer full, the rest linear)")
    elif llama4 or hf.has("no_rope_layers"):
        branch = "llama4"
        attention = _llama4_attention(hf, num_layers)
    elif hf.has("full_attention_interval"):
        branch = "interval"
        interval = hf.int("full_attention_interval")
        attention = ["full" if (i + 1) % interval == 0 else "linear" for i in range(num_layers)]
    elif is_mla:
        branch = "mla"
        attention = ["mla"] * num_layers
    else:
        branch = "sliding_window"
        use_sw = hf.bool("use_sliding_window", True)
        window = cfg.get("sliding_window")
        hf.consider("sliding_window")
        if use_sw and window:
            max_window_layers = hf.int("max_window_layers", num_layers)
            # Qwen2/3 convention: layers >= max_window_layers use the sliding window.
            attention = ["sliding" if (i >= max_window_layers or "max_window_layers" not in cfg) else "full"
                         for i in range(num_layers)]
            if model_type.startswith("mixtral") or model_type.startswith("mistral"):
                attention = ["sliding"] * num_layers
        else:
            attention = ["full"] * num_layers
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

    # ---- MLP kind per layer
    moe_layers = hf.index_list("moe_layers", num_layers)
    if moe_layers is not None:  # Llama 4 (as saved by transformers): wins over the step
        hf.consider("interleave_moe_layer_step")
        mlp = ["moe" if i in set(moe_layers) else "dense" for i in range(num_layers)]
    elif hf.has("interleave_moe_layer_step") or llama4:
        step = hf.int("interleave_moe_layer_step", 1)
        # transformers' Llama4TextConfig: moe_layers = range(step - 1, num_layers, step)
        mlp = ["moe" if i % step == step - 1 else "dense" for i in range(num_layers)]
    elif model_type.startswith("deepseek") or hf.has("first_k_dense_replace") or hf.has("moe_layer_freq"):
        first_dense = hf.int("first_k_dense_replace", 0)
        freq = hf.int("moe_layer_freq", 1)
        mlp = ["moe" if (i >= first_dense and i % freq == 0) else "dense" for i in range(num_layers)]
    else:
        step = hf.int("decoder_sparse_step", 1)
        only = hf.list("mlp_only_layers") or []
        if not all(_is_int(i) and 0 <= i < num_layers for i in only):
            hf.problem("mlp_only_layers", only, f"a list of layer indices from 0 to {num_layers - 1}")
        mlp = ["moe" if (i not in only and (i + 1) % step == 0) else "dense" for i in range(num_layers)]

    # ---- expert sizes
    if hf.has("moe_intermediate_size"):
        moe_inter = hf.int("moe_intermediate_size")
    elif model_type.startswith(("qwen", "deepseek")):  # these give the expert width apart, always
        hf.problem("moe_intermediate_size", "<missing>", f"the expert width (model_type {model_type!r} "
                   "keeps intermediate_size for dense layers)")
        moe_inter = 1
    else:  # GPT-OSS, Mixtral, Llama 4: intermediate_size is the expert's
        moe_inter = hf.int("intermediate_size", why="the expert width, as the config has no moe_intermediate_size")
    dense_inter = 0
    if "dense" in mlp:
        if llama4 or hf.has("intermediate_size_mlp"):
            dense_inter = hf.int("intermediate_size_mlp", why="the config has dense layers")
        elif not hf.has("moe_intermediate_size"):
            if not model_type.startswith(("qwen", "deepseek")):  # else named above
                hf.problem("moe_intermediate_size", "<missing>",
                           "the expert width, distinct from intermediate_size (config has dense layers)")
        else:
            dense_inter = hf.int("intermediate_size", why="the dense FFN width: the config has dense layers")
    else:  # no dense layer: the dense widths change nothing
        hf.consider("intermediate_size", "intermediate_size_mlp")
    n_shared, shared_inter, shared_gate = 0, 0, False
    if llama4:  # Llama4TextMoe: one shared expert of intermediate_size, no gate
        n_shared, shared_inter = 1, moe_inter
    elif hf.has("n_shared_experts"):  # DeepSeek: n shared experts of moe_intermediate_size each
        n_shared = hf.int("n_shared_experts")
        shared_inter = moe_inter if n_shared else 0
    elif hf.has("shared_expert_intermediate_size") and cfg["shared_expert_intermediate_size"] != 0:
        n_shared = 1  # Qwen2-MoE / Qwen3-Next / Qwen3.5: one gated shared expert
        shared_inter = hf.int("shared_expert_intermediate_size")
        shared_gate = True

    gpt_oss = model_type == "gpt_oss"
    deepseek = model_type.startswith("deepseek")
    gated = model_type.startswith(("qwen3_next", "qwen3_5")) and hf.bool("attn_output_gate", True)
    if deepseek:
        hf.consider("topk_method")
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
        attention_bias=hf.bool("attention_bias", gpt_oss) or model_type == "qwen2_moe",
        attention_sinks=gpt_oss, qk_norm=model_type.startswith(("qwen3", "qwen3_5")),
        attention_output_gate=gated, expert_bias=gpt_oss,
        router_bias=gpt_oss or (deepseek and cfg.get("topk_method") == "noaux_tc"),
        num_mtp_layers=hf.int("num_nextn_predict_layers", 0) or hf.int("mtp_num_hidden_layers", 0),
        source=f"Hugging Face config ({source}; model_type {model_type or '?'}; {family})",
    )
    if not is_mla and heads % kv_heads:
        hf.problem("num_key_value_heads", kv_heads, f"a divisor of num_attention_heads = {heads}")
    _check_unused_keys(hf, model_type, verified)
    hf.raise_if_any()
    try:
        spec = ModelSpec(**kw)
    except ConfigError as exc:  # what the reading gives breaks a rule of the spec: name the file
        msg = str(exc)
        prefix = f"model {kw['name']!r}: "
        raise ConfigError(f"{source}: as read, {msg[len(prefix):]}" if msg.startswith(prefix) else msg) from None
    if not verified:
        warnings.warn(f"{source}: model_type {model_type or '?'!r} is an unverified family: every structural key "
                      "was understood, but its parameter counts were not checked against published figures",
                      UnverifiedFamilyWarning, stacklevel=2)
    return spec


class UnverifiedFamilyWarning(UserWarning):
    """A Hugging Face config of a ``model_type`` outside :data:`VERIFIED_FAMILIES` was read."""


def _llama4_attention(hf: _HF, num_layers: int) -> list[str]:
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
