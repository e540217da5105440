# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The start of a LoadStoreTrace file, read and parsed on another core while the process starts.

A ``sievesim dram run`` spends its first tenth of a second importing numpy and reading its
configuration, on one core. :class:`Prefetch` reads and parses the trace meanwhile, on a thread
that holds no GIL and needs no numpy (this module imports none), into pieces of whole lines, until
it is told to stop, reaches the end of the file, meets a line it cannot parse (left, with the rest,
to the reader that names it), or holds ``max_bytes`` of parsed requests. Its pieces are exactly
what :func:`sievesim._core._traceparse.parse_loadstore` gives for the same lines
(tests/test_prefetch.py)."""
from libc.stdint cimport int64_t, uint8_t
from libc.stdlib cimport malloc, free
from posix.unistd cimport close, pread
from posix.types cimport off_t
from cython.view cimport array as cvarray

include "_lsparse.pxi"

cdef extern from *:
    """
    #include <sys/mman.h>
    /* a piece's arrays in pages of their own (not the reader thread's malloc arena, which would
       keep them resident once freed): returned to the system as soon as the run releases them */
    static void *sievesim_map(size_t n) {
        size_t total = n + 64;
        char *p = (char *) mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return NULL;
        *(size_t *) p = total;      /* the size, for the unmapping: 64 bytes keep the data aligned */
        return p + 64;
    }
    static void sievesim_unmap(void *q) {
        if (q != NULL) {
            char *p = (char *) q - 64;
            munmap(p, *(size_t *) p);
        }
    }
    /* the stop flag is set by the main thread and polled by the reader */
    static inline int sievesim_prefetch_get(int *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
    static inline void sievesim_prefetch_set(int *p) { __atomic_store_n(p, 1, __ATOMIC_RELEASE); }
    """
    void* sievesim_map(size_t n) nogil
    void sievesim_unmap(void* q) nogil
    int sievesim_prefetch_get(int* p) nogil
    void sievesim_prefetch_set(int* p) nogil

cdef enum:
    MAX_PIECES = 256
    # parsed bytes per request: its address (int64) and whether it is a write (one byte)
    BYTES_PER_REQUEST = 9


cdef struct Piece:
    uint8_t* is_write
    int64_t* addrs
    int64_t lines
    int64_t first_line
    int64_t offset          # bytes: where its first line starts in the file
    int64_t length          # bytes: its lines, newlines included
    int64_t max_addr        # its largest address (0 for none)
    int64_t writes          # its ST lines


cdef class PrefetchedPiece:
    """A piece of whole lines parsed ahead: ``is_write`` (bool) and ``addrs`` (int64) as buffers
    (``numpy.asarray`` takes them without a copy), ``first_line`` (0-based, the index of its
    first request), ``lines``, its bytes in the file (``offset``, ``length``), its ``index``
    among the pieces, and, counted on the reader's core, its largest address ``max_addr`` and
    its ``writes`` (the parser gives no address below 0)."""
    cdef readonly object is_write, addrs
    cdef readonly int64_t first_line, lines, offset, length, index, max_addr, writes


cdef object _owned(void* data, int64_t n, Py_ssize_t itemsize, str fmt):
    """``n`` items at ``data`` (sievesim_map) as a buffer that unmaps them when the last view goes."""
    cdef cvarray arr = cvarray(shape=(n,), itemsize=itemsize, format=fmt, mode="c", allocate_buffer=False)
    arr.data = <char*> data
    arr.callback_free_data = sievesim_unmap
    return arr


cdef class Prefetch:
    """Reads and parses a LoadStoreTrace file from its start on a thread of its own.

    ``Prefetch(fd, block_bytes, max_bytes)`` takes an open file (a regular file; it reads with
    ``pread`` and leaves the file offset alone; :meth:`finish` closes it). :meth:`start` starts
    the thread; :meth:`finish` stops it (waiting for the piece in hand, at most a block's parse)
    and returns ``(pieces, offset, next_line, eof)``: the pieces read, the byte offset and the
    line number (0-based) where the rest of the file starts, and whether that rest is empty.
    ``finish`` can be called again; it returns the same, until :meth:`take` hands the pieces over."""
    cdef int fd
    cdef int stop
    cdef int64_t block_bytes, max_bytes, parsed_bytes
    cdef int64_t offset, next_line
    cdef bint eof, finished
    cdef Piece pieces[MAX_PIECES]
    cdef int n_pieces
    cdef object thread, result

    def __cinit__(self, int fd, int64_t block_bytes, int64_t max_bytes):
        if block_bytes < 1 or max_bytes < 0:
            raise ValueError(f"block_bytes = {block_bytes}, max_bytes = {max_bytes}: expected >= 1 and >= 0")
        self.fd, self.block_bytes, self.max_bytes = fd, block_bytes, max_bytes
        self.n_pieces = 0

    def start(self) -> None:
        import threading

        self.thread = threading.Thread(target=self._work, name="sievesim-prefetch", daemon=True)
        self.thread.start()

    def _work(self) -> None:
        with nogil:
            self._loop()

    cdef void _loop(self) noexcept nogil:
        cdef unsigned char* buf = <unsigned char*> malloc(self.block_bytes)
        cdef int64_t got, k = 0, length, lines, j, top, writes
        cdef bint ended
        cdef Piece* p
        if buf == NULL:
            return
        while not sievesim_prefetch_get(&self.stop) and self.n_pieces < MAX_PIECES:
            got = 0
            while got < self.block_bytes:
                k = pread(self.fd, buf + got, self.block_bytes - got, <off_t> (self.offset + got))
                if k <= 0:
                    break
                got += k
            if k < 0:
                break               # an error reading: the reader meets it again and names it
            ended = got < self.block_bytes          # pread gave 0: the file ends here
            if got == 0:
                self.eof = True
                break
            length = got
            if not ended:
                # up to the block's last newline (memrchr is not everywhere)
                while length > 0 and buf[length - 1] != 10:
                    length -= 1
                if length == 0:
                    break           # no whole line in a block: left to the reader
            lines = count_newline_bytes(buf, length) + (buf[length - 1] != 10)
            if self.parsed_bytes + lines * BYTES_PER_REQUEST > self.max_bytes:
                break
            p = &self.pieces[self.n_pieces]
            p.is_write = <uint8_t*> sievesim_map(lines)
            p.addrs = <int64_t*> sievesim_map(lines * sizeof(int64_t))
            if p.is_write == NULL or p.addrs == NULL or parse_ls_lines(buf, length, p.is_write, p.addrs) < lines:
                sievesim_unmap(p.is_write)  # out of memory, or a malformed line: the reader takes it from here
                sievesim_unmap(p.addrs)
                p.is_write, p.addrs = NULL, NULL
                break
            p.lines, p.first_line, p.offset, p.length = lines, self.next_line, self.offset, length
            # what a run would count over the piece, here while it is in this core's cache
            top = 0
            writes = 0
            for j in range(lines):
                top = p.addrs[j] if p.addrs[j] > top else top
                writes += p.is_write[j]
            p.max_addr, p.writes = top, writes
            self.n_pieces += 1
            self.parsed_bytes += lines * BYTES_PER_REQUEST
            self.offset += length
            self.next_line += lines
            if ended:
                self.eof = True
                break
        free(buf)

    def wait(self) -> None:
        """Wait until the reader stops on its own (the end of the file, a malformed line, the bound)."""
        if self.thread is not None:
            self.thread.join()

    def finish(self):
        cdef int i
        cdef PrefetchedPiece piece
        if not self.finished:
            sievesim_prefetch_set(&self.stop)
            if self.thread is not None:
                self.thread.join()
                self.thread = None
            import os
            os.close(self.fd)
            pieces = []
            for i in range(self.n_pieces):
                piece = PrefetchedPiece()
                piece.is_write = _owned(self.pieces[i].is_write, self.pieces[i].lines, 1, "?")
                piece.addrs = _owned(self.pieces[i].addrs, self.pieces[i].lines, 8, "q")
                piece.first_line, piece.lines = self.pieces[i].first_line, self.pieces[i].lines
                piece.offset, piece.length, piece.index = self.pieces[i].offset, self.pieces[i].length, i
                piece.max_addr, piece.writes = self.pieces[i].max_addr, self.pieces[i].writes
                self.pieces[i].is_write = NULL     # owned by the piece's buffers now
                self.pieces[i].addrs = NULL
                pieces.append(piece)
            self.result = (tuple(pieces), self.offset, self.next_line, bool(self.eof))
            self.finished = True
        return self.result

    def take(self):
        """:meth:`finish`, handing the pieces over: later calls return no pieces (the caller's
        references alone keep them, so that their memory goes when the caller drops them)."""
        got = self.finish()
        self.result = ((),) + tuple(got[1:])
        return got

    def __dealloc__(self):
        # the thread holds this object while it runs: here it has stopped; a prefetch never
        # finished (an error in between) frees its pieces and closes its file
        cdef int i
        if not self.finished:
            for i in range(self.n_pieces):
                sievesim_unmap(self.pieces[i].is_write)
                sievesim_unmap(self.pieces[i].addrs)
            close(self.fd)


#: Bytes per read of :func:`open_prefetch`'s reader, and the parsed requests it holds at most
#: (9 bytes a request: 24 MiB is the first 2.8 million requests; the runs release each piece as
#: they pass it, so the peak stays below the issue's 96 MB: docs/dram.md, "Side by side").
PREFETCH_BLOCK_BYTES = 1 << 20
PREFETCH_MAX_BYTES = 24 << 20


def open_prefetch(path, int64_t block_bytes=PREFETCH_BLOCK_BYTES, int64_t max_bytes=PREFETCH_MAX_BYTES):
    """A started :class:`Prefetch` of the file at ``path``, or None where there is nothing to read
    ahead: a path that cannot be opened, or not a regular file (a FIFO is not waited on). The
    reader that takes the pieces names any error."""
    import os
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError, TypeError):
        return None
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError:
        regular = False
    if not regular:
        os.close(fd)
        return None
    pf = Prefetch(fd, block_bytes, max_bytes)
    pf.start()
    return pf
