# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The synthetic routing's loops in C: the grouped router's expert draw and its whole sample
(:class:`sievesim.workload.grouped.GroupedSampler`), the plain sample of
:class:`sievesim.workload.synthetic.SyntheticSource`, and the tokens per expert of routing ids
(:func:`sievesim.workload.routing.counts_from_ids`).

The draw takes the uniform numbers the sampler drew from its generator (``u`` then ``v``, in that
order) and does with them, draw by draw, what the numpy expressions of
``GroupedSampler._draw_numpy`` do over arrays: the same products, comparisons and truncations, so the
same ids bit for bit (the extension is compiled without fused multiply-add). It replaces five
temporary arrays of (draws x chosen groups) with one pass.
"""
import numpy as np

cimport numpy as cnp
from libc.math cimport INFINITY

cnp.import_array()


cdef inline cnp.int32_t _one_draw(double u_raw, double v_raw, Py_ssize_t r, const double[:, ::1] cum,
                                  const cnp.int64_t[:, :] chosen, Py_ssize_t layer, const double[::1] prob,
                                  const cnp.int64_t[::1] alias, Py_ssize_t groups, Py_ssize_t size) noexcept nogil:
    # GroupedSampler._draw_numpy's arithmetic, draw for draw: a chosen group by mass, then its expert by alias
    cdef Py_ssize_t n_chosen = cum.shape[1], i, pick = 0, j, at_j
    cdef cnp.int64_t group
    cdef double u = u_raw * cum[r, n_chosen - 1], v
    for i in range(n_chosen):
        pick += cum[r, i] <= u      # branch-free count
    if pick > n_chosen - 1:
        pick = n_chosen - 1
    group = chosen[r, pick]
    v = v_raw * size
    j = <Py_ssize_t>v
    if j > size - 1:
        j = size - 1
    at_j = (layer * groups + group) * size + j
    if v - <double>j < prob[at_j]:
        return <cnp.int32_t>(group * size + j)
    return <cnp.int32_t>(group * size + alias[at_j])


def grouped_draw(const double[::1] u_raw, const double[::1] v_raw, const cnp.int64_t[::1] rows,
                 const double[:, ::1] cum, const cnp.int64_t[:, ::1] chosen, const cnp.int64_t[::1] layer,
                 const double[::1] prob, const cnp.int64_t[::1] alias, Py_ssize_t groups, Py_ssize_t size):
    """Expert ids (int64, one per draw) of draws ``d`` on rows ``rows[d]``.

    ``u_raw``, ``v_raw``: uniforms in [0, 1) (one per draw); ``cum``: (rows, chosen) cumulative mass
    of each row's chosen groups; ``chosen``: (rows, chosen) their group ids; ``layer``: each row's
    layer; ``prob``/``alias``: alias tables flattened as ((layer * groups + group) * size + j)."""
    cdef Py_ssize_t n = u_raw.shape[0], d, r
    out = np.empty(n, dtype=np.int64)
    cdef cnp.int64_t[::1] ids = out
    for d in range(n):
        r = rows[d]
        ids[d] = _one_draw(u_raw[d], v_raw[d], r, cum, chosen, layer[r], prob, alias, groups, size)
    return out


# -- the whole sample (GroupedSampler._sample_compiled): the same random numbers in the same order
# as GroupedSampler._sample_numpy, the same ids; rows are (token, layer) pairs, ids (rows, k) int32.

def choose_groups(const double[:, ::1] noise, const double[:, ::1] log_mass, const cnp.int32_t[:, ::1] prev,
                  const cnp.uint8_t[:, ::1] keep, Py_ssize_t size, Py_ssize_t chosen):
    """(rows, chosen) int64: each row's ``chosen`` groups of the highest key ``log_mass[r % L, g] +
    noise[r, g]`` (the groups of kept slots first, as keys of +inf), in falling key order, ties by
    group id: ``np.argsort(-key, kind="stable")[:, :chosen]`` of the numpy reference, on any machine
    (``keep`` with no rows: nothing kept)."""
    cdef Py_ssize_t rows = noise.shape[0], groups = noise.shape[1], layers = log_mass.shape[0]
    cdef Py_ssize_t r, g, i, pos, n_best, layer = 0, k = keep.shape[1], has_keep = keep.shape[0] > 0
    cdef double neg[64]
    cdef double best_key[64]
    cdef Py_ssize_t best_group[64]
    cdef double x
    if groups > 64:
        raise ValueError(f"{groups} expert groups: this kernel ranks at most 64")
    if not 1 <= chosen <= groups:
        raise ValueError(f"chosen = {chosen}: expected 1 .. {groups} groups")
    out = np.empty((rows, chosen), dtype=np.int64)
    cdef cnp.int64_t[:, ::1] picks = out
    with nogil:
        for r in range(rows):
            for g in range(groups):
                neg[g] = -(log_mass[layer, g] + noise[r, g])
            if has_keep:
                for i in range(k):
                    if keep[r, i]:
                        neg[prev[r, i] // size] = -INFINITY
            # insertion into the best `chosen` so far, smallest negated key first; a key equal to
            # one already in goes after it (groups come in id order: ties by group id)
            n_best = 0
            for g in range(groups):
                x = neg[g]
                if n_best == chosen:
                    if not x < best_key[chosen - 1]:
                        continue
                    pos = chosen - 1
                else:
                    pos = n_best
                    n_best += 1
                while pos > 0 and x < best_key[pos - 1]:
                    best_key[pos] = best_key[pos - 1]
                    best_group[pos] = best_group[pos - 1]
                    pos -= 1
                best_key[pos] = x
                best_group[pos] = g
            for pos in range(chosen):
                picks[r, pos] = best_group[pos]
            layer += 1
            if layer == layers:
                layer = 0
    return out


def first_draws(const double[::1] u, const double[::1] v, const cnp.int64_t[:, :] chosen,
                const double[:, ::1] mass, const double[::1] prob, const cnp.int64_t[::1] alias,
                Py_ssize_t size, Py_ssize_t k, const cnp.int32_t[:, ::1] prev, const cnp.uint8_t[:, ::1] keep):
    """Every slot of every row drawn (draw ``i * rows + r`` is slot ``i`` of row ``r``: the sampler's
    slot-major order), then the kept slots copied from ``prev``. Returns ``(ids, cum)``: ids (rows,
    k) int32 and the cumulative mass of each row's chosen groups (rows, chosen), as ``np.cumsum``
    adds them (left to right)."""
    cdef Py_ssize_t rows = chosen.shape[0], n_chosen = chosen.shape[1], layers = mass.shape[0]
    cdef Py_ssize_t groups = mass.shape[1], r, i, layer, has_keep = keep.shape[0] > 0
    cum_out = np.empty((rows, n_chosen), dtype=np.float64)
    ids_out = np.empty((rows, k), dtype=np.int32)
    cdef double[:, ::1] cum = cum_out
    cdef cnp.int32_t[:, ::1] ids = ids_out
    cdef double acc
    with nogil:
        layer = 0
        for r in range(rows):
            acc = mass[layer, chosen[r, 0]]
            cum[r, 0] = acc
            for i in range(1, n_chosen):
                acc = acc + mass[layer, chosen[r, i]]
                cum[r, i] = acc
            layer += 1
            if layer == layers:
                layer = 0
        layer = 0
        for r in range(rows):
            for i in range(k):
                ids[r, i] = _one_draw(u[i * rows + r], v[i * rows + r], r, cum, chosen, layer, prob, alias,
                                      groups, size)
            layer += 1
            if layer == layers:
                layer = 0
        if has_keep:
            for r in range(rows):
                for i in range(k):
                    if keep[r, i]:
                        ids[r, i] = prev[r, i]
    return ids_out, cum_out


def clashing_rows(const cnp.int32_t[:, ::1] ids, const cnp.uint8_t[:, ::1] keep, Py_ssize_t j,
                  const cnp.int64_t[::1] cand):
    """The rows of ``cand`` (in its order) whose slot ``j`` repeats a final slot: an earlier one, or
    a kept one; a kept slot ``j`` never clashes. ``keep`` with no rows: nothing kept."""
    cdef Py_ssize_t n = cand.shape[0], k = ids.shape[1], d, r, i, found = 0, has_keep = keep.shape[0] > 0
    out = np.empty(n, dtype=np.int64)
    cdef cnp.int64_t[::1] hits = out
    cdef const cnp.int32_t *row
    cdef const cnp.uint8_t *kept
    cdef cnp.int32_t col
    cdef int clash
    with nogil:
        for d in range(n):
            r = cand[d]
            row = &ids[r, 0]
            col = row[j]
            clash = 0
            for i in range(j):              # branch-free: repeats are rare, kept slots random
                clash = clash | (row[i] == col)
            if has_keep:
                kept = &keep[r, 0]
                for i in range(j + 1, k):
                    clash = clash | (kept[i] & (row[i] == col))
                clash = clash & (kept[j] == 0)
            if clash:
                hits[found] = r
                found += 1
    return out[:found]


def redraw(cnp.int32_t[:, ::1] ids, Py_ssize_t j, const cnp.int64_t[::1] cand, const double[::1] u,
           const double[::1] v, const double[:, ::1] cum, const cnp.int64_t[:, :] chosen, Py_ssize_t layers,
           const double[::1] prob, const cnp.int64_t[::1] alias, Py_ssize_t groups, Py_ssize_t size):
    """Slot ``j`` of rows ``cand`` drawn again (``u[d]``, ``v[d]`` for row ``cand[d]``), in place."""
    cdef Py_ssize_t d, r
    with nogil:
        for d in range(cand.shape[0]):
            r = cand[d]
            ids[r, j] = _one_draw(u[d], v[d], r, cum, chosen, r % layers, prob, alias, groups, size)
    return None


ctypedef fused routing_id:
    cnp.int32_t
    cnp.int64_t


cdef Py_ssize_t _count_ids(const routing_id[:, :, ::1] ids, cnp.int64_t[:, ::1] counts) noexcept nogil:
    """:func:`counts_of_ids`'s pass: -1, or the first id past the experts (then stops)."""
    cdef Py_ssize_t r, layer, i, e
    for r in range(ids.shape[0]):
        for layer in range(ids.shape[1]):
            for i in range(ids.shape[2]):
                e = ids[r, layer, i]
                if e < 0:
                    continue
                if e >= counts.shape[1]:
                    return e
                counts[layer, e] += 1
    return -1


