"""Energy per bit and per MAC against the published figures (the tables of docs/validation.md, "Energy").

    python -m sievesim.benchmarks energy-validation

Rows: a read that reaches the GPU (per bit), measured on the engine for a streamed and a random
trace, against O'Connor et al.'s per-bit path as the AttAcc simulator tabulates it; a bank-PIM
multiply-accumulate (per MAC), measured on GEMVs, against AttAcc's bank-PIM energy per weight;
DRAMPower's HBM2 core formulas on the engine's command log, per component (with IDD values
matching ours, and with DRAMPower's HBM2 fixture); AttAcc's PIM energy of attention heads from
its source's formulas and its trace generator's counts, per component, beside sievesim's.
"""
from __future__ import annotations

import argparse

__all__ = ["read_rows", "mac_rows", "drampower_rows", "attacc_rows", "main"]

#: O'Connor et al. (MICRO 2017) via AttAcc src/config.py, pJ/bit: a read that reaches the GPU.
PUBLISHED_READ_PJ_PER_BIT = 0.11 + 0.44 + 1.01 + 1.23 + 0.5 + 0.3
#: AttAcc's bank-PIM energy of one bf16 weight: cell ACT/PRE + RD/WR (0.55 pJ/bit x 16 bits) + ALU 0.32 pJ.
PUBLISHED_BANK_PIM_PJ_PER_MAC = (0.11 + 0.44) * 16 + 0.32


def read_rows(requests: int = 20000) -> list[str]:
    """Table rows: energy per bit read of ``dram run`` (hbm3e-8000, reads only) per trace."""
    import dataclasses

    import numpy as np

    from ..dram.config import get_config
    from ..dram.energy import dram_energy
    from ..dram.engine import simulate
    from ..dram.synthetic import parse_synthetic

    cfg = get_config("hbm3e-8000")
    rows = []
    for kind in ("stream", "random"):
        t = parse_synthetic(f"synthetic:{kind}:{requests}", cfg, seed=1)
        t = dataclasses.replace(t, is_write=np.zeros(len(t), dtype=bool))
        res = simulate(cfg, t, log_commands=True)
        e = dram_energy(res, cfg)
        bits = res.reads * cfg.tx_bytes * 8
        parts = e["energy_breakdown_j"]
        dyn = (parts["activation"] + parts["read_write"] + parts["io"]) / bits * 1e12
        total = e["energy_j"] / bits * 1e12
        rows.append(f"| read, {kind} ({requests} requests) | {dyn:.2f} | {total:.2f} | "
                    f"{PUBLISHED_READ_PJ_PER_BIT:.2f} | {total / PUBLISHED_READ_PJ_PER_BIT:.2f}x |")
    return rows


def mac_rows(shapes: tuple[tuple[int, int, int], ...] = ((4096, 4096, 1), (4096, 4096, 8), (2880, 5760, 1))
             ) -> list[str]:
    """Table rows: energy per MAC of ``pim gemv`` on the b200 preset, tensor-parallel over the GPU."""
    from ..dram.energy import pim_energy
    from ..hardware import get_hardware
    from ..pim.expert import PIMDevice, gemv

    dev = PIMDevice.from_hardware(get_hardware("b200"))
    pcs = dev.unit_pcs("gpu")
    rows = []
    for d_in, d_out, tokens in shapes:
        res = gemv(dev, d_in, d_out, tokens, pcs)
        e = pim_energy(res, dev.config, pcs=pcs, banks_per_pu=dev.banks_per_pu,
                       macs_per_command=dev.macs_per_command,
                       duration_s=dev.program_cycles(res, pcs) * dev.tck_s)
        useful = d_in * d_out * tokens
        parts = e["energy_breakdown_j"]
        mac_only = (parts["pim_mac"] + parts["pim_activation"]) / useful * 1e12
        total = e["energy_j"] / useful * 1e12
        rows.append(f"| GEMV {d_in}x{d_out}, {tokens} token(s) | {mac_only:.2f} | {total:.2f} | "
                    f"{PUBLISHED_BANK_PIM_PJ_PER_MAC:.2f} | {total / PUBLISHED_BANK_PIM_PJ_PER_MAC:.2f}x |")
    return rows


