"""KV-cache capacity in blocks: the HBM a GPU has left after its weights and activations.

The bytes come from :mod:`sievesim.capacity` (the same model ``sievesim run`` checks): a GPU holds
its E/G routed experts, a replica of every other weight, the activations of its largest
iteration, and the KV cache and linear-attention state of its requests. What a server may use
is ``memory_utilization`` of the HBM (vLLM's ``gpu_memory_utilization``, 0.9 by default); the KV
cache gets what is left after the weights and activations, in blocks of ``block_size`` tokens of
every layer's KV (``block_bytes``). A request of L tokens holds
``ceil(kv_cache_bytes_per_request(L) / block_bytes)`` blocks: sliding-window layers hold at most
their window, linear-attention layers their fixed state (:meth:`ModelSpec.kv_cache_bytes_per_request`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..capacity import check_capacity, memory_per_gpu
from ..errors import ConfigError

__all__ = ["KvCapacity", "kv_capacity"]


@dataclass(frozen=True)
class KvCapacity:
    """KV blocks of one GPU and what one block holds.

    Attributes:
        blocks_per_gpu: blocks the KV cache of one GPU holds.
        block_size: tokens per block.
        block_bytes: bytes of one block (``block_size`` tokens of every layer's KV).
        kv_bytes_per_gpu: bytes left for the KV cache on one GPU.
        weights_bytes, activations_bytes, capacity_bytes: the rest of the budget (one GPU).
    """

    blocks_per_gpu: int
    block_size: int
    block_bytes: float
    kv_bytes_per_gpu: float
    weights_bytes: float
    activations_bytes: float
    capacity_bytes: float

    def as_dict(self) -> dict[str, float]:
        return {"blocks_per_gpu": self.blocks_per_gpu, "block_size": self.block_size, "block_bytes": self.block_bytes,
                "kv_bytes_per_gpu": self.kv_bytes_per_gpu, "weights_bytes": self.weights_bytes,
                "activations_bytes": self.activations_bytes, "capacity_bytes": self.capacity_bytes}


def kv_capacity(model: Any, hardware: Any, gpus: int, *, max_batch: int, token_budget: int, block_size: int,
                memory_utilization: float, redundant_experts: int | str = "auto") -> KvCapacity:
    """The KV capacity of one GPU when ``model`` runs on ``gpus`` GPUs of ``hardware`` with at most
    ``max_batch`` decode requests and ``token_budget`` tokens per iteration; each GPU holds
    (E + ``redundant_experts``) / G expert replicas (``"auto"``: the fewest replicas that make E + R a
    multiple of G, as the step simulator takes them)."""
    per_gpu = -(-max_batch // gpus)
    from ..system.parallelism import resolve_redundant
    redundant = resolve_redundant(redundant_experts, model.num_experts, gpus)
    local = -(-(model.num_experts + redundant) // gpus)
    use = memory_per_gpu(model, hardware, gpus, [], [], local)
    tokens_use = memory_per_gpu(model, hardware, gpus, [1] * per_gpu, [token_budget], local)
    capacity = memory_utilization * use.capacity
    kv_bytes = capacity - use.weights - tokens_use.activations
    what = f"{model.name} on {gpus} x {hardware.name}"
    check_capacity(type(use)(use.expert_weights, use.replicated_weights, 0.0, tokens_use.activations, capacity), what)
    per_token = float(model.kv_bytes_per_token_all_layers)
    block_bytes = block_size * per_token if per_token > 0 else float(model.linear_state_bytes_per_request)
    if block_bytes <= 0:
        raise ConfigError(f"{model.name}: no KV cache and no state per request; nothing to put in KV blocks")
    blocks = int(math.floor(kv_bytes / block_bytes))
    if blocks < 1:
        raise ConfigError(f"{what}: {kv_bytes / 2**30:.2f} GiB left for the KV cache per GPU, less than one block "
                          f"({block_bytes / 2**20:.2f} MiB); use more GPUs (--gpus) or a higher --memory-utilization")
    return KvCapacity(blocks, block_size, block_bytes, kv_bytes, use.weights, tokens_use.activations, capacity)


class BlockCounter:
    """Blocks a request of L tokens holds (cached per L)."""

    def __init__(self, model: Any, cap: KvCapacity) -> None:
        self.model, self.block_bytes = model, cap.block_bytes
        self._cache: dict[int, int] = {}

    def __call__(self, tokens: int) -> int:
        b = self._cache.get(tokens)
        if b is None:
            b = self._cache[tokens] = int(math.ceil(self.model.kv_cache_bytes_per_request(int(tokens)) / self.block_bytes
                                                    - 1e-9)) if tokens > 0 else 0
        return b
