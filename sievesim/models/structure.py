"""What the fields of a :class:`~sievesim.models.ModelSpec` for the architectures beyond attention +
MoE must mean together (checked at construction, :func:`structure_problems`): Mamba-2 heads in whole
groups, layers without an MLP only beside MoE layers, a DSA indexer on MLA layers, MTP decoding only
with MTP layers, per-kind KV heads that divide the query heads; and one GPU's share of a model under
tensor parallelism (:func:`tensor_shard`), which splits those layers' heads too."""
from __future__ import annotations

import dataclasses
from typing import Any

from .._validate import Problems
from ..errors import field_error


def structure_problems(spec: Any, problems: Problems, src: str) -> None:
    """Add to ``problems`` each rule of the hybrid-architecture fields ``spec`` breaks (one problem each)."""
    kinds = set(spec.layer_attention)
    with problems.check():
        if "mamba" in kinds and spec.mamba_groups > 0 and spec.mamba_num_heads % spec.mamba_groups:
            raise field_error("mamba_num_heads", spec.mamba_num_heads,
                              f"a multiple of mamba_groups = {spec.mamba_groups}", source=src)
    with problems.check():   # a step prices every non-MoE layer's MLP at dense_intermediate_size
        if "none" in spec.layer_mlp and "dense" in spec.layer_mlp:
            raise field_error("layer_mlp", "<'none' and 'dense' layers>", "layers without an MLP ('none') "
                              "only beside MoE layers, not beside dense ones", source=src)
    with problems.check():
        index = (spec.index_n_heads, spec.index_head_dim, spec.index_topk)
        if any(index) and (not all(index) or "mla" not in kinds or not spec.q_lora_rank):
            raise field_error("index_n_heads, index_head_dim, index_topk", list(index), "all 0, or all positive "
                              "in a model with MLA layers and a q_lora_rank (the indexer's queries come from "
                              "the query latent)", source=src)
    with problems.check():
        if spec.mtp_tokens and not spec.num_mtp_layers:
            raise field_error("mtp_tokens", spec.mtp_tokens, "0 for a model without MTP layers "
                              "(num_mtp_layers = 0)", source=src)
    for fname in ("sliding_num_kv_heads", "full_num_kv_heads"):
        with problems.check():
            nkv = getattr(spec, fname)
            if nkv and spec.num_attention_heads % nkv:
                raise field_error(fname, nkv, f"a divisor of num_attention_heads = {spec.num_attention_heads}",
                                  source=src)


def tensor_shard(spec: Any, shards: int, *, attention: bool = True, experts: bool = False) -> Any:
    """One GPU's share of ``spec`` under tensor parallelism over ``shards`` GPUs
    (:meth:`~sievesim.models.ModelSpec.tensor_shard`, which documents it)."""
    from .._validate import check_int
    check_int("tensor-parallel shards", shards, "gpus")
    if shards == 1:
        return spec
    changes: dict[str, Any] = {"name": f"{spec.name} (1/{shards} tensor shard)"}

    def split(fname: str, what: str) -> None:
        value = getattr(spec, fname)
        if value and value % shards:
            raise field_error(fname, value, f"a multiple of the {shards} GPUs it is split over ({what})",
                              source=f"model {spec.name!r}")
        changes[fname] = value // shards

    if attention:
        split("num_attention_heads", "tensor-parallel attention splits the query heads")
        if "mla" not in spec.layer_attention:
            changes["num_kv_heads"] = max(1, spec.num_kv_heads // shards) if spec.num_kv_heads >= shards else 1
            if spec.num_kv_heads >= shards and spec.num_kv_heads % shards:
                raise field_error("num_kv_heads", spec.num_kv_heads, f"a multiple of the {shards} GPUs, or fewer "
                                  "(each GPU then keeps one replicated KV head)", source=f"model {spec.name!r}")
        else:
            changes["num_kv_heads"] = changes["num_attention_heads"]
        for fname in ("sliding_num_kv_heads", "full_num_kv_heads"):
            n = getattr(spec, fname)
            if n:
                changes[fname] = max(1, n // shards)
                if n >= shards and n % shards:
                    split(fname, "tensor-parallel attention splits the KV heads")
        if "linear" in spec.layer_attention:
            split("linear_num_key_heads", "tensor-parallel linear attention splits its heads")
            split("linear_num_value_heads", "tensor-parallel linear attention splits its heads")
        if "mamba" in spec.layer_attention:
            split("mamba_num_heads", "tensor-parallel Mamba layers split their heads")
            split("mamba_groups", "tensor-parallel Mamba layers split their B/C groups")
        split("dense_intermediate_size", "tensor-parallel MLPs split their intermediate size")
        split("shared_expert_intermediate_size", "tensor-parallel shared experts split their intermediate size")
        changes["vocab_size"] = -(-spec.vocab_size // shards)
    if experts:
        split("moe_intermediate_size", "tensor-parallel experts split their intermediate size")
    return dataclasses.replace(spec, **changes)
