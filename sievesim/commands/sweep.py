"""``sievesim sweep``: run a grid of points through a process pool, serially or on a Dask cluster;
results go point by point into a directory and a rerun resumes where the last one stopped."""
from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Any, Callable

from .._validate import int_arg, int_list_arg, number_list_arg
from ..errors import ConfigError, field_error
from ..sweep import INT_SETTINGS

#: Point functions by name; ``step`` (the executed decode step) is the default.
POINT_FUNCTIONS = {
    "step": "sievesim.sweep:step_point",
    "estimate": "sievesim.sweep:estimate_point",
}


def _list(kind: Callable[[str], Any]) -> Callable[[str], list[Any]]:
    def parse(text: str) -> list[Any]:
        try:
            values = [kind(x.strip()) for x in text.split(",") if x.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a comma-separated list, got {text!r}") from None
        if not values:
            raise argparse.ArgumentTypeError(f"expected at least one value, got {text!r}")
        return values
    return parse


def _int_list(key: str) -> Callable[[str], list[int]]:
    """Comma-separated integers in ASCII digits within the setting's bounds (``int`` would also
    read Unicode digits such as ``'٣'``)."""
    kind, lo = INT_SETTINGS[key]
    return int_list_arg(kind, lo=lo)


def _bool(text: str) -> bool | str:
    """true/false, or an early-load rule (cheaper, paper, off: the spelling of ``run --early-loads``)."""
    low = text.strip().lower()
    if low in ("cheaper", "paper", "off"):
        return low
    if low not in ("true", "false"):
        raise ValueError(text)
    return low == "true"


def _list_semicolon(text: str) -> list[str]:
    values = [x.strip() for x in text.split(";") if x.strip()]
    if not values:
        raise argparse.ArgumentTypeError(f"expected at least one value, got {text!r}")
    return values


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "sweep", help="run a grid of points (resumable; process pool or Dask)",
        description="Every combination of the listed values is one point; each point is one call of "
                    "the point function. Results go to OUT/results.csv and OUT/results.jsonl as points "
                    "finish; rerunning the same command skips the finished points.")
    p.add_argument("--grid", metavar="FILE", help="TOML grid file (keys: " + ", ".join(_grid_keys()) + ")")
    p.add_argument("--model", type=_list(str), help="model presets or config paths, comma-separated")
    p.add_argument("--top-k", type=_int_list("top_k"),
                   help="routed experts per token, overriding the model's (e.g. 4,8 for Qwen3-30B-A3B)")
    p.add_argument("--hardware", type=_list(str), help="hardware presets or TOML paths (default b200)")
    p.add_argument("--gpus", type=_int_list("gpus"), help="GPU counts (default 1)")
    p.add_argument("--policy", type=_list(str), help="policies (default sieve; gpu-only = no PIM)")
    p.add_argument("--pimoe-unit", type=_list(str), help="PIMoE placement units (default stack)")
    p.add_argument("--batch", type=_int_list("batch"), help="batch sizes (decode requests)")
    p.add_argument("--trace", type=_list(str), help="routing: trace files or synthetic:MODEL (default: the model's synthetic routing)")
    p.add_argument("--context-len", type=_int_list("context_len"), help="context tokens of every decode request")
    p.add_argument("--context-preset", type=_list(str), help="request-length presets (hh-rlhf, math-500)")
    p.add_argument("--prefill", type=_list(str), metavar="P:L,...",
                   help="colocated prefill: P requests of L prompt tokens each (e.g. 2:1024)")
    p.add_argument("--steps", type=_int_list("steps"), help="decode steps per point (default 1)")
    p.add_argument("--warmup", type=_int_list("warmup"), help="warm-up steps before the measured ones (default: the step's, 2)")
    p.add_argument("--seed", type=_int_list("seed"), help="seeds (default 0)")
    p.add_argument("--microbatches", type=_int_list("microbatches"), help="1, or 2 to interleave two halves of the batch")
    p.add_argument("--early-loads", type=_list(_bool), metavar="RULE,...",
                   help="early weight loads: cheaper, paper, off (as run --early-loads) or true/false "
                        "(default: the policy's)")
    p.add_argument("--scheduler-latency-us", type=number_list_arg(lo=0, hi=999999, what="microseconds"),
                   metavar="US,...",
                   help="modelled decision latency per layer for 256 experts (default: the hardware's)")
    p.add_argument("--policy-options", type=_list_semicolon, metavar="K=V[,K=V];...",
                   help="policy constructor arguments, one set per value, sets separated by ';' "
                        "(e.g. include_attention=false)")
    p.add_argument("--policy-option", action="append", default=[], metavar="KEY=VALUE",
                   help="one constructor argument of the policies, as run --policy-option (repeatable; "
                        "all of them make one set: --policy-options for several sets)")
    p.add_argument("--out", default="sweep-out", metavar="DIR", help="output directory (default sweep-out)")
    p.add_argument("--point", choices=sorted(POINT_FUNCTIONS), default=None,
                   help="what one point runs: step = the executed decode step (sievesim run), "
                        "estimate = the scheduler's one-layer estimate (default: step when available)")
    p.add_argument("--jobs", type=int_arg("threads"), default=None, metavar="N",
                   help="worker processes (default: CPU count; 1 runs the points in this process)")
    p.add_argument("--dask", metavar="ADDRESS", help="run on a Dask scheduler (needs sievesim[dask])")
    p.add_argument("--force", action="store_true", help="start over in a directory that holds another grid")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.set_defaults(func=_run)


