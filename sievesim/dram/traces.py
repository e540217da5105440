"""Request traces: Ramulator 2.0's LoadStoreTrace and ReadWriteTrace formats, and numpy arrays.

A :class:`RequestTrace` holds, per request, the arrival cycle (memory cycles; 0 = offered as soon
as the queue has room, as Ramulator's trace frontends do), either a byte address or a ready-made
address vector, and whether it is a write.
"""
from __future__ import annotations

import pathlib
import re
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from ..errors import TraceError

__all__ = ["RequestTrace", "iter_loadstore_chunks", "read_loadstore_trace", "read_readwrite_trace", "read_trace",
           "write_loadstore_trace"]


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


_LS_LINE = re.compile(rb"^(LD|ST) (0[xX][0-9a-fA-F]+|[0-9]+)\r?$")


def _read(path: pathlib.Path) -> tuple[bytes, list[bytes]]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TraceError(f"{path}: cannot read trace ({exc.strerror})") from None
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return data, lines


def read_loadstore_trace(path: str | pathlib.Path) -> RequestTrace:
    """Read ``LD addr`` / ``ST addr`` lines (addr decimal or 0x-hex), as Ramulator 2.0 does."""
    path = pathlib.Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TraceError(f"{path}: cannot read trace ({exc.strerror})") from None
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
                             "(addr decimal or 0x-hex)")
        is_write[i] = m.group(1) == b"ST"
        tok = m.group(2)
        value = int(tok, 16) if tok[:2] in (b"0x", b"0X") else int(tok)
        if value >= 1 << 63:
            raise TraceError(f"{path}:{first_line + i + 1}: address = {tok.decode()}: expected an address below 2**63")
        addrs[i] = value
    return is_write, addrs


def iter_loadstore_chunks(path: str | pathlib.Path, block_bytes: int = 1 << 20) -> Iterator[RequestTrace]:
    """A LoadStoreTrace file as consecutive pieces of whole lines, about ``block_bytes`` bytes each
    (the whole file is never in memory): together, exactly :func:`read_loadstore_trace`'s trace
    (tests/test_streaming.py), with the same errors and line numbers."""
    from .._core._traceparse import parse_loadstore

    path = pathlib.Path(path)
    if block_bytes < 1:
        raise ValueError(f"block_bytes: {block_bytes}, expected >= 1")
    try:
        fh = path.open("rb")
    except OSError as exc:
        raise TraceError(f"{path}: cannot read trace ({exc.strerror})") from None
    first_line = 0
    carry = b""
    with fh:
        while True:
            block = fh.read(block_bytes)
            data = carry + block
            if block:
                cut = data.rfind(b"\n")
                if cut < 0:             # no whole line yet
                    carry = data
                    continue
                piece, carry = data[:cut + 1], data[cut + 1:]
            elif data:
                piece, carry = data, b""
            else:
                return
            is_write, addrs, bad = parse_loadstore(piece)
            if bad >= 0:
                lines = piece.split(b"\n")
                if lines[-1] == b"":
                    lines.pop()
                is_write, addrs = _parse_lines(path, lines, first_line)
            yield RequestTrace(is_write=np.asarray(is_write, dtype=bool), arrival=np.zeros(len(addrs), dtype=np.int64),
                               addresses=addrs, source=str(path))
            first_line += len(addrs)
            if not block:
                return


def read_readwrite_trace(path: str | pathlib.Path, num_levels: int) -> RequestTrace:
    """Read ``R a0,a1,...`` / ``W a0,a1,...`` lines (address vectors, one field per level)."""
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
    path = pathlib.Path(path)
    try:
        with path.open("rb") as fh:
            first = fh.readline()
    except OSError as exc:
        raise TraceError(f"{path}: cannot read trace ({exc.strerror})") from None
    if first.startswith((b"R ", b"W ")):
        return read_readwrite_trace(path, num_levels)
    return read_loadstore_trace(path)


def write_loadstore_trace(path: str | pathlib.Path, addresses: np.ndarray, is_write: np.ndarray) -> None:
    """Write a LoadStoreTrace file (hex addresses)."""
    ops = np.where(np.asarray(is_write, dtype=bool), "ST", "LD")
    with open(path, "w") as fh:
        fh.write("\n".join(f"{o} 0x{int(a):x}" for o, a in zip(ops, addresses)))
        fh.write("\n")
