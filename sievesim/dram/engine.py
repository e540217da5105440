"""Run a request trace on the engine and summarise what happened."""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Callable, Iterable

import numpy as np

from ..errors import TraceError, field_error
from .spec import DRAMConfig, check_engine_memory
from .mapping import ADDRESS_OVERFLOW, LINEAR_MAPPERS, check_linear, linear_key_map, map_addresses, map_with_controllers
from .traces import RequestTrace, _zero_arrivals

if TYPE_CHECKING:
    import pathlib

__all__ = ["DRAMResult", "simulate", "simulate_stream", "write_command_log", "residency_of", "LOG_COLUMNS"]

# below this, starting threads costs about what they save (docs/dram.md, "Threads")
AUTO_THREADS_MIN_REQUESTS = 50_000
LOG_COLUMNS = ("channel", "pseudo_channel", "sid", "bankgroup", "bank", "row", "column")
_LEVEL_TO_COLUMN = {"channel": "channel", "pseudochannel": "pseudo_channel", "sid": "sid",
                    "bankgroup": "bankgroup", "bank": "bank", "row": "row", "column": "column"}


@dataclass
class DRAMResult:
    """What one run measured. Cycles are memory command-clock cycles; ``time_ns`` = cycles x tCK."""

    config: str
    requests: int
    cycles: int
    time_ns: float
    reads: int
    writes: int
    row_hits: int
    row_misses: int
    row_conflicts: int
    avg_read_latency_cycles: float
    bandwidth_gbps: float          # achieved, GB/s (1e9 bytes per second)
    forwarded_reads: int
    commands: int
    refreshes: int
    wall_s: float
    end: str
    command_log: dict[str, np.ndarray] | None = field(default=None, repr=False)
    request_arrays: dict[str, np.ndarray] | None = field(default=None, repr=False)
    threads: int = 1               # threads the engine ran on (see sievesim._core.parallel)
    threads_note: str = ""         # why fewer threads ran than were asked for ("" when none)
    wrapped_requests: int = 0      # requests whose address was at or beyond the capacity (address_overflow="wrap")
    command_counts: dict[str, int] | None = None  # a CommandCounter plugin's counts, by command name
    residency: dict[str, Any] | None = None  # bank-state residency (see residency_of)

    def to_dict(self) -> dict[str, Any]:
        """Scalars (what ``--json`` prints), plus ``command_counts`` when a CommandCounter asked for them."""
        # field by field, not dataclasses.asdict: that deep-copies the request arrays and the command
        # log first (84 MB of copies for 2M requests, the peak of `dram run`)
        out = {f.name: getattr(self, f.name) for f in fields(self)
               if f.name not in ("command_log", "request_arrays", "command_counts", "threads_note")}
        if self.threads_note:
            out["threads_note"] = self.threads_note
        if self.command_counts is not None:
            out["command_counts"] = dict(self.command_counts)
        if self.residency is None:
            out.pop("residency")
        return out


def residency_of(raw: dict[str, Any], cycles: int, config: DRAMConfig) -> dict[str, Any]:
    """Bank-state residency of a run that ended at ``cycles``, summed over its units (the
    pseudo-channels, or the controllers of a standard without them): ``row_open_cycles`` (cycles
    a unit had at least one row buffer open: a bank row or a PIM row), ``refresh_cycles`` (cycles
    a unit was refreshing: tRFC per REFab, cut at the end), ``active_standby_cycles`` (their sum,
    at most ``cycles`` per unit: DRAMPower's active time), ``precharge_standby_cycles`` (the rest
    of ``units`` x ``cycles``). The engine models no power-down or self-refresh: none is counted."""
    t = int(cycles)
    since = np.asarray(raw["res_open_since"], dtype=np.int64)
    open_c = np.asarray(raw["res_open_cycles"], dtype=np.int64) + np.where(since >= 0, np.maximum(0, t - since), 0)
    end = np.asarray(raw["res_ref_end"], dtype=np.int64)
    ref_c = np.asarray(raw["res_ref_cycles"], dtype=np.int64) - np.where(end > t, end - t, 0)
    active = np.minimum(open_c + ref_c, t)
    units = len(since)
    levels = config.standard.levels
    unit = levels[max(levels.index(config.standard.controller_level),
                      levels.index("pseudochannel") if "pseudochannel" in levels else -1)]
    return {"unit": unit, "units": units, "cycles": t,
            "row_open_cycles": int(open_c.sum()), "refresh_cycles": int(ref_c.sum()),
            "active_standby_cycles": int(active.sum()), "precharge_standby_cycles": int(units * t - active.sum())}


