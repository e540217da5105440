"""System step benchmarks: wall time of one executed decode step at B = 256 with every PIM node from
the engine: cold (engine caches empty, a new simulator), warm (the same step again: every PIM program
was simulated before) and next (the following step: contexts one token longer, so attention programs
are new).

Target (issue: the system step): Qwen3.5-397B-A17B on 8 GPUs at B = 256 under 1 s cold and 0.2 s warm
on one core. Run with ``python benchmarks/run.py system``.

:class:`ExecuteGraph`: the list scheduler alone on that step's graph (~7,700 nodes, Sieve with PIM/HBM
contention), compiled (``time_execute_compiled``) and the pure-Python reference
(``time_execute_reference``); ``track_compiled_speedup`` measures both in one run and checks that
their schedules are the same bit for bit. ``python benchmarks/run.py ExecuteGraph``.

:class:`RackStep`: rack scale (issue: rack scale), warm: DeepSeek-V3 GPU-only on a GB200 NVL72 rack, 72
GPUs at B = 72 x 64 (32 redundant experts, the fewest that divide), and Qwen3.5 on 8 GPUs at B = 256
under Sieve; targets 0.3 s and 15 ms per step and 2 GB of peak memory on this 2-core machine (not met:
docs/performance-todo.md). ``python benchmarks/run.py RackStep``. :class:`RackScaling`: Sieve on 72
and 144 GPUs (two racks). ``python benchmarks/run.py RackScaling``.
"""
from __future__ import annotations

import time

from sievesim.system import StepSimulator
from sievesim.system.dag import Graph, execute, execute_reference

CASES = {"qwen3.5-397b-a17b": 8, "gpt-oss-120b": 4, "qwen3-30b-a3b": 1}


def _clear_engine_caches() -> None:
    from sievesim.pim import contention, expert

    expert._gemv.cache_clear()
    expert._sequence.cache_clear()
    contention.measure_contention.cache_clear()


class SystemStep:
    """One step of each paper model at B = 256 under Sieve."""

    params = (list(CASES),)
    param_names = ["model"]

    def setup(self, model: str) -> None:
        self.warm = StepSimulator(model, gpus=CASES[model], policy="sieve", batch=256)
        self.warm.run_step(grow_contexts=False)

    def time_step_cold(self, model: str) -> None:
        _clear_engine_caches()
        StepSimulator(model, gpus=CASES[model], policy="sieve", batch=256).run_step()

    def time_step_warm(self, model: str) -> None:
        self.warm.run_step(grow_contexts=False)

    def time_step_next(self, model: str) -> None:
        self.warm.run_step()

    def track_nodes_per_step(self, model: str) -> int:
        return len(self.warm.run_step(grow_contexts=False)["schedule"].graph)


class RackScaling:
    """One warm Sieve step of DeepSeek-V3 on 72 GPUs (one NVL72 rack) and 144 (two racks), 64 requests
    per GPU: how the step's cost grows with the GPUs (``python benchmarks/run.py RackScaling``)."""

    params = ([72, 144],)
    param_names = ["gpus"]
    repeat = 3

    def setup(self, gpus: int) -> None:
        self.sim = StepSimulator("deepseek-v3", "gb200-nvl72", gpus=gpus, nodes=gpus // 72, policy="sieve",
                                 batch=64 * gpus)
        self.sim.run_step(grow_contexts=False)

    def time_step_warm(self, gpus: int) -> None:
        self.sim.run_step(grow_contexts=False)

    def peakmem_step_warm(self, gpus: int) -> None:
        self.sim.run_step(grow_contexts=False)

    def track_nodes_per_step(self, gpus: int) -> int:
        return len(self.sim.run_step(grow_contexts=False)["schedule"].graph)


class LinearExtension:
    """Error of the linear extension that prices experts above ``exact_tokens`` (256) tokens, against
    the engine's own time at 512 tokens, in percent (docs/system.md)."""

    params = (list(CASES),)
    param_names = ["model"]

    def track_error_at_512_tokens_percent(self, model: str) -> float:
        sim = StepSimulator(model, gpus=CASES[model], policy="allexp", batch=CASES[model], contention=False)
        extended = sim.engine_times.expert_s(512, None)
        engine = next(iter(sim.engine_times.engines.values())).expert_time_s(512)
        return 100.0 * (extended / engine - 1.0)


