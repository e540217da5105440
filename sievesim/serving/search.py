"""The bisection over the arrival rate behind "the largest rate that meets the SLOs", as a pure
function of the outcomes seen so far: :func:`next_probe` says which rate to serve next (or the
answer once the outcomes decide it). :func:`sievesim.serving.simulator.max_rate_under_slos` runs
the probes one after the other; :mod:`sievesim.serve_sweep` records each probe as a sweep point,
so that an interrupted search resumes from the probes already recorded: given the same outcomes
the same rates come next.
"""
from __future__ import annotations

import math
from typing import Any, Mapping

__all__ = ["next_probe"]


def next_probe(lo: float, hi: float, steps: int, outcomes: Mapping[float, bool]
               ) -> tuple[float | None, dict[str, Any] | None]:
    """``(rate, None)``: the rate [requests/s] to serve next, or ``(None, answer)`` once
    ``outcomes`` (rate -> whether it met the SLOs) decide the search between ``lo`` and ``hi`` in
    ``steps`` halvings.

    The probes: ``lo`` (not met: ``max_rate`` is ``None``, bracket ``[0, lo]``), then ``hi`` (met:
    ``max_rate = hi``, bracket ``[hi, inf]``), then the midpoint of the bracket, ``steps`` times,
    keeping the half whose lower end meets the SLOs (attainment is assumed to fall with the
    rate). ``answer``: ``max_rate`` (the highest rate seen to meet them) and ``bracket``."""
    met = outcomes.get(lo)
    if met is None:
        return lo, None
    if not met:
        return None, {"max_rate": None, "bracket": [0.0, lo]}
    met = outcomes.get(hi)
    if met is None:
        return hi, None
    if met:
        return None, {"max_rate": hi, "bracket": [hi, math.inf]}
    a, b = lo, hi
    for _ in range(steps):
        mid = 0.5 * (a + b)
        met = outcomes.get(mid)
        if met is None:
            return mid, None
        a, b = (mid, b) if met else (a, mid)
    return None, {"max_rate": a, "bracket": [a, b]}
