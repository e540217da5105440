"""Redundant experts: hot experts replicated on several GPUs, placed so that the busiest GPU's
expert load falls (DeepSeek's expert-parallel load balancer, EPLB).

Per MoE layer, from the experts' loads (tokens routed to each over a few sampled steps):

1. ``R`` redundant replicas go one at a time to the expert with the most load per replica.
2. The ``E + R`` replicas, each carrying its expert's load divided by its replica count, are
   packed onto the G GPUs, ``(E + R) / G`` slots each: heaviest replica first, onto the GPU with the
   least load among those with a free slot and no replica of that expert yet (balanced packing,
   as EPLB's ``balanced_packing``).
3. The busiest GPU of that packing is compared with two layouts that keep the plain one (expert
   ``e`` on GPU ``e G / E``): its replicas on the next GPUs, and (when G divides E) the plain
   layout itself with the spare slots left empty (expert ``-1``: no weights, no tokens). The best
   of them is kept, so that adding replicas never raises the busiest GPU's load.

A token routed to a replicated expert goes to one of its replicas, round robin by the token's
row. :meth:`Placement.to_slots` turns routing ids (expert ids) into slot ids; slot ``s`` lives on
GPU ``s // slots_per_gpu``, so the step treats slots as its experts.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import field_error

try:  # compiled with the package (setup.py); to_slots and counts_from_ids give the same integers
    from ._slots import slots_and_counts as _slots_and_counts
except ImportError:  # pragma: no cover - only when running from an unbuilt source tree
    _slots_and_counts = None

__all__ = ["Placement", "place", "gpu_loads"]


@dataclass(frozen=True)
class Placement:
    """Where every replica of every expert sits, per MoE layer."""

    slots_per_gpu: int
    slot_expert: np.ndarray      # (L, S) expert of each slot (-1: an empty slot)
    slot_table: np.ndarray       # (L, E, max replicas) slots of each expert's replicas (-1: none)
    replicas: np.ndarray         # (L, E) replicas of each expert

    @property
    def num_slots(self) -> int:
        return int(self.slot_expert.shape[1])

    def to_slots(self, ids: np.ndarray) -> np.ndarray:
        """Routing ids ``(T, L, K)`` of experts -> ids of slots (a replicated expert's tokens go
        round robin over its replicas by row; ``-1`` stays ``-1``)."""
        ids = np.asarray(ids, dtype=np.int64)
        t, n_layers, k = ids.shape
        layer = np.arange(n_layers)[None, :, None]
        valid = ids >= 0
        e = np.where(valid, ids, 0)
        reps = self.replicas[layer, e]
        pick = np.arange(t)[:, None, None] % reps
        slots = self.slot_table[layer, e, pick]
        return np.where(valid, slots, -1)

    def slots_and_counts(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`to_slots` of ``ids`` (T, L, K) and the tokens per slot ``(L, S)`` (int64), in one
        compiled pass where the package was built."""
        ids = np.asarray(ids)
        if _slots_and_counts is None or ids.dtype != np.int32 or ids.ndim != 3:
            from ..workload.routing import counts_from_ids
            slots = self.to_slots(ids)
            return slots, counts_from_ids(slots, self.num_slots)
        return _slots_and_counts(np.ascontiguousarray(ids), np.ascontiguousarray(self.replicas, dtype=np.int64),
                                 np.ascontiguousarray(self.slot_table, dtype=np.int64), self.num_slots)

    def split_counts(self, counts: np.ndarray) -> np.ndarray:
        """Counts ``(L, E)`` per expert -> ``(L, S)`` per slot: an expert's tokens split as evenly as
        whole tokens allow over its replicas (the first replicas take the remainder)."""
        counts = np.asarray(counts, dtype=np.int64)
        out = np.zeros(self.slot_expert.shape, dtype=np.int64)
        for layer in range(counts.shape[0]):
            reps = self.replicas[layer]
            for j in range(self.slot_table.shape[2]):
                has = reps > j
                share = counts[layer] // np.maximum(reps, 1) + (counts[layer] % np.maximum(reps, 1) > j)
                out[layer, self.slot_table[layer, has, j]] = share[has]
        return out