def _to_vectors(config: DRAMConfig, trace: RequestTrace,
                overflow: str = "error") -> tuple[np.ndarray, np.ndarray]:
    radix = np.array(config.address_radix)
    if trace.addr_vectors is not None:
        vecs = np.asarray(trace.addr_vectors, dtype=np.int32)
        if vecs.ndim != 2 or vecs.shape[1] != len(radix):
            raise TraceError(f"{trace.source}: address vectors: shape {vecs.shape}: expected (n, {len(radix)}) "
                             f"for levels {config.standard.levels}")
        bad = np.argwhere((vecs < 0) | (vecs >= radix))
        if bad.size:
            i, lv = bad[0]
            raise TraceError(f"{trace.source}:{i + 1}: {config.standard.levels[lv]} = {int(vecs[i, lv])}: "
                             f"expected 0..{int(radix[lv]) - 1}")
        keys = np.zeros(len(vecs), dtype=np.int64)
        for lv in range(len(radix)):
            keys = keys * int(radix[lv]) + vecs[:, lv]
        return vecs, keys
    vecs = map_addresses(config, trace.addresses, source=trace.source, overflow=overflow)
    # keys stay the requested addresses: Ramulator forwards a read from a write of the same req.addr
    return vecs, np.asarray(trace.addresses, dtype=np.int64)


def _check_door(config: Any, trace: Any) -> tuple[DRAMConfig, RequestTrace]:
    """The arguments of the engine's Python face, checked before the compiled engine (built without
    bounds checks) sees them: a configuration (a :class:`DRAMConfig`, or a name or path for
    :func:`~sievesim.dram.config.get_config`), a trace whose arrays agree in length and dtype
    (:func:`~sievesim.dram.traces.check_request_trace`), and work within the time limit."""
    from .spec import check_engine_time
    from .traces import check_request_trace

    if not isinstance(config, DRAMConfig):
        from .config import get_config
        config = get_config(config)           # a name or a path; anything else: TypeError naming it
    trace = check_request_trace(trace, len(config.standard.levels))
    check_engine_time(config, len(trace), int(trace.arrival[-1]) if len(trace) else 0)
    return config, trace


def _check_engine_arrays(vecs: np.ndarray, keys: np.ndarray, is_write: np.ndarray, arrival: np.ndarray,
                         levels: int) -> None:
    """The last check before the compiled engine: one entry per request in every array, the
    dtypes and contiguity it reads them with (it indexes them with no bounds checks)."""
    n = len(arrival)
    for name, a, dtype, shape in (("address vectors", vecs, np.int32, (n, levels)), ("keys", keys, np.int64, (n,)),
                                  ("is_write", is_write, np.bool_, (n,)), ("arrival", arrival, np.int64, (n,))):
        if not isinstance(a, np.ndarray) or a.shape != shape or a.dtype != dtype or not a.flags.c_contiguous:
            raise TraceError(f"engine input {name}: {getattr(a, 'dtype', type(a).__name__)} "
                             f"{getattr(a, 'shape', '?')}: expected a contiguous {np.dtype(dtype)} array of shape {shape}")


