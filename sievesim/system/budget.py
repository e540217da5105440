"""What a step needs before it runs: its sizes checked against the model (G, B, micro-batches,
redundant experts), the HBM each GPU holds (weights, KV cache, activations: the
capacity check), the simulator's own memory and time (``--max-memory``, ``--max-work``).
:class:`StepBudget` is mixed into :class:`~sievesim.system.step.StepSimulator` and reads its fields.
Sizes in bytes, times in seconds."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import field_error
from .parallelism import resolve_redundant

if TYPE_CHECKING:
    from ..capacity import MemoryUse

__all__ = ["StepBudget", "step_work_s"]


class StepBudget:
    """The capacity check and the simulator's work estimates of a ``StepSimulator`` (a mixin)."""

    def _check_sizes(self, gpus: int, batch: int, microbatches: int, seed: int, exact_tokens: int) -> None:
        """G, B, micro-batches, seed and the exact-token limit, checked against the model."""
        from .._validate import check_int

        m = self.model
        for name, value, low in (("gpus", gpus, 1), ("batch", batch, 1), ("microbatches", microbatches, 1)):
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < low:
                raise field_error(name, value, f"an integer >= {low}")
        check_int("batch", batch, "batch")
        check_int("gpus", gpus, "gpus")
        if self.redundant_experts is None:     # "auto": as many as make E + R a multiple of G (0 when G divides E)
            self.redundant_experts = resolve_redundant(None, m.num_experts, gpus, self.expert_mode)
        slots = m.num_experts + self.redundant_experts
        if slots % gpus and self.expert_mode == "ep":
            need = -slots % gpus + self.redundant_experts
            raise field_error("gpus", gpus, f"a divisor of the model's {m.num_experts} routed experts"
                              + (f" + {self.redundant_experts} redundant" if self.redundant_experts else "")
                              + f" (expert parallelism puts as many on each GPU; or redundant_experts = {need}: "
                              "--redundant-experts)")
        if batch % gpus and not self.tp_attention:
            raise field_error("batch", batch, f"a multiple of gpus = {gpus} (data-parallel attention "
                                              f"puts B/G requests on each GPU)")
        if microbatches not in (1, 2):
            raise field_error("microbatches", microbatches, "1 or 2")
        per_gpu = batch if self.tp_attention else batch // gpus
        if microbatches == 2 and per_gpu < 2:
            raise field_error("microbatches", microbatches, f"1 when a GPU has fewer than 2 requests ({per_gpu})")
        if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
            raise field_error("seed", seed, "a non-negative integer")
        self.gpus, self.batch, self.seed, self.microbatches = int(gpus), int(batch), int(seed), int(microbatches)
        if not isinstance(exact_tokens, (int, np.integer)) or isinstance(exact_tokens, bool) or exact_tokens < 2:
            raise field_error("exact_tokens", exact_tokens, "an integer >= 2")
        self.exact_tokens = int(exact_tokens)
        #: Expert slots of the step (the routed experts, and their redundant replicas).
        self.num_slots = slots
        self.local_experts = m.num_experts if self.expert_mode == "tp" else slots // self.gpus

    def memory_use(self, steps: int = 0) -> "MemoryUse":
        """HBM use of the most loaded GPU [bytes] with contexts ``steps`` tokens longer than now
        (:mod:`sievesim.capacity`)."""
        from ..capacity import memory_per_gpu

        ctx = self.context + self._step_index + steps
        if self.tp_attention:   # every GPU holds every request's share of the KV cache
            return memory_per_gpu(self.model, self.hw, 1 if self.expert_mode == "tp" else self.gpus, ctx,
                                  [self.prefill_len] * self.prefill_requests, self.local_experts)
        per_gpu = self.batch // self.gpus
        pf_owner = np.arange(self.prefill_requests) % self.gpus
        uses = [memory_per_gpu(self.model, self.hw, self.gpus, ctx[g * per_gpu:(g + 1) * per_gpu],
                               [self.prefill_len] * int(np.count_nonzero(pf_owner == g)), self.local_experts)
                for g in range(self.gpus)]
        return max(uses, key=lambda u: u.total)

    def check_capacity(self, steps: int = 0) -> None:
        """Refuse (:class:`~sievesim.errors.ConfigError`) a configuration whose most loaded GPU cannot
        hold its weights, KV cache and activations after ``steps`` more steps."""
        from ..capacity import check_capacity

        check_capacity(self.memory_use(steps), f"{self.model.name} on {self.gpus} x {self.hw.name} with "
                                               f"batch {self.batch} at context {self.context_desc}")

    def memory_estimate_bytes(self, steps: int = 1) -> float:
        """Bytes the largest PIM attention program of a step needs (program arrays and the engine's
        per-command state, about 32 bytes per MAC command), plus the step's routing arrays, with
        contexts ``steps`` tokens longer than now. Checked before running (``--max-memory``)."""
        m = self.model
        per_gpu = self.batch // self.gpus
        longest = float(self.context.max(initial=0)) + self._step_index + steps
        kv = max((m.kv_bytes_per_token(layer) for layer in range(m.num_layers)), default=0.0)
        if m.sliding_window and all(k == "sliding" for k in m.layer_attention):
            longest = min(longest, float(m.sliding_window))
        q_per_kv = max(1, m.num_attention_heads // max(1, m.num_kv_heads))
        macs = per_gpu * longest * kv / m.kv_bytes_per_element * q_per_kv
        pcs = self.org.count("pseudo_channel")
        commands = macs / pcs / (48 * 16) * 2       # 48 bank PUs x 16 MACs per all-bank command
        routing = (self.batch * self.mtp_queries + self.prefill_requests * self.prefill_len) * m.num_moe_layers * m.top_k * 4 * 6
        graphs = _BYTES_PER_GPU_LAYER * self.gpus * m.num_layers   # the layer graphs of every GPU
        return 32.0 * commands + routing + graphs

    def work_estimate_s(self, steps: int) -> float:
        """Estimated seconds of simulator time for ``steps`` steps: per layer, a part per GPU (its
        graph, its decision, its PIM nodes) and a part per routed (token, top-k slot). Constants
        measured on a 2-core x86-64 machine (docs/architecture.md, "Work estimate")."""
        rows = self.batch * self.mtp_queries + self.prefill_requests * self.prefill_len   # MTP: B (1 + k) rows
        return step_work_s(self.model, self.gpus, rows, steps)


#: Simulator cost per (GPU, layer) of a step and per routed (token, top-k slot) and layer, in
#: seconds and bytes: ``run --model qwen3.5-397b-a17b --context-len 16 --warmup 0 --policy sieve``
#: at 256 vs 128 GPUs (B = 1024) took 10.9 vs 6.2 s and 404 vs 193 MB peak RSS (36 us and 27 KB
#: per GPU-layer); ``qwen3-30b-a3b`` at B = 16384 took 1.3 s per step (1.7e-7 s per slot-layer).
#: Taken about 1.5x for a margin.
_SECONDS_PER_GPU_LAYER = 6e-4
_SECONDS_PER_TOKEN_SLOT = 2.5e-7
_BYTES_PER_GPU_LAYER = 40_000


def step_work_s(model: Any, gpus: int, tokens: int, steps: int) -> float:
    """Estimated simulator seconds of ``steps`` executed steps of ``model`` on ``gpus`` GPUs with
    ``tokens`` routed tokens per step (decode requests plus prefill tokens)."""
    return steps * model.num_layers * (_SECONDS_PER_GPU_LAYER * gpus + _SECONDS_PER_TOKEN_SLOT * tokens * model.top_k)
