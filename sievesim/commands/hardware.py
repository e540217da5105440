"""``sievesim hardware`` (list presets) and ``sievesim hardware show|save`` (one spec)."""
from __future__ import annotations

import argparse
from typing import Any
import json
import sys


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("hardware", help="list hardware presets, or show/save one (preset or .toml)")
    p.add_argument("--json", dest="list_json", action="store_true", help="print the list as JSON")
    p.set_defaults(func=_list)
    sub = p.add_subparsers(dest="hardware_command", metavar="SUBCOMMAND")

    show = sub.add_parser("show", help="print a hardware spec and its derived figures")
    show.add_argument("hardware", metavar="NAME|PATH", help="preset name or .toml file")
    fmt = show.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print one JSON object")
    fmt.add_argument("--toml", action="store_true", help="print the spec as TOML")
    show.set_defaults(func=_show)

    save = sub.add_parser("save", help="write a hardware spec as TOML (a starting point to edit)")
    save.add_argument("hardware", metavar="NAME|PATH")
    save.add_argument("output", metavar="OUT.toml")
    save.set_defaults(func=_save)

    lst = sub.add_parser("list", help="list hardware presets (same as plain `sievesim hardware`)")
    lst.add_argument("--json", dest="list_json", action="store_true")
    lst.set_defaults(func=_list)


def _row(name: str) -> dict:
    from ..hardware import get_hardware

    hw = get_hardware(name)
    row = {"name": name, "gpu": hw.gpu.name, "peak_flops_bf16": hw.gpu.peak_flops_bf16,
           "hbm_bandwidth_bytes_per_s": hw.gpu.hbm_bandwidth_bytes_per_s,
           "num_hbm_stacks": hw.gpu.num_hbm_stacks,
           "interconnect_bytes_per_s_per_direction": hw.interconnect.bandwidth_bytes_per_s_per_direction}
    if hw.pim is not None:
        row.update(pim_dram_config=hw.pim.dram_config, pim_pu_placement=hw.pim.pu_placement,
                   pim_internal_bandwidth_ratio=hw.pim.internal_bandwidth_ratio, pim_peak_flops=hw.pim_peak_flops)
    return row


def _list(args: argparse.Namespace) -> int:
    from ..hardware import list_hardware

    rows = [_row(n) for n in list_hardware()]
    if getattr(args, "list_json", False):
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'name':<12} {'gpu':<10} {'TFLOP/s':>8} {'HBM TB/s':>8} {'stacks':>6} {'DRAM':<11} {'PUs':<10} "
          f"{'ratio':>5} {'PIM TFLOP/s':>11} {'link GB/s':>9}")
    for r in rows:
        print(f"{r['name']:<12} {r['gpu']:<10} {r['peak_flops_bf16'] / 1e12:>8.1f} "
              f"{r['hbm_bandwidth_bytes_per_s'] / 1e12:>8.3f} {r['num_hbm_stacks']:>6} "
              f"{r.get('pim_dram_config', '-'):<11} {r.get('pim_pu_placement', '-'):<10} "
              f"{r.get('pim_internal_bandwidth_ratio', 0):>5g} {r.get('pim_peak_flops', 0) / 1e12:>11.1f} "
              f"{r['interconnect_bytes_per_s_per_direction'] / 1e9:>9.0f}")
    return 0


