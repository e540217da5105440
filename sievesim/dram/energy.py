"""DRAM and PIM energy per standard, as data beside the timing tables (:mod:`.standards`).

The model is DRAMPower's split of energy into what each command costs and what the device
draws in the background, with per-command energies built from per-bit figures of the access
path (O'Connor et al., "Fine-Grained DRAM", MICRO 2017, as tabulated in the AttAcc simulator's
``src/config.py``) and the configuration's geometry (row, burst and bank counts):

* ``ACT``: ``act_pj_per_bit`` x bits of the row it opens (the figure covers the activation and
  its precharge, so ``PRE``/``PREA`` carry 0 and each opening is charged once);
* ``RD``/``WR`` (and ``RDA``/``WRA``): a burst through the cell array, the column path, the
  global I/O and the TSVs; ``io``: the same burst over the interposer to the GPU (its own line);
* ``REFab``: the rows it refreshes in every bank of the pseudo-channel (rows / 8192: JEDEC's 8192
  refresh commands per retention window) x the activation energy of a row;
* PIM: ``ACTAB`` opens one row in every bank; ``PREAB`` 0; ``MACAB``: each PU reads the
  ``macs_per_command x operand_bytes`` bytes it multiplies out of the row buffer of one of its
  banks (a PU per bank: every bank; per bank pair or bank group: one bank in 2 or 4; cell
  segment only, a bank-group PU adds the column path) and does ``macs_per_command`` MACs at
  ``mac_pj``; ``GWRITE`` and ``RDRES`` move one burst
  between the GPU and the pseudo-channel's global buffer (interposer, TSV, global I/O, buffer);
* background (DRAMPower's split by bank state): ``active_standby_mw`` per pseudo-channel while it
  has a row open or is refreshing (tRFC after each REFab), ``precharge_standby_mw`` for the rest
  of the run. The engine counts this residency on each ACT/PRE/PREA/REFab (and ACTAB/PREAB) that
  changes a pseudo-channel's state (``DRAMResult.residency``); it models no power-down or
  self-refresh, so no lower-power state is charged. A result without residency (made outside
  :func:`sievesim.dram.engine.simulate`) falls back to ``nRC`` cycles per activation (the
  shortest time a row stays open and closes again), capped at the run per pseudo-channel: no
  bound either way (rows may stay open longer; activations of different banks overlap).

Energies are picojoules (pJ) per command, pJ per bit, milliwatts per pseudo-channel; results
are joules. Every value's source is in :data:`ENERGY_SOURCES` and docs/energy.md.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Mapping

from .._validate import Problems
from ..errors import field_error

__all__ = ["EnergyParams", "ENERGY_PARAMS", "ENERGY_SOURCES", "energy_params", "check_energy_table",
           "CommandEnergies", "command_energies", "macab_cell_bits", "energy_of_counts", "dram_energy", "pim_energy",
           "REFRESH_COMMANDS_PER_WINDOW"]

#: JEDEC: 8192 refresh commands per retention window (tREFW = 8192 x tREFI), so one REFab
#: refreshes rows / 8192 rows in every bank.
REFRESH_COMMANDS_PER_WINDOW = 8192


@dataclass(frozen=True)
class EnergyParams:
    """Energy figures of one DRAM standard (per bit, per operation, per pseudo-channel)."""

    #: Row activation and precharge, per bit of the row opened [pJ/bit].
    act_pj_per_bit: float
    #: Cell array read or write (sense amplifiers to the column decoder) [pJ/bit].
    cell_pj_per_bit: float
    #: Column decoder to the bank-group multiplexer [pJ/bit].
    column_pj_per_bit: float
    #: Bank-group multiplexer to the global I/O multiplexer [pJ/bit].
    global_io_pj_per_bit: float
    #: Through-silicon vias between the core dies and the buffer die [pJ/bit].
    tsv_pj_per_bit: float
    #: Buffer-die PHY and silicon interposer to the GPU [pJ/bit].
    interposer_pj_per_bit: float
    #: One 16-bit multiply-accumulate in a PIM processing unit [pJ].
    mac_pj: float
    #: PIM global buffer (SRAM) access [pJ/byte].
    buffer_pj_per_byte: float
    #: Background power of one pseudo-channel with every bank precharged [mW].
    precharge_standby_mw: float
    #: Background power of one pseudo-channel with a row open [mW].
    active_standby_mw: float

    def as_dict(self) -> dict[str, float]:
        return dataclasses.asdict(self)


FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(EnergyParams))
# Upper ends far above any published figure, so that a unit slip (J for pJ) is refused.
_UPPER = {"pj_per_bit": 1e3, "mac_pj": 1e4, "buffer_pj_per_byte": 1e3, "_mw": 1e6}

# O'Connor et al. (MICRO 2017) per-bit figures, as the AttAcc simulator (scale-snu/attacc_simulator,
# src/config.py) uses them for HBM3; the MAC and buffer figures from the same table (its 'alu' is
# per multiply-accumulate: energy = FLOPs / 2 x alu).
_HBM_PATH = dict(act_pj_per_bit=0.11, cell_pj_per_bit=0.44, column_pj_per_bit=1.01, global_io_pj_per_bit=1.23,
                 tsv_pj_per_bit=0.5, interposer_pj_per_bit=0.3, mac_pj=0.32, buffer_pj_per_byte=0.0034)
# Background: DRAMPower's HBM2 memspec (tests/tests_drampower/resources/hbm2.json on its unreleased
# branch feat/hbm, d07e9b9): IDD2N 33 mA at VDD 1.2 V = 39.6 mW (precharge standby); HBM3's 1.1 V
# core (JESD238) gives 36.3 mW. Active standby: the IDD3N / IDD2N ratio of DRAMPower's Micron
# DDR4-2400 memspec (44.0 / 38.25 = 1.15), since the HBM2 fixture's own IDD3N (350 mA, above its
# IDD0 and IDD4R) is not physical.
_STANDBY_HBM3 = dict(precharge_standby_mw=36.3, active_standby_mw=round(36.3 * 44.0 / 38.25, 2))
_STANDBY_HBM2 = dict(precharge_standby_mw=39.6, active_standby_mw=round(39.6 * 44.0 / 38.25, 2))

#: Built-in energy figures per standard name (:data:`sievesim.dram.standards.STANDARDS`).
ENERGY_PARAMS: dict[str, EnergyParams] = {
    "hbm3": EnergyParams(**_HBM_PATH, **_STANDBY_HBM3),
    "hbm2": EnergyParams(**_HBM_PATH, **_STANDBY_HBM2),
    "hbm2-pim": EnergyParams(**_HBM_PATH, **_STANDBY_HBM2),
    "ramulator2-hbm3": EnergyParams(**_HBM_PATH, **_STANDBY_HBM3),
    "ramulator2-hbm2": EnergyParams(**_HBM_PATH, **_STANDBY_HBM2),
}

#: Where each figure comes from (docs/energy.md has the full table).
ENERGY_SOURCES: dict[str, str] = {
    "act_pj_per_bit": "O'Connor et al., MICRO 2017 (cell ACT/PRE 0.11 pJ/b), via AttAcc src/config.py",
    "cell_pj_per_bit": "O'Connor et al., MICRO 2017 (cell RD/WR 0.44 pJ/b), via AttAcc src/config.py",
    "column_pj_per_bit": "O'Connor et al., MICRO 2017 (column decoder to BG mux 1.01 pJ/b), via AttAcc",
    "global_io_pj_per_bit": "O'Connor et al., MICRO 2017 (BG mux to global I/O 1.23 pJ/b), via AttAcc",
    "tsv_pj_per_bit": "O'Connor et al., MICRO 2017 (TSV 0.5 pJ/b), via AttAcc",
    "interposer_pj_per_bit": "O'Connor et al., MICRO 2017 (silicon-interposer I/O 0.3 pJ/b), via AttAcc",
    "mac_pj": "AttAcc src/config.py ALU 0.32 pJ per multiply-accumulate (energy = FLOPs / 2 x alu)",
    "buffer_pj_per_byte": "AttAcc src/config.py PIM SRAM 0.0034 pJ/byte",
    "precharge_standby_mw": "derived: DRAMPower HBM2 memspec (branch feat/hbm) IDD2N 33 mA x VDD (1.2 V HBM2, 1.1 V HBM3)",
    "active_standby_mw": "derived: precharge standby x IDD3N/IDD2N of DRAMPower's Micron DDR4-2400 memspec (1.15)",
}


def _check_value(name: str, value: Any, source: str | None, field: str | None = None) -> float:
    fname = field or name
    if name not in FIELDS:
        import difflib
        close = difflib.get_close_matches(name, FIELDS, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise field_error(fname, value, f"an energy field{hint}: {list(FIELDS)}", source=source)
    hi = next(v for k, v in _UPPER.items() if name.endswith(k) or name == k)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0 <= value <= hi:
        unit = "mW" if name.endswith("_mw") else "pJ/bit" if name.endswith("_per_bit") else \
            "pJ/byte" if name.endswith("_per_byte") else "pJ"
        raise field_error(fname, value, f"a finite number from 0 to {hi:g} [{unit}]", source=source)
    return float(value)


def check_energy_table(table: Any, *, source: str | None = None, prefix: str = "energy.",
                       required: bool = False) -> dict[str, float]:
    """Check an ``[energy]`` table of a DRAM file (all problems in one error): known fields, each a
    finite number from 0 to its ceiling; with ``required``, every field present. Returns the values."""
    problems = Problems(source)
    out: dict[str, float] = {}
    if not isinstance(table, Mapping):
        raise field_error(prefix.rstrip("."), table, f"a table of energy fields: {list(FIELDS)}", source=source)
    for k, v in table.items():
        with problems.check():
            out[k] = _check_value(str(k), v, source, f"{prefix}{k}")
    if required:
        for k in FIELDS:
            if k not in table:
                problems.add(f"{prefix}{k}", "<missing>", "a value (required: the standard has no built-in energy)")
    problems.raise_if_any()
    return out


def energy_params(config: Any) -> EnergyParams:
    """The energy figures of a DRAM configuration: its standard's built-in ones, with the
    configuration's ``energy`` overrides (a DRAM TOML's ``[energy]`` table) applied."""
    overrides = dict(getattr(config, "energy", None) or {})
    base = ENERGY_PARAMS.get(config.standard.name)
    if base is None:
        vals = check_energy_table(overrides, source=getattr(config, "source", None), required=True)
        return EnergyParams(**vals)
    if not overrides:
        return base
    return dataclasses.replace(base, **check_energy_table(overrides, source=getattr(config, "source", None)))


@dataclass(frozen=True)
class CommandEnergies:
    """Energy of each command of one configuration [pJ], and its background powers [mW per
    pseudo-channel]. ``io`` is charged per RD/WR burst on top of ``RD``/``WR``."""

    per_command: Mapping[str, float]
    io_pj: float
    precharge_standby_mw: float
    active_standby_mw: float
    macs_per_macab: int


def _geometry(config: Any) -> tuple[int, int, int, int]:
    """(row bits, burst bits, banks per controller, rows per bank) of a configuration."""
    std = config.standard
    levels = std.levels
    ctrl = levels.index(std.controller_level)
    banks = 1
    for lv in levels[ctrl + 1: levels.index("row")]:
        banks *= int(config.org[lv])
    burst_bits = int(config.tx_bytes) * 8
    row_bits = int(config.org["column"]) * burst_bits // int(std.prefetch)
    return row_bits, burst_bits, banks, int(config.org["row"])


def macab_cell_bits(config: Any, *, banks_per_pu: int = 1, macs_per_command: int = 16,
                    operand_bytes: float = 2.0) -> float:
    """Bits one all-bank MAC command reads out of the cells [bits]: each PU reads the
    ``macs_per_command x operand_bytes`` bytes it multiplies from one of its ``banks_per_pu`` banks,
    so a PU per bank reads every bank, a bank-pair PU one bank in 2, a bank-group PU one in 4.
    (16 bf16 MACs per PU read one 32 B burst: per bank, the whole pseudo-channel's banks.)"""
    _, _, banks, _ = _geometry(config)
    pus = max(1, banks // max(1, banks_per_pu))
    return pus * macs_per_command * operand_bytes * 8


def command_energies(config: Any, *, banks_per_pu: int = 1, macs_per_command: int = 16,
                     operand_bytes: float = 2.0, params: EnergyParams | None = None) -> CommandEnergies:
    """Per-command energies [pJ] of ``config`` (see the module's docstring for each command).
    ``banks_per_pu``/``macs_per_command``/``operand_bytes`` (bytes per weight): the PIM processing
    units (PIM commands only)."""
    for name, v, ok in (("banks_per_pu", banks_per_pu, (1, 2, 4)),):
        if v not in ok:
            raise field_error(name, v, f"one of {list(ok)} (a PU per bank, bank pair or bank group)")
    if isinstance(operand_bytes, bool) or not isinstance(operand_bytes, (int, float)) or not 0 < operand_bytes <= 8:
        raise field_error("operand_bytes", operand_bytes, "bytes per weight element, > 0 and <= 8")
    p = energy_params(config) if params is None else params
    row_bits, burst_bits, banks, rows = _geometry(config)
    act = p.act_pj_per_bit * row_bits
    access = burst_bits * (p.cell_pj_per_bit + p.column_pj_per_bit + p.global_io_pj_per_bit + p.tsv_pj_per_bit)
    ref = banks * max(1.0, rows / REFRESH_COMMANDS_PER_WINDOW) * act
    pus = max(1, banks // banks_per_pu)
    in_bank = p.cell_pj_per_bit + (p.column_pj_per_bit if banks_per_pu >= 4 else 0.0)
    cell_bits = macab_cell_bits(config, banks_per_pu=banks_per_pu, macs_per_command=macs_per_command,
                                operand_bytes=operand_bytes)
    macab = cell_bits * in_bank + pus * macs_per_command * p.mac_pj
    host = burst_bits * (p.interposer_pj_per_bit + p.tsv_pj_per_bit + p.global_io_pj_per_bit) \
        + burst_bits / 8 * p.buffer_pj_per_byte
    per = {"ACT": act, "PRE": 0.0, "PREA": 0.0, "RD": access, "WR": access, "RDA": access, "WRA": access,
           "REFab": ref, "REF": ref, "ACTAB": banks * act, "PREAB": 0.0, "MACAB": macab, "GWRITE": host,
           "RDRES": host}
    return CommandEnergies(per, burst_bits * p.interposer_pj_per_bit, p.precharge_standby_mw, p.active_standby_mw,
                           pus * macs_per_command)


#: Breakdown keys, in print order.
BREAKDOWN = ("activation", "read_write", "io", "refresh", "pim_activation", "pim_mac", "pim_transfer", "background")
_LINE = {"ACT": "activation", "PRE": "activation", "PREA": "activation", "RD": "read_write", "WR": "read_write",
         "RDA": "read_write", "WRA": "read_write", "REFab": "refresh", "REF": "refresh", "ACTAB": "pim_activation",
         "PREAB": "pim_activation", "MACAB": "pim_mac", "GWRITE": "pim_transfer", "RDRES": "pim_transfer"}


def energy_of_counts(counts: Mapping[str, int], energies: CommandEnergies, *, time_s: float, controllers: int,
                     active_s: float) -> dict[str, float]:
    """Energy [J] of ``counts`` commands plus the background of ``controllers`` pseudo-channels
    over ``time_s`` seconds, ``active_s`` of which (summed over pseudo-channels) with a row open.
    Returns the breakdown (:data:`BREAKDOWN`) and ``total``; the parts sum to the total."""
    out = dict.fromkeys(BREAKDOWN, 0.0)
    for name, n in counts.items():
        if n < 0:
            raise field_error(f"count of {name}", n, "a number of commands >= 0")
        out[_LINE.get(name, "read_write")] += n * energies.per_command.get(name, 0.0) * 1e-12
        if name in ("RD", "WR", "RDA", "WRA"):
            out["io"] += n * energies.io_pj * 1e-12
    active_s = min(max(active_s, 0.0), controllers * time_s)
    out["background"] = (energies.precharge_standby_mw * controllers * time_s
                         + (energies.active_standby_mw - energies.precharge_standby_mw) * active_s) * 1e-3
    out["total"] = math.fsum(out[k] for k in BREAKDOWN)
    return out


def _power(out: dict[str, float], time_s: float) -> dict[str, Any]:
    return {"energy_j": out["total"], "energy_breakdown_j": {k: out[k] for k in BREAKDOWN},
            "average_power_w": out["total"] / time_s if time_s > 0 else 0.0}


def dram_counts(result: Any) -> tuple[dict[str, int], str]:
    """Commands of a :class:`sievesim.dram.engine.DRAMResult` by name, and how they were found:
    ``"log"`` (the command log, exact) or ``"derived"`` (no log: ACT = row misses + conflicts,
    RD = reads not forwarded, WR = writes, REFab = refreshes, the rest of ``commands`` PRE)."""
    log = getattr(result, "command_log", None)
    if log is not None:
        names = list(log["names"])
        out: dict[str, int] = {}
        import numpy as np
        issued = np.bincount(np.asarray(log["command"], dtype=np.int64), minlength=len(names))
        for i, n in enumerate(names):
            if issued[i]:
                out[n] = int(issued[i])
        return out, "log"
    act = int(result.row_misses + result.row_conflicts)
    rd = int(result.reads - result.forwarded_reads)
    wr = int(result.writes)
    ref = int(result.refreshes)
    pre = max(0, int(result.commands) - act - rd - wr - ref)
    return {"ACT": act, "PRE": pre, "RD": rd, "WR": wr, "REFab": ref}, "derived"


def dram_energy(result: Any, config: Any) -> dict[str, Any]:
    """Energy of one ``dram run`` (a DRAMResult on ``config``): ``energy_j`` [J], its breakdown,
    ``average_power_w`` [W] over the run, ``energy_counts`` (how the commands were counted) and
    ``energy_background`` (``"residency"``: the engine's active/precharge standby cycles;
    ``"nRC per ACT"``: the lower bound for a result without them)."""
    counts, how = dram_counts(result)
    e = command_energies(config)
    time_s = result.time_ns * 1e-9
    res = getattr(result, "residency", None)
    if res is not None:
        units = int(res["units"])
        active_s = res["active_standby_cycles"] * config.tck_ns * 1e-9
        background = "residency"
    else:
        units = config.num_controllers
        active_s = counts.get("ACT", 0) * int(config.timings["nRC"]) * config.tck_ns * 1e-9
        background = "nRC per ACT"
    out = _power(energy_of_counts(counts, e, time_s=time_s, controllers=units, active_s=active_s), time_s)
    out["energy_counts"] = how
    out["energy_background"] = background
    return out


def pim_counts(result: Any) -> dict[str, int]:
    """PIM commands of a :class:`sievesim.pim.engine.PIMResult` by name (all simulated copies)."""
    return {"ACTAB": int(result.activations), "PREAB": int(result.precharges), "MACAB": int(result.macabs),
            "GWRITE": int(result.gwrites), "RDRES": int(result.rdres), "REFab": int(result.refreshes)}


def pim_energy(result: Any, config: Any, *, pcs: int, banks_per_pu: int = 1, macs_per_command: int = 16,
               duration_s: float | None = None, operand_bytes: float = 2.0) -> dict[str, Any]:
    """Energy of a PIM job spread over ``pcs`` pseudo-channels whose one-channel program ran as
    ``result`` (the engine runs the program once per refresh phase: counts are divided by the
    copies, then multiplied by ``pcs``; refresh at its average rate, one REFab per nREFI per
    pseudo-channel over the job). Background: ``pcs`` pseudo-channels in active standby
    for ``duration_s`` (default: the result's time). Returns as :func:`dram_energy` plus
    ``mac_ops`` (multiply-accumulates done)."""
    copies = max(1, len(result.per_unit_busy_cycles))
    e = command_energies(config, banks_per_pu=banks_per_pu, macs_per_command=macs_per_command,
                         operand_bytes=operand_bytes)
    counts = {k: v * pcs / copies for k, v in pim_counts(result).items() if k != "REFab"}
    time_s = result.time_ns * 1e-9 if duration_s is None else duration_s
    # refresh at its average rate (one REFab per nREFI per pseudo-channel): the copies start at
    # chosen refresh phases, so their own refresh count says where they started, not what they cost
    counts["REFab"] = pcs * time_s / (int(config.timings["nREFI"]) * config.tck_ns * 1e-9)
    out = _power(energy_of_counts(counts, e, time_s=time_s, controllers=pcs, active_s=pcs * time_s), time_s)
    out["mac_ops"] = counts["MACAB"] * e.macs_per_macab
    return out
