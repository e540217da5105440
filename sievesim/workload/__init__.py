"""Workloads: routing (real traces, SGLang dumps, synthetic) and request lengths.

The one routing interface is :class:`RoutingSource` -> :class:`RoutingStream` -> :class:`RoutingStep`
(``topk_ids`` (B, L, K) and ``counts`` (L, E)); see ``docs/workloads.md``.
"""
from __future__ import annotations

from .batches import BATCH_MODES, PassCountSource, TraceSource, open_source
from .routing import RoutingSource, RoutingStep, RoutingStream, counts_from_ids
from .stats import BatchStats, act_param_ratio, routing_stats
from .synthetic import PRESETS, SyntheticParams, SyntheticSource, preset_params
from .traces import PassCounts, TraceData, check_model, load_routing, load_trace, save_trace, trace_from_arrays

__all__ = [
    "BATCH_MODES", "PassCountSource", "TraceSource", "open_source",
    "RoutingSource", "RoutingStep", "RoutingStream", "counts_from_ids",
    "BatchStats", "act_param_ratio", "routing_stats",
    "PRESETS", "SyntheticParams", "SyntheticSource", "preset_params",
    "PassCounts", "TraceData", "check_model", "load_routing", "load_trace", "save_trace", "trace_from_arrays",
]
