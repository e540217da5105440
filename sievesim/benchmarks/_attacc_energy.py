"""AttAcc's PIM energy of an attention head, evaluated from its source, beside sievesim's (docs/validation.md, section 5).

AttAcc (scale-snu/attacc_simulator at c600051) prices a bank-PIM attention layer
(``src/devices.py``, ``PIM.get_time_and_energy``, lines 330-346) from the command counts its
Ramulator run reports, turned into bytes moved (``src/ramulator_wrapper.py``, ``Ramulator.run``,
lines 186-213):

* ``mem_acc = mac x 32 x (2 x 2 x 4 x 4)`` bytes: each all-bank MAC reads 32 bytes in each of a
  legacy channel's 64 banks (lines 192-195);
* ``si_io = wrgb x 32``; ``tsv_io = giomux_io = bgmux_io = (wrgb + mvsb + mvgb) x 32`` (lines 188-191);
* cell energy ``mem_acc x ENERGY_TABLE['PIM'][BA]['mem']`` = (0.11 + 0.44) x 8 pJ per byte
  (``src/config.py`` line 47; devices.py lines 340-341);
* I/O ``si_io x 0.3 + tsv_io x 0.5 + giomux_io x 1.23 + bgmux_io x 1.01`` (config.py line 62;
  devices.py lines 336-338): per-bit figures applied to bytes, as the source does;
* ALU ``layer.get_flops() / 2 x 0.32`` (config.py line 58; devices.py line 343) of the score
  layer only (``get_time_and_energy`` prices the score layer with the whole Ramulator run and
  returns 0 for the context layer): 2 x L x dhead x heads FLOPs;
* no refresh and no background.

The command counts are those of AttAcc's own trace generator (``pim_ramulator_src/trace_gen/
gen_trace_attacc_bank.py``): :func:`attacc_counts` gives them from its loop bounds, and
``benchmarks/attacc_energy_side_by_side.py --attacc DIR`` checks them against the generator's
output. AttAcc's Ramulator reports the same MAC, MV_SB and WR_GB counts as the trace holds (its
shipped ``ramulator.out``, L = 128, 2050 heads: 65 616, 49 200, 16 400, as the generator writes).

sievesim's side is section 4's: the same organisation and timing (:data:`ATTACC_TOML`), one head
per legacy channel as the two GEMVs back to back over its 2 pseudo-channels, priced by
:func:`sievesim.dram.energy.pim_energy`.
"""
from __future__ import annotations

import math
import pathlib
import tempfile
from typing import Any

__all__ = ["attacc_counts", "attacc_energy", "sievesim_energy", "ATTACC_TOML", "COMPONENTS"]

#: Components compared (AttAcc's cell energy split into its ACT/PRE and RD parts).
COMPONENTS = ("activation", "mac", "io", "refresh_background")

# AttAcc src/config.py lines 37-64 and gen_trace_attacc_bank.py lines 13-24 (HBM3 organisation)
_CELL_ACT, _CELL_RD, _ALU = 0.11, 0.44, 0.32
_IO = (0.3, 0.5, 1.23, 1.01)          # silicon interposer, TSV, global I/O mux, bank-group mux [pJ/bit]
_N_PCH, _N_RANK, _N_BG, _N_BANK, _N_MAC, _N_CHANNEL = 2, 2, 4, 4, 16, 16
_BANKS_PER_CHANNEL = _N_PCH * _N_RANK * _N_BG * _N_BANK
_GRAIN = 32                           # bytes per access (prefetch_size)

#: Section 4's DRAM file: hbm3-6400's organisation with AttAcc's HBM3_5.2Gbps timing preset.
ATTACC_TOML = """\
base = "hbm3-6400"
[timing]
rate = 5200
tCK_ps = 769
nBL = 2
nCL = 19
nCWL = 6
nRCDRD = 19
nRCDWR = 19
nRP = 19
nRAS = 45
nRC = 63
nWR = 21
nRTPS = 6
nRTPL = 8
nCCDS = 2
nCCDL = 4
nRRDS = 2
nRRDL = 4
nWTRS = 8
nWTRL = 11
nRTW = 3
nFAW = 39
nRFC = 456
nREFI = 5070
nCCDAB = 6
"""