def drampower_rows(requests: int = 20000) -> list[str]:
    """Table rows: ``dram run`` energy on hbm2-2000 per component [uJ], ours against DRAMPower's
    HBM2 core formulas on the same command log (:mod:`._drampower_hbm2`), with the IDD values that
    match our model (the accounting check) and with DRAMPower's HBM2 fixture (the model check)."""
    from ..dram.config import get_config
    from ..dram.energy import dram_energy
    from ..dram.engine import simulate
    from ..dram.synthetic import parse_synthetic
    from . import _drampower_hbm2 as dp

    cfg = get_config("hbm2-2000")
    rows = []
    for kind in ("stream", "random"):
        res = simulate(cfg, parse_synthetic(f"synthetic:{kind}:{requests}", cfg, seed=1), log_commands=True)
        ours = dram_energy(res, cfg)["energy_breakdown_j"]
        stats = dp.replay(res, cfg)
        matched = dp.core_energy(stats, dp.memspec_matching_ours(cfg), cfg)
        fixture = dp.core_energy(stats, dp.FIXTURE, cfg)
        for k in dp.COMPONENTS + ("total",):
            o = sum(ours[c] for c in dp.COMPONENTS) if k == "total" else ours[k]
            d = matched[k] / o - 1
            rows.append(f"| {kind}, {'core total' if k == 'total' else k} | {o * 1e6:.3f} | {matched[k] * 1e6:.3f} | "
                        f"{f'{d:+.1e}' if abs(d) >= 1e-12 else '0'} | {fixture[k] * 1e6:.3f} | {fixture[k] / o:.2f}x |")
    return rows


def attacc_rows(seqlens: tuple[int, ...] = (512, 2048)) -> list[str]:
    """Table rows: 16 attention heads (dhead 128) on one HBM3 stack, energy per useful MAC
    [pJ] by component, AttAcc's (:mod:`._attacc_energy`) against sievesim's."""
    from . import _attacc_energy as aa

    rows = []
    for seqlen in seqlens:
        theirs = aa.attacc_energy(aa.attacc_counts(seqlen), seqlen)
        ours = aa.sievesim_energy(seqlen)
        useful = 2 * seqlen * 128 * 16
        for k in aa.COMPONENTS + ("total",):
            t, o = theirs[k] / useful * 1e12, ours[k] / useful * 1e12
            ratio = f"{o / t:.2f}x" if t else "-"
            rows.append(f"| L = {seqlen}, {k} | {t:.3f} | {o:.3f} | {ratio} |")
    return rows


#: The tables, in print order: header cells and the function that makes the rows.
TABLES = (
    (("workload", "commands only (pJ/bit)", "with refresh and background (pJ/bit)", "published (pJ/bit)",
      "ours / published"), read_rows),
    (("workload", "ACTAB + MACAB commands (pJ per useful MAC)", "whole job (pJ per useful MAC)",
      "published (pJ/MAC)", "ours / published"), mac_rows),
    (("trace, component", "ours (uJ)", "DRAMPower formulas, matched IDDs (uJ)", "matched / ours - 1",
      "DRAMPower formulas, HBM2 fixture (uJ)", "fixture / ours"), drampower_rows),
    (("heads, component", "AttAcc (pJ per useful MAC)", "sievesim (pJ per useful MAC)", "sievesim / AttAcc"),
     attacc_rows),
)


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(prog="python -m sievesim.benchmarks energy-validation",
                            description=__doc__.splitlines()[0]).parse_args(argv)
    for i, (header, rows) in enumerate(TABLES):
        if i:
            print()
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        print("\n".join(rows()))
    return 0
