"""``sievesim pim``: GEMVs and experts on HBM-PIM, priced by the cycle-accurate engine."""
from __future__ import annotations

import argparse
import json

from .._validate import int_arg, number_arg, parse_int_list
from ..errors import field_error


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("pim", help="GEMVs, experts and attention on HBM-PIM (cycle-accurate)")
    sub = p.add_subparsers(dest="pim_command", metavar="SUBCOMMAND")
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])

    g = sub.add_parser("gemv", help="one GEMV with N tokens")
    g.add_argument("--hardware", default="b200", help="hardware preset or TOML (default b200)")
    g.add_argument("--d-in", type=int_arg("dimension"), required=True, help="input size (elements)")
    g.add_argument("--d-out", type=int_arg("dimension"), required=True, help="output size (elements)")
    g.add_argument("--tokens", type=int_arg("tokens"), default=1, help="input vectors (tokens)")
    g.add_argument("--placement", choices=["tp", "ep"], default=None,
                   help="tp: across every pseudo-channel of the GPU (default); ep: inside one placement unit "
                        "(the default when --unit is given)")
    g.add_argument("--unit", choices=["pseudo_channel", "channel", "stack"], default=None,
                   help="placement unit for --placement ep (default stack)")
    g.add_argument("--single-row-buffer", action="store_true", help="PIM and normal rows share one row buffer")
    g.add_argument("--json", action="store_true")
    g.add_argument("--log-commands", metavar="FILE", help="write the simulated pseudo-channel's command log (CSV)")
    g.add_argument("--no-energy", action="store_true", help="leave out energy_j, its breakdown and average_power_w")
    g.set_defaults(func=_gemv)

    e = sub.add_parser("expert", help="one SwiGLU expert of a model with N tokens")
    e.add_argument("--model", required=True, help="model preset, TOML or HF config.json")
    e.add_argument("--hardware", default="b200")
    e.add_argument("--tokens", type=int_arg("tokens"), default=1)
    e.add_argument("--placement", choices=["tp", "ep"], default=None,
                   help="tp: across every pseudo-channel of the GPU (default); ep: inside one placement unit "
                        "(the default when --unit is given)")
    e.add_argument("--unit", choices=["pseudo_channel", "channel", "stack"], default=None,
                   help="placement unit for --placement ep (default stack)")
    e.add_argument("--json", action="store_true")
    e.set_defaults(func=_expert)

    t = sub.add_parser("table", help="expert time on PIM vs roofline and GPU for N = 1..32 (docs/pim.md)")
    t.add_argument("--models", default="qwen3-30b-a3b,gpt-oss-120b,qwen3.5-397b-a17b")
    t.add_argument("--hardware", default="b200")
    t.add_argument("--tokens", default="1,2,4,8,16,32")
    t.add_argument("--refresh", choices=["mean", "staggered", "aligned"], default=None,
                   help="refresh phase of each program (default: the device's, mean)")
    t.add_argument("--sync-latency-s", type=number_arg(lo=0, hi=0.999999, what="a latency in seconds"), default=None, help="GPU-PIM hand-over (default: the hardware's)")
    t.add_argument("--multi-vector", choices=["yes", "no"], default=None,
                   help="tokens share opened rows (default: the hardware's multi_vector_pu)")
    t.add_argument("--json", action="store_true")
    t.set_defaults(func=_table)

    a = sub.add_parser("attention", help="decode attention of one layer on PIM: cycle breakdown beside the "
                                         "roofline and the GPU's time; what the PIM would need",
                       description="Decode attention of one layer on the busiest pseudo-channel of one GPU's PIM, "
                                   "broken down from the engine's command log (MAC commands, row activations and "
                                   "precharges, GWRITE of query heads / probabilities, result readout, refresh), "
                                   "beside the roofline (attention FLOPs over the hardware's PIM peak, as the step "
                                   "reports it) and the GPU's time for the same attention (docs/pim.md).")
    a.add_argument("--model", required=True, help="model preset, TOML or HF config.json")
    a.add_argument("--hardware", default="b200")
    a.add_argument("--batch", type=int_arg("batch"), default=64, help="decode requests B over all GPUs (default 64)")
    a.add_argument("--context", type=int_arg("context", lo=1), default=4096, help="context length of every request "
                   "(tokens; default 4096)")
    a.add_argument("--context-preset", default=None, metavar="NAME",
                   help="draw the B context lengths from a dataset preset (hh-rlhf, math-500) instead of --context; "
                        "GPU 0 holds the first B / G")
    a.add_argument("--seed", type=int_arg("seed"), default=0, help="seed of --context-preset (default 0)")
    a.add_argument("--gpus", type=int_arg("gpus"), default=1, help="GPUs G; each holds B / G requests (default 1)")
    a.add_argument("--layer", type=int_arg("layer_index"), default=None,
                   help="layer index (default: the first full-attention layer, else the first that is not linear)")
    a.add_argument("--mapping", choices=["grouped", "per-head"], default="grouped",
                   help="grouped: the query heads of a GQA group share each opened K/V row (default); "
                        "per-head: one GEMV per query head (the program before 2026-12-03)")
    a.add_argument("--balance", choices=["tokens", "units"], default="tokens",
                   help="tokens: long requests cut so the pseudo-channels get equal work (default); units: whole "
                        "request x KV head units, longest first onto the least loaded (before 2026-12-03)")
    a.add_argument("--what-if", default=None, metavar="KEY=N,...",
                   help="change the PIM: macs (MACs per PU per command and vector), vectors (vectors per MAC "
                        "command), accumulators, buffer (global buffer bytes); e.g. macs=32,vectors=8")
    a.add_argument("--needs", action="store_true",
                   help="also price the layer at GQA group sizes --groups on every --macs x --vectors PIM and "
                        "show which beat the GPU (--what-if accumulators / buffer apply to every one)")
    a.add_argument("--groups", default="4,8,16", help="GQA group sizes for --needs (default 4,8,16)")
    a.add_argument("--macs", default="16,32,64", help="MACs per PU per command for --needs (default 16,32,64)")
    a.add_argument("--vectors", default="1,2,4,8,16", help="vectors per MAC command for --needs (default 1,2,4,8,16)")
    a.add_argument("--json", action="store_true")
    a.set_defaults(func=_attention)


