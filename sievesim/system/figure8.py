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
:func:`decide`               the policy's partition of one GPU's experts (Equation 1)
:func:`add_decision`         the decision node (its modelled latency)
:func:`add_shared_expert`    shared-expert weights and GEMM (right after the router)
:func:`add_early_load`       weights loaded before the decision
:func:`add_gpu_path`         expert weights HBM -> GPU and the grouped GEMM
:func:`add_pim_path`         experts on PIM (GWRITE, GEMVs, readout, one hand-over)
:func:`add_combine_aggregate`  combine (link) and aggregate (GPU)
==========================  =================================================================

Every function adds its nodes to :attr:`StepBuild.graph` from a plain per-layer context
(:class:`LayerBatch`, :class:`LayerRouting`, :class:`GpuPartition`). Durations are seconds.
"""
from __future__ import annotations

import dataclasses
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..costs import CostContext, attention_node_kind, non_moe_work
from ..costs.gpu import shared_expert_work
from . import gpu_ops
from . import routing_volumes as volumes, tensor_parallel as tp
from .dag import Graph
from .early_loads import EarlyLoad, _one_hot, add_early_load, add_early_nodes, hottest_first
from .oracle_pricing import executed_pricer

__all__ = ["StepBuild", "LayerBatch", "LayerRouting", "GpuPartition", "add_embedding", "add_attention",
           "add_dense_mlp", "route", "add_allgather", "add_metadata", "add_dispatch", "decide", "add_decision",
           "add_shared_expert", "EarlyLoad", "add_early_load", "add_early_nodes", "add_gpu_path", "add_pim_path", "add_combine_aggregate",
           "add_lm_head"]

_count = np.count_nonzero
_sum = np.add.reduce     # ndarray.sum() without its Python wrapper (the same reduction)


@dataclass
class StepBuild:
    """What every node function of one step shares: the simulator, the graph being built, the
    step's per-request data, the hardware rates, and the step's accumulators."""

    sim: Any                        # the StepSimulator (its model, hardware, policy, engine times)
    graph: Graph
    ids: np.ndarray | None          # routing ids (T, L_moe, K), or None for a count-only source
    counts_all: np.ndarray          # (L_moe, E) tokens per expert of the whole step
    owner: np.ndarray               # owner GPU of each token row
    mb_rows: list[np.ndarray]       # rows of each micro-batch
    ctx_lens: np.ndarray            # decode context lengths [tokens]
    flops_s: float                  # GPU FLOP/s (peak x efficiency)
    bytes_s: float                  # GPU HBM bytes/s (peak x efficiency)
    link_bw: float                  # bytes/s per direction
    link_lat: float                 # s
    dynamic: bool                   # the policy decides at run time (its decision has a latency)
    gm: Any = None                  # the GPU model (sievesim.costs.gpu_model) pricing GPU and link nodes
    # accumulators
    prev: dict[tuple[int, int], int] = field(default_factory=dict)      # last node of (micro-batch, GPU)
    layer_est: np.ndarray = field(default=None)                         # Equation-1 estimate per layer [s]
    n_gpu_exp: np.ndarray = field(default=None)
    n_pim_exp: np.ndarray = field(default=None)
    agg_nodes: list[list[int]] = field(default_factory=list)            # last nodes of each layer
    embedding_nodes: list[int] = field(default_factory=list)            # every GPU's embedding node
    observed: dict[str | None, list[np.ndarray]] = field(default_factory=lambda: {None: []})
    attn_ratio: dict[str, list[float]] = field(default_factory=dict)    # engine / roofline attention
    unit_attention_nodes: list[tuple[int, int]] = field(default_factory=list)
    unit_expert_nodes: list[tuple[int, int, np.ndarray | None]] = field(default_factory=list)
    decisions: int = 0
    wall_decide: float = 0.0
    decision_s: float = 0.0                                             # modelled latencies, summed [s]
    early_load_bytes: float = 0.0
    early_load_wasted_bytes: float = 0.0                                # loaded early, then run on PIM
    memo: dict[tuple, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        layers = self.sim.model.num_layers
        self.layer_est = np.zeros(layers)
        self.n_gpu_exp = np.zeros(layers)
        self.n_pim_exp = np.zeros(layers)
        self.agg_nodes = [[] for _ in range(layers)]
        gpus = range(self.sim.gpus)
        # each GPU's resource tuples, built once (every node names one of them)
        self.r_gpu_hbm = [self.res(g, "gpu", "hbm") for g in gpus]
        self.r_gpu = [self.res(g, "gpu") for g in gpus]
        self.r_hbm = [self.res(g, "hbm") for g in gpus]
        self.r_pim = [self.res(g, "pim") for g in gpus]
        self.r_link = [self.res(g, "tx", "rx") for g in gpus]

    def res(self, g: int, *kinds: str) -> tuple[str, ...]:
        """Resource names of GPU ``g`` (``g0.gpu``, ``g0.hbm``, ``g0.pim``, ``g0.tx``, ``g0.rx``)."""
        names = self.sim._resource_names
        key = (g, kinds)
        out = names.get(key)
        if out is None:
            out = names[key] = tuple(f"g{g}.{k}" for k in kinds)
        return out

    def roof(self, work: gpu_ops.GpuWork) -> float:
        """GPU roofline time [s] of ``work`` (the estimates beside the executed graph)."""
        return gpu_ops.roofline_s(work, self.sim.hw)

    @property
    def roofline(self) -> bool:    # the paper's GPU model: its expressions are kept as they were
        return self.gm.name == "roofline"

    def kernel(self, work: gpu_ops.GpuWork, kind: str, tensor_core: str = "bf16") -> float:
        """Duration [s] of a GPU node of ``kind`` doing ``work``, under the step's GPU model."""
        return gpu_ops.roofline_s(work, self.sim.hw) if self.roofline else self.gm.kernel_s(work, kind, tensor_core)

    def work(self, work: gpu_ops.GpuWork) -> dict[str, float]:
        """Node metadata of GPU work: its FLOPs and HBM bytes (``nodes()``, the Chrome trace)."""
        return {"flops": float(work.flops), "bytes": float(work.bytes)}

    def engine_cycles(self, seconds: float) -> int:
        """Engine time [s] of a PIM node in memory command-clock cycles (tCK)."""
        tck = self.memo.get(("tck",))
        if tck is None:
            tck = self.memo[("tck",)] = self.sim.engine_times.device._base.tck_ns * 1e-9
        return int(round(seconds / tck))

    def cached_work(self, key: tuple, fn: Callable[[], gpu_ops.GpuWork], kind: str,
                    tensor_core: str = "bf16") -> tuple[float, dict[str, float]]:
        """GPU work that repeats across the layers of one kind, computed once per step: its
        time [s] as a node of ``kind`` (:meth:`kernel`) and its node metadata (:meth:`work`)."""
        value = self.memo.get(key)
        if value is None:
            work = fn()
            value = self.memo[key] = (self.kernel(work, kind, tensor_core), self.work(work))
        return value

    def cached(self, key: tuple, fn: Callable[[], float]) -> float:
        """A duration that repeats across the layers of one kind, computed once per step."""
        value = self.memo.get(key)
        if value is None:
            value = self.memo[key] = fn()
        return value