def simulate(config: DRAMConfig, trace: RequestTrace, *, log_commands: bool = False,
             skip_idle: bool = True, threads: int | None = None,
             address_overflow: str = "error") -> DRAMResult:
    """Run ``trace`` through the memory system ``config``; optionally keep the command log.

    ``threads``: controllers are split between this many threads (default: the cores this
    process may use, for traces of at least ``AUTO_THREADS_MIN_REQUESTS``); the result is the
    one-thread result, bit for bit; a trace that fills a queue runs again in lockstep, and on one
    thread if the threads wait for each other more than they work (docs/dram.md, "Threads";
    ``threads_note`` says so). ``skip_idle=False`` visits every
    controller every cycle (slow; used to test that skipping idle cycles changes nothing).
    ``address_overflow``: ``error`` (default) or ``wrap`` (Ramulator 2.0's mappers; see
    :data:`sievesim.dram.mapping.ADDRESS_OVERFLOW`); ``wrapped_requests`` counts those past the capacity.
    The configuration's plugins run too: ``TraceRecorder`` writes the command log to its path,
    ``CommandCounter`` fills ``command_counts`` and writes them to its path.
    """
    from .._core.parallel import available_threads, run_requests

    config, trace = _check_door(config, trace)
    if threads is None:
        threads = available_threads() if len(trace) >= AUTO_THREADS_MIN_REQUESTS else 1
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 1:
        raise field_error("threads", threads, "an integer >= 1")
    plugins = tuple(getattr(config, "plugins", ()))
    keep_log = log_commands or bool(plugins)
    spec = config.compile()
    check_engine_memory(config, spec, len(trace), logged_commands=3 * len(trace) if keep_log else 0)
    vecs, keys = _to_vectors(config, trace, address_overflow)
    wrapped = 0
    if trace.addr_vectors is None and len(trace):
        wrapped = int((np.asarray(trace.addresses, dtype=np.int64) >= config.capacity_bytes).sum())
    _check_engine_arrays(vecs, keys, trace.is_write, trace.arrival, len(config.standard.levels))
    t0 = time.perf_counter()
    raw = run_requests(spec, vecs, keys, trace.is_write, trace.arrival, log_commands=keep_log,
                       skip_idle=skip_idle, threads=int(threads))
    wall = time.perf_counter() - t0
    n = len(trace)
    is_write = np.asarray(trace.is_write, dtype=bool)
    depart, arrive, row_class = raw["depart"], raw["arrive"], raw["row_class"]
    if config.end == "accepted":
        cycles = raw["clk"]
    else:
        cycles = int(max(raw["clk"], depart.max(initial=0)))
    served_reads = (~is_write) & (depart >= 0) & (depart <= cycles)
    lat = depart[served_reads] - arrive[served_reads]
    tx = config.tx_bytes
    served = int(((depart >= 0) & (depart <= cycles)).sum())
    time_ns = cycles * config.tck_ns
    log = None
    if keep_log:
        log = {"cycle": raw["log_clk"], "addr": raw["log_addr"], "command": raw["log_cmd"],
               "names": spec["command_names"]}
    note = _threads_note(config, raw, int(threads), n, skip_idle)
    result = DRAMResult(
        config=config.name,
        requests=n,
        cycles=int(cycles),
        time_ns=float(time_ns),
        reads=int((~is_write).sum()),
        writes=int(is_write.sum()),
        row_hits=int((row_class == 0).sum()),
        row_misses=int((row_class == 1).sum()),
        row_conflicts=int((row_class == 2).sum()),
        avg_read_latency_cycles=float(lat.mean()) if lat.size else 0.0,
        bandwidth_gbps=float(served * tx / time_ns) if time_ns else 0.0,
        forwarded_reads=int(raw["forwarded"].sum()),
        commands=raw["n_commands"],
        refreshes=raw["n_refresh"],
        wall_s=wall,
        end=config.end,
        command_log=log,
        request_arrays={"arrive": arrive, "depart": depart, "forwarded": raw["forwarded"],
                         "row_class": row_class, "addr_vectors": vecs},
        threads=raw["threads"],
        threads_note=note,
        wrapped_requests=wrapped,
        residency=residency_of(raw, int(cycles), config),
    )
    if plugins:
        _run_plugins(result, config, plugins)
        if not log_commands:
            result.command_log = None
    return result


