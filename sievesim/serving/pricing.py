"""The time of one serving iteration, from the executed system step.

An iteration of the serving loop is one step of the model over a set of requests: decode requests
(one token each, at their own context lengths, on their own GPU) and prefill chunks (``length``
prompt tokens from ``offset``, on their request's GPU). :class:`IterationPricer` prices it with
:class:`~sievesim.system.step.StepSimulator`: the Figure-8 graph of that batch, built and executed,
PIM nodes on the cycle-accurate engine.

Two ways, both through the step:

* **exact** (:meth:`IterationPricer.exact_s`): the step of the iteration's actual batch (per-GPU
  decode requests and their contexts, prefill chunks and their GPUs). Every iteration has new
  contexts, so every exact step simulates new attention programs.
* **memo** (:meth:`IterationPricer.memo_s`, the default): the step time as a function of decode
  requests ``B``, their context ``c`` (the busiest GPU's context tokens per request of an even
  batch: the mean on one GPU), the prefill tokens ``T`` and their share on the busiest GPU,
  interpolated multilinearly between grid points (1..G-1 requests priced as G); each grid point
  is priced once, by the step of ``B`` requests spread evenly over the G GPUs (B is a multiple of
  G on the grid), every one at context ``c``, and ``T`` prefill tokens as fresh prompts. Two
  corrections add what the grid leaves out: the spread of the contexts and the windows of
  sliding layers (:meth:`IterationPricer.attention_correction_s`, the engine's attention), and
  chunk offsets (:meth:`IterationPricer.prefill_correction_s`). What is still left out (routing
  draws, uneven GPUs beyond the busiest one) is measured by pricing a sample of iterations
  exactly (:class:`MemoError`). An iteration outside the grid (:meth:`IterationPricer.outside_grid`:
  a prefill-only iteration of fewer tokens than the grid's smallest prefill point, or decode
  requests whose context coordinate is below the grid's shortest context) is not extrapolated: it
  is priced exactly and counted (``outside_grid_exact``).

The pricer is a pure function of the batch: routing is drawn from the model's synthetic routing
with a generator seeded by the seed and the batch, and the policy's cost table is frozen after a
warm-up (a few steps at representative batches, the paper's warm-up), so a batch costs the same
whenever it is priced. A disaggregated server (:mod:`sievesim.serving.disagg`) has one pricer per
pool, on the pool's GPU count: prefill-only batches (no decode requests) on the prefill pool,
decode-only batches (no prefill tokens) on the decode pool, each warmed up on batches of its own
kind (``warmup``). Times are in seconds.

Energy: every priced step has its energy by resource (:class:`~sievesim.system.energy.StepEnergy`);
:meth:`IterationPricer.exact_priced` and :meth:`IterationPricer.memo_priced` give an iteration's
time and energy [J] (the memo interpolates the grid points' dynamic energy with the time's weights
and adds the GPUs' static power over the memoised time). Hardware without energy fields gives None.
"""
from __future__ import annotations

import bisect
import math
import zlib
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..errors import field_error
from ..system.energy import RESOURCE_KINDS
from ..system.step import StepSimulator

__all__ = ["IterationPricer", "MemoError", "batch_grid", "context_grid", "prefill_grid", "equivalent_prompt",
           "spread_contexts", "CV_GRID", "WARMUPS"]

#: What the cost table may learn from before it is frozen (:meth:`IterationPricer._warm_up`).
WARMUPS = ("mixed", "prefill", "decode")


def batch_grid(gpus: int, max_batch: int) -> list[int]:
    """Decode batch sizes priced by the memo: 0, 1 .. G-1 (one request on each of the first GPUs), then
    multiples of G: G x 1..8, then about 19 % apart (G x round(8 x 2^(k/4))), up to the first at or
    above ``max_batch``. Past 9 GPUs the part below G goes 1..8 and then about 19 % apart to G-1
    (rack scale: 20 points below 72 instead of 71; the step changes little from one busy GPU to the
    next, and up to 9 GPUs the grid is every count, as before)."""
    per = list(range(1, 9))
    k = 1
    while per[-1] * gpus < max_batch:
        per.append(max(per[-1] + 1, round(8 * 2 ** (k / 4))))
        k += 1
    below = list(range(1, min(gpus, 9)))
    while below and below[-1] < gpus - 1:
        below.append(min(gpus - 1, max(below[-1] + 1, round(below[-1] * 1.19))))
    return [0] + below + [p * gpus for p in per]


