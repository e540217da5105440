"""Run PIM programs on the cycle-accurate engine (optionally beside normal traffic)."""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..dram.config import DRAMConfig, check_engine_memory, get_config
from ..dram.standards import TimingConstraint
from ..dram.engine import _to_vectors
from ..dram.traces import RequestTrace
from ..errors import field_error
from .program import OP_GWRITE, OP_MACAB, OP_PREAB, OP_RDRES, PIMGeometry

__all__ = ["PIMResult", "pim_config", "with_pim_timing", "geometry_for", "run_programs", "run_phases", "even_phases",
           "stratified_phases"]


@dataclass
class PIMResult:
    """One engine run of PIM programs. Cycles are memory command-clock cycles (tCK)."""

    cycles: int                      # until every program's last command and last result's data are done
    time_ns: float
    macabs: int
    activations: int                 # ACTAB commands
    precharges: int                  # PREAB commands
    gwrites: int
    rdres: int
    macab_utilization: float         # MACAB issue slots used / available (one per nCCDAB), busiest unit
    refresh_stall_cycles: int        # busiest unit: from a refresh request to tRFC's end, mid-program
    refreshes: int
    per_unit_busy_cycles: list[int]  # each simulated pseudo-channel: program end - program start
    commands: int
    normal_requests: int = 0
    normal_cycles: int = 0           # completion of the background (GPU) requests, if any
    wall_s: float = 0.0
    command_log: dict | None = field(default=None, repr=False)
    #: :func:`run_phases`: the program's duration [cycles] at each refresh phase (empty otherwise)
    phase_cycles: list[int] = field(default_factory=list)
    #: :func:`run_phases`: the phases [cycles after a refresh request] those durations belong to
    phases: list[int] = field(default_factory=list)
    #: :func:`run_phases`: the share of the refresh interval each phase stands for (sums to 1)
    phase_weights: list[float] = field(default_factory=list)

    @property
    def mean_phase_cycles(self) -> float:
        """Expected duration over the simulated refresh phases [cycles] (``cycles`` without phases)."""
        if not self.phase_cycles:
            return float(self.cycles)
        return float(np.average(self.phase_cycles, weights=self.phase_weights or None))

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d.pop("command_log")
        return d


def pim_config(dram_config: str | DRAMConfig, units: int = 1, *, dual_row_buffer: bool = True) -> DRAMConfig:
    """The DRAM configuration reduced to ``units`` pseudo-channels (one channel per unit).

    Tensor-parallel programs are the same in every pseudo-channel, so one unit stands for all;
    expert-parallel placements give each unit its own program.
    """
    base = get_config(dram_config) if isinstance(dram_config, str) else dram_config
    if "ACTAB" not in [c.name for c in base.standard.commands]:
        raise field_error("dram_config", base.name, "a configuration whose standard has PIM commands (hbm3-6400, hbm3e-8000, hbm2-pim-2400)")
    org = dict(base.org)
    org["channel"], org["pseudochannel"] = units, 1
    return base.replace(org=org, dual_row_buffer=dual_row_buffer, end="completed", name=f"{base.name}-pim")


