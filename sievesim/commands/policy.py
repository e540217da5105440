"""``sievesim policy``: run an expert-partitioning policy on one layer's token counts, time the
policies, compare them."""
from __future__ import annotations

import argparse
import json
import math
import re
from typing import Any

import numpy as np

from .._validate import BOUNDS, int_arg, int_list_arg
from ..costs import DEFAULT_CONTEXT_LEN
from ..errors import ConfigError, field_error


def _check_batches(batches: list[int]) -> None:
    if any(b < 1 for b in batches):
        raise field_error("--batch", ",".join(map(str, batches)), "positive batch sizes (a batch has at least one token)")


# Work limits, so that no command line runs for hours (a few tens of seconds at most).
MAX_BENCH_CALLS = 10_000_000
MAX_COMPARE_TOKENS = 1 << 16


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("policy", help="expert-partitioning policies (Sieve, NoExp, AllExp, PIMoE, Oracle)")
    sub = p.add_subparsers(dest="policy_command", metavar="SUBCOMMAND")
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])

    d = sub.add_parser("decide", help="which experts of one GPU run on PIM at one layer")
    d.add_argument("--model", required=True, help="preset name, .toml or HF config.json")
    d.add_argument("--top-k", type=int_arg("experts"), default=None, help="override the model's routed experts per token")
    d.add_argument("--hardware", default="b200", help="preset name or .toml (default: b200)")
    d.add_argument("--gpus", type=int_arg("gpus"), default=1, help="GPUs G (experts E/G per GPU; default 1)")
    d.add_argument("--policy", default="sieve", help="registered policy name (default: sieve)")
    d.add_argument("--counts", required=True, metavar="FILE",
                   help="JSON list of token counts per expert of one GPU (index = local expert id), "
                        "or an object {local expert id: count}; '-' reads stdin")
    d.add_argument("--context-len", type=int_arg("context"), default=DEFAULT_CONTEXT_LEN, metavar="L",
                   help=f"context length of every request of this GPU (tokens; default {DEFAULT_CONTEXT_LEN})")
    d.add_argument("--batch", type=int_arg("batch"), default=None, metavar="B",
                   help="global batch B (default: max(largest count, ceil(G * sum / top_k)))")
    d.add_argument("--layer", type=int_arg("layer_index"), default=None,
                   help="layer index (default: first MoE layer with full/MLA attention)")
    d.add_argument("--unit", default=None, help="PIMoE placement unit: pseudo_channel, channel (default), stack, "
                                                "or a fixed group BASE*S such as channel*4 (docs/policies.md)")
    d.add_argument("--pim-cost", choices=["roofline", "engine"], default="roofline",
                   help="PIM times from the roofline estimate or from the cycle-accurate engine")
    d.add_argument("--policy-option", action="append", default=[], metavar="KEY=VALUE",
                   help="constructor option of the policy, e.g. include_attention=false (see `sievesim policy "
                        "list --options`); repeatable")
    d.add_argument("--verify-engine", action="store_true",
                   help="oracle: check its 3 best cuts with the engine (their PIM side as one program)")
    d.add_argument("--json", action="store_true", help="print one JSON object")
    d.set_defaults(func=_decide)

    b = sub.add_parser("bench", help="median decision latency per policy (microseconds)")
    b.add_argument("--experts", type=int_list_arg("experts"), default=[128, 256, 512],
                   help="expert counts (128, 256, 512; default all)")
    b.add_argument("--batch", type=int_list_arg("batch"), default=[1, 16, 64, 256], help="batch sizes (default 1,16,64,256)")
    b.add_argument("--policies", default="sieve,noexp,allexp,pimoe,oracle", help="comma-separated names")
    b.add_argument("--hardware", default="b200")
    b.add_argument("--repeat", type=int_arg("repeat"), default=7, help="runs per median (default 7)")
    b.add_argument("--inner", type=int_arg("inner"), default=200, help="calls per run (default 200)")
    b.add_argument("--json", action="store_true")
    b.set_defaults(func=_bench)

    c = sub.add_parser("compare", help="estimated T_total of the policies on synthetic routing")
    c.add_argument("--model", required=True)
    c.add_argument("--top-k", type=int_arg("experts"), default=None, help="override the model's routed experts per token")
    c.add_argument("--hardware", default="b200")
    c.add_argument("--gpus", type=int_arg("gpus"), default=1)
    c.add_argument("--batch", type=int_list_arg("batch"), default=[1, 4, 16, 64, 256])
    c.add_argument("--context-len", type=int_arg("context"), default=DEFAULT_CONTEXT_LEN, metavar="L",
                   help=f"context length of every request (tokens; default {DEFAULT_CONTEXT_LEN})")
    c.add_argument("--units", action="store_true", help="PIMoE at every placement unit (docs/policies.md)")
    c.add_argument("--pim-cost", choices=["roofline", "engine"], default="roofline",
                   help="PIM times from the roofline estimate or from the cycle-accurate engine")
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=_compare)

    lst = sub.add_parser("list", help="registered policies")
    lst.add_argument("--options", action="store_true", help="each policy's options, their types, bounds and defaults")
    lst.set_defaults(func=_list)


