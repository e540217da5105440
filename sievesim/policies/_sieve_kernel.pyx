# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Sieve's greedy rule in one pass of C (no Python objects per expert).

Counting sort of the token counts (bounded by the batch), then the greedy walk over the experts in
descending count (ties: lower position first, i.e. lower expert id when ids are ascending), moving
each to the GPU while ``T_total`` strictly decreases. Mirrors :class:`sievesim.policies.Sieve`.
"""
from libc.stdlib cimport malloc, free
from libc.stdint cimport int64_t, uint8_t

from time import perf_counter


cdef inline double dmax(double a, double b) noexcept nogil:
    return a if a > b else b


cdef Py_ssize_t _walk(const int64_t* counts, Py_ssize_t n, const double* pim_time_by_count, Py_ssize_t table_size,
                      double attention_s, double comm_s, double off0, double off_e, double off_t, double comp0,
                      double comp_t, double rel_tol, uint8_t* on_pim, Py_ssize_t* start,
                      Py_ssize_t* order) noexcept nogil:
    """The rule on raw arrays with caller-owned scratch (``start``: table_size + 1, ``order``: n + 1
    entries); returns the experts moved to the GPU, or -1 when a count exceeds the table."""
    cdef Py_ssize_t i, j, k = 0, m = 0
    cdef int64_t maxc = 0, c, tok = 0
    cdef double p_all = attention_s, prev, cur, tol, pc = 0.0
    for i in range(n):
        c = counts[i]
        if c > maxc:
            maxc = c
        if c > 0:
            p_all += pim_time_by_count[c]
            m += 1
    if maxc >= table_size:
        return -1
    # bucket starts (descending count), then positions in ascending order within a bucket
    for j in range(maxc + 2):
        start[j] = 0
    for i in range(n):
        if counts[i] > 0:
            start[maxc - counts[i] + 1] += 1
    for j in range(1, maxc + 2):
        start[j] += start[j - 1]
    for i in range(n):
        c = counts[i]
        if c > 0:
            order[start[maxc - c]] = i
            start[maxc - c] += 1
    prev = dmax(dmax(comm_s, off0), dmax(comp0, p_all))
    tol = rel_tol * prev
    while k < m:
        c = counts[order[k]]
        tok += c
        pc += pim_time_by_count[c]
        cur = dmax(dmax(comm_s, off0 + off_e * <double> (k + 1) + off_t * <double> tok),
                   dmax(comp0 + comp_t * <double> tok, p_all - pc))
        if not cur < prev - tol:
            break
        prev = cur
        k += 1
    for i in range(n):
        on_pim[i] = 1 if counts[i] > 0 else 0
    for j in range(k):
        on_pim[order[j]] = 0
    return k


cdef int _scratch(Py_ssize_t table, Py_ssize_t n, Py_ssize_t** start, Py_ssize_t** order) except -1:
    """The walk's scratch: ``start`` (table + 1 entries) and ``order`` (n + 1); the caller frees both."""
    start[0] = <Py_ssize_t*> malloc((table + 1) * sizeof(Py_ssize_t))
    order[0] = <Py_ssize_t*> malloc((n + 1) * sizeof(Py_ssize_t))
    if start[0] == NULL or order[0] == NULL:
        free(start[0]); free(order[0])
        raise MemoryError()
    return 0


def _run(const int64_t[::1] counts, const double[::1] pim_time_by_count, double attention_s, double comm_s,
         double off0, double off_e, double off_t, double comp0, double comp_t, double rel_tol,
         uint8_t[::1] on_pim, Py_ssize_t repeat):
    """``repeat`` walks on one scratch allocation; returns (experts moved, seconds per walk)."""
    cdef Py_ssize_t n = counts.shape[0], table = pim_time_by_count.shape[0], r, k = 0
    if on_pim.shape[0] != n:
        raise ValueError(f"on_pim has {on_pim.shape[0]} entries, counts {n}")
    if n == 0:
        return 0, 0.0
    cdef Py_ssize_t* start = NULL
    cdef Py_ssize_t* order = NULL
    _scratch(table, n, &start, &order)
    try:
        t0 = perf_counter()
        with nogil:
            for r in range(repeat):
                k = _walk(&counts[0], n, &pim_time_by_count[0], table, attention_s, comm_s, off0, off_e, off_t,
                          comp0, comp_t, rel_tol, &on_pim[0], start, order)
        seconds = (perf_counter() - t0) / repeat
    finally:
        free(start)
        free(order)
    if k < 0:
        raise ValueError("a count exceeds the PIM time table")
    return k, seconds


