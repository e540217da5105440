"""Run the engine once on a synthetic trace, for profilers (callgrind, perf); or time its set-up.

    valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*engine_run_loop*' \\
        python benchmarks/profile_engine.py random 1 200000

counts the instructions of the simulation loop only (trace generation, mapping and set-up are
outside ``run_loop``).

    python benchmarks/profile_engine.py random 1 1000000 --setup

prints the fastest of 7 ``Engine(...)`` constructions instead of running (it uses only what the
engine has offered since the first release, so ``PYTHONPATH=<another build>`` compares builds).
``--time K`` runs the simulation K times on fresh engines and prints the fastest ``run()`` in
seconds, and per request in ns: divided into callgrind's instruction count for the same arguments
(the ``run_loop`` toggle above), it gives the instructions the loop retires per ns.
``--split K`` with ``--time`` builds the K runs of a K-way split (the controllers divided as
``simulate`` divides them among K threads, each run letting the other runs' requests pass) and
runs them one after another on this thread: the sum of their ``run()`` times is the work of the
split, without the threads (the cost of each run walking the whole frontend, and what running one
controller at a time does to the caches and branches; K = 16 on 16 controllers: one at a time).
``--own half`` (or ``none``) runs the engine one thread of a two-way split would run: it simulates
the even-numbered controllers (or none) and lets the other requests pass; with ``--time`` it times
that engine (``none``: what walking the whole frontend alone costs).
Arguments: trace kind (stream, random, hotrow), clock ratio, requests. Configuration:
``ramulator2-hbm3`` with RoBaRaCoCh, as in ``ramulator_side_by_side.py``; ``--config PATH`` (a
name, TOML or Ramulator YAML, run at the given clock ratio) and ``--trace FILE`` (a LoadStoreTrace
file, its first ``requests`` requests; the kind is then ignored) profile the inputs of a
whole-process run, e.g. those ``ramulator_side_by_side.py --whole-process --workdir DIR`` writes.
(The pattern names the compiled loop ``__pyx_f_..._engine_run_loop``; valgrind matches case.)
"""
import sys
import time

import numpy as np

from sievesim._core import Engine
from sievesim._core.parallel import _n_controllers, _split_controllers, _split_engines
from sievesim.dram.config import get_config
from sievesim.dram.engine import _to_vectors
from sievesim.dram.synthetic import make_trace


def main(argv: list[str]) -> int:
    kind, ratio, n = argv[0], int(argv[1]), int(argv[2])
    opts = argv[3:]
    if "--split" in opts and "--time" not in opts:
        print("--split: expected with --time K (it times the runs of a split), got --split alone", file=sys.stderr)
        return 2
    own_name = None
    if "--own" in opts:
        own_name = _option_text(opts, "--own")
        if own_name not in ("half", "none"):
            print(f"--own: expected half or none, got {own_name!r}", file=sys.stderr)
            return 2
        for other in ("--split", "--setup"):
            if other in opts:
                print(f"--own: expected without {other} (it runs one engine of a two-way split), got both",
                      file=sys.stderr)
                return 2
    cfg = get_config(opts[opts.index("--config") + 1] if "--config" in opts else "ramulator2-hbm3")
    cfg = cfg.replace(clock_ratio=ratio)
    if "--trace" in opts:
        from sievesim.dram.traces import RequestTrace, read_loadstore_trace

        whole = read_loadstore_trace(opts[opts.index("--trace") + 1])
        trace = RequestTrace.from_arrays(whole.arrival[:n], whole.addresses[:n], whole.is_write[:n])
        del whole
    else:
        trace = make_trace(kind, n, cfg, seed=1)
    vecs, keys = _to_vectors(cfg, trace)
    spec = cfg.compile()
    own = None
    if own_name is not None:
        n_ctrl = _n_controllers(spec)
        own = {"half": np.arange(n_ctrl) % 2 == 0, "none": np.zeros(n_ctrl, bool)}[own_name]
    if "--setup" in opts:
        best = float("inf")
        for _ in range(7):
            t0 = time.perf_counter()
            engine = Engine(spec, vecs, keys, trace.is_write, trace.arrival)
            best = min(best, time.perf_counter() - t0)
            del engine
        print(f"Engine set-up, {n} requests: {best * 1e3:.1f} ms (fastest of 7)")
        return 0
    if "--time" in opts:
        repeat, given = _count_option(opts, "--time")
        if repeat < 1:
            print(f"--time: expected a number of runs >= 1, got {given!r}", file=sys.stderr)
            return 2
        runs = 1
        if "--split" in opts:
            runs, given = _count_option(opts, "--split")
            n_ctrl = _n_controllers(spec)
            if not 1 <= runs <= n_ctrl:
                print(f"--split: expected a number of runs from 1 to {n_ctrl} (the controllers), got {given!r}",
                      file=sys.stderr)
                return 2
        best = float("inf")
        for _ in range(repeat):
            engines = _fresh_engines(spec, vecs, keys, trace, runs, own)
            t0 = time.perf_counter()
            raws = [engine.run() for engine in engines]
            best = min(best, time.perf_counter() - t0)
            del engines
        if any(r["refused"] for r in raws):
            return _refused("--own" if own is not None else "--split")
        commands = sum(r["n_commands"] for r in raws)
        split = f" in {runs} runs one after another" if runs > 1 else ""
        if own is not None:
            split = f" (--own {own_name})"
        print(f"{kind} clock ratio {ratio}: {n} requests, {max(r['clk'] for r in raws)} cycles, {commands} commands; "
              f"run {best:.4g} s{split} (fastest of {repeat}), {best / n * 1e9:.1f} ns per request")
        return 0
    raw = _fresh_engines(spec, vecs, keys, trace, 1, own)[0].run()
    if raw["refused"]:
        return _refused("--own")
    print(f"{kind} clock ratio {ratio}: {n} requests, {raw['clk']} cycles, {raw['n_commands']} commands")
    return 0


def _refused(option: str) -> int:
    """A run of a split met a full queue and stopped there: say so (exit status 2)."""
    print(f"{option}: a queue filled and the run stopped there, so it is not what a split runs (simulate "
          "runs such a trace in lockstep); use clock ratio 1 or fewer requests", file=sys.stderr)
    return 2


def _count_option(opts: list[str], name: str) -> tuple[int, str]:
    """The count given after option ``name`` (0 where it is not a number) and its text as given."""
    given = _option_text(opts, name)
    return (int(given) if given.isdigit() else 0), given


def _option_text(opts: list[str], name: str) -> str:
    """The text given after option ``name``, or ``'nothing'`` where it is the last argument."""
    at = opts.index(name) + 1
    return opts[at] if at < len(opts) else "nothing"


def _fresh_engines(spec: dict, vecs: np.ndarray, keys: np.ndarray, trace, runs: int,
                   own: np.ndarray | None = None) -> list:
    """Fresh engines: one for the whole run (or for the controllers ``own`` marks), or the ``runs``
    runs of a held split."""
    if own is not None:
        return [Engine(spec, vecs, keys, trace.is_write, trace.arrival, own=own)]
    if runs == 1:
        return [Engine(spec, vecs, keys, trace.is_write, trace.arrival)]
    return _split_engines(spec, vecs, keys, trace.is_write, trace.arrival, _split_controllers(spec, vecs, runs),
                          np.zeros(1, dtype=np.int32))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