def _map_piece(config: DRAMConfig, spec: dict[str, Any], piece: RequestTrace, first: int, overflow: str,
               controllers: bool = False, vectors: bool = True) -> tuple[tuple, int, int]:
    """A piece of a streamed trace (its first request is number ``first``) as the engine takes it,
    ``(addr_vecs, keys, is_write, arrival)`` and, with ``controllers``, each request's controller
    (what a lockstep run keeps), with its number of reads and of wrapped addresses. A linear
    mapper's addresses take one compiled pass (:func:`~sievesim.dram.mapping.map_with_controllers`);
    with ``vectors`` False, a window of keys alone ``(None, keys, is_write, arrival)``, checked
    (:func:`~sievesim.dram.mapping.check_linear`): engines given
    :func:`~sievesim.dram.mapping.linear_key_map` map each request themselves."""
    from .._core.parallel import controllers_of

    is_write, arrival = np.asarray(piece.is_write, dtype=bool), np.asarray(piece.arrival, dtype=np.int64)
    if piece.addr_vectors is None and config.mapper in LINEAR_MAPPERS:
        keys = np.asarray(piece.addresses, dtype=np.int64)
        if not vectors:
            reads, wrapped = check_linear(config, keys, is_write, source=piece.source, overflow=overflow,
                                          first=first)
            return (None, keys, is_write, arrival), reads, wrapped
        vecs, ctrl, reads, wrapped = map_with_controllers(
            config, keys, is_write, spec["counts"][: spec["ctrl_level"] + 1], source=piece.source,
            overflow=overflow, first=first)
        return (vecs, keys, is_write, arrival) + ((ctrl,) if controllers else ()), reads, wrapped
    wrapped = 0
    if piece.addr_vectors is None:
        vecs = map_addresses(config, piece.addresses, source=piece.source, overflow=overflow, first=first)
        keys = np.asarray(piece.addresses, dtype=np.int64)
        if len(piece):
            wrapped = int((keys >= config.capacity_bytes).sum())
    else:
        vecs, keys = _to_vectors(config, piece, overflow)
    window = (vecs, keys, is_write, arrival) + ((controllers_of(spec, vecs),) if controllers else ())
    return window, int((~is_write).sum()), wrapped


def _counted_window(config: DRAMConfig, piece: Any, overflow: str) -> tuple[tuple, int, int] | None:
    """_map_piece's window of keys alone (``vectors`` False) for a piece parsed during start-up
    (sievesim._core._prefetch) whose largest address lies below the capacity, from the counts its
    reader made: nothing to check (the parser gives no address below 0), nothing wrapped. None
    for any other piece (and for an ``overflow`` that _map_piece refuses)."""
    from .._core._prefetch import PrefetchedPiece

    if not isinstance(piece, PrefetchedPiece) or piece.max_addr >= config.capacity_bytes \
            or overflow not in ADDRESS_OVERFLOW:
        return None
    window = (None, np.asarray(piece.addrs), np.asarray(piece.is_write), _zero_arrivals(piece.lines))
    return window, piece.lines - piece.writes, 0


class _Windows:
    """The pieces of a streamed trace, mapped and checked as the engine takes them: an iterator of
    ``(addr_vecs, keys, is_write, arrival)`` (with ``vectors`` False, ``addr_vecs`` None where
    :func:`_map_piece` gives windows of keys alone, for an engine that maps them itself); counts
    requests, reads and wrapped addresses."""

    def __init__(self, config: DRAMConfig, spec: dict[str, Any], pieces: Iterable[RequestTrace],
                 overflow: str, vectors: bool = True) -> None:
        self.config, self.spec, self.pieces, self.overflow = config, spec, pieces, overflow
        self.vectors = vectors
        self.n = self.reads = self.wrapped = 0

    def __iter__(self):
        last_arrival = 0
        for piece in self.pieces:
            window, reads, wrapped = _map_piece(self.config, self.spec, piece, self.n, self.overflow,
                                                vectors=self.vectors)
            arrival = window[3]
            if len(arrival) and arrival[0] < last_arrival:
                raise TraceError(f"{piece.source}: arrival[{self.n}] = {int(arrival[0])}: expected non-decreasing "
                                 f"arrival cycles (previous {last_arrival})")
            if len(arrival):
                last_arrival = int(arrival[-1])
            self.n += len(arrival)
            self.reads += reads
            self.wrapped += wrapped
            yield window