def attacc_counts(seqlen: int, dhead: int = 128, heads: int = 16) -> dict[str, int]:
    """Commands of AttAcc's bank-PIM trace for ``heads`` heads on one HBM, from
    gen_trace_attacc_bank.py's loops: score_cpvec (WR_GB), score_mac (MAC_AB, MV_SB every 16
    outputs), softmax (SFM), context_cpvec (MV_GB), context_mac (MAC_AB, MV_SB). Only ``heads`` =
    16, one head per channel: with more, the generator overlaps pairs of heads and adds dummy MACs."""
    if heads != _N_CHANNEL:
        raise ValueError(f"heads = {heads}: expected {_N_CHANNEL} (one head per channel)")
    ch = heads                                    # channel-iterations: one head per channel each
    k_score = math.ceil(dhead / _N_BANK / _N_MAC)
    n_score = math.ceil(seqlen / _N_PCH / _N_RANK / _N_BG)
    wrgb = _N_BANK * k_score * ch
    mac_score = n_score * k_score * ch
    mvsb_score = math.ceil(n_score / 16) * _N_BG * _N_RANK * ch
    mvgb = _N_RANK * _N_BG * math.ceil(seqlen / (_N_PCH * _N_RANK * _N_BG * _N_MAC)) * ch
    n_ctx = math.ceil(dhead / (_N_BANK * _N_MAC))
    mac_ctx = n_ctx * n_score * ch
    mvsb_ctx = n_ctx * _N_BANK * _N_RANK * ch
    return {"mac": mac_score + mac_ctx, "wrgb": wrgb, "mvsb": mvsb_score + mvsb_ctx, "mvgb": mvgb, "sfm": ch}


def attacc_energy(counts: dict[str, int], seqlen: int, dhead: int = 128, heads: int = 16) -> dict[str, float]:
    """AttAcc's energy [J] of its command ``counts``, by component (:data:`COMPONENTS`, ``total``)."""
    mem_acc = counts["mac"] * _GRAIN * _BANKS_PER_CHANNEL
    moved = (counts["wrgb"] + counts["mvsb"] + counts["mvgb"]) * _GRAIN
    traffic = (counts["wrgb"] * _GRAIN, moved, moved, moved)
    io = sum(t * e for t, e in zip(traffic, _IO))
    flops = 2 * 1 * seqlen * dhead * heads       # the score layer's get_flops()
    out = {"activation": mem_acc * _CELL_ACT * 8 * 1e-12, "mac": (mem_acc * _CELL_RD * 8 + flops / 2 * _ALU) * 1e-12,
           "io": io * 1e-12, "refresh_background": 0.0}
    out["total"] = sum(out[k] for k in COMPONENTS)
    return out


def sievesim_energy(seqlen: int, dhead: int = 128, heads: int = 16) -> dict[str, Any]:
    """sievesim's energy [J] of the same heads: one head per legacy channel (its 2 pseudo-channels),
    the score GEMV (dhead -> L) and the context GEMV (L -> dhead) back to back, refresh aligned
    and the all-bank MAC every 6 cycles as in section 4; by component, plus ``macs`` (executed)."""
    from ..dram.energy import pim_energy
    from ..pim.device import PIMDevice, gemv_sequence

    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "attacc-hbm3-5200.toml"
        path.write_text(ATTACC_TOML, encoding="utf-8")
        dev = PIMDevice(dram_config=str(path), stacks=1, refresh="aligned", macab_interval_cycles=6)
        res = gemv_sequence(dev, [(dhead, seqlen, 1), (seqlen, dhead, 1)], 2)
        e = pim_energy(res, dev.config, pcs=2, banks_per_pu=dev.banks_per_pu, macs_per_command=dev.macs_per_command,
                       duration_s=dev.program_cycles(res, 2) * dev.tck_s)
    b = e["energy_breakdown_j"]
    out = {"activation": b["pim_activation"] * heads, "mac": b["pim_mac"] * heads, "io": b["pim_transfer"] * heads,
           "refresh_background": (b["refresh"] + b["background"]) * heads}
    out["total"] = sum(out[k] for k in COMPONENTS)
    out["macs"] = e["mac_ops"] * heads
    return out
