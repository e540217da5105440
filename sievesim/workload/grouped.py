"""Group-limited synthetic routing (DeepSeek-V3's router: ``n_group`` groups of consecutive experts,
a token's experts from its ``topk_group`` best groups).

Per (token, layer), with the layer's popularity ``p`` over the E experts in ``G`` groups of ``S =
E / G`` consecutive experts (group ``i`` holds experts ``i S .. (i+1) S - 1``, as in the model's
router):

1. **Groups**: ``topk_group`` groups drawn without replacement, each in proportion to its mass
   (the sum of ``p`` over its experts; Plackett-Luce, drawn exactly as the top ``topk_group`` of
   ``log mass + Gumbel noise``, in falling key order, ties by group id). Groups of the slots a
   request keeps from its previous token (persistence) are always among them, first.
2. **Experts**: the k slots drawn one after the other in proportion to ``p`` among the experts of the
   chosen groups not yet chosen (a group in proportion to its mass, then an expert of it through
   the group's alias table; a repeat is drawn again, and after 8 tries the draw is exact over the
   remaining experts), kept slots copied from the previous token.

So every token's experts lie in at most ``topk_group`` groups. The router itself scores a group by
its two best experts' affinities; drawing groups by their popularity mass is this model's stand-in
(docs/workloads.md). Every random number comes from the stream's generator: deterministic.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

try:  # compiled with the package (setup.py); _sample_numpy below computes the same ids
    from . import _grouped_draw as _kernels
    from ._grouped_draw import grouped_draw as _grouped_draw
except ImportError:  # pragma: no cover - only when running from an unbuilt source tree
    _kernels = _grouped_draw = None

__all__ = ["GroupedSampler"]

_TRIES = 8   # redraws of a repeated expert before the exact masked draw


def kept_rows(prev: np.ndarray | None, keep: np.ndarray | None, rows: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``prev`` (int32) and ``keep`` (uint8) as ``(rows, k)`` arrays for the compiled samplers, or
    two arrays of no rows when nothing is kept."""
    if prev is None or keep is None:
        return np.zeros((0, k), dtype=np.int32), np.zeros((0, k), dtype=np.uint8)
    return (np.ascontiguousarray(prev, dtype=np.int32).reshape(rows, k),
            np.ascontiguousarray(keep, dtype=np.bool_).reshape(rows, k).view(np.uint8))


def redraw_clashes(ids: np.ndarray, keep_rows: np.ndarray, every_row: np.ndarray,
                   redraw: Callable[[int, np.ndarray], None], masked: Callable[[int, np.ndarray], None]) -> None:
    """The compiled samplers' repeats, slot by slot: the rows whose slot ``j`` of ``ids`` (rows, k)
    repeats a final slot drawn again (``redraw(j, rows)``) until none does, after ``_TRIES`` rounds
    by the exact masked draw (``masked(j, rows)``); the random numbers in the numpy samplers' order."""
    for j in range(1, ids.shape[1]) if keep_rows.shape[0] == 0 else range(ids.shape[1]):
        cand = _kernels.clashing_rows(ids, keep_rows, j, every_row)
        attempt = 0
        while cand.size:
            if attempt >= _TRIES:
                masked(j, cand)
                break
            redraw(j, cand)
            cand = _kernels.clashing_rows(ids, keep_rows, j, cand)
            attempt += 1


