"""The serving memo against exact steps on the paper's three models, for Poisson and bursty arrivals,
and the burst of prompts that one long prompt would overprice.

For each model (its paper GPU count, B200, the default calibrated GPU model) under Sieve: ``--requests``
requests (hh-rlhf lengths, seed 0) at the model's rate, Poisson (CV 1) and bursty (gamma, CV 4),
with ``--samples`` iterations spread over the arrivals priced both by the memo and by their exact
step (``serve --error-samples``); then 8 prompts of 256 tokens arriving at one instant, whose TTFT
is one prefill iteration of 2,048 tokens, served with the memo and with ``--exact``. Prints a
Markdown table (docs/serving.md, "The memo's error"):

    python benchmarks/serving_memo_error.py [--models qwen3-30b-a3b] [--requests 500] [--samples 40]

One cell, alone: ``sievesim serve --model M --gpus G --rate R --cv CV --requests N --error-samples S --json``
(``pricing.error_vs_exact``); the burst: ``sievesim serve --model M --gpus G --trace burst.csv [--exact]``.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from sievesim.serving import ServingSimulator, poisson_requests
from sievesim.serving.workload import Requests

#: Model: (GPUs, rate [requests/s]): the paper's GPU counts, a rate each serves within its SLOs.
MODELS = {"qwen3-30b-a3b": (1, 50.0), "gpt-oss-120b": (4, 100.0), "qwen3.5-397b-a17b": (8, 40.0)}
CVS = (1.0, 4.0)


def burst(prompts: int = 8, tokens: int = 256, output: int = 2) -> Requests:
    """``prompts`` requests of ``tokens`` prompt tokens arriving at one instant."""
    z = np.zeros(prompts)
    return Requests(z, np.full(prompts, tokens, dtype=np.int64), np.full(prompts, output, dtype=np.int64),
                    f"{prompts} prompts of {tokens} tokens at one instant")


def cell(model: str, cv: float, requests: int, samples: int) -> dict:
    """The memo's error on one model's run at its rate with arrivals of this CV."""
    gpus, rate = MODELS[model]
    sim = ServingSimulator(model, gpus=gpus, policy="sieve", error_samples=samples, seed=0)
    d = sim.run(poisson_requests(rate, requests, seed=0, cv=cv), rate).to_dict()
    return {"model": model, "gpus": gpus, "rate": rate, "cv": cv, "requests": requests, **d["pricing"]["error_vs_exact"]}


def burst_ttft(model: str) -> dict:
    """TTFT [s] of the burst with the memo and with exact steps."""
    gpus, _ = MODELS[model]
    out = {}
    for exact in (False, True):
        sim = ServingSimulator(model, gpus=gpus, policy="sieve", exact=exact, error_samples=0, seed=0)
        out["exact" if exact else "memo"] = float(np.mean(sim.run(burst()).ttft))
    return out


def row(c: dict) -> str:
    return (f"| {c['model']} | {c['gpus']} | {c['rate']:g} | {c['cv']:g} | {c['samples']} | "
            f"{100 * c['mean_abs_rel']:.2f} % | {100 * c['max_abs_rel']:.2f} % | {100 * c['mean_rel']:+.2f} % |")


def burst_row(model: str, b: dict) -> str:
    return (f"| {model} | {MODELS[model][0]} | {b['memo'] * 1e3:.3f} | {b['exact'] * 1e3:.3f} | "
            f"{100 * (b['memo'] - b['exact']) / b['exact']:+.2f} % |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated (default: the three)")
    ap.add_argument("--requests", type=int, default=500)
    ap.add_argument("--samples", type=int, default=40)
    a = ap.parse_args(argv)
    models = [m for m in a.models.split(",") if m]
    print("| model | GPUs | rate [req/s] | CV | samples | mean abs. error | largest | mean (bias) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    bursts = {}
    for m in models:
        t0 = time.perf_counter()
        for cv in CVS:
            print(row(cell(m, cv, a.requests, a.samples)), flush=True)
        bursts[m] = burst_ttft(m)
        print(f"<!-- {m}: {time.perf_counter() - t0:.0f} s wall -->", flush=True)
    print("\n8 prompts of 256 tokens at one instant: TTFT [ms]\n")
    print("| model | GPUs | memo | exact | memo - exact |")
    print("|---|---:|---:|---:|---:|")
    for m in models:
        print(burst_row(m, bursts[m]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
