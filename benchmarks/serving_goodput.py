"""Goodput vs rate per policy, and the largest rate meeting the SLOs, on the paper's three models.

For each model (its paper GPU count, B200) and policy (NoExp, AllExp, PIMoE per channel and per stack, Sieve), serves
``--requests`` requests, at least ``rate x --window`` (hh-rlhf lengths, Poisson, one seed) at each rate of the model's list, then
bisects between the highest rate that met the SLOs and the lowest that did not (``--steps`` halvings).
SLOs: TTFT <= 2 s and TPOT <= 50 ms, met by 90 % of the requests (``sievesim serve`` defaults).
Goodput, attainment and latencies are the whole run's (``whole_run`` in ``serve --json``; ``serve``
prints its steady-state window's), and the bisection judges the whole run too (``window=False``).
Prints Markdown tables (docs/serving.md) and, with ``--json FILE``, every run's record:

    python benchmarks/serving_goodput.py [--models qwen3-30b-a3b] [--requests 1000] [--window 30] [--steps 2]
    python benchmarks/serving_goodput.py --from-json a.json b.json --plot goodput.png   # tables again

The same numbers, one at a time: ``sievesim serve --model M --gpus G --policy P --rate R --requests N``
and ``sievesim serve ... --max-rate LO:HI --bisect-steps S``.
"""
from __future__ import annotations

import argparse
import json
import math
import time

from sievesim.serving import ServingSimulator, max_rate_under_slos, poisson_requests
from sievesim.serving.simulator import requests_for

MODELS = {"qwen3-30b-a3b": (1, (10, 25, 50, 100, 150, 200)),
          "gpt-oss-120b": (4, (25, 50, 100, 200, 400, 600)),
          "qwen3.5-397b-a17b": (8, (20, 40, 80, 120, 160, 240))}
#: Policies served; ``pimoe@stack`` is PIMoE on whole stacks (the strongest unit on the executed step,
#: docs/system.md) beside ``pimoe`` on channels (the paper's text, the default).
POLICIES = ("noexp", "allexp", "pimoe", "pimoe@stack", "sieve")


def _simulator(model: str, gpus: int, spec: str, seed: int) -> ServingSimulator:
    """The simulator of a policy spec: a policy name, or ``pimoe@UNIT``."""
    name, _, unit = spec.partition("@")
    return ServingSimulator(model, gpus=gpus, policy=name, seed=seed, gpu_model="roofline",   # the paper's GPU
                            **({"pimoe_unit": unit} if unit else {}))


def run(models: list[str], policies: list[str], requests: int, steps: int, seed: int,
        window: float | None) -> list[dict]:
    """Every run's record (``sievesim serve --json`` without ``kv_capacity``) and, per model and
    policy, a record of the bisection (``max_rate``: the bracket, or why there is none)."""
    records = []
    for model in models:
        gpus, rates = MODELS[model]
        for policy in policies:
            t0 = time.perf_counter()
            sim = _simulator(model, gpus, policy, seed)
            met, failed = None, None
            for rate in rates:
                n = requests_for(float(rate), requests, window)
                d = sim.run(poisson_requests(float(rate), n, seed=seed), float(rate)).to_dict()
                d.pop("kv_capacity")
                d["arrival_window_s"] = window
                d["policy"] = policy
                records.append(d)
                if _whole(d)["meets_slos"]:
                    met = rate
                elif failed is None:
                    failed = rate
            if met is None:
                best = f"< {rates[0]}"
            elif failed is None or failed < met:
                best = f">= {met}" if failed is None else f"{met} (not monotone: {failed} failed)"
            else:
                found = max_rate_under_slos(sim, requests=requests, lo=float(met), hi=float(failed), steps=steps,
                                            seed=seed, arrival_window_s=window, window=False)
                lo, hi = found["bracket"]
                best = f"{lo:.1f} .. {hi:.1f}"
            records.append({"model": model, "policy": policy, "max_rate": best})
            st = sim.pricer.stats()
            print(f"# {model} {policy}: {time.perf_counter() - t0:.0f} s wall, {st['grid_points_priced']} grid "
                  f"points, corner hit rate {st['corner_hit_rate']:.3f}", flush=True)
    return records


def _whole(d: dict) -> dict:
    """A run's record with its whole-run figures in place of its steady-state window's (records of an
    earlier version of this script hold the whole run's at the top)."""
    return {**d, **d.get("whole_run", {})}


