"""``sievesim trace-stats``: Figure 3 / Figure 5 statistics of routing (trace, dump or synthetic)."""
from __future__ import annotations

import argparse
import json
from typing import Any

from .._validate import int_arg, parse_int_list
from ..errors import ConfigError, field_error

DEFAULT_BATCH_SIZES = (1, 4, 16, 64, 256)
# synthetic presets whose model preset has another name
_MODEL_OF_SYNTHETIC = {"llama-4-maverick": "llama4-maverick"}
# Tokens formed into batches per run: 2**24 at a few microseconds each is under a minute.
MAX_SAMPLED_TOKENS = 1 << 24


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "trace-stats", help="expert token-count bins (Fig. 5) and activated ratios (Fig. 3) per batch size",
        description="Per batch size: shares of activated (layer, batch, expert) triples with N = 1, 2, "
                    "3-4, >4 tokens, the activated-expert ratio and, with a model, the activated-"
                    "parameter ratio.")
    p.add_argument("source", metavar="SOURCE",
                   help="routing trace .npz, SGLang dump (.pt needs torch, or a converted .npz), "
                        "or synthetic:MODEL")
    p.add_argument("--batch-sizes", default=None,
                   help="comma-separated batch sizes (default 1,4,16,64,256; for per-pass dumps: "
                        "the recorded ones)")
    p.add_argument("--mode", default=None, choices=["distinct", "random", "consecutive", "recorded"],
                   help="batch formation (default: distinct; per-pass dumps: recorded)")
    p.add_argument("--batches", type=int_arg("batches"), default=64, help="steps measured per batch size (default 64)")
    p.add_argument("--seed", type=int_arg("seed"), default=0, help="seed of batch formation / generator")
    p.add_argument("--model", default=None,
                   help="model preset (sievesim models): checks experts/top-k against the trace and "
                        "adds the activated-parameter ratio (default for synthetic:MODEL: MODEL)")
    p.add_argument("--phase", default="auto", choices=["auto", "decode", "prefill"],
                   help="which trace tokens form batches (auto: decode if any, else prompt tokens)")
    p.add_argument("--allow-reuse", action="store_true",
                   help="allow a request (or token) to appear more than once when the trace is too small")
    p.add_argument("--top-k", type=int_arg("experts"), default=None,
                   help="experts per token: replaces synthetic:MODEL's top-k and the model's; a trace or "
                        "dump that records another top-k is refused; needed for SGLang dumps that do not record it")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_run)


def _parse_sizes(text: str) -> list[int]:
    return parse_int_list("--batch-sizes", text, "batch")


def _load_model(name: str | None) -> Any:
    if name is None:
        return None
    from ..models import get_model  # noqa: PLC0415

    return get_model(name)