def context_grid(max_context: int) -> list[int]:
    """Mean decode contexts priced by the memo [tokens]: 16, 32, 64, ... up to the first at or above
    ``max_context`` (attention is nearly linear in the context between them)."""
    out = [16]
    while out[-1] < max_context:
        out.append(out[-1] * 2)
    return out


def prefill_grid(max_tokens: int) -> list[int]:
    """Prefill tokens per iteration priced by the memo: 0, 8, 16, 24, 32, 48, 64, 80, 96, 128, 160,
    192, 256 (a step's time is concave in few tokens, as experts are activated one by one), then
    doubling up to the first at or above ``max_tokens``. A budget below 8 tokens gets every count
    from 0 to ``max_tokens``: the grid holds no point an iteration cannot reach (0 and 8 with a
    budget of 4 interpolated 1 to 3 prefill tokens beside decode far below their step)."""
    if max_tokens < 8:
        return list(range(max(int(max_tokens), 1) + 1))
    out = [0, 8, 16, 24, 32, 48, 64, 80, 96, 128, 160, 192, 256]
    while out[-1] < max_tokens:
        out.append(out[-1] * 2)
    return [t for t in out if t < max_tokens] + [next(t for t in out if t >= max_tokens)]


#: Spreads of decode contexts priced by the attention correction (coefficient of variation).
CV_GRID = (0.0, 0.25, 0.5, 1.0, 2.0)


def spread_contexts(n: int, mean: float, cv: float) -> np.ndarray:
    """``n`` context lengths [tokens, >= 1] with mean about ``mean`` and coefficient of variation
    about ``cv``: the quantiles (i + 1/2) / n of a gamma distribution of that mean and CV (CV 0: all
    at the mean). A fixed shape, so that a spread is priced once."""
    if cv <= 0.0 or n < 2:
        return np.full(n, max(1, int(round(mean))), dtype=np.int64)
    from scipy.stats import gamma

    shape = 1.0 / (cv * cv)
    q = gamma.ppf((np.arange(n) + 0.5) / n, shape, scale=1.0 / shape)
    return np.maximum(1, np.rint(q / q.mean() * mean)).astype(np.int64)


