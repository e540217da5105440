"""Where a warm decode step's wall time goes, section by section (the rack-scale issue's step cost).

Wraps the step's parts (the routing draw, each Figure-8 node builder, the decisions, the schedule,
the results) with timers and runs warm steps of the two RackStep cases of
``benchmarks/benchmarks_system.py``; prints the mean milliseconds per step of each part and the rest::

    python benchmarks/step_sections.py [box|rack] [--steps N]

``box``: Qwen3.5-397B-A17B on 8 B200s at B = 256 under Sieve; ``rack``: DeepSeek-V3 in FP8 GPU-only
on a GB200 NVL72 (72 GPUs, B = 72 x 64, 32 redundant experts). The timers add a little to every call.
"""
from __future__ import annotations

import argparse
import collections
import time
from typing import Any, Callable

from sievesim.system import figure8 as f8, step as step_module
from sievesim.system.step import StepSimulator

_FIGURE8 = ("add_embedding", "add_attention", "add_dense_mlp", "route", "add_allgather", "add_metadata",
            "add_dispatch", "decide", "decide_all", "add_decision", "add_shared_expert", "add_early_load",
            "add_gpu_path", "add_pim_path", "add_combine_aggregate", "add_lm_head")


def _timed(fn: Callable[..., Any], name: str, acc: collections.Counter) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            acc[name] += time.perf_counter() - t0
    return wrapper


def sections(case: str, steps: int = 3) -> tuple[float, dict[str, float]]:
    """Mean wall time of one warm step [s] and of each part [s] over ``steps`` steps."""
    acc: collections.Counter = collections.Counter()
    for name in _FIGURE8:
        setattr(f8, name, _timed(getattr(f8, name), name, acc))
    for name in ("ExpertRows", "add_early_and_gpu_path"):
        setattr(f8, name, _timed(getattr(f8, name), name, acc))
    step_module.execute = _timed(step_module.execute, "execute", acc)
    for name in ("_step_tokens", "_step_results", "_learn"):
        setattr(StepSimulator, name, _timed(getattr(StepSimulator, name), name, acc))
    if case == "box":
        sim = StepSimulator("qwen3.5-397b-a17b", gpus=8, policy="sieve", batch=256)
    else:
        sim = StepSimulator("deepseek-v3", "gb200-nvl72", gpus=72, policy="gpu-only", batch=72 * 64,
                            weight_format="fp8-block", redundant_experts=32, energy=False)
    sim.run_step(grow_contexts=False)
    acc.clear()
    t0 = time.perf_counter()
    for _ in range(steps):
        sim.run_step(grow_contexts=False)
    total = (time.perf_counter() - t0) / steps
    return total, {k: v / steps for k, v in acc.most_common()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("case", choices=("box", "rack"))
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    total, parts = sections(args.case, args.steps)
    print(f"{args.case}: {total * 1e3:.1f} ms per warm step")
    for name, seconds in parts.items():
        print(f"  {name:24s} {seconds * 1e3:7.1f} ms  {100 * seconds / total:4.1f} %")
    print(f"  {'(the rest)':24s} {(total - sum(parts.values())) * 1e3:7.1f} ms")


if __name__ == "__main__":
    main()
