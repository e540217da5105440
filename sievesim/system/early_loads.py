"""Weights a GPU loads before its decision (Figure 8's early loads), as a stream of two nodes."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["EarlyLoad", "add_early_load", "add_early_nodes", "hottest_first"]

_count = np.count_nonzero


def _one_hot(size: int, index: int) -> np.ndarray:
    out = np.zeros(size, dtype=bool)
    out[index] = True
    return out


def hottest_first(ids: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``ids`` in load order: most tokens first (ties: lower id), so that the grouped GEMM starts on
    a busy expert and its last expert, the tail after the last weights, is the least busy."""
    return ids[np.lexsort((ids, -counts[ids]))] if ids.size > 1 else ids


@dataclass
class EarlyLoad:
    """The weights GPU ``g`` loads before its decision, as a stream of two nodes: the first
    expert's load (``first``) and the rest behind it (``last``, or ``first`` when there is one)."""

    experts: np.ndarray             # bool mask of the local experts loaded early
    first: int | None = None        # node that loads the first of them
    last: int | None = None         # node after which every early weight is loaded
    first_gpu: int | None = None    # node after which the first early expert that runs on the GPU is loaded
    order: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))   # load order (ids)


def add_early_load(b: Any, lb: Any, r: Any, g: int, p: Any,
                   post: list[int]) -> EarlyLoad:
    """Weights of GPU ``g``'s experts loaded right after its router, before the decision.

    Rule ``"cheaper"`` (default): an expert whose local token count alone already makes the GPU
    the cheaper side for it, on the policy's own cost table (its GPU time with those tokens,
    weights included, below its PIM time); such an expert only gets more tokens from the other
    GPUs, so the load is rarely wasted. Rule ``"paper"``: >= 2 local tokens (the paper's rule,
    for comparison). Rule ``"policy"``: the experts the policy named
    (:meth:`~sievesim.policies.Policy.early_experts`), which its decision keeps on the GPU. A policy that
    puts every expert on the GPU (NoExp) loads every locally activated expert. The bytes loaded
    and those wasted (the expert then ran on PIM) are counted. The loads stream one expert after
    another, so the grouped GEMM can start on the first (:func:`add_gpu_path`)."""
    El = b.sim.local_experts
    early = np.zeros(El, dtype=bool)
    if r.own_counts is None:
        return EarlyLoad(early)
    lo = b.sim.expert_offset(g)
    local = r.own_counts[g, lo:lo + El]
    if b.sim.static_placement == "gpu":     # NoExp, GPU-only: every local expert runs on the GPU
        early = local > 0
    elif b.sim.early_loads == "paper":
        early = local >= 2
    elif b.sim.early_loads == "policy":     # named by the policy before its decision, which kept them on the GPU
        early = p.part.info.get("preloaded", early)
    else:     # the rule for every count a GPU's own tokens can reach (up to the batch)
        early = p.ctx.gpu_cheaper_alone(getattr(p.part, "unit", None))[local]
    return add_early_nodes(b, lb, g, early, p, post, local)


def add_early_nodes(b: Any, lb: Any, g: int, early: np.ndarray, p: Any, post: list[int],
                    local: np.ndarray) -> EarlyLoad:
    """The early loads of the experts in ``early`` (after GPU ``g``'s router), counted, in the order
    of :func:`hottest_first` on the GPU's own tokens ``local`` (all it knows before the decision)."""
    ids = hottest_first(np.flatnonzero(early), np.asarray(local))
    if not ids.size:
        return EarlyLoad(early)
    El = early.size
    per_expert = float(b.sim.model.bytes_per_expert)
    b.early_load_bytes += ids.size * per_expert
    b.early_load_wasted_bytes += _count(early & p.on_pim) * per_expert
    first_mask = _one_hot(El, ids[0])
    first = b.graph.add(f"L{lb.layer} early weight load (first) g{g}", per_expert / b.bytes_s, b.r_hbm[g],
                        [post[g]], gpu=g, layer=lb.layer, kind="early_load", experts=first_mask,
                        microbatch=lb.mb, bytes=per_expert)
    last = first
    if ids.size > 1:
        rest = early & ~first_mask
        last = b.graph.add(f"L{lb.layer} early weight load g{g}", (ids.size - 1) * per_expert / b.bytes_s,
                           b.r_hbm[g], [first], gpu=g, layer=lb.layer, kind="early_load", experts=rest,
                           microbatch=lb.mb, bytes=(ids.size - 1) * per_expert)
    first_gpu = first if p.on_gpu[ids[0]] else (last if _count(early & p.on_gpu) else None)
    return EarlyLoad(early, first, last, first_gpu, ids)
