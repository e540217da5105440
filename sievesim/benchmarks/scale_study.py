"""Rack scale: throughput per GPU and TPOT from 8 to 144 GPUs, 8-GPU nodes over InfiniBand against NVL72.

Every point is an executed decode step under the calibrated GPU model (``simulate_step``; the
paper's roofline with ``--gpu-model roofline``): ``--per-gpu`` requests per GPU (8 and 64) at
``--context`` tokens (default 4,096), weights in BF16 (the PIM computes in 2-byte operands), data-
parallel attention and expert parallelism, DeepEP's low-latency kernels across nodes. Topologies:

* ``ib``: B200s in nodes of 8 (NVLink inside), one 400 Gb/s NIC per GPU between nodes
  (``--hardware b200 --nodes G/8``);
* ``nvl72``: GB200 NVL72, up to 72 GPUs in one NVLink domain, two racks over the NICs at 144
  (``--hardware gb200-nvl72 --nodes ceil(G/72)``).

Redundant experts: ``min`` is the fewest replicas that make the experts a multiple of the GPUs
(``auto``: none at 8 to 32 GPUs for DeepSeek-V3's 256 experts and Kimi-K2's 384, 32 and 48 at 72);
``+G`` adds one replica of a hot expert per GPU (EPLB). Policies: ``gpu-only`` (no PIM) and Overlap
(this project's policy, experts split between GPU and PIM; warmed up ``--warmup`` steps), with decode
attention on PIM (the Sieve paper's system) and on the GPU (``attention_on="gpu"``).

    python -m sievesim.benchmarks scale-study [--models deepseek-v3,kimi-k2] [--gpus 16,72,144]
        [--topologies ib,nvl72] [--per-gpu 8,64] [--context 4096] [--published]

``--published`` prints instead the comparison with DeepSeek's published decode deployment
(:func:`deepseek_published_point`).
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Any

from sievesim.errors import ConfigError

MODELS = ("deepseek-v3", "kimi-k2")
GPUS = (16, 72, 144)
TOPOLOGIES = {"ib": ("b200", 8), "nvl72": ("gb200-nvl72", 72)}
HEADER = ("| model | GPUs | topology | redundant | requests/GPU | GPU-only TPOT ms | GPU-only tok/s/GPU "
          "| Overlap TPOT ms | Overlap / GPU-only | Overlap, attention on GPU: TPOT ms | its / GPU-only |\n"
          "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")

#: DeepSeek's decode deployment of DeepSeek-V3/R1 (deepseek-ai/open-infra-index,
#: "202502OpenSourceWeek/day_6_one_more_thing_deepseekV3R1_inference_system_overview.md", 2025-03-01):
#: H800s, routed experts EP144 over 18 nodes of 8 with 32 redundant experts, attention data-parallel,
#: two micro-batches overlapped; FP8 matmuls, BF16 attention; mean context 4,989 tokens per output
#: token; 20-22 output tokens/s per user; about 14.8k output tokens/s per node in decode.
DEEPSEEK_PUBLISHED = {"gpus": 144, "nodes": 18, "redundant": 32, "context": 4989, "tokens_per_s_per_user": (20.0, 22.0),
                      "tokens_per_s_per_node": 14_800.0, "gpus_per_node": 8}


def point(model: str, gpus: int, topology: str, policy: str, *, extra_redundant: int = 0, per_gpu: int = 64,
          context: int = 4096, warmup: int = 2, gpu_model: str = "calibrated", attention_on: str = "pim") -> dict[str, Any]:
    """One executed step: ``{"tpot_s", "tokens_per_s_per_gpu", "redundant"}``, or ``{"error": ...}``
    when the point does not fit (the capacity check's words)."""
    from sievesim.models import get_model
    from sievesim.system import simulate_step
    from sievesim.system.parallelism import resolve_redundant

    hardware, per_node = TOPOLOGIES[topology]
    nodes = -(-gpus // per_node)
    redundant = resolve_redundant("auto", get_model(model).num_experts, gpus) + extra_redundant
    try:
        r = simulate_step(model, hardware, gpus=gpus, nodes=nodes, policy=policy, batch=per_gpu * gpus,
                          context_len=context, steps=1, warmup=0 if policy == "gpu-only" else warmup,
                          redundant_experts=redundant, gpu_model=gpu_model, energy=False, attention_on=attention_on)
    except ConfigError as exc:
        return {"error": str(exc), "redundant": redundant}
    return {"tpot_s": r.step_time_s, "tokens_per_s_per_gpu": per_gpu / r.step_time_s, "redundant": redundant}


def row(model: str, gpus: int, topology: str, extra_redundant: int = 0, **kw: Any) -> str:
    """The table's row of one (model, GPUs, topology, redundancy); a point that does not fit says so."""
    base = point(model, gpus, topology, "gpu-only", extra_redundant=extra_redundant, **kw)
    red = f"{base['redundant']}" + (f" (+{extra_redundant})" if extra_redundant else "")
    head = f"| {model} | {gpus} | {topology} | {red} | {kw.get('per_gpu', 64)} |"
    if "error" in base:
        need = base["error"].split(": needs ")[-1].split(" (")[0] if ": needs " in base["error"] else base["error"]
        return f"{head} does not fit ({need}) | | | | | |"
    cells = [f"{base['tpot_s'] * 1e3:.2f}", f"{base['tokens_per_s_per_gpu']:.0f}"]
    for attention_on in ("pim", "gpu"):
        pim = point(model, gpus, topology, "overlap", extra_redundant=extra_redundant, attention_on=attention_on, **kw)
        cells += ([pim["error"][:60], ""] if "error" in pim
                  else [f"{pim['tpot_s'] * 1e3:.2f}", f"{base['tpot_s'] / pim['tpot_s']:.3f}"])
    return f"{head} " + " | ".join(cells) + " |"


def h800() -> Any:
    """An H800: the H100 preset with NVLink at 400 GB/s (200 GB/s per direction; NVIDIA's H800
    datasheet), everything else (HBM3, tensor cores, one 400 Gb/s NIC per GPU) the same."""
    from sievesim.hardware import get_hardware
    h = get_hardware("h100")
    return dataclasses.replace(h, name="h800", interconnect=dataclasses.replace(
        h.interconnect, bandwidth_bytes_per_s_per_direction=200e9))


def deepseek_published_point(microbatches: int = 2) -> dict[str, float]:
    """DeepSeek-V3 as DeepSeek's decode deployment runs it (:data:`DEEPSEEK_PUBLISHED`), GPU-only,
    FP8 weights (``fp8-block``), BF16 KV cache, calibrated GPU model. The published figures give the
    requests per GPU: throughput per GPU x TPOT = 1,850 x 1 / 21 = 88 requests (the mean of 20-22
    tokens/s per user); we run 88 per GPU at the mean context and compare TPOT and throughput."""
    from sievesim.system import simulate_step

    pub = DEEPSEEK_PUBLISHED
    per_gpu_tput = pub["tokens_per_s_per_node"] / pub["gpus_per_node"]
    tpot_pub = 2.0 / sum(pub["tokens_per_s_per_user"])
    per_gpu = round(per_gpu_tput * tpot_pub)
    r = simulate_step("deepseek-v3", h800(), gpus=pub["gpus"], nodes=pub["nodes"], policy="gpu-only",
                      batch=per_gpu * pub["gpus"], context_len=pub["context"], steps=1, warmup=0,
                      weight_format="fp8-block", redundant_experts=pub["redundant"], microbatches=microbatches,
                      energy=False)
    return {"requests_per_gpu": per_gpu, "tpot_s": r.step_time_s, "published_tpot_s": tpot_pub,
            "tokens_per_s_per_gpu": per_gpu / r.step_time_s, "published_tokens_per_s_per_gpu": per_gpu_tput}


def published_lines(p: dict[str, float] | None = None, microbatches: int = 2) -> list[str]:
    """The comparison as docs/system.md shows it (``p``: :func:`deepseek_published_point`'s result,
    computed when not given)."""
    p = deepseek_published_point(microbatches) if p is None else p
    lo, hi = (1e3 / x for x in reversed(DEEPSEEK_PUBLISHED["tokens_per_s_per_user"]))
    return ["| | TPOT ms | output tokens/s per GPU |", "|---|---:|---:|",
            f"| DeepSeek, published (20-22 tokens/s per user; 14.8k per node of 8) | {lo:.1f}-{hi:.1f} | "
            f"{p['published_tokens_per_s_per_gpu']:.0f} |",
            f"| sievesim, {p['requests_per_gpu']} requests per GPU, {microbatches} micro-batches | "
            f"{p['tpot_s'] * 1e3:.1f} | {p['tokens_per_s_per_gpu']:.0f} |",
            f"| sievesim / published | {p['tpot_s'] / p['published_tpot_s']:.2f} | "
            f"{p['tokens_per_s_per_gpu'] / p['published_tokens_per_s_per_gpu']:.2f} |"]


def _ints(text: str, name: str, ap: argparse.ArgumentParser) -> list[int]:
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        ap.error(f"{name} = {text!r}: expected comma-separated integers")
    if not out or min(out) < 1:
        ap.error(f"{name} = {text!r}: expected comma-separated integers >= 1")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sievesim.benchmarks scale-study", description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated (default: %(default)s)")
    ap.add_argument("--gpus", default=",".join(map(str, GPUS)), help="comma-separated (default: %(default)s)")
    ap.add_argument("--topologies", default=",".join(TOPOLOGIES), help="ib, nvl72 (default: %(default)s)")
    ap.add_argument("--per-gpu", default="8,64", help="requests per GPU, comma-separated (default: %(default)s)")
    ap.add_argument("--context", default="4096", help="tokens per request (default: %(default)s)")
    ap.add_argument("--warmup", default="2", help="warm-up steps of the PIM policy (default: %(default)s)")
    ap.add_argument("--redundancy", default="min,+G", help="min and/or +G (default: %(default)s; +G on ib only)")
    ap.add_argument("--gpu-model", default="calibrated", choices=("roofline", "calibrated"))
    ap.add_argument("--published", action="store_true", help="the comparison with DeepSeek's deployment instead")
    args = ap.parse_args(argv)
    if args.published:
        print("\n".join(published_lines()))
        return 0
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    topologies = [t.strip() for t in args.topologies.split(",") if t.strip()]
    for t in topologies:
        if t not in TOPOLOGIES:
            ap.error(f"--topologies: {t!r} is not one of {', '.join(TOPOLOGIES)}")
    redundancy = [r.strip() for r in args.redundancy.split(",") if r.strip()]
    for r in redundancy:
        if r not in ("min", "+G"):
            ap.error(f"--redundancy: {r!r} is not min or +G")
    per_gpu = _ints(args.per_gpu, "--per-gpu", ap)
    kw = dict(context=_ints(args.context, "--context", ap)[0], warmup=_ints(args.warmup, "--warmup", ap)[0],
              gpu_model=args.gpu_model)
    print(f"executed step, GPU model: {args.gpu_model}, {kw['context']} tokens per request, weights BF16\n")
    print(HEADER)
    for model in models:
        for gpus in _ints(args.gpus, "--gpus", ap):
            for topology in topologies:
                for r in redundancy:
                    if r == "+G" and topology != "ib":
                        continue
                    for n in per_gpu:
                        print(row(model, gpus, topology, gpus if r == "+G" else 0, per_gpu=n, **kw), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
