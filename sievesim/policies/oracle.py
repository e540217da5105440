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
    description = "best prefix cut of the sorted list (optionally verified on the engine)"
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

    def _decide(self, counts: np.ndarray, ctx: CostContext, expert_ids: np.ndarray) -> Partition:
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
