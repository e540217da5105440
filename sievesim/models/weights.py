"""Weights of a :class:`~sievesim.models.ModelSpec`, derived from its shapes: per expert, per
layer (attention, MLP), and in total; and the bytes they take.

:class:`WeightCounts` is mixed into ``ModelSpec`` and reads its fields (``hidden_size``,
``moe_intermediate_size``, the attention shapes, ...); nothing here is stored. Units: parameter
counts are numbers of scalar weights, ``*_bytes`` are bytes.
"""
from __future__ import annotations

from .kinds import _SOFTMAX_GQA_KINDS


class WeightCounts:
    """Parameter counts and weight bytes of a ``ModelSpec`` (a mixin: see the module docstring)."""

    # ------------------------------------------------------------------ widths
    @property
    def expert_bytes_per_param(self) -> float:
        """Bytes per routed/shared-expert weight (``expert_dtype_bytes`` or ``dtype_bytes``)."""
        return self.dtype_bytes if self.expert_dtype_bytes is None else self.expert_dtype_bytes

    @property
    def dense_bytes_per_param(self) -> float:
        """Bytes per non-expert linear weight: attention, dense MLP, router (``weight_dtype_bytes``
        or ``dtype_bytes``)."""
        return self.dtype_bytes if self.weight_dtype_bytes is None else self.weight_dtype_bytes

    # ------------------------------------------------------------------ experts
    @property
    def mlp_matrices(self) -> int:
        """Matrices of one expert or dense MLP: 3 (gate, up, down) when ``mlp_gated``, else 2 (up, down)."""
        return 3 if self.mlp_gated else 2

    @property
    def params_per_expert(self) -> int:
        """Weights of one routed expert: ``3 * h * I`` (``2 * h * I`` ungated) (+ ``2I + h`` biases
        when ``expert_bias``)."""
        h, i = self.hidden_size, self.moe_intermediate_size
        return self.mlp_matrices * h * i + (((self.mlp_matrices - 1) * i + h) if self.expert_bias else 0)

    @property
    def bytes_per_expert(self) -> float:
        """Bytes of one routed expert's weights (``params_per_expert * expert_bytes_per_param``)."""
        return self.params_per_expert * self.expert_bytes_per_param

    @property
    def flops_per_token_per_expert(self) -> int:
        """FLOPs one token spends in one routed expert: ``2 * 3 * h * I`` (``2 * 2 * h * I`` ungated;
        multiply-adds x 2)."""
        return 2 * self.mlp_matrices * self.hidden_size * self.moe_intermediate_size

    @property
    def shared_expert_params(self) -> int:
        """Weights of all shared experts of one MoE layer (+ the ``h -> 1`` gate when present)."""
        per = self.mlp_matrices * self.hidden_size * self.shared_expert_intermediate_size
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
        return self.mlp_matrices * self.hidden_size * self.dense_intermediate_size

    # ------------------------------------------------------------------ attention
    def attention_params_per_layer(self, layer: int) -> int:
        """Weights of the attention block of ``layer`` (projections, biases, sinks, q/k norms).

        ``full``/``sliding``: ``h*(nq*d*(2 if output gate)) + 2*h*nkv*d + nq*d*h``;
        ``mla``: q (low-rank or direct), kv_a (latent + rope key), kv_b, o, latent norms, and the
        DSA indexer when there is one (``wq_b``, ``wk``, the keys' LayerNorm, ``weights_proj``);
        ``linear`` (Gated DeltaNet): qkvz and ba input projections, depthwise conv, ``A_log``,
        ``dt_bias``, gated RMSNorm, output projection; ``mamba`` (Mamba-2): the input projection
        to z, x, B, C and dt, the depthwise convolution over x, B and C (with its bias), ``A_log``,
        ``D``, ``dt_bias``, the gated RMSNorm, the output projection. Layer norms are counted separately.
        """
        kind = self.layer_attention[self._check_layer(layer)]
        return self._attention_params(kind)

    def attention_dims(self, kind: str) -> tuple[int, int, int, int]:
        """Query heads, KV heads, q/k head size and value head size of a softmax layer of ``kind``
        (``sliding_num_kv_heads`` on sliding layers, ``full_num_kv_heads`` and ``full_head_dim`` on
        full layers, when given; ``v_head_dim`` for the values of a model without MLA when given)."""
        nkv, d = self.num_kv_heads, self.head_dim
        if not self._per_kind_shapes:
            return self.num_attention_heads, nkv, d, d
        if kind == "sliding" and self.sliding_num_kv_heads:
            nkv = self.sliding_num_kv_heads
        if kind == "full":
            nkv, d = self.full_num_kv_heads or nkv, self.full_head_dim or d
        dv = self.v_head_dim if self.v_head_dim and "mla" not in self.layer_attention else d
        return self.num_attention_heads, nkv, d, dv

    @property
    def _per_kind_shapes(self) -> bool:
        """Whether any softmax layer's shape differs from ``num_kv_heads x head_dim`` keys and values."""
        return bool(self.sliding_num_kv_heads or self.full_num_kv_heads or self.full_head_dim or self.full_k_eq_v
                    or (self.v_head_dim and "mla" not in self.layer_attention))

    def kv_per_head(self, kind: str) -> int:
        """Elements one token keeps per KV head of a softmax layer of ``kind``: its key and value
        (the key alone where keys double as values: ``full_k_eq_v`` on full layers)."""
        _, _, d, dv = self.attention_dims(kind)
        return d if self.full_k_eq_v and kind == "full" else d + dv

    def _attention_params(self, kind: str) -> int:
        h = self.hidden_size
        if kind in _SOFTMAX_GQA_KINDS:
            nq, nkv, d, dv = self.attention_dims(kind)
            q_out = nq * d * (2 if self.attention_output_gate else 1)
            kv = nkv * self.kv_per_head(kind)
            params = h * q_out + h * kv + nq * dv * h
            if self.attention_bias or self.qkv_bias:
                params += q_out + kv + (h if self.attention_bias else 0)
            if self.attention_sinks or (self.sliding_attention_sinks and kind == "sliding"):
                params += nq
            if self.qk_norm:
                params += (nq + nkv) * d if self.qk_norm_over_heads else 2 * d
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
            if self.index_n_heads:   # DSA indexer: wq_b from the query latent, wk, k LayerNorm, head weights
                nh, hd = self.index_n_heads, self.index_head_dim
                o += self.q_lora_rank * nh * hd + h * hd + 2 * hd + h * nh
            return q + kv + o
        if kind == "linear":
            nk, nv = self.linear_num_key_heads, self.linear_num_value_heads
            key_dim, value_dim = nk * self.linear_key_head_dim, nv * self.linear_value_head_dim
            in_qkvz = h * (2 * key_dim + 2 * value_dim)
            in_ba = h * 2 * nv
            conv = (2 * key_dim + value_dim) * self.linear_conv_kernel_dim
            out = value_dim * h
            return in_qkvz + in_ba + conv + 2 * nv + self.linear_value_head_dim + out
        if kind == "mamba":
            heads, inner = self.mamba_num_heads, self.mamba_num_heads * self.mamba_head_dim
            conv_dim = inner + 2 * self.mamba_groups * self.mamba_state_size
            in_proj = h * (inner + conv_dim + heads)            # z, x B C, dt
            conv = conv_dim * (self.mamba_conv_kernel + 1)      # weights + bias
            return in_proj + conv + 3 * heads + inner + inner * h
        raise AssertionError(kind)  # pragma: no cover - validated in __post_init__

    # ------------------------------------------------------------------ totals
    @property
    def embedding_params(self) -> int:
        """Weights of the input embedding (``vocab_size * hidden_size``)."""
        return self.vocab_size * self.hidden_size

    @property
    def lm_head_params(self) -> int:
        """Weights the LM head reads per token (``vocab_size * hidden_size``, tied or not)."""
        return self.vocab_size * self.hidden_size

    def _mlp_params(self, mlp: str, routed: int) -> int:
        """Weights of an MLP of kind ``mlp`` with ``routed`` routed experts, and its layer's norms (one
        before the attention, one before the MLP; a layer without an MLP has one) and extra small
        weights (``extra_layer_params``)."""
        if mlp == "none":
            return self.hidden_size + self.extra_layer_params
        norms = 2 * self.hidden_size + self.extra_layer_params
        if mlp == "moe":
            return self.router_params + routed * self.params_per_expert + self.shared_expert_params + norms
        return self.dense_mlp_params + norms

    def layer_params(self, layer: int) -> int:
        """All weights of ``layer``: attention, its RMSNorms (two; one without an MLP), and its MLP (all experts)."""
        layer = self._check_layer(layer)
        return self._attention_params(self.layer_attention[layer]) + self._mlp_params(self.layer_mlp[layer],
                                                                                       self.num_experts)

    def active_layer_params(self, layer: int) -> int:
        """Weights of ``layer`` that one token reads: as :meth:`layer_params` with ``top_k`` routed experts."""
        layer = self._check_layer(layer)
        return self._attention_params(self.layer_attention[layer]) + self._mlp_params(self.layer_mlp[layer], self.top_k)

    # ------------------------------------------------------------------ multi-token prediction
    @property
    def mtp_params(self) -> int:
        """Weights of the MTP layers (``num_mtp_layers``; not in ``total_params``). One MTP layer, as
        DeepSeek-V3 and Qwen3-Next build it: RMSNorms of the embedding and of the hidden state, the
        projection of the two concatenated (``2h -> h``), one transformer layer shaped as the model's
        last, and a final RMSNorm; the embedding and the LM head are the main model's, shared (as
        vLLM and SGLang load them; a checkpoint may store copies)."""
        per = self.layer_params(self.num_layers - 1) + 2 * self.hidden_size * self.hidden_size + 3 * self.hidden_size
        return self.num_mtp_layers * per

    @property
    def mtp_bytes(self) -> float:
        """Bytes of the MTP layers' weights (experts at ``expert_bytes_per_param``, the rest at
        ``dense_bytes_per_param``)."""
        last = self.num_layers - 1
        per_layer = self.routed_expert_params_per_layer + self.shared_expert_params
        expert = self.num_mtp_layers * (per_layer if self.layer_mlp[last] == "moe" else 0)
        return expert * self.expert_bytes_per_param + (self.mtp_params - expert) * self.dense_bytes_per_param

    @property
    def num_moe_layers_held(self) -> int:
        """MoE layers whose routed experts the GPUs hold: the model's, plus the MTP layers' when MTP
        decoding is on (``mtp_tokens > 0``) and the last layer, which they copy, is MoE."""
        mtp = self.num_mtp_layers if self.mtp_tokens and self.layer_mlp[self.num_layers - 1] == "moe" else 0
        return self.num_moe_layers + mtp

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
        """Bytes of all weights the GPUs hold: experts at ``expert_bytes_per_param``, the other linear
        weights at ``dense_bytes_per_param``, embedding, LM head and norms at ``dtype_bytes``; plus
        ``mtp_bytes`` when MTP decoding is on (``mtp_tokens > 0``)."""
        mtp = self.mtp_bytes if self.mtp_tokens else 0.0
        expert = self.num_moe_layers * (self.routed_expert_params_per_layer + self.shared_expert_params)
        if self.weight_dtype_bytes is None:
            return expert * self.expert_bytes_per_param + (self.total_params - expert) * self.dtype_bytes + mtp
        edge = self.embedding_params + (0 if self.tie_word_embeddings else self.lm_head_params)
        return (expert * self.expert_bytes_per_param + edge * self.dtype_bytes
                + (self.total_params - expert - edge) * self.weight_dtype_bytes + mtp)