def _best(value) -> str:
    """A bisection's bracket as text (records of an earlier version of this script hold the dict)."""
    if isinstance(value, dict):
        lo, hi = value["bracket"]
        return f"{lo:.1f} .. {hi:.1f}"
    return str(value)


def _table(rates, policies: list[str], runs: list[dict], cell) -> list[str]:
    """Markdown rows: one per rate, one column per policy, ``cell(record)`` in each."""
    rows = ["| rate [req/s] | " + " | ".join(policies) + " |", "|---:|" + "---|" * len(policies)]
    for rate in rates:
        found = [next((r for r in runs if r["policy"] == p and r["rate"] == rate), None) for p in policies]
        rows.append(f"| {rate} | " + " | ".join("" if d is None else cell(d) for d in found) + " |")
    return rows


def render(records: list[dict]) -> str:
    """Markdown tables: per model, goodput (attainment, TPOT p90, TTFT p90) per rate and policy."""
    out = []
    for model, (gpus, rates) in MODELS.items():
        runs = [_whole(r) for r in records if r.get("model") == model and "rate" in r]
        if not runs:
            continue
        policies = list(dict.fromkeys(r["policy"] for r in runs))
        r0 = runs[0]
        out.append(f"{model} on {gpus} x B200, at least {r0['requests']} requests and "
                   f"{r0.get('arrival_window_s')} s of arrivals (hh-rlhf, Poisson, seed {r0['seed']}): "
                   "goodput [requests/s] (SLO attainment, TPOT p90 [ms], TTFT p90 [s])\n")
        out += _table(rates, policies, runs, lambda d: f"{d['goodput_requests_per_s']:.1f} ({d['slo_attainment']:.0%}, "
                      f"{d['tpot_s']['p90'] * 1e3:.1f}, {d['ttft_s']['p90']:.2f})")
        out.append("\nmemo against exact steps, per rate (mean |memo - exact| / exact over its sampled iterations; "
                   "largest single error):\n")
        out += _table(rates, policies, runs, lambda d: f"{100 * d['pricing']['error_vs_exact']['mean_abs_rel']:.2f} % "
                      f"({100 * d['pricing']['error_vs_exact']['max_abs_rel']:.1f} %)")
        best = [r for r in records if r.get("model") == model and "max_rate" in r]
        out.append("\nmax rate meeting the SLOs [req/s]: " + "; ".join(f"{r['policy']} {_best(r['max_rate'])}" for r in best)
                   + "\n")
    return "\n".join(out)


def plot(records: list[dict], path: str) -> None:
    """Goodput vs rate per policy, one panel per model."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = [m for m in MODELS if any(r.get("model") == m and "rate" in r for r in records)]
    fig, axes = plt.subplots(1, len(models), figsize=(4.2 * len(models), 3.4), squeeze=False)
    for ax, model in zip(axes[0], models):
        runs = [_whole(r) for r in records if r.get("model") == model and "rate" in r]
        for p in dict.fromkeys(r["policy"] for r in runs):
            pts = sorted((r["rate"], r["goodput_requests_per_s"]) for r in runs if r["policy"] == p)
            ax.plot(*zip(*pts), marker="o", label=p)
        ax.set_title(f"{model} ({MODELS[model][0]} GPU)")
        ax.set_xlabel("rate [requests/s]")
        ax.set_ylabel("goodput [requests/s]")
        ax.grid(alpha=0.3)
    axes[0][0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--window", type=float, default=30.0,
                    help="serve at least rate x WINDOW requests (s; default 30): an overload shows only when it lasts")
    ap.add_argument("--json", default=None, help="write every record here")
    ap.add_argument("--from-json", default=None, nargs="+", help="render tables (and --plot) from saved records")
    ap.add_argument("--plot", default=None, help="goodput vs rate per policy (PNG)")
    args = ap.parse_args(argv)
    if args.from_json:
        records = [r for f in args.from_json for r in json.load(open(f, encoding="utf-8"))]
    else:
        records = run(args.models.split(","), args.policies.split(","), args.requests, args.steps, args.seed,
                      args.window)
    print(render(records))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(records, fh, default=lambda x: None if isinstance(x, float) and math.isnan(x) else x)
    if args.plot:
        plot(records, args.plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
