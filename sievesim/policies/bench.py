"""Decision-latency benchmark and the PIMoE placement-unit study (used by ``sievesim policy bench``,
``sievesim policy compare``, ``benchmarks/benchmarks_policies.py`` and docs/policies.md).

``compare_policies`` prices one layer under the model's calibrated synthetic routing
(:func:`model_routing`, the default routing of ``sievesim run``). The latency benchmark and the
single-flip study keep :func:`synthetic_counts`, a deterministic rank-Zipf stand-in that needs no
model preset (each of ``B`` tokens picks ``top_k`` distinct experts; the bimodal shape the paper
describes: a few popular experts, a long tail with one or two tokens).
"""
from __future__ import annotations

import statistics
import time
from typing import Any, Sequence

import numpy as np

from ..costs import DEFAULT_CONTEXT_LEN, UNITS, CostContext, build_context
from .base import get_policy

__all__ = ["synthetic_counts", "model_routing", "bench_model_for", "bench_context", "decision_latency_us", "bench",
           "compare_policies", "unit_sensitivity", "best_single_flip"]

#: PIMoE's units in the unit study: every base unit (groups of them where a GPU has fewer experts
#: than units) and ``channel*1``, one channel per expert even where channels stay without experts.
SENSITIVITY_UNITS: tuple[str, ...] = ("pseudo_channel", "channel*1") + UNITS[1:]

#: Preset model used by the latency benchmark for each expert count (one GPU holds them all).
BENCH_MODELS = {128: "qwen3-30b-a3b", 256: "deepseek-v3", 512: "qwen3-next-80b-a3b"}


def synthetic_counts(num_experts: int, batch: int, top_k: int, seed: int = 0, skew: float = 1.0) -> np.ndarray:
    """Tokens per expert of one layer: ``batch`` tokens, each picking ``top_k`` distinct experts
    with rank-Zipf(``skew``) popularity; deterministic in ``seed``."""
    rng = np.random.default_rng(seed)
    pop = 1.0 / np.arange(1, num_experts + 1, dtype=np.float64) ** skew
    pop = pop[rng.permutation(num_experts)]
    pop /= pop.sum()
    counts = np.zeros(num_experts, dtype=np.int64)
    k = min(top_k, num_experts)
    for _ in range(batch):
        counts[rng.choice(num_experts, size=k, replace=False, p=pop)] += 1
    return counts


def bench_model_for(num_experts: int) -> str:
    """Preset model name used for ``num_experts`` experts (``BENCH_MODELS``)."""
    if num_experts not in BENCH_MODELS:
        from ..errors import field_error
        raise field_error("experts", num_experts, f"one of {sorted(BENCH_MODELS)}")
    return BENCH_MODELS[num_experts]


def bench_context(model: Any, hardware: Any, batch: int, counts: np.ndarray, num_gpus: int = 1,
                  context_len: int = 4096) -> CostContext:
    """The cost context of the benchmark: default layer, every request at ``context_len`` tokens."""
    return build_context(model, hardware, num_gpus, batch, counts=counts, context_lens=context_len)


def decision_latency_us(policy: Any, counts: np.ndarray, ctx: CostContext, *, validate: bool = False,
                        repeat: int = 7, inner: int = 200) -> float:
    """Median over ``repeat`` runs of the mean time of one ``decide`` call [us] (context prebuilt;
    ``validate=False`` times the decision alone, ``True`` adds the input checks)."""
    policy.decide(counts, ctx, validate=validate)  # warm the context's tables
    samples = []
    decide = policy.decide
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(inner):
            decide(counts, ctx, validate=validate)
        samples.append((time.perf_counter() - t0) / inner * 1e6)
    return statistics.median(samples)


def bench(experts: Sequence[int] = (128, 256, 512), batches: Sequence[int] = (1, 16, 64, 256),
          policies: Sequence[str] = ("sieve", "noexp", "allexp", "pimoe", "oracle"),
          hardware: str = "b200", repeat: int = 7, inner: int = 200, seed: int = 0) -> list[dict[str, Any]]:
    """Median decision latency per (policy, experts, batch); one dict per row."""
    from ..hardware import get_hardware
    from ..models import get_model

    hw = get_hardware(hardware)
    rows = []
    for e in experts:
        model = get_model(bench_model_for(int(e)))
        for b in batches:
            counts = synthetic_counts(model.num_experts, int(b), model.top_k, seed=seed)
            ctx = bench_context(model, hw, int(b), counts)
            for name in policies:
                pol = get_policy(name)
                part = pol.decide(counts, ctx)
                rows.append({
                    "policy": name, "experts": int(e), "batch": int(b), "model": model.name,
                    "median_us": decision_latency_us(pol, counts, ctx, repeat=repeat, inner=inner),
                    "median_us_validated": decision_latency_us(pol, counts, ctx, validate=True,
                                                               repeat=repeat, inner=inner),
                    "active_experts": int(np.count_nonzero(counts)),
                    "gpu_experts": int(part.gpu_experts.size),
                })
    return rows


