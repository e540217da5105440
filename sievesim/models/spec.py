"""The model spec: :class:`ModelSpec`, its fields, and the checks of each field.

A :class:`ModelSpec` carries exactly what the simulator needs about one Mixture-of-Experts
transformer: the kind of every layer (attention: full / sliding-window / chunked / linear (Gated
DeltaNet) / MLA / Mamba-2; MLP: MoE, dense or none), the tensor shapes, and the storage widths. Everything else
-- parameter counts, bytes per expert (:mod:`~sievesim.models.weights`), KV-cache bytes,
linear-attention state (:mod:`~sievesim.models.cache`) -- is *derived* from those shapes by
properties, never stored.

Checks run in two stages, each reporting all its problems in one message: the type and range of
every field (:func:`_field_problems`, beside the field tables), then what the fields mean together
(``ModelSpec.__post_init__``).

Units: sizes called ``*_size`` / ``*_dim`` / ``*_rank`` are element counts; ``*_bytes`` are bytes;
parameter counts are numbers of scalar weights; ``sliding_window`` is in tokens.
"""
from __future__ import annotations

import dataclasses
import difflib
import functools
import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from .._inputs import is_int as _is_int
from .._validate import BOUNDS, Problems, check_int
from ..errors import ConfigError, field_error
from ..formats import FORMAT_PARTS, get_format
from .cache import CacheSizes
from .structure import structure_problems
from .kinds import _SOFTMAX_GQA_KINDS, ATTENTION_KINDS, MLP_KINDS
from .weights import WeightCounts


