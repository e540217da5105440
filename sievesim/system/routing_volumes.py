"""How many token vectors each GPU sends and receives in an expert-parallel dispatch, from the
step's routing: once to every other GPU that holds one of a token's experts (as DeepEP does), and
with more than one NVLink domain (``interconnect.gpus_per_node``) the share that crosses the
scale-out network. Computed for every MoE layer of a micro-batch at once, as integer counts (the
same values as one layer at a time).

Across nodes, two of DeepEP's kernels (the step's ``dispatch``):

* ``"low-latency"`` (pure RDMA): a token goes straight to every GPU of another node that holds one
  of its experts, once per GPU.
* ``"normal"`` (NVLink-forwarded): a token crosses the scale-out network once per other node that
  holds one of its experts, to the GPU of that node with the sender's local rank, which forwards
  it over NVLink to the node's other GPUs that need it. ``send``/``recv`` then count both networks
  (direct NVLink sends, forwards, RDMA), ``*_inter`` the RDMA part.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

try:  # compiled with the package (setup.py); _sparse_volumes counts the same integers
    from ._slots import dispatch_counts as _dispatch_counts
except ImportError:  # pragma: no cover - only when running from an unbuilt source tree
    _dispatch_counts = None

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
    every_row = rows.size == b.ids.shape[0] and (rows.size == 0 or (rows[0] == 0 and bool(np.all(np.diff(rows) == 1))))
    ids = b.ids if every_row else b.ids[rows]           # (R, L, K)
    own_counts = None
    if getattr(sim, "dispatch", "low-latency") == "normal" and sim.nodes > 1:
        send, recv, send_inter, recv_inter = _dense_volumes(ids, own, G, El, sim.nodes)
    elif _dispatch_counts is not None and ids.dtype in (np.int32, np.int64) and ids.shape[2] <= 64 and E == G * El:
        send, recv, send_inter, recv_inter, own_counts = _dispatch_counts(
            np.ascontiguousarray(ids), np.ascontiguousarray(own, dtype=np.int64), G, El, sim.nodes,
            E if sim.early_loads != "off" else 0)
    else:
        send, recv, send_inter, recv_inter = _sparse_volumes(ids, own, G, El, sim.nodes)
    if own_counts is None and sim.early_loads != "off":
        own_counts = _own_counts(ids, own, G, E)
    out = b.memo[key] = Volumes(ids, send, recv, own_counts, send_inter, recv_inter)
    return out


def _own_counts(ids: np.ndarray, own: np.ndarray, G: int, E: int) -> np.ndarray:
    """Each GPU's own tokens per expert (slot) and layer ``(L, G, E)``: the counts its early loads see."""
    n_layers = ids.shape[1]
    layers = np.arange(n_layers, dtype=np.int64)[None, :, None]
    own_at = (layers * G + own[:, None, None]) * E + ids
    if ids.min(initial=0) < 0:      # a recorded trace's empty slots (-1) route nowhere
        own_at = own_at[ids >= 0]
    return np.bincount(own_at.reshape(-1), minlength=n_layers * G * E).reshape(n_layers, G, E)


