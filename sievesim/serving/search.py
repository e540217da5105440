"""The bisection over the arrival rate behind "the largest rate that meets the SLOs", as a pure
function of the outcomes seen so far: :func:`next_probe` says which rate to serve next (or the
answer once the outcomes decide it). :func:`sievesim.serving.simulator.max_rate_under_slos` runs
the probes one after the other; :mod:`sievesim.serve_sweep` records each probe as a sweep point,
so that an interrupted search resumes from the probes already recorded: given the same outcomes
the same rates come next.
"""
from __future__ import annotations

from typing import Any, Mapping

__all__ = ["describe_answer", "next_probe"]


def next_probe(lo: float, hi: float, steps: int, outcomes: Mapping[float, bool]
               ) -> tuple[float | None, dict[str, Any] | None]:
    """``(rate, None)``: the rate [requests/s] to serve next, or ``(None, answer)`` once
    ``outcomes`` (rate -> whether it met the SLOs) decide the search between ``lo`` and ``hi`` in
    ``steps`` halvings.

    The probes: ``lo`` (not met: ``max_rate`` is ``None``, bracket ``[0, lo]``, ``answer = "below"``),
    then ``hi`` (met: ``max_rate = hi``, bracket ``[hi, None]`` (open above: valid JSON, no
    ``Infinity``), ``answer = "at_least"``), then the midpoint of the bracket, ``steps`` times,
    keeping the half whose lower end meets the SLOs (attainment is assumed to fall with the
    rate; ``answer = "between"``). The answer: ``max_rate`` (the highest rate seen to meet them),
    ``bracket``, ``answer``."""
    met = outcomes.get(lo)
    if met is None:
        return lo, None
    if not met:
        return None, {"max_rate": None, "bracket": [0.0, lo], "answer": "below"}
    met = outcomes.get(hi)
    if met is None:
        return hi, None
    if met:
        return None, {"max_rate": hi, "bracket": [hi, None], "answer": "at_least"}
    a, b = lo, hi
    for _ in range(steps):
        mid = 0.5 * (a + b)
        met = outcomes.get(mid)
        if met is None:
            return mid, None
        a, b = (mid, b) if met else (a, mid)
    return None, {"max_rate": a, "bracket": [a, b], "answer": "between"}


def describe_answer(found: Mapping[str, Any]) -> str:
    """The search's answer in words: "at least HI" (every probe met the SLOs: raise HI), "below
    LO" (LO already misses them: lower LO), or the rate found with its bracket."""
    lo, hi = found["bracket"]
    probes = len(found.get("tried", ()))
    if found.get("answer") == "at_least" or hi is None:
        return (f"at least {lo:.4g} requests/s (the top of the bracket met the SLOs: raise HI to find the limit; "
                f"{probes} rates tried)")
    if found["max_rate"] is None:
        return f"below {hi:.4g} requests/s (the bottom of the bracket already misses the SLOs: lower LO; {probes} rates tried)"
    return f"{found['max_rate']:.4g} requests/s (bracket {lo:.4g} .. {hi:.4g}; {probes} rates tried)"