@dataclass(frozen=True)
class ModelSpec(WeightCounts, CacheSizes):
    """Shapes of one MoE transformer (decoder only; embeddings, layers, final norm, LM head).

    Every routed/shared expert and every dense FFN is a SwiGLU block of three matrices
    (gate ``h x I``, up ``h x I``, down ``I x h``). Construction validates all fields and raises
    :class:`~sievesim.errors.ConfigError` naming the first bad field and its value.

    The derived quantities are properties of the two bases: parameter counts and weight bytes
    (:class:`~sievesim.models.weights.WeightCounts`), KV-cache and linear-attention state sizes
    (:class:`~sievesim.models.cache.CacheSizes`).
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
    #: Per-part override: bytes per non-expert linear weight (attention projections, dense MLPs,
    #: router); None = dtype_bytes. Embedding and LM head stay at ``dtype_bytes`` (checkpoints keep
    #: them unquantised).
    weight_dtype_bytes: float | None = None
    #: Storage format of the routed/shared experts (:mod:`sievesim.formats`; e.g. ``"mxfp4"``);
    #: None = bf16 (or whatever ``expert_dtype_bytes`` says, computed in bf16).
    expert_format: str | None = None
    #: Storage format of the non-expert linear weights; None = bf16.
    weight_format: str | None = None
    #: Storage format of the KV cache (``"bf16"`` or ``"fp8"``); None = bf16.
    kv_format: str | None = None
    # --- attention details (parameter counting) ---
    #: q/k/v/o projections carry biases (GPT-OSS).
    attention_bias: bool = False
    #: q/k/v projections carry biases, the output projection none (Qwen2-MoE, GLM-4.5); exclusive
    #: with ``attention_bias``.
    qkv_bias: bool = False
    #: One learned attention-sink logit per query head per layer (GPT-OSS).
    attention_sinks: bool = False
    #: Attention sinks on the sliding-window layers only (MiMo-V2's ``add_swa_attention_sink_bias``).
    sliding_attention_sinks: bool = False
    #: KV heads of the sliding-window layers when they differ from ``num_kv_heads`` (MiMo-V2); 0: the same.
    sliding_num_kv_heads: int = 0
    #: KV heads and head size of the full-attention layers when they differ (Gemma 4's global layers); 0: the same.
    full_num_kv_heads: int = 0
    full_head_dim: int = 0
    #: The full-attention layers use their keys as values: no value projection, keys alone cached (Gemma 4).
    full_k_eq_v: bool = False
    #: Small weights per layer the shapes do not give (Gemma 4: five more RMSNorms, the router's input
    #: scale, a layer scalar), counted in every layer.
    extra_layer_params: int = 0
    #: RMSNorm on q and k per head (Qwen3): ``2 * head_dim`` weights per layer.
    qk_norm: bool = False
    #: With ``qk_norm``: the q and k RMSNorms span all heads (OLMoE, MiniMax-M2):
    #: ``(num_attention_heads + num_kv_heads) * head_dim`` weights per layer instead of ``2 * head_dim``.
    qk_norm_over_heads: bool = False
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
    #: Per-head value dimension (elements); in a model without MLA, the value heads of its softmax
    #: layers when narrower than their keys (MiMo-V2), 0: ``head_dim``.
    v_head_dim: int = 0
    # --- DeepSeek sparse attention (DSA: DeepSeek-V3.2, GLM-5) on MLA layers; all 0 when absent ---
    #: Indexer heads and their size: the indexer scores every past token (its keys, ``index_head_dim``
    #: wide, are cached per token) and attention reads only the ``index_topk`` best.
    index_n_heads: int = 0
    index_head_dim: int = 0
    #: Tokens each query attends to (the indexer's top-k).
    index_topk: int = 0
    # --- Gated DeltaNet linear attention (Qwen3-Next / Qwen3.5); all 0 when absent ---
    linear_num_key_heads: int = 0
    linear_num_value_heads: int = 0
    #: Elements per linear-attention key head.
    linear_key_head_dim: int = 0
    #: Elements per linear-attention value head.
    linear_value_head_dim: int = 0
    #: Causal depthwise convolution width (taps) over q/k/v.
    linear_conv_kernel_dim: int = 0
    # --- Mamba-2 state-space layers (``mamba`` kind, Nemotron-H); all 0 when absent ---
    #: SSM heads and elements per head (the inner width is their product); state size ``N`` per head
    #: (a head's state is ``mamba_head_dim x N``); groups of heads sharing the B and C projections;
    #: causal depthwise convolution width (taps) over x, B and C.
    mamba_num_heads: int = 0
    mamba_head_dim: int = 0
    mamba_state_size: int = 0
    mamba_groups: int = 0
    mamba_conv_kernel: int = 0
    # --- MoE details ---
    #: Experts, shared experts and dense MLPs are gated (gate, up, down: SwiGLU); false: two
    #: matrices (up, down) and an elementwise activation (Nemotron-H's squared ReLU).
    mlp_gated: bool = True
    #: Routed experts carry biases on gate/up (``2I``) and down (``h``) projections (GPT-OSS).
    expert_bias: bool = False
    #: The router has one bias (or score-correction bias, DeepSeek-V3) per expert.
    router_bias: bool = False
    #: Group-limited routing (DeepSeek-V3's ``n_group``): the routed experts form this many groups of
    #: consecutive experts (8 groups of 32); None: no groups.
    expert_groups: int | None = None
    #: Groups a token's experts come from (``topk_group``: 4 of the 8); None: every group.
    top_k_groups: int | None = None
    #: A scalar sigmoid gate ``h -> 1`` on the shared-expert output (Qwen2-MoE / Qwen3-Next / 3.5).
    shared_expert_gate: bool = False
    #: Multi-token-prediction layers shipped with the checkpoint (DeepSeek-V3's ``num_nextn_predict_layers``):
    #: not in ``total_params`` (the publishers' convention); their weights are ``mtp_params``.
    num_mtp_layers: int = 0
    #: MTP decoding: draft tokens the MTP layers propose per request per decode step, verified by
    #: the main model in the next (0: off). When on, the MTP layers' weights are held on the GPUs
    #: (``total_bytes`` counts ``mtp_bytes``).
    mtp_tokens: int = 0
    #: Where the values come from (free text, for humans; not part of equality or hashing).
    source: str = field(default="", compare=False)
    #: Keys of the Hugging Face config this spec was read from that change nothing in a decode step,
    #: each with the reason, as ``((key, reason), ...)`` (a mapping is accepted); provenance like
    #: ``source``: not part of equality, not written to TOML.
    ignored_keys: tuple[tuple[str, str], ...] = field(default=(), compare=False)

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
        object.__setattr__(self, "ignored_keys", _ignored_keys(self.ignored_keys, src))

        with problems.check():
            if self.top_k > self.num_experts:
                raise field_error("top_k", self.top_k, f"at most num_experts = {self.num_experts}", source=src)
        with problems.check():
            _check_groups(self, src)
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
            if self.attention_bias and self.qkv_bias:
                raise field_error("qkv_bias", True, "false when attention_bias is true (attention_bias already "
                                  "puts biases on q/k/v and the output projection)", source=src)
        with problems.check():
            if self.qk_norm_over_heads and not self.qk_norm:
                raise field_error("qk_norm_over_heads", True, "false when qk_norm is false", source=src)
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
                            "linear_value_head_dim", "linear_conv_kernel_dim"), "linear-attention"),
                ("mamba", ("mamba_num_heads", "mamba_head_dim", "mamba_state_size", "mamba_groups",
                           "mamba_conv_kernel"), "Mamba")):
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
        structure_problems(self, problems, src)
        for fmt_field, bytes_field in _FORMAT_FIELDS.items():   # a format fixes its bytes
            fmt = getattr(self, fmt_field)
            if fmt is None:
                continue
            want = get_format(fmt).bytes_per_element
            have = getattr(self, bytes_field)
            object.__setattr__(self, fmt_field, get_format(fmt).name)
            if have is None:
                object.__setattr__(self, bytes_field, want)
            else:
                with problems.check():
                    if not math.isclose(have, want, rel_tol=1e-12):
                        raise field_error(bytes_field, have, f"{want:g} bytes per element, as {fmt_field} = "
                                          f"{fmt!r} stores (or leave {bytes_field} out)", source=src)
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
        """Number of layers with a dense FFN."""
        return self.layer_mlp.count("dense")

    def layers_of_kind(self, kind: str) -> tuple[int, ...]:
        """Indices of the layers whose attention kind is ``kind`` (one of :data:`ATTENTION_KINDS`)."""
        if kind not in ATTENTION_KINDS:
            raise field_error("attention kind", kind, f"one of {list(ATTENTION_KINDS)}")
        return tuple(i for i, k in enumerate(self.layer_attention) if k == kind)

    def _check_layer(self, layer: int) -> int:
        if not _is_int(layer) or not 0 <= layer < self.num_layers:
            raise field_error("layer", layer, f"a layer index in [0, {self.num_layers})", source=f"model {self.name!r}")
        return layer


    # ------------------------------------------------------------------ variants
    def with_formats(self, formats: Mapping[str, str]) -> "ModelSpec":
        """This model with the storage formats of some parts replaced (``{"experts": "mxfp4",
        "weights": "fp8", "kv": "fp8"}``, :data:`sievesim.formats.FORMAT_PARTS`); the bytes follow."""
        changes: dict[str, Any] = {}
        for part, fmt in formats.items():
            if part not in FORMAT_PARTS:
                raise field_error("formats", part, f"one of {list(FORMAT_PARTS)}")
            name = get_format(fmt, f"{part} format").name
            fmt_field = {"experts": "expert_format", "weights": "weight_format", "kv": "kv_format"}[part]
            changes[fmt_field] = name
            changes[_FORMAT_FIELDS[fmt_field]] = None
        return dataclasses.replace(self, **changes)

    @property
    def expert_tensor_core(self) -> str:
        """Tensor-core class the experts' format asks for (``bf16``, ``fp8``, ``fp4``)."""
        return _tensor_core(self.expert_format)

    @property
    def weight_tensor_core(self) -> str:
        """Tensor-core class the non-expert weights' format asks for."""
        return _tensor_core(self.weight_format)

    def tensor_shard(self, shards: int, *, attention: bool = True, experts: bool = False) -> "ModelSpec":
        """One GPU's share of this model under tensor parallelism over ``shards`` GPUs, as a model of
        its own: attention split by heads (query heads / shards; KV heads / shards, or one
        replicated head when there are fewer KV heads than GPUs; MLA's latent and its down
        projections replicated, as vLLM and SGLang do), dense MLPs and shared experts split by their
        intermediate size, the vocabulary split (vocabulary-parallel embedding and LM head); with
        ``experts`` every routed expert split by its intermediate size too. Routing is unchanged.
        Raises :class:`ConfigError` naming a width that does not divide."""
        from .structure import tensor_shard
        return tensor_shard(self, shards, attention=attention, experts=experts)

    def with_top_k(self, k: int) -> "ModelSpec":
        """A copy that activates ``k`` routed experts per token (validated: ``1 <= k <= num_experts``)."""
        return dataclasses.replace(self, top_k=k)

    @property
    def group_size(self) -> int:
        """Experts per routing group (``num_experts`` without groups)."""
        return self.num_experts // (self.expert_groups or 1)

    def replace(self, **changes: Any) -> "ModelSpec":
        """A validated copy with ``changes`` applied (``dataclasses.replace``)."""
        unknown = sorted(set(changes) - {f.name for f in dataclasses.fields(self)})
        if unknown:
            raise _unknown_field(unknown[0], f"model {self.name!r}")
        return dataclasses.replace(self, **changes)

    def summary(self) -> dict[str, Any]:
        """All fields plus the derived figures, JSON-ready (what ``sievesim model show --json`` prints)."""
        out: dict[str, Any] = {"name": self.name}
        out.update(_plain_fields(self))
        out["layer_attention"] = list(self.layer_attention)
        out["layer_mlp"] = list(self.layer_mlp)
        out["ignored_keys"] = dict(self.ignored_keys)
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
            "mtp_params": self.mtp_params,
        })
        return out


