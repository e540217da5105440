"""Engine throughput (asv-style). ``python benchmarks/run.py engine`` runs them without asv.

track_requests_per_second / track_cycles_per_second: simulated requests and memory cycles per wall
second on 200k-request stream / random / hot-row traces (clock ratio 8, hbm3e-8000 and the
Ramulator 2.0 mirror), on one thread. track_speedup_vs_python_reference: wall time of the
pure-Python reference controller over the engine's, on the same 2000-request trace.
EngineThreads: the same trace split between threads (docs/dram.md, "Threads").
EngineLockstep: two engines in lockstep against one thread, whatever run_requests would choose
(the measurement behind running a split whose queue fills in lockstep at every clock ratio).
"""
import time

import numpy as np

from sievesim._core._engine import Engine, lockstep_exchange
from sievesim._core.parallel import _owners, _run_concurrently, _split_controllers, _split_engines
from sievesim.dram.config import get_config
from sievesim.dram.engine import _to_vectors
from sievesim.dram.engine import simulate
from sievesim.dram.reference import reference_cycles
from sievesim.dram.synthetic import make_trace


class EngineThroughput:
    params = (["hbm3e-8000", "ramulator2-hbm3"], ["stream", "random", "hotrow"])
    param_names = ["config", "trace"]
    repeat = 3
    timeout = 300

    def setup(self, config, trace):
        self.config = get_config(config).replace(clock_ratio=8)
        self.trace = make_trace(trace, 200_000, self.config, seed=1)

    def time_simulate(self, config, trace):
        simulate(self.config, self.trace, threads=1)

    def track_requests_per_second(self, config, trace):
        res = simulate(self.config, self.trace, threads=1)
        return len(self.trace) / res.wall_s

    track_requests_per_second.unit = "requests/s"

    def track_cycles_per_second(self, config, trace):
        res = simulate(self.config, self.trace, threads=1)
        return res.cycles / res.wall_s

    track_cycles_per_second.unit = "cycles/s"

    def peakmem_simulate(self, config, trace):
        simulate(self.config, self.trace, threads=1)


class EngineThreads:
    """ramulator2-hbm3, random trace. Clock ratio 1: the queues never fill, so the split holds;
    clock ratio 8: they fill, and the split runs in lockstep (docs/dram.md, "Threads")."""
    params = ([1_000, 100_000, 1_000_000], [1, 2], [1, 8])
    param_names = ["requests", "threads", "clock_ratio"]
    timeout = 600

    def setup(self, requests, threads, clock_ratio):
        self.config = get_config("ramulator2-hbm3").replace(clock_ratio=clock_ratio)
        self.trace = make_trace("random", requests, self.config, seed=1)

    def track_wall_ms_best_of_5(self, requests, threads, clock_ratio):
        return 1e3 * min(simulate(self.config, self.trace, threads=threads).wall_s for _ in range(5))

    track_wall_ms_best_of_5.unit = "ms"

    def track_speedup_over_one_thread(self, requests, threads, clock_ratio):
        """Best of 5 on one thread over best of 5 on ``threads``, measured in one call."""
        one = min(simulate(self.config, self.trace, threads=1).wall_s for _ in range(5))
        many = min(simulate(self.config, self.trace, threads=threads).wall_s for _ in range(5))
        return one / many

    track_speedup_over_one_thread.unit = "x"


class EngineLockstep:
    """hbm3e-8000 (32 controllers, refresh), 300 000 requests: the engine loop alone, best of 5,
    one engine against two in lockstep (set-up outside the timing; the lockstep never gives up
    for contention here, so it always runs the whole trace)."""
    params = (["random", "hotrow"], [1, 8])
    param_names = ["trace", "clock_ratio"]
    timeout = 600

    def setup(self, trace, clock_ratio):
        self.config = get_config("hbm3e-8000").replace(clock_ratio=clock_ratio)
        t = make_trace(trace, 300_000, self.config, seed=1)
        vecs, keys = _to_vectors(self.config, t)
        self.args = (self.config.compile(), vecs, keys, t.is_write, t.arrival)

    def _one(self):
        engine = Engine(*self.args)
        t0 = time.perf_counter()
        engine.run()
        return time.perf_counter() - t0

    def _lockstep(self):
        spec, vecs = self.args[0], self.args[1]
        owns = _split_controllers(spec, vecs, 2)
        engines = _split_engines(*self.args, owns, np.zeros(1, dtype=np.int32),
                                 exchange=lockstep_exchange(_owners(owns), len(owns)), grace_ns=None)
        t0 = time.perf_counter()
        _run_concurrently(engines)
        return time.perf_counter() - t0

    def track_speedup_lockstep_over_one_thread(self, trace, clock_ratio):
        one = min(self._one() for _ in range(5))
        two = min(self._lockstep() for _ in range(5))
        return one / two

    track_speedup_lockstep_over_one_thread.unit = "x"


