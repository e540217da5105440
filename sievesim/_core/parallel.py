"""Run a request trace on several threads, exactly as on one.

Controllers share nothing but the frontend, which offers requests in trace order: as long as no
controller refuses a request (its queue full), every request is accepted at the same cycle
whatever the other controllers do, and each controller's commands depend on its own requests
only. So the controllers are split between threads (balanced by their numbers of requests), each
thread runs an :class:`Engine` that simulates its own controllers and lets the others' requests
pass, and the results are merged. A refused request holds the frontend back for everyone: the run
that meets one stops the split at once, and the split runs again in lockstep: the runs agree on
how far the frontend gets each memory cycle (each knows it for its own controllers, and promises
about its queues let the others decide most cycles alone). The merged result is the one-thread
result, bit for bit (``tests/test_parallel_engine.py``); it says which way it was computed
(``threads``: how many ran; ``speculation``: ``"none"``, ``"held"``, ``"lockstep"`` or
``"contended"``: the lockstep slept waiting more than it worked, as when another process keeps a
core busy, and the trace ran again on one thread).

Where it pays: long traces (docs/dram.md, "Threads", has the measurements).
Where it does not apply: PIM programs, ``skip_idle=False``. (Timing rows never cross controllers:
the engine refuses a standard whose rows would.)
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Iterator

import numpy as np

from . import available_threads
from ._engine import CONTENTION_GRACE_NS, LOCKSTEP_RING, Engine, lockstep_exchange, new_outputs

__all__ = ["available_threads", "run_requests", "run_stream_split"]


def _n_controllers(spec: dict[str, Any]) -> int:
    return int(np.prod(np.asarray(spec["counts"], dtype=np.int64)[: spec["ctrl_level"] + 1]))


def controllers_of(spec: dict[str, Any], addr_vecs: np.ndarray) -> np.ndarray:
    """Each request's controller, (n,) int32: its address vector's flat index down to the
    controller level (what the engine's ``req_ctrl`` computes one request at a time)."""
    levels = spec["ctrl_level"] + 1
    counts = tuple(int(c) for c in spec["counts"][:levels])
    vecs = np.asarray(addr_vecs)
    if len(vecs) == 0:
        return np.zeros(0, dtype=np.int32)
    return np.ravel_multi_index(tuple(vecs[:, :levels].T.astype(np.int64)), counts).astype(np.int32)


def _split_controllers(spec: dict[str, Any], addr_vecs: np.ndarray, threads: int) -> list[np.ndarray]:
    """Which controllers each thread simulates: balanced by their number of requests (a
    proxy for their work; hot rows can load a few controllers), largest first onto the least
    loaded thread, ties to the lower index. Returns one boolean mask per thread."""
    n_ctrl = _n_controllers(spec)
    load = np.bincount(controllers_of(spec, addr_vecs), minlength=n_ctrl)
    owner = np.empty(n_ctrl, dtype=np.int64)
    total = [0] * threads
    for c in np.argsort(-load, kind="stable"):
        k = min(range(threads), key=lambda t: (total[t], t))
        owner[c] = k
        total[k] += int(load[c])
    return [owner == k for k in range(threads)]


#: How many memory cycles a run of a lockstep may get ahead of the slowest (each run's ring of stops).
LOCKSTEP_RING_CYCLES = LOCKSTEP_RING


def _owners(owns: list[np.ndarray]) -> np.ndarray:
    """The run that simulates each controller, from each run's controllers."""
    return np.argmax(np.stack(owns), axis=0)


def _split_engines(spec: dict[str, Any], addr_vecs: np.ndarray, keys: np.ndarray, is_write: np.ndarray,
                   arrival: np.ndarray, owns: list[np.ndarray], abort: np.ndarray, *, log_commands: bool = False,
                   exchange: np.ndarray | None = None,
                   grace_ns: int | None = CONTENTION_GRACE_NS) -> list[Engine]:
    """The runs of a split, one per controller mask of ``owns``, sharing the ``abort`` flag and
    the per-request outputs (each run writes its own requests' entries); ``exchange``: a
    lockstep's (:func:`lockstep_exchange`), None for a held split."""
    outputs = new_outputs(len(arrival))
    return [Engine(spec, addr_vecs, keys, is_write, arrival, log_commands, True, own=owns[k], abort=abort,
                   outputs=outputs, exchange=exchange, rank=k, grace_ns=grace_ns) for k in range(len(owns))]


def run_requests(spec: dict[str, Any], addr_vecs: np.ndarray, keys: np.ndarray, is_write: np.ndarray,
                 arrival: np.ndarray, *, log_commands: bool = False, skip_idle: bool = True,
                 threads: int = 1, contention_grace_ns: int | None = CONTENTION_GRACE_NS) -> dict[str, Any]:
    """Simulate the requests on ``threads`` threads (at most one per controller); the raw result
    of :meth:`Engine.run`, identical to a one-thread run, plus ``threads`` and ``speculation``.
    ``contention_grace_ns``: a lockstep that has run this long (ns) and slept waiting a third of
    it gives up, and the trace runs on one thread (``None``: never; tests of the lockstep)."""
    if threads < 1:
        raise ValueError(f"threads: {threads}, expected an integer >= 1")
    n_ctrl = _n_controllers(spec)
    threads = min(threads, n_ctrl)
    if threads == 1 or not skip_idle or len(arrival) == 0:
        raw = Engine(spec, addr_vecs, keys, is_write, arrival, log_commands, skip_idle).run()
        return raw | {"threads": 1, "speculation": "none"}
    owns = _split_controllers(spec, addr_vecs, threads)
    abort = np.zeros(1, dtype=np.int32)

    def split(exchange: np.ndarray | None) -> list[Engine]:
        return _split_engines(spec, addr_vecs, keys, is_write, arrival, owns, abort, log_commands=log_commands,
                              exchange=exchange, grace_ns=contention_grace_ns)

    speculation = "held"
    engines = split(None)
    raws = _run_concurrently(engines)
    if any(r["refused"] for r in raws):
        del engines, raws
        # a queue filled: run the split again in lockstep (the runs agree on how far the frontend
        # gets wherever a queue may be full)
        speculation = "lockstep"
        abort[0] = 0
        engines = split(lockstep_exchange(_owners(owns), len(owns), LOCKSTEP_RING_CYCLES))
        raws = _run_concurrently(engines)
        if any(r["contended"] for r in raws):
            # the runs slept waiting for each other more than they worked: their threads do not
            # all have a core (another process is busy); one thread
            del engines, raws
            raw = Engine(spec, addr_vecs, keys, is_write, arrival, log_commands, skip_idle).run()
            return raw | {"threads": 1, "speculation": "contended"}
    steps = 0
    if not spec["end_on_accept"]:
        raws, steps = _drain_together(engines, raws)
    return _merge(spec, raws, log_commands) | {"threads": threads, "speculation": speculation,
                                                 "drain_steps": steps}


def run_stream_split(spec: dict[str, Any], open_windows: Callable[[int], Iterator[tuple]], owner_vecs: np.ndarray,
                     threads: int, lockstep: bool = False,
                     contention_grace_ns: int | None = CONTENTION_GRACE_NS,
                     key_map: tuple | None = None) -> dict[str, Any]:
    """The held split of a streamed trace: run ``k`` reads the trace through its own iterator
    ``open_windows(k)`` of ``(addr_vecs, keys, is_write, arrival)`` windows, the same windows for
    every run (so every run stops for input at the same frontend tick), into a streaming engine
    that simulates its own controllers (balanced by ``owner_vecs``, e.g. the trace's first
    requests); ``lockstep``: the runs go in lockstep (each stops at the same step for the next
    window). Returns the merged raw result with ``cycles`` (the run's last cycle) and ``totals``
    (the runs' :meth:`Engine.stream_totals` summed); when a held split met a full queue, or a
    lockstep was contended, only ``speculation``: ``"refused"`` or ``"contended"`` (the caller
    runs the trace again another way, re-opening it). ``key_map``: ``(order, radix, tx_shift)``
    for windows of keys alone (``addr_vecs`` None; each run works out its requests' controllers
    and its own requests' vectors, see :meth:`Engine.map_keys`)."""
    threads = min(threads, _n_controllers(spec))
    owns = _split_controllers(spec, owner_vecs, threads)
    abort = np.zeros(1, dtype=np.int32)
    n_lv = spec["addr_len"]
    empty = (np.zeros((0, n_lv), np.int32), np.zeros(0, np.int64), np.zeros(0, bool), np.zeros(0, np.int64))
    xch = lockstep_exchange(_owners(owns), len(owns), LOCKSTEP_RING_CYCLES) if lockstep else None
    engines = [Engine(spec, *empty, False, True, own=owns[k], abort=abort, exchange=xch, rank=k,
                      grace_ns=contention_grace_ns, stream=True) for k in range(threads)]
    if key_map is not None:
        for e in engines:
            e.map_keys(*key_map)

    def work(k: int) -> dict:
        it = None
        try:
            it = open_windows(k)
            window, raw = next(it, None), None
            while window is not None or raw is None:
                following = next(it, None) if window is not None else None
                # a window: (addr_vecs, keys, is_write, arrival), and maybe each request's controller
                w = empty if window is None else window
                engines[k].feed(*w[:4], following is None, ctrl=w[4] if len(w) > 4 else None)
                window = None
                raw = engines[k].run()
                if raw["refused"]:
                    break
                window = following
            return raw
        except BaseException:
            abort[0] = 1                # the other runs stop too
            raise
        finally:
            close = getattr(it, "close", None)
            if close is not None:
                close()                 # a reading shared by the runs waits for this one no more

    raws = _on_threads(work, threads)
    if any(r["refused"] for r in raws):
        return {"speculation": "contended" if any(r["contended"] for r in raws) else "refused"}
    steps = 0
    if not spec["end_on_accept"]:
        raws, steps = _drain_together(engines, raws)
    out = _merge(spec, raws, False)
    cycles = out["clk"]
    if not spec["end_on_accept"]:
        cycles = max(cycles, max(e.stream_totals(cycles)["max_depart"] for e in engines))
    each = [e.stream_totals(cycles) for e in engines]
    totals = {key: sum(t[key] for t in each) for key in each[0]}
    totals["max_depart"] = max(t["max_depart"] for t in each)
    return out | {"cycles": cycles, "totals": totals, "threads": threads,
                  "speculation": "lockstep" if lockstep else "held", "drain_steps": steps}


def _on_threads(work: Callable[[int], Any], n: int) -> list:
    """``work(k)`` for k < n, each on its own thread at the same time (k = 0 on this one); an
    exception in any is raised here once all have stopped."""
    results: list[Any] = [None] * n

    def one(k: int) -> None:
        try:
            results[k] = work(k)
        except BaseException as exc:       # re-raised below, in the caller's thread
            results[k] = exc

    workers = [threading.Thread(target=one, args=(k,), daemon=True) for k in range(1, n)]
    for w in workers:
        w.start()
    one(0)
    for w in workers:
        w.join()
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return results


def _run_concurrently(engines: list[Engine], until: int = -1) -> list[dict]:
    """``Engine.run(until)`` of every engine, each on its own thread at the same time (the first
    on this one; runs in lockstep wait for each other); an exception in any is raised here once
    all have stopped (a failing run sets the shared abort flag, so the others stop too)."""
    return _on_threads(lambda k: engines[k].run(until), len(engines))


def _drain_together(engines: list[Engine], raws: list[dict]) -> tuple[list[dict], int]:
    """Each run stopped at the first cycle its own controllers were idle; the whole system stops
    at the first cycle at which all are (a refresh can keep one busy): bring every run to the
    latest stop, then step all together until they are idle at once. Returns the runs' results
    and the number of single-cycle steps."""
    clk = max(r["clk"] for r in raws)
    raws = _run_concurrently(engines, clk)
    steps = 0
    while not all(r["idle"] for r in raws):
        clk += 1
        steps += 1
        raws = [e.run(clk) for e in engines]
    return raws, steps


def _merge(spec: dict[str, Any], raws: list[dict], log_commands: bool) -> dict[str, Any]:
    """One result from the runs of a split (their per-request arrays are already shared)."""
    out = dict(raws[0])                     # "clk": every run stops at the same cycle
    out["last_issue"] = max(r["last_issue"] for r in raws)
    out["n_commands"] = sum(r["n_commands"] for r in raws)
    out["n_refresh"] = sum(r["n_refresh"] for r in raws)
    out["idle"] = all(r["idle"] for r in raws)
    # residency per unit: each run counts only its own controllers' (zeros and -1 elsewhere)
    for key in ("res_open_cycles", "res_ref_cycles"):
        out[key] = np.sum([r[key] for r in raws], axis=0)
    for key in ("res_open_since", "res_ref_end"):
        out[key] = np.max([r[key] for r in raws], axis=0)
    if log_commands:
        clk = np.concatenate([r["log_clk"] for r in raws])
        addr = np.concatenate([r["log_addr"] for r in raws])
        cmd = np.concatenate([r["log_cmd"] for r in raws])
        ctrl_levels = spec["ctrl_level"] + 1
        ctrl = np.ravel_multi_index(tuple(addr[:, :ctrl_levels].T),
                                    tuple(np.asarray(spec["counts"])[:ctrl_levels]))
        # one command per controller per cycle; within a cycle controllers tick in index order
        order = np.lexsort((ctrl, clk))
        out["log_clk"], out["log_addr"], out["log_cmd"] = clk[order], addr[order], cmd[order]
    return out
