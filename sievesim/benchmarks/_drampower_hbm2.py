"""DRAMPower's HBM2 core energy, re-implemented on sievesim's command log (docs/validation.md, section 5).

DRAMPower's released versions (up to v6.2.0) model no HBM standard; its branch ``feat/hbm``
(tukl-msd/DRAMPower at d07e9b9, 2026-03-03) adds one, whose core energy is
``src/DRAMPower/DRAMPower/standards/hbm2/core_calculation_HBM2.cpp`` (the formulas below, with
their names there) on the state counters of ``HBM2Core.cpp``. That branch builds only against a
DRAMUtils branch (``feat/hbm2_drampower``, for its HBM2 power memspec) that could not be obtained
here, so this module evaluates the same formulas in Python on the counters a replay of sievesim's
command log gives, following ``HBM2Core.cpp``'s rules:

* ACT opens a bank (``counter.act``; the bank's active interval and its pseudo-channel's start);
* PRE closes one (``counter.pre``); PREA every open bank of the pseudo-channel; a pseudo-channel's
  active interval closes when its last bank does;
* RD/WR count ``reads``/``writes`` (RDA/WRA would close the bank after tRAS/tRTP; the engine's
  standards here issue none);
* REFab: every bank of the pseudo-channel active for tRFC and ``refAllBank`` + 1 at the command,
  as the released standards do (v6.2.0 ``standards/ddr4/DDR4Core.cpp``, ``handleRefAll``, lines
  103-119). The branch's HBM2 code differs, by what look like defects of unfinished work: its
  ``handleRefreshOnBank`` leaves the bank precharged, so the implicit PRE at the refresh's end
  returns at once (no ``refAllBank`` count, an active interval never closed), and
  ``MemSpecHBM2.cpp`` never reads ``idd5B`` (``iXX5X`` stays 0);
* at the end, what is still open is closed at the run's last cycle.

Energies (per pseudo-channel of B banks; times in seconds, currents in amperes)::

    I_rho   = rho (IDD3N - IDD2N) + IDD2N
    I_theta = (IDD0 (tRP + tRAS) - IBeta tRP) / tRAS
    I_1     = (IDD3N + (B - 1) I_rho) / B
    E_act   = VDD (I_theta - I_1) tRAS  per ACT          E_pre = VDD (IBeta - IDD2N) tRP per PRE
    E_RD    = VDD (IDD4R - IDD3N) BL/DR tCK per RD       E_WR  = VDD (IDD4W - IDD3N) BL/DR tCK per WR
    E_ref   = VDD (IDD5B - IDD3N) tRFC per REFab (B banks x 1/B)
    E_bg    = VDD I_rho T_act(pc) + VDD (IDD3N - I_rho) / B x sum over banks T_act(bank)
              + VDD IDD2N T_pre(pc)

DRAMPower's interface (I/O) energy is not modelled here: the branch's HBM2 fixture has placeholder
impedances. The comparison is therefore of the core (ACT/PRE, RD/WR, refresh, background).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["MemPower", "FIXTURE", "memspec_matching_ours", "replay", "core_energy", "COMPONENTS"]

#: Components compared with sievesim's breakdown (ours: activation, read_write, refresh, background).
COMPONENTS = ("activation", "read_write", "refresh", "background")


@dataclass(frozen=True)
class MemPower:
    """DRAMPower's ``mempowerspec`` (VDD domain; VPP currents 0 as in the HBM2 fixture) [V, A]."""

    vdd: float
    idd0: float
    idd2n: float
    idd3n: float
    idd4r: float
    idd4w: float
    idd5b: float
    ibeta: float
    rho: float            # bankwisespec.factRho


#: DRAMPower's HBM2 fixture (feat/hbm, tests/tests_drampower/resources/hbm2.json), except IDD3N:
#: the fixture's 350 mA is above its IDD0 (56 mA) and IDD4R (157 mA), which makes every read's
#: energy negative; it is replaced by sievesim's derivation, IDD2N x 1.15 (DRAMPower's Micron
#: DDR4-2400 IDD3N / IDD2N, docs/energy.md).
FIXTURE = MemPower(vdd=1.2, idd0=56.0e-3, idd2n=33.0e-3, idd3n=33.0e-3 * 44.0 / 38.25, idd4r=157.0e-3,
                   idd4w=135.0e-3, idd5b=118.0e-3, ibeta=56.0e-3, rho=0.0)