def counts_of_ids(const routing_id[:, :, ::1] ids, Py_ssize_t num_experts):
    """(L, E) int64 tokens per expert and layer of (B, L, K) ids (ids < 0 skipped): what
    ``routing.counts_from_ids`` counts with ``np.bincount``, in one pass."""
    out = np.zeros((ids.shape[1], num_experts), dtype=np.int64)
    cdef cnp.int64_t[:, ::1] counts = out
    cdef Py_ssize_t bad
    with nogil:
        bad = _count_ids(ids, counts)
    if bad >= 0:
        raise ValueError(f"expert id {bad} out of range for {num_experts} experts")
    return out


# -- the synthetic source's plain (not group-limited) sample (SyntheticSource._sample_compiled):
# the same uniforms in the same order as SyntheticSource._sample_numpy, the same ids.

cdef inline cnp.int32_t _plain_draw(double u, Py_ssize_t layer, Py_ssize_t experts, const double[::1] prob,
                                    const cnp.int64_t[::1] alias) noexcept nogil:
    # SyntheticSource._draw's arithmetic: u * E, truncated and clipped, its fraction against the
    # alias table of the layer (alias ids are global: layer * E + expert)
    cdef Py_ssize_t j, at
    u = u * experts
    j = <Py_ssize_t>u
    if j > experts - 1:
        j = experts - 1
    u = u - <double>j
    at = layer * experts + j
    if u < prob[at]:
        return <cnp.int32_t>j
    return <cnp.int32_t>(alias[at] - layer * experts)


