"""How much PIM programs and the GPU's own HBM traffic slow each other down, from the engine.

With dual row buffers a PIM program and normal reads do not close each other's rows, but they
still share each pseudo-channel's command bus and data bus (GWRITE and RDRES move data; every
command takes a command slot) and the refresh schedule. :func:`measure_contention` runs one
expert-sized GEMV program on one pseudo-channel alone, a saturating stream of GPU reads alone,
and both together, and returns the two slowdown factors that the system's dependency graph
applies while a PIM node and an HBM node of the same GPU overlap.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ..dram.traces import RequestTrace
from .engine import run_programs
from .program import gemv_program, plan_gemv

__all__ = ["ContentionFactors", "measure_contention"]


@dataclass(frozen=True)
class ContentionFactors:
    """Slowdowns while PIM and GPU traffic overlap on one GPU's stacks (>= 1 each), and the cycles
    they come from (memory clock)."""

    pim_slowdown: float
    hbm_slowdown: float
    pim_alone_cycles: int
    pim_shared_cycles: int
    reads_alone_cycles: int
    reads_shared_cycles: int
    reads: int


@functools.lru_cache(maxsize=64)
def measure_contention(device, d_in: int, d_out: int, tokens: int = 1) -> ContentionFactors:
    """Engine-measured slowdowns of a ``d_in x d_out`` GEMV (``tokens`` vectors) on one
    pseudo-channel beside a stream of sequential 32-byte reads that keeps that pseudo-channel's
    bus saturated for about twice the program's length (``device``: a :class:`PIMDevice`).

    ``pim_slowdown = shared / alone`` cycles of the program. The reads outlast the program, so
    they are slowed only while it runs: ``hbm_slowdown = overlap / (overlap - lost)`` with
    ``lost`` the cycles the stream took longer and ``overlap`` the program's shared duration.
    """
    cfg = device.config
    pcs = device.unit_pcs("gpu")
    plan = plan_gemv(int(d_in), int(d_out), int(tokens), pcs, device.geometry, dict(cfg.timings))
    program = gemv_program(plan, device.geometry)
    alone = run_programs(cfg, [program])
    # reads per cycle the pseudo-channel can serve: one burst per nBL cycles
    n_bl = max(1, int(cfg.timings.get("nBL", 2)))
    reads = max(64, 2 * alone.cycles // n_bl)
    address = np.arange(reads, dtype=np.int64) * int(cfg.tx_bytes)
    stream = RequestTrace.from_arrays(np.zeros(reads, dtype=np.int64), address, np.zeros(reads, dtype=bool),
                                      source="contention reads")
    idle_program = (program[0][-1:], program[1][-1:])   # the final PREAB only: an idle PIM side
    reads_alone = run_programs(cfg, [idle_program], background=stream)
    both = run_programs(cfg, [program], background=stream)
    pim_shared = both.per_unit_busy_cycles[0] if both.per_unit_busy_cycles else both.cycles
    lost = max(0, both.normal_cycles - reads_alone.normal_cycles)
    overlap = max(1, min(pim_shared, both.normal_cycles))
    hbm = overlap / max(1, overlap - lost)
    return ContentionFactors(pim_slowdown=max(1.0, pim_shared / max(1, alone.cycles)), hbm_slowdown=max(1.0, hbm),
                             pim_alone_cycles=int(alone.cycles), pim_shared_cycles=int(pim_shared),
                             reads_alone_cycles=int(reads_alone.normal_cycles),
                             reads_shared_cycles=int(both.normal_cycles), reads=int(reads))
