"""Equation 1 (the policy's estimate, summed over layers) beside the executed step time.

Prints a Markdown table per model (the paper's GPU counts) for B = 1, 16, 64, 256 and the
policies NoExp, AllExp, PIMoE (stack) and Sieve, under the default settings of ``sievesim run``:

    python -m sievesim.benchmarks system-estimates [--batches 1,16,64,256]
"""
from __future__ import annotations

import argparse
import sys

from sievesim.system import simulate_step

MODELS = {"qwen3-30b-a3b": 1, "gpt-oss-120b": 4, "qwen3.5-397b-a17b": 8}
POLICIES = ("noexp", "allexp", "pimoe", "sieve")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", default="1,16,64,256")
    args = ap.parse_args(argv)
    for model, gpus in MODELS.items():
        print(f"\n{model} on {gpus} GPU(s): step time [ms], estimate / executed\n")
        print("| B | " + " | ".join(f"{p} est | {p} exec" for p in POLICIES) + " |")
        print("|---:|" + "---:|---:|" * len(POLICIES))
        for b in (int(x) for x in args.batches.split(",")):
            b = max(gpus, b - b % gpus)
            cells = []
            for p in POLICIES:
                r = simulate_step(model, gpus=gpus, policy=p, batch=b, gpu_model="roofline")
                cells += [f"{r.estimated_step_time_s * 1e3:.3f}", f"{r.step_time_s * 1e3:.3f}"]
            print(f"| {b} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