@dataclass
class LayerBatch:
    """One micro-batch of one layer: which rows, and per GPU its tokens, decode contexts and prompts."""

    layer: int
    kind: str                       # attention kind of the layer
    is_moe: bool
    mb: int                         # micro-batch index
    rows: np.ndarray                # token rows of the micro-batch
    own: np.ndarray                 # owner GPU of each row
    tokens_g: list[int]             # tokens per GPU (decode requests + prefill tokens)
    lens_g: list[np.ndarray]        # decode context lengths per GPU [tokens]
    pf_g: list[list[int]]           # prefill prompt lengths per GPU [tokens]


@dataclass
class LayerRouting:
    """The routing of one MoE layer's micro-batch and the link times it implies."""

    counts: np.ndarray              # (E,) tokens per expert
    lid: np.ndarray | None          # (rows, K) expert ids, or None
    send: np.ndarray                # token vectors each GPU sends (dispatch)
    recv: np.ndarray                # token vectors each GPU receives
    comm_ag: float                  # AllGather time in the policy's T_comm [s]
    t_disp: list[float]             # dispatch (and combine) time per GPU [s]
    own_counts: np.ndarray | None   # (G, E) tokens of each GPU's own requests per expert (early loads)
    mb_tokens: int                  # tokens of the micro-batch over all GPUs


