"""How many token vectors each GPU sends and receives in an expert-parallel dispatch, from the
step's routing: once to every other GPU that holds one of a token's experts (as DeepEP does), and
with more than one NVLink domain (``interconnect.gpus_per_node``) the share that crosses the
scale-out network. Computed for every MoE layer of a micro-batch at once, as integer counts (the
same values as one layer at a time)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Volumes", "of_microbatch"]


@dataclass(frozen=True)
class Volumes:
    """Token vectors per MoE layer and GPU, ``(L_moe, G)``; ``own_counts`` ``(L_moe, G, E)``: each GPU's
    own tokens per expert (None without early loads); ``*_inter``: the part to or from other nodes
    (None on one node)."""

    ids: np.ndarray
    send: np.ndarray
    recv: np.ndarray
    own_counts: np.ndarray | None
    send_inter: np.ndarray | None = None
    recv_inter: np.ndarray | None = None


def of_microbatch(b: Any, lb: Any) -> Volumes:
    """The volumes of micro-batch ``lb.mb`` (computed at its first layer, then read from the step's memo)."""
    key = ("routing", lb.mb)
    out = b.memo.get(key)
    if out is not None:
        return out
    sim = b.sim
    G, El, E = sim.gpus, sim.local_experts, sim.num_slots
    rows, own = lb.rows, lb.own
    ids = b.ids[rows]                                   # (R, L, K)
    n_rows, n_layers, _ = ids.shape
    layers = np.arange(n_layers, dtype=np.int64)[None, :, None]
    row_numbers = np.arange(n_rows, dtype=np.int64)
    # flat indices into hit (L, R, G) and into own_counts (L, G, E) of every routed slot
    hit_at = (layers * n_rows + row_numbers[:, None, None]) * G + ids // El
    own_at = (layers * G + own[:, None, None]) * E + ids
    if ids.min(initial=0) < 0:      # a recorded trace's empty slots (-1) route nowhere
        valid = ids >= 0
        hit_at, own_at = hit_at[valid], own_at[valid]
    hit = np.zeros((n_layers, n_rows, G), dtype=bool)
    hit.reshape(-1)[hit_at.reshape(-1)] = True
    hit[:, row_numbers, own] = False
    owner_of = np.zeros((n_rows, G), dtype=np.int64)
    owner_of[np.arange(n_rows), own] = 1
    send = (hit.sum(axis=2) @ owner_of).astype(np.float64)      # (L, G)
    recv = hit.sum(axis=1).astype(np.float64)                   # (L, G)
    send_inter = recv_inter = None
    if sim.nodes > 1:
        node = np.arange(G) // (G // sim.nodes)
        far = hit & (node[own][:, None] != node[None, :])[None, :, :]     # to a GPU of another node
        send_inter = (far.sum(axis=2) @ owner_of).astype(np.float64)
        recv_inter = far.sum(axis=1).astype(np.float64)
    own_counts = None
    if sim.early_loads != "off":
        own_counts = np.bincount(own_at.reshape(-1), minlength=n_layers * G * E).reshape(n_layers, G, E)
    out = b.memo[key] = Volumes(ids, send, recv, own_counts, send_inter, recv_inter)
    return out
