"""PIM on the engine (asv-style). ``python benchmarks/run.py pim`` runs them without asv.

* ``track_pim_commands_per_second``: commands issued per wall second (ACTAB/MACAB/PREAB/GWRITE/
  RDRES plus refresh) by one long GEMV program (d_in 4096, d_out 48 x 2000, one pseudo-channel).
* ``track_price_decode_step_s``: wall seconds to price one decode step of Qwen3.5-397B-A17B at
  B = 256 on 8 B200 GPUs with everything on PIM (AllExp) for GPU 0: for each of the 60 layers, the
  PIM time of its experts (one program per layer, refresh included) and of its attention (the
  busiest pseudo-channel's program), with cold caches; ``track_price_decode_step_warm_s`` the same
  step again (identical programs come from the cache).
* ``AttentionPricing``: one attention layer of Qwen3-30B-A3B (B = 64 on one B200): the engine's
  time at 4096 tokens and at MATH-500 context lengths, for each attention mapping and balance
  (``track_attention_us``; docs/pim.md section 7), and the wall time of a cold
  :meth:`AttentionLayer.breakdown` (``track_breakdown_cold_s``: programs built, run with the command
  log at every refresh phase and read back).
"""
import time

import numpy as np

from sievesim.hardware import get_hardware
from sievesim.models import get_model
from sievesim.pim import gemv_program, geometry_for, pim_config, plan_gemv, run_programs
from sievesim.pim import attention as pim_attention
from sievesim.pim import device as pim_device
from sievesim.pim.expert import AttentionLayer, EnginePimCost
from sievesim.workload.batches import open_source
from sievesim.workload.lengths import decode_context_lengths


def clear_pim_caches():
    """Every program and result cache of :mod:`sievesim.pim` (compiled configurations kept)."""
    for fn in (pim_device._gemv, pim_device._sequence, pim_device._program, pim_device._plan,
               pim_attention._grouped_sequence, pim_attention._grouped_program, pim_attention._grouped_plan,
               pim_attention._cost_line):
        fn.cache_clear()


class PIMCommandRate:
    timeout = 300

    def setup(self):
        self.cfg = pim_config("hbm3e-8000")
        geo = geometry_for(self.cfg)
        plan = plan_gemv(4096, 48 * 2000, 1, 1, geo, dict(self.cfg.timings))
        self.program = gemv_program(plan, geo)

    def track_pim_commands_per_second(self):
        res = run_programs(self.cfg, [self.program])
        return res.commands / res.wall_s

    track_pim_commands_per_second.unit = "commands/s"


