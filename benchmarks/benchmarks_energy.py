"""What counting energy costs (docs/energy.md, "Overhead").

The engine's only energy work is the bank-state residency count, updated on the commands that
open or close a pseudo-channel's rows (always on; its cost is below the noise of
``benchmarks_engine.py``'s throughput, docs/energy.md "Overhead"); energy is priced afterwards
from the counts it reports (``sievesim.dram.energy``). These benchmarks measure the whole call
with and without pricing::

    python benchmarks/run.py energy track_
"""
from __future__ import annotations

import statistics
import time

from sievesim.dram.config import get_config
from sievesim.dram.energy import dram_energy
from sievesim.dram.engine import simulate
from sievesim.dram.synthetic import parse_synthetic

REPEAT = 7


def _median_s(fn, repeat: int = REPEAT) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


class DramEnergyOverhead:
    """``dram run`` of 200 000 random requests on hbm3e-8000: simulate, then simulate + energy."""

    def setup(self) -> None:
        self.config = get_config("hbm3e-8000")
        self.trace = parse_synthetic("synthetic:random:200000", self.config, seed=1)

    def _run(self, energy: bool) -> None:
        res = simulate(self.config, self.trace, threads=1)
        if energy:
            dram_energy(res, self.config)

    def time_simulate(self) -> None:
        self._run(False)

    def time_simulate_with_energy(self) -> None:
        self._run(True)

    def track_overhead_percent(self) -> float:
        """(with energy - without) / without, in percent (medians of 7 interleaved runs)."""
        with_e, without = [], []
        for _ in range(REPEAT):
            without.append(_median_s(lambda: self._run(False), 1))
            with_e.append(_median_s(lambda: self._run(True), 1))
        base = statistics.median(without)
        return 100.0 * (statistics.median(with_e) - base) / base


class StepEnergyOverhead:
    """One decode step of Qwen3-30B-A3B, B = 64, Sieve, once every PIM program is cached: the step
    with and without its energy (every node priced, the static power added)."""

    def setup(self) -> None:
        from sievesim.system import StepSimulator
        self.sims = {e: StepSimulator("qwen3-30b-a3b", "b200", batch=64, policy="sieve", energy=e)
                     for e in (False, True)}
        for sim in self.sims.values():
            for _ in range(2):
                sim.run_step(grow_contexts=False)

    def track_overhead_percent(self) -> float:
        """(with energy - without) / without, in percent (medians of 7 interleaved steps)."""
        with_e, without = [], []
        for _ in range(REPEAT):
            without.append(_median_s(lambda: self.sims[False].run_step(grow_contexts=False), 1))
            with_e.append(_median_s(lambda: self.sims[True].run_step(grow_contexts=False), 1))
        base = statistics.median(without)
        return 100.0 * (statistics.median(with_e) - base) / base