class ExecuteGraph:
    """:func:`~sievesim.system.dag.execute` (compiled) against :func:`~sievesim.system.dag.execute_reference`
    on the graph of one Qwen3.5-397B-A17B step on 8 GPUs at B = 256 under Sieve."""

    model = "qwen3.5-397b-a17b"

    def setup(self) -> None:
        sim = StepSimulator(self.model, gpus=CASES[self.model], policy="sieve", batch=256)
        self.graph = sim.run_step(grow_contexts=False)["schedule"].graph
        self.contention = sim.contention

    def time_execute_compiled(self) -> None:
        execute(self.graph, self.contention)

    def time_execute_reference(self) -> None:
        execute_reference(self.graph, self.contention)

    def track_compiled_speedup(self) -> float:
        """Best of 5 of the reference over best of 20 of the compiled core (x)."""
        def best(fn, repeat):
            times = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                out = fn(self.graph, self.contention)
                times.append(time.perf_counter() - t0)
            return min(times), out

        t_ref, ref = best(execute_reference, 5)
        t_core, core = best(execute, 20)
        assert (core.start, core.end, list(core.busy.items())) == (ref.start, ref.end, list(ref.busy.items()))
        return t_ref / t_core

    track_compiled_speedup.unit = "x"


class GraphAdd:
    """``Graph.add`` (compiled, ``_graph_add.graph_add``) against ``Graph._add_reference``: the nodes of
    one Qwen3.5-397B-A17B step on 8 GPUs at B = 256 under Sieve added again, with their metadata."""

    model = "qwen3.5-397b-a17b"

    def setup(self) -> None:
        sim = StepSimulator(self.model, gpus=CASES[self.model], policy="sieve", batch=256)
        g = sim.run_step(grow_contexts=False)["schedule"].graph
        self.nodes = list(zip(g.names, g.durations, g.resources, g.deps, g.meta))

    def _build(self, add) -> Graph:
        graph = Graph()
        for name, duration, resources, deps, meta in self.nodes:
            add(graph, name, duration, resources, deps, **meta)
        return graph

    def time_add_compiled(self) -> None:
        self._build(Graph.add)

    def time_add_reference(self) -> None:
        self._build(Graph._add_reference)

    def track_add_speedup(self) -> float:
        """Best of 10 of the reference over best of 10 of the compiled add (x), the same graph."""
        def best(add):
            times = []
            for _ in range(10):
                t0 = time.perf_counter()
                graph = self._build(add)
                times.append(time.perf_counter() - t0)
            return min(times), graph

        t_ref, ref = best(Graph._add_reference)
        t_core, core = best(Graph.add)
        assert (core.durations, core.resources, core.deps, core.priority) == \
            (ref.durations, ref.resources, ref.deps, ref.priority)
        return t_ref / t_core

    track_add_speedup.unit = "x"


