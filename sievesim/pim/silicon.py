"""GEMVs as Samsung's HBM-PIM kernel tiles them, for the side by side with its public simulator
(SAITPublic/PIMSimulator; ``benchmarks/pimsimulator_side_by_side.py``, docs/validation.md,
"PIM against silicon").

Samsung's GEMV kernel (PIMSimulator ``PIMKernel::executeGemv``) splits the outputs across every
PIM pseudo-channel and never the input (each PU's GRF_B holds 8 outputs while 8-burst input tiles
go by in its GRF_A), so these programs take ``pcs_in = 1`` instead of the planner's choice. Cycles
are command-clock cycles (tCK), the mean over the device's refresh phases plus its
``mode_switch_cycles``.
"""
from __future__ import annotations

from .device import PIMDevice
from .program import OP_MACAB, gemv_program, gemv_row_openings, plan_gemv

__all__ = ["SHAPES", "PIM_CHANNELS", "KERNEL_OUTPUT_TILE", "samsung_tiled_gemv", "gemv_table"]

#: OUT x IN shapes of the comparison (issue 71: 128 x 1024 to 8192 x 4096).
SHAPES = ((128, 1024), (1024, 1024), (1024, 4096), (4096, 1024), (4096, 4096), (8192, 4096))
#: PIM pseudo-channels of PIMSimulator's GEMV benchmark (``PIMBenchTestCase``: 64 PIM channels of
#: 8 PUs, one rank): four Aquabolt-XL cubes of 16.
PIM_CHANNELS = 64
#: Outputs of one tile of Samsung's GEMV kernel: 8 outputs (GRF_B) on each of the 512 PUs of 64
#: channels; the kernel computes whole tiles, OUT rounded up with zero rows
#: (``PIMKernel::executeGemv``: ``num_output_tiles = ceil(OUT / 512 / 8)``).
KERNEL_OUTPUT_TILE = 4096


def samsung_tiled_gemv(device: PIMDevice, out_dim: int, in_dim: int, pcs: int = PIM_CHANNELS,
                       whole_tiles: bool = False) -> dict:
    """One FP16 GEMV of ``out_dim`` x ``in_dim`` (one input vector) on ``pcs`` pseudo-channels of
    ``device``, outputs only across them. Returns ``cycles`` [tCK], ``time_us`` [us],
    ``activations`` (ACTAB of one pseudo-channel, refresh re-openings included, mean over the
    simulated phases), ``rows`` (the rows the layout opens, by :func:`gemv_row_openings`) and
    ``macabs`` (MAC commands of one pseudo-channel). ``whole_tiles``: OUT rounded up to
    :data:`KERNEL_OUTPUT_TILE` outputs, as Samsung's kernel computes it."""
    if whole_tiles:
        out_dim = -(-int(out_dim) // KERNEL_OUTPUT_TILE) * KERNEL_OUTPUT_TILE
    geo = device.geometry
    plan = plan_gemv(int(in_dim), int(out_dim), 1, int(pcs), geo, dict(device.config.timings), pcs_in=1)
    program = gemv_program(plan, geo)
    res = device.run(program, int(pcs))
    copies = max(1, len(res.per_unit_busy_cycles))
    cycles = device.program_cycles(res, int(pcs))
    return {"cycles": cycles, "time_us": cycles * device.tck_s * 1e6, "activations": res.activations / copies,
            "rows": gemv_row_openings(plan, geo), "macabs": int((program[0] == OP_MACAB).sum())}


def gemv_table(hardware: str = "aquabolt-xl", shapes=SHAPES, theirs: dict | None = None,
               pcs: int = PIM_CHANNELS) -> list[str]:
    """Markdown rows: ours per shape on ``hardware``; the host's time to read the FP16 weights once
    at its HBM bandwidth (``gpu.effective_bandwidth_bytes_per_s``: the GEMV without PIM, a lower
    bound) and its ratio to ours (the speedup PIM gives a host that streams at that bandwidth);
    PIMSimulator's PIM cycles where ``theirs`` ({(out, in): cycles}) has them, and over them ours
    for the GEMV asked and ours for the GEMV Samsung's kernel computes (whole 4096-output tiles)."""
    from ..hardware import get_hardware

    hw = get_hardware(hardware)
    device = PIMDevice.from_hardware(hw)
    theirs = theirs or {}
    rows = ["| OUT x IN | ours (cycles) | ours (us) | ACTAB (with refresh) / rows by hand | MAC commands "
            "| host reads W (us) | host / ours | PIMSimulator (cycles) | ours / PIMSimulator | ours, whole tiles (cycles) "
            "| ours, whole tiles / PIMSimulator |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    for out_dim, in_dim in shapes:
        o = samsung_tiled_gemv(device, out_dim, in_dim, pcs)
        host_us = out_dim * in_dim * device.operand_bytes / hw.gpu.effective_bandwidth_bytes_per_s * 1e6
        t = theirs.get((out_dim, in_dim))
        ratio = f"{o['cycles'] / t:.2f}" if t else "-"
        whole = o if out_dim % KERNEL_OUTPUT_TILE == 0 else samsung_tiled_gemv(device, out_dim, in_dim, pcs, True)
        whole_ratio = f"{whole['cycles'] / t:.2f}" if t else "-"
        rows.append(f"| {out_dim} x {in_dim} | {o['cycles']:.0f} | {o['time_us']:.2f} | {o['activations']:.1f} / "
                    f"{o['rows']} | {o['macabs']} | {host_us:.2f} | {host_us / o['time_us']:.2f} | {t or '-'} | {ratio} "
                    f"| {whole['cycles']:.0f} | {whole_ratio} |")
    return rows
