"""What one GPU's HBM must hold, and the check that it does.

Under the parallelism of the step (expert parallelism over G GPUs, data-parallel attention), a
GPU holds

* its E/G routed experts of every MoE layer (their weights sit in its HBM-PIM stacks, where both
  the GPU and the PIM read them),
* a replica of every other weight (attention, shared experts, dense MLPs, router, norms, embedding
  and LM head),
* the KV cache and linear-attention state of its own requests at their context lengths
  (:meth:`ModelSpec.kv_cache_bytes_per_request`: sliding-window layers hold at most the window),
* the activations of one layer: :data:`ACTIVATION_VECTORS_PER_TOKEN` hidden-size vectors per
  token in the model's dtype (residual, norm outputs, QKV, attention output, expert inputs and
  outputs; a reserve of the right order, far below the rest).

A configuration that does not fit is an error, never a number (docs/system.md).
All sizes are bytes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from .errors import ConfigError

__all__ = ["MemoryUse", "memory_per_gpu", "check_capacity", "ACTIVATION_VECTORS_PER_TOKEN"]

#: Hidden-size vectors per token in flight in one layer (see the module docstring).
ACTIVATION_VECTORS_PER_TOKEN = 16

_GIB = float(1 << 30)


@dataclass(frozen=True)
class MemoryUse:
    """Bytes one GPU's HBM holds, by kind, beside its capacity."""

    expert_weights: float
    replicated_weights: float
    kv_cache: float
    activations: float
    capacity: float

    @property
    def weights(self) -> float:
        return self.expert_weights + self.replicated_weights

    @property
    def total(self) -> float:
        return self.weights + self.kv_cache + self.activations

    @property
    def fits(self) -> bool:
        return self.total <= self.capacity

    def as_dict(self) -> dict[str, float]:
        """Flat record (bytes), as ``run --json`` prints it under ``memory_per_gpu_bytes``."""
        return {"expert_weights": self.expert_weights, "replicated_weights": self.replicated_weights,
                "kv_cache": self.kv_cache, "activations": self.activations, "total": self.total,
                "capacity": self.capacity}


def memory_per_gpu(model: Any, hardware: Any, gpus: int, decode_context_lens: Sequence[int],
                   prefill_lens: Sequence[int] = (), local_experts: int | None = None) -> MemoryUse:
    """Memory of the GPU that holds ``decode_context_lens`` (one context length per decode request
    [tokens]) and ``prefill_lens`` (one prompt length per prefill request [tokens]) when ``model``
    runs on ``gpus`` GPUs of ``hardware``; ``local_experts``: the expert replicas one GPU holds
    (default E/G; more with redundant experts)."""
    m = model
    if local_experts is None:
        local_experts = m.num_experts // gpus
    expert = m.num_moe_layers_held * local_experts * float(m.bytes_per_expert)
    all_routed = m.num_moe_layers_held * m.num_experts * float(m.bytes_per_expert)
    replicated = float(m.total_bytes) - all_routed
    lengths = np.concatenate([np.asarray(decode_context_lens, dtype=np.int64).ravel(),
                              np.asarray(list(prefill_lens), dtype=np.int64)])
    kv = float(m.kv_cache_bytes(lengths).sum())
    tokens = len(decode_context_lens) + sum(int(x) for x in prefill_lens)
    activations = tokens * ACTIVATION_VECTORS_PER_TOKEN * m.hidden_size * m.dtype_bytes
    return MemoryUse(expert, replicated, kv, float(activations), float(hardware.gpu.hbm_capacity_bytes))


def check_capacity(use: MemoryUse, what: str) -> None:
    """Raise a :class:`ConfigError` naming the need, the capacity and what to change when ``use``
    does not fit; ``what`` names the configuration (model, GPUs, hardware)."""
    if use.fits:
        return
    parts = (f"expert weights {use.expert_weights / _GIB:.1f} GiB, other weights {use.replicated_weights / _GIB:.1f}"
             f" GiB, KV cache {use.kv_cache / _GIB:.1f} GiB, activations {use.activations / _GIB:.2f} GiB")
    if use.weights > use.capacity:
        advice = "the weights alone do not fit: use more GPUs (--gpus) or a GPU with more HBM"
    else:
        advice = "use more GPUs (--gpus), a smaller batch or shorter contexts"
    raise ConfigError(f"{what}: needs {use.total / _GIB:.1f} GiB of HBM per GPU ({parts}) but one GPU holds "
                      f"{use.capacity / _GIB:.1f} GiB; {advice}")
