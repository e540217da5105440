"""Shared helpers of the policies that cut the popularity-sorted expert list (Sieve, Oracle)."""
from __future__ import annotations

import numpy as np

from ..costs import _DEFAULT_IDS, default_ids

__all__ = ["sorted_active", "prefix_on_pim", "first_non_decrease", "best_cuts", "default_ids"]


def sorted_active(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(ascending sort of counts, the activated counts in descending order)`` (views)."""
    s = np.sort(counts)
    first_active = int(s.searchsorted(1))
    return s, s[::-1][: s.size - first_active]


def prefix_on_pim(counts: np.ndarray, expert_ids: np.ndarray, s_asc: np.ndarray, desc: np.ndarray,
                  k: int) -> np.ndarray:
    """``on_pim`` with the ``k`` most popular activated experts on the GPU.

    Experts with more tokens go first; among experts with equal counts, the lower expert id goes
    to the GPU first, so the result does not depend on the order in which experts are listed.
    """
    if k <= 0:
        return counts > 0
    v = int(desc[k - 1])
    on_gpu = counts > v
    ties = k - (s_asc.size - int(s_asc.searchsorted(v, "right")))
    if ties > 0:
        pos = np.flatnonzero(counts == v)
        if pos.size > ties and expert_ids is not _DEFAULT_IDS.get(counts.size):
            pos = pos[np.argsort(expert_ids[pos], kind="stable")]
        pos = pos[:ties]
        on_gpu[pos] = True
    on_pim = counts > 0
    on_pim &= ~on_gpu
    return on_pim


def first_non_decrease(totals: np.ndarray, start: int = 0, tol: float = 0.0) -> int:
    """Smallest ``k >= start`` with ``totals[k + 1] >= totals[k] - tol`` (or the last index)."""
    m = totals.size - 1
    if start >= m:
        return m
    dec = totals[start + 1:] < totals[start:-1] - tol
    k = int(np.argmin(dec))
    return start + k if not dec[k] else m



def best_cuts(totals: np.ndarray, tol: float) -> list[int]:
    """Cut indices ordered by estimate, values within ``tol`` of each other counting as equal
    (then fewer experts on the GPU first)."""
    if tol > 0:
        key = np.floor((totals - totals.min()) / tol)
        return np.lexsort((np.arange(totals.size), key)).tolist()
    return np.argsort(totals, kind="stable").tolist()