def sieve_walk(const int64_t[::1] counts, const double[::1] pim_time_by_count, double attention_s,
               double comm_s, double off0, double off_e, double off_t, double comp0, double comp_t,
               double rel_tol, uint8_t[::1] on_pim):
    """Fill ``on_pim`` (1 = PIM) for ``counts``; return the number of experts moved to the GPU.

    ``pim_time_by_count[n]``: PIM time of one expert with n tokens [s], for n = 0..max count.
    T_total(k experts, x tokens on the GPU) = max(comm, off0 + off_e k + off_t x, comp0 + comp_t x,
    attention + PIM time of the rest).
    """
    return _run(counts, pim_time_by_count, attention_s, comm_s, off0, off_e, off_t, comp0, comp_t, rel_tol,
                on_pim, 1)[0]


def sieve_walk_seconds(const int64_t[::1] counts, const double[::1] pim_time_by_count, double attention_s,
                       double comm_s, double off0, double off_e, double off_t, double comp0, double comp_t,
                       double rel_tol, uint8_t[::1] on_pim, Py_ssize_t repeat):
    """``(experts moved, seconds of one walk)``: :func:`sieve_walk` run ``repeat`` times from C on
    one scratch allocation, so that neither Python's call overhead nor ``malloc`` enters the time
    (the decision-latency model takes its shape from this)."""
    if repeat < 1:
        raise ValueError("repeat must be >= 1")
    return _run(counts, pim_time_by_count, attention_s, comm_s, off0, off_e, off_t, comp0, comp_t, rel_tol,
                on_pim, repeat)


def sieve_walk_rows(const int64_t[:, ::1] counts, const double[::1] pim_time_by_count,
                    const double[::1] attention_s, const double[::1] comm_s, const double[::1] off0, double off_e,
                    double off_t, const double[::1] comp0, double comp_t, double rel_tol,
                    uint8_t[:, ::1] on_pim):
    """:func:`sieve_walk` on every row of ``counts`` (one GPU's experts per row) with that row's
    ``attention_s``, ``comm_s``, ``off0`` and ``comp0`` and the shared table and rates, in one call;
    fills ``on_pim`` row by row. Raises ValueError when a count exceeds the table."""
    cdef Py_ssize_t rows = counts.shape[0], n = counts.shape[1], table = pim_time_by_count.shape[0], r, k = 0
    if on_pim.shape[0] != rows or on_pim.shape[1] != n:
        raise ValueError(f"on_pim is {on_pim.shape[0]} x {on_pim.shape[1]}, counts {rows} x {n}")
    for name, arr in (("attention_s", attention_s), ("comm_s", comm_s), ("off0", off0), ("comp0", comp0)):
        if arr.shape[0] != rows:
            raise ValueError(f"{name} has {arr.shape[0]} entries, counts {rows} rows")
    if rows == 0 or n == 0:
        return
    cdef Py_ssize_t* start = NULL
    cdef Py_ssize_t* order = NULL
    _scratch(table, n, &start, &order)
    try:
        with nogil:
            for r in range(rows):
                k = _walk(&counts[r, 0], n, &pim_time_by_count[0], table, attention_s[r], comm_s[r], off0[r], off_e,
                          off_t, comp0[r], comp_t, rel_tol, &on_pim[r, 0], start, order)
                if k < 0:
                    break
    finally:
        free(start)
        free(order)
    if k < 0:
        raise ValueError("a count exceeds the PIM time table")
