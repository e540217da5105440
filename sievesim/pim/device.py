"""The PIM device of one GPU and its engine-priced GEMV programs (cached by their inputs).

Times are in seconds unless a name says cycles or ns.
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
from .engine import (PIMResult, even_phases, geometry_for, pim_config, run_phases, run_programs, stratified_phases,
                     with_pim_timing)
from .program import (OP_MACAB, PIMGeometry, _grouped_estimate, gemv_program, grouped_gemv_program, plan_gemv,
                      plan_grouped_gemv)

__all__ = ["PIMDevice", "UNITS", "REFRESH_MODES", "gemv", "gemv_sequence"]

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

    PIM timing of a given device (command-clock cycles; 0, the default, keeps the DRAM standard's
    rules; :func:`sievesim.pim.engine.with_pim_timing`): ``input_write_to_mac_cycles`` (GWRITE ->
    MACAB), ``input_write_interval_cycles`` (GWRITE -> GWRITE), ``pu_clock_divider`` (command-clock
    cycles per PU clock: MAC commands at least this far apart); ``mode_switch_cycles``: entering
    and leaving PIM mode, added once to every program's (kernel's) duration. The order of a given
    device's kernel: ``banks_per_row_opening`` (banks of a PU one opened row feeds, 0: all) and
    ``input_write_closes_row`` (input writes close the PIM row) (:class:`PIMGeometry`).

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
    input_write_to_mac_cycles: int = 0
    input_write_interval_cycles: int = 0
    pu_clock_divider: int = 0
    mode_switch_cycles: int = 0
    banks_per_row_opening: int = 0
    input_write_closes_row: bool = False
    config_key: str = dataclasses.field(init=False, default="")
    _base: DRAMConfig = dataclasses.field(init=False, compare=False, repr=False, default=None)

    def __post_init__(self) -> None:
        base = _load_config(self.dram_config)
        if not isinstance(self.macab_interval_cycles, int) or self.macab_interval_cycles < 0:
            raise field_error("macab_interval_cycles", self.macab_interval_cycles,
                              "cycles between all-bank MACs (0: the configuration's nCCDAB)")
        if self.macab_interval_cycles:          # a power-limited all-bank MAC rate
            base = base.replace(timings=dict(base.timings, nCCDAB=self.macab_interval_cycles))
        base = with_pim_timing(base, input_write_to_mac_cycles=self.input_write_to_mac_cycles,
                               input_write_interval_cycles=self.input_write_interval_cycles,
                               pu_clock_divider=self.pu_clock_divider,
                               input_write_closes_row=bool(self.input_write_closes_row))
        if not isinstance(self.mode_switch_cycles, (int, np.integer)) or isinstance(self.mode_switch_cycles, bool) \
                or self.mode_switch_cycles < 0:
            raise field_error("mode_switch_cycles", self.mode_switch_cycles,
                              "a whole number of command-clock cycles >= 0 per PIM kernel (0: none)")
        if self.banks_per_row_opening not in (0, 1, 2, 4) or isinstance(self.banks_per_row_opening, bool) \
                or self.banks_per_row_opening > self.banks_per_pu:
            raise field_error("banks_per_row_opening", self.banks_per_row_opening,
                              f"0 (all of a PU's banks) or 1, 2, 4 up to banks_per_pu = {self.banks_per_pu}")
        if not isinstance(self.input_write_closes_row, bool):
            raise field_error("input_write_closes_row", self.input_write_closes_row, "true or false")
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
                   macab_interval_cycles=int(getattr(p, "macab_interval_cycles", 0)),
                   input_write_to_mac_cycles=int(getattr(p, "input_write_to_mac_cycles", 0)),
                   input_write_interval_cycles=int(getattr(p, "input_write_interval_cycles", 0)),
                   pu_clock_divider=int(getattr(p, "pu_clock_divider", 0)),
                   mode_switch_cycles=int(getattr(p, "mode_switch_cycles", 0)),
                   banks_per_row_opening=int(getattr(p, "banks_per_row_opening", 0)),
                   input_write_closes_row=bool(getattr(p, "input_write_closes_row", False)))

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
        or the single aligned run; plus ``mode_switch_cycles`` (entering and leaving PIM mode)."""
        if not result.phase_cycles:
            return float(result.cycles) + self.mode_switch_cycles
        if self.refresh == "staggered" and pcs > 1:
            return float(max(result.phase_cycles)) + self.mode_switch_cycles
        return result.mean_phase_cycles + self.mode_switch_cycles

    @functools.cached_property
    def geometry(self) -> PIMGeometry:
        return geometry_for(self.config, banks_per_pu=self.banks_per_pu, macs_per_command=self.macs_per_command,
                            operand_bytes=self.operand_bytes, global_buffer_bytes=self.global_buffer_bytes,
                            accumulators=self.accumulators, multi_vector=self.multi_vector_pu,
                            vectors_per_mac=self.vectors_per_mac,
                            banks_per_row_opening=self.banks_per_row_opening,
                            input_write_closes_row=self.input_write_closes_row)

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


def _norm(gemvs: Sequence[tuple]) -> tuple:
    return tuple((int(g[0]), int(g[1]), int(g[2]), bool(g[3]) if len(g) > 3 else True,
                  bool(g[4]) if len(g) > 4 else True) for g in gemvs)