def model_routing(model: Any, batch: int, seed: int, layer: int | None = None) -> tuple[np.ndarray, np.ndarray, str]:
    """One step of the model's calibrated synthetic routing (the default routing of ``sievesim run``,
    :func:`sievesim.workload.synthetic.source_for_model`):
    ``(counts[E], topk_ids[B, top_k], source name)`` at MoE layer ``layer`` (default: the layer of
    :func:`sievesim.costs.default_layer`), the stream seeded by ``seed``."""
    from ..costs import default_layer
    from ..workload.synthetic import source_for_model

    src, spec = source_for_model(model)
    if layer is None:
        layer = default_layer(model)
    moe = model.moe_layer_indices
    li = moe.index(layer) if layer in moe else 0
    step = src.stream(int(batch), seed=seed).step()
    return step.counts[li], step.topk_ids[:, li, :], spec


def compare_policies(model_name: str, num_gpus: int, batches: Sequence[int], *, hardware: str = "b200",
                     policies: Sequence[Any] = ("noexp", "allexp", "sieve", "pimoe", "oracle"),
                     context_len: int = DEFAULT_CONTEXT_LEN, seeds: Sequence[int] = (0, 1, 2),
                     pim: Any = None, top_k: int | None = None) -> list[dict[str, Any]]:
    """Estimated ``T_total`` (Equation 1) of each policy, averaged over ``seeds`` (one layer of GPU 0).

    ``pim``: a PIM cost model (``sievesim.costs.PimCostModel``); default the roofline estimate.
    ``top_k``: overrides the model's routed experts per token.

    The routing of ``B`` tokens is the model's calibrated synthetic routing (:func:`model_routing`,
    the same as ``sievesim run``'s default), at the layer of :func:`sievesim.costs.default_layer`;
    GPU 0 holds experts ``0..E/G-1``; dispatch volumes come from the routing. A policy is a name or
    ``(label, policy instance)``. Returns rows with ``policy``, ``batch``, ``t_total_us``, the
    settings (``model``, ``hardware``, ``gpus``, ``layer``, ``context_len``, ``top_k``,
    ``routing``) and, for expert-parallel placements, the unit used (``pim_unit``, e.g.
    ``"channel*4"``) and the busiest/mean unit ratio. PIMoE's layout is checked against the PIM
    units' capacity first (:func:`sievesim.policies.placement.check_pimoe_capacity`).
    """
    from ..costs import default_layer
    from ..hardware import get_hardware
    from ..models import get_model

    from .baselines import PIMoE
    from .placement import check_pimoe_capacity

    hw = get_hardware(hardware)
    model = get_model(model_name, top_k=top_k)
    e_local = model.num_experts // num_gpus
    layer = default_layer(model)
    named = [(item, get_policy(item)) if isinstance(item, str) else item for item in policies]
    for _, pol in named:
        if isinstance(pol, PIMoE):      # its static placement must fit the PIM units
            check_pimoe_capacity(model, hw, num_gpus, pol.unit)
    rows = []
    for b in batches:
        acc: dict[str, list[float]] = {}
        imb: dict[str, list[float]] = {}
        used: dict[str, str] = {}
        for seed in seeds:
            counts, ids, routing = model_routing(model, int(b), seed, layer)
            counts = counts[:e_local]
            ctx = build_context(model, hw, num_gpus, int(b), counts=counts, routing=ids, context_lens=context_len,
                                pim=pim, layer=layer)
            for label, pol in named:
                part = pol.decide(counts, ctx)
                est = part.evaluate(ctx)
                acc.setdefault(label, []).append(est.t_total_s)
                if part.unit is not None:
                    used[label] = part.unit
                if est.unit_busy_s is not None and est.unit_busy_s.mean() > 0:
                    imb.setdefault(label, []).append(float(est.unit_busy_s.max() / est.unit_busy_s.mean()))
        for label, vals in acc.items():
            row = {"policy": label, "batch": int(b), "t_total_us": 1e6 * float(np.mean(vals)),
                   "model": model.name, "hardware": hw.name, "gpus": int(num_gpus), "layer": int(layer),
                   "context_len": int(context_len), "top_k": int(model.top_k), "routing": routing,
                   "seeds": list(seeds)}
            if label in used:
                row["pim_unit"] = used[label]
            if label in imb:
                row["busiest_over_mean_unit"] = float(np.mean(imb[label]))
            rows.append(row)
    return rows