_PENDING = object()


class _SharedWindows:
    """One reading of a LoadStoreTrace file for every run of a split (``runs(k)`` is run k's
    iterator of windows, the same windows for every run; each window also carries its requests'
    controllers, so that the runs do not each work them out; with ``vectors`` False, windows of
    the addresses alone, checked and counted, for runs that map their own requests:
    :func:`_map_piece`, :func:`_counted_window`).

    A run that needs a piece nobody has read yet reads it and maps it; one that finds it being
    mapped by another maps the next unread piece meanwhile instead of waiting, so runs that arrive
    together (a lockstep) map different pieces at the same time, and a run ahead (a held split)
    maps what the other then finds ready. A piece is dropped once every run has taken it, and no
    run gets more than ``MAX_AHEAD`` pieces ahead of the slowest (memory stays flat). Errors
    (unreadable file, malformed line, address out of range) reach every run that takes the piece.
    The pieces' arrivals are all 0 (LoadStoreTrace), so there is no order to check across them."""

    MAX_AHEAD = 4

    def __init__(self, config: DRAMConfig, chunks, overflow: str, runs: int,
                 spec: dict[str, Any] | None = None, vectors: bool = True) -> None:
        import threading

        self.config, self.chunks, self.overflow, self.vectors = config, chunks, overflow, vectors
        self.n = self.reads = self.wrapped = 0
        self._blocks = chunks.blocks()
        self._cond = threading.Condition()
        self._read = 0              # pieces read from the file so far
        self._eof = False
        self._state: dict[int, Any] = {}     # piece -> _PENDING, its window, or the exception it raised
        self._left: dict[int, set] = {}      # piece -> the runs that have not taken it
        self._next: list[int | None] = [0] * runs   # per run: the piece it takes next (None: stopped)
        self._ahead: dict[int, Any] = {}     # piece -> the prefetched piece it came from (see _take)
        self.spec = config.compile() if spec is None else spec     # (the caller's, compiled once)

    def runs(self, k: int):
        try:
            i = 0
            while True:
                window = self._take(k, i)
                if window is None:
                    return
                yield window
                i += 1
        finally:
            with self._cond:
                self._next[k] = None            # no run waits for this one any more
                for j in [j for j, left in self._left.items() if k in left]:
                    self._drop(j, k)
                self._cond.notify_all()

    def _drop(self, j: int, k: int) -> None:
        self._left[j].discard(k)
        if not self._left[j]:
            del self._left[j], self._state[j]

    def _read_next(self) -> tuple[int, Any]:
        """Under the lock: read the next piece, ``(index, (bytes, first_line, newlines))``; at the end of the
        file ``(index, None)``; an error reading it is kept as the piece's outcome."""
        j = self._read
        try:
            got = next(self._blocks, None)
        except Exception as exc:        # noqa: BLE001 - handed to every run that takes this piece
            self._state[j], self._left[j] = exc, {k for k, p in enumerate(self._next) if p is not None}
            self._read, self._eof = j + 1, True
            return j, None
        if got is None:
            self._eof = True
            return j, None
        self._state[j], self._left[j] = _PENDING, {k for k, p in enumerate(self._next) if p is not None}
        self._read = j + 1
        if got[2] < 0:                  # parsed during start-up (LoadStoreChunks.blocks)
            self._ahead[j] = got[0]
        return j, got

    def _map(self, j: int, got: tuple[bytes, int, int]) -> None:
        """Map piece ``j`` (the lock released), then publish it."""
        self._cond.release()
        try:
            first_line = got[1]
            try:
                outcome = None if self.vectors else _counted_window(self.config, got[0], self.overflow)
                if outcome is None:
                    outcome = _map_piece(self.config, self.spec, self.chunks.parse(*got), first_line,
                                         self.overflow, controllers=True, vectors=self.vectors)
            except Exception as exc:    # noqa: BLE001 - handed to every run that takes this piece
                outcome = exc
        finally:
            self._cond.acquire()
        if isinstance(outcome, Exception):
            self._state[j] = outcome
        else:
            window, reads, wrapped = outcome
            self._state[j] = window
            self.n += len(window[3])
            self.reads += reads
            self.wrapped += wrapped
        self._cond.notify_all()

    def _take(self, k: int, i: int):
        with self._cond:
            self._next[k] = i
            while True:
                slowest = min(p for p in self._next if p is not None)
                if i < self._read and self._state[i] is not _PENDING:
                    break
                if i - slowest >= self.MAX_AHEAD:
                    self._cond.wait()       # far ahead of the slowest run: let it catch up
                    continue
                if not self._eof and self._read - slowest < self.MAX_AHEAD:
                    # piece i unread (then this reads it) or being mapped by another run (then this
                    # maps the next one meanwhile)
                    j, got = self._read_next()
                    if got is not None:
                        self._map(j, got)
                    continue
                if i >= self._read:
                    return None             # the end of the file
                self._cond.wait()           # piece i is being mapped by another run
            outcome = self._state[i]
            self._drop(i, k)
            if i not in self._state and i in self._ahead:
                # every run took it: the prefetched piece's memory goes with the window (a run
                # that stops early releases nothing: the split may run again and reuse it)
                self.chunks.release(self._ahead.pop(i))
            self._next[k] = i + 1
            self._cond.notify_all()
        if isinstance(outcome, Exception):
            raise outcome
        return outcome