def _device(hw_name: str, single: bool = False):
    from ..hardware import get_hardware
    from ..pim.expert import PIMDevice
    import dataclasses
    dev = PIMDevice.from_hardware(get_hardware(hw_name))
    return dataclasses.replace(dev, dual_row_buffer=not single) if single else dev


def _result_dict(res, device, pcs: int) -> dict:
    """The run's fields; ``cycles`` / ``time_ns``: the job's duration at the device's refresh
    phases (expected, or the slowest staggered pseudo-channel; ``phase_cycles`` has each phase)."""
    d = res.to_dict()
    d["cycles"] = device.program_cycles(res, pcs)
    d["time_ns"] = d["cycles"] * device.tck_s * 1e9
    return d


def _gemv(args: argparse.Namespace) -> int:
    from ..dram.engine import write_command_log
    from ..pim.engine import run_programs
    from ..pim.expert import gemv
    from ..pim.program import gemv_program, plan_gemv

    _placement(args)
    for name in ("d_in", "d_out", "tokens"):
        if getattr(args, name) < 1:
            raise field_error(f"--{name.replace('_', '-')}", getattr(args, name), "a positive integer")
    dev = _device(args.hardware, args.single_row_buffer)
    pcs = dev.unit_pcs("gpu" if args.placement == "tp" else args.unit)
    if args.log_commands:
        plan = plan_gemv(args.d_in, args.d_out, args.tokens, pcs, dev.geometry, dict(dev.config.timings))
        res = run_programs(dev.config, [gemv_program(plan, dev.geometry)], log_commands=True)

        class _R:  # write_command_log reads .command_log
            command_log = res.command_log
        write_command_log(_R, dev.config, args.log_commands)
    else:
        res = gemv(dev, args.d_in, args.d_out, args.tokens, pcs)
    d = _result_dict(res, dev, pcs) | {"pseudo_channels": pcs, "d_in": args.d_in, "d_out": args.d_out,
                                  "tokens": args.tokens, "roofline_ns": 2.0 * args.d_in * args.d_out * args.tokens
                                  / (dev.peak_flops() * pcs / dev.unit_pcs("gpu")) * 1e9}
    if not args.no_energy:
        from ..dram.energy import pim_energy
        d.update(pim_energy(res, dev.config, pcs=pcs, banks_per_pu=dev.banks_per_pu,
                            macs_per_command=dev.macs_per_command, duration_s=d["time_ns"] * 1e-9))
        d["energy_pj_per_mac"] = d["energy_j"] / d["mac_ops"] * 1e12 if d["mac_ops"] else 0.0
    _print(d, args.json)
    return 0