class GroupedSampler:
    """Draws group-limited top-k routing for a :class:`~sievesim.workload.synthetic.SyntheticSource`.

    Args:
        popularity: (L, E) expert popularity per layer (rows sum to 1).
        groups: expert groups per layer (divides E).
        chosen: groups a token's experts come from (1 .. ``groups``).
        top_k: experts per token (at most ``chosen * E / groups``).
        alias_tables: the function that builds Vose alias tables row by row (``(prob, alias)`` of an
            ``(rows, n)`` array of weights), the synthetic source's own.
    """

    def __init__(self, popularity: np.ndarray, groups: int, chosen: int, top_k: int, alias_tables: Any) -> None:
        num_layers, e = popularity.shape
        self.layers, self.e, self.groups, self.chosen, self.k = num_layers, e, groups, chosen, top_k
        self.size = e // groups
        self.popularity = popularity
        within = popularity.reshape(num_layers * groups, self.size)
        self.mass = within.sum(axis=1).reshape(num_layers, groups)              # (L, G)
        self._log_mass = np.log(self.mass)
        prob, alias = alias_tables(within / within.sum(axis=1, keepdims=True))
        self._prob, self._alias = prob.ravel(), alias.ravel()                      # tables (L G, S)

    def sample(self, rng: np.random.Generator, n: int, prev: np.ndarray | None = None,
               keep: np.ndarray | None = None) -> np.ndarray:
        """(n, L, K) int32 expert ids of ``n`` tokens; ``prev``/``keep`` (n, L, K) as in
        :meth:`~sievesim.workload.synthetic.SyntheticSource.sample_tokens`. Compiled where the
        package was built (:meth:`_sample_compiled`), else :meth:`_sample_numpy`: the same random
        numbers in the same order, the same ids."""
        if _kernels is None:
            return self._sample_numpy(rng, n, prev, keep)
        return self._sample_compiled(rng, n, prev, keep)

    def _sample_compiled(self, rng: np.random.Generator, n: int, prev: np.ndarray | None,
                         keep: np.ndarray | None) -> np.ndarray:
        """:meth:`_sample_numpy` with the group keys, the draws and the clash checks in C, over
        rows of (token, layer) with the slots side by side (no transposes)."""
        num_layers, k = self.layers, self.k
        rows = n * num_layers
        prev_rows, keep_rows = kept_rows(prev, keep, rows, k)
        chosen = _kernels.choose_groups(rng.gumbel(size=(rows, self.groups)), self._log_mass, prev_rows, keep_rows,
                                        self.size, self.chosen)
        u = rng.random(k * rows)
        v = rng.random(k * rows)
        ids, cum = _kernels.first_draws(u, v, chosen, self.mass, self._prob, self._alias, self.size, k,
                                        prev_rows, keep_rows)
        every_row = np.arange(rows, dtype=np.int64)

        def redraw(j: int, cand: np.ndarray) -> None:
            u = rng.random(cand.size)
            v = rng.random(cand.size)
            _kernels.redraw(ids, j, cand, u, v, cum, chosen, num_layers, self._prob, self._alias, self.groups,
                            self.size)

        def masked(j: int, cand: np.ndarray) -> None:
            kept = keep_rows.T.view(np.bool_) if keep_rows.shape[0] else None
            ids[cand, j] = self._masked_draw(rng, ids.T, kept, j, cand, every_row % num_layers, chosen)

        redraw_clashes(ids, keep_rows, every_row, redraw, masked)
        return ids.reshape(n, num_layers, k)

    def _sample_numpy(self, rng: np.random.Generator, n: int, prev: np.ndarray | None,
                      keep: np.ndarray | None) -> np.ndarray:
        """:meth:`sample` over numpy arrays (the reference the compiled path is tested against)."""
        num_layers, k = self.layers, self.k
        rows = n * num_layers
        layer = np.tile(np.arange(num_layers, dtype=np.int64), n)                  # (rows,)
        kept = None
        if prev is not None and keep is not None:
            kept = np.ascontiguousarray(keep.reshape(rows, k).T)                    # (k, rows)
            prev_ids = prev.reshape(rows, k).T.astype(np.int64)
        chosen = self._choose_groups(rng, layer, None if kept is None else (prev_ids, kept))
        cum = np.cumsum(self.mass[layer[:, None], chosen], axis=1)                  # (rows, chosen)
        ids = self._draw(rng, None, layer, chosen, cum)                             # (k, rows)
        if kept is not None:
            ids[kept] = prev_ids[kept]
        for j in range(1, k) if kept is None else range(k):
            cand = np.flatnonzero(self._clash(ids, kept, j, slice(None)))
            attempt = 0
            while cand.size:
                if attempt >= _TRIES:
                    ids[j, cand] = self._masked_draw(rng, ids, kept, j, cand, layer, chosen)
                    break
                ids[j, cand] = self._draw(rng, cand, layer, chosen, cum)
                cand = cand[self._clash(ids, kept, j, cand)]
                attempt += 1
        return np.ascontiguousarray(ids.T.astype(np.int32)).reshape(n, num_layers, k)

    def _choose_groups(self, rng: np.random.Generator, layer: np.ndarray,
                       kept: tuple[np.ndarray, np.ndarray] | None) -> np.ndarray:
        """(rows, chosen) groups of each row: the top ``chosen`` of log mass + Gumbel noise, the
        groups of kept slots first, in falling key order with ties by group id (the order the
        expert draw walks them in)."""
        key = self._log_mass[layer] + rng.gumbel(size=(layer.size, self.groups))
        if kept is not None:
            prev_ids, keep = kept
            r, _ = np.nonzero(keep.T)
            key[r, (prev_ids.T[keep.T]) // self.size] = np.inf
        # a stable order on any machine (argpartition's order of its first elements, ties above all,
        # differs between its compiled and its generic implementation)
        return np.argsort(-key, axis=1, kind="stable")[:, :self.chosen]

    def _draw(self, rng: np.random.Generator, at: np.ndarray | None, layer: np.ndarray, chosen: np.ndarray,
              cum: np.ndarray) -> np.ndarray:
        """One expert for each row in ``at`` (``None``: k for every row, ``(k, rows)``): a chosen group
        by mass, then an expert of it by alias. The compiled kernel (``_grouped_draw``) where the
        package was built: the same uniforms in the same order, the same ids as :meth:`_draw_numpy`."""
        if _grouped_draw is None:
            return self._draw_numpy(rng, at, layer, chosen, cum)
        shape = (self.k, layer.size) if at is None else (at.size,)
        u = rng.random(shape)
        v = rng.random(shape)
        rows = np.tile(np.arange(layer.size, dtype=np.int64), self.k) if at is None else at.astype(np.int64, copy=False)
        ids = _grouped_draw(u.ravel(), v.ravel(), rows, np.ascontiguousarray(cum, dtype=np.float64),
                            np.ascontiguousarray(chosen, dtype=np.int64), layer.astype(np.int64, copy=False),
                            self._prob, self._alias, self.groups, self.size)
        return ids.reshape(shape)

    def _draw_numpy(self, rng: np.random.Generator, at: np.ndarray | None, layer: np.ndarray, chosen: np.ndarray,
                    cum: np.ndarray) -> np.ndarray:
        """:meth:`_draw` over numpy arrays (the reference the compiled kernel is tested against)."""
        if at is None:
            shape, rows = (self.k, layer.size), np.arange(layer.size)[None, :]
            c, lay = cum[None, :, :], layer[None, :]
        else:
            shape, rows, c, lay = (at.size,), at, cum[at], layer[at]
        u = rng.random(shape) * c[..., -1]
        pick = np.minimum((c <= u[..., None]).sum(axis=-1), self.chosen - 1)
        group = chosen[rows, pick]
        v = rng.random(shape) * self.size
        j = np.minimum(v.astype(np.int64), self.size - 1)
        at_j = (lay * self.groups + group) * self.size + j
        local = np.where(v - j < self._prob[at_j], j, self._alias[at_j])
        return group * self.size + local

    def _clash(self, ids: np.ndarray, kept: np.ndarray | None, j: int, at: Any) -> np.ndarray:
        """Rows (of ``at``) whose slot ``j`` repeats a final slot (an earlier or a kept one)."""
        col = ids[j, at]
        clash = np.zeros(col.shape, dtype=bool)
        for i in range(self.k):
            if i == j:
                continue
            final = (i < j) if kept is None else ((i < j) | kept[i, at])
            clash |= final & (ids[i, at] == col)
        if kept is not None:
            clash &= ~kept[j, at]
        return clash

    def _masked_draw(self, rng: np.random.Generator, ids: np.ndarray, kept: np.ndarray | None, j: int,
                     cand: np.ndarray, layer: np.ndarray, chosen: np.ndarray) -> np.ndarray:
        """Exact draw for rows ``cand`` over the chosen groups' experts not yet final."""
        w = np.zeros((cand.size, self.e))
        allowed = np.zeros((cand.size, self.groups), dtype=bool)
        allowed[np.arange(cand.size)[:, None], chosen[cand]] = True
        w[:] = self.popularity[layer[cand]] * np.repeat(allowed, self.size, axis=1)
        for i in range(self.k):
            if i == j:
                continue
            final = np.full(cand.size, i < j) if kept is None else ((i < j) | kept[i, cand])
            r = np.flatnonzero(final)
            w[r, ids[i, cand[r]]] = 0.0
        c = np.cumsum(w, axis=1)
        u = rng.random(cand.size) * c[:, -1]
        return np.minimum((c <= u[:, None]).sum(axis=1), self.e - 1)