@dataclass
class GpuPartition:
    """The policy's split of one GPU's activated experts at one layer."""

    counts: np.ndarray              # (E/G,) tokens per local expert
    on_gpu: np.ndarray              # bool mask of activated experts on the GPU
    on_pim: np.ndarray              # bool mask of activated experts on PIM
    n_gpu: int
    n_pim: int
    gpu_tokens: float               # tokens of the GPU experts
    part: Any                       # the policy's Partition (its unit and unit_of for PIMoE)
    ctx: CostContext                # the policy's cost context (its estimate of every term)
    decision_s: float               # modelled latency of the decision [s]


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
    for g in range(sim.gpus):
        lens, pf_lens, tokens = lb.lens_g[g], lb.pf_g[g], lb.tokens_g[g]
        t_pre, pre_work = b.cached_work(("pre", kind, is_moe, tokens), lambda: gpu_ops.pre_attention(m, layer, tokens),
                                        attention_node_kind("pre_attention", kind, m.qk_norm), m.weight_tensor_core)
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
                                          lambda: gpu_ops.post_attention(m, layer, tokens),
                                          attention_node_kind("post_attention", kind), m.weight_tensor_core)
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
    elif b.roofline:
        comm_ag = b.link_lat + (G - 1) * (mb_tokens / G) * K * 8.0 / b.link_bw if G > 1 else 0.0
        t_disp = [b.link_lat + max(send[g], recv[g]) * vec_bytes / b.link_bw if G > 1 else 0.0 for g in range(G)]
    else:
        comm_ag = b.gm.allgather_s((mb_tokens / G) * K * 8.0, G)
        t_disp = [b.gm.alltoall_s(max(send[g], recv[g]) * vec_bytes) if G > 1 else 0.0 for g in range(G)]
    return LayerRouting(counts, lid, send, recv, comm_ag, t_disp, own_counts, mb_tokens)


def add_allgather(b: StepBuild, lb: LayerBatch, post: list[int]) -> list[int]:
    """AllGather of every GPU's routing map after all routers (none on one GPU)."""
    sim, K = b.sim, b.sim.model.top_k
    if sim.gpus == 1 or sim.tp_attention:
        return []
    nodes = []
    for g in range(sim.gpus):
        local_map = lb.tokens_g[g] * K * 8.0
        t_ag = (b.link_lat + (sim.gpus - 1) * local_map / b.link_bw if b.roofline
                else b.gm.allgather_s(local_map, sim.gpus))
        nodes.append(b.graph.add(f"L{lb.layer} allgather g{g}", t_ag,
                                 b.r_link[g], post, gpu=g, layer=lb.layer, kind="allgather",
                                 microbatch=lb.mb, bytes=(sim.gpus - 1) * local_map))
    return nodes


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