def _run(args: argparse.Namespace) -> int:
    from ..workload.batches import PassCountSource, TraceSource, open_source  # noqa: PLC0415
    from ..workload.routing import RoutingStep  # noqa: PLC0415
    from ..workload.stats import routing_stats, stats_of_steps  # noqa: PLC0415
    from ..workload.traces import check_model  # noqa: PLC0415

    if args.batches < 1:
        raise field_error("--batches", args.batches, "an integer >= 1")
    if args.top_k is not None and args.top_k < 1:
        raise field_error("--top-k", args.top_k, "a positive integer")
    synthetic = args.source.startswith("synthetic:")
    model_name = args.model
    if model_name is None and synthetic:
        from ..models import list_models  # noqa: PLC0415

        preset = args.source.split(":", 1)[1].removeprefix("like-")
        model_name = preset if preset.lower() in list_models() else _MODEL_OF_SYNTHETIC.get(preset.lower())
    model = _load_model(model_name)
    if model is not None and args.top_k is not None:
        model = model.with_top_k(args.top_k)
    if synthetic:
        src = open_source(args.source, seed=args.seed, top_k=args.top_k)
    else:
        src = open_source(args.source, phase=args.phase, top_k=args.top_k)
    if model is not None:
        if isinstance(src, TraceSource):
            check_model(src.trace, model.num_experts, model.top_k, model.name, model.num_moe_layers)
        elif isinstance(src, PassCountSource):
            check_model(src.pc, model.num_experts, model.top_k, model.name, model.num_moe_layers)
        elif (src.num_experts, src.top_k, src.num_layers) != (model.num_experts, model.top_k,
                                                              model.num_moe_layers):
            raise ConfigError(f"{args.source}: num_experts/top_k/MoE layers = {src.num_experts}/{src.top_k}/"
                              f"{src.num_layers}: expected those of model {model.name} ({model.num_experts}/"
                              f"{model.top_k}/{model.num_moe_layers})")
    if isinstance(src, PassCountSource):
        import numpy as np  # noqa: PLC0415

        mode = "recorded"
        recorded = src.pc.batch_sizes() if src.top_k else None
        if recorded is None:
            raise field_error("--top-k", None, f"the model's top-k ({args.source} does not record it)")
        sizes = _parse_sizes(args.batch_sizes) if args.batch_sizes is not None else sorted(set(recorded.tolist()))
        results = []
        for b in sizes:
            idx = np.flatnonzero(recorded == b)
            if idx.size == 0:
                raise field_error("--batch-sizes", b, f"a batch size recorded in {args.source}")
            steps = (RoutingStep(counts=src.pc.counts[i]) for i in idx)
            results.append(stats_of_steps(steps, src.num_experts, b, model))
        n_batches = None
    else:
        sizes = _parse_sizes(args.batch_sizes) if args.batch_sizes is not None else list(DEFAULT_BATCH_SIZES)
        if sum(sizes) * args.batches > MAX_SAMPLED_TOKENS:
            raise field_error("--batches x sum of --batch-sizes", sum(sizes) * args.batches,
                              f"at most {MAX_SAMPLED_TOKENS:,} tokens formed into batches (a few microseconds each)")
        mode = args.mode or src.modes()[0]
        opts = {"allow_reuse": True} if args.allow_reuse and isinstance(src, TraceSource) else {}
        results = routing_stats(src, sizes, batches=args.batches, seed=args.seed, mode=mode,
                                model=model, **opts)
        n_batches = args.batches
    header = {"source": args.source, "name": src.name, "num_experts": src.num_experts,
              "top_k": src.top_k, "num_layers": src.num_layers, "mode": mode,
              "batches": n_batches, "seed": args.seed, "model": model.name if model else None}
    from .._outputs import check_finite
    check_finite([r.as_dict() for r in results])
    if args.json:
        print(json.dumps({**header, "results": [r.as_dict() for r in results]}, indent=1))
        return 0
    print(f"{args.source}: {src.name}, E={src.num_experts}, k={src.top_k}, {src.num_layers} MoE layers; "
          f"mode {mode}" + (f", {n_batches} batches per B, seed {args.seed}" if n_batches else "")
          + (f"; model {model.name}" if model else ""))
    print("Expert computations by tokens per expert N (share of activated (layer, batch, expert)):")
    cols = f"{'B':>6} {'N=1':>7} {'N=2':>7} {'N=3-4':>7} {'N>4':>7} | {'N<=4':>7} {'tok/exp':>8} {'act-exp':>8}"
    if model:
        cols += f" {'act-param':>9}"
    print(cols)
    for r in results:
        line = (f"{r.batch_size:>6} {100 * r.frac_1:6.1f}% {100 * r.frac_2:6.1f}% {100 * r.frac_3_4:6.1f}% "
                f"{100 * r.frac_gt4:6.1f}% | {100 * r.frac_memory_bound:6.1f}% {r.tokens_per_active:8.2f} "
                f"{100 * r.activated_ratio:7.1f}%")
        if model and r.act_param_ratio is not None:
            line += f" {100 * r.act_param_ratio:8.1f}%"
        print(line)
    print("N<=4 = memory-bound (paper Fig. 5); act-exp = activated experts / experts (mean over layers "
          "and batches); act-param = activated parameters / total (paper Fig. 3)")
    return 0
