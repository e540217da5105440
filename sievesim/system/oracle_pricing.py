"""The executed layer's price of a partition, for an oracle (``CostContext.executed_s``).

An oracle that searches partitions must price each on what the step would execute, not on
Equation 1. :func:`executed_pricer` gives a function ``partition -> seconds``: it builds GPU
``g``'s part of one layer after its router as a small graph of its own, with the nodes the step
builds for it (the routing AllGather, metadata and dispatch, the decision, the shared experts,
the early loads, the pipelined grouped GEMM and the PIM experts, through the same
:mod:`~sievesim.system.figure8` functions and the engine's times), runs it through the same
executor (contention included), and returns when its last expert output ends, from the router.

What it assumes: every GPU reaches its router at the same time (the AllGather and the dispatch
wait for all of them in the step; with one GPU there is neither), the decision takes no time and
every GPU expert of the partition is loaded early, as the oracle runs (``Oracle`` with the step's
pricing). With one GPU the small graph is the step's own for that layer.
"""
from __future__ import annotations

import copy
from typing import Any, Callable

import numpy as np

from . import gpu_ops
from .early_loads import add_early_nodes
from .dag import Graph, execute

__all__ = ["executed_pricer"]


def executed_pricer(b: Any, lb: Any, r: Any, g: int, ctx: Any, f8: Any) -> Callable[[Any], float]:
    """``partition -> seconds`` for GPU ``g`` at the layer of ``lb`` (module docstring); ``f8`` is the
    module of the step's node functions (:mod:`sievesim.system.figure8`, which calls this)."""
    sim, m = b.sim, b.sim.model
    G = sim.gpus
    t_meta, _ = b.cached_work(("metadata", r.mb_tokens), lambda: gpu_ops.metadata(m, r.mb_tokens, sim.local_experts),
                              "metadata")
    t_ag = 0.0
    if G > 1 and not sim.tp_attention:
        t_ag = f8.allgather_s(b, lb.tokens_g[g] * m.top_k * 8.0)
    lo = sim.expert_offset(g)
    local = r.own_counts[g, lo:lo + sim.local_experts] if r.own_counts is not None else None
    memo: dict[bytes, float] = {}

    def price(part: Any) -> float:
        on_pim = part.on_pim & (part.counts > 0)
        key = on_pim.tobytes() + str(part.unit).encode()
        hit = memo.get(key)
        if hit is not None:
            return hit
        c = np.asarray(part.counts, dtype=np.int64)
        on_gpu = (c > 0) & ~on_pim
        p = f8.GpuPartition(c, on_gpu, on_pim, int(np.count_nonzero(on_gpu)), int(np.count_nonzero(on_pim)),
                            float(c[on_gpu].sum()), part, ctx, 0.0)
        scratch = copy.copy(b)
        scratch.graph = Graph()
        scratch.observed = {None: []}
        scratch.unit_expert_nodes = []
        graph = scratch.graph
        start = graph.add("router", 0.0, ())
        post = [start] * G
        before = start
        if t_ag > 0:
            before = graph.add("allgather", t_ag, b.r_link[g], [start])
        meta = graph.add("metadata", t_meta, b.r_gpu[g], [before])
        dec = graph.add("decision", 0.0, (), [meta])
        after = [dec]
        if G > 1 and not sim.tp_attention:
            after.append(graph.add("dispatch", r.t_disp[g], b.r_link[g], [meta]))
        shared = f8.add_shared_expert(scratch, lb, g, post)
        early = add_early_nodes(scratch, lb, g, on_gpu if local is not None else on_gpu & False, p, post,
                                   local if local is not None else c)
        ends = [n for n in (f8.add_gpu_path(scratch, lb, g, p, dec, after, early),
                            f8.add_pim_path(scratch, lb, g, p, after), shared) if n is not None]
        schedule = execute(graph, sim.contention)
        t = max(schedule.end[n] for n in ends) if ends else schedule.end[after[-1]]
        memo[key] = t
        return t

    return price