def _times(config: Any) -> dict[str, float]:
    t, tck = config.timings, config.tck_ns * 1e-9
    return {"tCK": tck, "tRAS": t["nRAS"] * tck, "tRP": t["nRP"] * tck, "tRFC": max(0, t["nRFC"]) * tck,
            "burst": t["nBL"] * tck}


def _banks_per_pc(config: Any) -> int:
    lv = config.standard.levels
    return int(np.prod([config.org[x] for x in lv[lv.index("pseudochannel") + 1: lv.index("row")]]))


def memspec_matching_ours(config: Any, vdd: float = 1.2) -> MemPower:
    """IDD values for which DRAMPower's formulas price each command and each standby state as
    sievesim's energy model does (factRho = 1, so a pseudo-channel with a bank open draws IDD3N):
    with these, the two agree exactly when their counts and their state residency agree."""
    from ..dram.energy import command_energies

    e = command_energies(config)
    tm = _times(config)
    idd2n = e.precharge_standby_mw * 1e-3 / vdd
    idd3n = e.active_standby_mw * 1e-3 / vdd
    ibeta = idd2n                                         # E_pre = 0: our ACT figure covers the PRE
    i_theta = e.per_command["ACT"] * 1e-12 / (vdd * tm["tRAS"]) + idd3n
    idd0 = (i_theta * tm["tRAS"] + ibeta * tm["tRP"]) / (tm["tRP"] + tm["tRAS"])
    idd4r = idd3n + e.per_command["RD"] * 1e-12 / (vdd * tm["burst"])
    idd4w = idd3n + e.per_command["WR"] * 1e-12 / (vdd * tm["burst"])
    idd5b = idd3n + (e.per_command["REFab"] * 1e-12 / (vdd * tm["tRFC"]) if tm["tRFC"] else 0.0)
    return MemPower(vdd=vdd, idd0=idd0, idd2n=idd2n, idd3n=idd3n, idd4r=idd4r, idd4w=idd4w, idd5b=idd5b,
                    ibeta=ibeta, rho=1.0)


