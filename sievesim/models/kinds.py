"""The kinds a layer can be: its attention (:data:`ATTENTION_KINDS`) and its MLP (:data:`MLP_KINDS`),
and what a chunked-attention layer attends to (:func:`chunked_attended_tokens`)."""
from __future__ import annotations

#: Per-layer attention kinds. ``full``: softmax attention over the whole context (GQA/MHA/MQA);
#: ``sliding``: softmax attention over the last ``sliding_window`` tokens; ``chunked``: softmax
#: attention over the tokens of the current chunk of ``attention_chunk_size`` tokens (Llama 4's
#: local layers: a token at position ``p`` sees positions ``C * (p // C) .. p``); ``linear``: Gated
#: DeltaNet (Qwen3-Next / Qwen3.5), a fixed-size recurrent state instead of a KV cache; ``mla``:
#: DeepSeek multi-head latent attention (compressed KV cache of ``kv_lora_rank + qk_rope_head_dim``);
#: ``mamba``: a Mamba-2 state-space mixer (Nemotron-H), like ``linear`` a fixed-size per-request
#: state (SSM state and convolution window) read and written every step instead of a KV cache.
ATTENTION_KINDS: tuple[str, ...] = ("full", "sliding", "chunked", "linear", "mla", "mamba")
#: Attention kinds that keep a fixed-size recurrent state per request instead of a KV cache.
STATE_KINDS: tuple[str, ...] = ("linear", "mamba")
#: Attention kinds with a per-head K/V cache (projections and KV bytes as in standard GQA).
_SOFTMAX_GQA_KINDS: tuple[str, ...] = ("full", "sliding", "chunked")
#: Per-layer MLP kinds: ``moe`` (router + routed experts (+ shared experts)), ``dense`` (one SwiGLU FFN)
#: or ``none`` (a layer of its mixer only: Nemotron-H's Mamba and attention blocks without an MLP).
MLP_KINDS: tuple[str, ...] = ("moe", "dense", "none")


def chunked_attended_tokens(context_len: int, chunk: int) -> int:
    """Tokens the newest of ``context_len`` tokens attends to under chunked attention with chunks
    of ``chunk`` tokens: the tokens of its own chunk, ``(context_len - 1) % chunk + 1`` (0 for an
    empty context; ``context_len`` when ``chunk`` is 0)."""
    if context_len <= 0:
        return 0
    return (context_len - 1) % chunk + 1 if chunk > 0 else context_len