def _placement(args: argparse.Namespace) -> None:
    """``--unit`` honoured, never ignored: it implies ``--placement ep``; with ``--placement tp`` it
    contradicts the placement and is refused."""
    if args.unit is not None and args.placement == "tp":
        raise field_error("--unit", args.unit, "only with --placement ep (tp spreads the GEMV over every "
                          "pseudo-channel of the GPU; leave --placement out to place it in one unit)")
    if args.placement is None:
        args.placement = "ep" if args.unit is not None else "tp"
    if args.unit is None:
        args.unit = "stack"


def _expert(args: argparse.Namespace) -> int:
    from ..hardware import get_hardware
    from ..models import get_model
    from ..pim.expert import EnginePimCost

    _placement(args)
    if args.tokens < 1:
        raise field_error("--tokens", args.tokens, "a positive integer")
    model, hw = get_model(args.model), get_hardware(args.hardware)
    cost = EnginePimCost.for_model(model, hw)
    pcs = cost.device.unit_pcs("gpu" if args.placement == "tp" else args.unit)
    gu, dn = cost.expert_result(args.tokens, pcs)
    unit = "gpu" if args.placement == "tp" else args.unit
    stages = cost.expert_stages_s(args.tokens, unit)
    dev = cost.device
    cycles = dev.program_cycles(gu, pcs) + dev.program_cycles(dn, pcs)
    d = {"model": model.name, "tokens": args.tokens, "pseudo_channels": pcs, "refresh": dev.refresh,
         "cycles": cycles, "pim_time_ns": cycles * dev.tck_s * 1e9,
         "macab_utilization": sum(r.macabs / max(1, len(r.phase_cycles)) for r in (gu, dn))   # per copy
         * dev.config.timings["nCCDAB"] / cycles,
         "time_ns": sum(stages.values()) * 1e9,
         **{f"{k}_ns": v * 1e9 for k, v in stages.items()},
         "gate_up": _result_dict(gu, dev, pcs), "down": _result_dict(dn, dev, pcs)}
    _print(d, args.json)
    return 0


def _table(args: argparse.Namespace) -> int:
    from ..hardware import get_hardware
    from ..models import get_model
    from ..pim.roofline import roofline_overestimate

    hw = get_hardware(args.hardware)
    tokens = parse_int_list("--tokens", args.tokens, "tokens")
    names = [n.strip() for n in args.models.split(",")]
    if not all(names) or len(names) > 64:
        raise field_error("--models", args.models, "1 to 64 comma-separated model names or files")
    changes = {}
    if args.refresh:
        changes["refresh"] = args.refresh
    if args.sync_latency_s is not None:
        if not (0 <= args.sync_latency_s < 1):   # also refuses nan
            raise field_error("--sync-latency-s", args.sync_latency_s, "a latency in seconds, >= 0 and < 1")
        changes["sync_latency_s"] = args.sync_latency_s
    if args.multi_vector:
        changes["multi_vector_pu"] = args.multi_vector == "yes"
    rows = []
    for name in names:
        model = get_model(name)
        params = model.params_per_expert
        for r in roofline_overestimate(model, hw, tokens, device_changes=changes):
            n = r["tokens"]
            gpu = max(2.0 * params * n / (hw.gpu.peak_flops_bf16 * hw.gpu.compute_efficiency),
                      model.bytes_per_expert / (hw.gpu.hbm_bandwidth_bytes_per_s * hw.gpu.memory_efficiency))
            rows.append(r | {"model": name, "gpu_roofline_us": gpu * 1e6})
    from .._outputs import check_finite
    check_finite(rows)
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print("| model | N | PIM engine, round trip (us) | PIM programs (us) | roofline, MAC-issue peak (us) | "
              "roofline, 4x external (us) | MAC peak / engine | 4x / engine | 4x / programs | GPU roofline (us) |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['model']} | {r['tokens']} | {r['engine_us']:.3f} | {r['pim_programs_us']:.3f} | "
                  f"{r['roofline_mac_peak_us']:.3f} | {r['roofline_external_us']:.3f} | "
                  f"{r['mac_peak_over_engine']:.2f} | {r['external_over_engine']:.2f} | "
                  f"{r['external_over_programs']:.2f} | {r['gpu_roofline_us']:.3f} |")
    return 0