def replay(result: Any, config: Any) -> dict[str, Any]:
    """DRAMPower's counters from a run's command log (``simulate(..., log_commands=True)``):
    per-bank ``act``, ``pre``, ``reads``, ``writes``, ``ref`` counts and active cycles, per
    pseudo-channel active and precharged cycles (up to ``result.cycles``)."""
    log = result.command_log
    if log is None:
        raise ValueError("replay needs the command log: simulate(..., log_commands=True)")
    lv = config.standard.levels
    n_pc_lv, n_bank_lv = lv.index("pseudochannel") + 1, lv.index("row")
    radix = [int(config.org[x]) for x in lv[:n_bank_lv]]
    bpc = _banks_per_pc(config)
    n_banks = int(np.prod(radix))
    n_pc = n_banks // bpc
    rfc = max(0, int(config.timings["nRFC"]))
    end = int(result.cycles)
    names = list(log["names"])
    bank_idx = np.ravel_multi_index(tuple(np.asarray(log["addr"])[:, :n_bank_lv].T.clip(0)), radix) \
        if len(log["cycle"]) else np.zeros(0, np.int64)
    counts = {k: np.zeros(n_banks, np.int64) for k in ("act", "pre", "reads", "writes", "ref")}
    bank_act = np.zeros(n_banks, np.int64)
    bank_open = np.full(n_banks, -1, np.int64)         # start of the open interval, -1 closed
    pc_act = np.zeros(n_pc, np.int64)
    pc_open = np.zeros(n_pc, np.int64)                 # banks active now
    pc_since = np.zeros(n_pc, np.int64)
    pending: list[tuple[int, int]] = []               # (cycle, bank) implicit PRE at a refresh's end

    def open_bank(b: int, t: int) -> None:
        p = b // bpc
        if pc_open[p] == 0:
            pc_since[p] = t
        pc_open[p] += 1
        bank_open[b] = t

    def close_bank(b: int, t: int) -> bool:
        if bank_open[b] < 0:
            return False
        bank_act[b] += t - bank_open[b]
        bank_open[b] = -1
        p = b // bpc
        pc_open[p] -= 1
        if pc_open[p] == 0:
            pc_act[p] += t - pc_since[p]
        return True

    def settle(t: int) -> None:
        while pending and pending[0][0] <= t:
            c, b = pending.pop(0)
            close_bank(b, c)

    addr = np.asarray(log["addr"])
    for clk, k, b, a in zip(np.asarray(log["cycle"]).tolist(), np.asarray(log["command"]).tolist(),
                            bank_idx.tolist(), addr):
        settle(clk)
        name = names[k]
        if name in ("ACT",):
            if bank_open[b] < 0:
                counts["act"][b] += 1
                open_bank(b, clk)
        elif name == "PRE":
            if close_bank(b, clk):
                counts["pre"][b] += 1
        elif name in ("RD", "WR"):
            counts["reads" if name == "RD" else "writes"][b] += 1
        elif name in ("PREA", "REFab"):
            first = int(np.ravel_multi_index(tuple(a[:n_pc_lv]), radix[:n_pc_lv])) * bpc
            for bb in range(first, first + bpc):
                if name == "PREA":
                    if close_bank(bb, clk):
                        counts["pre"][bb] += 1
                else:
                    counts["ref"][bb] += 1
                    if bank_open[bb] < 0:
                        open_bank(bb, clk)
                    pending.append((clk + rfc, bb))
            pending.sort()
        else:
            raise ValueError(f"replay: command {name} is not in DRAMPower's HBM2 core model here")
    settle(end)
    for b in np.flatnonzero(bank_open >= 0):
        close_bank(int(b), end)
    pc_pre = end - pc_act
    return {"counts": counts, "bank_active_cycles": bank_act, "pc_active_cycles": pc_act,
            "pc_pre_cycles": pc_pre, "banks_per_pc": bpc}


def core_energy(stats: dict[str, Any], power: MemPower, config: Any) -> dict[str, float]:
    """DRAMPower's HBM2 core energy [J] of the replayed counters ``stats`` with ``power``, by
    component (:data:`COMPONENTS`, plus ``total``): core_calculation_HBM2.cpp's E_act + E_pre,
    E_RD + E_WR, E_ref_ab and E_bg_act_shared + E_bg_act_star + E_bg_pre, summed over banks."""
    tm = _times(config)
    p, c = power, stats["counts"]
    B = stats["banks_per_pc"]
    i_rho = p.rho * (p.idd3n - p.idd2n) + p.idd2n
    i_theta = (p.idd0 * (tm["tRP"] + tm["tRAS"]) - p.ibeta * tm["tRP"]) / tm["tRAS"]
    i_1 = (p.idd3n + (B - 1) * i_rho) / B
    e_act = p.vdd * (i_theta - i_1) * tm["tRAS"] * int(c["act"].sum())
    e_pre = p.vdd * (p.ibeta - p.idd2n) * tm["tRP"] * int(c["pre"].sum())
    e_rd = p.vdd * (p.idd4r - p.idd3n) * tm["burst"] * int(c["reads"].sum())
    e_wr = p.vdd * (p.idd4w - p.idd3n) * tm["burst"] * int(c["writes"].sum())
    e_ref = p.vdd * (p.idd5b - p.idd3n) * tm["tRFC"] * int(c["ref"].sum()) / B
    tck = tm["tCK"]
    e_bg = (p.vdd * i_rho * int(stats["pc_active_cycles"].sum()) * tck
            + p.vdd * (p.idd3n - i_rho) / B * int(stats["bank_active_cycles"].sum()) * tck
            + p.vdd * p.idd2n * int(stats["pc_pre_cycles"].sum()) * tck)
    out = {"activation": e_act + e_pre, "read_write": e_rd + e_wr, "refresh": e_ref, "background": e_bg}
    out["total"] = sum(out[k] for k in COMPONENTS)
    return out
