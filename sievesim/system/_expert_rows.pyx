# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The per-GPU bookkeeping of :class:`sievesim.system.expert_rows.ExpertRows` in one pass of C: for
each row (one GPU's local experts) the early loads' first expert (most own tokens, ties: lower id)
and the last of them on the GPU, the late loads' first and last expert (most tokens of the step
first, ties: lower id), the GEMM's tail, their counts and the node masks. Integer work only: the
same ids and counts as the numpy expressions it replaces."""
import numpy as np

cimport numpy as cnp
from libc.stdint cimport int64_t, uint8_t

cnp.import_array()

#: Columns of the ``stats`` array :func:`expert_rows` returns.
STATS = ("n_early", "n_early_gpu", "n_wasted", "first_early_on_gpu", "n_late", "tail", "tail_tokens")


def expert_rows(const int64_t[:, ::1] counts, const int64_t[:, ::1] local, const uint8_t[:, ::1] on_gpu,
                const uint8_t[:, ::1] on_pim, const uint8_t[:, ::1] early):
    """``(stats, masks)``: ``stats`` (rows x 7, int64; columns :data:`STATS`) and ``masks`` (6 x rows x
    experts, bool): the first early expert, the other early experts, the first late expert, the
    other late experts, the tail expert, the GEMM's other experts. A row without early (late, GPU)
    experts has zeros there; its tail is -1."""
    cdef Py_ssize_t rows = counts.shape[0], n = counts.shape[1], g, i
    cdef Py_ssize_t first_e, last_eg, first_l, last_l, tail
    cdef int64_t ne, neg, nw, nl
    stats_arr = np.zeros((rows, 7), dtype=np.int64)
    masks_arr = np.zeros((6, rows, n), dtype=np.uint8)
    cdef int64_t[:, ::1] stats = stats_arr
    cdef uint8_t[:, :, ::1] masks = masks_arr
    for g in range(rows):
        first_e = last_eg = first_l = last_l = -1
        ne = neg = nw = nl = 0
        for i in range(n):
            if early[g, i]:
                ne += 1
                if first_e < 0 or local[g, i] > local[g, first_e]:
                    first_e = i
                if on_pim[g, i]:
                    nw += 1
                if on_gpu[g, i]:
                    neg += 1
                    if last_eg < 0 or local[g, i] <= local[g, last_eg]:
                        last_eg = i
            elif on_gpu[g, i]:
                nl += 1
                if first_l < 0 or counts[g, i] > counts[g, first_l]:
                    first_l = i
                if last_l < 0 or counts[g, i] <= counts[g, last_l]:
                    last_l = i
        tail = last_l if nl > 0 else last_eg
        stats[g, 0] = ne
        stats[g, 1] = neg
        stats[g, 2] = nw
        stats[g, 3] = 1 if first_e >= 0 and on_gpu[g, first_e] else 0
        stats[g, 4] = nl
        stats[g, 5] = tail
        stats[g, 6] = counts[g, tail] if tail >= 0 else 0
        for i in range(n):
            if early[g, i]:
                masks[0 if i == first_e else 1, g, i] = 1
            elif on_gpu[g, i]:
                masks[2 if i == first_l else 3, g, i] = 1
            if on_gpu[g, i]:
                masks[4 if i == tail else 5, g, i] = 1
    return stats_arr, masks_arr.view(bool)