# ====================================================================== field checks
# ``ignored_keys`` is provenance of a reading, not a field users write: left out of the schema.
_FIELD_NAMES = tuple(f.name for f in dataclasses.fields(ModelSpec) if f.name != "ignored_keys")
_DEFAULTS = {f.name: f.default for f in dataclasses.fields(ModelSpec) if f.default is not dataclasses.MISSING}
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
_NON_NEGATIVE_INT_FIELDS = (
    "num_shared_experts", "shared_expert_intermediate_size", "dense_intermediate_size", "q_lora_rank",
    "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "linear_num_key_heads",
    "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim", "linear_conv_kernel_dim",
    "mamba_num_heads", "mamba_head_dim", "mamba_state_size", "mamba_groups", "mamba_conv_kernel",
    "index_n_heads", "index_head_dim", "index_topk", "sliding_num_kv_heads", "full_num_kv_heads", "full_head_dim",
    "extra_layer_params",
    "num_mtp_layers", "mtp_tokens")
# The bound (sievesim._validate.BOUNDS) of each integer field; the others are dimensions.
_FIELD_BOUND = {"num_layers": "layers", "num_attention_heads": "heads", "num_kv_heads": "heads",
                "num_experts": "experts", "top_k": "experts", "vocab_size": "vocab",
                "num_shared_experts": "experts", "linear_num_key_heads": "heads",
                "linear_num_value_heads": "heads", "num_mtp_layers": "layers", "mamba_num_heads": "heads",
                "mamba_groups": "heads", "mtp_tokens": "layers",
                "index_n_heads": "heads", "index_topk": "context", "sliding_num_kv_heads": "heads",
                "full_num_kv_heads": "heads"}
