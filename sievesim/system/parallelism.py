"""How a step splits its work over the GPUs, and what the hardware lets it run: the parallelism of
attention and experts, and the check that the PIM can compute on the experts as stored.

Attention is data-parallel (``dp``, the Sieve paper's: B/G requests per GPU) or tensor-parallel
(``tp``: every request, 1/G of the heads, :meth:`sievesim.models.ModelSpec.tensor_shard`); routed
experts are expert-parallel (``ep``: E/G whole experts per GPU) or, with tensor-parallel
attention, tensor-parallel (``tp``: every expert split by its intermediate size). The graph of a
tensor-parallel step is in :mod:`sievesim.system.tensor_parallel`.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import field_error

__all__ = ["ATTENTION_MODES", "EXPERT_MODES", "check_parallelism", "check_pim_formats", "with_nodes",
           "check_redundant", "sample_loads"]

#: How attention and the routed experts are split over the GPUs (``StepSimulator``'s ``attention``
#: and ``experts``): data-, tensor- and expert-parallel.
ATTENTION_MODES = ("dp", "tp")
EXPERT_MODES = ("ep", "tp")


def check_parallelism(attention: Any, experts: Any) -> tuple[str, str]:
    """Attention ``dp`` or ``tp``, experts ``ep`` or ``tp`` (the latter with ``tp`` attention)."""
    if attention not in ATTENTION_MODES:
        raise field_error("attention", attention, f"one of {list(ATTENTION_MODES)} (data- or tensor-parallel)")
    if experts not in EXPERT_MODES:
        raise field_error("experts", experts, f"one of {list(EXPERT_MODES)} (expert- or tensor-parallel)")
    if experts == "tp" and attention != "tp":
        raise field_error("experts", experts, "'ep' with data-parallel attention (tensor-parallel experts "
                                              "need tensor-parallel attention: --attention tp)")
    return attention, experts


def check_pim_formats(model: Any, hardware: Any, gpu_only: bool) -> None:
    """A PIM computes on the operand width it was built for: experts stored narrower (FP8, FP4)
    would need a dequantising PU, which no PIM preset has (docs/pim.md)."""
    if gpu_only or hardware.pim is None:
        return
    pim = hardware.pim
    if not np.isclose(model.expert_bytes_per_param, pim.operand_bytes):
        fmt = model.expert_format or f"{model.expert_bytes_per_param:g} bytes per weight"
        raise field_error("weight_format", f"experts={fmt}",
                          f"experts stored as the PIM computes them ({pim.operand_bytes:g}-byte operands, "
                          f"pim.operand_bytes of {hardware.name!r}): a PIM reads its weights where they lie and "
                          "has no dequantiser; use --weight-format experts=bf16, or policy gpu-only")


def with_nodes(hardware: Any, gpus: int, nodes: Any) -> tuple[Any, int]:
    """The hardware with ``gpus`` GPUs in ``nodes`` NVLink domains (``None``: as the hardware says),
    and the number of nodes. A node count that does not divide the GPUs, or nodes without a
    scale-out network, is refused naming it."""
    import dataclasses

    from .._validate import check_int

    link = hardware.interconnect
    if nodes is not None:
        if not isinstance(nodes, (int, np.integer)) or isinstance(nodes, bool) or nodes < 1:
            raise field_error("nodes", nodes, "a positive integer (NVLink domains the GPUs span)")
        check_int("nodes", nodes, "gpus")
        if gpus % nodes:
            raise field_error("nodes", nodes, f"a divisor of gpus = {gpus} (every node holds as many GPUs)")
        if nodes > 1 and (link.scaleout_bandwidth_bytes_per_s_per_direction is None
                          or link.scaleout_latency_s is None):
            raise field_error("nodes", nodes, f"1 on hardware {hardware.name!r}: it has no scale-out network "
                              "(interconnect.scaleout_bandwidth_bytes_per_s_per_direction, scaleout_latency_s)")
        link = dataclasses.replace(link, gpus_per_node=gpus // nodes)
        hardware = dataclasses.replace(hardware, interconnect=link)
    return hardware, link.nodes(gpus)


#: Steps of routing the redundant experts' placement is computed from (a stream of its own).
PLACEMENT_STEPS = 4


def check_redundant(redundant: Any, expert_mode: str) -> int | None:
    """A non-negative count of redundant expert replicas, only with expert parallelism; ``"auto"``
    gives None (the step simulator takes the fewest that make the experts a multiple of the GPUs)."""
    if isinstance(redundant, str) and redundant == "auto":
        return None
    if isinstance(redundant, bool) or not isinstance(redundant, (int, np.integer)) or not 0 <= redundant <= 1 << 16:
        raise field_error("redundant_experts", redundant, "a count of replicas from 0 to 65536, or 'auto'")
    if redundant and expert_mode != "ep":
        raise field_error("redundant_experts", redundant, "0 with tensor-parallel experts (every GPU holds every expert)")
    return int(redundant)


def resolve_redundant(redundant: int | str | None, num_experts: int, gpus: int, expert_mode: str = "ep") -> int:
    """The count of redundant replicas a run takes: ``redundant`` itself, or for ``"auto"`` (or None)
    the fewest that make ``num_experts`` + R a multiple of ``gpus`` (0 when ``gpus`` divides the
    experts, and under tensor-parallel experts)."""
    if redundant is None or (isinstance(redundant, str) and redundant == "auto"):
        return -int(num_experts) % int(gpus) if expert_mode == "ep" else 0
    return int(redundant)


def sample_loads(source: Any, batch: int, seed: int) -> np.ndarray:
    """Tokens per expert and MoE layer ``(L, E)`` over :data:`PLACEMENT_STEPS` steps of ``batch``
    requests drawn from ``source`` with a seed of their own (the statistics EPLB places from)."""
    from ..workload.routing import counts_from_ids

    stream = source.stream(batch, seed=[seed, 9])
    total = None
    for _ in range(PLACEMENT_STEPS):
        step = stream.step()
        counts = (counts_from_ids(step.topk_ids, source.num_experts) if step.topk_ids is not None
                  else np.asarray(step.counts, dtype=np.int64))
        total = counts if total is None else total + counts
    return total
