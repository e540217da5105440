"""The policy's decisions in a step: one GPU at a time (:func:`decide`, Equation 1 on the GPU's own
cost context) or every GPU of a layer in one call (:func:`decide_all`, through the policy's
``decide_rows``: the same partitions, counted the same way, bit for bit)."""
from __future__ import annotations

import dataclasses
import sys
import time
from typing import Any

import numpy as np

from ..costs import CostContext, default_ids, non_moe_work
from ..costs.gpu import shared_expert_work
from ..policies.base import Partition
from . import gpu_ops
from .oracle_pricing import executed_pricer
from .step_build import GpuPartition, LayerBatch, LayerRouting, StepBuild

__all__ = ["decide", "decide_all", "layer_context", "account_partition", "PartitionRows"]

_count = np.count_nonzero
_sum = np.add.reduce     # ndarray.sum() without its Python wrapper (the same reduction)


def decide(b: StepBuild, lb: LayerBatch, r: LayerRouting, g: int) -> GpuPartition:
    """GPU ``g``'s partition of its local experts, decided by the policy on its own estimate
    (Equation 1 with the learned cost table); records the estimate and the expert counts."""
    sim = b.sim
    El = sim.local_experts
    lo = sim.expert_offset(g)
    c = np.asarray(r.counts[lo:lo + El], dtype=np.int64)
    ctx = layer_context(b, lb, r, g)
    t0 = time.perf_counter()
    pre = None
    if sim.early_loads == "policy" and r.own_counts is not None:    # the policy names its early loads
        local = r.own_counts[g, lo:lo + El]
        pre = np.asarray(sim.policy.early_experts(local, ctx), dtype=bool) & (local > 0)
    if getattr(sim.policy, "prices_executed", False):     # an oracle: it prices partitions on the executed layer
        ctx = dataclasses.replace(ctx, executed_s=executed_pricer(b, lb, r, g, ctx, sys.modules[__package__ + ".figure8"]))
    part = sim.policy.decide(c, ctx, validate=False, preloaded=pre)
    if pre is not None:
        part.info.setdefault("preloaded", pre)
    b.wall_decide += time.perf_counter() - t0
    b.decisions += 1
    return account_partition(b, lb, c, part, ctx)


class PartitionRows(list):
    """Every GPU's :class:`GpuPartition` of one layer (a list, GPU ``g`` at ``g``), with the arrays
    they were cut from: ``counts``, ``on_gpu`` and ``on_pim`` (GPUs x local experts)."""

    counts: np.ndarray
    on_gpu: np.ndarray
    on_pim: np.ndarray


def decide_all(b: StepBuild, lb: LayerBatch, r: LayerRouting) -> PartitionRows | None:
    """Every GPU's partition at this layer in one call of the policy's ``decide_rows`` (the
    partitions :func:`decide` gives GPU by GPU, counted the same way); None where the policy decides
    GPU by GPU only, names its early loads, or prices partitions on the executed layer."""
    sim = b.sim
    if b.memo.get(("rows",)) is False or getattr(sim.policy, "prices_executed", False) \
            or (sim.early_loads == "policy" and r.own_counts is not None):
        return None
    G, El = sim.gpus, sim.local_experts
    counts = np.empty((G, El), dtype=np.int64)
    for g in range(G):
        lo = sim.expert_offset(g)
        counts[g] = r.counts[lo:lo + El]
    ctxs = [layer_context(b, lb, r, g) for g in range(G)]
    t0 = time.perf_counter()
    on_pim = sim.policy.decide_rows(counts, ctxs)
    if on_pim is None:
        b.memo[("rows",)] = False
        return None
    b.wall_decide += time.perf_counter() - t0
    b.decisions += G
    return _account_rows(b, lb, counts, on_pim, ctxs)


def _account_rows(b: StepBuild, lb: LayerBatch, counts: np.ndarray, on_pim_raw: np.ndarray,
                  ctxs: list[CostContext]) -> PartitionRows:
    """:func:`account_partition` of every GPU's plain partition (tensor-parallel PIM experts, no
    information beside ``on_pim``) at once: the same counts, estimates and latencies, row by row."""
    sim, layer = b.sim, lb.layer
    ids = default_ids(counts.shape[1])
    active = counts > 0
    on_pim = on_pim_raw & active
    on_gpu = active ^ on_pim
    n_gpu = np.count_nonzero(on_gpu, axis=1).tolist()
    n_pim = np.count_nonzero(on_pim, axis=1).tolist()
    gpu_tok = np.add.reduce(np.where(on_gpu, counts, 0), axis=1).tolist()     # integers: exact in any order
    table = ctxs[0].pim_times()     # one table for every row (decide_rows checked it)
    out, est_max = PartitionRows(), b.layer_est[layer]
    out.counts, out.on_gpu, out.on_pim = counts, on_gpu, on_pim
    for g, ctx in enumerate(ctxs):
        ng, npim, tok = n_gpu[g], n_pim[g], float(gpu_tok[g]) if n_gpu[g] else 0.0
        t_gpu = max(ctx._off0 + ctx._off_e * ng + ctx._off_t * tok, ctx._comp0 + ctx._comp_t * tok)
        row = counts[g]
        est = max(ctx.t_comm_s, t_gpu, ctx.t_attention_s + (float(_sum(table[row[on_pim[g]]])) if npim else 0.0))
        est_max = max(est_max, est)
        decision_s = 0.0
        if b.dynamic:
            decision_s = sim.hw.gpu.decision_time_s(ng + npim, min(ng + 1, ng + npim))
            b.decision_s += decision_s
        out.append(GpuPartition(row, on_gpu[g], on_pim[g], ng, npim, tok,
                                Partition(row, ids, on_pim_raw[g]), ctx, decision_s))
    b.layer_est[layer] = est_max
    b.n_gpu_exp[layer] += sum(n_gpu)
    b.n_pim_exp[layer] += sum(n_pim)
    return out


def layer_context(b: StepBuild, lb: LayerBatch, r: LayerRouting, g: int) -> CostContext:
    """The policy's cost context of GPU ``g`` at this layer: its fixed work, attention estimate and
    rates (built once per step and attention kind) with this layer's ``T_comm`` and MoE index."""
    sim, m = b.sim, b.sim.model
    layer, kind, mb = lb.layer, lb.kind, lb.mb
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
            expert_flops_per_token=2.0 * m.params_per_expert, expert_io_bytes_per_token=gpu_ops.expert_io_bytes_per_token(m),
            pim=pim_model, batch=max(r.mb_tokens, 1), top_k=m.top_k, num_experts=sim.local_experts,
            organisation=sim.org, gpus=sim.gpus, microbatches=sim.microbatches,
            gpu_beside=shared_expert_work(m, lb.tokens_g[g]))
    return base.for_layer(r.comm_ag + 2.0 * r.t_disp[g], sim._moe_index[layer])


def account_partition(b: StepBuild, lb: LayerBatch, c: np.ndarray, part: Any, ctx: CostContext) -> GpuPartition:
    """A GPU's decided partition counted into the step: the placements it priced, its Equation-1
    estimate (the layer's is the largest over GPUs), its experts per side and its decision latency."""
    sim, layer = b.sim, lb.layer
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
