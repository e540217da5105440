"""``sievesim calibrate``: fit the calibrated GPU model to measured decode times, write a hardware TOML."""
from __future__ import annotations

import argparse
import dataclasses
import pathlib

from ..errors import field_error


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "calibrate", help="fit the calibrated GPU model's constants to your measured decode times",
        description="Fit the per-kernel fixed cost and the achieved bandwidth (or the fields named with --fit) of "
                    "the calibrated GPU model to measured time per output token, and write a hardware TOML "
                    "(base = the hardware given, and the fitted fields) for --hardware. MEASUREMENTS is a CSV with "
                    "columns model, gpus, batch, context_len, measured_tpot_ms and optionally id, attention (dp/tp), "
                    "experts (ep/tp), weight_format, hardware (must be the one given), engine, reported, source. "
                    "Prints each point's simulated / measured before and after. See docs/hardware.md.")
    p.add_argument("measurements", metavar="MEASUREMENTS.csv", help="measured decode points (CSV)")
    p.add_argument("--hardware", required=True, help="the hardware measured: a preset name or .toml (the base)")
    p.add_argument("-o", "--out", required=True, metavar="FILE.toml", help="hardware TOML to write")
    p.add_argument("--fit", default=None, metavar="FIELD,...",
                   help="fields to fit (default kernel_launch_s,kernel_bandwidth_fraction); any of "
                        "kernel_launch_s, kernel_ramp_s, kernel_bandwidth_fraction, kernel_flops_fraction, "
                        "attention_bandwidth_fraction, step_overhead_s_per_request, allreduce_latency_s, "
                        "alltoall_latency_s")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from .._outputs import write_output
    from ..benchmarks.gpu_validation import read_points
    from ..calibrate import DEFAULT_FIT, calibrate, calibration_toml, describe_fit
    from ..hardware import get_hardware

    out = pathlib.Path(args.out)
    if out.suffix.lower() != ".toml":
        raise field_error("--out", args.out, "a .toml file name (the calibrated hardware)")
    if out.resolve() == pathlib.Path(args.measurements).resolve():
        raise field_error("--out", args.out, "a file other than the measurements read")
    hw = get_hardware(args.hardware)
    points = read_points(args.measurements)
    for p in points:
        if p.hardware and p.hardware not in (hw.name, args.hardware):
            raise field_error("hardware", p.hardware, f"{args.hardware!r}, the hardware calibrated (point {p.id} of "
                              f"{args.measurements}; calibrate one hardware at a time)")
    points = [dataclasses.replace(p, hardware=args.hardware) for p in points]
    fit = DEFAULT_FIT if args.fit is None else [x.strip() for x in args.fit.split(",")]
    result = calibrate(points, hw, fit)
    for line in describe_fit(result):
        print(line)
    base = args.hardware
    if pathlib.Path(base).suffix.lower() == ".toml":
        base = str(pathlib.Path(base).resolve())
    write_output(out, calibration_toml(result, base, out.stem), "calibrated hardware TOML")
    get_hardware(str(out))      # it reads back
    print(f"wrote {out} (base = {base!r}; use it as --hardware {out})")
    return 0
