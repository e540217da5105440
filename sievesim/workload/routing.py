"""The one routing interface every workload source implements.

A :class:`RoutingSource` (a trace, an SGLang dump, the synthetic generator) opens a
:class:`RoutingStream` for a batch size; each call of :meth:`RoutingStream.step` returns one decode
step (one forward pass) as a :class:`RoutingStep`:

* ``topk_ids`` (B, L, K) int32 — expert ids of the batch's B tokens at each of the L MoE layers
  (row b = request slot b of the batch; -1 = not recorded / none), used for dispatch volumes;
* ``counts`` (L, E) int64 — tokens per expert per layer (``counts[l]`` feeds the policies).

Sources that only know counts (SGLang ``per_pass``/``stat`` dumps) give ``topk_ids = None``.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Iterator

import numpy as np

try:  # compiled with the package (setup.py); the bincount below counts the same
    from ._grouped_draw import counts_of_ids as _counts_of_ids
except ImportError:  # pragma: no cover - only when running from an unbuilt source tree
    _counts_of_ids = None

__all__ = ["RoutingStep", "RoutingSource", "RoutingStream", "counts_from_ids"]


def counts_from_ids(topk_ids: np.ndarray, num_experts: int) -> np.ndarray:
    """(L, E) int64 tokens per expert per layer from (B, L, K) ids; ids < 0 are ignored (one
    compiled pass where the package was built)."""
    if _counts_of_ids is not None and topk_ids.dtype in (np.int32, np.int64) and topk_ids.flags.c_contiguous:
        return _counts_of_ids(topk_ids, num_experts)
    b, num_layers, k = topk_ids.shape
    ids = topk_ids.astype(np.int64, copy=False)
    flat = ids + (np.arange(num_layers, dtype=np.int64) * num_experts)[None, :, None]
    flat = flat[ids >= 0] if np.any(ids < 0) else flat.ravel()
    return np.bincount(flat, minlength=num_layers * num_experts).reshape(num_layers, num_experts)


@dataclass(frozen=True)
class RoutingStep:
    """Routing of one step (one batch at every MoE layer).

    Attributes:
        counts: (L, E) int64 tokens routed to expert e at MoE layer l.
        topk_ids: (B, L, K) int32 expert ids per token and layer (-1 = none), or None for
            count-only sources.
        request_ids: (B,) int64 request of each row (trace sources; synthetic: stream-local request
            numbers), or None.
        positions: (B,) int64 position of each row inside its request, or None.
    """

    counts: np.ndarray
    topk_ids: np.ndarray | None = None
    request_ids: np.ndarray | None = None
    positions: np.ndarray | None = None

    @property
    def batch_size(self) -> int:
        """Tokens in the step (B)."""
        if self.topk_ids is not None:
            return int(self.topk_ids.shape[0])
        return -1

    @property
    def num_layers(self) -> int:
        return int(self.counts.shape[0])

    @property
    def num_experts(self) -> int:
        return int(self.counts.shape[1])


class RoutingStream(ABC):
    """An endless sequence of steps of one batch; deterministic for a given seed."""

    batch_size: int

    @abstractmethod
    def step(self) -> RoutingStep:
        """Advance one step (each request of the batch produces one token) and return it."""

    def __iter__(self) -> Iterator[RoutingStep]:
        while True:
            yield self.step()

    def take(self, n: int) -> list[RoutingStep]:
        """The next ``n`` steps."""
        return [self.step() for _ in range(n)]


class RoutingSource(ABC):
    """Where routing comes from. Attributes: ``name``, ``num_experts`` (E), ``top_k`` (K),
    ``num_layers`` (L, MoE layers)."""

    name: str
    num_experts: int
    top_k: int
    num_layers: int

    @abstractmethod
    def stream(self, batch_size: int, *, seed: int = 0, **options: object) -> RoutingStream:
        """Open a stream of steps of ``batch_size`` tokens, seeded by ``seed``."""

    def modes(self) -> tuple[str, ...]:
        """Batch-formation modes this source supports (first = default)."""
        return ("distinct",)
