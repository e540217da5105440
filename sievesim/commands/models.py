"""``sievesim models`` (list presets) and ``sievesim model show|save`` (one spec)."""
from __future__ import annotations

import argparse
import json
import sys

from .._validate import int_arg
from ..errors import field_error


def register(subparsers: argparse._SubParsersAction) -> None:
    lst = subparsers.add_parser("models", help="list model presets with total and active parameters")
    lst.add_argument("--json", action="store_true", help="print a JSON list")
    lst.set_defaults(func=_list)

    p = subparsers.add_parser("model", help="show or save one model spec (preset, .toml or HF config.json)")
    sub = p.add_subparsers(dest="model_command", metavar="SUBCOMMAND")
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])

    show = sub.add_parser("show", help="print a model spec and its derived figures")
    show.add_argument("model", metavar="NAME|PATH", help="preset name, .toml spec, or Hugging Face config.json")
    show.add_argument("--top-k", type=int_arg("experts"), default=None, help="override the routed experts per token")
    fmt = show.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print one JSON object")
    fmt.add_argument("--toml", action="store_true", help="print the spec as sievesim TOML")
    show.set_defaults(func=_show)

    save = sub.add_parser("save", help="write a model spec as sievesim TOML (e.g. from a config.json)")
    save.add_argument("model", metavar="NAME|PATH")
    save.add_argument("output", metavar="OUT.toml")
    save.add_argument("--top-k", type=int_arg("experts"), default=None, help="override the routed experts per token")
    save.set_defaults(func=_save)


def _fmt_params(n: float) -> str:
    return f"{n / 1e9:.2f}B" if n >= 1e9 else f"{n / 1e6:.2f}M"


def _load(args: argparse.Namespace):
    from ..models import get_model

    if args.top_k is not None and args.top_k < 1:
        raise field_error("--top-k", args.top_k, "a positive integer")
    return get_model(args.model, top_k=args.top_k)


def _list(args: argparse.Namespace) -> int:
    from ..models import get_model, list_models

    rows = []
    for name in list_models():
        s = get_model(name)
        rows.append({"name": name, "total_params": s.total_params, "active_params": s.active_params,
                     "active_params_with_embedding": s.active_params_with_embedding,
                     "num_layers": s.num_layers, "moe_layers": s.num_moe_layers,
                     "num_experts": s.num_experts, "top_k": s.top_k,
                     "num_shared_experts": s.num_shared_experts, "params_per_expert": s.params_per_expert})
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    header = f"{'name':<20} {'total':>9} {'active':>8} {'layers':>6} {'MoE':>4} {'experts':>7} {'top-k':>5} {'shared':>6}"
    print(header)
    for r in rows:
        print(f"{r['name']:<20} {_fmt_params(r['total_params']):>9} {_fmt_params(r['active_params']):>8} "
              f"{r['num_layers']:>6} {r['moe_layers']:>4} {r['num_experts']:>7} {r['top_k']:>5} "
              f"{r['num_shared_experts']:>6}")
    print("active = weights one decode token reads, input embedding excluded (see docs/models.md)")
    return 0


def _show(args: argparse.Namespace) -> int:
    from ..models import model_to_dict

    spec = _load(args)
    if args.toml:
        import tomli_w

        sys.stdout.write(tomli_w.dumps(model_to_dict(spec)))
        return 0
    summary = spec.summary()
    summary["num_experts"] = spec.num_experts
    from .._outputs import check_finite
    check_finite(summary)
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    counts = ", ".join(f"{n} {k}" for k, n in summary["attention_layer_counts"].items())
    lines = [
        f"{spec.name}" + (f"  ({spec.source})" if spec.source else ""),
        f"  layers            {spec.num_layers} ({counts}); {spec.num_moe_layers} MoE, {spec.num_dense_layers} dense",
        f"  hidden            {spec.hidden_size}; heads {spec.num_attention_heads} q / {spec.num_kv_heads} kv "
        f"x {spec.head_dim}" + (f"; sliding window {spec.sliding_window} tokens" if spec.sliding_window else "")
        + (f"; attention chunk {spec.attention_chunk_size} tokens" if spec.attention_chunk_size else ""),
        f"  experts           {spec.num_experts} routed, top-{spec.top_k}, I = {spec.moe_intermediate_size}"
        + (f"; {spec.num_shared_experts} shared, I = {spec.shared_expert_intermediate_size}"
           if spec.num_shared_experts else ""),
        f"  params/expert     {_fmt_params(spec.params_per_expert)} ({spec.bytes_per_expert / 2**20:.1f} MiB)",
        f"  total params      {_fmt_params(spec.total_params)} ({spec.total_bytes / 2**30:.1f} GiB)",
        f"  active params     {_fmt_params(spec.active_params)} "
        f"({_fmt_params(spec.active_params_with_embedding)} with input embedding)",
        f"  KV bytes/token    {spec.kv_bytes_per_token_all_layers:,.0f} over all layers",
    ]
    if spec.linear_state_bytes_per_request:
        lines.append(f"  linear state      {spec.linear_state_bytes_per_request / 2**20:.2f} MiB per request")
    print("\n".join(lines))
    return 0


def _save(args: argparse.Namespace) -> int:
    from ..models import save_model_toml

    spec = _load(args)
    save_model_toml(spec, args.output)
    print(f"wrote {args.output}")
    return 0