def simulate_stream(config: DRAMConfig, pieces: Iterable[RequestTrace] | Callable[[], Iterable[RequestTrace]], *,
                    skip_idle: bool = True, address_overflow: str = "error", threads: int | None = 1) -> DRAMResult:
    """Run a trace given as consecutive pieces (e.g. :func:`sievesim.dram.traces.iter_loadstore_chunks`)
    through ``config`` on engines that take them one at a time, so memory does not grow with the
    trace: each piece is mapped, handed to the engine and dropped once the frontend has offered it.
    The result equals :func:`simulate` on the whole trace, bit for bit, except that it has no
    per-request arrays (``request_arrays`` is None) (tests/test_streaming.py; the counters are kept
    by the engine: ``Engine(stream=True)``). Not for a command log or plugins.

    ``threads`` (None: as :func:`simulate` picks): with more than one, ``pieces`` must give the
    same pieces afresh each time: a callable (``lambda: iter_loadstore_chunks(path)``), each run of
    the split (``sievesim._core.parallel.run_stream_split``) then reading its own, or a
    :class:`~sievesim.dram.traces.LoadStoreChunks`, the runs then sharing one reading of the file
    (each piece parsed and mapped once, by whichever run needs it first). A trace that fills a
    queue runs again as :func:`simulate` runs it (in lockstep, streamed too; a contended lockstep
    on one streaming engine), re-reading the pieces.
    """
    from .._core._engine import Engine
    from .._core.parallel import _n_controllers, available_threads, run_stream_split
    from .traces import LoadStoreChunks

    if tuple(getattr(config, "plugins", ())):
        raise TraceError(f"{config.name}: plugins need the whole command log: expected no plugins when streaming")
    spec = config.compile()
    asked = threads
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 1):
        raise field_error("threads", threads, "an integer >= 1")
    shared = isinstance(pieces, LoadStoreChunks)
    afresh = (lambda: iter(pieces)) if shared else pieces
    if not callable(afresh):
        if threads not in (None, 1):
            raise TypeError("simulate_stream: threads > 1 need pieces as a callable that gives them afresh")
        threads, asked = 1, (1 if threads is None else asked)
    head, got = [], 0
    if threads != 1:
        for vecs, *_ in _Windows(config, spec, afresh(), address_overflow):   # the first requests: balance, size
            head.append(vecs)
            got += len(vecs)
            if got >= AUTO_THREADS_MIN_REQUESTS:
                break
        if threads is None:
            threads = available_threads() if got >= AUTO_THREADS_MIN_REQUESTS else 1
            asked = threads
    # a file's pieces (addresses, never vectors) with a linear mapper: windows of the addresses
    # alone, each engine mapping its own requests and every request's controller as it takes them
    # (mapping each request once, for one engine or for all runs of a split, cost more: vectors
    # written, then read back)
    key_map = linear_key_map(config) if shared and config.mapper in LINEAR_MAPPERS else None
    t0 = time.perf_counter()
    speculation = "none"
    if threads > 1 and got and skip_idle and config.num_controllers > 1:
        opened: list[Any] = []
        runs = min(int(threads), _n_controllers(spec))

        def split(lockstep: bool) -> dict:
            """One attempt of the split, reading the trace from its start."""
            opened.clear()
            if shared:
                reading = _SharedWindows(config, pieces, address_overflow, runs, spec, vectors=key_map is None)
                opened.append(reading)
                return run_stream_split(spec, reading.runs, owner, int(threads), lockstep=lockstep, key_map=key_map)

            def open_windows(k: int):
                w = _Windows(config, spec, afresh(), address_overflow)
                opened.append(w)
                return iter(w)
            return run_stream_split(spec, open_windows, owner, int(threads), lockstep=lockstep)

        owner = np.concatenate(head)
        del head
        raw = split(False)
        if raw["speculation"] == "refused":
            raw = split(True)       # a queue filled: the split again from the start, in lockstep
        if "totals" in raw:
            w = opened[0]
            return _stream_result(config, raw, raw["cycles"], raw["totals"], w, time.perf_counter() - t0,
                                  _threads_note(config, raw, int(asked), w.n, skip_idle))
        opened.clear()      # the stopped runs' readers hold a block and a window each
        speculation = raw["speculation"]
    windows = _Windows(config, spec, afresh() if callable(afresh) else pieces, address_overflow,
                       vectors=key_map is None)
    n_lv = spec["addr_len"]
    empty = (np.zeros((0, n_lv), np.int32), np.zeros(0, np.int64), np.zeros(0, bool), np.zeros(0, np.int64))
    engine = Engine(spec, *empty, False, skip_idle, stream=True)
    if key_map is not None:
        engine.map_keys(*key_map)
        empty = (None,) + empty[1:]
    it = iter(windows)
    window, raw = next(it, None), None
    while window is not None or raw is None:
        following = next(it, None) if window is not None else None
        engine.feed(*(empty if window is None else window), following is None)
        window = None
        raw = engine.run()
        window = following
    cycles = raw["clk"] if config.end == "accepted" else None
    if cycles is None:
        cycles = max(raw["clk"], engine.stream_totals(raw["clk"])["max_depart"])
    raw = raw | {"threads": 1, "speculation": speculation}
    return _stream_result(config, raw, cycles, engine.stream_totals(cycles), windows, time.perf_counter() - t0,
                          _threads_note(config, raw, int(asked), windows.n, skip_idle))