def with_pim_timing(config: DRAMConfig, *, input_write_to_mac_cycles: int = 0, input_write_interval_cycles: int = 0,
                    pu_clock_divider: int = 0, input_write_closes_row: bool = False) -> DRAMConfig:
    """``config`` with the PIM timing of a given device added as rules of its standard (each a
    minimum gap in command-clock cycles; 0 adds nothing, so the standard's own rules stand):

    * ``input_write_to_mac_cycles``: GWRITE -> MACAB (the standard's is nCWL + nBL; Samsung's
      Aquabolt-XL writes its input registers with ordinary writes, so the MAC read waits the write
      to read turnaround WL + BL/2 + tWTRL = 19 cycles in PIMSimulator);
    * ``input_write_interval_cycles``: GWRITE -> GWRITE (the standard's is nBL; writes to one bank
      group are tCCDL apart, 4 cycles on Aquabolt-XL);
    * ``pu_clock_divider``: command-clock cycles per PU clock; a PU takes one MAC command per PU
      clock, so MACAB -> MACAB and MACAB -> RDRES are at least this (Aquabolt-XL: 300 MHz PUs on a
      1.2 GHz command clock, 4);
    * ``input_write_closes_row``: the input goes through a reserved row (Aquabolt-XL: row 0x3fff in
      all-bank mode, PIMSimulator ``PIMKernel::computeGemv``), opened after the weight row's
      precharge and closed before the weight row opens again: PREAB -> GWRITE nRP + nRCDWR, GWRITE
      -> ACTAB nCWL + nBL + nWR + nRP (the program closes the weight row before each input write).

    The engine takes the largest latency of the rules between two commands, so a gap shorter than
    the standard's changes nothing."""
    added = []
    for name, value, pre, fol in (("input_write_to_mac_cycles", input_write_to_mac_cycles, "GWRITE", "MACAB"),
                                  ("input_write_interval_cycles", input_write_interval_cycles, "GWRITE", "GWRITE"),
                                  ("pu_clock_divider", pu_clock_divider, "MACAB", "MACAB RDRES")):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 0:
            raise field_error(name, value, "a whole number of command-clock cycles >= 0 (0: the standard's timing)")
        if value:
            added.append(TimingConstraint("pseudochannel", (pre,), tuple(fol.split()), str(int(value))))
    if not isinstance(input_write_closes_row, bool):
        raise field_error("input_write_closes_row", input_write_closes_row, "true or false")
    if input_write_closes_row:
        added += [TimingConstraint("pseudochannel", ("PREAB",), ("GWRITE",), "nRP + nRCDWR"),
                  TimingConstraint("pseudochannel", ("GWRITE",), ("ACTAB",), "nCWL + nBL + nWR + nRP")]
    if not added:
        return config
    if "ACTAB" not in [c.name for c in config.standard.commands]:
        raise field_error("dram_config", config.name, "a configuration whose standard has PIM commands "
                          "(hbm3-6400, hbm3e-8000, hbm2-pim-2400)")
    std = dataclasses.replace(config.standard, constraints=config.standard.constraints + tuple(added))
    return config.replace(standard=std)


def geometry_for(config: DRAMConfig, *, banks_per_pu: int = 1, macs_per_command: int = 16, operand_bytes: int = 2,
                 global_buffer_bytes: int = 2048, accumulators: int = 8, multi_vector: bool = True,
                 vectors_per_mac: int = 1, banks_per_row_opening: int = 0,
                 input_write_closes_row: bool = False) -> PIMGeometry:
    levels = config.standard.levels
    banks = int(np.prod([config.org[l] for l in levels[levels.index("pseudochannel") + 1: levels.index("row")]]))
    return PIMGeometry(banks=banks, banks_per_pu=banks_per_pu, macs_per_command=macs_per_command,
                       operand_bytes=operand_bytes, row_bytes=config.org["column"] * config.tx_bytes,
                       burst_bytes=config.tx_bytes, global_buffer_bytes=global_buffer_bytes,
                       accumulators=accumulators, multi_vector=multi_vector, vectors_per_mac=vectors_per_mac,
                       banks_per_row_opening=banks_per_row_opening, input_write_closes_row=input_write_closes_row)


def _check_programs(config: Any, programs: Any, background: Any) -> tuple[list, Any]:
    """The arguments of :func:`run_programs`, checked before the compiled engine (no bounds checks)
    sees them: each program a pair (ops: integer (n,), rowcol: integer (n, 2)) of one length, op
    codes among the program ops, a background trace whose arrays agree (one entry per request)."""
    from ..dram.traces import check_request_trace

    if not isinstance(config, DRAMConfig):
        raise TypeError(f"config = {config!r:.60}: expected a DRAMConfig (sievesim.pim.engine.pim_config(...)), "
                        f"got {type(config).__name__}")
    if isinstance(programs, (str, bytes)) or not isinstance(programs, (list, tuple)):
        raise TypeError(f"programs = {programs!r:.60}: expected a list of (ops, rowcol) pairs, got "
                        f"{type(programs).__name__}")
    out = []
    for i, prog in enumerate(programs):
        if not isinstance(prog, (list, tuple)) or len(prog) != 2:
            raise TypeError(f"programs[{i}]: expected a pair (ops, rowcol), got {type(prog).__name__}")
        ops, rowcol = np.asarray(prog[0]), np.asarray(prog[1])
        if ops.ndim != 1 or not np.issubdtype(ops.dtype, np.integer) or (ops.size and (ops.min() < 0 or ops.max() > 3)):
            raise field_error(f"programs[{i}] ops", f"{ops.dtype} {ops.shape}", "a one-dimensional integer array of "
                              "program op codes 0..3 (sievesim.pim.program OP_*)")
        if rowcol.shape != (ops.shape[0], 2) or not np.issubdtype(rowcol.dtype, np.integer):
            raise field_error(f"programs[{i}] rowcol", f"{rowcol.dtype} {rowcol.shape}",
                              f"an integer array of shape ({ops.shape[0]}, 2): one (row, column) per op")
        out.append((np.ascontiguousarray(ops, dtype=np.int64), np.ascontiguousarray(rowcol, dtype=np.int32)))
    if background is not None:
        background = check_request_trace(background, len(config.standard.levels), "background")
    return out, background