def plain_first_draws(const double[::1] u, const double[::1] prob, const cnp.int64_t[::1] alias,
                      Py_ssize_t layers, Py_ssize_t experts, Py_ssize_t k, const cnp.int32_t[:, ::1] prev,
                      const cnp.uint8_t[:, ::1] keep):
    """Every slot of every (token, layer) row drawn (draw ``i * rows + r`` is slot ``i`` of row
    ``r``), then the kept slots copied from ``prev``; ids (rows, k) int32, experts of the row's layer."""
    cdef Py_ssize_t rows = u.shape[0] // k if k > 0 else 0, r, i, layer = 0, has_keep = keep.shape[0] > 0
    ids_out = np.empty((rows, k), dtype=np.int32)
    cdef cnp.int32_t[:, ::1] ids = ids_out
    with nogil:
        for r in range(rows):
            for i in range(k):
                ids[r, i] = _plain_draw(u[i * rows + r], layer, experts, prob, alias)
            if has_keep:
                for i in range(k):
                    if keep[r, i]:
                        ids[r, i] = prev[r, i]
            layer += 1
            if layer == layers:
                layer = 0
    return ids_out


def plain_redraw(cnp.int32_t[:, ::1] ids, Py_ssize_t j, const cnp.int64_t[::1] cand, const double[::1] u,
                 const double[::1] prob, const cnp.int64_t[::1] alias, Py_ssize_t layers, Py_ssize_t experts):
    """Slot ``j`` of rows ``cand`` drawn again (``u[d]`` for row ``cand[d]``), in place."""
    cdef Py_ssize_t d, r
    with nogil:
        for d in range(cand.shape[0]):
            r = cand[d]
            ids[r, j] = _plain_draw(u[d], r % layers, experts, prob, alias)
    return None
