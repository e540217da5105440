"""Energy per bit and per MAC against the published figures (the tables of docs/validation.md, "Energy").

    python -m sievesim.benchmarks energy-validation

Rows: a read that reaches the GPU (per bit), measured on the engine for a streamed and a random
trace, against O'Connor et al.'s per-bit path as the AttAcc simulator tabulates it; a bank-PIM
multiply-accumulate (per MAC), measured on GEMVs, against AttAcc's bank-PIM energy per weight.
"""
from __future__ import annotations

import argparse

__all__ = ["read_rows", "mac_rows", "main"]

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


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(prog="python -m sievesim.benchmarks energy-validation",
                            description=__doc__.splitlines()[0]).parse_args(argv)
    print("| workload | commands only (pJ/bit) | with refresh and background (pJ/bit) | published (pJ/bit) | ours / published |")
    print("|---|---|---|---|---|")
    print("\n".join(read_rows()))
    print()
    print("| workload | ACTAB + MACAB commands (pJ per useful MAC) | whole job (pJ per useful MAC) | published (pJ/MAC) | ours / published |")
    print("|---|---|---|---|---|")
    print("\n".join(mac_rows()))
    return 0
