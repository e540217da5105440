"""The fidelity tables of docs/system.md: every policy on the paper's three models with the defaults,
and the grouped GEMM pipelined against loaded-then-computed.

    python -m sievesim.benchmarks system-fidelity [--batches 1,4,8,16,32,64,256] [--gemm-batches 64,256]

Prints Markdown: executed step times [ms] of NoExp, AllExp, PIMoE per channel and per stack, and Sieve;
Sieve over AllExp and over the best baseline; Sieve's modelled decision latency [us] and its wasted
early-load bytes. Then NoExp and Sieve with the GEMM pipelined and sequential.
"""
from __future__ import annotations

import argparse
import sys

from sievesim.system import simulate_step

MODELS = {"qwen3-30b-a3b": 1, "gpt-oss-120b": 4, "qwen3.5-397b-a17b": 8}
POLICIES = (("noexp", None), ("allexp", None), ("pimoe", "channel"), ("pimoe", "stack"), ("sieve", None))


def policy_table(batches: list[int], models: dict[str, int] = MODELS) -> list[str]:
    lines = ["| model | B | NoExp | AllExp | PIMoE (channel) | PIMoE (stack) | Sieve | Sieve/AllExp | "
             "Sieve/best baseline | decision [us] | wasted early loads [B] |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for model, gpus in models.items():
        for b in batches:
            if b % gpus:
                continue
            res = {}
            for pol, unit in POLICIES:
                res[(pol, unit)] = simulate_step(model, gpus=gpus, policy=pol, batch=b, pimoe_unit=unit,
                                                 gpu_model="roofline")
            sieve = res[("sieve", None)]
            best = min(r.step_time_s for k, r in res.items() if k[0] != "sieve")
            lines.append(f"| {model} | {b} | " + " | ".join(f"{r.step_time_s * 1e3:.3f}" for r in res.values())
                         + f" | {res[('allexp', None)].step_time_s / sieve.step_time_s:.3f}"
                         + f" | {best / sieve.step_time_s:.3f} | {sieve.scheduler_us:.2f}"
                         + f" | {sieve.early_load_wasted_bytes:.0f} |")
    return lines


def gemm_table(batches: list[int], models: dict[str, int] = MODELS) -> list[str]:
    lines = ["| model | B | policy | sequential [ms] | pipelined [ms] | speedup |", "|---|---:|---|---:|---:|---:|"]
    for model, gpus in models.items():
        for b in batches:
            for pol in ("noexp", "sieve"):
                seq = simulate_step(model, gpus=gpus, policy=pol, batch=b, pipelined_gemm=False,
                                    gpu_model="roofline").step_time_s
                pip = simulate_step(model, gpus=gpus, policy=pol, batch=b, gpu_model="roofline").step_time_s
                lines.append(f"| {model} | {b} | {pol} | {seq * 1e3:.3f} | {pip * 1e3:.3f} | {seq / pip:.3f} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", default="1,4,8,16,32,64,256")
    ap.add_argument("--gemm-batches", default="64,256")
    args = ap.parse_args(argv)
    print("\n".join(policy_table([int(x) for x in args.batches.split(",")])))
    print()
    print("\n".join(gemm_table([int(x) for x in args.gemm_batches.split(",")])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
