"""``sievesim sweep``: run a grid of points through a process pool, serially or on a Dask cluster;
results go point by point into a directory and a rerun resumes where the last one stopped."""
from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import re
import sys
from typing import Any, Callable, Iterator

from .._validate import MAX_LIST, _arg_type, int_arg, int_list_arg, number_list_arg, parse_number
from ..errors import ConfigError, field_error
from ..sweeps.grid import SETTING_DEFAULTS
from ..sweeps.run import INT_SETTINGS

#: Point functions by name; ``step`` (the executed decode step) is the default.
POINT_FUNCTIONS = {
    "step": "sievesim.sweeps.run:step_point",
    "estimate": "sievesim.sweeps.run:estimate_point",
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
    """true/false, or an early-load rule (cheaper, paper, policy, off: the spelling of ``run --early-loads``)."""
    low = text.strip().lower()
    if low in ("cheaper", "paper", "policy", "off"):
        return low
    if low not in ("true", "false"):
        raise ValueError(text)
    return low == "true"


def _list_semicolon(text: str) -> list[str]:
    values = [x.strip() for x in text.split(";") if x.strip()]
    if not values:
        raise argparse.ArgumentTypeError(f"expected at least one value, got {text!r}")
    return values


#: Serving settings (``--kind serve``) and their flags; model, hardware, GPUs, policy, PIMoE unit,
#: top-k, trace (a request trace here), seed and policy options are shared with decode sweeps.
SERVE_FLAGS = {
    "prefill_gpus": ("--prefill-gpus", "GPUs of a prefill pool of their own (disaggregated prefill); 0 or none: "
                                       "colocated (the default), so --prefill-gpus 0,1 runs both"),
    "rate": ("--rate", "arrival rates, requests/s (Poisson, or gamma with --cv)"),
    "requests": ("--requests", "requests per point (default 100; with --trace: its first N rows)"),
    "arrival_window_s": ("--arrival-window", "serve at least rate x S requests (seconds)"),
    "cv": ("--cv", "coefficients of variation of the inter-arrival times (default 1 = Poisson)"),
    "lengths": ("--lengths", "request-length presets: hh-rlhf (default), math-500"),
    "prompt_tokens": ("--prompt-tokens", "fixed prompt lengths (tokens)"),
    "output_tokens": ("--output-tokens", "fixed output lengths (tokens)"),
    "max_batch": ("--max-batch", "running requests at most (default 256)"),
    "token_budget": ("--token-budget", "tokens per iteration, decode + prefill chunks (default 2048)"),
    "horizon_s": ("--horizon", "stop at S simulated seconds (default: when every request has finished)"),
    "ttft_slo_s": ("--ttft-slo", "TTFT targets, seconds (default 2)"),
    "tpot_slo_s": ("--tpot-slo", "TPOT targets, seconds (default 0.05)"),
    "e2e_slo_s": ("--e2e-slo", "end-to-end targets, seconds (default none)"),
    "attainment": ("--attainment", "shares of requests that must meet every target (default 0.9)"),
    "block_size": ("--block-size", "tokens per KV block (default 16)"),
    "memory_utilization": ("--memory-utilization", "shares of the HBM the server may use (default 0.9)"),
    "max_model_len": ("--max-model-len", "longest request, prompt + output tokens (default 32768)"),
    "error_samples": ("--error-samples", "iterations priced exactly to measure the memo (default 20)"),
}
#: Settings of decode-step points only (no serving point takes them).
_STEP_ONLY = ("batch", "context_len", "context_preset", "prefill", "steps", "warmup", "microbatches",
              "early_loads", "scheduler_latency_us", "attention", "experts")


def _choice_list(key: str, sep: str = ",") -> Callable[[str], list[Any]]:
    """argparse ``type=`` for separated values of ``key`` (GPU model, parallelism, formats), each
    checked as a grid file's value is."""
    from ..sweeps.grid import _choice_problem

    def parse(text: str) -> list[Any]:
        parts = [x.strip() for x in text.split(sep)]
        if not text.strip() or any(not x for x in parts) or len(parts) > MAX_LIST:
            raise field_error("value", text, f"1 to {MAX_LIST} values separated by {sep!r}")
        for x in parts:
            problem = _choice_problem(key, x)
            if problem is not None:
                raise field_error("value", x, problem)
        return parts
    return _arg_type(parse, "list")
_ASCII_INT = re.compile(r"[+-]?[0-9]{1,30}")


def _serve_list(key: str) -> Callable[[str], list[Any]]:
    """argparse ``type=`` for comma-separated values of the serving setting ``key``, each checked
    as a grid file's value is (:data:`sievesim.sweeps.grid.SERVE`)."""
    from ..sweeps.grid import _SERVE_INTS, _SERVE_NUMBERS, SERVE

    def parse(text: str) -> list[Any]:
        parts = [x.strip() for x in text.split(",")]
        if not text.strip() or any(not x for x in parts) or len(parts) > MAX_LIST:
            raise field_error("value", text, f"1 to {MAX_LIST} comma-separated values")
        out: list[Any] = []
        for x in parts:
            v: Any = x
            if key == "prefill_gpus" and x.lower() == "none":      # colocated, as 0 is
                out.append(None)
                continue
            if key in _SERVE_INTS:
                if not _ASCII_INT.fullmatch(x):
                    raise field_error("value", x, "an integer written in ASCII digits")
                v = int(x)
            elif key in _SERVE_NUMBERS:
                v = parse_number("value", x, lo=-1e300, hi=1e300, what="a number")
            problem = SERVE.problem(key, v)
            if problem is not None:
                raise field_error("value", v, problem)
            out.append(v)
        return out
    return _arg_type(parse, "list")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "sweep", help="run a grid of points (resumable; process pool or Dask)",
        description="Every combination of the listed values is one point; each point is one call of "
                    "the point function. Results go to OUT/results.csv and OUT/results.jsonl as points "
                    "finish; rerunning the same command skips the finished points.")
    p.add_argument("--grid", metavar="FILE", help="TOML grid file (keys: " + ", ".join(_grid_keys()) + "; with "
                   "kind = \"serve\": the serving settings, docs/serving.md)")
    p.add_argument("--model", type=_list(str), help="model presets or config paths, comma-separated")
    p.add_argument("--top-k", type=_int_list("top_k"),
                   help="routed experts per token, overriding the model's (e.g. 4,8 for Qwen3-30B-A3B)")
    p.add_argument("--hardware", type=_list(str), help="hardware presets or TOML paths (default b200)")
    p.add_argument("--gpus", type=_int_list("gpus"), help="GPU counts (default 1)")
    p.add_argument("--policy", type=_list(str), help="policies (default sieve; gpu-only = no PIM)")
    p.add_argument("--pimoe-unit", type=_list(str),
                   help=f"PIMoE placement units, comma-separated: pseudo_channel, channel, stack or BASE*S "
                        f"(default {SETTING_DEFAULTS['pimoe_unit']}, the paper's)")
    p.add_argument("--batch", type=_int_list("batch"), help="batch sizes (decode requests)")
    p.add_argument("--trace", type=_list(str), help="routing: trace files or synthetic:MODEL (default: the model's synthetic routing); with "
                        "--kind serve: request traces (CSV or JSON lines, docs/serving.md)")
    p.add_argument("--context-len", type=_int_list("context_len"), help="context tokens of every decode request")
    p.add_argument("--context-preset", type=_list(str), help="request-length presets (hh-rlhf, math-500)")
    p.add_argument("--prefill", type=_list(str), metavar="P:L,...",
                   help="colocated prefill: P requests of L prompt tokens each (e.g. 2:1024)")
    p.add_argument("--steps", type=_int_list("steps"), help="decode steps per point (default 1)")
    p.add_argument("--warmup", type=_int_list("warmup"), help="warm-up steps before the measured ones (default: the step's, 2)")
    p.add_argument("--seed", type=_int_list("seed"), help="seeds (default 0)")
    p.add_argument("--microbatches", type=_int_list("microbatches"), help="1, or 2 to interleave two halves of the batch")
    p.add_argument("--early-loads", type=_list(_bool), metavar="RULE,...",
                   help="early weight loads: cheaper, paper, policy, off (as run --early-loads) or true/false "
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
    p.add_argument("--gpu-model", type=_choice_list("gpu_model"), metavar="NAME,...",
                   help="GPU timing models: calibrated (default) or roofline (the Sieve paper's)")
    p.add_argument("--attention", type=_choice_list("attention"), metavar="dp,tp",
                   help="attention data-parallel (dp, default) or tensor-parallel (tp); decode-step sweeps")
    p.add_argument("--experts", type=_choice_list("experts"), metavar="ep,tp",
                   help="routed experts expert-parallel (ep, default) or tensor-parallel (tp, with attention tp)")
    p.add_argument("--weight-format", type=_choice_list("weight_format", sep=";"), metavar="SPEC;...",
                   help="storage formats, one set per value, sets separated by ';' (e.g. 'experts=mxfp4;fp8')")
    p.add_argument("--kind", choices=("step", "serve"), default=None,
                   help="what a point is: step = one decode step (default), serve = one serving run (sievesim "
                        "serve); a grid file says it with kind = \"serve\"")
    g = p.add_argument_group("serving points (--kind serve; docs/serving.md)")
    for key, (flag, what) in SERVE_FLAGS.items():
        g.add_argument(flag, dest=key, type=_serve_list(key), metavar="V,...", help=what)
    g.add_argument("--exact", action="store_const", const=[True], default=None,
                   help="price every iteration by its exact step (slow)")
    g.add_argument("--max-rate", default=None, metavar="LO:HI",
                   help="instead of rates: the largest rate in [LO, HI] meeting the SLOs for each point, by "
                        "bisection; every probe is a point of the sweep, so an interrupted search resumes")
    g.add_argument("--bisect-steps", type=int_arg("bisect_steps"), default=None, metavar="N",
                   help="bisection steps of --max-rate (default 7)")
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
    from ..sweeps.run import GRID_KEYS
    return GRID_KEYS


def resolve_point_function(name: str | None) -> Callable[..., Any]:
    """The point function called ``name`` (:data:`POINT_FUNCTIONS`); ``None``: the executed step."""
    if name is None:
        name = "step"
    module, attr = POINT_FUNCTIONS[name].split(":")
    return getattr(importlib.import_module(module), attr)


def _kind(args: argparse.Namespace) -> tuple[Any, list[dict[str, Any]]]:
    """The kind of point (``--kind``, or the grid file's ``kind``) and the grid file's products."""
    from ..sweeps.grid import KINDS, read_grid_file

    if args.grid and not os.path.exists(args.grid):
        raise ConfigError(f"file not found: {args.grid} (--grid)")
    if not args.grid:
        return KINDS[args.kind or "step"], [{}]
    kind, products = read_grid_file(args.grid)
    if args.kind is not None and args.kind != kind.name:
        raise field_error("--kind", args.kind, f"the kind of the grid file {args.grid} ({kind.name}; a grid "
                          "file's kind = \"serve\" makes serving points), or no --kind")
    return kind, products


def _check_flags(args: argparse.Namespace, kind: Any) -> None:
    """Refuse a flag of the other kind of point, naming it and the kind it belongs to."""
    if kind.name == "serve":
        for key in _STEP_ONLY + ("point",):
            if getattr(args, key, None) is not None:
                flag = "--" + key.replace("_", "-")
                raise field_error(flag, _shown(getattr(args, key)), "only in a decode-step sweep (not with --kind serve)")
        return
    for key, flag in [(k, f) for k, (f, _) in SERVE_FLAGS.items()] + [
            ("exact", "--exact"), ("max_rate", "--max-rate"), ("bisect_steps", "--bisect-steps")]:
        if getattr(args, key, None) is not None:
            raise field_error(flag, _shown(getattr(args, key)), "only in a serving sweep (--kind serve, or "
                              "kind = \"serve\" in the grid file)")


def _shown(value: Any) -> Any:
    return ",".join(map(str, value)) if isinstance(value, list) else value


def _run(args: argparse.Namespace) -> int:
    from ..sweeps.run import check_points, expand_grid

    kind, products = _kind(args)
    _check_flags(args, kind)
    if args.policy_option:
        if args.policy_options:
            raise field_error("--policy-option", args.policy_option[0], "not together with --policy-options")
        args.policy_options = [",".join(args.policy_option)]
    flags = {k: getattr(args, k) for k in kind.keys if getattr(args, k, None) is not None}
    products = [{**prod, **flags} for prod in products]
    points = expand_grid(products, kind)
    if args.jobs is not None and args.jobs < 1:
        raise field_error("--jobs", args.jobs, "a positive number of worker processes")
    workers = 1 if args.jobs == 1 else min(args.jobs or os.cpu_count() or 1, len(points))
    if any(prod.get("pimoe_unit") for prod in products) and not any(
            str(p["policy"]).lower() == "pimoe" for p in points):
        raise field_error("pimoe_unit", next(prod["pimoe_unit"] for prod in products if prod.get("pimoe_unit"))[0],
                          "only with policy pimoe in the grid (no point would use it)")
    if kind.name == "serve":
        return _serve_sweep(args, points)
    check_points(points, point=args.point or "step", workers=workers)
    point_fn = resolve_point_function(args.point)
    summary = _interruptible(args, lambda ex: run_grid_of(args, points, point_fn, ex), len(points))
    _summary_line(summary)
    return 0


def run_grid_of(args: argparse.Namespace, points: list[dict[str, Any]], point_fn: Callable[..., Any],
                executor: Any, **kw: Any) -> Any:
    """:func:`sievesim.sweeps.run.run_grid` of the command's points in ``--out``."""
    from ..sweeps.run import run_grid

    return run_grid(points, args.out, point_fn=point_fn, executor=executor, force=args.force,
                    progress=None if args.quiet else sys.stderr, grid_file=args.grid, **kw)


def _summary_line(summary: Any) -> None:
    print(f"{summary.done}/{summary.total} points in {summary.out_dir} ({summary.ran} run now, "
          f"{summary.skipped} already done): results.csv, results.jsonl")


def _serve_sweep(args: argparse.Namespace, points: list[dict[str, Any]]) -> int:
    """``--kind serve``: one serving run per point, or with ``--max-rate`` a bisection per point."""
    from ..sweeps.grid import SERVE
    from ..sweeps.serve_points import MAX_RATE_JSON, check_serve_points, max_rate_lines, max_rate_search, serve_point
    from .serve import _bracket

    bracket = _bracket(args.max_rate) if args.max_rate is not None else None
    if bracket is None and args.bisect_steps is not None:
        raise field_error("--bisect-steps", args.bisect_steps, "only with --max-rate LO:HI")
    check_serve_points(points, search=bracket is not None)
    if bracket is None:
        summary = _interruptible(args, lambda ex: run_grid_of(args, points, serve_point, ex, kind=SERVE),
                                 len(points))
        _summary_line(summary)
        return 0
    steps = 7 if args.bisect_steps is None else args.bisect_steps
    records = _interruptible(args, lambda ex: max_rate_search(
        points, args.out, lo=bracket[0], hi=bracket[1], steps=steps, executor=ex, force=args.force,
        progress=None if args.quiet else sys.stderr, grid_file=args.grid), len(points))
    for line in max_rate_lines(records):
        print(line)
    print(f"{sum(len(r['tried']) for r in records)} probes in {args.out}: results.csv, results.jsonl; "
          f"the rates found in {os.path.join(args.out, MAX_RATE_JSON)}")
    return 0


def _interruptible(args: argparse.Namespace, work: Callable[[Any], Any], parallel: int) -> Any:
    """``work(executor)`` on the command's executor; Ctrl-C says how to resume."""
    if args.dask is not None and not args.dask.strip():
        raise field_error("--dask", args.dask, "the address of a Dask scheduler (e.g. tcp://host:8786); leave "
                          "--dask out to run locally")
    if args.dask and args.jobs is not None:
        raise field_error("--jobs", args.jobs, "not with --dask (the cluster has its own workers)")
    try:
        with _executor(args, parallel) as ex:
            return work(ex)
    except KeyboardInterrupt:
        raise KeyboardInterrupt(f"the finished points are kept in {args.out}; rerun the same command to resume "
                                "(finished points are skipped)") from None


@contextlib.contextmanager
def _executor(args: argparse.Namespace, parallel: int) -> Iterator[Any]:
    """None (serial), a local process pool (workers ignore Ctrl-C, so that the interrupted sweep
    reports it once, here) or a Dask cluster's executor, for ``parallel`` points at a time."""
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
            yield client.get_executor()
        finally:
            client.close()
    elif args.jobs == 1 or parallel == 1:
        yield None
    else:
        from ..sweeps.workers import process_pool

        with process_pool(min(args.jobs or os.cpu_count() or 1, parallel)) as pool:
            yield pool