def _stream_result(config: DRAMConfig, raw: dict, cycles: int, tot: dict, w: _Windows, wall: float,
                   note: str) -> DRAMResult:
    time_ns = cycles * config.tck_ns
    return DRAMResult(
        config=config.name,
        requests=w.n,
        cycles=int(cycles),
        time_ns=float(time_ns),
        reads=w.reads,
        writes=w.n - w.reads,
        row_hits=tot["row_hits"],
        row_misses=tot["row_misses"],
        row_conflicts=tot["row_conflicts"],
        avg_read_latency_cycles=tot["read_latency_sum"] / tot["read_served"] if tot["read_served"] else 0.0,
        bandwidth_gbps=float(tot["served"] * config.tx_bytes / time_ns) if time_ns else 0.0,
        forwarded_reads=tot["forwarded"],
        commands=raw["n_commands"],
        refreshes=raw["n_refresh"],
        wall_s=wall,
        end=config.end,
        threads=int(raw["threads"]),
        threads_note=note,
        wrapped_requests=w.wrapped,
        residency=residency_of(raw, int(cycles), config),
    )


def _threads_note(config: DRAMConfig, raw: dict, threads: int, n: int, skip_idle: bool) -> str:
    """Why a run ran on fewer threads than asked for ("" when it did not)."""
    if int(raw["threads"]) >= threads:
        return ""
    if raw.get("speculation") == "contended":
        why = ("the threads waited for each other more than they worked (not every thread had a core: "
               "another process is busy), so the run fell back to one thread (the result is the same)")
    elif n == 0:
        why = "the trace is empty"
    elif not skip_idle:
        why = "skip_idle=False runs on one thread"
    else:
        why = f"the configuration has {config.num_controllers} controllers (at most one thread each)"
    return f"asked for {threads} threads, ran on {int(raw['threads'])}: {why}"


