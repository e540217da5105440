"""Every GPU's early loads and GPU expert path of one layer from arrays (GPUs x local experts).

:func:`~sievesim.system.figure8.add_early_load` and :func:`~sievesim.system.figure8.add_gpu_path`
work one GPU at a time; where the layer's partitions came from one row decision
(:func:`~sievesim.system.decisions.decide_all`) and the grouped GEMM is pipelined, :class:`ExpertRows`
computes what they compute for all GPUs at once (the early rule, the load orders, the GEMM's
durations; every sum over experts is a sum of whole numbers, exact in any order) and
:func:`add_early_and_gpu_path` adds one GPU's nodes from them, the same nodes with the same
durations, dependencies and metadata in the same order (``tests/test_decide_rows.py``)."""
from __future__ import annotations

from typing import Any

import numpy as np

from . import gpu_ops
from .decisions import PartitionRows
from .step_build import GpuPartition, LayerBatch, LayerRouting, StepBuild

try:  # compiled with the package (setup.py); bookkeeping_numpy below gives the same arrays
    from ._expert_rows import expert_rows as _expert_rows
except ImportError:  # pragma: no cover - only when running from an unbuilt source tree
    _expert_rows = None

__all__ = ["ExpertRows", "add_early_and_gpu_path", "bookkeeping", "bookkeeping_numpy"]


def _ranked(keys: np.ndarray) -> np.ndarray:
    """Local ids of each row, most first (ties: lower id), as ``early_loads.hottest_first`` orders:
    one sort of ``(max - key) * n + id``, distinct within a row."""
    n = keys.shape[1]
    top = int(keys.max(initial=0))
    return np.argsort((top - keys) * n + np.arange(n), axis=1)


def _first(mask_in_order: np.ndarray, order: np.ndarray) -> np.ndarray:
    """The id of each row's first flagged entry in ``order`` (garbage where none is flagged)."""
    return np.take_along_axis(order, np.argmax(mask_in_order, axis=1)[:, None], axis=1)[:, 0]


def _last(mask_in_order: np.ndarray, order: np.ndarray) -> np.ndarray:
    """The id of each row's last flagged entry in ``order`` (garbage where none is flagged)."""
    n = order.shape[1]
    at = n - 1 - np.argmax(mask_in_order[:, ::-1], axis=1)
    return np.take_along_axis(order, at[:, None], axis=1)[:, 0]


