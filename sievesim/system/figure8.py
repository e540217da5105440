"""The nodes of one layer of the Sieve paper's Figure 8, one function per node.

A decode step is built layer by layer (:meth:`sievesim.system.step.StepSimulator.run_step`); for
each layer and micro-batch the driver calls, in the figure's order:

==========================  =================================================================
:func:`add_attention`        pre-attention (QKV), attention (PIM, or GPU for ``gpu-only``),
                             prefill attention (GPU), o-proj + router
:func:`add_dense_mlp`        the MLP of a dense layer (no MoE)
:func:`route`                the layer's routing: counts, dispatch volumes, local maps
:func:`add_allgather`        AllGather of the routing maps (link)
:func:`add_metadata`         dispatch metadata (GPU)
:func:`add_dispatch`         token dispatch (link), beside the decision
:func:`add_experts`          for every GPU, GPU after GPU, the five below:
:func:`decide`               the policy's partition of one GPU's experts (Equation 1)
:func:`add_decision`         the decision node (its modelled latency)
:func:`add_shared_expert`    shared-expert weights and GEMM (right after the router)
:func:`add_early_load`       weights loaded before the decision
:func:`add_gpu_path`         expert weights HBM -> GPU and the grouped GEMM
:func:`add_pim_path`         experts on PIM (GWRITE, GEMVs, readout, one hand-over)
:func:`add_combine_aggregate`  combine (link) and aggregate (GPU)
==========================  =================================================================

Every function adds its nodes to :attr:`StepBuild.graph` from a plain per-layer context
(:class:`LayerBatch`, :class:`LayerRouting`, :class:`GpuPartition`; ``sievesim/system/step_build.py``).
The decisions (:func:`decide`, and :func:`decide_all` for every GPU of a layer at once) live in
``sievesim/system/decisions.py``. Durations are seconds.
"""
from __future__ import annotations

import numpy as np

from ..costs import attention_node_kind
from . import gpu_ops
from . import routing_volumes as volumes, tensor_parallel as tp
from .decisions import account_partition, decide, decide_all, layer_context
from .early_loads import EarlyLoad, _one_hot, add_early_load, add_early_nodes, hottest_first
from .expert_rows import ExpertRows, add_early_and_gpu_path
from .step_build import GpuPartition, LayerBatch, LayerRouting, StepBuild

__all__ = ["StepBuild", "LayerBatch", "LayerRouting", "GpuPartition", "add_embedding", "add_attention",
           "add_dense_mlp", "route", "add_allgather", "allgather_s", "add_metadata", "add_dispatch",
           "decide", "decide_all", "layer_context", "account_partition", "add_experts", "add_decision",
           "add_shared_expert", "EarlyLoad", "add_early_load", "add_early_nodes", "add_gpu_path",
           "add_pim_path", "add_combine_aggregate", "add_lm_head"]

_count = np.count_nonzero
_sum = np.add.reduce     # ndarray.sum() without its Python wrapper (the same reduction)


def add_embedding(b: StepBuild, mb: int) -> None:
    """The embedding lookup of every GPU for micro-batch ``mb``."""
    sim, m = b.sim, b.sim.model
    for g in range(sim.gpus):
        rows = b.owner[b.mb_rows[mb]]
        tokens = int(rows.size) if sim.tp_attention else int(np.count_nonzero(rows == g))
        work = gpu_ops.embedding(m, tokens)
        b.prev[(mb, g)] = b.graph.add(f"embedding g{g} mb{mb}", b.kernel(work, "embedding"), b.r_gpu_hbm[g], gpu=g,
                                      layer=-1, kind="embedding", microbatch=mb, tokens=tokens, **b.work(work))
        b.embedding_nodes.append(b.prev[(mb, g)])