def _read_counts(path: str) -> tuple[np.ndarray, np.ndarray | None]:
    from .._inputs import json_int, read_text
    from ..errors import SievesimError

    text = read_text(path, "JSON file of token counts (--counts)", "counts", allow_stdin=True)
    try:
        data = json.loads(text, parse_int=json_int)
    except SievesimError as exc:     # a number of thousands of digits, refused before int()
        raise ConfigError(f"--counts {path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise field_error("--counts", path, f"valid JSON ({exc.msg} at line {exc.lineno})") from None
    except (ValueError, RecursionError) as exc:  # an integer of thousands of digits, deep nesting
        raise field_error("--counts", path, f"valid JSON ({type(exc).__name__}: "
                          f"{str(exc).splitlines()[0]})") from None
    if isinstance(data, dict):
        ids, counts = [], []
        for key, value in data.items():
            try:
                if not re.fullmatch(r"-?[0-9]{1,6}", key.strip()):   # int() would read '1_0' as 10
                    raise ValueError(key)
                ids.append(int(key))
            except ValueError:
                raise field_error("expert id", key, "an integer expert id") from None
            counts.append(value)
        values, id_arr = counts, np.asarray(ids, dtype=np.int64)
    elif isinstance(data, list):
        values, id_arr = data, None
    else:
        raise field_error("--counts", type(data).__name__, "a JSON list of token counts or an object {id: count}")
    hi = BOUNDS["batch"].hi
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and not v.is_integer()):
            raise field_error(f"counts[{i}]", v, "an integer number of tokens")
        if not -hi <= v <= hi:  # negatives are named below
            raise field_error(f"counts[{i}]", v, f"a number of tokens up to {hi} (tokens of one decode step)")
    if id_arr is not None and id_arr.size and not (0 <= id_arr.min() and id_arr.max() < BOUNDS["experts"].hi):
        raise field_error("expert id", int(id_arr.max() if id_arr.max() >= 0 else id_arr.min()),
                          f"an expert id from 0 to {BOUNDS['experts'].hi - 1}")
    return np.asarray(values, dtype=np.int64).reshape(-1), id_arr