def decide(b: StepBuild, lb: LayerBatch, r: LayerRouting, g: int) -> GpuPartition:
    """GPU ``g``'s partition of its local experts, decided by the policy on its own estimate
    (Equation 1 with the learned cost table); records the estimate and the expert counts."""
    sim, m = b.sim, b.sim.model
    El = sim.local_experts
    layer, kind, mb = lb.layer, lb.kind, lb.mb
    lo = sim.expert_offset(g)
    c = np.asarray(r.counts[lo:lo + El], dtype=np.int64)
    base = b.memo.get(("ctx", kind, mb, g))
    if base is None:    # the same at every layer of this kind but for T_comm and the layer index
        fixed = non_moe_work(m, layer, lb.tokens_g[g])
        if sim.attention_on_gpu:
            fixed = fixed + gpu_ops.decode_attention_on_gpu(m, layer, lb.lens_g[g], sim.mtp_queries)
            t_attn_est, pim_model = 0.0, (sim._no_pim if sim.gpu_only else sim._learned[kind])
        else:
            pim_model = sim._learned[kind]
            t_attn_est = pim_model.attention_time_s(lb.lens_g[g]) * sim.mtp_queries
        base = b.memo[("ctx", kind, mb, g)] = CostContext(
            t_comm_s=0.0, t_attention_s=t_attn_est, gpu_fixed=fixed, gpu_flops_per_s=b.flops_s,
            gpu_bytes_per_s=b.bytes_s, expert_bytes=float(m.bytes_per_expert),
            expert_flops_per_token=2.0 * m.params_per_expert, expert_io_bytes_per_token=_expert_io_bytes_per_token(m),
            pim=pim_model, batch=max(r.mb_tokens, 1), top_k=m.top_k, num_experts=El, organisation=sim.org,
            gpus=sim.gpus, microbatches=sim.microbatches, gpu_beside=shared_expert_work(m, lb.tokens_g[g]))
    ctx = base.for_layer(r.comm_ag + 2.0 * r.t_disp[g], sim._moe_index[layer])
    t0 = time.perf_counter()
    pre = None
    if sim.early_loads == "policy" and r.own_counts is not None:    # the policy names its early loads
        local = r.own_counts[g, lo:lo + El]
        pre = np.asarray(sim.policy.early_experts(local, ctx), dtype=bool) & (local > 0)
    if getattr(sim.policy, "prices_executed", False):     # an oracle: it prices partitions on the executed layer
        ctx = dataclasses.replace(ctx, executed_s=executed_pricer(b, lb, r, g, ctx, sys.modules[__name__]))
    part = sim.policy.decide(c, ctx, validate=False, preloaded=pre)
    if pre is not None:
        part.info.setdefault("preloaded", pre)
    b.wall_decide += time.perf_counter() - t0
    b.decisions += 1
    active = c > 0
    for unit in part.info.get("profile", ()):   # placements the policy priced: their engine times are learned too
        b.observed.setdefault(unit, []).append(c[active])
    on_pim = part.on_pim & active
    on_gpu = active ^ on_pim
    n_gpu, n_pim = _count(on_gpu), _count(on_pim)
    gpu_tok = float(_sum(c[on_gpu])) if n_gpu else 0.0
    if part.unit is None:    # Equation 1 of this partition, as CostContext.evaluate computes it
        est = max(ctx.t_comm_s, ctx.gpu_time_s(n_gpu, gpu_tok)[0],
                  ctx.t_attention_s + (float(_sum(ctx.pim_times()[c[on_pim]])) if n_pim else 0.0))
    else:
        est = part.evaluate(ctx).t_total_s
    b.layer_est[layer] = max(b.layer_est[layer], est)
    b.n_gpu_exp[layer] += n_gpu
    b.n_pim_exp[layer] += n_pim
    decision_s = 0.0
    if b.dynamic and part.info.get("decided", True):     # a policy may skip the decision (no latency)
        activated = n_gpu + n_pim
        tries = part.info.get("moves_tried", min(n_gpu + 1, activated))
        decision_s = sim.hw.gpu.decision_time_s(activated, tries)
        b.decision_s += decision_s
    return GpuPartition(c, on_gpu, on_pim, n_gpu, n_pim, gpu_tok, part, ctx, decision_s)


def _expert_io_bytes_per_token(m: Any) -> float:
    """Activation bytes one token moves through one expert (in, gate/up out, down in, out)."""
    return m.dtype_bytes * (2.0 * m.hidden_size + 2.0 * m.moe_intermediate_size)


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
    load = b.graph.add(f"L{lb.layer} shared-expert weights g{g}", m.shared_expert_bytes / b.bytes_s,
                       b.r_hbm[g], [post[g]], gpu=g, layer=lb.layer, kind="shared_load", microbatch=lb.mb,
                       bytes=float(m.shared_expert_bytes))
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
    flops, io = 2.0 * m.params_per_expert, _expert_io_bytes_per_token(m)

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