def add_attention(b: StepBuild, lb: LayerBatch) -> list[int]:
    """Pre-attention, attention, prefill attention and o-proj + router of every GPU; returns the
    router node of each GPU."""
    sim, m, graph = b.sim, b.sim.model, b.graph
    layer, kind, mb, is_moe = lb.layer, lb.kind, lb.mb, lb.is_moe
    q = sim.mtp_queries      # query tokens per decode request (1 + mtp_tokens)
    post: list[int] = []
    # the same for every GPU of the layer
    pre_kind = attention_node_kind("pre_attention", kind, m.qk_norm)
    post_kind = attention_node_kind("post_attention", kind)
    tensor_core = m.weight_tensor_core
    for g in range(sim.gpus):
        lens, pf_lens, tokens = lb.lens_g[g], lb.pf_g[g], lb.tokens_g[g]
        t_pre, pre_work = b.cached_work(("pre", kind, is_moe, tokens), lambda: gpu_ops.pre_attention(m, layer, tokens),
                                        pre_kind, tensor_core)
        pre = graph.add(f"L{layer} pre-attention g{g}", t_pre, b.r_gpu_hbm[g], [b.prev[(mb, g)]], gpu=g, layer=layer,
                        kind="pre_attention", microbatch=mb, tokens=tokens, **pre_work)
        deps = [pre]
        if sim.attention_on_gpu:
            att = b.memo.get(("gpu-attn", kind, mb, g))
            if att is None:    # the same work at every layer of this kind (its shape and KV are the kind's)
                att_work = gpu_ops.decode_attention_on_gpu(m, layer, lens, q)
                att = b.memo[("gpu-attn", kind, mb, g)] = (
                    b.roof(att_work) if b.roofline else b.gm.attention_s(att_work), int(lens.sum()), b.work(att_work))
            t_att, context_tokens, att_meta = att
            deps.append(graph.add(f"L{layer} attention g{g}", t_att, b.r_gpu_hbm[g], [pre],
                                  gpu=g, layer=layer, kind="attention", microbatch=mb, tokens=int(lens.size),
                                  context_tokens=context_tokens, **att_meta))
        elif lens.size:
            t_att = b.cached(("pim-attn", kind, mb, g), lambda: sim.engine_times.attention_s(kind, lens))
            t_att_node = t_att * q + b.gm.fixed_s("pim_attention")    # MTP: one pass per query token
            node = graph.add(f"L{layer} attention (PIM) g{g}", t_att_node, b.r_pim[g], [pre],
                             gpu=g, layer=layer, kind="attention", microbatch=mb, tokens=int(lens.size),
                             context_tokens=int(lens.sum()), engine_cycles=b.engine_cycles(t_att * q),
                             context_lens=lens, attention_kind=kind, **({"queries": q} if q > 1 else {}))
            b.unit_attention_nodes.append((g, node))
            deps.append(node)
            roof_att = b.cached(("roof-attn", kind, mb, g), lambda: sim._roof[kind].attention_time_s(lens))
            if roof_att > 0:
                b.attn_ratio.setdefault(kind, []).append(t_att / roof_att)
        if pf_lens:
            pf_work = gpu_ops.prefill_attention(m, layer, pf_lens)
            deps.append(graph.add(f"L{layer} prefill attention g{g}", b.kernel(pf_work, "prefill_attention"), b.r_gpu[g],
                                  [pre], gpu=g, layer=layer, kind="prefill_attention", microbatch=mb,
                                  tokens=int(sum(pf_lens)), **b.work(pf_work)))
        t_post, post_work = b.cached_work(("post", kind, is_moe, tokens),
                                          lambda: gpu_ops.post_attention(m, layer, tokens), post_kind, tensor_core)
        post.append(graph.add(f"L{layer} o-proj+router g{g}", t_post, b.r_gpu_hbm[g], deps, gpu=g, layer=layer,
                              kind="post_attention", microbatch=mb, tokens=tokens, **post_work))
    return tp.add_allreduce(b, lb, post, "attention") if sim.tp_attention else post


