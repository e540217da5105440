# The LoadStoreTrace line parser (``LD addr`` / ``ST addr``, addr decimal or 0x-hex, one space,
# optional CR before the newline), on raw pointers and without the GIL: included by _traceparse.pyx
# (parse_loadstore) and by _prefetch.pyx (the start-up reader), so both parse exactly alike.
from libc.stdint cimport int64_t, uint8_t, uint64_t

# digit values by byte: 0-9, a-f / A-F as 10-15, everything else 255. A table, not comparisons:
# random hex addresses mix digits and letters unpredictably, and a branch per byte costs a
# misprediction every few bytes (the parse ran 2-3x slower that way).
cdef uint8_t DIGIT[256]
cdef int _k
for _k in range(256):
    DIGIT[_k] = 255
for _k in range(10):
    DIGIT[48 + _k] = _k
for _k in range(6):
    DIGIT[97 + _k] = 10 + _k
    DIGIT[65 + _k] = 10 + _k


cdef inline Py_ssize_t count_newline_bytes(const unsigned char* data, Py_ssize_t n) noexcept nogil:
    """How many of the ``n`` bytes at ``data`` are newlines. Counted 255 bytes at a time in a
    one-byte counter, which the compiler keeps in vector lanes (4x faster than a wider counter:
    `python benchmarks/run.py engine TraceParsing`)."""
    cdef Py_ssize_t j = 0, k = 0, stop
    cdef unsigned char in_block
    while j < n:
        stop = j + 255 if n - j > 255 else n
        in_block = 0
        while j < stop:
            in_block += data[j] == 10
            j += 1
        k += in_block
    return k


cdef Py_ssize_t parse_ls_lines(const unsigned char* data, Py_ssize_t n, uint8_t* w, int64_t* a) noexcept nogil:
    """Parse the lines of ``data[:n]`` (the last may lack its newline) into ``w`` (1 for ST) and
    ``a`` (the addresses), which hold one entry per line; returns how many lines parsed before the
    first malformed one (all of them: every line is well formed)."""
    cdef Py_ssize_t i = 0, line = 0, j, start, last_nl
    cdef uint64_t v
    cdef unsigned int base, dv
    cdef bint hexa, load, store
    j = n - 1
    while j >= 0 and data[j] != 10:
        j -= 1
    last_nl = j                 # up to here, every line ends in a newline, whose DIGIT is 255
    while i < n:
        if i + 3 >= n:
            break
        # LD or ST, without a branch on which: with reads and writes in random order, such a
        # branch mispredicts every few lines
        load = (data[i] == 76) & (data[i + 1] == 68)
        store = (data[i] == 83) & (data[i + 1] == 84)
        if not ((load | store) & (data[i + 2] == 32)):
            break
        w[line] = store
        i += 3
        hexa = i + 1 < n and data[i] == 48 and (data[i + 1] == 120 or data[i + 1] == 88)
        if hexa:
            i += 2
        base = 16 if hexa else 10
        v = 0
        start = i
        if i <= last_nl and hexa:
            # the digits end at the latest at the line's newline: no bounds to test (a shift, not
            # a multiplication, per hex digit)
            while True:
                dv = DIGIT[data[i]]
                if dv >= 16:
                    break
                v = (v << 4) | dv
                i += 1
        elif i <= last_nl:
            while True:
                dv = DIGIT[data[i]]
                if dv >= 10:
                    break
                v = v * 10 + dv
                i += 1
        else:
            while i < n:
                dv = DIGIT[data[i]]
                if dv >= base:
                    break
                v = v * base + dv
                i += 1
        if i - start == 0 or i - start > 15:    # none, or beyond 60 bits: the strict parser says
            break
        if i < n and data[i] == 13:
            i += 1
        if i < n and data[i] != 10:             # not a digit of this base
            break
        a[line] = <int64_t> v
        line += 1
        i += 1
    return line
