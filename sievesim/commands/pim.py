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


def _print(d: dict, as_json: bool) -> None:
    from .._outputs import check_finite
    check_finite(d)
    if as_json:
        print(json.dumps(d, indent=2))
        return
    for k, v in d.items():
        if isinstance(v, dict):
            continue
        print(f"{k:<22}  {v:.4f}" if isinstance(v, float) else f"{k:<22}  {v}")
