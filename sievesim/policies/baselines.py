"""The baselines of the paper's evaluation: NoExp, AllExp and PIMoE."""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from .._units import split_unit
from ..costs import CostContext
from ..errors import ConfigError, field_error
from .base import Partition, Policy, register_policy
from .placement import DEFAULT_PIMOE_UNIT, unit_queues
from .options import Option

__all__ = ["NoExp", "AllExp", "PIMoE", "NaiveSplit", "DEFAULT_PIMOE_UNIT"]


@register_policy
class NoExp(Policy):
    """Every expert on the GPU; PIM runs only decode attention (Heo et al. 2024; Lee et al. 2025)."""

    name = "noexp"
    description = "all experts on the GPU (PIM runs attention only)"
    static_placement = "gpu"
    options: dict = {}

    def _decide(self, counts: np.ndarray, ctx: CostContext, expert_ids: np.ndarray) -> np.ndarray:
        return np.zeros(counts.shape, dtype=bool)

    def decide_rows(self, counts: np.ndarray, ctxs: Sequence[CostContext]) -> np.ndarray:
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

    def decide_rows(self, counts: np.ndarray, ctxs: Sequence[CostContext]) -> np.ndarray:
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

    Experts are placed on PIM units by expert parallelism, statically (a unit's load follows the
    routing): :func:`sievesim.policies.placement.expert_placement` spreads each layer's experts of
    one GPU over all units of kind ``unit`` (local expert ``i`` of MoE layer ``l`` on unit
    ``(l * E_l + i) mod U``), and when the GPU has fewer experts than units each expert spans a
    group of units (``"channel*4"``: GPT-OSS-120B's 32 experts per GPU over 128 channels), so that
    no unit is left without experts. Start with all activated experts on PIM; while the GPU time
    does not exceed the PIM time, move the most popular expert of the busiest unit to the GPU. Both
    are *isolated expert* times, as the Sieve paper describes PIMoE: the PIM time is the busiest
    unit's expert work alone (no attention), the GPU time the GPU experts' weight loads,
    activations and FLOPs alone (``CostContext.moe_gpu_time_s``: no non-MoE GPU work), and the
    interconnect is ignored. The move that makes the GPU time exceed the PIM time is kept. Ties:
    lower unit index, then lower expert id. The partition's ``unit`` is the unit actually used
    (``"channel*4"``), ``unit_of`` the index of each expert's unit (or group) among
    ``ctx.organisation.count(unit)``.

    Parameters
    ----------
    unit:
        ``"pseudo_channel"``, ``"channel"`` or ``"stack"`` (default :data:`DEFAULT_PIMOE_UNIT`,
        ``"channel"``), or a fixed group ``"BASE*S"`` (``"channel*4"``; ``"channel*1"`` keeps one
        channel per expert even when units are left without experts).
    """

    name = "pimoe"
    description = "expert-parallel PIM units; move the busiest unit's top expert until GPU > PIM"
    #: PIMoE balances isolated times unit by unit, so an expert cheaper on the GPU by itself often
    #: stays on PIM: with early loads it wasted 18.8 GB of loads per step (Qwen3-30B-A3B, B = 64,
    #: stack units) and ran 6.911 ms against 4.766 ms without (`sievesim run --model qwen3-30b-a3b --batch 64
    #: --gpu-model roofline --policy pimoe --pimoe-unit stack --early-loads cheaper`; docs/system.md, "Fidelity").
    early_loads = "off"
    options = {"unit": Option("unit", DEFAULT_PIMOE_UNIT, "the PIM unit that holds whole experts")}

    def __init__(self, unit: str = DEFAULT_PIMOE_UNIT) -> None:
        try:
            split_unit(unit)
        except ConfigError:
            raise field_error("pimoe unit", unit, "one of pseudo_channel, channel, stack, or a fixed group "
                              "BASE*S of S of them (e.g. channel*4; channel*1: one channel per expert)") from None
        self.unit = unit

    def __repr__(self) -> str:
        return f"PIMoE(unit={self.unit!r})"

    def _decide(self, counts: np.ndarray, ctx: CostContext, expert_ids: np.ndarray) -> Partition:
        unit, unit_of, queues, load, t_e = unit_queues(counts, expert_ids, ctx, self.unit)
        on_pim = counts > 0
        n_units = len(queues)
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
        return Partition(counts, expert_ids, on_pim, unit=unit, unit_of=unit_of)