class RackStep:
    """Rack scale (docs/hardware.md, "Nodes"): one warm GPU-only step of DeepSeek-V3 in FP8 on 72
    GPUs of a GB200 NVL72 at B = 72 x 64 (32 redundant experts: 256 + 32 over 72), and of Qwen3.5 on
    8 GPUs at B = 256 under Sieve. Targets (the rack-scale issue): 0.3 s and 15 ms warm on this
    2-core machine, 2 GB peak; ``track_*_nodes`` is the graph's size, ``track_rows_speedup_*`` the
    GPU-by-GPU build over the rows, ``track_compiled_speedup_*`` the routing's numpy references over
    its compiled passes. ``python benchmarks/run.py RackStep``."""

    RACK = dict(model="deepseek-v3", hardware="gb200-nvl72", gpus=72, policy="gpu-only", batch=72 * 64,
                weight_format="fp8-block", redundant_experts=32, energy=False)
    BOX = dict(model="qwen3.5-397b-a17b", gpus=8, policy="sieve", batch=256)

    def setup(self) -> None:
        self.rack = StepSimulator(**self.RACK)
        self.rack.run_step(grow_contexts=False)
        self.box = StepSimulator(**self.BOX)
        self.box.run_step(grow_contexts=False)

    def time_deepseek_v3_72_gpus_warm(self) -> None:
        self.rack.run_step(grow_contexts=False)

    def time_qwen35_8_gpus_warm(self) -> None:
        self.box.run_step(grow_contexts=False)

    def track_deepseek_v3_72_gpus_nodes(self) -> int:
        return len(self.rack.run_step(grow_contexts=False)["schedule"].graph)

    def _rows_speedup(self, case: dict, repeat: int) -> float:
        """Best of ``repeat`` warm steps built GPU by GPU (``figure8.decide_all`` off: every GPU decided
        and its expert path built on its own) over best of ``repeat`` with the layer's rows, in one
        run, each on a new simulator of the case (the same seed: the same steps); the last steps'
        graphs must be the same."""
        from sievesim.system import figure8

        def best(rows: bool):
            saved = figure8.decide_all
            if not rows:
                figure8.decide_all = lambda b, lb, r: None
            try:
                sim = StepSimulator(**case)
                sim.run_step(grow_contexts=False)
                times = []
                for _ in range(repeat):
                    t0 = time.perf_counter()
                    raw = sim.run_step(grow_contexts=False)
                    times.append(time.perf_counter() - t0)
            finally:
                figure8.decide_all = saved
            return min(times), raw["schedule"].graph

        (t_gpu, g_gpu), (t_rows, g_rows) = best(False), best(True)
        assert (g_gpu.names, g_gpu.durations, g_gpu.deps) == (g_rows.names, g_rows.durations, g_rows.deps)
        return t_gpu / t_rows

    def track_rows_speedup_deepseek_v3_72_gpus(self) -> float:
        return self._rows_speedup(self.RACK, 3)

    def track_rows_speedup_qwen35_8_gpus(self) -> float:
        return self._rows_speedup(self.BOX, 10)

    track_rows_speedup_deepseek_v3_72_gpus.unit = track_rows_speedup_qwen35_8_gpus.unit = "x"

    def peakmem_deepseek_v3_72_gpus_warm(self) -> None:
        self.rack.run_step(grow_contexts=False)

    def track_compiled_speedup_deepseek_v3_72_gpus(self) -> float:
        """Best of 3 warm steps with the routing's numpy references (the synthetic samplers, the slot
        mapping and its counts, the dispatch volumes, the tokens per expert) over best of 3 with
        their compiled passes, in one run, each on a new simulator (the same seed: the same steps);
        the last steps' graphs must be the same."""
        from sievesim.system import eplb, routing_volumes
        from sievesim.workload import grouped, routing, synthetic

        compiled = [(grouped, "_kernels"), (synthetic, "_kernels"), (eplb, "_slots_and_counts"),
                    (routing_volumes, "_dispatch_counts"), (routing, "_counts_of_ids")]

        def best(numpy_paths: bool):
            saved = [getattr(mod, name) for mod, name in compiled]
            if numpy_paths:
                for mod, name in compiled:
                    setattr(mod, name, None)
            try:
                sim = StepSimulator(**self.RACK)
                sim.run_step(grow_contexts=False)
                times = []
                for _ in range(3):
                    t0 = time.perf_counter()
                    raw = sim.run_step(grow_contexts=False)
                    times.append(time.perf_counter() - t0)
            finally:
                for (mod, name), value in zip(compiled, saved):
                    setattr(mod, name, value)
            return min(times), raw["schedule"].graph

        (t_numpy, g_numpy), (t_compiled, g_compiled) = best(True), best(False)
        assert (g_numpy.names, g_numpy.durations, g_numpy.deps) == (g_compiled.names, g_compiled.durations,
                                                                     g_compiled.deps)
        return t_numpy / t_compiled

    track_compiled_speedup_deepseek_v3_72_gpus.unit = "x"
