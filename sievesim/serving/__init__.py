"""Serving: requests that arrive, continuous batching, KV capacity, latency percentiles and goodput.

A layer above the system step (docs/serving.md): :mod:`~sievesim.serving.workload` makes or reads
the requests, :mod:`~sievesim.serving.scheduler` batches them continuously (chunked prefill beside
decode, KV blocks, preemption by recompute), :mod:`~sievesim.serving.pricing` prices every
iteration by the executed step (memoised, its error measured), :mod:`~sievesim.serving.metrics`
aggregates latencies, and :mod:`~sievesim.serving.simulator` ties them together.
"""
from __future__ import annotations

from .metrics import SloTargets
from .pricing import IterationPricer, MemoError
from .scheduler import SchedulerConfig
from .simulator import ServingResult, ServingSimulator, max_rate_under_slos, simulate_serving
from .workload import Requests, poisson_requests, read_trace

__all__ = ["simulate_serving", "ServingSimulator", "ServingResult", "SchedulerConfig", "SloTargets",
           "IterationPricer", "MemoError", "Requests", "poisson_requests", "read_trace", "max_rate_under_slos"]