def add_dense_mlp(b: StepBuild, lb: LayerBatch, post: list[int]) -> None:
    """The MLP of a dense layer on every GPU, and the layer's estimate (GPU work beside attention on PIM)."""
    sim, m = b.sim, b.sim.model
    layer, mb = lb.layer, lb.mb
    for g in range(sim.gpus):
        tokens = lb.tokens_g[g]
        mlp = gpu_ops.dense_mlp(m, tokens)
        node = b.graph.add(f"L{layer} dense MLP g{g}", b.kernel(mlp, "dense_mlp", m.weight_tensor_core),
                           b.r_gpu_hbm[g], [post[g]], gpu=g,
                           layer=layer, kind="dense_mlp", microbatch=mb, tokens=tokens, **b.work(mlp))
        b.prev[(mb, g)] = node
        if not sim.tp_attention:
            b.agg_nodes[layer].append(node)
        work = (gpu_ops.pre_attention(m, layer, tokens) + gpu_ops.post_attention(m, layer, tokens)
                + gpu_ops.dense_mlp(m, tokens))
        if sim.attention_on_gpu:
            est = b.roof(work + gpu_ops.decode_attention_on_gpu(m, layer, lb.lens_g[g], sim.mtp_queries))
        else:
            est = max(b.roof(work), sim._learned[lb.kind].attention_time_s(lb.lens_g[g]) * sim.mtp_queries)
        b.layer_est[layer] = max(b.layer_est[layer], est)
    if sim.tp_attention:
        ends = tp.add_allreduce(b, lb, [b.prev[(mb, g)] for g in range(sim.gpus)], "MLP")
        for g in range(sim.gpus):
            b.prev[(mb, g)] = ends[g]
            b.agg_nodes[layer].append(ends[g])


