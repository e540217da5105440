"""Request traces: Ramulator 2.0's LoadStoreTrace and ReadWriteTrace formats, and numpy arrays.

A :class:`RequestTrace` holds, per request, the arrival cycle (memory cycles; 0 = offered as soon
as the queue has room, as Ramulator's trace frontends do), either a byte address or a ready-made
address vector, and whether it is a write.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np

from ..errors import TraceError

if TYPE_CHECKING:
    import pathlib

__all__ = ["RequestTrace", "LoadStoreChunks", "iter_loadstore_chunks", "read_loadstore_trace", "read_readwrite_trace", "read_trace",
           "write_loadstore_trace", "check_request_trace", "MAX_ARRIVAL_CYCLE"]

#: Latest arrival cycle a request may have: the engine's "never" is 2**62 - 1, and time sums of an
#: arrival and a few timings must stay below it. (The work estimate refuses far smaller ones when
#: refresh would have to be simulated all the way there.)
MAX_ARRIVAL_CYCLE = 1 << 60


@dataclass(frozen=True)
class RequestTrace:
    """Requests in issue order. ``addresses`` (bytes) or ``addr_vectors`` (one field per level)."""

    is_write: np.ndarray                 # bool, (n,)
    arrival: np.ndarray                  # int64 memory cycles, non-decreasing, (n,)
    addresses: np.ndarray | None = None  # int64 bytes, (n,)
    addr_vectors: np.ndarray | None = None  # int32, (n, levels)
    source: str = "array"

    def __len__(self) -> int:
        return int(self.is_write.shape[0])

    @classmethod
    def from_arrays(cls, arrival, address, is_write, *, source: str = "array") -> "RequestTrace":
        """Build from numpy arrays of (arrival cycle, byte address, is_write)."""
        arrival = np.asarray(arrival)
        address = np.asarray(address)
        is_write = np.asarray(is_write)
        n = address.shape[0] if address.ndim else -1
        for name, a in (("arrival", arrival), ("address", address), ("is_write", is_write)):
            if a.ndim != 1 or a.shape[0] != n:
                raise TraceError(f"{source}: {name}: shape {a.shape}: expected ({n},), one entry per request")
        if not np.issubdtype(arrival.dtype, np.integer):
            raise TraceError(f"{source}: arrival: dtype {arrival.dtype}: expected integer memory cycles")
        if not np.issubdtype(address.dtype, np.integer):
            raise TraceError(f"{source}: address: dtype {address.dtype}: expected integer byte addresses")
        if n and arrival.min() < 0:
            bad = int(np.argmax(arrival < 0))
            raise TraceError(f"{source}: arrival[{bad}] = {int(arrival[bad])}: expected a cycle >= 0")
        if n > 1 and np.any(np.diff(arrival) < 0):
            bad = int(np.argmax(np.diff(arrival) < 0)) + 1
            raise TraceError(f"{source}: arrival[{bad}] = {int(arrival[bad])}: expected non-decreasing "
                             f"arrival cycles (previous {int(arrival[bad - 1])})")
        return cls(is_write=is_write.astype(bool), arrival=arrival.astype(np.int64),
                   addresses=address.astype(np.int64), source=source)


#: A LoadStoreTrace line; the address's digits are counted before it is converted (a line of
#: megabytes of digits would make Python's int() fail), and then it must be below 2**63.
_LS_LINE = re.compile(rb"^(LD|ST) (0[xX][0-9a-fA-F]{1,24}|[0-9]{1,24})\r?$")


_ZERO_ARRIVALS = np.zeros(0, dtype=np.int64)


def _zero_arrivals(n: int) -> np.ndarray:
    """``n`` arrival cycles of 0 (a LoadStoreTrace's), read-only: views of one array shared by every
    piece of a streamed trace, so that each piece does not touch fresh memory for them (a first
    touch costs a page fault per 4 KiB, and the engine reads every arrival)."""
    global _ZERO_ARRIVALS
    zeros = _ZERO_ARRIVALS
    if len(zeros) < n:
        zeros = np.zeros(n, dtype=np.int64)
        zeros.flags.writeable = False
        _ZERO_ARRIVALS = zeros          # (two threads racing here each get a valid array)
    return zeros[:n]


def _read_file(path: pathlib.Path) -> bytes:
    """The trace's bytes through the one opener (a regular file within the trace size limit)."""
    from .._inputs import read_bytes

    return read_bytes(path, "DRAM request trace", "trace")


def _read(path: pathlib.Path) -> tuple[bytes, list[bytes]]:
    data = _read_file(path)
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return data, lines


def read_loadstore_trace(path: str | pathlib.Path) -> RequestTrace:
    """Read ``LD addr`` / ``ST addr`` lines (addr decimal or 0x-hex), as Ramulator 2.0 does."""
    import pathlib      # (in each reader: a streamed `dram run` imports no pathlib, tests/test_cli_startup.py)

    path = pathlib.Path(path)
    data = _read_file(path)
    from .._core._traceparse import parse_loadstore
    is_write, addrs, bad = parse_loadstore(data)
    if bad < 0:
        return RequestTrace(is_write=is_write, arrival=np.zeros(len(addrs), dtype=np.int64), addresses=addrs,
                            source=str(path))
    # the strict per-line parser below names the line and its content
    data, lines = _read(path)
    is_write, addrs = _parse_lines(path, lines, 0)
    return RequestTrace(is_write=is_write, arrival=np.zeros(len(lines), dtype=np.int64), addresses=addrs,
                        source=str(path))


def _parse_lines(path: pathlib.Path, lines: list[bytes], first_line: int) -> tuple[np.ndarray, np.ndarray]:
    """LoadStoreTrace lines one by one (``first_line``: the 0-based line number of ``lines[0]``);
    a malformed line is refused, naming its number and content."""
    n = len(lines)
    is_write = np.empty(n, dtype=bool)
    addrs = np.empty(n, dtype=np.int64)
    for i, line in enumerate(lines):
        m = _LS_LINE.match(line)
        if m is None:
            text = line.decode("utf-8", "replace")[:80]
            raise TraceError(f"{path}:{first_line + i + 1}: {text!r}: expected 'LD <addr>' or 'ST <addr>' "
                             "(addr decimal or 0x-hex, below 2**63)")
        is_write[i] = m.group(1) == b"ST"
        tok = m.group(2)
        value = int(tok, 16) if tok[:2] in (b"0x", b"0X") else int(tok)
        if value >= 1 << 63:
            raise TraceError(f"{path}:{first_line + i + 1}: address = {tok.decode()}: expected an address below 2**63")
        addrs[i] = value
    return is_write, addrs


#: Bytes per piece when a LoadStoreTrace file is streamed (whole lines, about this many bytes).
STREAM_BLOCK_BYTES = 1 << 20


def iter_loadstore_chunks(path: str | pathlib.Path, block_bytes: int = STREAM_BLOCK_BYTES) -> Iterator[RequestTrace]:
    """A LoadStoreTrace file as consecutive pieces of whole lines, about ``block_bytes`` bytes each
    (the whole file is never in memory): together, exactly :func:`read_loadstore_trace`'s trace
    (tests/test_streaming.py), with the same errors and line numbers."""
    yield from LoadStoreChunks(path, block_bytes)


class LoadStoreChunks:
    """A LoadStoreTrace file to stream, in pieces of whole lines of about ``block_bytes`` bytes.

    Iterating gives :func:`iter_loadstore_chunks`'s pieces, afresh each time (the file is opened
    again). :meth:`blocks` and :meth:`parse` split the two halves of that: reading the file, in
    order, and parsing a piece, which can happen anywhere (the runs of a split on several threads
    share one reading and parse different pieces at the same time; the parse lets other threads
    run)."""

    def __init__(self, path: str | pathlib.Path, block_bytes: int | None = None, prefetch: Any = None) -> None:
        self.path = os.fspath(path)     # (a str: pathlib is not imported on the streaming path)
        self.block_bytes = STREAM_BLOCK_BYTES if block_bytes is None else block_bytes
        if self.block_bytes < 1:
            raise ValueError(f"block_bytes: {self.block_bytes}, expected >= 1")
        # the file's first pieces, read and parsed during start-up (sievesim._core._prefetch:
        # `sievesim dram run` starts one before it imports numpy)
        self.prefetch = prefetch
        self._held: list[Any] | None = None     # its pieces (None: released, read again from the file)

    def __iter__(self) -> Iterator[RequestTrace]:
        for block in self.blocks():
            yield self.parse(*block)

    def release(self, piece: Any) -> None:
        """A prefetched piece that the reading now under way has handed to every run: its memory
        goes once they drop it, and a later reading (the split again) reads its lines from the file."""
        if self._held is not None:
            self._held[piece.index] = None

    def blocks(self) -> Iterator[tuple[Any, int, int]]:
        """The file's pieces as ``(bytes, first_line, newlines)``: whole lines, in order (a view of
        bytes read for it alone); ``first_line`` is the 0-based number of the piece's first line
        (the index of its first request); ``newlines``: its newline bytes (for :meth:`parse`).
        With a ``prefetch``, its pieces come in their place (already parsed, in place of the bytes;
        newlines -1), except those released (:meth:`release`), which are read again."""
        from .._inputs import open_input

        if self.prefetch is not None and self._held is None:
            self._held = list(self.prefetch.take()[0])        # stops the reader; the pieces are ours
        with open_input(self.path, "DRAM request trace", "trace-stream") as fh:   # a regular file, in blocks
            pos = line = 0
            for i in range(len(self._held or ())):
                piece = self._held[i]
                if piece is None:
                    continue
                if piece.offset > pos:
                    yield from self._read(fh, pos, piece.offset, line)
                pos, line = piece.offset + piece.length, piece.first_line + piece.lines
                yield piece, piece.first_line, -1
                piece = None        # (else this frame would keep a released piece's memory)
            yield from self._read(fh, pos, None, line)

    def _read(self, fh: Any, start: int, stop: int | None, first_line: int) -> Iterator[tuple[Any, int, int]]:
        """The pieces of the file's bytes from ``start`` to ``stop`` (None: its end; both at line
        starts); ``first_line``: the number of the line at ``start``."""
        from .._core._traceparse import count_newlines

        fh.seek(start)
        left = None if stop is None else stop - start
        carry = b""
        while True:
            # read into a buffer the piece is a view of (no copies of the megabyte)
            want = self.block_bytes if left is None else min(self.block_bytes, left)
            buf = bytearray(len(carry) + want)
            buf[:len(carry)] = carry
            got = len(carry)
            while got < len(buf):
                k = fh.readinto(memoryview(buf)[got:])
                if not k:
                    break
                got += k
            if left is not None:
                left -= got - len(carry)
            end = got < len(buf) or left == 0
            view = memoryview(buf)[:got]
            if not end:
                cut = buf.rfind(b"\n", 0, got)
                if cut < 0:             # no whole line yet
                    carry = bytes(view)
                    continue
                piece, carry = view[:cut + 1], bytes(view[cut + 1:])
            elif got:
                piece, carry = view, b""
            else:
                return
            newlines = count_newlines(piece)
            yield piece, first_line, newlines
            first_line += newlines + (piece[-1] != 10)
            if end:
                return

    def parse(self, piece: bytes | memoryview, first_line: int, newlines: int = -1) -> RequestTrace:
        """One piece of :meth:`blocks` as requests (``newlines``: its newline bytes, if counted);
        a malformed line is refused, naming its number. Its arrivals (all 0) are read-only
        (views of one shared array)."""
        from .._core._prefetch import PrefetchedPiece
        from .._core._traceparse import parse_loadstore

        if isinstance(piece, PrefetchedPiece):     # parsed during start-up
            return RequestTrace(is_write=np.asarray(piece.is_write), arrival=_zero_arrivals(piece.lines),
                                addresses=np.asarray(piece.addrs), source=str(self.path))
        is_write, addrs, bad = parse_loadstore(piece, newlines)
        if bad >= 0:
            lines = bytes(piece).split(b"\n")
            if lines[-1] == b"":
                lines.pop()
            is_write, addrs = _parse_lines(self.path, lines, first_line)
        return RequestTrace(is_write=np.asarray(is_write, dtype=bool), arrival=_zero_arrivals(len(addrs)),
                            addresses=addrs, source=str(self.path))


def read_readwrite_trace(path: str | pathlib.Path, num_levels: int) -> RequestTrace:
    """Read ``R a0,a1,...`` / ``W a0,a1,...`` lines (address vectors, one field per level)."""
    import pathlib

    path = pathlib.Path(path)
    _, lines = _read(path)
    n = len(lines)
    is_write = np.empty(n, dtype=bool)
    vecs = np.empty((n, num_levels), dtype=np.int32)
    for i, line in enumerate(lines):
        parts = line.strip().split(b" ")
        ok = len(parts) == 2 and parts[0] in (b"R", b"W")
        if ok:
            fields = parts[1].split(b",")
            ok = len(fields) == num_levels and all(f.lstrip(b"-").isdigit() and len(f) <= 11 and
                                                   -(2**31) <= int(f) < 2**31 for f in fields)
        if not ok:
            text = line.decode("utf-8", "replace")[:80]
            raise TraceError(f"{path}:{i + 1}: {text!r}: expected 'R|W a0,...,a{num_levels - 1}' "
                             f"({num_levels} integer fields, each below 2**31)")
        is_write[i] = parts[0] == b"W"
        vecs[i] = [int(f) for f in fields]
    return RequestTrace(is_write=is_write, arrival=np.zeros(n, dtype=np.int64), addr_vectors=vecs,
                        source=str(path))


def read_trace(path: str | pathlib.Path, num_levels: int) -> RequestTrace:
    """Detect the format from the first line (LD/ST: LoadStoreTrace, R/W: ReadWriteTrace)."""
    import pathlib

    from .._inputs import open_input

    path = pathlib.Path(path)
    with open_input(path, "DRAM request trace", "trace") as fh:
        first = fh.readline(64)
    if first.startswith((b"R ", b"W ")):
        return read_readwrite_trace(path, num_levels)
    return read_loadstore_trace(path)


def write_loadstore_trace(path: str | pathlib.Path, addresses: np.ndarray, is_write: np.ndarray) -> None:
    """Write a LoadStoreTrace file (hex addresses)."""
    from .._outputs import open_output

    ops = np.where(np.asarray(is_write, dtype=bool), "ST", "LD")
    with open_output(path, "DRAM request trace", text=True) as fh:
        fh.write("\n".join(f"{o} 0x{int(a):x}" for o, a in zip(ops, addresses)))
        fh.write("\n")


def check_request_trace(trace: object, num_levels: int | None = None, param: str = "trace") -> RequestTrace:
    """``trace`` checked at the door of the compiled engine, which reads its arrays without bounds
    checks: a :class:`RequestTrace` whose arrays are one-dimensional (address vectors: ``(n,
    levels)``) with one entry per request, of integer (``is_write``: boolean) dtype, arrivals
    non-negative, non-decreasing and at most :data:`MAX_ARRIVAL_CYCLE`. Returns a trace whose arrays
    have exactly the dtypes the engine takes, contiguous."""
    if not isinstance(trace, RequestTrace):
        raise TypeError(f"{param} = {trace!r:.60}: expected a RequestTrace (RequestTrace.from_arrays(arrival, "
                        f"address, is_write) or a reader of sievesim.dram.traces), got {type(trace).__name__}")
    src = trace.source
    arrays = {"is_write": trace.is_write, "arrival": trace.arrival, "addresses": trace.addresses,
              "addr_vectors": trace.addr_vectors}
    if (trace.addresses is None) == (trace.addr_vectors is None):
        raise TraceError(f"{src}: expected exactly one of addresses (bytes) and addr_vectors (one field per level)")
    out: dict[str, np.ndarray] = {}
    n = None
    for name, a in arrays.items():
        if a is None:
            continue
        if not isinstance(a, np.ndarray):
            a = np.asarray(a)
        want_dims = 2 if name == "addr_vectors" else 1
        if a.ndim != want_dims:
            raise TraceError(f"{src}: {name}: shape {a.shape}: expected {want_dims} dimension(s), one row per request")
        if n is None:
            n = a.shape[0]
        if a.shape[0] != n:
            raise TraceError(f"{src}: {name}: {a.shape[0]} entries: expected {n}, one per request (is_write has {n})")
        if name == "is_write":
            if a.dtype != np.bool_ and not (np.issubdtype(a.dtype, np.integer) and (a.size == 0 or
                                                                                    ((a == 0) | (a == 1)).all())):
                raise TraceError(f"{src}: is_write: dtype {a.dtype}: expected booleans (or integers 0 and 1)")
            a = np.ascontiguousarray(a, dtype=bool)
        else:
            if not np.issubdtype(a.dtype, np.integer) or a.dtype == np.uint64:
                raise TraceError(f"{src}: {name}: dtype {a.dtype}: expected integers"
                                 + (" (memory cycles)" if name == "arrival" else ""))
            a = np.ascontiguousarray(a, dtype=np.int32 if name == "addr_vectors" else np.int64)
        out[name] = a
    if num_levels is not None and "addr_vectors" in out and out["addr_vectors"].shape[1] != num_levels:
        raise TraceError(f"{src}: address vectors: shape {out['addr_vectors'].shape}: expected (n, {num_levels})")
    arrival = out["arrival"]
    if arrival.size:
        if arrival.min() < 0:
            bad = int(np.argmax(arrival < 0))
            raise TraceError(f"{src}: arrival[{bad}] = {int(arrival[bad])}: expected a cycle >= 0")
        if arrival.size > 1 and np.any(np.diff(arrival) < 0):
            bad = int(np.argmax(np.diff(arrival) < 0)) + 1
            raise TraceError(f"{src}: arrival[{bad}] = {int(arrival[bad])}: expected non-decreasing arrival cycles "
                             f"(previous {int(arrival[bad - 1])})")
        if int(arrival[-1]) > MAX_ARRIVAL_CYCLE:
            raise TraceError(f"{src}: arrival[{arrival.size - 1}] = {int(arrival[-1])}: expected a cycle of at most "
                             f"2**60")
    return RequestTrace(is_write=out["is_write"], arrival=arrival, addresses=out.get("addresses"),
                        addr_vectors=out.get("addr_vectors"), source=src)
