"""Decode attention (and linear-attention state) of one layer as engine-priced PIM programs.

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
from .engine import PIMResult, even_phases, geometry_for, pim_config, run_phases, run_programs, stratified_phases
from .program import (OP_MACAB, PIMGeometry, _grouped_estimate, gemv_program, grouped_gemv_program, plan_gemv,
                      plan_grouped_gemv)
from .device import (ACTIVATION_FLOPS_PER_ELEMENT, SOFTMAX_FLOPS_PER_ELEMENT, PIMDevice, _concat, _norm,
                     _program, _rows_used, _sequence, _sequence_program, gemv, gemv_sequence)

__all__ = ["AttentionLayer", "ATTENTION_MAPPINGS", "ATTENTION_BALANCES"]


ATTENTION_MAPPINGS = ("grouped", "per_head")
#: How the units of work are spread over the pseudo-channels (see :class:`AttentionLayer`).
ATTENTION_BALANCES = ("tokens", "units")


def _lpt(pieces: Sequence[int], pcs: int, cost) -> list[list[int]]:
    """Pieces longest first onto the pseudo-channel of least estimated cost."""
    heap = [(0.0, i) for i in range(min(pcs, len(pieces)))]
    members: list[list[int]] = [[] for _ in heap]
    for L in sorted(pieces, reverse=True):
        load, i = heapq.heappop(heap)
        members[i].append(L)
        heapq.heappush(heap, (load + cost(L), i))
    return members


def _cut(units: Sequence[int], size: int) -> list[int]:
    """Every unit in equal pieces of at most ``size`` tokens."""
    out: list[int] = []
    for L in units:
        n = max(1, -(-L // size))
        base, extra = divmod(L, n)
        out += [base + 1] * extra + [base] * (n - extra)
    return out


def _fill(units: Sequence[int], pcs: int) -> list[list[int]]:
    """The units' tokens in ``pcs`` equal shares, units longest first, a unit cut where a share ends."""
    share = max(1, -(-sum(units) // pcs))
    members: list[list[int]] = []
    cur: list[int] = []
    load = 0
    for L in sorted(units, reverse=True):
        rem = L
        while rem > 0:
            take = min(rem, share - load)
            cur.append(take)
            load += take
            rem -= take
            if load == share:
                members.append(cur)
                cur, load = [], 0
    if cur:
        members.append(cur)
    return members


def _balanced_busiest(units: Sequence[int], pcs: int, cost) -> list[int]:
    """The pieces on the busiest pseudo-channel of the best of a few placements, judged by the
    estimated cost of each pseudo-channel's pieces (``cost(L)``: cycles of a piece of L tokens):
    whole units onto the least loaded (the ``"units"`` placement), units cut into pieces of at
    most a share / k (k = 1, 2, 4; a share is the total tokens / pseudo-channels) onto the least
    loaded, and the tokens filled into equal shares (:func:`_fill`)."""
    if not units:
        return []
    total = sum(units)
    if total == 0:
        return [0]
    share = max(1, -(-total // pcs))
    whole = units if len(units) >= pcs else [math.ceil(L / (pcs // len(units))) for L in units
                                            for _ in range(pcs // len(units))]
    candidates = [_lpt(whole, pcs, cost)] + [_lpt(_cut(units, max(1, share // k)), pcs, cost) for k in (1, 2, 4)]
    candidates.append(_fill(units, pcs))
    best, best_load = [], None
    for members in candidates:
        loads = [sum(cost(L) for L in m) for m in members]
        i = int(np.argmax(loads))
        if best_load is None or loads[i] < best_load:
            best, best_load = members[i], loads[i]
    return best


@dataclass(frozen=True)
class AttentionLayer:
    """Decode attention of one layer on PIM.

    The work is split into units of one request and one KV head (Gated-DeltaNet: one value head;
    MLA: the shared latent cache) and spread over the GPU's pseudo-channels (``balance``):

    - ``"tokens"`` (default): long units are cut into pieces (token-parallel, AttAcc style; the
      pieces' partial softmax sums are combined on the GPU) so that a long request does not hold
      one pseudo-channel while the others idle: of a few placements (whole units; pieces of at
      most 1, 1/2 or 1/4 of an equal share of the tokens, longest first onto the least loaded;
      the tokens filled into equal shares) the one whose busiest pseudo-channel has the least
      estimated cost (the planner's estimate of each piece's GEMVs: a piece costs its own query
      writes, result rows and row openings) is taken;
    - ``"units"``: whole units, longest first onto the least loaded; only when there are fewer
      units than pseudo-channels is each split over ``pseudo-channels // units`` of them (every
      version before 2026-12-03).

    The layer takes as long as the busiest pseudo-channel, whose units run as one program (refresh
    and turnarounds simulated). ``linear`` layers place whole units (by count).

    ``full`` / ``sliding``: per unit, a score GEMV (``head_dim -> L``, the unit's keys times each
    query head) and a value GEMV (``L -> value_dim``, the values times each head's probabilities)
    for the ``q_per_kv`` query heads of its group (``L`` capped at ``window``); every score GEMV
    of the busiest pseudo-channel as one program, the GPU's softmax, one hand-over, every value
    GEMV as one program. ``mapping``:

    - ``"grouped"`` (default): the heads of a group share each opened K / V row: the heads go in
      passes of as many as the accumulators and the global buffer hold
      (:func:`~sievesim.pim.program.plan_grouped_gemv`), each pass reads the unit's cache once,
      one MACAB per column per head (``ceil(heads / vectors_per_mac)`` with a what-if PU that
      multiplies a column with several vectors at once);
    - ``"per_head"``: one GEMV per query head, each opening the rows again (every version before
      2026-12-03), or, with ``multi_vector`` (a multi-vector PU), the group's scores as one
      multi-token GEMV and the values one head at a time.

    ``mla``: the same over the latent cache (``kv_lora_rank + rope`` wide, all query heads share it);
    with a DSA indexer, over the ``index_topk`` selected tokens (``window``), after the indexer has
    scored every token (:meth:`indexer_s`).
    ``linear`` (Gated-DeltaNet): per unit, a readout GEMV over the ``key_dim x value_dim`` state and
    one pass of the same shape for the state update (the write-back of the updated state is not
    modelled: there is no PIM write command), independent of the context length. ``mamba``
    (Mamba-2) layers are priced as ``linear`` ones with a unit per SSM head: the readout GEMV over
    its ``mamba_state_size x mamba_head_dim`` state (C times the state) and one pass for the update.
    """

    kind: str
    kv_heads: int = 0
    q_per_kv: int = 1
    head_dim: int = 0
    value_dim: int = 0
    window: int | None = None
    multi_vector: bool = False
    #: Chunked attention (Llama 4): a request of ``L`` tokens reads the current chunk, ``(L - 1) % chunk + 1``.
    chunk: int | None = None
    mapping: str = "grouped"
    balance: str = "tokens"
    #: DSA (DeepSeek-V3.2): the indexer's heads and key size; it scores every context token before
    #: the attention reads the ``window`` (``index_topk``) tokens it selects. 0: no indexer.
    index_heads: int = 0
    index_dim: int = 0

    def __post_init__(self) -> None:
        if self.mapping not in ATTENTION_MAPPINGS:
            raise field_error("mapping", self.mapping, f"one of {list(ATTENTION_MAPPINGS)}")
        if self.balance not in ATTENTION_BALANCES:
            raise field_error("balance", self.balance, f"one of {list(ATTENTION_BALANCES)}")

    @classmethod
    def from_model(cls, model, layer: int, multi_vector: bool = False, mapping: str = "grouped",
                   balance: str = "tokens") -> "AttentionLayer":
        kind = model.layer_attention[layer]
        if kind == "mamba":   # Mamba-2: per head, a readout GEMV over its N x head_dim state, and the update
            return cls("linear", kv_heads=model.mamba_num_heads, head_dim=model.mamba_state_size,
                       value_dim=model.mamba_head_dim, multi_vector=multi_vector, mapping=mapping, balance=balance)
        if kind == "linear":
            return cls("linear", kv_heads=model.linear_num_value_heads, head_dim=model.linear_key_head_dim,
                       value_dim=model.linear_value_head_dim, multi_vector=multi_vector, mapping=mapping,
                       balance=balance)
        if kind == "mla":
            return cls("mla", kv_heads=1, q_per_kv=model.num_attention_heads,
                       head_dim=model.kv_lora_rank + model.qk_rope_head_dim, value_dim=model.kv_lora_rank,
                       multi_vector=multi_vector, mapping=mapping, balance=balance,
                       window=getattr(model, "index_topk", 0) or None,
                       index_heads=getattr(model, "index_n_heads", 0), index_dim=getattr(model, "index_head_dim", 0))
        nq, nkv, d, dv = model.attention_dims(kind)
        return cls(kind, kv_heads=nkv, q_per_kv=max(1, nq // nkv), head_dim=d, value_dim=dv,
                   window=model.sliding_window if kind == "sliding" else None, multi_vector=multi_vector,
                   chunk=getattr(model, "attention_chunk_size", None) if kind == "chunked" else None,
                   mapping=mapping, balance=balance)

    def _context(self, context: int) -> int:
        L = min(context, self.window) if self.window else context
        if self.chunk and L > 0:
            L = (L - 1) % self.chunk + 1
        return L

    def unit_gemvs(self, context: int) -> list[tuple[int, int, int]]:
        """(d_in, d_out, vectors) GEMVs of one unit (request x KV head) with ``context`` tokens:
        per pass of query heads, the score GEMV then the value GEMV (``"grouped"``: one pass of
        all the group's heads; the program splits it as the PU's buffers require)."""
        if self.kind == "linear":
            return [(self.head_dim, self.value_dim, 1)] * 2
        L = self._context(context)
        if L <= 0:
            return []
        if self.mapping == "grouped":
            vectors, passes = self.q_per_kv, 1
        else:
            vectors, passes = (self.q_per_kv, 1) if self.multi_vector else (1, self.q_per_kv)
        return [(self.head_dim, L, vectors), (L, self.value_dim, vectors)] * passes

    def placement(self, device: PIMDevice, batch_context_lens: Sequence[int]) -> tuple[list[int], list[int]]:
        """The requests' context lengths as the layer reads them (window, chunk) and the context
        lengths of the units (or pieces of units) on the busiest pseudo-channel (``balance``)."""
        lens = [int(x) for x in batch_context_lens]
        if not lens:
            return [], []
        if min(lens) < 0:
            raise field_error("context length", min(lens), "a non-negative number of tokens")
        lens = [self._context(L) if L > 0 else 0 for L in lens]
        pcs = device.unit_pcs("gpu")
        units = [L for L in lens for _ in range(self.kv_heads)]
        if self.kind != "linear" and self.balance == "tokens":
            fixed, per_token = _cost_line(self, device)
            return lens, _balanced_busiest(units, pcs, lambda L: fixed + per_token * L if L > 0 else 0.0)
        split = max(1, pcs // len(units)) if self.kind != "linear" else 1
        if split > 1:
            units = [math.ceil(L / split) for L in units]
        n_pc = min(pcs, len(units))
        # weight of a unit for placement: its MAC work (context x width); programs decide the time
        load = np.zeros(n_pc)
        members: list[list[int]] = [[] for _ in range(n_pc)]
        for L in sorted(units, reverse=True):
            i = int(np.argmin(load))
            load[i] += max(L, 1) if self.kind != "linear" else 1
            members[i].append(L)
        return lens, members[int(np.argmax(load))]

    def programs(self, device: PIMDevice, busiest: Sequence[int]) -> list[tuple[np.ndarray, np.ndarray]]:
        """The busiest pseudo-channel's programs (one for ``linear``; else the scores' and the
        values') for units of these context lengths (``"grouped"`` mapping, or any ``linear``
        layer; ``"per_head"`` runs as :func:`gemv_sequence`)."""
        seq = [g for L in busiest for g in self.unit_gemvs(L)]
        if not seq:
            return []
        if self.kind == "linear":
            return [_sequence_program(device, _norm(seq), 1)]
        return [_grouped_sequence_program(device, tuple(seq[0::2])),
                _grouped_sequence_program(device, tuple(seq[1::2]))]

    def _results(self, device: PIMDevice, busiest: Sequence[int], log_commands: bool = False) -> list[PIMResult]:
        seq = [g for L in busiest for g in self.unit_gemvs(L)]
        if not seq:
            return []
        if self.kind == "linear" or self.mapping == "per_head":
            parts = [seq] if self.kind == "linear" else [seq[0::2], seq[1::2]]
            if not log_commands:
                return [gemv_sequence(device, p, 1) for p in parts]
            return [device.run(_sequence_program(device, _norm(p), 1), 1, log_commands=True) for p in parts]
        if not log_commands:
            return [_grouped_sequence(device, tuple(p)) for p in (seq[0::2], seq[1::2])]
        return [device.run(prog, 1, log_commands=True) for prog in self.programs(device, busiest)]

    def _gpu_and_sync_s(self, device: PIMDevice, lens: Sequence[int]) -> tuple[float, float]:
        if self.kind == "linear":       # readout and state update need nothing from the GPU between them
            return 0.0, 0.0
        n_scores = sum(lens) * self.kv_heads * self.q_per_kv
        return device.gpu_step_s(SOFTMAX_FLOPS_PER_ELEMENT * n_scores, n_scores * (4 + 2)), device.sync_latency_s

    def time_s(self, device: PIMDevice, batch_context_lens: Sequence[int]) -> float:
        """Attention of these requests (context lengths in tokens) at this layer [s]: the busiest
        pseudo-channel's score program, the GPU's softmax over every score of the layer, one
        hand-over, its value program (``linear``: one program)."""
        lens, busiest = self.placement(device, batch_context_lens)
        results = self._results(device, busiest)
        if not results:
            return 0.0
        cycles = sum(device.program_cycles(r, 1) for r in results)
        softmax, sync = self._gpu_and_sync_s(device, lens)
        return cycles * device.tck_s + softmax + sync + self.indexer_s(device, batch_context_lens)

    def indexer_s(self, device: PIMDevice, batch_context_lens: Sequence[int]) -> float:
        """A DSA indexer's scoring of every context token before the attention [s] (0 without one):
        one grouped score GEMV per request (``index_dim -> L``, all ``index_heads`` heads share the
        request's indexer keys), the requests' tokens balanced over the pseudo-channels, the busiest
        one's program; the GPU reads the scores, sums the heads' and selects the top-k (roofline),
        and hands over to the attention."""
        lens = [int(x) for x in batch_context_lens if int(x) > 0]
        if not self.index_heads or not lens:
            return 0.0
        busiest = _balanced_busiest(lens, device.unit_pcs("gpu"), float)
        program = _grouped_sequence(device, tuple((self.index_dim, L, self.index_heads) for L in busiest if L > 0))
        n_scores = sum(lens) * self.index_heads
        gpu = device.gpu_step_s(2.0 * n_scores, n_scores * 4 + sum(lens) * 4)
        return device.program_cycles(program, 1) * device.tck_s + gpu + device.sync_latency_s

    def breakdown(self, device: PIMDevice, batch_context_lens: Sequence[int]) -> dict:
        """Where :meth:`time_s` goes, from the engine's command log of the busiest
        pseudo-channel's programs (:func:`sievesim.pim.breakdown.program_breakdown`).

        Keys: ``programs`` (``scores`` and ``values``, or ``state`` for ``linear``: cycles per
        component, the mean over the device's refresh phases, each adding up to the program's
        duration), ``commands`` (per program: MACAB, ACTAB, PREAB, GWRITE, RDRES, REFab issued,
        mean per phase copy), ``cycles`` (per program), ``pim_s`` (every program), ``softmax_s``
        (the GPU's softmax), ``sync_s`` (the hand-over), ``total_s`` (= :meth:`time_s`),
        ``mac_useful_share`` (per program: multiply-accumulates the attention needs over those the
        MAC commands could do: PUs without an output in a slot idle), ``busiest_units`` (context
        lengths of the busiest pseudo-channel's units), ``plans``
        (per program: the query heads per pass and passes of each unit's GEMV, ``grouped`` only).
        Times in seconds, cycles in memory clock cycles."""
        from .breakdown import command_counts, program_breakdown
        lens, busiest = self.placement(device, batch_context_lens)
        results = self._results(device, busiest, log_commands=True)
        names = ["state"] if self.kind == "linear" else ["scores", "values"]
        softmax, sync = self._gpu_and_sync_s(device, lens) if results else (0.0, 0.0)
        out: dict = {"programs": {}, "commands": {}, "cycles": {}, "plans": {}, "mac_useful_share": {},
                     "busiest_units": list(busiest)}
        seq = [g for L in busiest for g in self.unit_gemvs(L)]
        parts = [seq] if self.kind == "linear" else [seq[0::2], seq[1::2]]
        per_mac = device.geometry.pus * device.macs_per_command * device.vectors_per_mac
        pim = 0.0
        for name, res, part in zip(names, results, parts):
            cyc = device.program_cycles(res, 1)
            out["programs"][name] = program_breakdown(res, device.config)
            out["commands"][name] = command_counts(res, device.config)
            out["cycles"][name] = cyc
            issued = out["commands"][name]["MACAB"] * per_mac
            out["mac_useful_share"][name] = sum(a * b * v for a, b, v in part) / issued if issued else 0.0
            pim += cyc * device.tck_s
        if results and self.kind != "linear" and self.mapping == "grouped":
            for name, part in zip(names, (seq[0::2], seq[1::2])):
                plans = {_grouped_plan(device, *g) for g in part}
                out["plans"][name] = sorted({(p.heads_per_pass, p.passes, p.chunks) for p in plans if p is not None})
        out.update(pim_s=pim, softmax_s=softmax, sync_s=sync, total_s=pim + softmax + sync)
        return out


#: Context lengths [tokens] whose planner estimates give the placement's cost line.
_COST_LINE_POINTS = (64, 4096)


def _piece_cost(layer: "AttentionLayer", device: PIMDevice, context: int) -> float:
    """Estimated cycles of one unit (or piece) of ``context`` tokens: its GEMVs' plan estimates
    (MACs, bursts, row switches, turnarounds; the planner's)."""
    if context <= 0:
        return 0.0
    t = dict(device.config.timings)
    geo = device.geometry
    est = 0.0
    for d_in, d_out, vectors in layer.unit_gemvs(context):
        hp = 1 if layer.mapping == "per_head" else plan_grouped_gemv(d_in, d_out, vectors, geo, t).heads_per_pass
        est += _grouped_estimate(d_in, d_out, vectors, geo, t, hp)[0]
    return est


@functools.lru_cache(maxsize=256)
def _cost_line(layer: "AttentionLayer", device: PIMDevice) -> tuple[float, float]:
    """A piece's estimated cycles as ``fixed + per_token x tokens`` (for placement): the line
    through :func:`_piece_cost` at :data:`_COST_LINE_POINTS`. ``fixed`` is what a piece costs
    whatever its length (its query writes, result rows, a row opened for a few columns)."""
    lo, hi = _COST_LINE_POINTS
    c_lo, c_hi = _piece_cost(layer, device, lo), _piece_cost(layer, device, hi)
    per_token = (c_hi - c_lo) / (hi - lo)
    return max(0.0, c_lo - per_token * lo), per_token


@functools.lru_cache(maxsize=8192)
def _grouped_plan(device: PIMDevice, d_in: int, d_out: int, vectors: int):
    """The grouped plan of ``vectors`` heads over one matrix, or None where it is one plain GEMV
    (one head and one vector per MAC: the per-head program, bit for bit)."""
    if vectors == 1 and device.vectors_per_mac == 1:
        return None
    return plan_grouped_gemv(d_in, d_out, vectors, device.geometry, dict(device.config.timings))


@functools.lru_cache(maxsize=4096)
def _grouped_program(device: PIMDevice, d_in: int, d_out: int, vectors: int) -> tuple[np.ndarray, np.ndarray]:
    plan = _grouped_plan(device, d_in, d_out, vectors)
    if plan is None:
        return _program(device, d_in, d_out, 1, 1)
    ops, rc = grouped_gemv_program(plan, device.geometry)
    ops.flags.writeable = rc.flags.writeable = False
    return ops, rc


def _grouped_sequence_program(device: PIMDevice, gemvs: tuple[tuple[int, int, int], ...]) -> tuple[np.ndarray, np.ndarray]:
    """Grouped GEMVs ``(d_in, d_out, vectors)`` of one pseudo-channel back to back, each matrix
    in rows of its own, one PREAB at the end."""
    return _concat([_grouped_program(device, int(a), int(b), int(v)) for a, b, v in gemvs])


@functools.lru_cache(maxsize=1024)
def _grouped_sequence(device: PIMDevice, gemvs: tuple[tuple[int, int, int], ...]) -> PIMResult:
    return device.run(_grouped_sequence_program(device, gemvs), 1)
