"""Energy of an executed decode step: every node's joules and the step's breakdown by resource.

A node's energy is what its work costs (docs/energy.md):

* GPU kernels (``flops``, ``bytes``): FLOPs x ``gpu.energy_pj_per_flop`` (``gpu_compute``) and HBM
  bytes x (the DRAM's own energy per byte of a streamed read + ``gpu.energy_pj_per_hbm_byte``,
  the GPU side) (``hbm``); weight loads carry bytes only;
* links (AllGather, dispatch, combine): bytes x 8 x ``interconnect.energy_pj_per_bit`` (``link``);
* PIM nodes (experts, attention): the engine's command counts of their programs x the energy per
  command (:mod:`sievesim.dram.energy`), plus the pseudo-channels' step from precharge to active
  standby while they run (``pim``);
* the decision and anything else without work: 0.

The step adds ``static``: every GPU's ``static_power_w`` and its stacks' DRAM background and
refresh power, over the step time. Energies in joules.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..dram import energy as dram_energy
from ..dram.config import get_config
from .pim_costs import per_count

__all__ = ["StepEnergy", "RESOURCE_KINDS", "LINK_KINDS"]

#: The step's breakdown keys.
RESOURCE_KINDS = ("gpu_compute", "hbm", "pim", "link", "static")
#: Node kinds whose bytes cross the links.
LINK_KINDS = ("allgather", "dispatch", "combine")


def _has_energy(hw: Any) -> bool:
    gpu, link = hw.gpu, hw.interconnect
    return None not in (gpu.energy_pj_per_flop, gpu.energy_pj_per_hbm_byte, gpu.static_power_w,
                        link.energy_pj_per_bit)


class StepEnergy:
    """The energy model of one simulator (hardware, its DRAM configuration, its PIM engines).

    ``engine_times``: the step's :class:`~sievesim.system.pim_costs.EngineTimes` (None or no
    engines: no PIM). PIM programs are the cached ones the engine priced, so nothing is simulated
    twice; their energies are cached by tokens and unit (experts) or context lengths (attention).
    """

    def __init__(self, hw: Any, engine_times: Any = None) -> None:
        self.hw = hw
        self.available = _has_energy(hw)
        self.engines = getattr(engine_times, "engines", None) or {}
        self.device = next(iter(self.engines.values())).device if self.engines else None
        config = self.device.config if self.device is not None else \
            get_config(hw.pim.dram_config if hw.pim is not None else "hbm3e-8000")
        self.config = config
        e = dram_energy.command_energies(config, banks_per_pu=getattr(self.device, "banks_per_pu", 1),
                                         macs_per_command=getattr(self.device, "macs_per_command", 16))
        self.commands = e
        bursts_per_row = int(config.org["column"]) // int(config.standard.prefetch)
        per_burst = e.per_command["ACT"] / bursts_per_row + e.per_command["RD"] + e.io_pj
        #: The DRAM's energy per byte of a streamed read that reaches the GPU [pJ/byte].
        self.dram_pj_per_byte = per_burst / config.tx_bytes
        pcs = self.device.pcs_per_stack if self.device is not None else config.num_controllers
        tck_s = config.tck_ns * 1e-9
        ref_w = e.per_command["REFab"] * 1e-12 / (int(config.timings["nREFI"]) * tck_s)
        #: Pseudo-channels of one GPU's stacks.
        self.pcs_per_gpu = pcs * int(hw.gpu.num_hbm_stacks)
        #: DRAM background (precharge standby) and refresh power of one GPU's stacks [W].
        self.dram_static_w = self.pcs_per_gpu * (e.precharge_standby_mw * 1e-3 + ref_w)
        self._active_delta_w = (e.active_standby_mw - e.precharge_standby_mw) * 1e-3
        self._experts: dict[tuple[Any, int], float] = {}
        self._expert_arrays: dict[Any, np.ndarray] = {}
        self._attention: dict[tuple[str, bytes], float] = {}

    # ------------------------------------------------------------------ PIM programs
    def _job_j(self, result: Any, pcs: int, duration_s: float) -> float:
        """Commands of a job on ``pcs`` pseudo-channels (one program's counts x ``pcs``) and the
        step of those pseudo-channels to active standby over ``duration_s`` [J]."""
        copies = max(1, len(result.per_unit_busy_cycles))
        counts = {k: v * pcs / copies for k, v in dram_energy.pim_counts(result).items() if k != "REFab"}
        out = dram_energy.energy_of_counts(counts, self.commands, time_s=0.0, controllers=0, active_s=0.0)
        return out["total"] + self._active_delta_w * pcs * duration_s

    def expert_j(self, tokens: int, unit: str | None) -> float:
        """One expert with ``tokens`` tokens on PIM, tensor-parallel over ``unit`` (None: the GPU's
        whole PIM) [J]: its gate/up and down programs (one program with the activation on PIM)."""
        key = (unit, int(tokens))
        out = self._experts.get(key)
        if out is None:
            out = 0.0
            if tokens > 0 and self.engines:
                from ..pim.expert import gemv_sequence
                eng = next(iter(self.engines.values()))
                dev = eng.device
                pcs = dev.unit_pcs(unit or "gpu")
                top = 256
                n = min(int(tokens), top)
                if dev.activation_on_pim:
                    results = [gemv_sequence(dev, eng._expert_gemvs(n), pcs)]
                else:
                    results = list(eng.expert_result(n, pcs))
                out = sum(self._job_j(r, pcs, dev.program_cycles(r, pcs) * dev.tck_s) for r in results)
                if tokens > top:   # prefill-sized counts: one GEMV per token, linear in tokens
                    out *= tokens / n
            self._experts[key] = out
        return out

    def experts_j(self, counts: Any, unit: str | None) -> float:
        """PIM experts with these token counts [J] (the sum of their energies; cached per count)."""
        counts = np.asarray(counts, dtype=np.int64).ravel()
        if not counts.size:
            return 0.0
        out = per_count(self._expert_arrays, unit, counts, lambda n: self.expert_j(n, unit) if n > 0 else 0.0)
        return float(out.sum())

    def attention_j(self, kind: str, lens: Any) -> float:
        """Decode attention of one GPU's requests at context lengths ``lens`` on PIM [J]: the busiest
        pseudo-channel's programs as the engine ran them, scaled to every pseudo-channel by its
        share of the layer's work (context tokens x KV heads; a linear layer: its state units)."""
        lens = np.asarray(lens, dtype=np.int64).ravel()
        key = (kind, lens.tobytes())
        out = self._attention.get(key)
        if out is None:
            out = 0.0
            eng = self.engines.get(kind)
            if eng is not None and eng.attention is not None and lens.size:
                layer, dev = eng.attention, eng.device
                used, busiest = layer.placement(dev, lens.tolist())
                results = layer._results(dev, busiest)
                one = sum(self._job_j(r, 1, dev.program_cycles(r, 1) * dev.tck_s) for r in results)
                if layer.kind == "linear":
                    share = len(used) * layer.kv_heads / max(1, len(busiest))
                else:
                    share = sum(used) * layer.kv_heads / max(1, sum(busiest))
                out = one * max(1.0, share)
            self._attention[key] = out
        return out

    # ------------------------------------------------------------------ nodes and steps
    def node_j(self, meta: dict[str, Any]) -> dict[str, float]:
        """Energy of one node by resource kind [J] (kinds with none left out)."""
        gpu, link = self.hw.gpu, self.hw.interconnect
        kind = meta.get("kind", "")
        if kind == "pim_experts":
            return {"pim": self.experts_j(meta.get("token_counts", ()), meta.get("pim_unit"))}
        if kind == "attention" and "context_lens" in meta:
            pim = self.attention_j(meta["attention_kind"], meta["context_lens"])
            return {"pim": pim * meta["queries"] if "queries" in meta else pim}     # MTP: a pass per query
        nbytes = float(meta.get("bytes") or 0.0)
        if kind in LINK_KINDS:
            return {"link": nbytes * 8 * link.energy_pj_per_bit * 1e-12} if nbytes else {}
        out = {}
        flops = float(meta.get("flops") or 0.0)
        if flops:
            out["gpu_compute"] = flops * gpu.energy_pj_per_flop * 1e-12
        if nbytes:
            out["hbm"] = nbytes * (self.dram_pj_per_byte + gpu.energy_pj_per_hbm_byte) * 1e-12
        return out

    def static_w(self, gpus: int) -> float:
        """Power drawn whatever runs [W]: GPUs' static power and their stacks' DRAM background."""
        return gpus * (self.hw.gpu.static_power_w + self.dram_static_w)

    def step(self, graph: Any, step_time_s: float, gpus: int) -> dict[str, float]:
        """Energy of one executed step [J] by resource kind, and ``total``; writes each node's
        energy [J] into its metadata (``energy_j``, the Chrome trace's args)."""
        out = dict.fromkeys(RESOURCE_KINDS, 0.0)
        gpu, link = self.hw.gpu, self.hw.interconnect
        per_flop, per_byte = gpu.energy_pj_per_flop * 1e-12, (self.dram_pj_per_byte + gpu.energy_pj_per_hbm_byte) * 1e-12
        per_link_byte = 8 * link.energy_pj_per_bit * 1e-12
        for meta in graph.meta:
            kind = meta.get("kind", "")
            if kind == "pim_experts" or (kind == "attention" and "context_lens" in meta):
                e = self.node_j(meta)["pim"]
                out["pim"] += e
            elif kind in LINK_KINDS:
                e = (meta.get("bytes") or 0.0) * per_link_byte
                out["link"] += e
            else:
                c = (meta.get("flops") or 0.0) * per_flop
                h = (meta.get("bytes") or 0.0) * per_byte
                out["gpu_compute"] += c
                out["hbm"] += h
                e = c + h
            meta["energy_j"] = float(e)
        out["static"] = self.static_w(gpus) * step_time_s
        out["total"] = math.fsum(out[k] for k in RESOURCE_KINDS)
        return out