def _show(args: argparse.Namespace) -> int:
    from ..hardware import get_hardware, hardware_to_dict

    hw = get_hardware(args.hardware)
    if args.toml:
        import tomli_w

        sys.stdout.write(tomli_w.dumps(hardware_to_dict(hw)))
        return 0
    summary = hw.summary()
    from .._outputs import check_finite
    check_finite(summary)
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    g, link = hw.gpu, hw.interconnect
    lines = [f"{hw.name}" + (f"  ({hw.description})" if hw.description else ""),
             f"  gpu           {g.name}: {g.peak_flops_bf16 / 1e12:.1f} TFLOP/s bf16 (x{g.compute_efficiency:g}), "
             f"HBM {g.hbm_bandwidth_bytes_per_s / 1e12:.3f} TB/s (x{g.memory_efficiency:g}), "
             f"{g.hbm_capacity_bytes / 2**30:.1f} GiB in {g.num_hbm_stacks} stacks",
             f"  ridge         {g.ridge_flops_per_byte:.1f} FLOP/B"]
    if hw.pim is not None:
        pim = hw.pim
        lines += [f"  pim           {pim.dram_config}, one PU per {pim.pu_placement}, {pim.macs_per_command} MACs/command, "
                  f"{pim.internal_bandwidth_ratio:g}x internal bandwidth = "
                  f"{pim.internal_bandwidth_bytes_per_s_per_stack / 1e12:.2f} TB/s per stack",
                  f"  pim peak      {pim.peak_flops_per_stack / 1e12:.2f} TFLOP/s per stack, "
                  f"{hw.pim_peak_flops / 1e12:.1f} TFLOP/s per GPU; global buffer {pim.global_buffer_bytes} B; "
                  f"activation on {'PIM' if pim.activation_on_pim else 'GPU'}"]
    else:
        lines.append("  pim           none (plain HBM)")
    lines.append(f"  interconnect  {link.bandwidth_bytes_per_s_per_direction / 1e9:.0f} GB/s per direction, "
                 f"{link.latency_s * 1e6:.2f} us, {link.topology}")
    lines.append("  topology      " + _topology_words(link))
    if not g.calibration_missing():
        fp8 = f"{g.peak_flops_fp8 / 1e12:.0f}" if g.peak_flops_fp8 else "none (BF16)"
        fp4 = f"{g.peak_flops_fp4 / 1e12:.0f}" if g.peak_flops_fp4 else "none (weight-only, BF16)"
        lines.append(f"  calibrated    {g.kernel_launch_s * 1e6:g} + {g.kernel_ramp_s * 1e6:g} us per kernel, "
                     f"{g.kernel_bandwidth_fraction:.0%} of the HBM bandwidth, {g.kernel_flops_fraction:.1%} of the "
                     f"tensor-core peak; FP8 {fp8} TFLOP/s, FP4 {fp4} (docs/hardware.md)")
    if g.static_power_w is not None:
        lines.append(f"  energy        {g.energy_pj_per_flop:g} pJ/FLOP, {g.energy_pj_per_hbm_byte:g} pJ per HBM byte on "
                     f"the GPU side, static {g.static_power_w:g} W"
                     + (f"; links {link.energy_pj_per_bit:g} pJ/bit" if link.energy_pj_per_bit is not None else "")
                     + " (docs/energy.md)")
    print("\n".join(lines))
    return 0


def _topology_words(link: Any) -> str:
    """The GPUs' domains and what joins them, in words."""
    inside = "every GPU of a run in one NVLink domain" if link.gpus_per_node is None else \
        f"nodes of {link.gpus_per_node} GPUs, each one NVLink domain"
    if link.scaleout_bandwidth_bytes_per_s_per_direction is None:
        return inside + "; no scale-out network (--nodes 1 only)"
    return (inside + f"; nodes joined by one {link.scaleout_bandwidth_bytes_per_s_per_direction * 8 / 1e9:.0f} Gb/s "
            f"NIC per GPU ({link.scaleout_latency_s * 1e6:.2f} us); run --nodes N splits a run's GPUs")


def _save(args: argparse.Namespace) -> int:
    from ..hardware import get_hardware, save_hardware_toml

    import dataclasses
    from pathlib import Path

    hw = get_hardware(args.hardware)       # saved under the file's name: "my-b200.toml" is "my-b200"
    save_hardware_toml(dataclasses.replace(hw, name=Path(args.output).stem), args.output)
    print(f"wrote {args.output}")
    return 0
