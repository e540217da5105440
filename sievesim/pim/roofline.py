"""How far a PIM roofline is from the engine's expert time, for each definition of the PIM peak.

The Sieve paper reports that a roofline overestimates expert time on PIM 1.8-4.2x. Whether a
roofline over- or underestimates depends on the peak it divides by: the engine's own all-bank MAC
issue rate (PUs x MACs x 2 FLOP per nCCDAB; a lower bound on the engine's time by construction),
or a multiple of the external bandwidth such as Samsung HBM-PIM's "4x" (the figure behind the
paper's roofline). :func:`roofline_overestimate` gives both, per token count.
"""
from __future__ import annotations

import dataclasses
from typing import Sequence

from .expert import EnginePimCost

__all__ = ["roofline_overestimate"]


def roofline_overestimate(model, hw, tokens: Sequence[int] = (1, 2, 4, 8, 16, 32), *,
                          external_ratio: float = 4.0, device_changes: dict | None = None) -> list[dict]:
    """Per token count N, one expert of ``model`` tensor-parallel over all PIM of one GPU of ``hw``.

    Keys (times in us): ``engine_us`` (the whole round trip, :meth:`EnginePimCost.expert_time_s`),
    ``pim_programs_us`` (its two PIM programs alone: gate/up and down), ``roofline_mac_peak_us``
    (2 x 3hI x N FLOP over the engine's MAC-issue peak), ``roofline_external_us`` (over
    ``external_ratio`` x the GPU's external HBM bandwidth, 1 FLOP per weight byte for bf16:
    ``external_ratio`` = 4 is Samsung HBM-PIM's figure), and the ratios roofline / engine for each
    peak (``mac_peak_over_engine``, ``external_over_engine``; above 1 the roofline overestimates)
    and the same against the PIM programs alone (``..._over_programs``). ``device_changes``:
    :class:`~sievesim.pim.expert.PIMDevice` fields to change (``{"refresh": "aligned"}``, ...).
    """
    cost = EnginePimCost.for_model(model, hw)
    if device_changes:
        cost.device = dataclasses.replace(cost.device, **device_changes)
    flops_per_token = 2.0 * 3 * cost.hidden * cost.intermediate
    mac_peak = cost.device.peak_flops()
    # bf16: a PU does one MAC (2 FLOP) per 2-byte weight it reads, so FLOP/s = internal bytes/s
    external_peak = external_ratio * hw.gpu.hbm_bandwidth_bytes_per_s * 2.0 / cost.device.operand_bytes
    rows = []
    for n in tokens:
        n = int(n)
        stages = cost.expert_stages_s(n)
        engine = sum(stages.values())
        programs = stages["gate_up"] + stages["down"]
        roof_mac = flops_per_token * n / mac_peak
        roof_ext = flops_per_token * n / external_peak
        rows.append({
            "model": getattr(model, "name", str(model)), "hardware": getattr(hw, "name", str(hw)), "tokens": n,
            "engine_us": engine * 1e6, "pim_programs_us": programs * 1e6,
            "roofline_mac_peak_us": roof_mac * 1e6, "roofline_external_us": roof_ext * 1e6,
            "mac_peak_over_engine": roof_mac / engine, "external_over_engine": roof_ext / engine,
            "mac_peak_over_programs": roof_mac / programs, "external_over_programs": roof_ext / programs,
            "mac_peak_tflops": mac_peak / 1e12, "external_peak_tflops": external_peak / 1e12,
        })
    return rows
