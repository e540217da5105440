"""Engine-priced PIM work: GEMVs, SwiGLU experts, decode attention and linear-attention state.

Everything here is cached by its inputs (identical programs are simulated once). Times are in
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

__all__ = ["PIMDevice", "EnginePimCost", "AttentionLayer", "ATTENTION_MAPPINGS", "ATTENTION_BALANCES", "UNITS", "REFRESH_MODES", "gemv",
           "gemv_sequence"]

UNITS = BASE_UNITS
#: Where a program starts in the refresh interval (see :class:`PIMDevice`).
REFRESH_MODES = ("mean", "staggered", "aligned")
#: GPU FLOPs per element of the SwiGLU activation (SiLU: exponential, add, divide; then x up) and
#: of a softmax (max, subtract, exponential, sum, divide).
ACTIVATION_FLOPS_PER_ELEMENT = 5
SOFTMAX_FLOPS_PER_ELEMENT = 5


@dataclass(frozen=True)
class PIMDevice:
    """The PIM of one GPU, as the engine sees it (all fields hashable, for caching).

    ``stacks``: HBM-PIM stacks per GPU; ``dram_config``: engine configuration of one stack.

    ``refresh``: where a program falls in the refresh interval (all-bank refresh every nREFI).
    ``"mean"`` (default): the expected duration over a uniform start, from ``refresh_phases``
    phases (:func:`sievesim.pim.engine.stratified_phases`: a quarter in the first tRFC after a
    refresh request, where that refresh still runs at the start, the rest over the remainder of
    nREFI, weighted by the parts' lengths); ``"staggered"``: refresh staggered evenly across the pseudo-channels,
    so a tensor-parallel program over P pseudo-channels takes its longest phase of
    ``min(P, refresh_phases)`` evenly spaced ones (one pseudo-channel: as ``"mean"``);
    ``"aligned"``: every program starts as a refresh interval begins (no refresh before nREFI:
    the optimistic timing of earlier versions).

    ``gpu_flops_per_s`` / ``gpu_bytes_per_s``: the GPU's reachable rates, for the roofline time of
    its steps between PIM GEMVs (partial-sum reduction, activation, softmax);
    ``sync_latency_s``: one hand-over between the GPU and the PIM [s] (see ``PIMSpec``);
    ``gpu_step_via_hbm``: the GPU step reads the PIM's results and writes its output through HBM
    (an upper bound) instead of on-chip memory (the paper's design, default).
    ``macab_interval_cycles``: cycles between all-bank MACs when a power budget slows them (0: the
    configuration's nCCDAB). ``multi_vector_pu``: tokens share opened rows (else one GEMV per token).
    ``vectors_per_mac``: input vectors one all-bank MAC multiplies each column with (1 on every
    preset; more is a what-if PU with that many times the multipliers, used where vectors share
    a matrix: the query heads of a GQA group in :class:`AttentionLayer`).

    A device reads its DRAM configuration once, when it is made; ``config_key`` (a digest of the
    configuration's contents) is part of its identity, so the cost caches (keyed by device) give a
    new time after a configuration file changes and the same time for the same contents.
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
    multi_vector_pu: bool = False
    refresh: str = "mean"
    refresh_phases: int = 8
    gpu_flops_per_s: float = 2.25e15
    gpu_bytes_per_s: float = 8.0e12
    sync_latency_s: float = 8.75e-7
    macab_interval_cycles: int = 0
    gpu_step_via_hbm: bool = False
    vectors_per_mac: int = 1
    config_key: str = dataclasses.field(init=False, default="")
    _base: DRAMConfig = dataclasses.field(init=False, compare=False, repr=False, default=None)

    def __post_init__(self) -> None:
        base = _load_config(self.dram_config)
        if not isinstance(self.macab_interval_cycles, int) or self.macab_interval_cycles < 0:
            raise field_error("macab_interval_cycles", self.macab_interval_cycles,
                              "cycles between all-bank MACs (0: the configuration's nCCDAB)")
        if self.macab_interval_cycles:          # a power-limited all-bank MAC rate
            base = base.replace(timings=dict(base.timings, nCCDAB=self.macab_interval_cycles))
        object.__setattr__(self, "_base", base)
        object.__setattr__(self, "config_key", hashlib.sha256(repr(base).encode()).hexdigest()[:16])
        for name in ("vectors_per_mac", "accumulators", "macs_per_command", "global_buffer_bytes"):
            v = getattr(self, name)
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
                raise field_error(name, v, "a positive integer")
        if self.refresh not in REFRESH_MODES:
            raise field_error("refresh", self.refresh, f"one of {list(REFRESH_MODES)}")
        if not isinstance(self.refresh_phases, int) or isinstance(self.refresh_phases, bool) \
                or self.refresh_phases < 1:
            raise field_error("refresh_phases", self.refresh_phases, "a positive integer")
        for name in ("gpu_flops_per_s", "gpu_bytes_per_s"):
            if not getattr(self, name) > 0:
                raise field_error(name, getattr(self, name), "a positive rate")
        if not 0 <= self.sync_latency_s < 1:
            raise field_error("sync_latency_s", self.sync_latency_s, "a latency in seconds, >= 0 and < 1")

    @classmethod
    def from_hardware(cls, hw) -> "PIMDevice":
        """From a :class:`sievesim.hardware.HardwareSpec` (duck-typed: no import of that layer)."""
        p = hw.pim
        src = f"hardware {getattr(hw, 'name', '?')!r}"
        if p is None:
            raise field_error("pim", None, "a [pim] section (this hardware has plain HBM)", source=src)
        if p.operand_bytes != int(p.operand_bytes):
            raise field_error("pim.operand_bytes", p.operand_bytes, "a whole number of bytes per weight "
                              "(1, 2 or 4) for the cycle-accurate engine; the roofline takes fractions", source=src)
        return cls(dram_config=p.dram_config, stacks=int(hw.gpu.num_hbm_stacks), banks_per_pu=int(p.banks_per_pu),
                   macs_per_command=int(p.macs_per_command), operand_bytes=int(round(p.operand_bytes)),
                   global_buffer_bytes=int(p.global_buffer_bytes), dual_row_buffer=bool(p.dual_row_buffer),
                   activation_on_pim=bool(p.activation_on_pim), multi_vector_pu=bool(p.multi_vector_pu),
                   gpu_flops_per_s=float(hw.gpu.effective_flops),
                   gpu_bytes_per_s=float(hw.gpu.effective_bandwidth_bytes_per_s),
                   sync_latency_s=float(getattr(p, "sync_latency_s", cls.sync_latency_s)),
                   macab_interval_cycles=int(getattr(p, "macab_interval_cycles", 0)))

    def gpu_step_s(self, flops: float, bytes_moved: float) -> float:
        """Roofline time of a GPU step between PIM GEMVs [s]: ``max(FLOPs / rate, bytes / rate)``,
        the bytes counted only with ``gpu_step_via_hbm`` (by default the PIM's results land in the
        GPU's on-chip memory and the step's output goes straight back to the PIM, as in the Sieve
        paper's Section 6, sub-step iii: no HBM traffic)."""
        return max(flops / self.gpu_flops_per_s,
                   bytes_moved / self.gpu_bytes_per_s if self.gpu_step_via_hbm else 0.0)

    def pcs_in(self, d_in: int, d_out: int, tokens: int, pcs: int) -> int:
        """Input segments of a GEMV's tiling: partial sums per output that the GPU adds up."""
        return _plan(self, int(d_in), int(d_out), int(tokens), int(pcs)).pcs_in

    @functools.cached_property
    def config(self) -> DRAMConfig:
        """One pseudo-channel of the stack's configuration (tensor-parallel programs are alike)."""
        return self._compiled_for(1)[0]

    def phases(self, pcs: int, duration: int | None = None) -> tuple[list[int], list[float]]:
        """Refresh phases [cycles after a refresh request] a program on ``pcs`` pseudo-channels
        (``duration`` cycles long without refresh) is simulated at, and their weights (empty:
        ``"aligned"``)."""
        if self.refresh == "aligned":
            return [], []
        if self.refresh == "staggered" and pcs > 1:
            count = min(pcs, self.refresh_phases)
            return even_phases(self.config, count), [1.0 / count] * count
        return stratified_phases(self.config, self.refresh_phases, duration)

    def run(self, program: tuple[np.ndarray, np.ndarray], pcs: int, *, log_commands: bool = False) -> PIMResult:
        """One pseudo-channel's program of a job spread over ``pcs`` pseudo-channels, at this
        device's refresh phases (one engine run; compiled configurations are reused).
        ``log_commands``: keep the command log of the run whose durations make the job's time
        (every phase copy; :func:`sievesim.pim.breakdown.program_breakdown` reads it)."""
        interval = int(self.config.timings["nREFI"])
        expected = self.refresh == "mean" or (self.refresh == "staggered" and pcs == 1)
        issue_bound = np.count_nonzero(program[0] == OP_MACAB) * int(self.config.timings["nCCDAB"])
        if expected and issue_bound > self.refresh_phases * interval:
            # long: it meets about T / nREFI refreshes at any phase; one mid-interval start is off
            # from the mean by less than one refresh (< 1 / refresh_phases of nREFI over T)
            cfg, spec = self._compiled_for(1)
            return run_phases(cfg, program, [interval // 2], compiled=spec, log_commands=log_commands)
        aligned = None
        if self.refresh != "staggered" or pcs == 1:      # where the expectation's phases go
            cfg, spec = self._compiled_for(1)
            aligned = run_programs(cfg, [program], compiled=spec, log_commands=log_commands and self.refresh == "aligned")
        if self.refresh == "aligned":
            return aligned
        phases, weights = self.phases(pcs, None if aligned is None else aligned.cycles)
        cfg, spec = self._compiled_for(len(phases))
        return run_phases(cfg, program, phases, weights=weights, compiled=spec, log_commands=log_commands)

    def _compiled_for(self, units: int) -> tuple[DRAMConfig, dict]:
        key = (self.config_key, self.dual_row_buffer, units)
        if key not in _COMPILED:
            cfg = pim_config(self._base, units, dual_row_buffer=self.dual_row_buffer)
            _COMPILED[key] = (cfg, cfg.compile())
        return _COMPILED[key]

    def program_cycles(self, result: PIMResult, pcs: int) -> float:
        """Duration [cycles] of a job on ``pcs`` pseudo-channels whose program ran as ``result``:
        the mean over refresh phases, their maximum (``"staggered"`` over several pseudo-channels),
        or the single aligned run."""
        if not result.phase_cycles:
            return float(result.cycles)
        if self.refresh == "staggered" and pcs > 1:
            return float(max(result.phase_cycles))
        return result.mean_phase_cycles

    @functools.cached_property
    def geometry(self) -> PIMGeometry:
        return geometry_for(self.config, banks_per_pu=self.banks_per_pu, macs_per_command=self.macs_per_command,
                            operand_bytes=self.operand_bytes, global_buffer_bytes=self.global_buffer_bytes,
                            accumulators=self.accumulators, multi_vector=self.multi_vector_pu,
                            vectors_per_mac=self.vectors_per_mac)

    @property
    def pcs_per_stack(self) -> int:
        return int(self._base.org["channel"] * self._base.org["pseudochannel"])

    def unit_pcs(self, unit: str) -> int:
        """Pseudo-channels in one placement unit (tensor parallelism inside it): ``"pseudo_channel"``,
        ``"channel"``, ``"stack"``, a group ``"BASE*S"`` of ``S`` of them (``S`` dividing the GPU's
        number of that base unit), or ``"gpu"`` (all of them)."""
        if unit == "gpu":
            return self.pcs_per_stack * self.stacks
        base, span = split_unit(unit)
        per_base = {"pseudo_channel": 1, "channel": int(self._base.org["pseudochannel"]),
                    "stack": self.pcs_per_stack}[base]
        if (self.pcs_per_stack * self.stacks) % (per_base * span):
            raise field_error("unit", unit, f"a group size that divides the GPU's "
                              f"{self.pcs_per_stack * self.stacks // per_base} {base}s")
        return per_base * span

    @property
    def tck_s(self) -> float:
        return self.config.timings["tCK_ps"] * 1e-12

    def peak_flops(self) -> float:
        """All-bank MAC peak of the whole GPU's PIM [FLOP/s]: 2 x MACs x PUs x PCs per nCCDAB."""
        t = self.config.timings
        per_pc = self.geometry.pus * self.macs_per_command * 2 / (t["nCCDAB"] * self.tck_s)
        return per_pc * self.pcs_per_stack * self.stacks


#: (config_key, dual_row_buffer, units) -> a PIM configuration with ``units`` pseudo-channels and
#: its compiled form (milliseconds to build: shared by every device of the same contents).
_COMPILED: dict[tuple[str, bool, int], tuple[DRAMConfig, dict]] = {}


@functools.lru_cache(maxsize=16)
def _builtin_config(name: str) -> DRAMConfig:
    return get_config(name)


def _load_config(name_or_path: str) -> DRAMConfig:
    """A built-in configuration (built once) or a file, read now (its current contents)."""
    if not isinstance(name_or_path, str):
        raise field_error("dram_config", name_or_path, "a configuration name or a file path")
    return _builtin_config(name_or_path) if name_or_path in BUILTIN_CONFIGS else get_config(name_or_path)


@functools.lru_cache(maxsize=8192)
def _plan(device: PIMDevice, d_in: int, d_out: int, tokens: int, pcs: int):
    return plan_gemv(d_in, d_out, tokens, pcs, device.geometry, dict(device.config.timings))


@functools.lru_cache(maxsize=8192)
def _program(device: PIMDevice, d_in: int, d_out: int, tokens: int, pcs: int, write_inputs: bool = True,
             read_results: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """One GEMV's program from row 0 (read-only arrays: shared by every sequence that holds it)."""
    ops, rc = gemv_program(_plan(device, d_in, d_out, tokens, pcs), device.geometry, write_inputs=write_inputs,
                           read_results=read_results)
    ops.flags.writeable = rc.flags.writeable = False
    return ops, rc


@functools.lru_cache(maxsize=4096)
def _gemv(device: PIMDevice, d_in: int, d_out: int, tokens: int, pcs: int) -> PIMResult:
    return device.run(_program(device, d_in, d_out, tokens, pcs), pcs)


def gemv(device: PIMDevice, d_in: int, d_out: int, tokens: int, pcs: int) -> PIMResult:
    """One GEMV (``tokens`` input vectors) tensor-parallel over ``pcs`` pseudo-channels, at the
    device's refresh phases (``device.program_cycles(result, pcs)`` is its duration)."""
    return _gemv(device, int(d_in), int(d_out), int(tokens), int(pcs))


def _rows_used(rowcol) -> int:
    return int(rowcol[:, 0].max()) + 1 if len(rowcol) else 0


def _concat(programs: Sequence[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Programs back to back, each matrix in rows of its own, one PREAB at the very end."""
    ops, rcs, base = [], [], 0
    for o, rc in programs:
        rc = rc.copy()
        rc[o == OP_MACAB, 0] += base                         # each weight matrix in rows of its own
        ops.append(o[:-1])          # one PREAB at the very end
        rcs.append(rc[:-1])
        base = max(base, _rows_used(rc))
    ops.append(o[-1:])
    rcs.append(rc[-1:])
    return np.concatenate(ops), np.concatenate(rcs)


def _sequence_program(device: PIMDevice, gemvs: tuple[tuple[int, int, int, bool, bool], ...],
                      pcs: int) -> tuple[np.ndarray, np.ndarray]:
    return _concat([_program(device, d_in, d_out, tokens, pcs, w, r) for d_in, d_out, tokens, w, r in gemvs])


@functools.lru_cache(maxsize=1024)
def _sequence(device: PIMDevice, gemvs: tuple[tuple[int, int, int, bool, bool], ...], pcs: int) -> PIMResult:
    return device.run(_sequence_program(device, gemvs, pcs), pcs)


def gemv_sequence(device: PIMDevice, gemvs: Sequence[tuple], pcs: int) -> PIMResult:
    """GEMVs ``(d_in, d_out, tokens[, write_inputs, read_results])`` back to back in one program on
    ``pcs`` pseudo-channels: refresh, row switches and bus turnarounds between them are simulated,
    not added up."""
    if not gemvs:
        raise field_error("gemvs", list(gemvs), "at least one (d_in, d_out, tokens)")
    return _sequence(device, _norm(gemvs), int(pcs))


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
                 attention: "AttentionLayer | None" = None):
        self.device = device
        self.hidden, self.intermediate = int(hidden), int(intermediate)
        self.activation_s = activation_s
        self.attention = attention

    @classmethod
    def for_model(cls, model, hw, layer: int | None = None, **kw) -> "EnginePimCost":
        """Experts of ``model``; attention of ``layer`` (default: the first MoE layer)."""
        if layer is None:
            layer = model.moe_layer_indices[0] if model.moe_layer_indices else 0
        device = PIMDevice.from_hardware(hw)
        return cls(device, model.hidden_size, model.moe_intermediate_size,
                   attention=AttentionLayer.from_model(model, layer, multi_vector=device.multi_vector_pu), **kw)

    def expert_result(self, tokens: int, pcs: int) -> tuple[PIMResult, PIMResult]:
        gate_up = gemv(self.device, self.hidden, 2 * self.intermediate, tokens, pcs)
        down = gemv(self.device, self.intermediate, self.hidden, tokens, pcs)
        return gate_up, down

    def _expert_gemvs(self, tokens: int) -> list[tuple]:
        """gate+up then down; with the activation on the PIM the intermediate never leaves it."""
        on_pim = self.device.activation_on_pim
        return [(self.hidden, 2 * self.intermediate, tokens, True, not on_pim),
                (self.intermediate, self.hidden, tokens, not on_pim, True)]

    def _gpu_between_s(self, token_counts: Sequence[int], pcs: int) -> float:
        """One GPU step for these experts' gate/up results: partial sums added, SwiGLU applied,
        the bf16 intermediate produced (bytes count only with ``gpu_step_via_hbm``) [s]."""
        h, i2 = self.hidden, 2 * self.intermediate
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
        gate_up = gemv_sequence(dev, [(self.hidden, 2 * self.intermediate, n) for n in counts], pcs)
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
        params = 3 * self.hidden * self.intermediate
        return 2.0 * params * tokens / self.device.peak_flops()

#: How the query heads of a GQA group meet their KV head's cache (see :class:`AttentionLayer`).
ATTENTION_MAPPINGS = ("grouped", "per_head")
#: How the units of work are spread over the pseudo-channels (see :class:`AttentionLayer`).
ATTENTION_BALANCES = ("tokens", "units")


def _lpt(pieces: Sequence[int], pcs: int, cost) -> list[list[int]]:
    """Pieces longest first onto the pseudo-channel of least estimated cost."""
    heap = [(0.0, i) for i in range(min(pcs, len(pieces)))]
    members: list[list[int]] = [[] for _ in heap]
    for L in sorted(pieces, reverse=True):
        load, i = heapq.heappop(heap)
        members[i].append(L)
        heapq.heappush(heap, (load + cost(L), i))
    return members


def _cut(units: Sequence[int], size: int) -> list[int]:
    """Every unit in equal pieces of at most ``size`` tokens."""
    out: list[int] = []
    for L in units:
        n = max(1, -(-L // size))
        base, extra = divmod(L, n)
        out += [base + 1] * extra + [base] * (n - extra)
    return out


def _fill(units: Sequence[int], pcs: int) -> list[list[int]]:
    """The units' tokens in ``pcs`` equal shares, units longest first, a unit cut where a share ends."""
    share = max(1, -(-sum(units) // pcs))
    members: list[list[int]] = []
    cur: list[int] = []
    load = 0
    for L in sorted(units, reverse=True):
        rem = L
        while rem > 0:
            take = min(rem, share - load)
            cur.append(take)
            load += take
            rem -= take
            if load == share:
                members.append(cur)
                cur, load = [], 0
    if cur:
        members.append(cur)
    return members


def _balanced_busiest(units: Sequence[int], pcs: int, cost) -> list[int]:
    """The pieces on the busiest pseudo-channel of the best of a few placements, judged by the
    estimated cost of each pseudo-channel's pieces (``cost(L)``: cycles of a piece of L tokens):
    whole units onto the least loaded (the ``"units"`` placement), units cut into pieces of at
    most a share / k (k = 1, 2, 4; a share is the total tokens / pseudo-channels) onto the least
    loaded, and the tokens filled into equal shares (:func:`_fill`)."""
    if not units:
        return []
    total = sum(units)
    if total == 0:
        return [0]
    share = max(1, -(-total // pcs))
    whole = units if len(units) >= pcs else [math.ceil(L / (pcs // len(units))) for L in units
                                            for _ in range(pcs // len(units))]
    candidates = [_lpt(whole, pcs, cost)] + [_lpt(_cut(units, max(1, share // k)), pcs, cost) for k in (1, 2, 4)]
    candidates.append(_fill(units, pcs))
    best, best_load = [], None
    for members in candidates:
        loads = [sum(cost(L) for L in m) for m in members]
        i = int(np.argmax(loads))
        if best_load is None or loads[i] < best_load:
            best, best_load = members[i], loads[i]
    return best


@dataclass(frozen=True)
class AttentionLayer:
    """Decode attention of one layer on PIM.

    The work is split into units of one request and one KV head (Gated-DeltaNet: one value head;
    MLA: the shared latent cache) and spread over the GPU's pseudo-channels (``balance``):

    - ``"tokens"`` (default): long units are cut into pieces (token-parallel, AttAcc style; the
      pieces' partial softmax sums are combined on the GPU) so that a long request does not hold
      one pseudo-channel while the others idle: of a few placements (whole units; pieces of at
      most 1, 1/2 or 1/4 of an equal share of the tokens, longest first onto the least loaded;
      the tokens filled into equal shares) the one whose busiest pseudo-channel has the least
      estimated cost (the planner's estimate of each piece's GEMVs: a piece costs its own query
      writes, result rows and row openings) is taken;
    - ``"units"``: whole units, longest first onto the least loaded; only when there are fewer
      units than pseudo-channels is each split over ``pseudo-channels // units`` of them (every
      version before 2026-12-03).

    The layer takes as long as the busiest pseudo-channel, whose units run as one program (refresh
    and turnarounds simulated). ``linear`` layers place whole units (by count).

    ``full`` / ``sliding``: per unit, a score GEMV (``head_dim -> L``, the unit's keys times each
    query head) and a value GEMV (``L -> value_dim``, the values times each head's probabilities)
    for the ``q_per_kv`` query heads of its group (``L`` capped at ``window``); every score GEMV
    of the busiest pseudo-channel as one program, the GPU's softmax, one hand-over, every value
    GEMV as one program. ``mapping``:

    - ``"grouped"`` (default): the heads of a group share each opened K / V row: the heads go in
      passes of as many as the accumulators and the global buffer hold
      (:func:`~sievesim.pim.program.plan_grouped_gemv`), each pass reads the unit's cache once,
      one MACAB per column per head (``ceil(heads / vectors_per_mac)`` with a what-if PU that
      multiplies a column with several vectors at once);
    - ``"per_head"``: one GEMV per query head, each opening the rows again (every version before
      2026-12-03), or, with ``multi_vector`` (a multi-vector PU), the group's scores as one
      multi-token GEMV and the values one head at a time.

    ``mla``: the same over the latent cache (``kv_lora_rank + rope`` wide, all query heads share it).
    ``linear`` (Gated-DeltaNet): per unit, a readout GEMV over the ``key_dim x value_dim`` state and
    one pass of the same shape for the state update (the write-back of the updated state is not
    modelled: there is no PIM write command), independent of the context length.
    """

    kind: str
    kv_heads: int = 0
    q_per_kv: int = 1
    head_dim: int = 0
    value_dim: int = 0
    window: int | None = None
    multi_vector: bool = False
    #: Chunked attention (Llama 4): a request of ``L`` tokens reads the current chunk, ``(L - 1) % chunk + 1``.
    chunk: int | None = None
    mapping: str = "grouped"
    balance: str = "tokens"

    def __post_init__(self) -> None:
        if self.mapping not in ATTENTION_MAPPINGS:
            raise field_error("mapping", self.mapping, f"one of {list(ATTENTION_MAPPINGS)}")
        if self.balance not in ATTENTION_BALANCES:
            raise field_error("balance", self.balance, f"one of {list(ATTENTION_BALANCES)}")

    @classmethod
    def from_model(cls, model, layer: int, multi_vector: bool = False, mapping: str = "grouped",
                   balance: str = "tokens") -> "AttentionLayer":
        kind = model.layer_attention[layer]
        if kind == "linear":
            return cls("linear", kv_heads=model.linear_num_value_heads, head_dim=model.linear_key_head_dim,
                       value_dim=model.linear_value_head_dim, multi_vector=multi_vector, mapping=mapping,
                       balance=balance)
        if kind == "mla":
            return cls("mla", kv_heads=1, q_per_kv=model.num_attention_heads,
                       head_dim=model.kv_lora_rank + model.qk_rope_head_dim, value_dim=model.kv_lora_rank,
                       multi_vector=multi_vector, mapping=mapping, balance=balance)
        return cls(kind, kv_heads=model.num_kv_heads, q_per_kv=max(1, model.num_attention_heads // model.num_kv_heads),
                   head_dim=model.head_dim, value_dim=model.head_dim,
                   window=model.sliding_window if kind == "sliding" else None, multi_vector=multi_vector,
                   chunk=getattr(model, "attention_chunk_size", None) if kind == "chunked" else None,
                   mapping=mapping, balance=balance)

    def _context(self, context: int) -> int:
        L = min(context, self.window) if self.window else context
        if self.chunk and L > 0:
            L = (L - 1) % self.chunk + 1
        return L

    def unit_gemvs(self, context: int) -> list[tuple[int, int, int]]:
        """(d_in, d_out, vectors) GEMVs of one unit (request x KV head) with ``context`` tokens:
        per pass of query heads, the score GEMV then the value GEMV (``"grouped"``: one pass of
        all the group's heads; the program splits it as the PU's buffers require)."""
        if self.kind == "linear":
            return [(self.head_dim, self.value_dim, 1)] * 2
        L = self._context(context)
        if L <= 0:
            return []
        if self.mapping == "grouped":
            vectors, passes = self.q_per_kv, 1
        else:
            vectors, passes = (self.q_per_kv, 1) if self.multi_vector else (1, self.q_per_kv)
        return [(self.head_dim, L, vectors), (L, self.value_dim, vectors)] * passes

    def placement(self, device: PIMDevice, batch_context_lens: Sequence[int]) -> tuple[list[int], list[int]]:
        """The requests' context lengths as the layer reads them (window, chunk) and the context
        lengths of the units (or pieces of units) on the busiest pseudo-channel (``balance``)."""
        lens = [int(x) for x in batch_context_lens]
        if not lens:
            return [], []
        if min(lens) < 0:
            raise field_error("context length", min(lens), "a non-negative number of tokens")
        lens = [self._context(L) if L > 0 else 0 for L in lens]
        pcs = device.unit_pcs("gpu")
        units = [L for L in lens for _ in range(self.kv_heads)]
        if self.kind != "linear" and self.balance == "tokens":
            fixed, per_token = _cost_line(self, device)
            return lens, _balanced_busiest(units, pcs, lambda L: fixed + per_token * L if L > 0 else 0.0)
        split = max(1, pcs // len(units)) if self.kind != "linear" else 1
        if split > 1:
            units = [math.ceil(L / split) for L in units]
        n_pc = min(pcs, len(units))
        # weight of a unit for placement: its MAC work (context x width); programs decide the time
        load = np.zeros(n_pc)
        members: list[list[int]] = [[] for _ in range(n_pc)]
        for L in sorted(units, reverse=True):
            i = int(np.argmin(load))
            load[i] += max(L, 1) if self.kind != "linear" else 1
            members[i].append(L)
        return lens, members[int(np.argmax(load))]

    def programs(self, device: PIMDevice, busiest: Sequence[int]) -> list[tuple[np.ndarray, np.ndarray]]:
        """The busiest pseudo-channel's programs (one for ``linear``; else the scores' and the
        values') for units of these context lengths (``"grouped"`` mapping, or any ``linear``
        layer; ``"per_head"`` runs as :func:`gemv_sequence`)."""
        seq = [g for L in busiest for g in self.unit_gemvs(L)]
        if not seq:
            return []
        if self.kind == "linear":
            return [_sequence_program(device, _norm(seq), 1)]
        return [_grouped_sequence_program(device, tuple(seq[0::2])),
                _grouped_sequence_program(device, tuple(seq[1::2]))]

    def _results(self, device: PIMDevice, busiest: Sequence[int], log_commands: bool = False) -> list[PIMResult]:
        seq = [g for L in busiest for g in self.unit_gemvs(L)]
        if not seq:
            return []
        if self.kind == "linear" or self.mapping == "per_head":
            parts = [seq] if self.kind == "linear" else [seq[0::2], seq[1::2]]
            if not log_commands:
                return [gemv_sequence(device, p, 1) for p in parts]
            return [device.run(_sequence_program(device, _norm(p), 1), 1, log_commands=True) for p in parts]
        if not log_commands:
            return [_grouped_sequence(device, tuple(p)) for p in (seq[0::2], seq[1::2])]
        return [device.run(prog, 1, log_commands=True) for prog in self.programs(device, busiest)]

    def _gpu_and_sync_s(self, device: PIMDevice, lens: Sequence[int]) -> tuple[float, float]:
        if self.kind == "linear":       # readout and state update need nothing from the GPU between them
            return 0.0, 0.0
        n_scores = sum(lens) * self.kv_heads * self.q_per_kv
        return device.gpu_step_s(SOFTMAX_FLOPS_PER_ELEMENT * n_scores, n_scores * (4 + 2)), device.sync_latency_s

    def time_s(self, device: PIMDevice, batch_context_lens: Sequence[int]) -> float:
        """Attention of these requests (context lengths in tokens) at this layer [s]: the busiest
        pseudo-channel's score program, the GPU's softmax over every score of the layer, one
        hand-over, its value program (``linear``: one program)."""
        lens, busiest = self.placement(device, batch_context_lens)
        results = self._results(device, busiest)
        if not results:
            return 0.0
        cycles = sum(device.program_cycles(r, 1) for r in results)
        softmax, sync = self._gpu_and_sync_s(device, lens)
        return cycles * device.tck_s + softmax + sync

    def breakdown(self, device: PIMDevice, batch_context_lens: Sequence[int]) -> dict:
        """Where :meth:`time_s` goes, from the engine's command log of the busiest
        pseudo-channel's programs (:func:`sievesim.pim.breakdown.program_breakdown`).

        Keys: ``programs`` (``scores`` and ``values``, or ``state`` for ``linear``: cycles per
        component, the mean over the device's refresh phases, each adding up to the program's
        duration), ``commands`` (per program: MACAB, ACTAB, PREAB, GWRITE, RDRES, REFab issued,
        mean per phase copy), ``cycles`` (per program), ``pim_s`` (every program), ``softmax_s``
        (the GPU's softmax), ``sync_s`` (the hand-over), ``total_s`` (= :meth:`time_s`),
        ``mac_useful_share`` (per program: multiply-accumulates the attention needs over those the
        MAC commands could do: PUs without an output in a slot idle), ``busiest_units`` (context
        lengths of the busiest pseudo-channel's units), ``plans``
        (per program: the query heads per pass and passes of each unit's GEMV, ``grouped`` only).
        Times in seconds, cycles in memory clock cycles."""
        from .breakdown import command_counts, program_breakdown
        lens, busiest = self.placement(device, batch_context_lens)
        results = self._results(device, busiest, log_commands=True)
        names = ["state"] if self.kind == "linear" else ["scores", "values"]
        softmax, sync = self._gpu_and_sync_s(device, lens) if results else (0.0, 0.0)
        out: dict = {"programs": {}, "commands": {}, "cycles": {}, "plans": {}, "mac_useful_share": {},
                     "busiest_units": list(busiest)}
        seq = [g for L in busiest for g in self.unit_gemvs(L)]
        parts = [seq] if self.kind == "linear" else [seq[0::2], seq[1::2]]
        per_mac = device.geometry.pus * device.macs_per_command * device.vectors_per_mac
        pim = 0.0
        for name, res, part in zip(names, results, parts):
            cyc = device.program_cycles(res, 1)
            out["programs"][name] = program_breakdown(res, device.config)
            out["commands"][name] = command_counts(res, device.config)
            out["cycles"][name] = cyc
            issued = out["commands"][name]["MACAB"] * per_mac
            out["mac_useful_share"][name] = sum(a * b * v for a, b, v in part) / issued if issued else 0.0
            pim += cyc * device.tck_s
        if results and self.kind != "linear" and self.mapping == "grouped":
            for name, part in zip(names, (seq[0::2], seq[1::2])):
                plans = {_grouped_plan(device, *g) for g in part}
                out["plans"][name] = sorted({(p.heads_per_pass, p.passes, p.chunks) for p in plans if p is not None})
        out.update(pim_s=pim, softmax_s=softmax, sync_s=sync, total_s=pim + softmax + sync)
        return out


#: Context lengths [tokens] whose planner estimates give the placement's cost line.
_COST_LINE_POINTS = (64, 4096)


def _piece_cost(layer: "AttentionLayer", device: PIMDevice, context: int) -> float:
    """Estimated cycles of one unit (or piece) of ``context`` tokens: its GEMVs' plan estimates
    (MACs, bursts, row switches, turnarounds; the planner's)."""
    if context <= 0:
        return 0.0
    t = dict(device.config.timings)
    geo = device.geometry
    est = 0.0
    for d_in, d_out, vectors in layer.unit_gemvs(context):
        hp = 1 if layer.mapping == "per_head" else plan_grouped_gemv(d_in, d_out, vectors, geo, t).heads_per_pass
        est += _grouped_estimate(d_in, d_out, vectors, geo, t, hp)[0]
    return est


@functools.lru_cache(maxsize=256)
def _cost_line(layer: "AttentionLayer", device: PIMDevice) -> tuple[float, float]:
    """A piece's estimated cycles as ``fixed + per_token x tokens`` (for placement): the line
    through :func:`_piece_cost` at :data:`_COST_LINE_POINTS`. ``fixed`` is what a piece costs
    whatever its length (its query writes, result rows, a row opened for a few columns)."""
    lo, hi = _COST_LINE_POINTS
    c_lo, c_hi = _piece_cost(layer, device, lo), _piece_cost(layer, device, hi)
    per_token = (c_hi - c_lo) / (hi - lo)
    return max(0.0, c_lo - per_token * lo), per_token


def _norm(gemvs: Sequence[tuple]) -> tuple:
    return tuple((int(g[0]), int(g[1]), int(g[2]), bool(g[3]) if len(g) > 3 else True,
                  bool(g[4]) if len(g) > 4 else True) for g in gemvs)


@functools.lru_cache(maxsize=8192)
def _grouped_plan(device: PIMDevice, d_in: int, d_out: int, vectors: int):
    """The grouped plan of ``vectors`` heads over one matrix, or None where it is one plain GEMV
    (one head and one vector per MAC: the per-head program, bit for bit)."""
    if vectors == 1 and device.vectors_per_mac == 1:
        return None
    return plan_grouped_gemv(d_in, d_out, vectors, device.geometry, dict(device.config.timings))


@functools.lru_cache(maxsize=4096)
def _grouped_program(device: PIMDevice, d_in: int, d_out: int, vectors: int) -> tuple[np.ndarray, np.ndarray]:
    plan = _grouped_plan(device, d_in, d_out, vectors)
    if plan is None:
        return _program(device, d_in, d_out, 1, 1)
    ops, rc = grouped_gemv_program(plan, device.geometry)
    ops.flags.writeable = rc.flags.writeable = False
    return ops, rc


def _grouped_sequence_program(device: PIMDevice, gemvs: tuple[tuple[int, int, int], ...]) -> tuple[np.ndarray, np.ndarray]:
    """Grouped GEMVs ``(d_in, d_out, vectors)`` of one pseudo-channel back to back, each matrix
    in rows of its own, one PREAB at the end."""
    return _concat([_grouped_program(device, int(a), int(b), int(v)) for a, b, v in gemvs])


@functools.lru_cache(maxsize=1024)
def _grouped_sequence(device: PIMDevice, gemvs: tuple[tuple[int, int, int], ...]) -> PIMResult:
    return device.run(_grouped_sequence_program(device, gemvs), 1)