#: breakdown components in print order, with their labels
_ATTN_ROWS = (("mac", "MAC commands (MACAB x nCCDAB)"), ("row", "row activations / precharges"),
              ("gwrite", "GWRITE (query heads; probabilities)"), ("readout", "result readout (RDRES)"),
              ("refresh", "refresh"), ("other", "other"))


def _attention_layer_index(model, layer: int | None) -> int:
    kinds = model.layer_attention
    if layer is None:
        if "full" in kinds:
            return kinds.index("full")
        return next((i for i, k in enumerate(kinds) if k != "linear"), 0)
    if not 0 <= layer < len(kinds):
        raise field_error("--layer", layer, f"a layer index from 0 to {len(kinds) - 1} ({model.name})")
    return layer


def attention_report(model_name: str, hardware: str = "b200", batch: int = 64, context: int = 4096, gpus: int = 1,
                     layer: int | None = None, mapping: str = "grouped", what_if: str | None = None,
                     balance: str = "tokens", context_preset: str | None = None, seed: int = 0) -> dict:
    """The report ``sievesim pim attention`` prints (times in us; see docs/pim.md)."""
    import dataclasses

    from ..costs import attention_shape, pim_peak_flops
    from ..hardware import get_hardware
    from ..models import get_model
    from ..pim.expert import AttentionLayer, PIMDevice
    from ..pim.whatif import parse_what_if, what_if_device
    from ..system import gpu_ops

    if batch % gpus:
        raise field_error("--batch", batch, f"a multiple of --gpus = {gpus} (each GPU holds B / G requests)")
    model, hw = get_model(model_name), get_hardware(hardware)
    index = _attention_layer_index(model, layer)
    device = PIMDevice.from_hardware(hw)
    changes = parse_what_if(what_if) if what_if is not None else {}
    if changes:
        device = what_if_device(device, changes)
    att = AttentionLayer.from_model(model, index, multi_vector=device.multi_vector_pu,
                                    mapping=mapping.replace("-", "_"), balance=balance)
    lens = _gpu0_lens(batch, gpus, context, context_preset, seed)
    bd = att.breakdown(device, lens)
    tck_us = device.tck_s * 1e6
    programs = {name: {c: v * tck_us for c, v in comps.items()} for name, comps in bd["programs"].items()}
    flops = attention_shape(model, index).total_flops(lens)
    gpu = gpu_ops.roofline_s(gpu_ops.decode_attention_on_gpu(model, index, lens), hw)
    total = bd["total_s"] * 1e6
    return {
        "model": model.name, "hardware": hw.name, "layer": index, "kind": att.kind,
        "kv_heads": att.kv_heads, "group": att.q_per_kv, "head_dim": att.head_dim,
        "batch": batch, "gpus": gpus, "requests_per_gpu": len(lens),
        "context": context if context_preset is None else {"preset": context_preset, "seed": seed, "min": min(lens),
                                                            "mean": sum(lens) / len(lens), "max": max(lens)},
        "mapping": att.mapping, "balance": att.balance, "what_if": changes, "busiest_units": bd["busiest_units"],
        "device": {k: getattr(device, k) for k in ("macs_per_command", "vectors_per_mac", "accumulators",
                                                    "global_buffer_bytes", "banks_per_pu", "refresh")},
        "components_us": programs, "cycles": bd["cycles"], "commands": bd["commands"],
        "mac_useful_share": bd["mac_useful_share"],
        "plans": {k: [list(p) for p in v] for k, v in bd["plans"].items()},
        "softmax_us": bd["softmax_s"] * 1e6, "sync_us": bd["sync_s"] * 1e6, "pim_programs_us": bd["pim_s"] * 1e6,
        "pim_us": total, "roofline_us": flops / pim_peak_flops(hw) * 1e6,
        "mac_peak_roofline_us": flops / (device.peak_flops() * device.vectors_per_mac) * 1e6,
        "gpu_us": gpu * 1e6, "pim_over_roofline": total / (flops / pim_peak_flops(hw) * 1e6) if flops else None,
        "pim_over_gpu": total / (gpu * 1e6) if gpu else None,
    }