def run_programs(config: DRAMConfig, programs: list[tuple[np.ndarray, np.ndarray]], *,
                 background: RequestTrace | None = None, log_commands: bool = False,
                 skip_idle: bool = True, release: "list[int] | np.ndarray | None" = None,
                 compiled: dict | None = None) -> PIMResult:
    """Program ``i`` runs on pseudo-channel ``i`` of ``config`` (see :func:`pim_config`).

    ``release[i]``: the cycle program ``i`` starts at (default 0); refresh requests arrive every
    nREFI from cycle nREFI, so the release places the program in the refresh interval. Durations
    (``per_unit_busy_cycles``, ``cycles``) count from the release.
    ``skip_idle=False`` visits the controller every cycle (for tests: same log, bit for bit).
    ``compiled``: ``config.compile()`` if the caller has it already (it takes milliseconds)."""
    from .._core import Engine

    programs, background = _check_programs(config, programs, background)
    spec = config.compile() if compiled is None else compiled
    if len(programs) > config.num_controllers:
        raise field_error("programs", len(programs), f"at most {config.num_controllers} (one per pseudo-channel)")
    code = np.zeros(4, dtype=np.int32)          # program op code -> the standard's command id
    code[[OP_MACAB, OP_GWRITE, OP_RDRES, OP_PREAB]] = [spec["cmd_macab"], spec["cmd_gwrite"], spec["cmd_rdres"],
                                                       spec["cmd_preab"]]
    n_ops = sum(len(o) for o, _ in programs)
    n_bg = len(background) if background is not None else 0
    check_engine_memory(config, spec, n_bg + n_ops // 8, logged_commands=n_ops if log_commands else 0)
    lengths = np.array([[i, len(ops)] for i, (ops, _) in enumerate(programs)], dtype=np.int64).reshape(-1, 2)
    ops = code[np.concatenate([o for o, _ in programs])] if programs else np.zeros(0, np.int32)
    rowcol = np.concatenate([rc for _, rc in programs]) if programs else np.zeros((0, 2), np.int32)
    if background is not None:
        vecs, keys = _to_vectors(config, background)
        is_write, arrival = background.is_write, background.arrival
    else:
        vecs = np.zeros((0, len(config.standard.levels)), np.int32)
        keys, is_write, arrival = np.zeros(0, np.int64), np.zeros(0, bool), np.zeros(0, np.int64)
    t0 = time.perf_counter()
    engine = Engine(spec | {"nRFC": int(config.timings["nRFC"])}, vecs, keys, is_write, arrival, log_commands,
                    skip_idle)
    rel = np.zeros(len(programs), np.int64) if release is None else np.asarray(release, np.int64)
    if rel.shape != (len(programs),) or (rel < 0).any():
        raise field_error("release", list(np.ravel(rel)), "one cycle >= 0 per program")
    engine.load_pim_programs(lengths, ops, rowcol, rel)
    raw = engine.run()
    wall = time.perf_counter() - t0
    has = raw["pim_has_program"]
    done = raw["pim_done"].copy()
    done[: len(programs)] -= rel
    counts = raw["pim_counts"]
    busiest = int(np.argmax(np.where(has, done, -1))) if has.any() else 0
    cycles = int(max(done[has].max(initial=0), raw["depart"].max(initial=0)))
    n_ccdab = int(config.timings["nCCDAB"])
    util = counts[busiest, 2] * n_ccdab / done[busiest] if has.any() and done[busiest] else 0.0
    log = None
    if log_commands:
        log = {"cycle": raw["log_clk"], "addr": raw["log_addr"], "command": raw["log_cmd"], "names": spec["command_names"]}
    return PIMResult(
        cycles=cycles, time_ns=cycles * config.tck_ns, macabs=int(counts[:, 2].sum()),
        activations=int(counts[:, 0].sum()), precharges=int(counts[:, 1].sum()), gwrites=int(counts[:, 3].sum()),
        rdres=int(counts[:, 4].sum()), macab_utilization=float(util),
        refresh_stall_cycles=int(raw["pim_stall"][busiest]), refreshes=raw["n_refresh"],
        per_unit_busy_cycles=[int(d) for d, h in zip(done, has) if h], commands=raw["n_commands"],
        normal_requests=int(len(arrival)), normal_cycles=int(raw["depart"].max(initial=0)), wall_s=wall,
        command_log=log)


def even_phases(config: DRAMConfig, count: int) -> list[int]:
    """``count`` refresh phases evenly spaced over one refresh interval [cycles after a request]:
    the midpoints of ``count`` equal parts."""
    if not isinstance(count, (int, np.integer)) or isinstance(count, bool) or count < 1:
        raise field_error("refresh_phases", count, "a positive integer")
    interval = int(config.timings["nREFI"])
    return [(2 * k + 1) * interval // (2 * count) for k in range(count)]


def stratified_phases(config: DRAMConfig, count: int, duration: int | None = None) -> tuple[list[int], list[float]]:
    """``count`` refresh phases and their weights, for the expected duration of a program over a
    start uniform in the refresh interval; ``duration``: its length without refresh [cycles].

    A program of length T < nREFI - tRFC either starts while the last refresh still runs (phase
    below tRFC: the wait falls linearly with the phase, a quarter of the phases at the midpoints
    of that part give its mean), or meets the next request at a point u in (0, T) of its run
    (phase nREFI - u: most phases, at the midpoints of T's equal parts), or meets none (one phase;
    weight (nREFI - tRFC - T) / nREFI). Each weight is the length of the part of the interval it
    stands for. Longer programs (or ``duration`` None) take the midpoints of equal parts of nREFI.
    """
    if not isinstance(count, (int, np.integer)) or isinstance(count, bool) or count < 1:
        raise field_error("refresh_phases", count, "a positive integer")
    interval, rfc = int(config.timings["nREFI"]), int(config.timings["nRFC"])
    if duration is None or count < 3 or not 0 < rfc < interval or duration + rfc >= interval - count:
        return even_phases(config, count), [1.0 / count] * count
    early = max(1, count // 4)
    inside = count - early - 1
    phases = [(2 * k + 1) * rfc // (2 * early) for k in range(early)]
    weights = [rfc / early] * early
    phases.append(rfc + (interval - rfc - duration) // 2)
    weights.append(interval - rfc - duration)
    phases += [interval - max(1, (2 * k + 1) * duration // (2 * inside)) for k in range(inside)]
    weights += [duration / inside] * inside
    return phases, [w / interval for w in weights]


def run_phases(config: DRAMConfig, program: tuple[np.ndarray, np.ndarray], phases: list[int], *,
               weights: list[float] | None = None, compiled: dict | None = None,
               log_commands: bool = False) -> PIMResult:
    """One program at each refresh ``phase`` (cycles from the last refresh request to the program's
    start, in [0, nREFI)), all in one engine run, one pseudo-channel each.

    Phase ``p`` releases the program at cycle nREFI + p, so a refresh requested within the last
    tRFC is still running when it starts. ``phase_cycles`` holds each phase's duration;
    ``cycles`` the longest; command counts are those of all copies together. ``weights``: the
    share of the interval each phase stands for (default: equal). ``compiled``: the
    compiled form of ``config`` when it already has one pseudo-channel per phase.
    ``log_commands``: keep the command log (copy ``i`` on channel ``i``; see
    :func:`sievesim.pim.breakdown.program_breakdown`).
    """
    interval = int(config.timings["nREFI"])
    if not phases or any(not 0 <= int(p) < interval for p in phases):
        raise field_error("phases", list(phases), f"phases in [0, nREFI = {interval}) cycles")
    if config.num_controllers != len(phases):
        config, compiled = pim_config(config, len(phases), dual_row_buffer=config.dual_row_buffer), None
    res = run_programs(config, [program] * len(phases), release=[interval + int(p) for p in phases],
                       compiled=compiled, log_commands=log_commands)
    res.phase_cycles = list(res.per_unit_busy_cycles)
    res.phases = [int(p) for p in phases]
    w = np.ones(len(phases)) if weights is None else np.asarray(weights, dtype=float)
    if w.shape != (len(phases),) or (w < 0).any() or w.sum() <= 0:
        raise field_error("weights", list(np.ravel(w)), "one non-negative weight per phase, not all 0")
    res.phase_weights = list(w / w.sum())
    return res
