"""PIM against silicon: the GEMV layout opens each weight row once for every global-buffer size
(Samsung's order), counted by hand; the planner's estimate sees the same rows."""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from sievesim.pim import gemv_program, geometry_for, pim_config, plan_gemv, run_programs
from sievesim.pim.program import OP_MACAB, PIMGeometry, gemv_row_openings

#: Samsung Aquabolt-XL's pseudo-channel (ISSCC 2021 / ISCA 2021): 16 banks, one PU per bank pair,
#: 16 FP16 lanes, 1 KB rows, 32 B bursts.
AQUABOLT_PC = dict(banks=16, banks_per_pu=2, macs_per_command=16, operand_bytes=2, row_bytes=1024, burst_bytes=32,
                   accumulators=8, multi_vector=False)
BUFFERS = [256, 512, 1024, 2048]


def _row_openings(program) -> int:
    """ACTABs the program needs without refresh: a MACAB to a row other than the open one."""
    ops, rc = program
    rows = rc[ops == OP_MACAB, 0]
    return int(np.count_nonzero(np.diff(rows))) + (1 if rows.size else 0)


def _mac_columns(program) -> np.ndarray:
    ops, rc = program
    return rc[ops == OP_MACAB]


@pytest.mark.parametrize("buffer", BUFFERS)
def test_4096_by_256_on_one_pseudo_channel_opens_each_row_once_for_every_buffer(buffer):
    # by hand: 256 outputs over 8 PUs = 32 per PU; a PU holds 32 x 4096 x 2 B = 256 KiB of weights
    # in rows of 2 x 1 KB (the bank pair's row, opened together): 128 rows, each opened once.
    # The layout before issue 71 (slot-major, read segment by segment) opened a row per slot and
    # segment: 32 x (8 KiB / buffer) = 1024, 512, 256, 128.
    geo = PIMGeometry(global_buffer_bytes=buffer, **AQUABOLT_PC)
    plan = plan_gemv(4096, 256, 1, 1, geo)
    assert (plan.slots, plan.steps_per_output, plan.segments) == (32, 256, 8192 // buffer)
    program = gemv_program(plan, geo)
    hand = 32 * 4096 * 2 // (2 * 1024)
    assert hand == 128
    assert _row_openings(program) == hand == gemv_row_openings(plan, geo)
    # every weight column is read exactly once, and the program's GWRITEs stream the input once per
    # slot block (32 slots in blocks of 8 accumulators: 4 blocks x 256 bursts)
    cols = _mac_columns(program)
    assert len({(int(r), int(c)) for r, c in cols}) == cols.shape[0] == 32 * 256
    assert np.count_nonzero(program[0] == 1) == 4 * 4096 * 2 // 32


@pytest.mark.parametrize("buffer", BUFFERS)
@pytest.mark.parametrize("d_in, d_out, banks_per_pu, tokens", [(3000, 500, 2, 1), (1000, 100, 1, 3),
                                                                 (4100, 70, 4, 2), (16, 8, 2, 4)])
def test_odd_shapes_open_the_hand_counted_rows(buffer, d_in, d_out, banks_per_pu, tokens):
    # a pass reads slots x ceil(d_in / 16) MAC columns of 16 x 2 B, 1 KB x banks_per_pu per PU row
    geo = PIMGeometry(**dict(AQUABOLT_PC, banks_per_pu=banks_per_pu, global_buffer_bytes=buffer))
    plan = plan_gemv(d_in, d_out, tokens, 1, geo)
    slots = math.ceil(d_out / (16 // banks_per_pu))
    columns = slots * math.ceil(d_in / 16)
    rows = math.ceil(columns / (1024 * banks_per_pu // 32))
    hand = rows if rows == 1 else rows * tokens
    program = gemv_program(plan, geo)
    assert _row_openings(program) == hand == gemv_row_openings(plan, geo)
    assert _mac_columns(program).shape[0] == columns * tokens


def test_the_layout_with_the_input_in_one_segment_is_the_slot_major_one():
    # one segment: slot s, step j at s x steps + j (the layout of every version before issue 71)
    geo = PIMGeometry(global_buffer_bytes=2048, **AQUABOLT_PC)
    plan = plan_gemv(1024, 100, 1, 1, geo)
    assert plan.segments == 1
    cols = _mac_columns(gemv_program(plan, geo))
    index = cols[:, 0].astype(np.int64) * geo.steps_per_row + cols[:, 1]
    assert np.array_equal(index, np.arange(plan.slots * plan.steps_per_output))


@pytest.mark.parametrize("buffer", [256, 2048])
def test_the_engine_opens_the_hand_counted_rows_plus_at_most_one_per_refresh(buffer):
    cfg = pim_config("hbm3-6400", 1)
    geo = geometry_for(cfg, banks_per_pu=2, global_buffer_bytes=buffer, multi_vector=False)
    plan = plan_gemv(4096, 256, 1, 1, geo, dict(cfg.timings))
    res = run_programs(cfg, [gemv_program(plan, geo)])
    hand = gemv_row_openings(plan, geo)
    # hbm3-6400: 32 banks per pseudo-channel, 16 bank-pair PUs: 16 slots x 256 steps / 64 per row
    assert hand == 16 * 256 // 64 == 64
    assert hand <= res.activations <= hand + res.refreshes


def test_the_planner_counts_the_rows_the_program_opens():
    # the planner's estimate charges rows x (nRCDRD + nRP): with a 256 B buffer the rows it counts
    # are the rows the program opens, for every split of the pseudo-channels it weighs
    geo = PIMGeometry(global_buffer_bytes=256, **AQUABOLT_PC)
    for pcs in (1, 2, 4, 16):
        plan = plan_gemv(4096, 4096, 1, pcs, geo)
        rows = math.ceil(plan.slots * plan.steps_per_output / geo.steps_per_row)
        assert _row_openings(gemv_program(plan, geo)) == rows == gemv_row_openings(plan, geo)


def test_gpt_oss_experts_on_one_channel_open_each_row_once():
    # b200: 48 bank PUs per pseudo-channel, 32-step rows, 2 KB buffer (64 steps per segment).
    # GPT-OSS-120B gate/up (2880 -> 5760) on one channel (2 pseudo-channels, pcs_in = 1): 2880
    # outputs per pseudo-channel = 60 slots x 180 steps, streamed in 3 segments of 60 steps. By
    # hand: 60 x 180 / 32 = 337.5 -> 338 rows; slot-major segments of 60 steps (the layout before
    # issue 71) cross a row boundary in most (slot, segment) pairs and opened about 1.5x as many.
    from sievesim.hardware import get_hardware
    from sievesim.pim.device import PIMDevice, _plan, _program

    dev = PIMDevice.from_hardware(get_hardware("b200"))
    plan = _plan(dev, 2880, 5760, 1, 2)
    assert (plan.pcs_in, plan.slots, plan.steps_per_output, plan.segments) == (1, 60, 180, 3)
    assert _row_openings(_program(dev, 2880, 5760, 1, 2)) == 338 == gemv_row_openings(plan, dev.geometry)


def _openings_with_closes(program) -> int:
    """ACTABs without refresh when explicit PREABs (input writes through a reserved row) close the row."""
    ops, rc = program
    open_row, n = None, 0
    for op, (row, _) in zip(ops.tolist(), rc.tolist()):
        if op == 3:                                   # OP_PREAB
            open_row = None
        elif op == OP_MACAB and row != open_row:
            n, open_row = n + 1, row
    return n


def test_input_writes_that_close_the_row_reopen_the_rows_their_chunk_meets():
    # 3000 inputs (188 MAC steps; a 256 B buffer holds 8: 24 segments, the last of 4 steps) x 128
    # outputs on one 16-bank pseudo-channel: 16 slots in 2 blocks of 8; 64-step rows. Each
    # (block, segment) chunk is 8 x 8 = 64 columns (the last 32). Block 1 starts at column 0: its 24
    # chunks each sit in one row (24 openings). Block 2 starts at column 1504 (= 23.5 rows): its 23
    # full chunks each straddle two rows (46) and its last (columns 2976-3007) sits in one: 47.
    # By hand 24 + 47 = 71; without the closing writes the pass sweeps ceil(3008 / 64) = 47 rows.
    geo = PIMGeometry(global_buffer_bytes=256, input_write_closes_row=True, **AQUABOLT_PC)
    plan = plan_gemv(3000, 128, 1, 1, geo)
    assert (plan.slots, plan.steps_per_output, plan.segments) == (16, 188, 24)
    program = gemv_program(plan, geo)
    assert _openings_with_closes(program) == 71 == gemv_row_openings(plan, geo)
    assert np.count_nonzero(program[0] == 3) == 48      # before each of the 47 writes after the first, and the last
    plain = dataclasses.replace(geo, input_write_closes_row=False)
    assert gemv_row_openings(plan_gemv(3000, 128, 1, 1, plain), plain) == 47


@pytest.mark.parametrize("buffer", BUFFERS)
def test_one_bank_per_opened_row_halves_the_steps_of_a_bank_pair_row(buffer):
    # Samsung's kernel: an input tile's weights in two 1 KB rows of one bank of the pair. 4096 x 256
    # on one pseudo-channel: 32 slots x 256 steps / 32 steps per row = 256 rows, twice the 128 of a
    # layout that uses both banks of an opened row.
    geo = PIMGeometry(global_buffer_bytes=buffer, banks_per_row_opening=1, **AQUABOLT_PC)
    assert geo.steps_per_row == 32
    plan = plan_gemv(4096, 256, 1, 1, geo)
    assert _row_openings(gemv_program(plan, geo)) == 256 == gemv_row_openings(plan, geo)
    closing = dataclasses.replace(geo, input_write_closes_row=True)
    # the chunks (8 slots x buffer/32 steps) are whole rows, so closing the row at each write adds none
    assert _openings_with_closes(gemv_program(plan, closing)) == 256 == gemv_row_openings(plan, closing)
