"""Colocated against disaggregated prefill on one model: goodput, TTFT, TPOT vs rate.

Serves the same requests (hh-rlhf lengths, Poisson, one seed, at least ``rate x --window``) on
``--gpus`` GPUs colocated (chunked prefill beside decode) and split ``P:D`` for each split of
``--splits`` (P GPUs prefill, D decode, the KV cache over NVLink), one policy, at each rate of
``--rates``. SLOs: TTFT <= 2 s and TPOT <= 50 ms, met by 90 % of the requests (``sievesim serve``
defaults), over the whole run (``serve`` prints its steady-state window's). Prints a Markdown table
(docs/serving.md) and, with ``--json FILE``, every run's record:

    python benchmarks/serving_disagg.py [--model gpt-oss-120b] [--gpus 4] [--splits 2:2] [--rates 50,100,200,300]
    python benchmarks/serving_disagg.py --from-json records.json          # the table again

One cell, alone: ``sievesim serve --model M --gpus G --policy P --rate R --requests N`` (colocated)
or the same with ``--prefill-gpus P`` (disaggregated).
"""
from __future__ import annotations

import argparse
import json
import time

from sievesim.serving import ServingSimulator, poisson_requests
from sievesim.serving.simulator import requests_for


def run(model: str, gpus: int, splits: list[int], policy: str, rates: list[float], requests: int, seed: int,
        window: float | None) -> list[dict]:
    """Every run's record (``sievesim serve --json`` without ``kv_capacity``), colocated first."""
    records = []
    for prefill in [None] + splits:
        t0 = time.perf_counter()
        sim = ServingSimulator(model, gpus=gpus, policy=policy, seed=seed, prefill_gpus=prefill,
                               gpu_model="roofline")     # docs/serving.md: the paper's GPU
        for rate in rates:
            n = requests_for(rate, requests, window)
            d = sim.run(poisson_requests(rate, n, seed=seed), rate).to_dict()
            d.pop("kv_capacity")
            d["arrival_window_s"] = window
            records.append(d)
        print(f"# {model} {'colocated' if prefill is None else f'{prefill}:{gpus - prefill}'}: "
              f"{time.perf_counter() - t0:.0f} s wall", flush=True)
    return records


def _config(d: dict) -> str:
    return f"{d['gpus']} colocated" if "prefill_gpus" not in d else f"{d['prefill_gpus']}+{d['decode_gpus']}"


def render(records: list[dict]) -> str:
    """The table: one row per rate, one column per configuration; goodput, attainment and latencies
    over the whole run (``whole_run`` in ``serve --json``; records of an earlier version of this
    script hold them at the top)."""
    records = [{**d, **d.get("whole_run", {})} for d in records]
    r0 = records[0]
    configs = list(dict.fromkeys(_config(d) for d in records))
    rates = sorted({d["rate"] for d in records})
    cell = {(_config(d), d["rate"]): d for d in records}
    lines = [f"{r0['model']} on B200, {r0['policy']}, hh-rlhf, Poisson, seed {r0['seed']}, at least "
             f"{min(d['requests'] for d in records)} requests per rate: goodput [requests/s] (SLO attainment, "
             f"TTFT p90 [s], TPOT p90 [ms])", "",
             "| rate [req/s] | " + " | ".join(configs) + " |", "|---:|" + "---|" * len(configs)]
    for rate in rates:
        row = []
        for c in configs:
            d = cell.get((c, rate))
            row.append("" if d is None else f"{d['goodput_requests_per_s']:.1f} ({d['slo_attainment']:.0%}, "
                                            f"{d['ttft_s']['p90']:.2f}, {d['tpot_s']['p90'] * 1e3:.1f})")
        lines.append(f"| {rate:g} | " + " | ".join(row) + " |")
    dis = [d for d in records if "prefill_gpus" in d]
    if dis:
        lines += ["", "disaggregated: KV transfer time on the link (mean / p99), mean KV bytes, wait from the end of "
                      "prefill to the transfer's start (mean / p90: room in the decode batch), mean decode batch, busy "
                      "share of the prefill / decode pool, memo error of each pool (mean |memo - exact| / exact; the decode "
                      "pool's bias, mean (memo - exact) / exact)", "",
                  "| rate [req/s] | split | transfer mean / p99 [ms] | KV [MiB] | wait mean / p90 [ms] | decode batch "
                  "| busy prefill / decode | memo err prefill / decode (bias) |",
                  "|---:|---|---|---:|---|---:|---|---:|"]
        for d in sorted(dis, key=lambda d: (d["rate"], d["prefill_gpus"])):
            x, p = d["kv_transfer"], d["pools"]
            lines.append(f"| {d['rate']:g} | {_config(d)} | {x['time_s']['mean'] * 1e3:.3f} / "
                         f"{x['time_s']['p99'] * 1e3:.3f} | {x['bytes_mean'] / 2**20:.1f} | "
                         f"{x['wait_s']['mean'] * 1e3:.1f} / {x['wait_s']['p90'] * 1e3:.1f} | "
                         f"{d['batch']['mean']:.1f} | "
                         f"{p['prefill']['busy_share']:.0%} / {p['decode']['busy_share']:.0%} | "
                         f"{p['prefill']['pricing']['error_vs_exact']['mean_abs_rel']:.1%} / "
                         f"{p['decode']['pricing']['error_vs_exact']['mean_abs_rel']:.1%} "
                         f"({p['decode']['pricing']['error_vs_exact']['mean_rel']:+.1%}) |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gpt-oss-120b")
    ap.add_argument("--gpus", type=int, default=4)
    ap.add_argument("--splits", default="2:2", help="P:D pairs, comma-separated (P + D = --gpus)")
    ap.add_argument("--policy", default="sieve")
    ap.add_argument("--rates", default="50,100,200,300")
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--window", type=float, default=None, help="at least rate x WINDOW requests per rate")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None, help="write every record here")
    ap.add_argument("--from-json", default=None, help="render the table from saved records")
    a = ap.parse_args(argv)
    if a.from_json:
        with open(a.from_json, encoding="utf-8") as fh:
            records = json.load(fh)
    else:
        splits = []
        for s in a.splits.split(","):
            p, d = (int(x) for x in s.split(":"))
            if p + d != a.gpus:
                ap.error(f"--splits {s}: P + D must be --gpus = {a.gpus}")
            splits.append(p)
        records = run(a.model, a.gpus, splits, a.policy, [float(r) for r in a.rates.split(",")], a.requests,
                      a.seed, a.window)
        if a.json:
            with open(a.json, "w", encoding="utf-8") as fh:
                json.dump(records, fh)
    print(render(records))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