def route(b: StepBuild, lb: LayerBatch) -> LayerRouting:
    """Counts per expert of the layer's micro-batch, the dispatch volumes each GPU sends and receives,
    the AllGather and dispatch times, and each GPU's local routing map (for early loads)."""
    sim, m = b.sim, b.sim.model
    G, El, E, K = sim.gpus, sim.local_experts, sim.num_slots, m.top_k
    rows = lb.rows
    li = sim._moe_index[lb.layer]
    mb_tokens = int(rows.size)
    if sim.tp_attention:    # every GPU holds every token: no dispatch
        counts, lid, own = tp.routing(b, lb, li)
        return LayerRouting(counts, lid, np.zeros(G), np.zeros(G), 0.0, [0.0] * G, own, mb_tokens)
    inter = None     # token vectors each GPU sends and receives over the scale-out network (more than one node)
    if b.ids is not None:
        vol = volumes.of_microbatch(b, lb)
        lid = vol.ids[:, li, :]
        counts = b.counts_all[li] if sim.microbatches == 1 else np.bincount(lid[lid >= 0].ravel(), minlength=E)
        send, recv = vol.send[li], vol.recv[li]
        own_counts = vol.own_counts[li] if vol.own_counts is not None else None
        if vol.send_inter is not None:
            inter = (vol.send_inter[li], vol.recv_inter[li])
    else:
        counts, lid, own_counts = b.counts_all[li], None, None
        pairs = counts.reshape(G, El).sum(axis=1).astype(np.float64)
        send = recv = pairs * (G - 1) / G
        if sim.nodes > 1:
            inter = (pairs * (G - G // sim.nodes) / G,) * 2
    vec_bytes = m.hidden_size * m.dtype_bytes
    if inter is not None:    # two levels: NVLink inside a node, the NIC to the others, at once
        comm_ag = b.gm.allgather_s((mb_tokens / G) * K * 8.0, G)
        t_disp = [b.gm.dispatch_s(max(send[g] - inter[0][g], recv[g] - inter[1][g]) * vec_bytes,
                                  max(inter[0][g], inter[1][g]) * vec_bytes) for g in range(G)]
    elif b.roofline:    # over all GPUs at once: numpy's elementwise + and / round as Python's do
        comm_ag = b.link_lat + (G - 1) * (mb_tokens / G) * K * 8.0 / b.link_bw if G > 1 else 0.0
        t_disp = (b.link_lat + np.maximum(send, recv) * vec_bytes / b.link_bw).tolist() if G > 1 else [0.0]
    else:
        comm_ag = b.gm.allgather_s((mb_tokens / G) * K * 8.0, G)
        t_disp = b.gm.alltoall_s(np.maximum(send, recv) * vec_bytes).tolist() if G > 1 else [0.0]
    return LayerRouting(counts, lid, send, recv, comm_ag, t_disp, own_counts, mb_tokens)


def add_allgather(b: StepBuild, lb: LayerBatch, post: list[int]) -> list[int]:
    """AllGather of every GPU's routing map after all routers (none on one GPU)."""
    sim, K = b.sim, b.sim.model.top_k
    if sim.gpus == 1 or sim.tp_attention:
        return []
    nodes = []
    times: dict[float, float] = {}      # GPUs with as many tokens share their map's time
    for g in range(sim.gpus):
        local_map = lb.tokens_g[g] * K * 8.0
        t = times.get(local_map)
        if t is None:
            t = times[local_map] = allgather_s(b, local_map)
        nodes.append(b.graph.add(f"L{lb.layer} allgather g{g}", t,
                                 b.r_link[g], post, gpu=g, layer=lb.layer, kind="allgather",
                                 microbatch=lb.mb, bytes=(sim.gpus - 1) * local_map))
    return nodes


def allgather_s(b: StepBuild, local_map_bytes: float) -> float:
    """Time [s] of the AllGather of one GPU's routing map of ``local_map_bytes`` to the other GPUs
    (the roofline: the link's latency and bandwidth; else the GPU model's collective)."""
    G = b.sim.gpus
    return b.link_lat + (G - 1) * local_map_bytes / b.link_bw if b.roofline else b.gm.allgather_s(local_map_bytes, G)


def add_metadata(b: StepBuild, lb: LayerBatch, r: LayerRouting, after: list[int]) -> list[int]:
    """Dispatch metadata of every GPU (after its AllGather, or its router on one GPU)."""
    sim, m, El = b.sim, b.sim.model, b.sim.local_experts
    t_meta, work = b.cached_work(("metadata", r.mb_tokens), lambda: gpu_ops.metadata(m, r.mb_tokens, El), "metadata")
    return [b.graph.add(f"L{lb.layer} metadata g{g}", t_meta, b.r_gpu[g], [after[g]], gpu=g,
                        layer=lb.layer, kind="metadata", microbatch=lb.mb, tokens=r.mb_tokens, **work)
            for g in range(sim.gpus)]


def add_dispatch(b: StepBuild, lb: LayerBatch, r: LayerRouting, meta: list[int]) -> list[int | None]:
    """Token dispatch of every GPU after all metadata (none on one GPU)."""
    G = b.sim.gpus
    if G == 1 or b.sim.tp_attention:
        return [None] * G
    vec = b.sim.model.hidden_size * b.sim.model.dtype_bytes
    return [b.graph.add(f"L{lb.layer} dispatch g{g}", r.t_disp[g], b.r_link[g], meta, gpu=g,
                        layer=lb.layer, kind="dispatch", microbatch=lb.mb,
                        bytes=float(max(r.send[g], r.recv[g]) * vec)) for g in range(G)]


def add_experts(b: StepBuild, lb: LayerBatch, r: LayerRouting, post: list[int], meta: list[int],
                disp: list[int | None]) -> tuple[list[list[int]], list[int | None]]:
    """Every GPU's decision, shared expert, early loads and routed experts (GPU and PIM) at one
    layer, GPU after GPU; returns each GPU's expert output nodes and its shared expert's last node.
    Where the policy decides the layer's GPUs at once (:func:`decide_all`) and the grouped GEMM is
    pipelined, the early loads and the GEMM come from :class:`~sievesim.system.expert_rows.ExpertRows`
    (the same nodes as :func:`add_early_load` and :func:`add_gpu_path` add)."""
    outs: list[list[int]] = []
    shared_out: list[int | None] = []
    parts = decide_all(b, lb, r)
    rows = ExpertRows(b, lb, r, parts) if parts is not None and b.sim.pipelined_gemm else None
    for g in range(b.sim.gpus):
        p = parts[g] if parts is not None else decide(b, lb, r, g)
        dec = add_decision(b, lb, g, p, meta)
        after_dispatch = [dec] + ([disp[g]] if disp[g] is not None else [])
        shared_out.append(add_shared_expert(b, lb, g, post))
        if rows is not None:
            gpu_out = add_early_and_gpu_path(b, lb, g, p, rows, post, dec, after_dispatch)
        else:
            gpu_out = add_gpu_path(b, lb, g, p, dec, after_dispatch, add_early_load(b, lb, r, g, p, post))
        out_nodes = [n for n in (gpu_out, add_pim_path(b, lb, g, p, after_dispatch)) if n is not None]
        outs.append(out_nodes or after_dispatch)     # no expert of this GPU was activated: after dispatch
    return outs, shared_out


def add_decision(b: StepBuild, lb: LayerBatch, g: int, p: GpuPartition, meta: list[int]) -> int:
    """The decision of GPU ``g`` after its metadata: its modelled latency (``GPUSpec.decision_time_s``
    of the experts it sorts and the moves it tries; 0 for static policies). It holds no resource."""
    return b.graph.add(f"L{lb.layer} decision g{g}", p.decision_s, (), [meta[g]], gpu=g, layer=lb.layer,
                       kind="decision", microbatch=lb.mb, experts_activated=p.n_gpu + p.n_pim)


def add_shared_expert(b: StepBuild, lb: LayerBatch, g: int, post: list[int]) -> int | None:
    """Shared-expert weights (right after the router) and GEMM of GPU ``g``; None without shared experts."""
    m = b.sim.model
    if not m.num_shared_experts:
        return None
    load_bytes = b.memo.get(("shared bytes",))
    if load_bytes is None:     # the same at every GPU and layer (a model property summed on each call)
        load_bytes = b.memo[("shared bytes",)] = (m.shared_expert_bytes / b.bytes_s, float(m.shared_expert_bytes))
    load = b.graph.add(f"L{lb.layer} shared-expert weights g{g}", load_bytes[0],
                       b.r_hbm[g], [post[g]], gpu=g, layer=lb.layer, kind="shared_load", microbatch=lb.mb,
                       bytes=load_bytes[1])
    tokens = lb.tokens_g[g]
    t_gemm, work = b.cached_work(("shared", tokens), lambda: gpu_ops.shared_expert_gemm(m, tokens), "shared_gemm",
                                 m.expert_tensor_core)
    return b.graph.add(f"L{lb.layer} shared-expert GEMM g{g}", t_gemm, b.r_gpu[g],
                       [load], gpu=g, layer=lb.layer, kind="shared_gemm", microbatch=lb.mb, tokens=tokens, **work)


def add_gpu_path(b: StepBuild, lb: LayerBatch, g: int, p: GpuPartition, dec: int, after_dispatch: list[int],
                 early: EarlyLoad) -> int | None:
    """The GPU experts of GPU ``g`` as a pipelined grouped GEMM; returns its last node (None when no
    expert runs on the GPU).

    The grouped GEMM streams the next expert's weights while it computes the current one, so a
    layer's GPU expert time is about max(loads, compute) plus one expert's tail, not their sum.
    Experts loaded early go first (their stream starts after the router); the others' weights
    load after the decision, the first on its own (``weight_load``), the rest behind it. The GEMM
    (``gemm``) starts after dispatch and its first weights, and its last expert's compute (the
    tail) waits for the last weights: the end is max(GEMM start + compute, last weights) + the
    last expert's compute, whichever experts were loaded early (NoExp's included)."""
    if not p.n_gpu:
        return None
    m, graph = b.sim.model, b.graph
    layer, mb = lb.layer, lb.mb
    flops, io = 2.0 * m.params_per_expert, gpu_ops.expert_io_bytes_per_token(m)

    if b.roofline:
        def compute_s(tokens: float) -> float:
            return max(flops * tokens / b.flops_s, io * tokens / b.bytes_s)
    else:   # tile padding per expert, the fused MoE's fixed cost on its first node
        def compute_s(tokens: float) -> float:
            return b.gm.grouped_gemm_s(np.array([tokens]), flops, io)

    def gemm_work(tokens: int) -> dict[str, float]:
        return {"tokens": tokens, "flops": flops * float(tokens), "bytes": io * float(tokens)}

    early_gpu = p.on_gpu & early.experts
    late = p.on_gpu & ~early.experts
    late_ids = hottest_first(np.flatnonzero(late), p.counts)     # after the decision every count is known
    n_late = late_ids.size
    total_s = (compute_s(p.gpu_tokens) if b.roofline
               else b.gm.grouped_gemm_s(p.counts[p.on_gpu], flops, io) + b.gm.fixed_s("gemm"))
    deps = list(after_dispatch)
    load_s = float(m.bytes_per_expert) / b.bytes_s
    if not b.sim.pipelined_gemm:    # every load, then the GEMM (for comparison)
        if early.last is not None:
            deps.append(early.last)
        if n_late:
            deps.append(graph.add(f"L{layer} expert weights HBM->GPU g{g}", n_late * load_s, b.r_hbm[g], [dec],
                                  gpu=g, layer=layer, kind="weight_load", experts=late, microbatch=mb,
                                  bytes=n_late * float(m.bytes_per_expert)))
        return graph.add(f"L{layer} grouped GEMM g{g}", total_s, b.r_gpu[g], deps, gpu=g, layer=layer,
                         kind="gemm", experts=p.on_gpu, microbatch=mb, **gemm_work(int(p.gpu_tokens)))
    last_weights = early.last if _count(early_gpu) else None
    if n_late:
        first_mask = _one_hot(late.size, late_ids[0])
        first_late = graph.add(f"L{layer} expert weights HBM->GPU (first) g{g}", load_s, b.r_hbm[g], [dec],
                               gpu=g, layer=layer, kind="weight_load", experts=first_mask, microbatch=mb,
                               bytes=float(m.bytes_per_expert))
        last_weights = first_late
        if n_late > 1:
            last_weights = graph.add(f"L{layer} expert weights HBM->GPU g{g}", (n_late - 1) * load_s, b.r_hbm[g],
                                     [first_late], gpu=g, layer=layer, kind="weight_load",
                                     experts=late & ~first_mask, microbatch=mb,
                                     bytes=(n_late - 1) * float(m.bytes_per_expert))
    deps.append(early.first_gpu if early.first_gpu is not None else first_late)
    if p.n_gpu == 1:
        return graph.add(f"L{layer} grouped GEMM g{g}", total_s, b.r_gpu[g], deps, gpu=g, layer=layer,
                         kind="gemm", experts=p.on_gpu, microbatch=mb, **gemm_work(int(p.gpu_tokens)))
    tail_id = int(late_ids[-1]) if n_late else int(early.order[early_gpu[early.order]][-1])
    tail_tokens = int(p.counts[tail_id])
    tail_s = compute_s(float(tail_tokens))
    tail_mask = _one_hot(late.size, tail_id)
    body_mask = p.on_gpu & ~tail_mask
    body = graph.add(f"L{layer} grouped GEMM g{g}", max(total_s - tail_s, 0.0), b.r_gpu[g], deps, gpu=g,
                     layer=layer, kind="gemm", experts=body_mask, microbatch=mb,
                     **gemm_work(int(p.gpu_tokens) - tail_tokens))
    tail_deps = [body] + ([last_weights] if last_weights not in deps else [])
    return graph.add(f"L{layer} grouped GEMM (last expert) g{g}", tail_s, b.r_gpu[g], tail_deps, gpu=g,
                     layer=layer, kind="gemm", experts=tail_mask, microbatch=mb, **gemm_work(tail_tokens))


def add_pim_path(b: StepBuild, lb: LayerBatch, g: int, p: GpuPartition, after_dispatch: list[int]) -> int | None:
    """The PIM experts of GPU ``g`` as one node after dispatch: the engine's time of each expert
    plus one GPU-PIM hand-over (with a PIMoE unit: the busiest unit's time); None when none runs on PIM."""
    if not p.n_pim:
        return None
    sim = b.sim
    n_e = p.counts[p.on_pim]
    part = p.part
    if part.unit is None:
        times = sim.engine_times.experts_s(n_e, None)
        t_pim = float(_sum(times)) + sim._hand_over_s + b.gm.fixed_s("pim_experts")
        share = None
        b.observed[None].append(n_e)
    else:
        times = sim.engine_times.experts_s(n_e, part.unit)
        busy = np.bincount(np.asarray(part.unit_of)[p.on_pim], weights=times, minlength=sim.org.count(part.unit))
        t_pim = float(busy.max()) + sim._hand_over_s + b.gm.fixed_s("pim_experts")
        share = busy / t_pim if t_pim > 0 else busy
        b.observed.setdefault(part.unit, []).append(n_e)
    tokens = int(_sum(n_e))
    node = b.graph.add(f"L{lb.layer} experts on PIM g{g}", t_pim, b.r_pim[g], after_dispatch,
                       gpu=g, layer=lb.layer, kind="pim_experts", experts=p.on_pim, microbatch=lb.mb, tokens=tokens,
                       flops=2.0 * sim.model.params_per_expert * tokens,
                       engine_cycles=b.engine_cycles(t_pim - sim._hand_over_s - b.gm.fixed_s("pim_experts")),
                       token_counts=n_e, pim_unit=part.unit)
    b.unit_expert_nodes.append((g, node, share))
    return node


def add_combine_aggregate(b: StepBuild, lb: LayerBatch, r: LayerRouting, outs: list[list[int]],
                          shared_out: list[int | None]) -> None:
    """Combine (link, after every GPU's expert outputs) and aggregate (GPU) of every GPU."""
    sim, m = b.sim, b.sim.model
    G, layer, mb = sim.gpus, lb.layer, lb.mb
    all_outs = [n for o in outs for n in o]
    reduced = tp.add_allreduce(b, lb, all_outs, "experts") if sim.tp_attention and G > 1 else None
    for g in range(G):
        if reduced is not None:
            deps = [reduced[g]]
        elif G > 1:
            comb = b.graph.add(f"L{layer} combine g{g}", r.t_disp[g], b.r_link[g], all_outs, gpu=g,
                               layer=layer, kind="combine", microbatch=mb,
                               bytes=float(max(r.send[g], r.recv[g]) * m.hidden_size * m.dtype_bytes))
            deps = [comb]
        else:
            deps = list(outs[g])
        if shared_out[g] is not None:
            deps.append(shared_out[g])
        tokens = lb.tokens_g[g]
        t_agg, agg = b.cached_work(("aggregate", tokens), lambda: gpu_ops.aggregate(m, tokens), "aggregate")
        node = b.graph.add(f"L{layer} aggregate g{g}", t_agg, b.r_gpu[g], deps, gpu=g, layer=layer,
                           kind="aggregate", microbatch=mb, tokens=tokens, **agg)
        b.prev[(mb, g)] = node
        b.agg_nodes[layer].append(node)


def add_lm_head(b: StepBuild, decode_owner: np.ndarray, pf_owner: np.ndarray) -> None:
    """The LM head of every GPU after its last layer in every micro-batch."""
    sim, m = b.sim, b.sim.model
    for g in range(sim.gpus):
        logits = int(np.count_nonzero(decode_owner == g)) + int(np.count_nonzero(pf_owner == g))
        head = gpu_ops.lm_head(m, logits)
        node = b.graph.add(f"LM head g{g}", b.kernel(head, "lm_head"), b.r_gpu_hbm[g],
                           [b.prev[(mb, g)] for mb in range(sim.microbatches)], gpu=g, layer=m.num_layers,
                           kind="lm_head", tokens=logits, **b.work(head))
        overhead = b.gm.step_overhead_s(logits)
        if overhead > 0:    # the serving engine's host work of the iteration (calibrated GPU model)
            b.graph.add(f"engine step overhead g{g}", overhead, b.r_gpu[g], [node], gpu=g, layer=m.num_layers,
                        kind="step_overhead")
