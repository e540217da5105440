"""Serving benchmarks: wall time of serving 1,000 requests (hh-rlhf lengths, Poisson, seed 0) under
Sieve, with the memo's hit rate and its error against exact steps.

Targets (issue 24): Qwen3.5-397B-A17B on 8 GPUs at a rate that keeps the batch near 256, 1,000
requests in <= 60 s on one core (10,000 in <= 5 min); Qwen3-30B-A3B on one GPU, 1,000 requests in
<= 20 s. Run with ``python benchmarks/run.py serving``.
"""
from __future__ import annotations

import functools

from sievesim.serving import ServingSimulator, poisson_requests

#: model -> (GPUs, rate [requests/s]); Qwen3.5 at 100/s runs a batch of about 256 once the queue fills.
CASES = {"qwen3-30b-a3b": (1, 20.0), "qwen3.5-397b-a17b": (8, 100.0)}


def _serve(model: str, requests: int = 1000) -> dict:
    """Serve ``requests`` requests of ``model``'s case with a new simulator; its JSON record."""
    gpus, rate = CASES[model]
    sim = ServingSimulator(model, gpus=gpus, policy="sieve")
    return sim.run(poisson_requests(rate, requests, seed=0), rate).to_dict()


@functools.lru_cache(maxsize=None)
def _served(model: str) -> dict:
    return _serve(model)


class Serve1000:
    """1,000 requests from a new simulator (its memo empty): the wall time, and from one run the
    memo's corner hit rate, its error against exact steps (mean |memo - exact| / exact over 20
    sampled iterations, percent) and the mean batch."""

    params = (list(CASES),)
    param_names = ["model"]
    repeat = 1
    number = 1
    timeout = 600

    def time_serve_1000_requests(self, model: str) -> None:
        _serve(model)

    def track_memo_corner_hit_rate(self, model: str) -> float:
        return _served(model)["pricing"]["corner_hit_rate"]

    def track_memo_error_percent(self, model: str) -> float:
        return 100.0 * _served(model)["pricing"]["error_vs_exact"]["mean_abs_rel"]

    def track_memo_max_error_percent(self, model: str) -> float:
        return 100.0 * _served(model)["pricing"]["error_vs_exact"]["max_abs_rel"]

    def track_mean_batch(self, model: str) -> float:
        return _served(model)["batch"]["mean"]


if __name__ == "__main__":      # one line per case, for docs/serving.md
    import time

    for m in CASES:
        t0 = time.perf_counter()
        d = _serve(m)
        e = d["pricing"]["error_vs_exact"]
        print(f"{m}: {time.perf_counter() - t0:.1f} s wall, {d['iterations']} iterations, mean batch "
              f"{d['batch']['mean']:.1f}, {d['pricing']['grid_points_total']} grid points, corner hit rate "
              f"{d['pricing']['corner_hit_rate']:.3f}, memo error mean {100 * e['mean_abs_rel']:.2f} % max "
              f"{100 * e['max_abs_rel']:.2f} % bias {100 * e['mean_rel']:+.2f} % ({e['samples']} samples)")