class StreamedSplitParseShare:
    """What reading and parsing the file cost a streamed split, whole: ``simulate_stream`` of a
    1 000 000-request random LoadStoreTrace (30 % writes, written to a temporary file) on its
    default threads, against the same run handed pieces that were read and parsed beforehand
    (mapping, controllers and the runs unchanged); ``track_share_of_read_and_parse`` is the
    time saved over the whole run's, medians of 5 alternated pairs. It bounds what reading and
    parsing elsewhere (the idle core while a process starts) could save."""
    params = ([1, 8],)
    param_names = ["clock_ratio"]
    timeout = 600

    def setup(self, clock_ratio):
        import tempfile
        from sievesim.dram.traces import LoadStoreChunks, write_loadstore_trace
        self.config = get_config("ramulator2-hbm3").replace(clock_ratio=clock_ratio)
        t = make_trace("random", 1_000_000, self.config, seed=1, write_fraction=0.3)
        self.path = tempfile.NamedTemporaryFile(suffix=".trace", delete=False).name
        write_loadstore_trace(self.path, t.addresses, t.is_write)

        class Parsed(LoadStoreChunks):
            """The file's pieces, read and parsed once, here."""

            def __init__(self, path):
                super().__init__(path)
                fresh = LoadStoreChunks(path)
                self.pieces = [(bytes(b[0]), b[1], b[2]) for b in fresh.blocks()]
                self.parsed = {b[1]: fresh.parse(*b) for b in self.pieces}

            def blocks(self):
                yield from self.pieces

            def parse(self, piece, first_line, newlines=-1):
                return self.parsed[first_line]

        self.parsed = Parsed(self.path)

    def track_share_of_read_and_parse(self, clock_ratio):
        import statistics
        from sievesim.dram.engine import simulate_stream
        from sievesim.dram.traces import LoadStoreChunks
        whole, saved = [], []
        for _ in range(5):
            t0 = time.perf_counter()
            simulate_stream(self.config, LoadStoreChunks(self.path), threads=None)
            t1 = time.perf_counter()
            simulate_stream(self.config, self.parsed, threads=None)
            t2 = time.perf_counter()
            whole.append(t1 - t0)
            saved.append((t1 - t0) - (t2 - t1))
        return 100.0 * statistics.median(saved) / statistics.median(whole)

    track_share_of_read_and_parse.unit = "%"

    def teardown(self, clock_ratio):
        import os
        os.unlink(self.path)


class StreamedSplitFaults:
    """The page faults of a streamed split, the first in its process (as in ``sievesim dram
    run``): ``simulate_stream`` of a 1 000 000-request random LoadStoreTrace (30 % writes) from a
    ``LoadStoreChunks`` on two threads, in a fresh interpreter; ``track_minor_faults`` is the
    process's minor faults during the call, median of 5 processes (a first touch of fresh memory
    costs one per 4 KiB: each piece's mapped arrays, its arrivals, the read buffers),
    ``track_seconds`` its time;
    ``track_minor_faults_fresh_arrivals``: the same with fresh zero arrivals for each piece (as
    before the pieces shared one read-only array of them), for the difference in one run.
    (Run with OPENBLAS_NUM_THREADS=1, as ``run.py`` sets it: OpenBLAS threads spinning in this
    process after the setup's numpy calls would make the child's lockstep give up.)"""
    params = ([1, 8],)
    param_names = ["clock_ratio"]
    timeout = 600
    _CHILD = """
import resource, sys, time
import numpy as np
import sievesim.dram.traces as traces
from sievesim.dram.config import get_config
from sievesim.dram.engine import simulate_stream
from sievesim.dram.traces import LoadStoreChunks
if sys.argv[3] == "fresh":
    traces._zero_arrivals = lambda n: np.zeros(n, dtype=np.int64)
config = get_config("ramulator2-hbm3").replace(clock_ratio=int(sys.argv[2]))
before, t0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.perf_counter()
result = simulate_stream(config, LoadStoreChunks(sys.argv[1]), threads=2)
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before, time.perf_counter() - t0, result.threads, repr(result.threads_note))
"""

    def setup(self, clock_ratio):
        import tempfile
        from sievesim.dram.traces import write_loadstore_trace
        config = get_config("ramulator2-hbm3").replace(clock_ratio=clock_ratio)
        t = make_trace("random", 1_000_000, config, seed=1, write_fraction=0.3)
        self.path = tempfile.NamedTemporaryFile(suffix=".trace", delete=False).name
        write_loadstore_trace(self.path, t.addresses, t.is_write)

    def _child(self, clock_ratio, arrivals: str = "shared") -> tuple[float, float]:
        """Medians of 5 fresh processes: (minor faults, seconds)."""
        import statistics
        import subprocess
        import sys
        faults, seconds = [], []
        for _ in range(5):
            out = subprocess.run([sys.executable, "-c", self._CHILD, self.path, str(clock_ratio), arrivals],
                                 check=True, capture_output=True, text=True).stdout.split()
            assert out[2] == "2", out
            faults.append(int(out[0]))
            seconds.append(float(out[1]))
        return statistics.median(faults), statistics.median(seconds)

    def track_minor_faults(self, clock_ratio):
        return self._child(clock_ratio)[0]

    def track_minor_faults_fresh_arrivals(self, clock_ratio):
        return self._child(clock_ratio, "fresh")[0]

    def track_seconds(self, clock_ratio):
        return self._child(clock_ratio)[1]

    track_minor_faults.unit = track_minor_faults_fresh_arrivals.unit = "faults"
    track_seconds.unit = "s"

    def teardown(self, clock_ratio):
        import os
        os.unlink(self.path)


