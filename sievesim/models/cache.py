"""What one request keeps between decode steps, derived from a :class:`~sievesim.models.ModelSpec`:
the KV cache of softmax-attention and MLA layers (per token, per layer, held for a context) and
the fixed-size state of linear-attention layers.

:class:`CacheSizes` is mixed into ``ModelSpec`` and reads its fields; nothing here is stored.
Units: bytes, tokens, elements as named.
"""
from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from .._inputs import is_int as _is_int
from ..errors import field_error
from .kinds import _SOFTMAX_GQA_KINDS, STATE_KINDS


class CacheSizes:
    """KV-cache and linear-attention state sizes of a ``ModelSpec`` (a mixin: see the module docstring)."""

    # ------------------------------------------------------------------ widths
    @property
    def kv_bytes_per_element(self) -> float:
        """Bytes per KV-cache element (``kv_dtype_bytes`` or ``dtype_bytes``)."""
        return self.dtype_bytes if self.kv_dtype_bytes is None else self.kv_dtype_bytes

    @property
    def state_bytes_per_element(self) -> float:
        """Bytes per element of the linear-attention recurrent state."""
        return self.dtype_bytes if self.state_dtype_bytes is None else self.state_dtype_bytes

    # ------------------------------------------------------------------ KV cache
    def kv_bytes_per_token(self, layer: int) -> float:
        """KV-cache bytes one token adds at ``layer``: ``2*nkv*d`` elements (full/sliding),
        ``kv_lora_rank + qk_rope_head_dim`` (MLA; ``+ index_head_dim`` with a DSA indexer), 0 (linear
        attention keeps a fixed state)."""
        kind = self.layer_attention[self._check_layer(layer)]
        return self._kv_elements(kind) * self.kv_bytes_per_element

    def _kv_elements(self, kind: str) -> int:
        if kind in _SOFTMAX_GQA_KINDS:
            if (self.sliding_num_kv_heads or self.full_num_kv_heads or self.full_head_dim or self.full_k_eq_v
                    or self.v_head_dim):     # a per-kind shape (else: num_kv_heads keys and values of head_dim)
                return self.attention_dims(kind)[1] * self.kv_per_head(kind)
            return 2 * self.num_kv_heads * self.head_dim
        if kind == "mla":   # the latent and rope key (+ the DSA indexer's key)
            return self.kv_lora_rank + self.qk_rope_head_dim + self.index_head_dim
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
        0 for linear and Mamba layers (a fixed state instead)."""
        kind = self.layer_attention[self._check_layer(layer)]
        if not _is_int(context_len) or not 0 <= context_len < 2**62:
            raise field_error("context_len", context_len, "a non-negative integer (tokens)")
        return int(self._held(kind, np.array([context_len], dtype=np.int64))[0])

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
    def mamba_state_bytes_per_layer(self) -> float:
        """Bytes of one request's Mamba-2 state in one ``mamba`` layer: SSM state
        ``mamba_num_heads * mamba_head_dim * mamba_state_size`` (state dtype) + convolution state
        ``(inner + 2 * mamba_groups * mamba_state_size) * (mamba_conv_kernel - 1)`` (model dtype).
        0 when the model has no Mamba layer."""
        if "mamba" not in self.layer_attention:
            return 0.0
        inner = self.mamba_num_heads * self.mamba_head_dim
        ssm = inner * self.mamba_state_size * self.state_bytes_per_element
        conv = (inner + 2 * self.mamba_groups * self.mamba_state_size) * (self.mamba_conv_kernel - 1) * self.dtype_bytes
        return float(ssm + conv)

    @property
    def linear_state_bytes_per_request(self) -> float:
        """Bytes of one request's fixed state over all linear-attention and Mamba layers (independent of length)."""
        total = self.linear_state_bytes_per_layer * self.layer_attention.count("linear")
        if "mamba" in self.layer_attention:
            total += self.mamba_state_bytes_per_layer * self.layer_attention.count("mamba")
        return total

    def kv_cache_bytes_per_request(self, context_len: int) -> float:
        """Bytes of one request's KV cache + linear state over all layers at ``context_len`` tokens."""
        if not _is_int(context_len) or context_len < 0:
            raise field_error("context_len", context_len, "a non-negative integer (tokens)")
        return float(self.kv_cache_bytes(np.array([int(context_len)], dtype=np.int64))[0])

    def kv_tokens_held_many(self, layer: int, context_lens: Any) -> np.ndarray:
        """:meth:`kv_tokens_held` of every request in ``context_lens`` (tokens, integers >= 0) at
        ``layer``, as an int64 array."""
        kind = self.layer_attention[self._check_layer(layer)]
        return self._held(kind, _token_counts(context_lens))

    def _held(self, kind: str, lens: np.ndarray) -> np.ndarray:
        """Tokens held at a layer of ``kind`` for int64 contexts ``lens`` (as :meth:`kv_tokens_held`;
        ``chunked_attended_tokens`` of :mod:`~sievesim.models.kinds` over an array)."""
        if kind in STATE_KINDS:
            return np.zeros_like(lens)
        if kind == "sliding" and self.sliding_window:
            return np.minimum(lens, int(self.sliding_window))
        if kind == "chunked" and self.attention_chunk_size:
            return np.where(lens > 0, (lens - 1) % int(self.attention_chunk_size) + 1, 0)
        return lens

    def kv_cache_bytes(self, context_lens: Any) -> np.ndarray:
        """:meth:`kv_cache_bytes_per_request` of every request in ``context_lens`` (tokens, an
        integer array >= 0) at once [bytes]. Layers of one attention kind hold the same tokens and
        elements, so the sum runs over kinds; every term is an integer times a dyadic byte width,
        so the sum is exact whatever its order."""
        lens = _token_counts(context_lens)
        total = np.zeros(lens.shape, dtype=np.float64)
        for kind, layers in Counter(self.layer_attention).items():
            elements = self._kv_elements(kind)
            if kind not in STATE_KINDS and elements:
                total += self._held(kind, lens) * float(layers * elements * self.kv_bytes_per_element)
        return total + self.linear_state_bytes_per_request


def _token_counts(context_lens: Any) -> np.ndarray:
    """``context_lens`` as an int64 array, refused (naming ``context_len``) unless integers >= 0."""
    lens = np.asarray(context_lens)
    if lens.size and (lens.dtype.kind not in "iu" or lens.min() < 0):
        bad = lens.ravel()[0] if lens.dtype.kind not in "iu" else lens.min()
        raise field_error("context_len", bad, "non-negative integers (tokens)")
    return lens.astype(np.int64, copy=False)
