"""``sievesim plot RESULTS``: any sweep output as a picture (the paper's Pareto by default)."""
from __future__ import annotations

import argparse
import pathlib


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "plot", help="plot a sweep's results (throughput vs interactivity by default; any columns)",
        description="Plot RESULTS (a sweep directory, results.jsonl or results.csv): by default the Sieve "
                    "paper's Pareto picture, throughput per GPU against interactivity, one line per policy, "
                    "one panel per model. Any numeric columns can be the axes, any column the colour or "
                    "the panels.")
    p.add_argument("results", metavar="RESULTS", help="sweep directory, .jsonl or .csv file")
    p.add_argument("--x", default=None, metavar="COLUMN",
                   help="x axis column (default interactivity_tokens_per_s_per_user; serving sweeps: rate)")
    p.add_argument("--y", default=None, metavar="COLUMN",
                   help="y axis column (default throughput_tokens_per_s_per_gpu; serving sweeps: "
                        "goodput_requests_per_s)")
    p.add_argument("--color", default=None, metavar="COLUMN", help="one line per value (default policy)")
    p.add_argument("--facet", default=None, metavar="COLUMN",
                   help="one panel per value (default model, when there are several)")
    p.add_argument("--logx", action="store_true", help="logarithmic x axis")
    p.add_argument("--logy", action="store_true", help="logarithmic y axis")
    p.add_argument("--where", action="append", default=[], metavar="COLUMN=VALUE",
                   help="keep only the rows with this value (repeatable)")
    p.add_argument("--title", default=None, help="title above the panels")
    p.add_argument("--out", default=None, metavar="FILE",
                   help="picture file: .png, .svg, .pdf or another format matplotlib writes (.eps, .jpg, "
                        ".tiff, .webp, ...; default: plot.png beside the results)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from ..errors import ConfigError
    from ..sweeps.plotting import parse_where, plot_results, save_plot

    src = pathlib.Path(args.results)
    if not src.exists():
        raise ConfigError(f"file not found: {src}")
    out = args.out or str((src if src.is_dir() else src.parent) / "plot.png")
    fig = plot_results(src, x=args.x, y=args.y, color=args.color, facet=args.facet, logx=args.logx,
                       logy=args.logy, where=parse_where(args.where), title=args.title)
    try:
        path = save_plot(fig, out)
    except OSError as exc:
        from ..errors import field_error
        raise field_error("--out", out, f"a writable file ({exc.strerror})") from None
    print(f"wrote {path}")
    return 0
