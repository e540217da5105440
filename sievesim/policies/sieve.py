"""The Sieve scheduler (paper Section 5): the greedy rule on Equation 1."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

import dataclasses

from ..costs import CostContext, GpuWork, default_ids, validate_counts
from ._prefix import first_non_decrease, prefix_on_pim, sorted_active
from .._validate import BOUNDS
from .base import Partition, Policy, register_policy
from .options import Option

try:  # compiled with the package (setup.py); the numpy path below computes the same partition
    from ._sieve_kernel import sieve_walk as _sieve_walk, sieve_walk_rows as _sieve_walk_rows
except ImportError:  # pragma: no cover - only when running from an unbuilt source tree
    _sieve_walk = _sieve_walk_rows = None

__all__ = ["Sieve", "sieve_reference"]


@register_policy
class Sieve(Policy):
    """Sort the activated experts by token count (descending), start with all on PIM, and move the
    next most popular expert to the GPU while the estimated ``T_total`` strictly decreases; stop at
    the first non-decrease or when all are on the GPU.

    Implementation: one sort of the counts, then a scalar walk over the first ``scalar_steps``
    experts (the rule usually stops there); if it has not stopped, the ``T_total`` of every
    remaining prefix cut is computed as one vector (cumulative sums over the sorted list) and the
    first non-decrease is taken from it. Both paths compute bit-identical ``T_total`` values, so
    the result is exactly the greedy rule's. Ties in count are broken by lower expert id first.

    ``include_attention=False`` is a variant that is not the paper's: it leaves the decode attention
    out of ``T_PIM`` (attention precedes the experts of its layer in the executed graph, so it does
    not compete with them for the PIM). ``experts_only=True`` goes further: the same greedy rule on
    the expert work of each side alone (no attention, no non-MoE GPU work, no interconnect), the
    terms that overlap in the paper's Figure 8 graph. docs/system.md measures all three.

    ``unit="stack"`` (or ``"channel"``, ...) is another variant that is not the paper's: the PIM
    experts are placed expert-parallel on units as PIMoE places them, and the rule moves the busiest
    unit's most popular expert while ``T_total`` strictly decreases (:func:`_unit_walk`); it compares
    the two policies' rules on one placement (docs/reproduction.md, Figure 9).

    "Strictly decreases" means by more than floating-point rounding: a move counts as a decrease
    when ``T_new < T_old - rel_tol * T_start`` (``T_start``: all on PIM, the largest value the
    walk sees). With the default ``1e-12`` this only removes decisions made by rounding noise
    (e.g. ``6e-6 - 4e-6 > 2e-6`` in binary), never a real decrease.
    """

    name = "sieve"
    description = "greedy: move the most popular experts to the GPU while T_total strictly decreases"
    options = {
        "scalar_steps": Option("int", 8, "experts walked one by one before the rest is vectorised; 0 vectorises "
                                         "at once; the result does not depend on it", lo=0,
                               hi=BOUNDS["experts"].hi),
        "rel_tol": Option("number", 1e-12, "a move counts as a decrease by more than rel_tol x T_start "
                                           "(rounding noise); 0 is exact", lo=0.0, hi=1e-3),
        "use_kernel": Option("bool", True, "the compiled walk (false: the numpy path; same partition)"),
        "include_attention": Option("bool", True, "decode attention in T_PIM, as the paper"),
        "experts_only": Option("bool", False, "the rule on each side's expert work alone (no attention, "
                                              "no non-MoE GPU work, no interconnect)"),
        "unit": Option("unit", None, "PIM experts on PIMoE's units instead of tensor-parallel over all "
                                     "channels (not the paper's Sieve)"),
    }

    def __init__(self, scalar_steps: int = 8, rel_tol: float = 1e-12, use_kernel: bool = True,
                 include_attention: bool = True, experts_only: bool = False, unit: str | None = None) -> None:
        self.scalar_steps = int(scalar_steps)
        self.rel_tol = float(rel_tol)
        self.use_kernel = bool(use_kernel) and _sieve_walk is not None
        self.include_attention = bool(include_attention)
        self.experts_only = bool(experts_only)
        if unit is not None:
            from .._units import split_unit
            split_unit(unit)            # checks the name
        self.unit = unit
        if unit is not None or self.experts_only:
            # the "cheaper" rule wastes loads on a unit placement and under the expert-work rule (an expert
            # cheaper on the GPU by itself stays on PIM when the GPU side is the larger; docs/system.md)
            self.early_loads = "off"

    def __repr__(self) -> str:
        args = ([] if self.include_attention else ["include_attention=False"]) + \
            (["experts_only=True"] if self.experts_only else []) + ([f"unit={self.unit!r}"] if self.unit else [])
        return f"Sieve({', '.join(args)})"

    def _attention_s(self, ctx: CostContext) -> float:
        """The attention term of T_PIM as this instance counts it (the paper: included)."""
        return ctx.t_attention_s if self.include_attention else 0.0

    def _decide(self, counts: np.ndarray, ctx: CostContext, expert_ids: np.ndarray) -> np.ndarray | Partition:
        if self.experts_only:   # only the work that overlaps in the executed graph: the experts of each side
            ctx = dataclasses.replace(ctx, t_comm_s=0.0, t_attention_s=0.0, gpu_fixed=GpuWork())
        if self.unit is not None:
            return self._decide_on_units(counts, ctx, expert_ids)
        if self.use_kernel:
            return self._decide_kernel(counts, ctx, expert_ids)
        return self._decide_numpy(counts, ctx, expert_ids)

    def decide_rows(self, counts: np.ndarray, ctxs: Sequence[CostContext]) -> np.ndarray | None:
        """The compiled walk on every row at once (:meth:`Policy.decide_rows`), for the paper's rule
        (tensor-parallel PIM experts, the compiled walk) on rows that share one PIM time table and
        one set of GPU rates (a step's GPUs at one layer); None otherwise."""
        if self.unit is not None or self.experts_only or not self.use_kernel or _sieve_walk_rows is None:
            return None
        first = ctxs[0]
        table = first.pim_times()
        if any(c.pim is not first.pim or c.batch != first.batch or c._off_e != first._off_e
               or c._off_t != first._off_t or c._comp_t != first._comp_t for c in ctxs):
            return None
        rows = np.ascontiguousarray(counts, dtype=np.int64)
        out = np.empty(rows.shape, dtype=np.uint8)
        _sieve_walk_rows(rows, table, np.array([self._attention_s(c) for c in ctxs]),
                         np.array([c.t_comm_s for c in ctxs]), np.array([c._off0 for c in ctxs]), first._off_e,
                         first._off_t, np.array([c._comp0 for c in ctxs]), first._comp_t, self.rel_tol, out)
        return out.view(bool)

    def _decide_on_units(self, counts: np.ndarray, ctx: CostContext, expert_ids: np.ndarray) -> Partition:
        """See :func:`_unit_walk` (``unit`` set)."""
        return _unit_walk(self, counts, ctx, expert_ids)

    def _decide_kernel(self, counts: np.ndarray, ctx: CostContext, expert_ids: np.ndarray) -> np.ndarray:
        """Counting sort + greedy walk in C (sievesim/policies/_sieve_kernel.pyx)."""
        c = np.ascontiguousarray(counts, dtype=np.int64)
        perm = None
        if expert_ids is not default_ids(c.size) and c.size > 1 and np.any(np.diff(expert_ids) < 0):
            perm = np.argsort(expert_ids, kind="stable")     # ties go to the lower id first
            c = np.ascontiguousarray(c[perm])
        out = np.empty(c.size, dtype=np.uint8)
        _sieve_walk(c, ctx.pim_times(), self._attention_s(ctx), ctx.t_comm_s, ctx._off0, ctx._off_e, ctx._off_t,
                    ctx._comp0, ctx._comp_t, self.rel_tol, out)
        on_pim = out.view(bool)
        if perm is not None:
            unpermuted = np.empty_like(on_pim)
            unpermuted[perm] = on_pim
            on_pim = unpermuted
        return on_pim

    def _decide_numpy(self, counts: np.ndarray, ctx: CostContext, expert_ids: np.ndarray) -> np.ndarray:
        s, desc = sorted_active(counts)
        m = desc.size
        if m == 0:
            return counts > 0
        pt = ctx.pim_times()[desc]
        p_all = self._attention_s(ctx) + float(np.add.reduce(pt))
        comm = ctx.t_comm_s
        offbase, off_t = ctx._offbase, ctx._off_t
        comp0, comp_t = ctx._comp0, ctx._comp_t
        prev = max(comm, ctx._off0, comp0, p_all)
        tol = self.rel_tol * prev
        steps = min(m, self.scalar_steps)
        top = desc[:steps].tolist()
        ptl = pt[:steps].tolist()
        offl = offbase[:steps].tolist()
        tok = 0
        pc = 0.0
        k = 0
        while k < steps:
            tok += top[k]
            pc += ptl[k]
            cur = max(comm, offl[k] + off_t * tok, comp0 + comp_t * tok, p_all - pc)
            if not cur < prev - tol:
                break
            prev = cur
            k += 1
        else:
            if k < m:  # not stopped within the scalar walk: vectorise the rest
                k = first_non_decrease(ctx.prefix_totals(desc, pt, p_all), k, tol)
        return prefix_on_pim(counts, expert_ids, s, desc, k)


def _unit_walk(sieve: Sieve, counts: np.ndarray, ctx: CostContext, expert_ids: np.ndarray,
               on_gpu_from_start: tuple[int, int] = (0, 0)) -> Partition:
    """Sieve's stopping rule on PIMoE's expert-parallel placement (``Sieve(unit=...)``, not the
    paper's Sieve, whose PIM experts are tensor-parallel over all channels).

    The experts sit on PIM units as PIMoE places them (:func:`sievesim.policies.placement.expert_placement`),
    so ``T_PIM = attention + the busiest unit's expert time``. Start with all activated experts on
    PIM; move the most popular expert of the busiest unit to the GPU while Equation 1's ``T_total``
    (interconnect, GPU with its non-MoE work, PIM with attention) strictly decreases. PIMoE moves
    the same experts in the same order but stops on isolated expert times; this variant isolates
    what Equation 1's terms are worth when both run on the same placement.

    ``on_gpu_from_start``: ``(experts, tokens)`` already on the GPU outside ``counts`` (Overlap's
    preloaded experts, given with count 0 here)."""
    import math

    from .placement import unit_queues

    unit, unit_of, queues, load, t_e = unit_queues(counts, expert_ids, ctx, sieve.unit)
    on_pim = counts > 0
    n_units = len(queues)
    heads = [0] * n_units
    attention = sieve._attention_s(ctx)
    n_gpu, tok = on_gpu_from_start

    def total(n: int, x: int, busiest: float) -> float:
        return max(ctx.t_comm_s, ctx.gpu_time_s(n, x)[0], attention + busiest)

    prev = total(n_gpu, tok, float(load.max(initial=0.0)))
    tol = sieve.rel_tol * prev
    tries = 0
    while True:
        u = int(np.argmax(load)) if n_units else 0
        if not n_units or heads[u] >= len(queues[u]):
            break
        i = queues[u][heads[u]]
        new_load = math.fsum(t_e[j] for j in queues[u][heads[u] + 1:])
        old = load[u]
        load[u] = new_load
        cur = total(n_gpu + 1, tok + int(counts[i]), float(load.max()))
        tries += 1
        if not cur < prev - tol:
            load[u] = old
            break
        heads[u] += 1
        on_pim[i] = False
        n_gpu += 1
        tok += int(counts[i])
        prev = cur
    return Partition(counts, expert_ids, on_pim, unit=unit, unit_of=unit_of, info={"moves_tried": tries})


def sieve_reference(counts: Any, ctx: CostContext, expert_ids: Any = None, rel_tol: float = 1e-12) -> Partition:
    """The greedy rule written literally (for tests): every step re-prices the whole partition
    with :meth:`CostContext.evaluate`. Slow, but independent of the fast path's algebra."""
    c, ids = validate_counts(counts, ctx, expert_ids)
    order = sorted((i for i in range(c.size) if c[i] > 0), key=lambda i: (-int(c[i]), int(ids[i])))
    on_pim = c > 0
    best = ctx.evaluate(c, on_pim).t_total_s
    tol = rel_tol * best
    for i in order:
        trial = on_pim.copy()
        trial[i] = False
        t = ctx.evaluate(c, trial).t_total_s
        if not t < best - tol:
            break
        on_pim, best = trial, t
    return Partition(c, ids, on_pim)