def _split(tokens: int, parts: int) -> np.ndarray:
    """``tokens`` split into ``min(parts, tokens)`` lengths differing by at most one token."""
    n = max(1, min(int(parts), int(tokens)))
    out = np.full(n, tokens // n, dtype=np.int64)
    out[:tokens % n] += 1
    return out


def _bracket(grid: Sequence[int], x: float) -> tuple[int, int, float]:
    """Indices of the grid points around ``x`` and the weight of the upper one (x beyond the ends:
    the end point, weight 0; the grids are built to cover every value an iteration can take)."""
    j = bisect.bisect_left(grid, x)
    if j <= 0:
        return 0, 0, 0.0
    if j >= len(grid):
        return len(grid) - 1, len(grid) - 1, 0.0
    lo, hi = grid[j - 1], grid[j]
    return j - 1, j, (x - lo) / (hi - lo)


def equivalent_prompt(length: np.ndarray, offset: np.ndarray) -> np.ndarray:
    """The prompt length [tokens] whose causal attention covers as many (query, key) positions as a
    chunk of ``length`` tokens from position ``offset`` (positions offset+1 .. offset+length), so
    that the step, which prices a prompt by that sum, prices the chunk; at least ``length``.
    Sliding-window layers cap the sum at the window in the step, which this leaves approximate."""
    att = length * offset + length * (length + 1) / 2.0
    return np.maximum(length, np.rint((np.sqrt(8.0 * att + 1.0) - 1.0) / 2.0).astype(np.int64))


class _IterationStep(StepSimulator):
    """A :class:`StepSimulator` whose batch is set per call: decode requests with their own contexts
    and GPUs, prefill chunks with their own offsets and GPUs (see :meth:`IterationPricer.exact_s`)."""

    frozen = False

    def set_batch(self, dec_ctx: np.ndarray, dec_gpu: np.ndarray, pf_len: np.ndarray, pf_off: np.ndarray,
                  pf_gpu: np.ndarray, rng: np.random.Generator) -> None:
        order = np.argsort(dec_gpu, kind="stable")
        self.batch = int(dec_ctx.size)
        self.context = np.asarray(dec_ctx, dtype=np.int64)[order]
        self._dec_owner = np.asarray(dec_gpu, dtype=np.int64)[order]
        self._pf = (np.asarray(pf_len, dtype=np.int64), np.asarray(pf_off, dtype=np.int64),
                    np.asarray(pf_gpu, dtype=np.int64))
        self.prefill_requests = int(pf_len.size)
        self._rng = rng
        self._step_index = 0

    def _step_tokens(self):  # type: ignore[override]
        pf_len, _, pf_gpu = self._pf
        owner = np.concatenate([self._dec_owner, np.repeat(pf_gpu, pf_len)])
        ids, counts = self._on_slots(self.source.sample_tokens(self._rng, int(owner.size)))
        return ids, counts, owner, [np.arange(owner.size)]

    def _layer_batches(self, b):  # type: ignore[override]
        from ..system import figure8 as f8

        m, G = self.model, self.gpus
        pf_len, pf_off, pf_gpu = self._pf
        rows = b.mb_rows[0]
        lens_g = [self.context[self._dec_owner == g] for g in range(G)]
        eq = equivalent_prompt(pf_len, pf_off)
        pf_g = [[int(x) for x in eq[pf_gpu == g]] for g in range(G)]
        tokens_g = [int(lens_g[g].size) + int(pf_len[pf_gpu == g].sum()) for g in range(G)]
        for layer in range(m.num_layers):
            kind, is_moe = m.layer_attention[layer], m.layer_mlp[layer] == "moe"
            yield f8.LayerBatch(layer, kind, is_moe, 0, rows, b.owner[rows], tokens_g, lens_g, pf_g)

    def _learn(self, b) -> None:  # type: ignore[override]
        if not self.frozen:
            super()._learn(b)


@dataclass(frozen=True)
class MemoError:
    """The memo against the exact step on a sample of iterations.

    Attributes:
        samples: iterations priced both ways.
        mean_abs_rel: mean of |memo - exact| / exact.
        max_abs_rel: the largest |memo - exact| / exact.
        mean_rel: mean of (memo - exact) / exact (the bias).
        total_rel: (sum of memo - sum of exact) / sum of exact over the sample.
    """

    samples: int
    mean_abs_rel: float
    max_abs_rel: float
    mean_rel: float
    total_rel: float

    @classmethod
    def from_pairs(cls, memo: Sequence[float], exact: Sequence[float]) -> "MemoError":
        if not len(exact):
            return cls(0, 0.0, 0.0, 0.0, 0.0)
        m, e = np.asarray(memo, dtype=float), np.asarray(exact, dtype=float)
        rel = (m - e) / e
        return cls(int(e.size), float(np.abs(rel).mean()), float(np.abs(rel).max()), float(rel.mean()),
                   float((m.sum() - e.sum()) / e.sum()))

    def as_dict(self) -> dict[str, float]:
        return {"samples": self.samples, "mean_abs_rel": self.mean_abs_rel, "max_abs_rel": self.max_abs_rel,
                "mean_rel": self.mean_rel, "total_rel": self.total_rel}


class IterationPricer:
    """Iteration times [s] of ``model`` on ``gpus`` GPUs of ``hardware`` under ``policy``.

    Parameters
    ----------
    model, hardware, gpus, policy:
        As for :class:`~sievesim.system.step.StepSimulator` (already resolved specs or names).
    max_batch:
        The largest decode batch an iteration can hold (the grid covers it).
    max_prefill_tokens:
        The largest prefill tokens of one iteration (the scheduler's token budget).
    max_context:
        The longest context a request can reach [tokens] (the grid covers it).
    seed:
        Seeds the routing draws (with the batch, see the module docstring).
    warmup:
        The batches the policy's cost table learns from before it is frozen: ``"mixed"`` (decode
        batches with a prefill chunk beside one of them: a colocated server), ``"prefill"``
        (prefill-only batches: the prefill pool of a disaggregated server) or ``"decode"``
        (decode-only batches: its decode pool). See :meth:`_warm_up`.
    step_options:
        Further keyword arguments of ``StepSimulator`` (``pimoe_unit``, ``early_loads``,
        ``contention``, ``policy_options``, ``scheduler_latency_s``, ``top_k``, ``trace``).
    """

    def __init__(self, model: Any, hardware: Any, *, gpus: int, policy: str, max_batch: int,
                 max_prefill_tokens: int, max_context: int, seed: int = 0, warmup: str = "mixed",
                 **step_options: Any) -> None:
        if warmup not in WARMUPS:
            raise field_error("warmup", warmup, "one of " + ", ".join(WARMUPS))
        step_options.setdefault("energy", True)       # an iteration's price is its time and its energy
        self.sim = _IterationStep(model, hardware, gpus=gpus, policy=policy, batch=gpus, seed=seed,
                                  context_len=1, **step_options)
        if not hasattr(self.sim.source, "sample_tokens"):
            raise field_error("routing", self.sim.routing, "synthetic routing (the default or synthetic:PRESET): "
                                                           "serving draws the routing of every iteration's batch")
        self.gpus, self.seed = int(gpus), int(seed)
        self.b_grid = batch_grid(self.gpus, max_batch)
        self.c_grid = context_grid(max_context)
        self.t_grid = prefill_grid(max_prefill_tokens)
        #: Equal prompts per GPU priced by the memo: 1, 2, 4, ... up to the first at or above the
        #: largest prefill tokens (an iteration holds at most that many prompts).
        self.p_grid = [1]
        while self.p_grid[-1] < max_prefill_tokens:
            self.p_grid.append(self.p_grid[-1] * 2)
        self.memo: dict[tuple[int, int, int, int, int], float] = {}
        #: Dynamic energy [J] of each grid point by resource (``RESOURCE_KINDS``, static left 0).
        self.memo_energy: dict[tuple[int, int, int, int, int], np.ndarray] = {}
        energy = self.sim.energy
        #: Power every GPU of the system draws whatever runs [W] (None: the hardware has no energy model).
        self.static_power_w: float | None = None if energy is None else float(energy.static_w(self.gpus))
        m = self.sim.model
        self._attn: dict[tuple[str, int, int], float] = {}
        kinds = [k for k in m.layer_attention if k != "linear"]
        self._att_layers = {k: kinds.count(k) for k in dict.fromkeys(kinds)}
        self._pf_layers = [(m.layer_attention.index(k), m.layer_attention.count(k))
                           for k in dict.fromkeys(m.layer_attention)]
        self.lookups = 0          # memo_s calls
        self.corner_hits = 0      # grid points found priced (8 per lookup at most)
        self.corner_misses = 0    # grid points priced now
        self.exact_steps = 0
        #: Memo lookups outside the grid priced by their exact step instead (:meth:`outside_grid`).
        self.outside_grid_exact = 0
        self._outside: dict[tuple, tuple[float, np.ndarray | None]] = {}
        self.warmup = warmup
        self._warm_up(max_batch, max_prefill_tokens)

    def _warm_up(self, max_batch: int, max_prefill_tokens: int) -> None:
        """The paper's warm-up: steps at a few representative batches while the cost table learns,
        then the table is frozen. ``"mixed"`` and ``"decode"``: two steps each at decode batches of
        G, about an eighth of ``max_batch`` and ``max_batch``, at a 512-token context (``"mixed"``:
        with a prefill chunk of ``min(max_prefill_tokens, 256)`` tokens beside the middle one).
        ``"prefill"``: two steps each at prefill-only batches of ``min(max_prefill_tokens, 256)``
        and ``max_prefill_tokens`` tokens, split evenly over the GPUs as fresh prompts."""
        G = self.gpus
        if self.warmup == "prefill":
            for tp in sorted({min(max_prefill_tokens, 256), max_prefill_tokens}):
                pf_len = np.full(min(G, tp), tp // min(G, tp), dtype=np.int64)
                pf_len[:tp % pf_len.size] += 1
                none = np.zeros(0, dtype=np.int64)
                for _ in range(2):
                    self._price(none, none, pf_len, np.zeros(pf_len.size, dtype=np.int64),
                                np.arange(pf_len.size, dtype=np.int64), ("warmup-prefill", tp))
            self.sim.frozen = True
            return
        sizes = sorted({G, max(G, (max_batch // 8) // G * G), max(G, max_batch // G * G)})
        for i, b in enumerate(sizes):
            pf = min(max_prefill_tokens, 256) if i == 1 and self.warmup == "mixed" else 0
            for _ in range(2):
                self._price(np.full(b, 512), np.arange(b) % G, np.array([pf] if pf else [], dtype=np.int64),
                            np.zeros(1 if pf else 0, dtype=np.int64), np.zeros(1 if pf else 0, dtype=np.int64),
                            ("warmup", b, pf))
        self.sim.frozen = True

    def _price(self, dec_ctx: np.ndarray, dec_gpu: np.ndarray, pf_len: np.ndarray, pf_off: np.ndarray,
               pf_gpu: np.ndarray, key: tuple) -> tuple[float, np.ndarray | None]:
        """The executed step of this batch: its time [s] and its energy [J] by resource
        (:data:`~sievesim.system.energy.RESOURCE_KINDS`; None without an energy model)."""
        h = zlib.crc32(repr(key).encode())
        self.sim.set_batch(dec_ctx, dec_gpu, pf_len, pf_off, pf_gpu, np.random.default_rng([self.seed, 24, h]))
        r = self.sim.run_step(grow_contexts=False)
        e = r["energy_j"]
        parts = None if e is None else np.array([e[k] for k in RESOURCE_KINDS], dtype=float)
        return float(r["step_time_s"]), parts

    # ------------------------------------------------------------------ exact
    def exact_priced(self, dec_ctx: np.ndarray, dec_gpu: np.ndarray, pf_len: np.ndarray, pf_off: np.ndarray,
                     pf_gpu: np.ndarray) -> tuple[float, np.ndarray | None]:
        """The step of exactly this batch (arguments as for :meth:`exact_s`): its time [s] and its
        energy [J] by resource (:data:`~sievesim.system.energy.RESOURCE_KINDS`; None without an
        energy model)."""
        self.exact_steps += 1
        order = np.lexsort((dec_ctx, dec_gpu))
        key = ("exact", tuple(dec_gpu[order].tolist()), tuple(dec_ctx[order].tolist()), tuple(pf_len.tolist()),
               tuple(pf_off.tolist()), tuple(pf_gpu.tolist()))
        return self._price(dec_ctx, dec_gpu, pf_len, pf_off, pf_gpu, key)

    def exact_s(self, dec_ctx: np.ndarray, dec_gpu: np.ndarray, pf_len: np.ndarray, pf_off: np.ndarray,
                pf_gpu: np.ndarray) -> float:
        """The step of exactly this batch: decode requests at contexts ``dec_ctx`` [tokens] on GPUs
        ``dec_gpu``; prefill chunks of ``pf_len`` tokens from position ``pf_off`` on GPUs ``pf_gpu``."""
        return self.exact_priced(dec_ctx, dec_gpu, pf_len, pf_off, pf_gpu)[0]

    # ------------------------------------------------------------------ memo
    def read_tokens(self, kind: str, dec_ctx: np.ndarray) -> np.ndarray:
        """The cache tokens each request's attention reads at a layer of ``kind``: its context, capped
        at the window of a sliding layer, the current chunk of a chunked one (as the step reads it)."""
        layer = self.sim.engine_times.engines[kind].attention
        L = np.asarray(dec_ctx, dtype=np.int64)
        if layer is None:
            return L
        if layer.window:
            L = np.minimum(L, layer.window)
        if layer.chunk:
            L = np.where(L > 0, (L - 1) % layer.chunk + 1, 0)
        return L

    def _busiest_gpu(self, kind: str, dec_ctx: np.ndarray, dec_gpu: np.ndarray) -> np.ndarray:
        """The tokens read by each request of the GPU that reads the most at a layer of ``kind``."""
        read = self.read_tokens(kind, dec_ctx)
        if self.gpus == 1:
            return read
        g = int(np.argmax(np.bincount(dec_gpu, weights=read, minlength=self.gpus)))
        return read[dec_gpu == g]

    def _busiest(self, batch: int) -> int:
        """Decode requests on the busiest GPU of an even batch."""
        return -(-batch // self.gpus)

    def _attention_s(self, kind: str, n: int, c: float, cv: float = 0.0) -> float:
        """Engine time [s] of ``n`` requests on one GPU at mean context ``c`` whose contexts spread
        with coefficient of variation ``cv`` (:func:`spread_contexts`), bilinear between grid points
        of the context and of the spread (each priced once)."""
        cj = _bracket(self.c_grid, c)
        vk = _bracket(CV_GRID, cv)
        out = 0.0
        for j, wj in ((cj[0], 1.0 - cj[2]), (cj[1], cj[2])):
            for k, wk in ((vk[0], 1.0 - vk[2]), (vk[1], vk[2])):
                if wj * wk > 0.0:
                    key = (kind, n, j, k)
                    t = self._attn.get(key)
                    if t is None:
                        lens = spread_contexts(n, self.c_grid[j], CV_GRID[k])
                        t = self._attn[key] = self.sim.engine_times.attention_s(kind, lens)
                    out += wj * wk * t
        return out

    def context_coordinate(self, dec_ctx: np.ndarray, dec_gpu: np.ndarray) -> float:
        """The memo's context coordinate [tokens]: the context at which every GPU of an even batch of
        this size holds as many context tokens as the GPU of this batch that holds the most (the mean
        context on one GPU or when the GPUs hold equal tokens). Attention is data-parallel and a
        layer waits for its slowest GPU (the dispatch that follows gathers every GPU's tokens)."""
        if not dec_ctx.size:
            return float(self.c_grid[0])
        if self.gpus == 1:
            return float(dec_ctx.mean())
        per_gpu = np.bincount(dec_gpu, weights=dec_ctx.astype(float), minlength=self.gpus)
        return float(per_gpu.max() / self._busiest(dec_ctx.size))

    def attention_correction_s(self, dec_ctx: np.ndarray, dec_gpu: np.ndarray, c_memo: float | None = None) -> float:
        """What the memo's even batch at :meth:`context_coordinate` misses of this batch's attention [s].

        The step spreads a GPU's attention over its pseudo-channels by tokens (units of a request and
        a KV head cut into pieces, ``AttentionLayer(balance="tokens")``), so a layer's time follows
        the tokens the busiest GPU reads, plus a cost per piece that grows with the spread of its
        requests' contexts. Per layer of each context-dependent attention kind: the engine's
        attention of the busiest GPU's request count at the context that reads as many tokens as
        the GPU of this batch that reads the most (windows and chunks applied per request), with
        that GPU's spread of contexts, minus the memo's (every request at the coordinate)."""
        if not dec_ctx.size or self.sim.gpu_only or not self._att_layers:
            return 0.0
        n = self._busiest(dec_ctx.size)
        if c_memo is None:
            c_memo = self.context_coordinate(dec_ctx, dec_gpu)
        total = 0.0
        for kind, layers in self._att_layers.items():
            read = self._busiest_gpu(kind, dec_ctx, dec_gpu)
            mean = float(read.mean())
            cv = float(read.std() / mean) if mean > 0 else 0.0
            total += layers * (self._attention_s(kind, n, float(read.sum()) / n, cv) - self._attention_s(kind, n, c_memo))
        return total

    def point_s(self, i: int, j: int, k: int, f: int, m: int = 0) -> float:
        """The step at grid point (batch index i, context index j, prefill index k, prefill spread f:
        0 even over the GPUs, 1 all on the first GPU; prompts index m: the prefill tokens of each GPU
        that holds any split into ``p_grid[m]`` equal prompts, or one token each when it holds fewer),
        priced once."""
        key = (i, j, k, f, m)
        t = self.memo.get(key)
        if t is not None:
            self.corner_hits += 1
            return t
        self.corner_misses += 1
        G = self.gpus
        b, c, tp = self.b_grid[i], self.c_grid[j], self.t_grid[k]
        parts: np.ndarray | None = None
        if b == 0 and tp == 0:     # an empty iteration never runs; the corner only anchors interpolation
            t = 0.0
            parts = np.zeros(len(RESOURCE_KINDS)) if self.static_power_w is not None else None
        else:
            per_gpu = [tp] if f or G == 1 else [tp // G + (g < tp % G) for g in range(G)]
            p = self.p_grid[m]
            chunks = [(_split(n, p), g) for g, n in enumerate(per_gpu) if n > 0]
            pf_len = np.concatenate([x for x, _ in chunks]) if chunks else np.zeros(0, dtype=np.int64)
            pf_gpu = np.concatenate([np.full(x.size, g, dtype=np.int64) for x, g in chunks]) if chunks \
                else np.zeros(0, dtype=np.int64)
            t, parts = self._price(np.full(b, c, dtype=np.int64), np.arange(b) % G, pf_len,
                                   np.zeros(pf_len.size, dtype=np.int64), pf_gpu,
                                   ("memo", b, c, tp, f) + ((p,) if m else ()))
        if parts is not None:
            parts[RESOURCE_KINDS.index("static")] = 0.0     # the static part follows the iteration's own time
            self.memo_energy[key] = parts
        self.memo[key] = t
        return t

    def prompts_coordinate(self, pf_len: np.ndarray, pf_gpu: np.ndarray) -> float:
        """The memo's prompts coordinate: 1 / the effective number of equal prompts on the GPU with the
        most prefill tokens, T^2 / sum of its chunks' squared lengths (1: one chunk; 1/8: eight of equal
        length). A GPU's prefill attention is linear in it at given tokens (sum of L^2 / 2 = T^2 x / 2),
        so that interpolating between grid points of 1, 2, 4, ... equal prompts prices the attention
        of several prompts sharing an iteration, which one long prompt would overprice."""
        if pf_len.size < 2:
            return 1.0
        L = pf_len.astype(float)
        if self.gpus > 1:
            g = int(np.argmax(np.bincount(pf_gpu, weights=L, minlength=self.gpus)))
            L = L[pf_gpu == g]
        return float((L * L).sum() / (L.sum() ** 2)) if L.size > 1 else 1.0

    def prefill_correction_s(self, pf_len: np.ndarray, pf_off: np.ndarray, pf_gpu: np.ndarray) -> float:
        """What chunk offsets add to fresh prompts of the chunks' lengths [s]: a chunk from position
        ``off`` attends to ``off`` earlier tokens too. Per GPU, the roofline of the prefill attention
        of every layer at the chunks' equivalent lengths (as :meth:`exact_s` prices them) minus at
        their lengths; the largest over the GPUs (prefill attention runs on the GPU, on the critical
        path of its layer)."""
        late = pf_off > 0
        if not late.any():
            return 0.0
        from ..system import gpu_ops

        m, hw = self.sim.model, self.sim.hw
        ln, off, gp = pf_len[late], pf_off[late], pf_gpu[late]
        eq = equivalent_prompt(ln, off)
        best = 0.0
        for g in np.unique(gp).tolist():
            sel = gp == g
            extra = 0.0
            for layer, count in self._pf_layers:
                extra += count * (gpu_ops.roofline_s(gpu_ops.prefill_attention(m, layer, eq[sel]), hw)
                                  - gpu_ops.roofline_s(gpu_ops.prefill_attention(m, layer, ln[sel]), hw))
            best = max(best, extra)
        return best

    def outside_grid(self, dec_ctx: np.ndarray, dec_gpu: np.ndarray, pf_len: np.ndarray) -> str | None:
        """Why this batch lies outside the memo's grid (None: inside), where interpolation would
        extrapolate from the grid's end: prefill alone of fewer tokens than the smallest prefill point
        (``t_grid[1]``, 8: a token budget below it made every prefill-only iteration cost 8 tokens'
        step), or decode requests at a context coordinate below the shortest context (``c_grid[0]``)."""
        if dec_ctx.size == 0:
            tp = int(pf_len.sum())
            return f"prefill alone of {tp} tokens, below {self.t_grid[1]}" if 0 < tp < self.t_grid[1] else None
        c = self.context_coordinate(dec_ctx, dec_gpu)
        return f"decode context {c:.3g} below {self.c_grid[0]} tokens" if c < self.c_grid[0] else None

    def _exact_outside(self, dec_ctx: np.ndarray, dec_gpu: np.ndarray, pf_len: np.ndarray, pf_off: np.ndarray,
                       pf_gpu: np.ndarray) -> tuple[float, np.ndarray | None]:
        """The exact step of a batch outside the grid, kept (a batch's price is a function of the
        batch, so a batch seen again is not simulated again; at most 65,536 kept)."""
        self.outside_grid_exact += 1
        order = np.lexsort((dec_ctx, dec_gpu))
        key = (tuple(dec_gpu[order].tolist()), tuple(dec_ctx[order].tolist()), tuple(pf_len.tolist()),
               tuple(pf_off.tolist()), tuple(pf_gpu.tolist()))
        got = self._outside.get(key)
        if got is None:
            got = self.exact_priced(dec_ctx, dec_gpu, pf_len, pf_off, pf_gpu)
            if len(self._outside) < 65536:
                self._outside[key] = got
        t, parts = got
        return t, None if parts is None else parts.copy()

    def memo_priced(self, dec_ctx: np.ndarray, dec_gpu: np.ndarray, pf_len: np.ndarray, pf_off: np.ndarray,
                    pf_gpu: np.ndarray) -> tuple[float, np.ndarray | None]:
        """The memoised step of this batch (arguments as for :meth:`exact_s`): its time [s] (see
        :meth:`memo_s`) and its energy [J] by resource (:data:`~sievesim.system.energy.RESOURCE_KINDS`;
        None without an energy model): the grid points' dynamic energies (GPU compute, HBM, PIM,
        links) with the same multilinear weights as the time, and the static power of the G GPUs
        over the memoised time. The corrections add time (and so static energy) but no dynamic
        energy; the error of both against the exact step is measured on sampled iterations."""
        batch, tp = int(dec_ctx.size), int(pf_len.sum())
        if batch == 0 and tp == 0:
            return 0.0, (None if self.static_power_w is None else np.zeros(len(RESOURCE_KINDS)))
        if self.outside_grid(dec_ctx, dec_gpu, pf_len) is not None:
            return self._exact_outside(dec_ctx, dec_gpu, pf_len, pf_off, pf_gpu)
        self.lookups += 1
        G = self.gpus
        bi = _bracket(self.b_grid, batch)
        c = self.context_coordinate(dec_ctx, dec_gpu) if batch else None
        ci = _bracket(self.c_grid, c) if batch else (0, 0, 0.0)
        if batch:
            ti = _bracket(self.t_grid, tp)
        else:       # prefill alone: no interpolation towards the empty iteration
            lo, hi, w = _bracket(self.t_grid[1:], tp)
            ti = (lo + 1, hi + 1, w)
        if G > 1 and tp:
            share = np.bincount(pf_gpu, weights=pf_len, minlength=G).max() / tp
            wf = (share - 1.0 / G) / (1.0 - 1.0 / G)
        else:
            wf = 0.0
        total = 0.0
        energy = None if self.static_power_w is None else np.zeros(len(RESOURCE_KINDS))
        x = self.prompts_coordinate(pf_len, pf_gpu)
        if x >= 1.0:
            prompts = ((0, 1.0),)
        else:       # between 1/p of two grid points (x falls as p grows)
            hi = next(m for m, p in enumerate(self.p_grid) if 1.0 / p <= x)
            a, b = 1.0 / self.p_grid[hi - 1], 1.0 / self.p_grid[hi]
            prompts = ((hi - 1, (x - b) / (a - b)), (hi, (a - x) / (a - b)))
        for i, wi in ((bi[0], 1.0 - bi[2]), (bi[1], bi[2])):
            for j, wj in ((ci[0], 1.0 - ci[2]), (ci[1], ci[2])):
                for k, wk in ((ti[0], 1.0 - ti[2]), (ti[1], ti[2])):
                    for f, wff in ((0, 1.0 - wf), (1, wf)):
                        for m, wm in prompts:
                            w = wi * wj * wk * wff * wm
                            if w > 0.0:
                                total += w * self.point_s(i, j, k, f, m)
                                if energy is not None:
                                    energy += w * self.memo_energy[(i, j, k, f, m)]
        t = (total + self.attention_correction_s(dec_ctx, dec_gpu, c)
             + self.prefill_correction_s(pf_len, pf_off, pf_gpu))
        if energy is not None:
            energy[RESOURCE_KINDS.index("static")] = self.static_power_w * t
        return t, energy

    def memo_s(self, dec_ctx: np.ndarray, dec_gpu: np.ndarray, pf_len: np.ndarray, pf_off: np.ndarray,
               pf_gpu: np.ndarray) -> float:
        """The memoised step time of this batch (arguments as for :meth:`exact_s`): multilinear between
        grid points in decode requests, their context (:meth:`context_coordinate`), prefill tokens and the share of the
        prefill tokens on the busiest GPU (from 1/G, even, to 1), plus :meth:`attention_correction_s`
        for the spread of the contexts and :meth:`prefill_correction_s` for chunk offsets."""
        return self.memo_priced(dec_ctx, dec_gpu, pf_len, pf_off, pf_gpu)[0]

    def stats(self) -> dict[str, Any]:
        """Memo use: lookups, grid points priced, hits among the corners looked up, exact steps, and
        iterations outside the grid priced exactly (``outside_grid_exact``)."""
        corners = self.corner_hits + self.corner_misses
        return {"lookups": self.lookups, "grid_points_priced": self.corner_misses,
                "corner_hit_rate": (self.corner_hits / corners) if corners else math.nan,
                "exact_steps": self.exact_steps, "outside_grid_exact": self.outside_grid_exact}
