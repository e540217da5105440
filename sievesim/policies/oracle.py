"""Oracle (ours): the best prefix cut of the popularity-sorted expert list."""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..costs import CostContext
from ..errors import field_error
from ._prefix import best_cuts, prefix_on_pim, sorted_active
from .base import Partition, Policy, register_policy
from .options import Option

__all__ = ["Oracle"]


@register_policy
class Oracle(Policy):
    """The best of all ``m + 1`` prefix cuts (the ``k`` most popular experts on the GPU) by the same
    ``T_total`` estimate Sieve uses; it measures what the greedy rule's early stop leaves.

    With ``verify`` (a callable ``partition -> seconds``, e.g. one that runs the layer on the
    engine; the policy never imports it) the ``candidates`` best cuts by estimate are checked and
    the one with the lowest verified time wins (ties: the better estimate). ``partition.info``
    then holds ``{"verified": {k: seconds}}``. Estimates within ``rel_tol`` of the all-on-PIM
    estimate count as ties (rounding noise); ties go to fewer experts on the GPU.
    """

    name = "oracle"
    description = ("in a step: the fastest partition and placement on the executed layer; alone: the best "
                   "prefix cut by the estimate (optionally verified)")
    #: In a step, the step gives :attr:`CostContext.executed_s` and the oracle searches on it.
    prices_executed = True
    early_loads = "policy"
    #: It prices every candidate on the executed layer; its table only orders the unit walks and is
    #: profiled for every activated count and placement from its first step (no converged warm-up).
    needs_warm_table = False
    options = {
        "verify": Option("callable", None, "partition -> seconds, e.g. the engine; Python API only"),
        "candidates": Option("int", 3, "best cuts by estimate checked with verify", lo=1, hi=64),
        "rel_tol": Option("number", 1e-12, "estimates within rel_tol x the all-on-PIM estimate tie", lo=0.0, hi=1e-3),
    }

    def __init__(self, verify: Callable[[Partition], float] | None = None, candidates: int = 3,
                 rel_tol: float = 1e-12) -> None:
        if int(candidates) < 1:
            raise field_error("oracle candidates", candidates, "a positive integer")
        self.verify = verify
        self.candidates = int(candidates)
        self.rel_tol = float(rel_tol)

    def early_experts(self, local_counts: np.ndarray, ctx: CostContext) -> np.ndarray:
        """None from the local tokens alone: on the executed layer the oracle loads exactly the GPU
        experts it chose (``partition.info["preloaded"]``)."""
        return np.zeros(np.asarray(local_counts).size, dtype=bool)

    def _decide_preloaded(self, counts: np.ndarray, ctx: CostContext, expert_ids: np.ndarray,
                          preloaded: np.ndarray) -> Partition:
        return self._decide(counts, ctx, expert_ids)

    def _decide(self, counts: np.ndarray, ctx: CostContext, expert_ids: np.ndarray) -> Partition:
        if ctx.executed_s is not None:
            return _search_executed(counts, ctx, expert_ids, self.rel_tol)
        s, desc = sorted_active(counts)
        totals = ctx.prefix_totals(desc)
        tol = self.rel_tol * float(totals[0])
        if self.verify is None:
            k = int(np.flatnonzero(totals <= totals.min() + tol)[0])
            return Partition(counts, expert_ids, prefix_on_pim(counts, expert_ids, s, desc, k),
                             info={"cut": k, "estimate_s": float(totals[k])})
        cands = best_cuts(totals, tol)[: self.candidates]
        verified: dict[int, float] = {}
        best: tuple[float, int] | None = None
        best_part: Partition | None = None
        for rank, k in enumerate(cands):
            part = Partition(counts, expert_ids, prefix_on_pim(counts, expert_ids, s, desc, k))
            t = float(self.verify(part))
            verified[k] = t
            if best is None or (t, rank) < best:
                best, best_part = (t, rank), part
        assert best_part is not None
        k = cands[best[1]]
        best_part.info.update({"cut": k, "estimate_s": float(totals[k]), "verified": verified})
        return best_part


#: The placements the executed search walks besides tensor parallelism (PIMoE's units).
_UNITS = ("stack", "channel")


def _search_executed(counts: np.ndarray, ctx: CostContext, expert_ids: np.ndarray, rel_tol: float) -> Partition:
    """The fastest on ``ctx.executed_s`` of: every prefix cut of the popularity-sorted list with the PIM
    experts tensor-parallel, and every partition along the busiest-unit walk on each of PIMoE's
    placements (stack, channel). Ties within ``rel_tol`` go to the earlier candidate (tensor first,
    fewer experts on the GPU first). Every GPU expert is loaded early, no decision latency is paid,
    and every placement's times are profiled for the cost table."""
    from .placement import DEFAULT_PIMOE_UNIT, unit_queues

    best: tuple[float, Partition] | None = None
    s, desc = sorted_active(counts)

    def consider(part: Partition) -> None:
        nonlocal best
        t = float(ctx.executed_s(part))
        if best is None or t < best[0] * (1.0 - rel_tol):
            best = (t, part)

    for k in range(desc.size + 1):
        consider(Partition(counts, expert_ids, prefix_on_pim(counts, expert_ids, s, desc, k)))
    units: list[str | None] = [None]
    for name in _UNITS:
        unit, unit_of, queues, load, t_e = unit_queues(counts, expert_ids, ctx, name if name != "channel"
                                                       else DEFAULT_PIMOE_UNIT)
        units.append(unit)
        on_pim = counts > 0
        heads = [0] * len(queues)
        load = load.copy()
        consider(Partition(counts, expert_ids, on_pim.copy(), unit=unit, unit_of=unit_of))
        left = np.array([len(q) > 0 for q in queues], dtype=bool)
        while left.any():    # the busiest unit with experts left gives its most popular one
            u = int(np.argmax(np.where(left, load, -np.inf)))
            i = queues[u][heads[u]]
            heads[u] += 1
            load[u] -= t_e[i]
            left[u] = heads[u] < len(queues[u])
            on_pim[i] = False
            consider(Partition(counts, expert_ids, on_pim.copy(), unit=unit, unit_of=unit_of))
    assert best is not None
    t, part = best
    part.info.update({"decided": False, "executed_s": t, "preloaded": (counts > 0) & ~part.on_pim,
                      "profile": tuple(dict.fromkeys(units))})
    return part