def unit_sensitivity(model_name: str, num_gpus: int, batches: Sequence[int] = (1, 4, 16, 64, 256),
                     **kwargs: Any) -> list[dict[str, Any]]:
    """:func:`compare_policies` with PIMoE at every placement unit (:data:`SENSITIVITY_UNITS`), next
    to AllExp and Sieve."""
    from .baselines import PIMoE

    policies: list[Any] = ["allexp", "sieve"] + [(f"pimoe[{u}]", PIMoE(unit=u)) for u in SENSITIVITY_UNITS]
    return compare_policies(model_name, num_gpus, batches, policies=policies, **kwargs)


def best_single_flip(model: Any, hardware: Any, num_gpus: int, batch: int, seed: int,
                     context_len: int) -> tuple[float, float]:
    """Oracle's ``T_total`` and the lowest ``T_total`` of Sieve's result with one routed expert
    flipped (PIM <-> GPU), in seconds, for GPU 0's experts under :func:`synthetic_counts`.
    With no routed expert on the GPU there is nothing to flip: both are Oracle's."""
    counts = synthetic_counts(model.num_experts, batch, model.top_k, seed=seed)[: model.num_experts // num_gpus]
    ctx = build_context(model, hardware, num_gpus, batch, counts=counts, context_lens=context_len)
    part = get_policy("sieve").decide(counts, ctx)
    best = get_policy("oracle").decide(counts, ctx).evaluate(ctx).t_total_s
    flipped = best
    for i in np.flatnonzero(counts > 0):
        moved = part.on_pim.copy()
        moved[i] = not moved[i]
        flipped = min(flipped, ctx.evaluate(counts, moved).t_total_s)
    return best, flipped


def decision_work_fit(sizes: Sequence[int] = (4, 8, 16, 32, 64, 128, 256, 512, 1024), *,
                      repeat: int = 20000, rounds: int = 9) -> dict[str, Any]:
    """The shape of Sieve's decision work, measured on the compiled rule (counting sort + scan).

    For each size ``n`` (all ``n`` experts activated) the rule runs twice: once stopping at its
    first move (1 move tried) and once moving every expert (``n`` tried); each time is the minimum
    over ``rounds`` of the mean of ``repeat`` walks called from C. A non-negative least-squares fit
    on relative errors gives ``t = fixed + per_expert * n + per_try * tries`` [s]; the model of
    ``GPUSpec.decision_time_s`` takes ``fixed / per_expert`` and ``per_try / per_expert``."""
    from scipy.optimize import nnls

    from ._sieve_kernel import sieve_walk_seconds

    rows, times = [], []
    for n in sizes:
        counts = np.ascontiguousarray((1 + np.arange(n) % 16)[::-1], dtype=np.int64)
        out = np.empty(n, dtype=np.uint8)
        for move_all in (False, True):
            pim = np.arange(17, dtype=np.float64) * (1.0 if move_all else 1e-9)
            args = (counts, pim, 0.0, 0.0, 0.0 if move_all else 1.0, 0.0, 0.0, 0.0, 0.0, 1e-12, out)
            runs = [sieve_walk_seconds(*args, max(1, repeat * 256 // max(n, 256))) for _ in range(rounds)]
            moved = runs[0][0]
            rows.append((1.0, float(n), float(min(moved + 1, n))))
            times.append(min(t for _, t in runs))
    a = np.array(rows)
    y = np.array(times)
    coef, _ = nnls(a / y[:, None], np.ones_like(y))
    fixed, per_expert, per_try = (float(c) for c in coef)
    return {"sizes": list(sizes), "rows": [list(r) for r in rows], "seconds": times, "fixed_s": fixed,
            "per_expert_s": per_expert, "per_try_s": per_try,
            "fixed_work": fixed / per_expert if per_expert else float("inf"),
            "try_work": per_try / per_expert if per_expert else float("inf")}
