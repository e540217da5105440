"""Goodput vs rate per policy, and the largest rate meeting the SLOs, on the paper's three models.

For each model (its paper GPU count, B200) and policy (NoExp, AllExp, PIMoE per stack, Sieve), serves
``--requests`` requests (hh-rlhf lengths, Poisson, one seed) at each rate of the model's list, then
bisects between the highest rate that met the SLOs and the lowest that did not (``--steps`` halvings).
SLOs: TTFT <= 2 s and TPOT <= 50 ms, met by 90 % of the requests (``sievesim serve`` defaults).
Prints Markdown tables (docs/serving.md) and, with ``--json FILE``, every run's record:

    python benchmarks/serving_goodput.py [--models qwen3-30b-a3b] [--requests 1000] [--steps 3]

The same numbers, one at a time: ``sievesim serve --model M --gpus G --policy P --rate R --requests N``
and ``sievesim serve ... --max-rate LO:HI --bisect-steps S``.
"""
from __future__ import annotations

import argparse
import json
import math
import time

from sievesim.serving import ServingSimulator, max_rate_under_slos, poisson_requests

MODELS = {"qwen3-30b-a3b": (1, (10, 20, 30, 40, 50, 60)),
          "gpt-oss-120b": (4, (50, 100, 150, 200, 250, 300)),
          "qwen3.5-397b-a17b": (8, (25, 50, 75, 100, 125, 150))}
POLICIES = ("noexp", "allexp", "pimoe", "sieve")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    records = []
    for model in args.models.split(","):
        gpus, rates = MODELS[model]
        table: dict[str, list[str]] = {}
        best: dict[str, str] = {}
        for policy in args.policies.split(","):
            t0 = time.perf_counter()
            sim = ServingSimulator(model, gpus=gpus, policy=policy, seed=args.seed)
            met, failed = None, None
            cells = []
            for rate in rates:
                d = sim.run(poisson_requests(float(rate), args.requests, seed=args.seed), float(rate)).to_dict()
                d.pop("kv_capacity")
                records.append(d)
                cells.append(f"{d['goodput_requests_per_s']:.1f} ({d['slo_attainment']:.0%}, "
                             f"{d['tpot_s']['p90'] * 1e3:.1f} ms, {d['ttft_s']['p90']:.2f} s)")
                if d["meets_slos"]:
                    met = rate
                elif failed is None:
                    failed = rate
            table[policy] = cells
            if met is None:
                best[policy] = f"< {rates[0]}"
            elif failed is None or failed < met:
                best[policy] = f">= {met}" if failed is None else f"{met} (not monotone: {failed} failed)"
            else:
                found = max_rate_under_slos(sim, requests=args.requests, lo=float(met), hi=float(failed),
                                            steps=args.steps, seed=args.seed)
                lo, hi = found["bracket"]
                best[policy] = f"{lo:.1f} .. {hi:.1f}"
                records.append({"model": model, "policy": policy, "max_rate": found})
            err = sim.pricer.stats()
            print(f"# {model} {policy}: {time.perf_counter() - t0:.0f} s wall, {err['grid_points_priced']} grid "
                  f"points, corner hit rate {err['corner_hit_rate']:.3f}", flush=True)
        print(f"\n{model} on {gpus} x B200, {args.requests} requests (hh-rlhf, Poisson, seed {args.seed}): goodput "
              f"[requests/s] (SLO attainment, TPOT p90, TTFT p90)\n")
        print("| rate [req/s] | " + " | ".join(table) + " |")
        print("|---:|" + "---|" * len(table))
        for i, rate in enumerate(rates):
            print(f"| {rate} | " + " | ".join(table[p][i] for p in table) + " |")
        print("\nmax rate meeting the SLOs [req/s]: " + "; ".join(f"{p} {best[p]}" for p in best) + "\n", flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(records, fh, default=lambda x: None if isinstance(x, float) and math.isnan(x) else x)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
