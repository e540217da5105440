"""``sievesim reproduce FIG``: one of the Sieve paper's figures as CSV + PNG, with the paper's
claims beside ours."""
from __future__ import annotations

import argparse
import json

from .._validate import int_arg


def register(subparsers: argparse._SubParsersAction) -> None:
    from ..reproduce import figure_names

    p = subparsers.add_parser(
        "reproduce", help="a figure of the Sieve paper (CSV, PNG, the paper's claims beside ours)",
        description="Figures: " + ", ".join(figure_names()) + ". Writes FIG.csv (and FIG.png with "
                    "matplotlib) into --out and prints the paper's claims beside our numbers.")
    p.add_argument("figure", metavar="FIG", help="figure name: " + ", ".join(figure_names()))
    p.add_argument("--out", default="figures", metavar="DIR", help="output directory (default figures)")
    p.add_argument("--quick", action="store_true", help="reduced version: fewer batch sizes and steps")
    p.add_argument("--json", action="store_true", help="print the figure's records as one JSON list")
    p.add_argument("--trace", action="append", default=[], metavar="FILE",
                   help="add a routing trace (.npz, SGLang dump) beside the synthetic routing "
                        "(fig3: traces recorded on a preset model; fig5: any); repeatable")
    p.add_argument("--seed", type=int_arg("seed"), default=0, help="seed of every random draw (default 0)")
    p.add_argument("--jobs", type=int_arg("threads"), default=1, metavar="N",
                   help="worker processes for figures that run the executed step (default 1)")
    p.add_argument("--gpu-model", default="roofline", metavar="NAME",
                   help="GPU model of every executed step: roofline (default: the Sieve paper's, as the paper "
                        "evaluates) or calibrated (kernels priced from published GPU measurements; files "
                        "NAME-calibrated.*), to see whether the paper's conclusions survive real GPUs")
    p.add_argument("--quiet", action="store_true",
                   help="no progress bars (they show only on a terminal, with sievesim[progress])")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    import sys

    from ..progress import is_terminal
    from ..reproduce import format_report, reproduce

    progress = sys.stderr if not args.quiet and is_terminal(sys.stderr) else None
    reports = reproduce(args.figure, args.out, quick=args.quick, traces=args.trace, seed=args.seed,
                        jobs=args.jobs, progress=progress, gpu_model=args.gpu_model)
    if args.json:
        print(json.dumps([r for rep in reports for r in rep.data.records]))
        return 0
    model = ("the Sieve paper's roofline (Duplex's: max(flops / peak, bytes / bandwidth) per GPU op)"
             if args.gpu_model == "roofline" else "calibrated (kernels priced from published GPU measurements; "
                                                   "docs/hardware.md)")
    print(f"GPU model of every executed step: {model}\n")
    print("\n\n".join(format_report(rep) for rep in reports))
    return 0