_BOOL_FIELDS = ("tie_word_embeddings", "attention_bias", "qkv_bias", "attention_sinks", "qk_norm",
                "qk_norm_over_heads", "attention_output_gate",
                "expert_bias", "router_bias", "shared_expert_gate", "mlp_gated",
                "sliding_attention_sinks", "full_k_eq_v")
_DTYPE_FIELDS = ("dtype_bytes", "expert_dtype_bytes", "kv_dtype_bytes", "state_dtype_bytes", "weight_dtype_bytes")
#: Each format field and the bytes field it sets.
_FORMAT_FIELDS = {"expert_format": "expert_dtype_bytes", "weight_format": "weight_dtype_bytes",
                  "kv_format": "kv_dtype_bytes"}


def _check_groups(spec: ModelSpec, src: str) -> None:
    """Group-limited routing: groups that divide the experts, at most as many chosen as there are,
    and room in the chosen groups for the top-k experts."""
    groups, chosen = spec.expert_groups, spec.top_k_groups
    if groups is None:
        if chosen is not None:
            raise field_error("top_k_groups", chosen, "none when expert_groups is none (no routing groups)", source=src)
        return
    if spec.num_experts % groups:
        raise field_error("expert_groups", groups, f"a divisor of num_experts = {spec.num_experts} (groups of "
                          "as many consecutive experts)", source=src)
    if chosen is not None and chosen > groups:
        raise field_error("top_k_groups", chosen, f"at most expert_groups = {groups}", source=src)
    room = (chosen or groups) * (spec.num_experts // groups)
    if spec.top_k > room:
        raise field_error("top_k", spec.top_k, f"at most the {room} experts of the top_k_groups = {chosen} groups "
                          f"a token may use ({spec.num_experts // groups} per group)", source=src)


def _ignored_keys(value: Any, src: str) -> tuple[tuple[str, str], ...]:
    """``ignored_keys`` as a tuple of ``(key, reason)`` string pairs (from pairs or a mapping)."""
    pairs = tuple(value.items()) if isinstance(value, Mapping) else value
    if not isinstance(pairs, (tuple, list)) or not all(
            isinstance(p, (tuple, list)) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in pairs):
        raise field_error("ignored_keys", value, "(key, reason) pairs of strings, or a mapping of them", source=src)
    return tuple((k, why) for k, why in pairs)


@functools.lru_cache(maxsize=64)
def _tensor_core(fmt: str | None) -> str:
    """Tensor-core class of format ``fmt`` (``bf16`` without one): asked per GPU and layer."""
    return get_format(fmt).tensor_core if fmt else "bf16"


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


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
    def number_format(fname: str) -> Any:
        def test(value: Any) -> None:
            if value is not None:
                try:
                    get_format(value, fname)
                except ConfigError as exc:
                    raise field_error(fname, value, str(exc).split("expected ", 1)[-1], source=src) from None
        return test

    for fname in _FORMAT_FIELDS:
        check(fname, number_format(fname))
    def groups_or_none(fname: str) -> Any:
        def test(value: Any) -> None:
            if value is not None and (not _is_int(value) or value <= 0):
                raise field_error(fname, value, "a positive number of expert groups or none", source=src)
            if value is not None:
                check_int(fname, value, "experts", source=src)
        return test

    check("expert_groups", groups_or_none("expert_groups"))
    check("top_k_groups", groups_or_none("top_k_groups"))
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


# Keys of the compact TOML layout (models/toml.py) that stand for layer_attention / layer_mlp;
# an unknown field is matched against them too.
_LAYOUT_KEYS = ("attention", "attention_pattern", "dense_layers")


def _unknown_field(key: str, source: str | None) -> ConfigError:
    close = difflib.get_close_matches(key, _FIELD_NAMES + _LAYOUT_KEYS, n=3)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    return field_error(key, "<unknown field>", f"one of the ModelSpec fields{hint}", source=source)  # type: ignore[return-value]


def _plain_fields(spec: ModelSpec) -> dict[str, Any]:
    """Every field of ``spec`` that is not None, per-layer tuples as lists (JSON/TOML-ready)."""
    out: dict[str, Any] = {}
    for fname in _FIELD_NAMES:
        value = getattr(spec, fname)
        if value is not None:
            out[fname] = list(value) if isinstance(value, tuple) else value
    return out