def _grid_keys() -> tuple[str, ...]:
    from ..sweep import GRID_KEYS
    return GRID_KEYS


def resolve_point_function(name: str | None) -> Callable[..., Any]:
    """The point function called ``name`` (:data:`POINT_FUNCTIONS`); ``None``: the executed step."""
    if name is None:
        name = "step"
    module, attr = POINT_FUNCTIONS[name].split(":")
    return getattr(importlib.import_module(module), attr)


def _run(args: argparse.Namespace) -> int:
    from ..sweep import GRID_KEYS, check_points, expand_grid, load_grid_file

    if args.policy_option:
        if args.policy_options:
            raise field_error("--policy-option", args.policy_option[0], "not together with --policy-options")
        args.policy_options = [",".join(args.policy_option)]
    if args.grid and not os.path.exists(args.grid):
        raise ConfigError(f"file not found: {args.grid} (--grid)")
    products = load_grid_file(args.grid) if args.grid else [{}]
    flags = {k: getattr(args, k) for k in GRID_KEYS if getattr(args, k, None) is not None}
    products = [{**prod, **flags} for prod in products]
    points = expand_grid(products)
    if args.jobs is not None and args.jobs < 1:
        raise field_error("--jobs", args.jobs, "a positive number of worker processes")
    workers = 1 if args.jobs == 1 else min(args.jobs or os.cpu_count() or 1, len(points))
    check_points(points, point=args.point or "step", workers=workers)
    if any(prod.get("pimoe_unit") for prod in products) and not any(
            str(p["policy"]).lower() == "pimoe" for p in points):
        raise field_error("pimoe_unit", next(prod["pimoe_unit"] for prod in products if prod.get("pimoe_unit"))[0],
                          "only with policy pimoe in the grid (no point would use it)")
    point_fn = resolve_point_function(args.point)
    if args.dask is not None and not args.dask.strip():
        raise field_error("--dask", args.dask, "the address of a Dask scheduler (e.g. tcp://host:8786); leave "
                          "--dask out to run locally")
    if args.dask and args.jobs is not None:
        raise field_error("--jobs", args.jobs, "not with --dask (the cluster has its own workers)")
    progress = None if args.quiet else sys.stderr
    try:
        summary = _execute(args, points, point_fn, progress)
    except KeyboardInterrupt:
        raise KeyboardInterrupt(f"the finished points are kept in {args.out}; rerun the same command to resume "
                                "(finished points are skipped)") from None
    print(f"{summary.done}/{summary.total} points in {summary.out_dir} ({summary.ran} run now, "
          f"{summary.skipped} already done): results.csv, results.jsonl")
    return 0


def _execute(args: argparse.Namespace, points: list[dict[str, Any]], point_fn: Callable[..., Any],
             progress: Any) -> Any:
    """Run the points serially, on a local process pool (workers ignore Ctrl-C, so that the
    interrupted sweep reports it once, here) or on a Dask cluster."""
    from ..sweep import run_grid

    if args.dask:
        try:
            from dask.distributed import Client
        except ImportError:
            raise ConfigError("--dask needs Dask: pip install 'sievesim[dask]'") from None
        try:
            client = Client(args.dask, timeout="10s")
        except (OSError, TimeoutError, ValueError) as exc:
            raise field_error("--dask", args.dask, f"the address of a running Dask scheduler ({exc})") from None
        try:
            summary = run_grid(points, args.out, point_fn=point_fn, executor=client.get_executor(),
                               force=args.force, progress=progress, grid_file=args.grid)
        finally:
            client.close()
    elif args.jobs == 1 or len(points) == 1:
        summary = run_grid(points, args.out, point_fn=point_fn, force=args.force, progress=progress,
                           grid_file=args.grid)
    else:
        from ..workers import process_pool

        workers = min(args.jobs or os.cpu_count() or 1, len(points))
        with process_pool(workers) as pool:
            summary = run_grid(points, args.out, point_fn=point_fn, executor=pool,
                               force=args.force, progress=progress, grid_file=args.grid)
    return summary