class EngineVsPythonReference:
    params = (["hbm3-6400", "ramulator2-hbm3"],)
    param_names = ["config"]
    timeout = 300

    def setup(self, config):
        self.config = get_config(config).replace(clock_ratio=8, end="completed")
        self.trace = make_trace("random", 2000, self.config, seed=1)

    def track_speedup_vs_python_reference(self, config):
        t0 = time.perf_counter()
        ref = reference_cycles(self.config, self.trace)
        t_ref = time.perf_counter() - t0
        best = min(simulate(self.config, self.trace, threads=1).wall_s for _ in range(5))
        assert simulate(self.config, self.trace, threads=1).cycles == ref
        return t_ref / best

    track_speedup_vs_python_reference.unit = "x"


class TraceParsing:
    """Reading a 1 000 000-line LoadStoreTrace (``time_read_loadstore_1m``, seconds); parsing one
    1 MiB piece of it (``track_parse_mb_per_second``, best of 20); counting its newlines by
    ``count_newlines`` against ``bytes.count`` (``track_count_newlines_over_bytes_count``, best of
    20 each, in one call); mapping its requests in one compiled pass against the separate steps
    (``track_fused_mapping_over_separate_steps``)."""

    timeout = 300

    def setup(self):
        import tempfile
        from sievesim.dram.traces import write_loadstore_trace
        cfg = get_config("ramulator2-hbm3")
        t = make_trace("random", 1_000_000, cfg, seed=1)
        self.path = tempfile.NamedTemporaryFile(suffix=".trace", delete=False).name
        write_loadstore_trace(self.path, t.addresses, t.is_write)

    def time_read_loadstore_1m(self):
        from sievesim.dram.traces import read_loadstore_trace
        read_loadstore_trace(self.path)

    def _piece(self) -> bytes:
        with open(self.path, "rb") as fh:
            data = fh.read(1 << 20)
        return data[:data.rfind(b"\n") + 1]

    @staticmethod
    def _best(f, data, n=20) -> float:
        best = float("inf")
        for _ in range(n):
            t0 = time.perf_counter()
            f(data)
            best = min(best, time.perf_counter() - t0)
        return best

    def track_parse_mb_per_second(self):
        from sievesim._core._traceparse import parse_loadstore
        data = self._piece()
        return len(data) / 1e6 / self._best(parse_loadstore, data)

    track_parse_mb_per_second.unit = "MB/s"

    def track_count_newlines_over_bytes_count(self):
        from sievesim._core._traceparse import count_newlines
        data = self._piece()
        return self._best(lambda d: d.count(b"\n"), data) / self._best(count_newlines, data)

    track_count_newlines_over_bytes_count.unit = "x"

    def track_fused_mapping_over_separate_steps(self):
        """How many times faster ``map_with_controllers`` maps the piece's requests (vectors,
        controllers, reads, wrapped addresses: what a streamed split takes per piece) than
        ``map_addresses``, ``controllers_of`` and numpy's counts do (best of 20 each)."""
        import numpy as np
        from sievesim._core._traceparse import parse_loadstore
        from sievesim._core.parallel import controllers_of
        from sievesim.dram.mapping import map_addresses, map_with_controllers
        cfg = get_config("ramulator2-hbm3")
        spec = cfg.compile()
        is_write, addrs, _ = parse_loadstore(self._piece())
        counts = spec["counts"][: spec["ctrl_level"] + 1]

        def separate(a):
            vecs = map_addresses(cfg, a)
            return vecs, controllers_of(spec, vecs), int((~is_write).sum()), int((a >= cfg.capacity_bytes).sum())

        fused = self._best(lambda a: map_with_controllers(cfg, a, is_write, counts), addrs)
        return self._best(separate, addrs) / fused

    track_fused_mapping_over_separate_steps.unit = "x"

    def teardown(self):
        import os
        os.unlink(self.path)


class EngineSetup:
    """Setting up a run of 1 000 000 requests (``time_engine_setup_1m``, seconds): the engine
    allocates only per-request outputs; requests are copied into buffer-bounded slots on arrival."""

    timeout = 300

    def setup(self):
        from sievesim.dram.engine import _to_vectors
        cfg = get_config("ramulator2-hbm3")
        t = make_trace("random", 1_000_000, cfg, seed=1)
        self.vecs, self.keys = _to_vectors(cfg, t)
        self.trace = t
        self.spec = cfg.compile()

    def time_engine_setup_1m(self):
        from sievesim._core import Engine
        Engine(self.spec, self.vecs, self.keys, self.trace.is_write, self.trace.arrival)
