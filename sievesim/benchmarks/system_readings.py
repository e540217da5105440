"""Executed throughput per GPU of every policy under the default reading and its alternatives.

Prints one Markdown table per model (the paper's GPU counts): AllExp, NoExp, PIMoE per channel and
per stack, and Sieve under the default reading (the paper's text with the fidelity fixes of
docs/system.md) and its alternatives (docs/system.md, "Readings"):

* ``paper early``: the paper's early-load rule (>= 2 local tokens) instead of the default
  (experts whose local tokens alone make the GPU the cheaper side);
* ``no-early``: no early weight loads;
* ``no-attn``: Sieve leaves attention out of T_PIM;
* ``experts-only``: Sieve weighs the expert work of each side alone (the terms that overlap in
  Figure 8);
* ``0 us``: a decision latency of 0;
* ``matching``: no early loads, 0 us, experts-only (the alternative reading of ``reproduce fig9-matching``);
* ``stack``: Sieve's rule on PIMoE's per-stack placement (``--policy-option unit=stack``).

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
    cols = [("AllExp", "allexp", {}, hw, None), ("NoExp", "noexp", {}, hw, None),
            ("PIMoE (channel)", "pimoe", {"unit": "channel"}, hw, None),
            ("PIMoE (stack)", "pimoe", {"unit": "stack"}, hw, None),
            ("Sieve", "sieve", {}, hw, None), ("Sieve paper early", "sieve", {}, hw, "paper"),
            ("Sieve no-early", "sieve", {}, hw, "off"),
            ("Sieve no-attn", "sieve", {"include_attention": False}, hw, None),
            ("Sieve experts-only", "sieve", {"experts_only": True}, hw, None),
            ("Sieve 0 us", "sieve", {}, hw0, None),
            ("Sieve matching", "sieve", {"experts_only": True}, hw0, "off"),
            ("Sieve (stack)", "sieve", {"unit": "stack"}, hw, None)]
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
                                  early_loads=early, policy_options=opts, gpu_model="roofline")
                cells.append(f"{r.throughput_tokens_per_s_per_gpu:.0f}")
            print(f"| {b} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