def price_decode_step(model, hw, batch: int, gpus: int, seed: int = 0) -> float:
    """PIM time of one decode step of GPU 0 with every expert on PIM [s]."""
    cost = EnginePimCost.for_model(model, hw)
    step = open_source(f"synthetic:{model.name}").stream(batch, seed=seed).step()
    lens = decode_context_lengths("math-500", batch // gpus, np.random.default_rng(seed))
    per_gpu = model.num_experts // gpus
    total = 0.0
    for i, layer in enumerate(model.moe_layer_indices):
        counts = step.counts[i, :per_gpu]                   # GPU 0 holds experts 0..E/G-1
        total += cost.experts_time_s(counts)
        total += AttentionLayer.from_model(model, layer).time_s(cost.device, lens)
    return total


class DecodeStepPricing:
    timeout = 600

    def setup(self):
        self.model = get_model("qwen3.5-397b-a17b")
        self.hw = get_hardware("b200")

    def track_price_decode_step_s(self):
        clear_pim_caches()
        t0 = time.perf_counter()
        price_decode_step(self.model, self.hw, 256, 8)
        return time.perf_counter() - t0

    track_price_decode_step_s.unit = "s"

    def track_price_decode_step_warm_s(self):
        price_decode_step(self.model, self.hw, 256, 8)
        t0 = time.perf_counter()
        price_decode_step(self.model, self.hw, 256, 8)
        return time.perf_counter() - t0

    track_price_decode_step_warm_s.unit = "s"

    def track_decode_step_pim_time_us(self):
        return price_decode_step(self.model, self.hw, 256, 8) * 1e6

    track_decode_step_pim_time_us.unit = "us"


class ExpertPricing:
    """Wall time of a cold ``expert_time_s(N)`` for Qwen3.5-397B-A17B on b200, N = 1, 2, 4, .., 32
    (the system step calls it once per distinct token count): ``track_cold_expert_max_ms`` the
    slowest N, ``track_cold_expert_total_ms`` all six; configurations compiled beforehand (the
    one-time cost of a process, ``track_first_call_ms``: the first N = 1 call before anything)."""

    timeout = 300

    def setup(self):
        self.model = get_model("qwen3.5-397b-a17b")
        self.hw = get_hardware("b200")

    def _times_ms(self, first=False):
        clear_pim_caches()
        if first:
            pim_device._COMPILED.clear()
        cost = EnginePimCost.for_model(self.model, self.hw)
        out = []
        for n in (1, 2, 4, 8, 16, 32):
            t0 = time.perf_counter()
            cost.expert_time_s(n)
            out.append((time.perf_counter() - t0) * 1e3)
        return out

    def track_first_call_ms(self):
        return self._times_ms(first=True)[0]

    track_first_call_ms.unit = "ms"

    def track_cold_expert_max_ms(self):
        self._times_ms()
        return max(self._times_ms())

    track_cold_expert_max_ms.unit = "ms"

    def track_cold_expert_total_ms(self):
        self._times_ms()
        return sum(self._times_ms())

    track_cold_expert_total_ms.unit = "ms"


class DualRowBuffer:
    """What NeuPIMs-style dual row buffers buy: a 4-token GEMV (1024 -> 1920) on one pseudo-channel
    alone and beside 2000 random GPU reads (one every 4 cycles) to the same banks.
    ``track_pim_slowdown``: PIM completion with the reads / alone."""

    params = ([True, False],)
    param_names = ["dual_row_buffer"]
    timeout = 300

    def setup(self, dual):
        self.cfg = pim_config("hbm3e-8000", 1, dual_row_buffer=dual)
        geo = geometry_for(self.cfg)
        self.prog = gemv_program(plan_gemv(1024, 48 * 40, 4, 1, geo, dict(self.cfg.timings)), geo)
        rng = np.random.default_rng(0)
        from sievesim.dram.traces import RequestTrace
        self.bg = RequestTrace.from_arrays(np.arange(2000) * 4,
                                           rng.integers(0, self.cfg.capacity_bytes // 32, 2000) * 32,
                                           np.zeros(2000, bool))

    def track_pim_slowdown(self, dual):
        alone = run_programs(self.cfg, [self.prog]).cycles
        both = run_programs(self.cfg, [self.prog], background=self.bg)
        return max(both.per_unit_busy_cycles) / alone

    track_pim_slowdown.unit = "x"

    def track_gpu_reads_done_cycles(self, dual):
        return run_programs(self.cfg, [self.prog], background=self.bg).normal_cycles

    track_gpu_reads_done_cycles.unit = "cycles"


class AttentionPricing:
    params = (["grouped", "per_head"], ["tokens", "units"], ["4096", "math-500"])
    param_names = ["mapping", "balance", "context"]
    timeout = 300

    def setup(self, mapping, balance, context):
        import dataclasses
        model = get_model("qwen3-30b-a3b")
        cost = EnginePimCost.for_model(model, get_hardware("b200"))
        self.device = cost.device
        self.layer = dataclasses.replace(cost.attention, mapping=mapping, balance=balance)
        self.lens = [4096] * 64 if context == "4096" else \
            [int(x) for x in decode_context_lengths("math-500", 64, np.random.default_rng(0))]

    def track_attention_us(self, mapping, balance, context):
        return self.layer.time_s(self.device, self.lens) * 1e6

    track_attention_us.unit = "us"

    def track_breakdown_cold_s(self, mapping, balance, context):
        clear_pim_caches()
        t0 = time.perf_counter()
        self.layer.breakdown(self.device, self.lens)
        return time.perf_counter() - t0

    track_breakdown_cold_s.unit = "s"