def _sparse_volumes(ids: np.ndarray, own: np.ndarray, G: int, El: int, nodes: int) -> tuple[Any, Any, Any, Any]:
    """``(send, recv, send_inter, recv_inter)`` per layer and GPU ``(L, G)`` (the last two None on one
    node), counted from each token's distinct destination GPUs other than its owner: O(rows x layers
    x K) work, where the dense ``(L, R, G)`` hit array of :func:`_dense_volumes` grows with G."""
    n_rows, n_layers, k = ids.shape
    dest = np.where(ids >= 0, ids // El, -1).transpose(2, 0, 1).copy()   # (K, R, L) destination GPUs
    hit = (dest >= 0) & (dest != own[None, :, None])
    for j in range(1, k):                                                 # each GPU once per token
        for i in range(j):
            hit[j] &= dest[j] != dest[i]
    size = n_layers * G
    layer_base = np.arange(n_layers, dtype=np.int64) * G
    sender = (layer_base[None, :] + own[:, None]).ravel()                 # (R L,) the owner's cell
    to = layer_base[None, None, :] + dest                                 # (K, R, L) the target's cell

    def per_gpu(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        sent = np.bincount(sender, weights=mask.sum(axis=0).ravel(), minlength=size)
        got = np.bincount(to[mask], minlength=size)
        return sent.reshape(n_layers, G).astype(np.float64), got.reshape(n_layers, G).astype(np.float64)

    send, recv = per_gpu(hit)
    if nodes <= 1:
        return send, recv, None, None
    per = G // nodes
    send_inter, recv_inter = per_gpu(hit & (dest // per != (own // per)[None, :, None]))   # to another node
    return send, recv, send_inter, recv_inter


def _dense_volumes(ids: np.ndarray, own: np.ndarray, G: int, El: int, nodes: int) -> tuple[Any, Any, Any, Any]:
    """The volumes from a dense ``(L, R, G)`` hit array (DeepEP's normal kernels need it: a token's
    relays per node)."""
    n_rows, n_layers, _ = ids.shape
    layers = np.arange(n_layers, dtype=np.int64)[None, :, None]
    row_numbers = np.arange(n_rows, dtype=np.int64)
    hit_at = (layers * n_rows + row_numbers[:, None, None]) * G + ids // El
    if ids.min(initial=0) < 0:      # a recorded trace's empty slots (-1) route nowhere
        hit_at = hit_at[ids >= 0]
    hit = np.zeros((n_layers, n_rows, G), dtype=bool)
    hit.reshape(-1)[hit_at.reshape(-1)] = True
    hit[:, row_numbers, own] = False
    owner_of = np.zeros((n_rows, G), dtype=np.int64)
    owner_of[np.arange(n_rows), own] = 1
    send = (hit.sum(axis=2) @ owner_of).astype(np.float64)      # (L, G)
    recv = hit.sum(axis=1).astype(np.float64)                   # (L, G)
    node = np.arange(G) // (G // nodes)
    far = hit & (node[own][:, None] != node[None, :])[None, :, :]     # to a GPU of another node
    send_inter = (far.sum(axis=2) @ owner_of).astype(np.float64)
    return _forwarded(hit, far, own, owner_of, nodes, send - send_inter, recv)


def _forwarded(hit: np.ndarray, far: np.ndarray, own: np.ndarray, owner_of: np.ndarray, nodes: int,
               near_send: np.ndarray, recv: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """DeepEP's normal kernels: ``(send, recv, send_inter, recv_inter)`` per layer and GPU, ``(L, G)``.
    ``hit`` ``(L, R, G)``: row r's token goes to GPU g (never its owner); ``far``: the hits of GPUs
    of other nodes; ``near_send``: what each GPU sends inside its own node."""
    n_layers, n_rows, G = hit.shape
    per = G // nodes
    far4 = far.reshape(n_layers, n_rows, nodes, per)
    node_hit = far4.any(axis=3)                                     # (L, R, N): another node to reach
    rank_of = np.zeros((n_rows, per), dtype=np.int64)
    rank_of[np.arange(n_rows), own % per] = 1                       # the sender's local rank
    send_inter = (node_hit.sum(axis=2) @ owner_of).astype(np.float64)
    # the relay of (token, node) is that node's GPU with the sender's local rank: it receives over
    # RDMA, keeps the token if it needs it, and forwards it over NVLink to the node's other targets
    recv_inter = np.matmul(node_hit.transpose(0, 2, 1).astype(np.int64), rank_of).reshape(n_layers, G)
    targets = np.matmul(far4.sum(axis=3).transpose(0, 2, 1), rank_of).reshape(n_layers, G)
    at_relay = far4[:, np.arange(n_rows), :, own % per]             # (R, L, N): the relay is a target
    relay_hit = np.tensordot(rank_of, at_relay.astype(np.int64), axes=([0], [0])).transpose(1, 2, 0).reshape(n_layers, G)
    forward = targets - relay_hit                                   # NVLink sends of a relay
    send = near_send + forward + send_inter
    recv_inter = recv_inter.astype(np.float64)
    return send, (recv - relay_hit) + recv_inter, send_inter, recv_inter
