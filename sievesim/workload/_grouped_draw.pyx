# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The expert draw of :class:`sievesim.workload.grouped.GroupedSampler` in C: one expert per draw,
a chosen group by mass, then an expert of it through the group's alias table.

It takes the uniform numbers the sampler drew from its generator (``u`` then ``v``, in that order)
and does with them, draw by draw, what the numpy expressions of ``GroupedSampler._draw_numpy`` do
over arrays: the same products, comparisons and truncations, so the same ids bit for bit (the
extension is compiled without fused multiply-add). It replaces five temporary arrays of
(draws x chosen groups) with one pass.
"""
import numpy as np

cimport numpy as cnp

cnp.import_array()


def grouped_draw(const double[::1] u_raw, const double[::1] v_raw, const cnp.int64_t[::1] rows,
                 const double[:, ::1] cum, const cnp.int64_t[:, ::1] chosen, const cnp.int64_t[::1] layer,
                 const double[::1] prob, const cnp.int64_t[::1] alias, Py_ssize_t groups, Py_ssize_t size):
    """Expert ids (int64, one per draw) of draws ``d`` on rows ``rows[d]``.

    ``u_raw``, ``v_raw``: uniforms in [0, 1) (one per draw); ``cum``: (rows, chosen) cumulative mass
    of each row's chosen groups; ``chosen``: (rows, chosen) their group ids; ``layer``: each row's
    layer; ``prob``/``alias``: alias tables flattened as ((layer * groups + group) * size + j)."""
    cdef Py_ssize_t n = u_raw.shape[0], n_chosen = cum.shape[1], d, r, i, pick, j, at_j
    cdef cnp.int64_t group
    cdef double u, v
    out = np.empty(n, dtype=np.int64)
    cdef cnp.int64_t[::1] ids = out
    for d in range(n):
        r = rows[d]
        u = u_raw[d] * cum[r, n_chosen - 1]
        pick = 0
        for i in range(n_chosen):
            if cum[r, i] <= u:
                pick += 1
        if pick > n_chosen - 1:
            pick = n_chosen - 1
        group = chosen[r, pick]
        v = v_raw[d] * size
        j = <Py_ssize_t>v
        if j > size - 1:
            j = size - 1
        at_j = (layer[r] * groups + group) * size + j
        if v - <double>j < prob[at_j]:
            ids[d] = group * size + j
        else:
            ids[d] = group * size + alias[at_j]
    return out
