# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""LoadStoreTrace parsing in one pass over the bytes (``LD addr`` / ``ST addr``, addr decimal or
0x-hex, one space, optional CR before the newline), and the linear mappers' split of addresses
into levels (``split_levels``)."""
import numpy as np
cimport numpy as cnp
from libc.stdint cimport int64_t, int32_t, uint8_t, uint64_t

cnp.import_array()

include "_lsparse.pxi"


def parse_loadstore(const unsigned char[::1] data, Py_ssize_t newlines=-1):
    """Return ``(is_write, addresses, bad_line)``; ``bad_line`` is the 0-based index of the first
    malformed line (the arrays are then meaningless), or -1. ``newlines``: the number of newline
    bytes in ``data`` when the caller has counted them already (-1: counted here)."""
    cdef Py_ssize_t n = data.shape[0], lines, line = 0
    if n == 0:
        return np.empty(0, dtype=np.bool_), np.empty(0, dtype=np.int64), -1
    with nogil:
        lines = newlines if newlines >= 0 else count_newline_bytes(&data[0], n)
    if data[n - 1] != 10:
        lines += 1
    is_write = np.empty(lines, dtype=np.uint8)
    addrs = np.empty(lines, dtype=np.int64)
    cdef uint8_t[::1] w = is_write
    cdef int64_t[::1] a = addrs
    with nogil:
        line = parse_ls_lines(&data[0], n, &w[0], &a[0])
    if line < lines:
        return is_write, addrs, line
    return is_write.view(np.bool_), addrs, -1


def count_newlines(const unsigned char[::1] data):
    """How many bytes of ``data`` are newlines (faster than ``bytes.count``: `python
    benchmarks/run.py engine TraceParsing`)."""
    cdef Py_ssize_t k = 0
    if data.shape[0]:
        with nogil:
            k = count_newline_bytes(&data[0], data.shape[0])
    return k


cdef struct LevelPlan:
    # the levels a linear mapper slices, in turn: which output column, and how (a shift and a mask
    # for a power-of-two radix, shift -1 and the radix otherwise)
    int m
    int levels[64]
    int64_t rad[64]
    int64_t shift[64]
    int64_t mask[64]


cdef int _plan_levels(str who, const int64_t[::1] order, const int64_t[::1] radix, Py_ssize_t width,
                      LevelPlan* plan) except -1:
    """Check ``order`` (output columns, at most 64, each below ``width``) and their radices (>= 1),
    and fill ``plan``; errors name ``who``."""
    cdef int k, lv
    cdef int64_t b
    if order.shape[0] > 64:
        raise ValueError(f"{who}: at most 64 levels, got {order.shape[0]}")
    plan.m = <int> order.shape[0]
    for k in range(plan.m):
        lv = <int> order[k]
        if not 0 <= lv < width:
            raise ValueError(f"{who}: level {lv} outside the {width} output columns")
        b = radix[lv]
        if b < 1:
            raise ValueError(f"{who}: radix {b} of level {lv}: expected >= 1")
        plan.levels[k] = lv
        plan.rad[k] = b
        plan.shift[k] = -1
        if b & (b - 1) == 0:
            plan.shift[k] = 0
            while (<int64_t> 1 << plan.shift[k]) < b:
                plan.shift[k] += 1
        plan.mask[k] = b - 1
    return 0


cdef inline void _split_one(const LevelPlan* plan, int64_t r, int32_t* row) noexcept nogil:
    """Slice ``r`` into ``row`` by ``plan`` (what is left after the last level is dropped)."""
    cdef int k
    for k in range(plan.m):
        if plan.shift[k] >= 0:
            row[plan.levels[k]] = <int32_t> (r & plan.mask[k])
            r = r >> plan.shift[k]
        else:
            row[plan.levels[k]] = <int32_t> (r % plan.rad[k])
            r = r // plan.rad[k]


def split_levels(const int64_t[::1] rest, int32_t[:, ::1] out, const int64_t[::1] order, const int64_t[::1] radix):
    """Mixed-radix split of each ``rest[i]`` into ``out[i, :]``: for the levels in ``order``, in
    turn, ``out[i, level] = r % radix[level]; r //= radix[level]`` (a shift and a mask where the
    radix is a power of two); what is left of ``r`` after the last level is dropped. The numpy
    arithmetic of sievesim.dram.mapping, one pass per request instead of one per level."""
    cdef Py_ssize_t n = rest.shape[0], i
    cdef LevelPlan plan
    if out.shape[0] != n:
        raise ValueError("split_levels: one output row per value")
    _plan_levels("split_levels", order, radix, out.shape[1], &plan)
    if n == 0:
        return
    with nogil:
        for i in range(n):
            _split_one(&plan, rest[i], &out[i, 0])


cdef inline bint _counted(int64_t a, uint8_t write, int64_t capacity, bint wrap, Py_ssize_t* wrapped,
                          Py_ssize_t* reads) noexcept nogil:
    """Count a request into ``wrapped`` and ``reads``; False (nothing counted) for an address a
    linear mapper refuses: below 0, or at or beyond ``capacity`` unless ``wrap``."""
    if a < 0 or (a >= capacity and not wrap):
        return False
    wrapped[0] += a >= capacity
    reads[0] += write == 0
    return True


def map_linear(const int64_t[::1] addrs, const uint8_t[::1] is_write, int tx_shift, int64_t capacity, bint wrap,
               int32_t[:, ::1] out, int32_t[::1] ctrl, const int64_t[::1] order, const int64_t[::1] radix,
               const int64_t[::1] ctrl_counts):
    """A linear mapper's whole work on a piece of a trace, in one pass per request: the address
    vector (``split_levels`` of ``addrs[i] >> tx_shift`` into ``out[i, :]``), the controller
    (``ctrl[i]``: the flat index of the vector's first ``len(ctrl_counts)`` levels, counts
    ``ctrl_counts``), and the counts. Returns ``(first_bad, wrapped, reads)``: the index of the
    first address below 0, or at or beyond ``capacity`` unless ``wrap`` (-1: none; the outputs
    are then incomplete), how many addresses lie at or beyond ``capacity``, how many requests
    are reads."""
    cdef Py_ssize_t n = addrs.shape[0], i, first_bad = -1, wrapped = 0, reads = 0
    cdef int k, n_ctrl_lv = ctrl_counts.shape[0]
    cdef int64_t a, c
    cdef int32_t* row
    cdef int64_t counts[64]
    cdef LevelPlan plan
    if out.shape[0] != n or ctrl.shape[0] != n or is_write.shape[0] != n:
        raise ValueError("map_linear: one output row, controller and is_write per address")
    if n_ctrl_lv > out.shape[1] or n_ctrl_lv > 64:
        raise ValueError(f"map_linear: {n_ctrl_lv} controller levels: expected at most {min(out.shape[1], 64)}")
    if not 0 <= tx_shift < 63:
        raise ValueError(f"map_linear: tx_shift {tx_shift}: expected 0 to 62")
    _plan_levels("map_linear", order, radix, out.shape[1], &plan)
    for k in range(n_ctrl_lv):
        counts[k] = ctrl_counts[k]
    if n == 0:
        return -1, 0, 0
    with nogil:
        for i in range(n):
            a = addrs[i]
            if not _counted(a, is_write[i], capacity, wrap, &wrapped, &reads):
                first_bad = i
                break
            row = &out[i, 0]
            _split_one(&plan, a >> tx_shift, row)
            c = 0
            for k in range(n_ctrl_lv):
                c = c * counts[k] + row[k]
            ctrl[i] = <int32_t> c
    return first_bad, wrapped, reads


def address_counts(const int64_t[::1] addrs, const uint8_t[::1] is_write, int64_t capacity, bint wrap):
    """What :func:`map_linear` counts, without mapping: ``(first_bad, wrapped, reads)`` (the
    index of the first address below 0, or at or beyond ``capacity`` unless ``wrap``, -1 for
    none; the counts then stop there)."""
    cdef Py_ssize_t n = addrs.shape[0], i, first_bad = -1, wrapped = 0, reads = 0
    if is_write.shape[0] != n:
        raise ValueError("address_counts: one is_write per address")
    with nogil:
        for i in range(n):
            if not _counted(addrs[i], is_write[i], capacity, wrap, &wrapped, &reads):
                first_bad = i
                break
    return first_bad, wrapped, reads