def gpu_loads(slot_loads: np.ndarray, slots_per_gpu: int) -> np.ndarray:
    """Load of each GPU from the load of each slot (``(..., S)`` -> ``(..., G)``)."""
    s = np.asarray(slot_loads, dtype=np.float64)
    return s.reshape(s.shape[:-1] + (-1, slots_per_gpu)).sum(axis=-1)


def _replica_counts(load: np.ndarray, redundant: int) -> np.ndarray:
    reps = np.ones(load.size, dtype=np.int64)
    for _ in range(redundant):
        reps[int(np.argmax(load / reps))] += 1
    return reps


def _contiguous(reps: np.ndarray, gpus: int, per_gpu: int) -> list[int]:
    """Slot -> expert: the experts in order, each followed by its replicas."""
    return [e for e in range(reps.size) for _ in range(int(reps[e]))]


def _plain(load: np.ndarray, gpus: int, per_gpu: int) -> tuple[np.ndarray, list[int]] | None:
    """The plain layout, each GPU's spare slots empty (-1); None when G does not divide E."""
    experts = load.size
    if experts % gpus:
        return None
    plain = experts // gpus
    layout = [e for g in range(gpus) for e in list(range(g * plain, (g + 1) * plain)) + [-1] * (per_gpu - plain)]
    return np.ones(experts, dtype=np.int64), layout


def _packed(load: np.ndarray, reps: np.ndarray, gpus: int, per_gpu: int) -> list[int] | None:
    """Slot -> expert by balanced packing (None if no GPU has room for a replica not already on it)."""
    items = sorted(((load[e] / reps[e], e) for e in range(reps.size) for _ in range(int(reps[e]))), key=lambda x: -x[0])
    gpu_load = np.zeros(gpus)
    held: list[list[int]] = [[] for _ in range(gpus)]
    for w, e in items:
        free = [g for g in range(gpus) if len(held[g]) < per_gpu and e not in held[g]]
        if not free:
            return None
        g = min(free, key=lambda x: (gpu_load[x], x))
        held[g].append(e)
        gpu_load[g] += w
    return [e for g in range(gpus) for e in sorted(held[g])]


def place(loads: np.ndarray, gpus: int, redundant: int) -> Placement:
    """The placement of every MoE layer from its experts' loads ``(L, E)`` (tokens)."""
    loads = np.asarray(loads, dtype=np.float64)
    n_layers, experts = loads.shape
    if redundant < 0 or (experts + redundant) % gpus:
        raise field_error("redundant_experts", redundant, f"a count that makes experts + redundant a multiple of "
                          f"gpus = {gpus} ({experts} experts: every GPU holds as many replicas)")
    per_gpu = (experts + redundant) // gpus
    slot_expert = np.zeros((n_layers, experts + redundant), dtype=np.int64)
    reps_all = np.zeros((n_layers, experts), dtype=np.int64)
    for layer in range(n_layers):
        load = loads[layer] + 1e-9          # an unused expert still weighs: ties broken by order
        reps = _replica_counts(load, redundant)
        candidates = [(reps, _packed(load, reps, gpus, per_gpu)), (reps, _contiguous(reps, gpus, per_gpu))]
        plain = _plain(load, gpus, per_gpu)
        if plain is not None:
            candidates.append(plain)
        best = None
        for r, layout in candidates:
            if layout is None:
                continue
            busiest = gpu_loads(np.append(load / r, 0.0)[np.asarray(layout)], per_gpu).max()   # -1: empty
            if best is None or busiest < best[0] - 1e-9:
                best = (busiest, r, layout)
        slot_expert[layer] = best[2]
        reps_all[layer] = best[1]
    max_rep = int(reps_all.max())
    table = np.full((n_layers, experts, max_rep), -1, dtype=np.int64)
    for layer in range(n_layers):
        seen = np.zeros(experts, dtype=np.int64)
        for slot, e in enumerate(slot_expert[layer]):
            if e >= 0:
                table[layer, e, seen[e]] = slot
                seen[e] += 1
    return Placement(per_gpu, slot_expert, table, reps_all)
