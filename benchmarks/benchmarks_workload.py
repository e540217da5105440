"""Workload benchmarks (asv style; `python3 benchmarks/run.py workload`).

Target from issue 5: one synthetic step for 512 experts, B = 256, 60 MoE layers (top-10, the
Qwen3.5-397B-A17B shape) in under 10 ms.
"""
from __future__ import annotations

import numpy as np

from sievesim.workload.synthetic import SyntheticSource, preset_params


class SyntheticStep:
    params = [[0.0, 0.3]]
    param_names = ["persistence"]

    def setup(self, persistence: float) -> None:
        p = preset_params("qwen3.5-397b-a17b")  # 512 experts, top-10, 60 MoE layers
        from dataclasses import replace
        self.src = SyntheticSource(replace(p, persistence=persistence), seed=0)
        self.stream = self.src.stream(256, seed=1)
        self.stream.step()  # so persistence applies from the first timed step

    def time_step_512e_b256_l60(self, persistence: float) -> None:
        self.stream.step()


class TraceBatches:
    def setup(self) -> None:
        from sievesim.workload.traces import trace_from_arrays
        from sievesim.workload.batches import TraceSource
        import json
        rng = np.random.default_rng(0)
        n_req, length, num_layers, k, e = 512, 128, 24, 1, 128
        n = n_req * length
        arrays = {"topk_ids": rng.integers(0, e, (n, num_layers, k)).astype(np.int16),
                  "seq_id": np.repeat(np.arange(n_req), length).astype(np.int32),
                  "pos": np.tile(np.arange(length), n_req).astype(np.int32),
                  "phase": np.ones(n, dtype=np.int8),
                  "meta": json.dumps({"num_experts": e, "top_k": k})}
        self.stream = TraceSource(trace_from_arrays(arrays)).stream(256, seed=0)

    def time_distinct_step_b256(self) -> None:
        self.stream.step()