def _decide(args: argparse.Namespace) -> int:
    from ..costs import build_context
    from ..hardware import get_hardware
    from ..models import get_model
    from ..policies import PIMoE, get_policy
    from ..policies.placement import check_pimoe_capacity

    if args.top_k is not None and args.top_k < 1:
        raise field_error("--top-k", args.top_k, "a positive integer")
    from .run import _policy_options, options_for_policies

    kwargs = options_for_policies([args.policy.lower()], _policy_options(args.policy_option))[args.policy.lower()]
    if args.unit is not None:
        if args.policy.lower() != "pimoe":
            raise field_error("--unit", args.unit, "only with --policy pimoe")
        if kwargs.get("unit", args.unit) != args.unit:
            raise field_error("--policy-option unit", kwargs["unit"], f"the unit of --unit ({args.unit}), "
                              "or only one of the two")
        kwargs["unit"] = args.unit
    model = get_model(args.model, top_k=args.top_k)
    hw = get_hardware(args.hardware)
    if args.layer is not None and not args.layer < model.num_layers:
        raise field_error("--layer", args.layer, f"a layer index from 0 to {model.num_layers - 1} ({model.name})")
    if args.gpus < 1 or model.num_experts % args.gpus:
        raise field_error("--gpus", args.gpus, f"a positive divisor of the model's {model.num_experts} experts")
    e_local = model.num_experts // args.gpus
    counts, ids = _read_counts(args.counts)
    if ids is None and counts.size != e_local:
        raise field_error("number of counts", counts.size,
                          f"{e_local}: one per expert of one GPU ({model.num_experts} experts / {args.gpus} GPUs)")
    if counts.size and counts.min() < 0:
        i = int(np.argmin(counts))
        raise field_error(f"counts[{i}]", int(counts[i]), "a non-negative number of tokens")
    if args.context_len < 0:
        raise field_error("--context-len", args.context_len, "a non-negative number of tokens")
    total = int(counts.sum())
    batch = args.batch
    if batch is None:
        batch = max(int(counts.max()) if counts.size else 0, math.ceil(args.gpus * total / model.top_k))
    if args.pim_cost == "engine" or args.verify_engine:
        check_engine_pricing(model, max(batch, 1))
    pim = _pim_cost(args.pim_cost, model, hw, args.layer)
    if args.verify_engine:
        if args.policy.lower() != "oracle":
            raise field_error("--verify-engine", True, "only with --policy oracle")
        engine = pim or _pim_cost("engine", model, hw, args.layer)
        lens = [args.context_len] * max(1, batch // args.gpus)

        def verify(part) -> float:   # T_total with the PIM side simulated (GPU and links estimated)
            est = part.evaluate(ctx)
            return max(est.t_comm_s, est.t_gpu_s, engine.partition_pim_time_s(part, lens))
        kwargs["verify"] = verify
    policy = get_policy(args.policy, **kwargs)
    if isinstance(policy, PIMoE):
        check_pimoe_capacity(model, hw, args.gpus, policy.unit)
    ctx = build_context(model, hw, args.gpus, batch, layer=args.layer, context_lens=args.context_len,
                        counts=counts, pim=pim)
    part = policy.decide(counts, ctx, ids)
    est = part.evaluate(ctx)
    out: dict[str, Any] = {
        "policy": policy.name, "model": model.name, "hardware": hw.name, "gpus": args.gpus,
        "batch": batch, "context_len": args.context_len,
        "pim_experts": part.pim_experts.tolist(), "gpu_experts": part.gpu_experts.tolist(),
        **est.as_dict(), "placement": part.placement,
    }
    if part.unit is not None:
        out["unit"] = part.unit
    if "verified" in part.info:
        out["verified_t_total_s"] = {str(k): v for k, v in part.info["verified"].items()}
    from .._outputs import check_finite
    check_finite(out)
    if args.json:
        print(json.dumps(out))
        return 0
    print(f"policy {policy.name} ({model.name} on {args.gpus} x {hw.name}, B = {batch}, L = {args.context_len})")
    print(f"  GPU experts ({len(out['gpu_experts'])}): {out['gpu_experts']}")
    print(f"  PIM experts ({len(out['pim_experts'])}): {out['pim_experts']}"
          + (f" (expert-parallel, unit {part.unit})" if part.unit else ""))
    print(f"  T_total {est.t_total_s * 1e6:.3f} us = max(T_comm {est.t_comm_s * 1e6:.3f}, "
          f"T_GPU {est.t_gpu_s * 1e6:.3f} [offchip {est.t_offchip_s * 1e6:.3f}, comp {est.t_comp_s * 1e6:.3f}], "
          f"T_PIM {est.t_pim_s * 1e6:.3f} [attention {est.t_attention_s * 1e6:.3f}])")
    return 0


def check_engine_pricing(model: Any, max_tokens: int) -> None:
    """Refuse engine-priced PIM costs (``--pim-cost engine``) whose estimated time or memory is above
    the limits: the cost table simulates one expert at every token count up to ``max_tokens``, so
    the work grows about with its square. Measured (``policy compare --pim-cost engine --batch B``,
    2-core x86-64): qwen3-30b-a3b 6.1 s / 99 MB at B = 128, 108 s / 2.3 GB at B = 1024;
    deepseek-v3 9.8 s / 316 MB and mixtral-8x7b 17.7 s / 968 MB at B = 128. The estimate scales
    qwen3-30b-a3b's B = 128 figures by (B / 128)^1.7 for time, (B / 128)^2 for memory, and the
    expert's size (hidden x intermediate) to the 0.3 and 0.9 power; it lies above each measurement."""
    from .._validate import check_memory, check_work

    size = model.hidden_size * model.moe_intermediate_size / (2048 * 768)
    scale = max(1.0, max_tokens / 128)
    check_work(6.5 * scale ** 1.7 * size ** 0.3, f"engine-priced PIM costs of {model.name} up to {max_tokens} tokens "
               "per expert", "--batch (with --pim-cost engine)", max_tokens)
    check_memory(60e6 + 40e6 * scale ** 2 * size ** 0.9, f"engine-priced PIM costs of {model.name} up to {max_tokens} "
                 "tokens per expert", "--batch (with --pim-cost engine)", max_tokens)


def _pim_cost(kind: str, model: Any, hw: Any, layer: int | None):
    """None (the roofline default of build_context) or the engine-backed cost model."""
    if kind != "engine":
        return None
    from ..costs import default_layer
    from ..pim.expert import EnginePimCost
    return EnginePimCost.for_model(model, hw, layer=default_layer(model) if layer is None else layer)


def _bench(args: argparse.Namespace) -> int:
    from ..policies import policy_class
    from ..policies.bench import bench, bench_model_for

    names = [n.strip().lower() for n in args.policies.split(",")]
    if not all(names):
        raise field_error("--policies", args.policies, "comma-separated policy names (see `sievesim policy list`)")
    for n in names:
        policy_class(n)
    for e in args.experts:
        bench_model_for(e)
    _check_batches(args.batch)
    if args.repeat < 1 or args.inner < 1:
        raise ConfigError("--repeat and --inner must be positive")
    calls = args.repeat * args.inner * len(args.experts) * len(args.batch) * len(names)
    if calls > MAX_BENCH_CALLS:
        raise field_error("--repeat x --inner x experts x batches x policies", calls,
                          f"at most {MAX_BENCH_CALLS:,} timed decisions (each takes microseconds to a millisecond)")
    rows = bench(args.experts, args.batch, names, args.hardware, args.repeat, args.inner)
    if args.json:
        print(json.dumps(rows))
        return 0
    print(f"{'policy':8s} {'experts':>7s} {'batch':>5s} {'active':>6s} {'on GPU':>6s} "
          f"{'median_us':>9s} {'+checks_us':>10s}")
    for r in rows:
        print(f"{r['policy']:8s} {r['experts']:7d} {r['batch']:5d} {r['active_experts']:6d} {r['gpu_experts']:6d} "
              f"{r['median_us']:9.2f} {r['median_us_validated']:10.2f}")
    return 0


def _compare(args: argparse.Namespace) -> int:
    from ..policies.bench import compare_policies, unit_sensitivity

    if sum(args.batch) > MAX_COMPARE_TOKENS:
        raise field_error("--batch", ",".join(map(str, args.batch)), f"batch sizes summing to at most "
                          f"{MAX_COMPARE_TOKENS} (each token is routed and priced for every policy)")
    if args.top_k is not None and args.top_k < 1:
        raise field_error("--top-k", args.top_k, "a positive integer")
    _check_batches(args.batch)
    for b in args.batch:     # as `sievesim run`: data-parallel attention puts B/G requests on each GPU
        if b % args.gpus:
            raise field_error("--batch", b, f"a multiple of --gpus {args.gpus} (data-parallel attention puts "
                              "B/G requests on each GPU)")
    pim = None
    if args.pim_cost == "engine":
        from ..hardware import get_hardware
        from ..models import get_model
        model, hw = get_model(args.model, top_k=args.top_k), get_hardware(args.hardware)
        check_engine_pricing(model, max(args.batch))
        pim = _pim_cost("engine", model, hw, None)
    compare = unit_sensitivity if args.units else compare_policies
    rows = compare(args.model, args.gpus, args.batch, hardware=args.hardware, context_len=args.context_len,
                   pim=pim, top_k=args.top_k)
    from .._outputs import check_finite
    check_finite(rows)
    if args.json:
        print(json.dumps(rows))
        return 0
    labels = list(dict.fromkeys(r["policy"] for r in rows))
    r0 = rows[0]
    print("Equation 1 estimate T_total [us] of one layer on GPU 0 (not an executed schedule: see `sievesim run`)")
    print(f"{r0['model']} on {r0['gpus']} x {r0['hardware']}: layer {r0['layer']}, context {r0['context_len']} "
          f"tokens per request, top-k {r0['top_k']}, routing {r0['routing']} (mean of seeds "
          f"{','.join(map(str, r0['seeds']))}), PIM costs: {'engine' if args.pim_cost == 'engine' and not args.units else 'roofline'}"
          + (" (--units prices PIM by the roofline)" if args.units and args.pim_cost == "engine" else "")
          + "; busiest/mean unit in brackets")
    print(f"{'B':>5s} " + " ".join(f"{lab:>24s}" for lab in labels))
    for b in args.batch:
        cells = []
        for lab in labels:
            r = next(x for x in rows if x["policy"] == lab and x["batch"] == b)
            cell = f"{r['t_total_us']:.2f}"
            if "busiest_over_mean_unit" in r:
                cell += f" [{r['busiest_over_mean_unit']:.1f}x]"
            cells.append(f"{cell:>24s}")
        print(f"{b:5d} " + " ".join(cells))
    used = {r["policy"]: r["pim_unit"] for r in rows if "pim_unit" in r}
    if used:
        print("PIMoE units used: " + ", ".join(f"{lab} = {u}" for lab, u in used.items())
              + " (BASE*S: each expert spread over S of them)")
    return 0


def _list(args: argparse.Namespace) -> int:
    from ..policies import available_policies, policy_class

    for name in available_policies():
        cls = policy_class(name)
        print(f"{name:8s} {cls.description}")
        if getattr(args, "options", False):
            for key, opt in (getattr(cls, "options", None) or {}).items():
                print(f"{'':8s}   {key}: {opt.expected()}, default {opt.default_text()} -- {opt.help}")
    return 0
