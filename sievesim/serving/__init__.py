"""Serving: requests that arrive, continuous batching, KV capacity, latency percentiles and goodput.

A layer above the system step (docs/serving.md): :mod:`~sievesim.serving.workload` makes or reads
the requests, :mod:`~sievesim.serving.scheduler` batches them continuously (chunked prefill beside
decode, KV blocks, preemption by recompute), :mod:`~sievesim.serving.pricing` prices every
iteration by the executed step (memoised, its error measured), :mod:`~sievesim.serving.metrics`
aggregates latencies, and :mod:`~sievesim.serving.simulator` ties them together
(:mod:`~sievesim.serving.result` is what it returns). With ``prefill_gpus``,
:mod:`~sievesim.serving.disagg` serves on a prefill pool and a decode pool instead, the KV cache
moved over the interconnect (:mod:`~sievesim.serving.disagg_result`: its result).
"""
from __future__ import annotations

from .metrics import SloTargets
from .pricing import IterationPricer, MemoError
from .scheduler import SchedulerConfig
from .simulator import ServingResult, ServingSimulator, max_rate_under_slos, simulate_serving
from .workload import Requests, poisson_requests, read_trace

__all__ = ["simulate_serving", "ServingSimulator", "ServingResult", "SchedulerConfig", "SloTargets",
           "IterationPricer", "MemoError", "Requests", "poisson_requests", "read_trace", "max_rate_under_slos"]