def _one_hot(ids: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros((ids.size, n), dtype=bool)
    out[np.arange(ids.size), ids] = True
    return out


def bookkeeping_numpy(counts: np.ndarray, local: np.ndarray, on_gpu: np.ndarray, on_pim: np.ndarray,
                      early: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`bookkeeping` over numpy arrays (the reference of the compiled kernel)."""
    G, El = counts.shape
    rows = np.arange(G)
    by_local = _ranked(local)         # early loads: in the order of each GPU's own tokens
    first_early = _first(np.take_along_axis(early, by_local, axis=1), by_local)
    first_early_mask = _one_hot(first_early, El) & early
    early_gpu = early & on_gpu
    last_early_gpu = _last(np.take_along_axis(early_gpu, by_local, axis=1), by_local)
    late = on_gpu & ~early            # late loads: hottest first over all the step's tokens
    by_count = _ranked(counts)
    late_sorted = np.take_along_axis(late, by_count, axis=1)
    first_late_mask = _one_hot(_first(late_sorted, by_count), El) & late
    n_late = np.count_nonzero(late, axis=1)
    n_early_gpu = np.count_nonzero(early_gpu, axis=1)
    tail = np.where(n_late > 0, _last(late_sorted, by_count), np.where(n_early_gpu > 0, last_early_gpu, -1))
    tail_mask = _one_hot(np.maximum(tail, 0), El) & on_gpu & (tail >= 0)[:, None]
    stats = np.stack([np.count_nonzero(early, axis=1), n_early_gpu, np.count_nonzero(early & on_pim, axis=1),
                      (on_gpu[rows, first_early] & early[rows, first_early]).astype(np.int64), n_late, tail,
                      np.where(tail >= 0, counts[rows, np.maximum(tail, 0)], 0)], axis=1).astype(np.int64)
    masks = np.stack([first_early_mask, early & ~first_early_mask, first_late_mask, late & ~first_late_mask,
                      tail_mask, on_gpu & ~tail_mask])
    return stats, masks


def bookkeeping(counts: np.ndarray, local: np.ndarray, on_gpu: np.ndarray, on_pim: np.ndarray,
                early: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each GPU's early and late loads and GEMM tail (rows: GPUs; ``counts`` the step's tokens per
    local expert, ``local`` the GPU's own): ``(stats, masks)``, ``stats`` (GPUs x 7: early experts,
    of them on the GPU, of them on PIM, whether the first early one runs on the GPU, late experts,
    the tail expert (-1: none), its tokens) and ``masks`` (6 x GPUs x experts: the first early
    expert, the other early ones, the first late one, the other late ones, the tail, the GEMM's
    other experts). Compiled where the package was built (``_expert_rows.pyx``), else
    :func:`bookkeeping_numpy`; the two give the same arrays."""
    if _expert_rows is None:
        return bookkeeping_numpy(counts, local, on_gpu, on_pim, early)
    u8 = np.uint8
    return _expert_rows(np.ascontiguousarray(counts, dtype=np.int64), np.ascontiguousarray(local, dtype=np.int64),
                        np.ascontiguousarray(on_gpu).view(u8), np.ascontiguousarray(on_pim).view(u8),
                        np.ascontiguousarray(early).view(u8))


class ExpertRows:
    """One layer's early loads and GPU paths for every GPU (arrays; see the module docstring)."""

    def __init__(self, b: StepBuild, lb: LayerBatch, r: LayerRouting, parts: PartitionRows) -> None:
        sim, m = b.sim, b.sim.model
        G, El = sim.gpus, sim.local_experts
        counts, on_gpu, on_pim = parts.counts, parts.on_gpu, parts.on_pim
        # the early rule (figure8.add_early_load) on each GPU's own tokens
        if r.own_counts is None:
            local = np.zeros((G, El), dtype=np.int64)
            early = np.zeros((G, El), dtype=bool)
        else:
            local = np.stack([r.own_counts[g, sim.expert_offset(g):sim.expert_offset(g) + El] for g in range(G)])
            if sim.static_placement == "gpu":
                early = local > 0
            elif sim.early_loads == "paper":
                early = local >= 2
            else:   # "cheaper": one table for every GPU (their contexts share the table and the rates)
                early = parts[0].ctx.gpu_cheaper_alone()[local]
        stats, masks = bookkeeping(counts, local, on_gpu, on_pim, early)
        (self.n_early, self.n_early_gpu, self.n_wasted, self.first_early_on_gpu, self.n_late, _,
         self.tail_tokens) = stats.T.tolist()
        (self.first_early_mask, self.rest_early_mask, self.first_late_mask, self.rest_late_mask,
         self.tail_mask, self.body_mask) = masks
        tail_tokens = stats[:, 6]
        # the grouped GEMM's durations (figure8.add_gpu_path's compute_s and total_s)
        flops, io = 2.0 * m.params_per_expert, gpu_ops.expert_io_bytes_per_token(m)
        gpu_tokens = np.array([p.gpu_tokens for p in parts])
        tail_f = tail_tokens.astype(np.float64)
        if b.roofline:
            total = np.maximum(flops * gpu_tokens / b.flops_s, io * gpu_tokens / b.bytes_s)
            tail_s = np.maximum(flops * tail_f / b.flops_s, io * tail_f / b.bytes_s)
        else:
            total = b.gm.grouped_gemm_rows_s(np.where(on_gpu, counts, 0), flops, io) + b.gm.fixed_s("gemm")
            tail_s = b.gm.grouped_gemm_rows_s(tail_f[:, None], flops, io)
        self.total_s, self.tail_s = total.tolist(), tail_s.tolist()
        self.body_s = np.maximum(total - tail_s, 0.0).tolist()
        self.flops, self.io = flops, io
        self.expert_bytes = float(m.bytes_per_expert)


def add_early_and_gpu_path(b: StepBuild, lb: LayerBatch, g: int, p: GpuPartition, rows: ExpertRows, post: list[int],
                           dec: int, after_dispatch: list[int]) -> int | None:
    """GPU ``g``'s early loads (after its router) and its GPU experts (the pipelined grouped GEMM),
    as ``add_early_load`` then ``add_gpu_path`` add them; returns the path's last node (None when no
    expert runs on the GPU)."""
    graph, layer, mb = b.graph, lb.layer, lb.mb
    per_expert, load_s = rows.expert_bytes, rows.expert_bytes / b.bytes_s
    first_gpu = last = None
    n_early = rows.n_early[g]
    if n_early:
        b.early_load_bytes += n_early * per_expert
        b.early_load_wasted_bytes += rows.n_wasted[g] * per_expert
        first = last = graph.add(f"L{layer} early weight load (first) g{g}", per_expert / b.bytes_s, b.r_hbm[g],
                                 [post[g]], gpu=g, layer=layer, kind="early_load", experts=rows.first_early_mask[g],
                                 microbatch=mb, bytes=per_expert)
        if n_early > 1:
            last = graph.add(f"L{layer} early weight load g{g}", (n_early - 1) * per_expert / b.bytes_s, b.r_hbm[g],
                             [first], gpu=g, layer=layer, kind="early_load", experts=rows.rest_early_mask[g],
                             microbatch=mb, bytes=(n_early - 1) * per_expert)
        first_gpu = first if rows.first_early_on_gpu[g] else (last if rows.n_early_gpu[g] else None)
    if not p.n_gpu:
        return None
    deps = list(after_dispatch)
    last_weights = last if rows.n_early_gpu[g] else None
    n_late = rows.n_late[g]
    first_late: Any = None
    if n_late:
        first_late = last_weights = graph.add(
            f"L{layer} expert weights HBM->GPU (first) g{g}", load_s, b.r_hbm[g], [dec], gpu=g, layer=layer,
            kind="weight_load", experts=rows.first_late_mask[g], microbatch=mb, bytes=per_expert)
        if n_late > 1:
            last_weights = graph.add(f"L{layer} expert weights HBM->GPU g{g}", (n_late - 1) * load_s, b.r_hbm[g],
                                     [first_late], gpu=g, layer=layer, kind="weight_load",
                                     experts=rows.rest_late_mask[g], microbatch=mb, bytes=(n_late - 1) * per_expert)
    deps.append(first_gpu if first_gpu is not None else first_late)
    flops, io, tokens = rows.flops, rows.io, int(p.gpu_tokens)
    if p.n_gpu == 1:
        return graph.add(f"L{layer} grouped GEMM g{g}", rows.total_s[g], b.r_gpu[g], deps, gpu=g, layer=layer,
                         kind="gemm", experts=p.on_gpu, microbatch=mb, tokens=tokens, flops=flops * float(tokens),
                         bytes=io * float(tokens))
    tail_tokens = rows.tail_tokens[g]
    body_tokens = tokens - tail_tokens
    body = graph.add(f"L{layer} grouped GEMM g{g}", rows.body_s[g], b.r_gpu[g], deps, gpu=g, layer=layer, kind="gemm",
                     experts=rows.body_mask[g], microbatch=mb, tokens=body_tokens, flops=flops * float(body_tokens),
                     bytes=io * float(body_tokens))
    tail_deps = [body] + ([last_weights] if last_weights not in deps else [])
    return graph.add(f"L{layer} grouped GEMM (last expert) g{g}", rows.tail_s[g], b.r_gpu[g], tail_deps, gpu=g,
                     layer=layer, kind="gemm", experts=rows.tail_mask[g], microbatch=mb, tokens=tail_tokens,
                     flops=flops * float(tail_tokens), bytes=io * float(tail_tokens))
