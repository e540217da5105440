"""Compile GEMVs into PIM command programs for one pseudo-channel.

A program is the ordered list of *final* PIM commands one pseudo-channel issues (GWRITE, MACAB at a
(row, column), RDRES, PREAB); the engine inserts the ACTAB / PREAB (and, with a single row buffer,
PREA) each MACAB needs, and interleaves refresh and normal traffic. See docs/pim.md for the model.

Layout (same in every pseudo-channel, so one is simulated for tensor parallelism): a GEMV
``y = W x`` with ``W`` of shape (d_out, d_in) is tiled over the P pseudo-channels as
``P = P_out x P_in``: each holds ``o = ceil(d_out / P_out)`` outputs over ``k = ceil(d_in / P_in)``
inputs. Inside a pseudo-channel the outputs are spread over the PUs (one per bank, bank pair or
bank group); every PU keeps the same output *slot* at the same (row, column) positions, so one
all-bank MAC advances every PU by ``macs_per_command`` multiply-accumulates of its own output.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._validate import check_memory
from ..errors import field_error

# Peak bytes per command while a program is built: op (4) and (row, column) (8) kept, and the
# int64 step indices, rows and stacked pairs in between.
BYTES_PER_PROGRAM_COMMAND = 64

__all__ = ["PIMGeometry", "GemvPlan", "plan_gemv", "gemv_program", "gemv_rows_per_pass", "gemv_row_openings",
           "GroupedPlan", "plan_grouped_gemv", "grouped_gemv_program", "OP_MACAB", "OP_GWRITE", "OP_RDRES", "OP_PREAB"]

OP_MACAB, OP_GWRITE, OP_RDRES, OP_PREAB = 0, 1, 2, 3


@dataclass(frozen=True)
class PIMGeometry:
    """What one pseudo-channel's PIM offers.

    ``banks``: banks per pseudo-channel; ``banks_per_pu``: 1 (bank), 2 (bank pair) or 4 (bank group);
    ``macs_per_command``: multiply-accumulates per PU per MACAB; ``operand_bytes``: bytes per weight
    (2 for bf16); ``row_bytes``: DRAM row per bank; ``burst_bytes``: bytes per GWRITE / RDRES;
    ``global_buffer_bytes``: input vector storage per pseudo-channel; ``accumulators``: output
    registers per PU; ``result_bytes``: bytes read back per output (4: fp32 partial sums);
    ``multi_vector``: a PU applies one opened row to several tokens' inputs held in the global
    buffer (tokens share rows); False: one GEMV per token, each opening the rows again.
    ``vectors_per_mac``: input vectors one MACAB multiplies the same column with (1: one vector per
    command; more is a what-if PU with ``macs_per_command x vectors_per_mac`` multipliers, used by
    :func:`grouped_gemv_program`).
    ``banks_per_row_opening``: banks of a PU whose rows one opening feeds its MACs (0: all of its
    ``banks_per_pu``, as the all-bank activation allows; 1: one bank of the pair per opened row, as
    Samsung's GEMV kernel reads them). ``input_write_closes_row``: an input write (GWRITE) closes
    the open PIM row (Samsung's Aquabolt-XL writes its input registers through a reserved row), so a
    streamed input re-opens the weights after every segment.
    """

    banks: int
    banks_per_pu: int = 1
    macs_per_command: int = 16
    operand_bytes: int = 2
    row_bytes: int = 1024
    burst_bytes: int = 32
    global_buffer_bytes: int = 2048
    accumulators: int = 8
    result_bytes: int = 4
    multi_vector: bool = True
    vectors_per_mac: int = 1
    banks_per_row_opening: int = 0
    input_write_closes_row: bool = False

    @property
    def pus(self) -> int:
        return self.banks // self.banks_per_pu

    @property
    def steps_per_row(self) -> int:
        """MACABs one opened row feeds a PU (``banks_per_row_opening`` of its banks, by default all of
        them: every bank of the PU's group holds that row open)."""
        banks = self.banks_per_row_opening or self.banks_per_pu
        return self.row_bytes * banks // (self.macs_per_command * self.operand_bytes)


@dataclass(frozen=True)
class GemvPlan:
    """Tiling of one GEMV over ``pcs`` pseudo-channels; sizes are elements."""

    d_in: int
    d_out: int
    tokens: int
    pcs: int
    pcs_out: int
    pcs_in: int
    outputs_per_pc: int
    inputs_per_pc: int
    slots: int                 # outputs per PU
    steps_per_output: int      # MACABs per output per token
    input_bursts: int          # GWRITEs per token (per slot block when the input is segmented)
    tokens_per_pass: int       # tokens whose inputs share the global buffer (rows reused)
    segments: int = 1          # input slices that do not fit the global buffer are streamed in segments

    @property
    def macs_per_token(self) -> int:
        return self.slots * self.steps_per_output

    @property
    def commands(self) -> int:
        """Upper estimate of the program's length (GWRITE + MACAB + RDRES commands)."""
        results = math.ceil(self.outputs_per_pc * 4 / 32) + self.slots
        return self.tokens * (self.macs_per_token + self.input_bursts * max(1, self.slots // 8 + 1)
                              + results) + 1


def gemv_rows_per_pass(slots: int, steps: int, geo: PIMGeometry, segments: int = 1,
                       block: int | None = None) -> int:
    """PIM rows [count] one pass of a GEMV opens. The ``slots x steps`` MAC columns of a PU are
    laid out in the order the program reads them (:func:`gemv_program`), so a pass sweeps
    ``ceil(slots x steps / steps_per_row)`` consecutive rows, each opened once, whatever the global
    buffer's size. With ``input_write_closes_row`` and an input streamed in ``segments`` (per
    ``block`` slots, default ``accumulators``), each segment's write closes the row: every
    (block, segment) chunk opens the rows it touches."""
    spr = geo.steps_per_row
    if segments <= 1 or not geo.input_write_closes_row:
        return math.ceil(slots * steps / spr)
    block = block or geo.accumulators
    seg_steps = math.ceil(steps / segments)
    rows, read = 0, 0
    for s0 in range(0, slots, block):
        width = min(slots, s0 + block) - s0
        for lo in range(0, steps, seg_steps):
            n = width * (min(steps, lo + seg_steps) - lo)
            rows += (read + n - 1) // spr - read // spr + 1
            read += n
    return rows


def gemv_row_openings(plan: "GemvPlan", geo: PIMGeometry) -> int:
    """ACTABs [count] of :func:`gemv_program`'s program for ``plan`` without refresh: every pass
    (a token, or ``tokens_per_pass`` tokens sharing rows) opens its rows once (with
    ``input_write_closes_row``: once per input write that meets them); a matrix of one row stays
    open from pass to pass unless an input write closes it."""
    block = max(1, geo.accumulators // plan.tokens_per_pass)
    rows = gemv_rows_per_pass(plan.slots, plan.steps_per_output, geo, plan.segments, block)
    passes = math.ceil(plan.tokens / plan.tokens_per_pass)
    return rows if rows == 1 and not geo.input_write_closes_row else rows * passes


def plan_gemv(d_in: int, d_out: int, tokens: int, pcs: int, geo: PIMGeometry,
              timings: dict[str, int] | None = None, *, pcs_in: int | None = None) -> GemvPlan:
    """Choose ``pcs_in`` (a divisor of ``pcs``) minimising an issue-time estimate; ``pcs_in``
    given: that split (1: outputs only across the pseudo-channels, as Samsung's GEMV kernel).

    The estimate counts MACABs x nCCDAB, bursts x nBL, the rows the layout opens
    (:func:`gemv_rows_per_pass`: each once, for every buffer size) x (nRCDRD + nRP). An input slice
    larger than the global buffer is streamed in segments, re-written for every slot block; with
    ``input_write_closes_row`` each written segment adds its reserved row's activation, write
    recovery and precharge (nRCDWR + nCWL + nBL + nWR + nRP).
    """
    for name, v in (("d_in", d_in), ("d_out", d_out), ("tokens", tokens), ("pcs", pcs)):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
            raise field_error(name, v, "a positive integer")
    t = timings or {"nCCDAB": 6, "nBL": 2, "nRCDRD": 28, "nRP": 28}
    if pcs_in is not None and (not isinstance(pcs_in, (int, np.integer)) or isinstance(pcs_in, bool)
                               or pcs_in < 1 or pcs % pcs_in):
        raise field_error("pcs_in", pcs_in, f"a divisor of pcs = {pcs}")
    best = None
    for pcs_in in ((pcs_in,) if pcs_in is not None else (d for d in range(1, pcs + 1) if pcs % d == 0)):
        k = math.ceil(d_in / pcs_in)
        bursts = math.ceil(k * geo.operand_bytes / geo.burst_bytes)
        gb_bursts = geo.global_buffer_bytes // geo.burst_bytes
        if gb_bursts < 1:
            raise field_error("global_buffer_bytes", geo.global_buffer_bytes, f">= {geo.burst_bytes} (one burst)")
        segments = math.ceil(bursts / gb_bursts)
        o = math.ceil(d_out / (pcs // pcs_in))
        slots = math.ceil(o / geo.pus)
        steps = math.ceil(k / geo.macs_per_command)
        rows = gemv_rows_per_pass(slots, steps, geo, segments)
        result = math.ceil(o * geo.result_bytes / geo.burst_bytes)
        blocks = math.ceil(slots / geo.accumulators) if segments > 1 else 1
        est = (slots * steps * t["nCCDAB"] + (bursts * blocks + result) * t["nBL"]
               + rows * (t["nRCDRD"] + t["nRP"]))
        if geo.input_write_closes_row and segments > 1:      # each written segment: the reserved row's cycle
            est += blocks * segments * (t.get("nRCDWR", 0) + t.get("nCWL", 0) + t["nBL"] + t.get("nWR", 0) + t["nRP"])
        if best is None or est < best[0]:
            best = (est, pcs_in, o, k, slots, steps, bursts, segments)
    _, pcs_in, o, k, slots, steps, bursts, segments = best
    per_pass = 1 if segments > 1 or not geo.multi_vector else max(
        1, min(tokens, geo.global_buffer_bytes // (bursts * geo.burst_bytes), geo.accumulators))
    return GemvPlan(d_in=d_in, d_out=d_out, tokens=tokens, pcs=pcs, pcs_out=pcs // pcs_in, pcs_in=pcs_in,
                    outputs_per_pc=o, inputs_per_pc=k, slots=slots, steps_per_output=steps, input_bursts=bursts,
                    tokens_per_pass=per_pass, segments=segments)


def gemv_program(plan: GemvPlan, geo: PIMGeometry, *, row_base: int = 0, write_inputs: bool = True,
                 read_results: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Ops (OP_* codes) and (row, column) pairs of one pseudo-channel's program for ``plan``.

    Per pass of ``g`` tokens: GWRITE their inputs; then, slot block by slot block (``accumulators //
    g`` slots per block), every MAC step of the block for each of the g tokens back to back (the
    row stays open across tokens), and RDRES of the block's results. An input longer than the
    global buffer (``segments`` > 1, one token per pass) is streamed: per slot block, per segment,
    GWRITE the segment, then every MAC step of that segment for each slot of the block (Samsung's
    order: the segment stays in the buffer while the weights it meets go by).

    Layout: the weights are written in the order a pass reads them (the ``i``-th MAC column of a
    pass sits at row ``i // steps_per_row``, column ``i % steps_per_row``), the same order for every
    buffer size, so each pass opens every row once (:func:`gemv_row_openings`). With the input in
    one segment this is the slot-major layout (slot ``s``, step ``j`` at ``s x steps + j``).
    A final PREAB closes the row. ``write_inputs=False`` / ``read_results=False`` leave out the
    GWRITEs / RDRESs (inputs produced and results consumed inside the PIM, e.g. an activation
    computed by the PUs).
    """
    check_memory(plan.commands * BYTES_PER_PROGRAM_COMMAND, f"a PIM program of about {plan.commands:,} commands",
                 "GEMV d_in x d_out x tokens", f"{plan.d_in} x {plan.d_out} x {plan.tokens}")
    steps = plan.steps_per_output
    ops_parts: list[np.ndarray] = []
    rc_parts: list[np.ndarray] = []

    closes = geo.input_write_closes_row
    macs_before = [False]

    def gwrite(n: int) -> None:
        if not write_inputs:
            return
        if closes and macs_before[0]:                              # the input goes through a reserved row
            ops_parts.append(np.array([OP_PREAB], dtype=np.int32))
            rc_parts.append(np.zeros((1, 2), dtype=np.int32))
        ops_parts.append(np.full(n, OP_GWRITE, dtype=np.int32))
        rc_parts.append(np.zeros((n, 2), dtype=np.int32))

    def macs(column_idx: np.ndarray) -> None:
        rows = row_base + column_idx // geo.steps_per_row
        macs_before[0] = macs_before[0] or column_idx.size > 0
        ops_parts.append(np.full(column_idx.size, OP_MACAB, dtype=np.int32))
        rc_parts.append(np.column_stack([rows, column_idx % geo.steps_per_row]).astype(np.int32))

    seg_bursts = math.ceil(plan.input_bursts / plan.segments)
    seg_steps = math.ceil(steps / plan.segments)
    remaining = plan.tokens
    while remaining > 0:
        g = min(plan.tokens_per_pass, remaining)
        remaining -= g
        if plan.segments == 1:
            gwrite(g * plan.input_bursts)
        block = max(1, geo.accumulators // g)
        read = 0                                                   # MAC columns of this pass read so far
        for s0 in range(0, plan.slots, block):
            s1 = min(plan.slots, s0 + block)
            if plan.segments == 1:
                column_idx = np.arange(read, read + (s1 - s0) * steps, dtype=np.int64)
                read += column_idx.size
                macs(np.repeat(column_idx, g))                     # token innermost: row reuse
            else:                                                  # g == 1: stream the input in segments
                for seg in range(plan.segments):
                    lo, hi = seg * seg_steps, min(steps, (seg + 1) * seg_steps)
                    if lo >= hi:
                        break
                    gwrite(min(seg_bursts, plan.input_bursts - seg * seg_bursts))
                    n = (s1 - s0) * (hi - lo)                      # the block's slots x the segment's steps
                    macs(np.arange(read, read + n, dtype=np.int64))
                    read += n
            outputs = min((s1 - s0) * geo.pus, plan.outputs_per_pc - s0 * geo.pus) * g
            n_res = math.ceil(outputs * geo.result_bytes / geo.burst_bytes) if read_results else 0
            ops_parts.append(np.full(n_res, OP_RDRES, dtype=np.int32))
            rc_parts.append(np.zeros((n_res, 2), dtype=np.int32))
    ops_parts.append(np.array([OP_PREAB], dtype=np.int32))
    rc_parts.append(np.zeros((1, 2), dtype=np.int32))
    return np.concatenate(ops_parts), np.concatenate(rc_parts)


@dataclass(frozen=True)
class GroupedPlan:
    """One pseudo-channel's ``y_h = W x_h`` for ``vectors`` inputs ``x_h`` that share the matrix
    (the query heads of a GQA group over one KV head's cache); sizes are elements.

    The vectors go in passes of ``heads_per_pass`` (every pass reads the whole matrix once: an
    opened row serves all the pass's vectors). Outputs are spread over the PUs (``slots`` per PU),
    ``block_slots`` slots at a time (the pass's vectors need ``heads_per_pass`` accumulators per
    slot). An input longer than the global buffer holds for the pass's vectors is streamed in
    ``chunks`` of ``chunk_steps`` MAC steps, written again for every slot block."""

    d_in: int
    d_out: int
    vectors: int
    slots: int
    steps: int                 # MAC steps per output (d_in / macs_per_command)
    heads_per_pass: int
    block_slots: int
    chunk_steps: int
    vectors_per_mac: int = 1

    @property
    def passes(self) -> int:
        return math.ceil(self.vectors / self.heads_per_pass)

    @property
    def chunks(self) -> int:
        return math.ceil(self.steps / self.chunk_steps)

    @property
    def segmented(self) -> bool:
        return self.chunks > 1

    @property
    def commands(self) -> int:
        """Upper estimate of the program's length."""
        blocks = math.ceil(self.slots / self.block_slots)
        hp = self.heads_per_pass
        per_pass = (self.slots * self.steps * math.ceil(hp / self.vectors_per_mac)   # MACAB
                    + hp * (self.steps + 1) * 4 * blocks                               # GWRITE (<= 4 per step)
                    + self.slots * 256 * hp + blocks)                                  # RDRES (<= 256 PUs)
        return self.passes * per_pass + 1


def _grouped_estimate(d_in: int, d_out: int, vectors: int, geo: PIMGeometry, t: dict, hp: int) -> tuple[int, GroupedPlan]:
    slots = math.ceil(d_out / geo.pus)
    steps = math.ceil(d_in / geo.macs_per_command)
    step_bytes = geo.macs_per_command * geo.operand_bytes
    in_bursts = math.ceil(d_in * geo.operand_bytes / geo.burst_bytes)
    bs = max(1, geo.accumulators // hp)
    cs_max = max(1, geo.global_buffer_bytes // (hp * step_bytes))
    chunks = math.ceil(steps / cs_max)
    cs = math.ceil(steps / chunks)                  # equal chunks, as GEMV segments
    plan = GroupedPlan(d_in=d_in, d_out=d_out, vectors=vectors, slots=slots, steps=steps, heads_per_pass=hp,
                       block_slots=bs, chunk_steps=cs, vectors_per_mac=geo.vectors_per_mac)
    blocks = math.ceil(slots / bs)
    est = 0
    for p in range(plan.passes):
        h = min(hp, vectors - p * hp)
        macs = slots * steps * math.ceil(h / geo.vectors_per_mac)
        rows = math.ceil(slots * steps / geo.steps_per_row)
        gw = h * in_bursts * (blocks if chunks > 1 else 1)
        rd = math.ceil(min(d_out, slots * geo.pus) * h * geo.result_bytes / geo.burst_bytes) + blocks
        batches = blocks * chunks if chunks > 1 else 1
        est += (macs * t["nCCDAB"] + (gw + rd) * t["nBL"]
                + rows * (t["nRCDRD"] + t["nRP"] + max(0, t.get("nRTPL", 0) - t["nCCDAB"]))
                + batches * (t.get("nCWL", 0) + t["nBL"]) + (blocks - 1 if chunks > 1 else 0) * t.get("nRTW", 0))
    return est, plan


def plan_grouped_gemv(d_in: int, d_out: int, vectors: int, geo: PIMGeometry,
                      timings: dict[str, int] | None = None) -> GroupedPlan:
    """Choose the vectors per pass (1 .. min(vectors, accumulators)) minimising an issue-time
    estimate: MACABs x nCCDAB, bursts x nBL, row switches x (nRCDRD + nRP + nRTPL - nCCDAB) and
    a GWRITE -> MACAB turnaround (nCWL + nBL) per written chunk. More vectors per pass open the
    rows fewer times but hold fewer slots in the accumulators and a shorter input chunk in the
    global buffer (more GWRITEs when the input is streamed)."""
    for name, v in (("d_in", d_in), ("d_out", d_out), ("vectors", vectors)):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
            raise field_error(name, v, "a positive integer")
    if geo.global_buffer_bytes < geo.macs_per_command * geo.operand_bytes:
        raise field_error("global_buffer_bytes", geo.global_buffer_bytes,
                          f">= {geo.macs_per_command * geo.operand_bytes} (one MAC step of one vector)")
    if not isinstance(geo.vectors_per_mac, int) or geo.vectors_per_mac < 1:
        raise field_error("vectors_per_mac", geo.vectors_per_mac, "a positive integer")
    t = dict(timings or {"nCCDAB": 6, "nBL": 2, "nRCDRD": 28, "nRP": 28, "nRTPL": 12, "nCWL": 8, "nRTW": 24})
    top = max(1, min(int(vectors), geo.accumulators,
                     geo.global_buffer_bytes // (geo.macs_per_command * geo.operand_bytes)))
    best = min((_grouped_estimate(int(d_in), int(d_out), int(vectors), geo, t, hp) for hp in range(1, top + 1)),
               key=lambda e: e[0])
    return best[1]


def grouped_gemv_program(plan: GroupedPlan, geo: PIMGeometry, *, row_base: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Ops and (row, column) pairs of one pseudo-channel's program for ``plan``.

    Per pass of ``h`` vectors: (unless streamed) GWRITE their inputs; then per block of slots, per
    input chunk (streamed: GWRITE the chunk of each of the h vectors), for each slot of the block
    and each MAC step of the chunk, ``ceil(h / vectors_per_mac)`` MACABs on the same column back
    to back (the row stays open across the vectors); then RDRES of the block's h x outputs
    results. The matrix is laid out in the order a pass reads it (every row filled by consecutive
    columns of that order), the same for every pass; a final PREAB closes the row.
    """
    check_memory(plan.commands * BYTES_PER_PROGRAM_COMMAND, f"a PIM program of about {plan.commands:,} commands",
                 "grouped GEMV d_in x d_out x vectors", f"{plan.d_in} x {plan.d_out} x {plan.vectors}")
    steps, cs, bs = plan.steps, plan.chunk_steps, plan.block_slots
    spr = geo.steps_per_row
    step_bytes = geo.macs_per_command * geo.operand_bytes
    in_bursts = math.ceil(plan.d_in * geo.operand_bytes / geo.burst_bytes)
    outputs_per_pc = plan.d_out
    # the columns of one pass in access order: (slot, step) for block, chunk, slot, step
    slot_of, step_of, chunk_bounds = [], [], []
    for s0 in range(0, plan.slots, bs):
        s1 = min(plan.slots, s0 + bs)
        for c0 in range(0, steps, cs):
            c1 = min(steps, c0 + cs)
            sl = np.repeat(np.arange(s0, s1, dtype=np.int64), c1 - c0)
            st = np.tile(np.arange(c0, c1, dtype=np.int64), s1 - s0)
            chunk_bounds.append((s0, s1, c0, c1))
            slot_of.append(sl)
            step_of.append(st)
    ops_parts: list[np.ndarray] = []
    rc_parts: list[np.ndarray] = []

    def emit(op: int, n: int) -> None:
        if n > 0:
            ops_parts.append(np.full(n, op, dtype=np.int32))
            rc_parts.append(np.zeros((n, 2), dtype=np.int32))

    offset = 0
    col_start = []
    for sl in slot_of:
        col_start.append(offset)
        offset += sl.size
    remaining = plan.vectors
    while remaining > 0:
        h = min(plan.heads_per_pass, remaining)
        remaining -= h
        per_col = math.ceil(h / geo.vectors_per_mac)
        if not plan.segmented:
            emit(OP_GWRITE, h * in_bursts)
        for i, (s0, s1, c0, c1) in enumerate(chunk_bounds):
            if plan.segmented:
                lo, hi = c0 * step_bytes, min(plan.d_in * geo.operand_bytes, c1 * step_bytes)
                emit(OP_GWRITE, h * math.ceil((hi - lo) / geo.burst_bytes))
            idx = np.repeat(col_start[i] + np.arange(slot_of[i].size, dtype=np.int64), per_col)
            ops_parts.append(np.full(idx.size, OP_MACAB, dtype=np.int32))
            rc_parts.append(np.column_stack([row_base + idx // spr, idx % spr]).astype(np.int32))
            if c1 == steps:                           # the block's last chunk: read its results
                outputs = min((s1 - s0) * geo.pus, outputs_per_pc - s0 * geo.pus) * h
                emit(OP_RDRES, math.ceil(outputs * geo.result_bytes / geo.burst_bytes))
    ops_parts.append(np.array([OP_PREAB], dtype=np.int32))
    rc_parts.append(np.zeros((1, 2), dtype=np.int32))
    return np.concatenate(ops_parts), np.concatenate(rc_parts)
