"""Run a request trace on the engine and summarise what happened."""
from __future__ import annotations

import json
import pathlib
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ..errors import TraceError, field_error
from .spec import DRAMConfig, check_engine_memory
from .mapping import map_addresses
from .traces import RequestTrace

__all__ = ["DRAMResult", "simulate", "write_command_log", "LOG_COLUMNS"]

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

    def to_dict(self) -> dict[str, Any]:
        """Scalars (what ``--json`` prints), plus ``command_counts`` when a CommandCounter asked for them."""
        out = {k: v for k, v in asdict(self).items()
               if k not in ("command_log", "request_arrays", "command_counts", "threads_note")}
        if self.threads_note:
            out["threads_note"] = self.threads_note
        if self.command_counts is not None:
            out["command_counts"] = dict(self.command_counts)
        return out


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
    one-thread result, bit for bit, and a trace that fills a queue falls back to one thread
    (docs/dram.md, "Threads"; ``threads_note`` says so). ``skip_idle=False`` visits every
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
    note = ""
    if int(raw["threads"]) < int(threads):
        if raw.get("speculation") == "refused":
            why = ("a queue filled up and the frontend offers at most one request per memory cycle, so the "
                   "run fell back to one thread (the result is the same)")
        elif n == 0:
            why = "the trace is empty"
        elif not skip_idle:
            why = "skip_idle=False runs on one thread"
        else:
            why = f"the configuration has {config.num_controllers} controllers (at most one thread each)"
        note = f"asked for {int(threads)} threads, ran on {int(raw['threads'])}: {why}"
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
    )
    if plugins:
        _run_plugins(result, config, plugins)
        if not log_commands:
            result.command_log = None
    return result


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