def _run_plugins(result: DRAMResult, config: DRAMConfig, plugins: tuple) -> None:
    """Ramulator 2.0 controller plugins: TraceRecorder writes the command log to its path,
    CommandCounter counts the commands it names into the result and writes ``NAME, count`` lines."""
    log = result.command_log
    assert log is not None
    names = list(log["names"])
    issued = np.bincount(np.asarray(log["command"], dtype=np.int64), minlength=len(names))
    for plugin in plugins:
        try:
            if plugin.impl == "TraceRecorder":
                write_command_log(result, config, plugin.path)
            elif plugin.impl == "CommandCounter":
                counts = {n: int(issued[names.index(n)]) if n in names else 0 for n in plugin.commands_to_count}
                result.command_counts = {**(result.command_counts or {}), **counts}
                from .._outputs import open_output
                with open_output(plugin.path, "command counts", text=True) as fh:
                    fh.write("".join(f"{n}, {c}\n" for n, c in counts.items()))
        except OSError as exc:
            raise field_error(f"{plugin.impl}.path", plugin.path, f"a writable file ({exc.strerror})",
                              source=config.source) from None


def write_command_log(result: DRAMResult, config: DRAMConfig, path: str | pathlib.Path) -> None:
    """Write the command log as CSV: a ``# timings: {...}`` line, a header, one row per command."""
    if result.command_log is None:
        raise ValueError("run simulate(..., log_commands=True) first")
    log = result.command_log
    levels = config.standard.levels
    cols = np.full((len(log["cycle"]), len(LOG_COLUMNS)), -1, dtype=np.int64)
    for lv, name in enumerate(levels):
        cols[:, LOG_COLUMNS.index(_LEVEL_TO_COLUMN[name])] = log["addr"][:, lv]
    from .._outputs import open_output

    names = np.array(log["names"])[log["command"].astype(np.int64)]
    with open_output(path, "command log", text=True) as fh:
        fh.write("# timings: " + json.dumps(config.timing_values()) + "\n")
        fh.write("# config: " + json.dumps({"name": config.name, "standard": config.standard.name,
                                             "org": dict(config.org), "mapper": config.mapper,
                                             "row_policy": config.row_policy}) + "\n")
        fh.write("cycle," + ",".join(LOG_COLUMNS) + ",command\n")
        rows = np.column_stack([log["cycle"], cols]).astype(str)
        lines = [",".join(r) + "," + c for r, c in zip(rows, names)]
        if lines:
            fh.write("\n".join(lines) + "\n")
