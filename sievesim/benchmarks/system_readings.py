"""Executed throughput per GPU of every policy under the paper's reading and its alternatives.

Prints one Markdown table per model (the paper's GPU counts, B = 1, 16, 64, 256): AllExp, PIMoE
(stack), NoExp, GPU-only and Sieve under four readings of the paper (docs/system.md, "Readings"):

* ``text``: the paper's text: Equation 1 with attention in T_PIM, early weight loads, a modelled
  decision latency of 20 us per 256 experts;
* ``no-early``: as ``text`` without early weight loads;
* ``no-attn``: as ``no-early`` and Sieve leaves attention out of T_PIM;
* ``experts-only``: as ``no-early`` and Sieve weighs the expert work of each side alone (no
  attention, no non-MoE GPU work, no interconnect: the terms that overlap in Figure 8);
* ``0 us``: a decision latency of 0 (for Sieve and PIMoE).

    python -m sievesim.benchmarks system-readings [--batches 1,16,64,256] [--steps 1] [--warmup 2]
"""
from __future__ import annotations

import argparse
import dataclasses
import sys

from sievesim.hardware import get_hardware
from sievesim.system import simulate_step

MODELS = {"qwen3-30b-a3b": 1, "gpt-oss-120b": 4, "qwen3.5-397b-a17b": 8}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", default="1,16,64,256")
    ap.add_argument("--steps", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=2)
    args = ap.parse_args(argv)
    batches = [int(b) for b in args.batches.split(",")]
    hw = get_hardware("b200")
    hw0 = dataclasses.replace(hw, gpu=dataclasses.replace(hw.gpu, scheduler_latency_s=0.0))
    cols = [("AllExp", "allexp", {}, hw, True), ("NoExp", "noexp", {}, hw, True),
            ("GPU-only", "gpu-only", {}, hw, True),
            ("PIMoE text", "pimoe", {}, hw, True), ("PIMoE no-early", "pimoe", {}, hw, False),
            ("PIMoE 0 us", "pimoe", {}, hw0, False),
            ("Sieve text", "sieve", {}, hw, True), ("Sieve no-early", "sieve", {}, hw, False),
            ("Sieve no-attn", "sieve", {"include_attention": False}, hw, False),
            ("Sieve experts-only", "sieve", {"experts_only": True}, hw, False),
            ("Sieve experts-only, 0 us", "sieve", {"experts_only": True}, hw0, False)]
    for model, gpus in MODELS.items():
        print(f"\n{model} on {gpus} GPU(s): executed throughput [tokens/s/GPU]\n")
        print("| B | " + " | ".join(c[0] for c in cols) + " |")
        print("|---:|" + "---:|" * len(cols))
        for b in batches:
            if b % gpus:
                continue
            cells = []
            for _, pol, opts, h, early in cols:
                r = simulate_step(model, h, gpus=gpus, policy=pol, batch=b, steps=args.steps, warmup=args.warmup,
                                  early_loads=early, policy_options=opts)
                cells.append(f"{r.throughput_tokens_per_s_per_gpu:.0f}")
            print(f"| {b} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
