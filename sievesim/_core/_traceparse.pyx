# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""LoadStoreTrace parsing in one pass over the bytes (``LD addr`` / ``ST addr``, addr decimal or
0x-hex, one space, optional CR before the newline)."""
import numpy as np
cimport numpy as cnp
from libc.stdint cimport int64_t, uint8_t, uint64_t

cnp.import_array()


def parse_loadstore(const unsigned char[::1] data):
    """Return ``(is_write, addresses, bad_line)``; ``bad_line`` is the 0-based index of the first
    malformed line (the arrays are then meaningless), or -1."""
    cdef Py_ssize_t n = data.shape[0], i = 0, lines = 0, line = 0, j
    cdef uint64_t v
    cdef int d
    cdef unsigned char ch
    cdef bint hexa, ok
    for j in range(n):
        if data[j] == 10:
            lines += 1
    if n and data[n - 1] != 10:
        lines += 1
    is_write = np.empty(lines, dtype=np.uint8)
    addrs = np.empty(lines, dtype=np.int64)
    cdef uint8_t[::1] w = is_write
    cdef int64_t[::1] a = addrs
    with nogil:
        while i < n:
            ok = i + 3 < n and data[i + 2] == 32 and (
                (data[i] == 76 and data[i + 1] == 68) or (data[i] == 83 and data[i + 1] == 84))  # LD / ST
            if not ok:
                break
            w[line] = data[i] == 83
            i += 3
            hexa = i + 1 < n and data[i] == 48 and (data[i + 1] == 120 or data[i + 1] == 88)
            if hexa:
                i += 2
            v = 0
            d = 0
            while i < n and data[i] != 10 and data[i] != 13:
                ch = data[i]
                if 48 <= ch <= 57:
                    v = v * (16 if hexa else 10) + (ch - 48)
                elif hexa and 97 <= ch <= 102:
                    v = v * 16 + (ch - 87)
                elif hexa and 65 <= ch <= 70:
                    v = v * 16 + (ch - 55)
                else:
                    ok = False
                    break
                d += 1
                if d > 15:          # beyond 60 bits: let the strict parser report it
                    ok = False
                    break
                i += 1
            if i < n and data[i] == 13:
                i += 1
            if not ok or d == 0 or (i < n and data[i] != 10):
                ok = False
                break
            a[line] = <int64_t> v
            line += 1
            i += 1
    if line < lines:
        return is_write, addrs, line
    return is_write.view(np.bool_), addrs, -1
