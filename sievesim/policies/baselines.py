"""The baselines of the paper's evaluation: NoExp, AllExp and PIMoE."""
from __future__ import annotations

import math

import numpy as np

from ..costs import UNITS, CostContext
from ..errors import field_error
from .base import Partition, Policy, register_policy
from .options import Option

__all__ = ["NoExp", "AllExp", "PIMoE", "NaiveSplit", "DEFAULT_PIMOE_UNIT"]

#: PIMoE's default placement unit; see docs/policies.md for why (the paper does not say).
DEFAULT_PIMOE_UNIT = "stack"


@register_policy
class NoExp(Policy):
    """Every expert on the GPU; PIM runs only decode attention (Heo et al. 2024; Lee et al. 2025)."""

    name = "noexp"
    description = "all experts on the GPU (PIM runs attention only)"
    static_placement = "gpu"
    options: dict = {}

    def _decide(self, counts: np.ndarray, ctx: CostContext, expert_ids: np.ndarray) -> np.ndarray:
        return np.zeros(counts.shape, dtype=bool)


@register_policy
class AllExp(Policy):
    """Every activated expert on PIM, tensor-parallel across all channels (PAPI, Stratum)."""

    name = "allexp"
    description = "all experts on PIM, tensor-parallel across channels"
    static_placement = "pim"
    options: dict = {}

    def _decide(self, counts: np.ndarray, ctx: CostContext, expert_ids: np.ndarray) -> np.ndarray:
        return counts > 0


@register_policy
class NaiveSplit(Policy):
    """Naive co-processing (the Sieve paper's Figure 6d): the activated experts alternate between the
    GPU and PIM in expert-id order, half and half, whatever their token counts, as a split chosen
    for a uniform expert distribution would place them (Duplex-style co-processing, Yun et al. 2024).
    It needs no run-time decision."""

    name = "naive"
    description = "activated experts alternate GPU/PIM by id (a split for uniform routing)"
    static_placement = "split"
    options: dict = {}

    def _decide(self, counts: np.ndarray, ctx: CostContext, expert_ids: np.ndarray) -> np.ndarray:
        active = np.flatnonzero(counts > 0)
        active = active[np.argsort(expert_ids[active], kind="stable")]
        on_pim = np.zeros(counts.shape, dtype=bool)
        on_pim[active[1::2]] = True
        return on_pim


@register_policy
class PIMoE(Policy):
    """PIMoE as the Sieve paper describes it (Wu et al. 2025).

    Experts are placed on PIM units by expert parallelism (expert id ``i`` on unit
    ``i mod U``, ``U`` units of kind ``unit`` in one GPU's PIM; static, so a unit's load follows the
    routing). Start with all activated experts on PIM; while the GPU time does not exceed the PIM
    time, move the most popular expert of the busiest unit to the GPU. Both are *isolated expert*
    times, as the Sieve paper describes PIMoE: the PIM time is the busiest unit's expert work alone
    (no attention), the GPU time the GPU experts' weight loads, activations and FLOPs alone
    (``CostContext.moe_gpu_time_s``: no non-MoE GPU work), and the interconnect is ignored. The move
    that makes the GPU time exceed the PIM time is kept. Ties: lower unit index, then lower expert id.

    Parameters
    ----------
    unit:
        ``"pseudo_channel"``, ``"channel"`` or ``"stack"`` (default :data:`DEFAULT_PIMOE_UNIT`).
    """

    name = "pimoe"
    description = "expert-parallel PIM units; move the busiest unit's top expert until GPU > PIM"
    #: PIMoE balances isolated times unit by unit, so an expert cheaper on the GPU by itself often
    #: stays on PIM: with early loads it wasted 18.8 GB of loads per step (Qwen3-30B-A3B, B = 64,
    #: stack units) and ran 1.41x slower (docs/system.md, "Early weight loads").
    early_loads = "off"
    options = {"unit": Option("choice", DEFAULT_PIMOE_UNIT, "the PIM unit that holds whole experts",
                              choices=UNITS)}

    def __init__(self, unit: str = DEFAULT_PIMOE_UNIT) -> None:
        if unit not in UNITS:
            raise field_error("pimoe unit", unit, f"one of {', '.join(UNITS)}")
        self.unit = unit

    def __repr__(self) -> str:
        return f"PIMoE(unit={self.unit!r})"

    def _decide(self, counts: np.ndarray, ctx: CostContext, expert_ids: np.ndarray) -> Partition:
        n_units = ctx.organisation.count(self.unit)
        unit_of = expert_ids % n_units
        table = ctx.pim_times(self.unit)
        on_pim = counts > 0
        act = np.flatnonzero(on_pim)
        t_e = table[counts].tolist()
        # per-unit queues, most popular first (ties: lower id)
        order = act[np.lexsort((expert_ids[act], -counts[act]))]
        queues: list[list[int]] = [[] for _ in range(n_units)]
        for i, u in zip(order.tolist(), unit_of[order].tolist()):
            queues[u].append(i)
        # unit loads as correctly rounded sums (math.fsum), so that equal loads are equal whatever
        # the order the experts were listed in, and the busiest unit does not depend on it
        load = np.array([math.fsum(t_e[i] for i in q) for q in queues], dtype=np.float64)
        heads = [0] * n_units
        n_gpu = 0
        tok = 0
        while True:
            u = int(np.argmax(load))
            t_pim = float(load[u])
            if t_pim <= 0.0 or ctx.moe_gpu_time_s(n_gpu, tok) > t_pim:
                break
            q = queues[u]
            i = q[heads[u]]
            heads[u] += 1
            on_pim[i] = False
            n_gpu += 1
            tok += int(counts[i])
            load[u] = math.fsum(t_e[j] for j in q[heads[u]:])
        return Partition(counts, expert_ids, on_pim, unit=self.unit, unit_of=unit_of)
