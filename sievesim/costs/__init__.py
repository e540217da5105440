"""Cost estimates that the expert-partitioning policies use (paper Section 5, Equation 1).

These are the scheduler's *estimates*; the executed times come later from the engine and the
layer DAG. Everything here is plain arithmetic on numbers taken from the model and hardware
specs, so this module never imports the engine (``sievesim._core``) or ``sievesim.dram``.

For one MoE layer on one GPU, with ``E`` the experts of that GPU that received tokens,
``S`` the subset run on its HBM-PIM and ``G = E - S`` the subset run on the GPU::

    T_total(S) = max(T_comm, T_GPU(G), T_PIM(S))
    T_GPU(G)   = max(T_offchip(G), T_comp(G))
    T_PIM(S)   = T_attention + sum_{e in S} t_pim(n_e)                 (tensor-parallel PIM)
               = T_attention + max_u sum_{e in S on unit u} t_unit(n_e)  (expert-parallel PIM)

* ``T_comm``: AllGather of routing maps + dispatch + combine over the interconnect, from the
  routing only (independent of ``S``).
* ``T_offchip(G)``: bytes moved between HBM and the GPU: the layer's non-MoE weights and
  activations, the weights of every expert in ``G`` once (grouped GEMM), and the activations
  of every (token, expert) pair in ``G``; divided by the effective HBM bandwidth.
* ``T_comp(G)``: the layer's non-MoE FLOPs plus ``2 * params_per_expert * tokens(G)``,
  divided by the effective peak.
* ``t_pim(n)``: a :class:`PimCostModel` (roofline :class:`RooflinePimCost`, or the EMA
  :class:`PimCostTable` fed by the engine), which also prices decode attention on PIM.

All times are in seconds, sizes in bytes, rates in FLOP/s and bytes/s.
"""
from __future__ import annotations

from .context import (CostBreakdown, CostContext, _DEFAULT_IDS, _get, _organisation, build_context, context_from_numbers,
                      default_ids, default_layer, moe_layer_index, pim_organisation, pim_peak_flops, validate_counts)
from .gpu import (CommBreakdown, GpuWork, _layer_kind, attention_shape, comm_time_s, dispatch_pairs_from_routing,
                  gpu_roofline_time_s, non_moe_work)
from .gpu_model import (DEFAULT_GPU_MODEL, GPU_MODELS, CalibratedGpuModel, GpuModel, RooflineGpuModel,
                        attention_node_kind, gpu_model)
from .pim_cost import (DEFAULT_CONTEXT_LEN, UNITS, AttentionShape, PimCostModel, PimCostTable, PimOrganisation,
                       RooflinePimCost, _expert_time_array)

__all__ = [
    "DEFAULT_CONTEXT_LEN",
    "UNITS",
    "PimOrganisation",
    "PimCostModel",
    "AttentionShape",
    "RooflinePimCost",
    "PimCostTable",
    "GpuWork",
    "CommBreakdown",
    "CostBreakdown",
    "CostContext",
    "gpu_roofline_time_s",
    "comm_time_s",
    "dispatch_pairs_from_routing",
    "attention_shape",
    "non_moe_work",
    "validate_counts",
    "moe_layer_index",
    "pim_organisation",
    "build_context",
    "GPU_MODELS",
    "DEFAULT_GPU_MODEL",
    "GpuModel",
    "RooflineGpuModel",
    "CalibratedGpuModel",
    "gpu_model",
    "attention_node_kind",
]