def _gpu0_lens(batch: int, gpus: int, context: int, preset: str | None, seed: int) -> list[int]:
    """Context lengths [tokens] of GPU 0's B / G requests (as ``sievesim run`` places them)."""
    if preset is None:
        return [int(context)] * (batch // gpus)
    import numpy as np

    from ..workload.lengths import LENGTH_PRESETS, decode_context_lengths
    if preset.lower() not in LENGTH_PRESETS:
        raise field_error("--context-preset", preset, "one of " + ", ".join(LENGTH_PRESETS))
    lens = decode_context_lengths(preset, batch, np.random.default_rng(seed))
    return [int(x) for x in lens[: batch // gpus]]


def _needs_rows(args: argparse.Namespace, report: dict) -> list[dict]:
    import dataclasses

    from ..hardware import get_hardware
    from ..models import get_model
    from ..pim.expert import AttentionLayer, PIMDevice
    from ..pim.whatif import attention_needs, parse_what_if, what_if_device
    from ..system import gpu_ops

    if report["kind"] not in ("full", "sliding", "chunked"):
        raise field_error("--needs", report["kind"], "a layer with GQA attention (full, sliding or chunked)")
    groups = parse_int_list("--groups", args.groups, "heads")
    macs = parse_int_list("--macs", args.macs, "heads")
    vectors = parse_int_list("--vectors", args.vectors, "heads")
    for m in macs:
        parse_what_if(f"macs={m}", "--macs")
    for v in vectors:
        parse_what_if(f"vectors={v}", "--vectors")
    model, hw = get_model(args.model), get_hardware(args.hardware)
    index = report["layer"]
    device = PIMDevice.from_hardware(hw)
    if args.what_if:
        device = what_if_device(device, {k: v for k, v in parse_what_if(args.what_if).items()
                                         if k in ("accumulators", "buffer")})
    att = AttentionLayer.from_model(model, index, multi_vector=device.multi_vector_pu,
                                    mapping=args.mapping.replace("-", "_"), balance=args.balance)
    lens = _gpu0_lens(args.batch, args.gpus, args.context, args.context_preset, args.seed)

    def gpu_s(g: int) -> float:
        m = dataclasses.replace(model, num_attention_heads=g * model.num_kv_heads)
        return gpu_ops.roofline_s(gpu_ops.decode_attention_on_gpu(m, index, lens), hw)

    return attention_needs(att, device, lens, gpu_s, groups=groups, macs=macs, vectors=vectors)


def _attention(args: argparse.Namespace) -> int:
    report = attention_report(args.model, args.hardware, args.batch, args.context, args.gpus, args.layer,
                              args.mapping, args.what_if, args.balance, args.context_preset, args.seed)
    if args.needs:
        report["needs"] = _needs_rows(args, report)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    r = report
    ctx = r["context"] if isinstance(r["context"], int) else \
        f"{r['context']['preset']} ({r['context']['min']}..{r['context']['max']}, mean {r['context']['mean']:.0f})"
    print(f"{r['model']} on {r['hardware']}: layer {r['layer']} ({r['kind']}), {r['kv_heads']} KV heads x "
          f"{r['group']} query heads (head_dim {r['head_dim']}), {r['requests_per_gpu']} requests of {ctx} "
          f"tokens per GPU; mapping {r['mapping']}, balance {r['balance']}" + (f"; what-if {r['what_if']}" if r["what_if"] else ""))
    units = r["busiest_units"]
    print(f"busiest pseudo-channel: {len(units)} unit(s) or piece(s), {sum(units)} tokens (longest {max(units, default=0)})"
          + "".join(f"; {k}: heads per pass, passes, input chunks {v}" for k, v in r["plans"].items()))
    names = list(r["components_us"])
    print()
    print("| component | " + " | ".join(f"{n} (us)" for n in names) + " | total (us) | share |")
    print("|---|" + "---|" * len(names) + "---|---|")
    for key, label in _ATTN_ROWS:
        vals = [r["components_us"][n][key] for n in names]
        print(f"| {label} | " + " | ".join(f"{v:.2f}" for v in vals) + f" | {sum(vals):.2f} | "
              f"{sum(vals) / r['pim_us']:.1%} |")
    for key, label in (("softmax_us", "GPU softmax"), ("sync_us", "GPU-PIM hand-over")):
        print(f"| {label} | " + " | ".join("" for _ in names) + f" | {r[key]:.2f} | {r[key] / r['pim_us']:.1%} |")
    print(f"| **total** | " + " | ".join(f"{sum(r['components_us'][n].values()):.2f}" for n in names)
          + f" | **{r['pim_us']:.2f}** | 100% |")
    print()
    for n in names:
        print(f"{n} commands (busiest pseudo-channel, mean per refresh phase): "
              + ", ".join(f"{k} {v:g}" for k, v in r["commands"][n].items())
              + f"; MACs used {r['mac_useful_share'][n]:.1%} of those the MAC commands offer")
    ratio = f" ({r['pim_over_roofline']:.2f}x)" if r["pim_over_roofline"] else ""
    print(f"PIM {r['pim_us']:.2f} us; roofline (FLOPs / hardware PIM peak) {r['roofline_us']:.2f} us{ratio}; "
          f"GPU {r['gpu_us']:.2f} us; PIM / GPU {r['pim_over_gpu']:.2f}")
    if args.needs:
        print()
        print("| GQA group | MACs per PU per command (macs x vectors) | PIM (us) | GPU (us) | PIM / GPU |")
        print("|---|---|---|---|---|")
        for row in r["needs"]:
            print(f"| {row['group']} | {row['macs_per_command']} ({row['macs']} x {row['vectors']}) | "
                  f"{row['pim_us']:.2f} | {row['gpu_us']:.2f} | {row['pim_over_gpu']:.2f} |")
        print()
        for g in dict.fromkeys(row["group"] for row in r["needs"]):
            rows = [row for row in r["needs"] if row["group"] == g]
            for limit in (1.0, 0.5):
                ok = [row for row in rows if row["pim_over_gpu"] < limit]
                best = min(ok, key=lambda row: (row["macs_per_command"], row["pim_us"])) if ok else None
                print(f"group {g}: PIM below {limit:g} x GPU needs "
                      + (f"{best['macs_per_command']} MACs per PU per command ({best['macs']} x {best['vectors']}: "
                         f"{best['pim_us']:.2f} us vs {best['gpu_us']:.2f} us)" if best else "more than the grid holds"))
    return 0


def _print(d: dict, as_json: bool) -> None:
    from .._outputs import check_finite
    check_finite(d)
    if as_json:
        print(json.dumps(d, indent=2))
        return
    for k, v in d.items():
        if isinstance(v, dict):
            if k == "energy_breakdown_j":
                print(f"{k:<22}  " + ", ".join(f"{n} {x:.4g}" for n, x in v.items()))
            continue
        if isinstance(v, float) and k.startswith("energy") and abs(v) < 1e-3:
            print(f"{k:<22}  {v:.4g}")
            continue
        print(f"{k:<22}  {v:.4f}" if isinstance(v, float) else f"{k:<22}  {v}")
