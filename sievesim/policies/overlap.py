"""Overlap (ours, beyond the paper): Sieve's cut on the work the executed graph overlaps, with the
PIM placement chosen per layer."""
from __future__ import annotations

import dataclasses

import numpy as np

from ..costs import CostContext
from ..errors import field_error
from ._prefix import first_non_decrease, prefix_on_pim, sorted_active
from .base import Partition, Policy, register_policy
from .options import Option
from .placement import DEFAULT_PIMOE_UNIT

__all__ = ["Overlap", "PLACEMENTS"]

#: The placements ``Overlap`` can give a layer's PIM experts: ``tensor`` (each expert over every
#: channel, the paper's Sieve) or whole experts on one unit (PIMoE's expert parallelism).
PLACEMENTS = ("tensor", "stack", "channel")


@register_policy
class Overlap(Policy):
    """Sieve's greedy cut, on what the executed layer overlaps, on the best PIM placement per layer.

    Four changes to the paper's Sieve, each from a measured cause (docs/policies.md):

    1. **What overlaps.** In the executed layer (Figure 8 with one micro-batch) attention, the
       non-MoE GPU work and the dispatch all finish before the experts start; only the GPU's and
       the PIM's expert work run side by side, with the shared experts (issued after the router,
       their weight loads share the HBM with the routed experts'). The rule therefore weighs
       ``max(shared + GPU experts, PIM experts)`` (``CostContext.gpu_beside``), not Equation 1's
       attention and non-MoE terms. With two or more micro-batches another micro-batch's
       attention and non-MoE work run beside these experts, and the rule weighs Equation 1.
       With the PIM experts on one placement that maximum is the larger of an increasing and a
       decreasing sequence along the popularity-sorted list, so the greedy walk's first
       non-decrease is its minimum.
    2. **Placement per layer.** A PIM expert spread over every channel (tensor-parallel) pays
       per-command overhead on every channel; whole experts on stacks or channels pay the busiest
       unit instead. For its first ``calibration`` decisions of a MoE layer (per GPU: ``calibration
       x gpus`` decisions) the policy prices every placement of ``placements`` and keeps the
       cheapest for that layer afterwards: a layer's PIM weights have one layout, fixed once
       (the figures' warm-up plays that calibration).
    3. **Early loads that cannot be wasted.** On more than one GPU, the experts whose own requests'
       tokens alone make the GPU the cheaper side (:meth:`early_experts`) load right after the router,
       behind the dispatch, and the decision keeps them on the GPU (their weights are on their way)
       and walks on from them. The paper's rule loads the same kind of expert and may then run it on
       PIM, a wasted load (docs/system.md). On one GPU there is no dispatch to hide a load behind,
       and no early load.
    4. **No decision where a GPU holds about one request** (``batch <= gpus``): every expert runs
       on PIM, tensor-parallel, and no decision latency is paid (the batch size is known before
       the step, so the serving engine runs the all-on-PIM graph).
    """

    name = "overlap"
    description = "Sieve's cut on the expert work that overlaps, placement chosen per layer (ours, not the paper's)"
    early_loads = "policy"
    options = {
        "placements": Option("choice", "auto", "auto: the cheapest of tensor, stack and PIMoE's channel per layer; "
                                               "or one placement for every layer",
                             choices=("auto",) + PLACEMENTS),
        "calibration": Option("int", 2, "decisions per GPU and MoE layer that price every placement before the "
                                        "layer keeps the cheapest", lo=1, hi=1000),
        "rule": Option("choice", "auto", "what the cut weighs: auto (the expert work with one micro-batch, Equation 1 "
                                         "with more), experts, or equation1", choices=("auto", "experts", "equation1")),
        "scope": Option("choice", "model", "model: the placement cheapest summed over every layer priced so far; "
                                           "layer: each MoE layer keeps its own cheapest", choices=("model", "layer")),
        "rel_tol": Option("number", 1e-12, "a move counts as a decrease by more than rel_tol x T_start", lo=0.0,
                          hi=1e-3),
    }

    def __init__(self, placements: str = "auto", calibration: int = 2, scope: str = "model",
                 rel_tol: float = 1e-12, rule: str = "auto") -> None:
        for name, value, choices in (("placements", placements, ("auto",) + PLACEMENTS),
                                     ("scope", scope, ("model", "layer")), ("rule", rule, ("auto", "experts", "equation1"))):
            if value not in choices:
                raise field_error(f"overlap {name}", value, "one of " + ", ".join(choices))
        self.scope = scope
        self.rule = rule
        self.placements = PLACEMENTS if placements == "auto" else (placements,)
        self.calibration = int(calibration)
        self.rel_tol = float(rel_tol)
        self._priced: dict[int, dict[str, float]] = {}    # MoE layer -> placement -> summed estimate [s]
        self._seen: dict[int, int] = {}                    # MoE layer -> decisions that priced every placement
        self._layout: dict[int, str] = {}                  # MoE layer -> its fixed placement

    def __repr__(self) -> str:
        args = ([] if len(self.placements) > 1 else [f"placements={self.placements[0]!r}"]) + \
            ([] if self.scope == "model" else [f"scope={self.scope!r}"]) + ([] if self.rule == "auto" else [f"rule={self.rule!r}"])
        return f"Overlap({', '.join(args)})"

    def layout(self) -> dict[int, str]:
        """The placement each MoE layer keeps (layers still calibrating are absent)."""
        return dict(self._layout)

    def early_experts(self, local_counts: np.ndarray, ctx: CostContext) -> np.ndarray:
        """Experts whose own requests' tokens alone make the GPU the cheaper side for them (weights
        included) on the layer's placement: loaded right after the router, behind the dispatch, and
        kept on the GPU by the decision. None on one GPU (no dispatch to hide a load behind) or
        where the decision is skipped."""
        local = np.asarray(local_counts, dtype=np.int64)
        if ctx.gpus == 1 or ctx.batch <= ctx.gpus:
            return np.zeros(local.size, dtype=bool)
        placement = self._layout.get(ctx.moe_layer, "tensor")
        unit = None if placement == "tensor" else (DEFAULT_PIMOE_UNIT if placement == "channel" else placement)
        if unit is not None:
            from .placement import expert_placement
            unit = expert_placement(ctx.num_experts, ctx.organisation, unit, ctx.moe_layer)[0]
        cheaper = ctx.gpu_cheaper_alone(unit)
        return cheaper[np.minimum(local, cheaper.size - 1)]

    def _decide(self, counts: np.ndarray, ctx: CostContext, expert_ids: np.ndarray) -> Partition:
        return self._decide_preloaded(counts, ctx, expert_ids, np.zeros(counts.size, dtype=bool))

    def _decide_preloaded(self, counts: np.ndarray, ctx: CostContext, expert_ids: np.ndarray,
                          preloaded: np.ndarray) -> Partition:
        if ctx.batch <= ctx.gpus:     # about one request per GPU: all on PIM, no decision
            return Partition(counts, expert_ids, counts > 0, info={"decided": False, "placement": "tensor"})
        forced = preloaded & (counts > 0)
        if forced.any():     # their weights are on their way: they run on the GPU, the walk goes on from them
            start = (int(np.count_nonzero(forced)), int(counts[forced].sum()))
            counts_rest = np.where(forced, 0, counts)
        else:
            start, counts_rest = (0, 0), counts
        # one micro-batch: only the expert work of the two sides overlaps; with more, another micro-batch's
        # attention (PIM) and non-MoE work (GPU) run beside these experts, as Equation 1 weighs them
        experts = self.rule == "experts" or (self.rule == "auto" and ctx.microbatches == 1)
        work = dataclasses.replace(ctx, t_comm_s=0.0, t_attention_s=0.0, gpu_fixed=ctx.gpu_beside) if experts else ctx
        layer = ctx.moe_layer
        fixed = self._layout.get(layer)
        if fixed is not None:
            part, _ = self._walk(fixed, counts_rest, work, expert_ids, start)
            return self._whole(part, counts)
        best: tuple[float, int] | None = None
        best_part: Partition | None = None
        tries = 0
        priced = self._priced.setdefault(layer, dict.fromkeys(self.placements, 0.0))
        units: list[str | None] = []
        for rank, placement in enumerate(self.placements):
            part, t = self._walk(placement, counts_rest, work, expert_ids, start)
            tries += int(part.info["moves_tried"])
            units.append(part.unit)
            priced[placement] += t
            if best is None or (t, rank) < best:
                best, best_part = (t, rank), part
        assert best_part is not None
        seen = self._seen[layer] = self._seen.get(layer, 0) + 1
        if seen >= self.calibration * ctx.gpus:
            if self.scope == "layer":
                self._layout[layer] = min(self.placements, key=lambda p: (priced[p], self.placements.index(p)))
            else:
                pooled = {p: sum(v[p] for v in self._priced.values()) for p in self.placements}
                self._layout[layer] = min(self.placements, key=lambda p: (pooled[p], self.placements.index(p)))
        best_part.info["moves_tried"] = tries
        # every activated count on every placement priced here is measured (profiled) for the cost table
        best_part.info["profile"] = tuple(dict.fromkeys(units))
        return self._whole(best_part, counts)

    @staticmethod
    def _whole(part: Partition, counts: np.ndarray) -> Partition:
        """``part`` (decided on the counts without the preloaded experts) with every count back."""
        part.counts = counts
        return part

    def _walk(self, placement: str, counts: np.ndarray, ctx: CostContext, expert_ids: np.ndarray,
              start: tuple[int, int] = (0, 0)) -> tuple[Partition, float]:
        """The greedy cut on one placement and its estimate [s]; ``start``: (experts, tokens) on the
        GPU before the walk (preloaded, given with count 0 in ``counts``)."""
        if placement == "tensor":
            s, desc = sorted_active(counts)
            totals = _prefix_totals_from(ctx, desc, start)
            k = first_non_decrease(totals, 0, self.rel_tol * float(totals[0]))
            part = Partition(counts, expert_ids, prefix_on_pim(counts, expert_ids, s, desc, k),
                             info={"moves_tried": min(k + 1, desc.size), "placement": "tensor"})
            return part, float(totals[k])
        from .sieve import Sieve, _unit_walk

        unit = DEFAULT_PIMOE_UNIT if placement == "channel" else placement
        part = _unit_walk(Sieve(unit=unit, rel_tol=self.rel_tol), counts, ctx, expert_ids, start)
        part.info["placement"] = placement
        busy = part.evaluate(ctx)
        gpu = ctx.gpu_time_s(start[0] + int(np.count_nonzero(~part.on_pim & (counts > 0))),
                             start[1] + float(counts[~part.on_pim].sum()))[0]
        return part, max(ctx.t_comm_s, gpu, busy.t_pim_s)


def _prefix_totals_from(ctx: CostContext, desc: np.ndarray, start: tuple[int, int]) -> np.ndarray:
    """``T_total`` of every prefix cut of ``desc`` (counts, descending) moved to the GPU after
    ``start = (experts, tokens)`` already there [s] (:meth:`CostContext.prefix_totals` when none)."""
    if start == (0, 0):
        return ctx.prefix_totals(desc)
    pt = ctx.pim_times()[desc]
    p_all = ctx.t_attention_s + float(np.add.reduce(pt))
    n = start[0] + np.arange(desc.size + 1, dtype=np.float64)
    tok = start[1] + np.concatenate(([0], np.cumsum(desc)))
    gpu = np.maximum(ctx._off0 + ctx._off_e * n + ctx._off_t * tok, ctx._comp0 + ctx._comp_t * tok)
    pim = p_all - np.concatenate(([0.0], np.cumsum(pt)))
    return np.maximum(np.maximum(gpu, pim), ctx.t_comm_s)
