"""Engine-priced PIM work: GEMVs, SwiGLU experts, decode attention and linear-attention state.

Everything here is cached by its inputs (identical programs are simulated once). Times are in
seconds unless a name says cycles or ns.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..dram.config import get_config
from ..errors import field_error
from .engine import PIMResult, geometry_for, pim_config, run_programs
from .program import PIMGeometry, gemv_program, plan_gemv

__all__ = ["PIMDevice", "EnginePimCost", "UNITS"]

UNITS = ("pseudo_channel", "channel", "stack")


@dataclass(frozen=True)
class PIMDevice:
    """The PIM of one GPU, as the engine sees it (all fields hashable, for caching).

    ``stacks``: HBM-PIM stacks per GPU; ``dram_config``: engine configuration of one stack.
    """

    dram_config: str = "hbm3e-8000"
    stacks: int = 8
    banks_per_pu: int = 1
    macs_per_command: int = 16
    operand_bytes: int = 2
    global_buffer_bytes: int = 2048
    accumulators: int = 8
    dual_row_buffer: bool = True
    activation_on_pim: bool = False

    @classmethod
    def from_hardware(cls, hw) -> "PIMDevice":
        """From a :class:`sievesim.hardware.HardwareSpec` (duck-typed: no import of that layer)."""
        p = hw.pim
        return cls(dram_config=p.dram_config, stacks=int(hw.gpu.num_hbm_stacks), banks_per_pu=int(p.banks_per_pu),
                   macs_per_command=int(p.macs_per_command), operand_bytes=int(round(p.operand_bytes)),
                   global_buffer_bytes=int(p.global_buffer_bytes), dual_row_buffer=bool(p.dual_row_buffer),
                   activation_on_pim=bool(p.activation_on_pim))

    @functools.cached_property
    def config(self):
        return pim_config(self.dram_config, 1, dual_row_buffer=self.dual_row_buffer)

    @functools.cached_property
    def geometry(self) -> PIMGeometry:
        return geometry_for(self.config, banks_per_pu=self.banks_per_pu, macs_per_command=self.macs_per_command,
                            operand_bytes=self.operand_bytes, global_buffer_bytes=self.global_buffer_bytes,
                            accumulators=self.accumulators)

    @property
    def pcs_per_stack(self) -> int:
        stack = get_config(self.dram_config)
        return int(stack.org["channel"] * stack.org["pseudochannel"])

    def unit_pcs(self, unit: str) -> int:
        """Pseudo-channels in one placement unit (tensor parallelism inside it)."""
        if unit == "pseudo_channel":
            return 1
        if unit == "channel":
            return int(get_config(self.dram_config).org["pseudochannel"])
        if unit == "stack":
            return self.pcs_per_stack
        if unit == "gpu":
            return self.pcs_per_stack * self.stacks
        raise field_error("unit", unit, f"one of {list(UNITS)} (or 'gpu' for tensor parallelism)")

    @property
    def tck_s(self) -> float:
        return self.config.timings["tCK_ps"] * 1e-12

    def peak_flops(self) -> float:
        """All-bank MAC peak of the whole GPU's PIM [FLOP/s]: 2 x MACs x PUs x PCs per nCCDAB."""
        t = self.config.timings
        per_pc = self.geometry.pus * self.macs_per_command * 2 / (t["nCCDAB"] * self.tck_s)
        return per_pc * self.pcs_per_stack * self.stacks


@functools.lru_cache(maxsize=4096)
def _gemv(device: PIMDevice, d_in: int, d_out: int, tokens: int, pcs: int) -> PIMResult:
    cfg = device.config
    plan = plan_gemv(d_in, d_out, tokens, pcs, device.geometry, dict(cfg.timings))
    return run_programs(cfg, [gemv_program(plan, device.geometry)])


def gemv(device: PIMDevice, d_in: int, d_out: int, tokens: int, pcs: int) -> PIMResult:
    """One GEMV (``tokens`` input vectors) tensor-parallel over ``pcs`` pseudo-channels."""
    return _gemv(device, int(d_in), int(d_out), int(tokens), int(pcs))


class EnginePimCost:
    """:class:`sievesim.costs.PimCostModel` backed by the engine (cycle-accurate, cached).

    ``hidden``/``intermediate``: expert GEMV sizes (SwiGLU: gate+up ``hidden -> 2 x intermediate``,
    then ``intermediate -> hidden``). ``activation_s``: time between the gate/up results leaving the
    PIM and the down input arriving (the GPU's activation), added once per expert.
    """

    def __init__(self, device: PIMDevice, hidden: int, intermediate: int, *, activation_s: float = 0.0,
                 attention_heads: int = 0, kv_heads: int = 0, head_dim: int = 0, window: int | None = None):
        self.device = device
        self.hidden, self.intermediate = int(hidden), int(intermediate)
        self.activation_s = activation_s
        self.attention_heads, self.kv_heads, self.head_dim, self.window = attention_heads, kv_heads, head_dim, window

    @classmethod
    def for_model(cls, model, hw, **kw) -> "EnginePimCost":
        return cls(PIMDevice.from_hardware(hw), model.hidden_size, model.moe_intermediate_size,
                   attention_heads=model.num_attention_heads, kv_heads=model.num_kv_heads,
                   head_dim=model.head_dim, window=model.sliding_window, **kw)

    def expert_result(self, tokens: int, pcs: int) -> tuple[PIMResult, PIMResult]:
        gate_up = gemv(self.device, self.hidden, 2 * self.intermediate, tokens, pcs)
        down = gemv(self.device, self.intermediate, self.hidden, tokens, pcs)
        return gate_up, down

    def _expert_s(self, tokens: int, pcs: int) -> float:
        if tokens <= 0:
            return 0.0
        gu, dn = self.expert_result(tokens, pcs)
        return (gu.cycles + dn.cycles) * self.device.tck_s + self.activation_s

    def expert_time_s(self, tokens: int) -> float:
        return self._expert_s(tokens, self.device.unit_pcs("gpu"))

    def expert_time_on_unit_s(self, tokens: int, unit: str) -> float:
        return self._expert_s(tokens, self.device.unit_pcs(unit))

    def attention_time_s(self, batch_context_lens: Sequence[int]) -> float:
        """Decode attention of these requests: each request's KV cache sits in one pseudo-channel;
        requests are spread over the GPU's pseudo-channels (longest first onto the least loaded);
        per request and KV head: a score GEMV (head_dim -> context) and a value GEMV
        (context -> head_dim) per query head of the group. The layer time is the busiest
        pseudo-channel's."""
        lens = [int(x) for x in batch_context_lens]
        if not lens or self.head_dim <= 0:
            return 0.0
        if self.window:
            lens = [min(x, self.window) for x in lens]
        pcs = self.device.unit_pcs("gpu")
        q_per_kv = max(1, self.attention_heads // max(1, self.kv_heads))
        per_req = {}
        for L in set(lens):
            if L <= 0:
                per_req[L] = 0.0
                continue
            score = gemv(self.device, self.head_dim, L, q_per_kv, 1)
            value = gemv(self.device, L, self.head_dim, q_per_kv, 1)
            per_req[L] = (score.cycles + value.cycles) * self.kv_heads * self.device.tck_s
        load = np.zeros(min(pcs, len(lens)))
        for L in sorted(lens, reverse=True):
            load[np.argmin(load)] += per_req[L]
        return float(load.max())

    def roofline_expert_s(self, tokens: int) -> float:
        """Operations / PIM peak for one expert (2 FLOP per weight per token)."""
        params = 3 * self.hidden * self.intermediate
        return 2.0 * params * tokens / self.device.peak_flops()
