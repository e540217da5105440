"""Engine-priced PIM work of a model: SwiGLU experts (this module), the device and its GEMVs
(:mod:`sievesim.pim.device`), decode attention (:mod:`sievesim.pim.attention`).

Everything is cached by its inputs (identical programs are simulated once). Times are in
seconds unless a name says cycles or ns.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import heapq
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .._units import BASE_UNITS, split_unit
from ..dram.config import BUILTIN_CONFIGS, DRAMConfig, get_config
from ..errors import field_error
from .engine import PIMResult, even_phases, geometry_for, pim_config, run_phases, run_programs, stratified_phases
from .program import (OP_MACAB, PIMGeometry, _grouped_estimate, gemv_program, grouped_gemv_program, plan_gemv,
                      plan_grouped_gemv)
from .attention import ATTENTION_BALANCES, ATTENTION_MAPPINGS, AttentionLayer, _cost_line  # noqa: F401
from .device import (ACTIVATION_FLOPS_PER_ELEMENT, REFRESH_MODES, UNITS, PIMDevice, _gemv, _sequence,  # noqa: F401
                     gemv, gemv_sequence)

__all__ = ["PIMDevice", "EnginePimCost", "AttentionLayer", "ATTENTION_MAPPINGS", "ATTENTION_BALANCES", "UNITS",
           "REFRESH_MODES", "gemv", "gemv_sequence"]


class EnginePimCost:
    """:class:`sievesim.costs.PimCostModel` backed by the engine (cycle-accurate, cached).

    ``hidden``/``intermediate``: expert GEMV sizes (SwiGLU: gate+up ``hidden -> 2 x intermediate``,
    then ``intermediate -> hidden``). An expert on PIM runs as (:meth:`expert_stages_s`): the
    gate/up program (token inputs written, GEMVs, results read back to the GPU), the GPU's step
    (adding up the partial sums of a GEMV split over input segments, the activation; roofline),
    one GPU-PIM hand-over (``device.sync_latency_s``), the down program (intermediate written,
    GEMV, results back), and the GPU's sum of the down partial sums. ``activation_s``: extra GPU
    time per hand-over (default 0). With ``activation_on_pim`` the intermediate never leaves the
    PIM: one program, no GPU step.
    ``attention``: the attention of the layer this object prices, an :class:`AttentionLayer`.
    """

    def __init__(self, device: PIMDevice, hidden: int, intermediate: int, *, activation_s: float = 0.0,
                 attention: "AttentionLayer | None" = None, gated: bool = True):
        self.device = device
        self.hidden, self.intermediate = int(hidden), int(intermediate)
        #: Output rows of the first GEMV: gate and up (``2 x intermediate``), or up alone for an
        #: ungated expert (``gated`` false: Nemotron-H's squared-ReLU experts).
        self.up_width = (2 if gated else 1) * self.intermediate
        self.activation_s = activation_s
        self.attention = attention

    @classmethod
    def for_model(cls, model, hw, layer: int | None = None, **kw) -> "EnginePimCost":
        """Experts of ``model``; attention of ``layer`` (default: the first MoE layer)."""
        if layer is None:
            layer = model.moe_layer_indices[0] if model.moe_layer_indices else 0
        device = PIMDevice.from_hardware(hw)
        return cls(device, model.hidden_size, model.moe_intermediate_size, gated=getattr(model, "mlp_gated", True),
                   attention=AttentionLayer.from_model(model, layer, multi_vector=device.multi_vector_pu), **kw)

    def expert_result(self, tokens: int, pcs: int) -> tuple[PIMResult, PIMResult]:
        gate_up = gemv(self.device, self.hidden, self.up_width, tokens, pcs)
        down = gemv(self.device, self.intermediate, self.hidden, tokens, pcs)
        return gate_up, down

    def _expert_gemvs(self, tokens: int) -> list[tuple]:
        """gate+up then down; with the activation on the PIM the intermediate never leaves it."""
        on_pim = self.device.activation_on_pim
        return [(self.hidden, self.up_width, tokens, True, not on_pim),
                (self.intermediate, self.hidden, tokens, not on_pim, True)]

    def _gpu_between_s(self, token_counts: Sequence[int], pcs: int) -> float:
        """One GPU step for these experts' gate/up results: partial sums added, SwiGLU applied,
        the bf16 intermediate produced (bytes count only with ``gpu_step_via_hbm``) [s]."""
        h, i2 = self.hidden, self.up_width
        flops = bytes_moved = 0.0
        for n in token_counts:
            parts = self.device.pcs_in(h, i2, n, pcs)
            flops += (parts - 1) * i2 * n + ACTIVATION_FLOPS_PER_ELEMENT * self.intermediate * n
            bytes_moved += parts * i2 * n * 4 + self.intermediate * n * 2
        return self.device.gpu_step_s(flops, bytes_moved) + self.activation_s

    def _gpu_after_s(self, token_counts: Sequence[int], pcs: int) -> float:
        """The GPU's sum of the down GEMVs' partial sums (none when not split over inputs) [s]."""
        flops = bytes_moved = 0.0
        for n in token_counts:
            parts = self.device.pcs_in(self.intermediate, self.hidden, n, pcs)
            if parts > 1:
                flops += (parts - 1) * self.hidden * n
                bytes_moved += parts * self.hidden * n * 4 + self.hidden * n * 2
        return self.device.gpu_step_s(flops, bytes_moved) if flops else 0.0

    def expert_stages_s(self, tokens: int, unit: str = "gpu") -> dict[str, float]:
        """The stages of one expert with ``tokens`` tokens on ``unit`` [s]: ``gate_up`` (PIM program
        until its last result is on the GPU), ``gpu`` (reduction + activation), ``sync`` (one
        hand-over), ``down`` (PIM), ``reduce`` (GPU sum of the down partial sums). With the
        activation on the PIM, ``gate_up`` holds the whole program and the GPU stages are 0.
        The stages add up to :meth:`expert_time_on_unit_s` with ``hand_over=True``; a layer's PIM
        experts share one GPU step and one hand-over (:meth:`experts_time_s`)."""
        stages = dict(gate_up=0.0, gpu=0.0, sync=0.0, down=0.0, reduce=0.0)
        if tokens <= 0:
            return stages
        dev, pcs = self.device, self.device.unit_pcs(unit)
        if dev.activation_on_pim:
            stages["gate_up"] = dev.program_cycles(gemv_sequence(dev, self._expert_gemvs(tokens), pcs), pcs) * dev.tck_s
            return stages
        gu, dn = self.expert_result(tokens, pcs)
        stages.update(gate_up=dev.program_cycles(gu, pcs) * dev.tck_s, gpu=self._gpu_between_s([tokens], pcs),
                      sync=dev.sync_latency_s, down=dev.program_cycles(dn, pcs) * dev.tck_s,
                      reduce=self._gpu_after_s([tokens], pcs))
        return stages

    def _expert_s(self, tokens: int, unit: str, hand_over: bool) -> float:
        stages = self.expert_stages_s(tokens, unit)
        return sum(stages.values()) - (0.0 if hand_over else stages["sync"])

    def expert_time_s(self, tokens: int, *, hand_over: bool = False) -> float:
        """One expert with ``tokens`` tokens, tensor-parallel over all the GPU's PIM [s]: its two
        PIM programs and its GPU step (:meth:`expert_stages_s`). The GPU-PIM hand-over between
        gate/up and down is paid once per layer, not per expert, so it is left out unless
        ``hand_over`` (an expert alone); a layer adds ``device.sync_latency_s`` once."""
        return self._expert_s(tokens, "gpu", hand_over)

    def expert_time_on_unit_s(self, tokens: int, unit: str, *, hand_over: bool = False) -> float:
        """One expert with ``tokens`` tokens inside one placement ``unit`` [s] (as
        :meth:`expert_time_s`)."""
        self.device.unit_pcs(unit)          # checks the name
        return self._expert_s(tokens, unit, hand_over)

    def experts_time_s(self, token_counts: Sequence[int], unit: str = "gpu") -> float:
        """All these experts (tokens each) on PIM as a layer runs them [s]: every gate/up GEMV as
        one program, one GPU step for all of them, one hand-over, every down GEMV as one program,
        the GPU's sum of the down partial sums (with the activation on the PIM: one program of
        gate/up and down per expert). Refresh, row switches and turnarounds inside a program are
        simulated, not added up."""
        counts = sorted((int(n) for n in token_counts if n > 0), reverse=True)
        if not counts:
            return 0.0
        dev, pcs = self.device, self.device.unit_pcs(unit)
        if dev.activation_on_pim:
            seq = [g for n in counts for g in self._expert_gemvs(n)]
            return dev.program_cycles(gemv_sequence(dev, seq, pcs), pcs) * dev.tck_s
        gate_up = gemv_sequence(dev, [(self.hidden, self.up_width, n) for n in counts], pcs)
        down = gemv_sequence(dev, [(self.intermediate, self.hidden, n) for n in counts], pcs)
        return ((dev.program_cycles(gate_up, pcs) + dev.program_cycles(down, pcs)) * dev.tck_s
                + self._gpu_between_s(counts, pcs) + dev.sync_latency_s + self._gpu_after_s(counts, pcs))

    def partition_pim_time_s(self, partition, batch_context_lens: Sequence[int] = ()) -> float:
        """T_PIM of a policy's partition on the engine: its PIM experts as one program, plus the
        layer's attention [s]. Usable as ``Oracle(verify=...)`` (duck-typed partition: ``counts``,
        ``on_pim``)."""
        counts = [int(c) for c, p in zip(partition.counts, partition.on_pim) if p and c > 0]
        return self.experts_time_s(counts) + self.attention_time_s(batch_context_lens)

    def attention_time_s(self, batch_context_lens: Sequence[int]) -> float:
        """Decode attention of these requests at this layer (see :class:`AttentionLayer`)."""
        if self.attention is None:
            return 0.0
        return self.attention.time_s(self.device, batch_context_lens)

    def roofline_expert_s(self, tokens: int) -> float:
        """Operations / PIM peak for one expert (2 FLOP per weight per token)."""
        params = self.hidden * (self.up_width + self.intermediate)
        return 2.0 * params * tokens / self.device.peak_flops()

#: How the query heads of a GQA group meet their KV head's cache (see :class:`AttentionLayer`).
