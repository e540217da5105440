"""Overlap (ours) and the paper's Sieve against the best baseline at every batch, executed.

Every point runs as the figures run it (``reproduce fig9``'s settings and its warm-up to a converged
cost table, the paper's roofline GPU unless ``--gpu-model``): NoExp, AllExp, PIMoE per channel and
per stack, Sieve and Overlap. Prints one Markdown row per model, micro-batch count and batch: the
best baseline (of NoExp, AllExp, PIMoE per channel, PIMoE per stack and Sieve) with its throughput
per GPU, and Sieve's and Overlap's throughput as a ratio of it.

    python -m sievesim.benchmarks policy-table [--models qwen3-30b-a3b,...] [--batches 1,16]
        [--microbatches 1,2] [--gpu-model roofline]
"""
from __future__ import annotations

import argparse
import sys
from typing import Any

from sievesim.errors import ConfigError
from sievesim.reproduce.common import point_settings
from sievesim.reproduce.fig9 import _step_batches
from sievesim.reproduce.warmup import WARMUP_LIMIT, converged_step_point

#: The models of the table and their GPUs: the paper's three (its GPU counts), then DeepSeek-V3 and
#: Llama-4-Maverick on one 8-GPU box.
MODELS = {"qwen3-30b-a3b": 1, "gpt-oss-120b": 4, "qwen3.5-397b-a17b": 8, "deepseek-v3": 8, "llama4-maverick": 8}
#: The baselines Overlap is held against (the paper's Sieve among them), in the table's order.
BASELINES = (("NoExp", "noexp", None), ("AllExp", "allexp", None), ("PIMoE (channel)", "pimoe", "channel"),
             ("PIMoE (stack)", "pimoe", "stack"), ("Sieve", "sieve", None))
HEADER = ("| model | GPUs | micro-batches | B | best baseline | its tokens/s/GPU | Sieve / best | Overlap / best |\n"
          "|---|---:|---:|---:|---|---:|---:|---:|")


def check_fits(model: str, gpus: int, batch: int) -> None:
    """A :class:`~sievesim.errors.ConfigError` when the point does not fit the GPUs' HBM."""
    from sievesim.system import StepSimulator
    StepSimulator(model, "b200", gpus=gpus, policy="allexp", batch=batch)


def throughput(model: str, gpus: int, policy: str, batch: int, *, unit: str | None = None, microbatches: int = 1,
               gpu_model: str = "roofline", seed: int = 0) -> float:
    """Executed throughput [tokens/s/GPU] of one point, warmed up as the figures warm up."""
    p: dict[str, Any] = point_settings(model, gpus, policy, batch, "text", unit=unit, warmup=WARMUP_LIMIT, seed=seed)
    p["gpu_model"] = gpu_model
    if microbatches > 1:
        p["microbatches"] = microbatches
    return float(converged_step_point(p)["throughput_tokens_per_s_per_gpu"])


def row(model: str, gpus: int, batch: int, microbatches: int = 1, gpu_model: str = "roofline") -> str:
    """The table's row of one point (see the module docstring); a point whose weights and KV cache
    do not fit the GPUs says so."""
    try:
        check_fits(model, gpus, batch)
    except ConfigError as exc:
        need = str(exc).split(": needs ")[-1].split(" (")[0]
        return f"| {model} | {gpus} | {microbatches} | {batch} | does not fit ({need}) | | | |"
    tput = {name: throughput(model, gpus, pol, batch, unit=unit, microbatches=microbatches, gpu_model=gpu_model)
            for name, pol, unit in BASELINES}
    best = max(tput, key=lambda k: (tput[k], -list(tput).index(k)))
    overlap = throughput(model, gpus, "overlap", batch, microbatches=microbatches, gpu_model=gpu_model)
    return (f"| {model} | {gpus} | {microbatches} | {batch} | {best} | {tput[best]:.1f} | "
            f"{tput['Sieve'] / tput[best]:.3f} | {overlap / tput[best]:.3f} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sievesim.benchmarks policy-table",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated (default: %(default)s)")
    ap.add_argument("--batches", default=None, help="comma-separated (default: Figure 9's batches per model)")
    ap.add_argument("--microbatches", default="1,2", help="comma-separated (default: %(default)s)")
    ap.add_argument("--gpu-model", default="roofline", choices=("roofline", "calibrated"))
    args = ap.parse_args(argv)
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    for m in models:
        if m not in MODELS:
            ap.error(f"--models: {m!r} is not one of {', '.join(MODELS)}")
    try:
        mbs = [int(x) for x in args.microbatches.split(",")]
        wanted = [int(x) for x in args.batches.split(",")] if args.batches else None
    except ValueError as exc:
        ap.error(f"--batches/--microbatches: {exc}")
    print(f"executed step, GPU model: {args.gpu_model}, hardware b200\n")
    print(HEADER)
    for model in models:
        gpus = MODELS[model]
        for mb in mbs:
            batches = _step_batches(gpus, False, mb)
            if wanted is not None:
                batches = [b for b in batches if b in wanted]
            for b in batches:
                print(row(model, gpus, b, mb, args.gpu_model), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
