"""``sievesim serve``: requests arriving at a rate (or from a trace) served with continuous batching."""
from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

from .._validate import duration_arg, int_arg, number_arg
from ..errors import field_error
from ..sweeps.grid import SETTING_DEFAULTS
from .run import _policies, _policy_options, options_for_policies

_RATE = number_arg(lo=-1e12, hi=1e12, what="requests per second")
_CV = number_arg(lo=-1e12, hi=1e12, what="a coefficient of variation, no unit")
_SHARE = number_arg(lo=-1e12, hi=1e12, what="a share from 0 to 1")

#: Options that are one setting of every policy's serving point (``--max-rate --out``: a sweep
#: point, :data:`sievesim.sweeps.grid.SERVE_KEYS`), by their ``args`` name; a new option of ``serve`` is
#: either here or in :data:`NOT_POINT_SETTINGS` (a test checks).
POINT_SETTINGS = {
    "model": "model", "top_k": "top_k", "hardware": "hardware", "gpus": "gpus", "prefill_gpus": "prefill_gpus",
    "requests": "requests",
    "arrival_window": "arrival_window_s", "cv": "cv", "lengths": "lengths", "prompt_tokens": "prompt_tokens",
    "output_tokens": "output_tokens", "seed": "seed", "max_batch": "max_batch", "token_budget": "token_budget",
    "horizon": "horizon_s", "ttft_slo": "ttft_slo_s", "tpot_slo": "tpot_slo_s", "e2e_slo": "e2e_slo_s",
    "attainment": "attainment", "block_size": "block_size", "memory_utilization": "memory_utilization",
    "max_model_len": "max_model_len", "exact": "exact", "error_samples": "error_samples",
    "gpu_model": "gpu_model", "weight_format": "weight_format"}
#: Options of ``serve`` that are not a setting shared by every policy's point (set per policy, by the
#: search, or outputs).
NOT_POINT_SETTINGS = ("policy", "pimoe_unit", "policy_option", "rate", "trace", "max_rate", "bisect_steps", "out",
                      "requests_csv", "timeline_csv", "plot", "json", "quiet")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "serve", help="requests arriving at a rate or from a trace, served with continuous batching: TTFT, "
                      "TPOT, goodput under SLOs",
        description="Serve a workload on G GPUs with HBM-PIM: requests arrive (Poisson, gamma-bursty or a trace "
                    "file), are batched continuously (chunked prefill beside decode under a token budget, KV "
                    "blocks from the HBM left after the weights, preemption by recompute) and every iteration "
                    "takes the executed step time of its batch (memoised; its error against exact steps is "
                    "reported). See docs/serving.md.")
    p.add_argument("--model", required=True, help="preset name, .toml or Hugging Face config.json")
    p.add_argument("--hardware", default="b200", help="preset name or .toml (default: b200)")
    p.add_argument("--gpus", type=int_arg("gpus"), default=1, help="GPUs G (default 1)")
    p.add_argument("--policy", default="sieve", help="policy name or comma-separated names (default sieve)")
    p.add_argument("--prefill-gpus", type=_prefill_gpus_arg, default=None, metavar="P",
                   help="disaggregated prefill: P of the --gpus GPUs prefill, the rest decode, the KV cache moved "
                        "over the interconnect (default, or 0 or none: prefill colocated with decode on all GPUs, "
                        "as in sweep --prefill-gpus)")
    p.add_argument("--rate", type=_RATE, default=None, metavar="R", help="arrivals per second")
    p.add_argument("--requests", type=int_arg("served_requests"), default=None, metavar="N",
                   help="requests (default: 100, or as many as an arrival window of 20 median service "
                        "times when 100 do not reach a steady state; with --trace: its first N rows)")
    p.add_argument("--arrival-window", type=duration_arg(), default=None, metavar="TIME",
                   help="serve at least rate x S requests (with --rate or --max-rate): an overload shows only "
                        "when it lasts")
    p.add_argument("--trace", default=None, metavar="FILE",
                   help="request trace, CSV or JSON lines: arrival time, prompt tokens, output tokens "
                        "(column names in docs/serving.md)")
    p.add_argument("--cv", type=_CV, default=None,
                   help="coefficient of variation of the inter-arrival times (gamma; default 1 = Poisson)")
    p.add_argument("--lengths", default=None, help="length preset: hh-rlhf (default), math-500")
    p.add_argument("--prompt-tokens", type=int_arg("context", lo=1), default=None, help="fixed prompt length")
    p.add_argument("--output-tokens", type=int_arg("context", lo=1), default=None, help="fixed output length")
    p.add_argument("--seed", type=int_arg("seed"), default=0, help="seed of arrivals, lengths, routing (default 0)")
    p.add_argument("--max-batch", type=int_arg("batch"), default=256, help="running requests at most (default 256)")
    p.add_argument("--token-budget", type=int_arg("context", lo=1), default=2048,
                   help="tokens per iteration, decode + prefill chunks (default 2048)")
    p.add_argument("--horizon", type=duration_arg(), default=None, metavar="TIME",
                   help="stop at TIME simulated (seconds, or 10min, 500ms; default: when every request has finished)")
    p.add_argument("--ttft-slo", type=duration_arg(bare_max=600), default=2.0, metavar="TIME",
                   help="TTFT target: seconds, or with a unit (2s, 500ms); a bare number above 600 is refused "
                        "(default 2 s)")
    p.add_argument("--tpot-slo", type=duration_arg(bare_max=10), default=0.05, metavar="TIME",
                   help="TPOT target: seconds, or with a unit (50ms); a bare number above 10 is refused "
                        "(default 0.05 s)")
    p.add_argument("--e2e-slo", type=duration_arg(bare_max=3600), default=None, metavar="TIME",
                   help="end-to-end target: seconds, or with a unit (default none)")
    p.add_argument("--attainment", type=_SHARE, default=0.9,
                   help="share of requests that must meet every target (default 0.9)")
    p.add_argument("--block-size", type=int_arg("context", lo=1), default=16, help="tokens per KV block (16)")
    p.add_argument("--memory-utilization", type=_SHARE, default=0.9,
                   help="share of the HBM the server may use (default 0.9)")
    p.add_argument("--max-model-len", type=int_arg("context", lo=2), default=32768,
                   help="longest request, prompt + output tokens (default 32768)")
    p.add_argument("--exact", action="store_true", help="price every iteration by its exact step (slow)")
    p.add_argument("--error-samples", type=int_arg("context"), default=20,
                   help="iterations priced exactly to measure the memo (default 20)")
    p.add_argument("--max-rate", default=None, metavar="LO:HI",
                   help="instead of one rate: the largest rate in [LO, HI] meeting the SLOs, by bisection")
    p.add_argument("--bisect-steps", type=int_arg("bisect_steps"), default=None, help="bisection steps of --max-rate (1 to 40; default 7)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="with --max-rate: record every probe in DIR as a sweep point (results.jsonl, max_rate.json); "
                        "rerunning the command resumes the search from the probes recorded")
    p.add_argument("--top-k", type=int_arg("experts"), default=None, help="routed experts per token")
    p.add_argument("--pimoe-unit", default=None,
                   help=f"PIMoE placement unit: pseudo_channel, channel, stack or BASE*S (default "
                        f"{SETTING_DEFAULTS['pimoe_unit']}, the paper's)")
    p.add_argument("--policy-option", action="append", default=[], metavar="KEY=VALUE",
                   help="constructor argument of the policies that take it; repeatable")
    p.add_argument("--requests-csv", default=None, metavar="FILE", help="write one row per request: queue, TTFT, TPOT, e2e, SLOs met, energy_j "
                        "(several policies: one file, a policy column first)")
    p.add_argument("--timeline-csv", default=None, metavar="FILE",
                   help="write one row per iteration: batch, prefill, queue, KV use, energy_j "
                        "(several policies: one file, a policy column first)")
    p.add_argument("--plot", default=None, metavar="FILE",
                   help="PNG: decode batch and KV use over time, one line per policy")
    from ._gpu_args import add_gpu_args
    add_gpu_args(p, parallelism=False)
    p.add_argument("--json", action="store_true", help="JSON: one object (one policy) or a list")
    p.add_argument("--quiet", action="store_true",
                   help="no progress bar (shown on a terminal only: requests finished per policy, simulated time)")
    p.set_defaults(func=_serve)


def _refuse_what_does_not_apply(args: argparse.Namespace, names: list[str]) -> None:
    """Options that would be ignored by this run exit 2 naming both options (docs/serving.md), and
    no output may overwrite an input or another output; then the defaults of --cv and --lengths."""
    conflicts = [("--cv", args.cv, "--trace", args.trace, "the trace sets the arrivals"),
                 ("--lengths", args.lengths, "--trace", args.trace, "the trace sets the lengths"),
                 ("--prompt-tokens", args.prompt_tokens, "--trace", args.trace, "the trace sets the lengths"),
                 ("--output-tokens", args.output_tokens, "--trace", args.trace, "the trace sets the lengths"),
                 ("--rate", args.rate, "--max-rate", args.max_rate, "the search chooses the rates")]
    for opt, value, other, present, why in conflicts:
        if value is not None and present is not None:
            raise field_error(opt, value, f"no {opt} with {other} ({why})")
    if args.lengths is not None and args.prompt_tokens is not None and args.output_tokens is not None:
        raise field_error("--lengths", args.lengths, "no length preset with both --prompt-tokens and --output-tokens")
    if args.max_rate is not None:      # a search serves many runs: no one run's files
        for opt, value in (("--requests-csv", args.requests_csv), ("--timeline-csv", args.timeline_csv),
                           ("--plot", args.plot)):
            if value is not None:
                raise field_error(opt, value, f"no {opt} with --max-rate (a run at one rate or of a trace writes it; "
                                  "a search serves many)")
    elif args.bisect_steps is not None:
        raise field_error("--bisect-steps", args.bisect_steps, "only with --max-rate LO:HI")
    if args.pimoe_unit is not None and "pimoe" not in names:
        raise field_error("--pimoe-unit", args.pimoe_unit, "only with policy pimoe (--policy pimoe)")
    import os
    seen: dict[str, str] = {}
    for opt, path in (("--trace", args.trace), ("--requests-csv", args.requests_csv),
                      ("--timeline-csv", args.timeline_csv), ("--plot", args.plot)):
        if path is None:
            continue
        key = os.path.realpath(path)
        if key in seen:
            raise field_error(opt, path, f"a file other than {seen[key]}'s (a run never writes over its input "
                              "or another of its outputs)")
        seen[key] = opt
    if args.plot is not None:
        from ..sweeps.plotting import FORMATS
        if os.path.splitext(args.plot)[1].lower().lstrip(".") not in FORMATS:
            raise field_error("--plot", args.plot, "a file ending in " + ", ".join("." + f for f in FORMATS))
    args.bisect_steps = 7 if args.bisect_steps is None else args.bisect_steps
    args.cv = 1.0 if args.cv is None else args.cv
    args.lengths = "hh-rlhf" if args.lengths is None else args.lengths


def _seconds(name: str, value: float | None, *, allow_none: bool = True) -> None:
    if value is None and allow_none:
        return
    if value is None or not math.isfinite(value) or value <= 0:
        raise field_error(name, value, "a positive number of seconds")


#: Requests served when neither --requests nor --arrival-window is given (and the first run of the
#: default arrival window, which sizes the window).
DEFAULT_REQUESTS = 100
#: The most requests the default arrival window serves (beyond, the run says what to raise).
DEFAULT_WINDOW_MAX_REQUESTS = 10_000
#: The default arrival window in median service times of the first run: twice what reaches the
#: steady-state window (10; the left-out first 10 % of arrivals then span two service times), room
#: for the service time to grow as the longer run's batch fills.
DEFAULT_WINDOW_SERVICE_TIMES = 20


def _prefill_gpus_arg(text: str) -> int | None:
    """``--prefill-gpus``: a GPU count, or 0 / ``none`` for colocated prefill (as sweeps read it)."""
    if text.strip().lower() == "none":
        return None
    return int_arg("gpus", lo=0)(text) or None


def _serve(args: argparse.Namespace) -> int:
    names = _policies(args.policy)
    bracket = _check_args(args, names)
    per_policy = options_for_policies(names, _policy_options(args.policy_option))
    if args.out is not None and not bracket:
        raise field_error("--out", args.out, "only with --max-rate LO:HI (serving points at given rates: "
                          "sievesim sweep --kind serve)")
    if bracket and args.out is not None:
        return _resumable_search(args, names, per_policy, bracket)
    sims = [_simulator(args, name, per_policy) for name in names]
    if bracket:
        records = [_max_rate_record(args, sim, name, bracket) for sim, name in zip(sims, names)]
        if args.json:
            print(json.dumps(records[0] if len(records) == 1 else records))
        else:
            _print(records, True)
        return 0
    results, records = _serve_at_one_rate(args, names, sims)
    if args.requests_csv:
        from ..serving.metrics import write_csv
        write_csv(args.requests_csv, _policy_rows(results, "request_rows"))
    if args.timeline_csv:
        from ..serving.metrics import write_csv
        write_csv(args.timeline_csv, _policy_rows(results, "iteration_rows"))
    if args.plot:
        _plot(results, args.plot)
    _warn_short(records, trace=args.trace is not None)
    if args.json:
        print(json.dumps(records[0] if len(records) == 1 else records))
    else:
        _print_tail(records)
    return 0


def _check_args(args: argparse.Namespace, names: list[str]) -> tuple[float, float] | None:
    """Every option checked before anything runs; the ``--max-rate`` bracket (None without it)."""
    from ..serving.workload import MAX_RATE, MIN_RATE

    _refuse_what_does_not_apply(args, names)
    for name in ("--ttft-slo", "--tpot-slo", "--e2e-slo", "--horizon"):
        _seconds(name, getattr(args, name[2:].replace("-", "_")))
    if args.rate is not None and not (math.isfinite(args.rate) and MIN_RATE <= args.rate <= MAX_RATE):
        raise field_error("--rate", args.rate, f"requests per second from {MIN_RATE:g} to {MAX_RATE:g}")
    if not 0 < args.attainment <= 1:
        raise field_error("--attainment", args.attainment, "a share in (0, 1]")
    if not 0 < args.memory_utilization <= 1:
        raise field_error("--memory-utilization", args.memory_utilization, "a share of the HBM in (0, 1]")
    if not 0.01 <= args.cv <= 100:
        raise field_error("--cv", args.cv, "a coefficient of variation from 0.01 to 100 (1 = Poisson)")
    bracket = _bracket(args.max_rate) if args.max_rate else None
    if bracket and args.trace:
        raise field_error("--max-rate", args.max_rate, "no --max-rate with --trace (the trace sets the arrivals)")
    if bracket is None and args.rate is None and args.trace is None:
        raise field_error("--rate", None, "a rate (requests/s), --trace FILE or --max-rate LO:HI")
    if args.arrival_window is not None:
        _seconds("--arrival-window", args.arrival_window)
        if args.trace:
            raise field_error("--arrival-window", args.arrival_window, "no window with --trace")
        if args.rate is not None or bracket:      # at the one rate, or the search's highest
            from ..serving.simulator import requests_for
            requests_for(args.rate if args.rate is not None else bracket[1], args.requests or 1, args.arrival_window,
                         option="--arrival-window")
    return bracket


def _lengths(args: argparse.Namespace) -> str | None:
    """The length preset, None when both lengths are fixed."""
    return None if None not in (args.prompt_tokens, args.output_tokens) else args.lengths


def _simulator(args: argparse.Namespace, name: str, per_policy: dict[str, dict[str, Any]]) -> Any:
    """The serving simulator of policy ``name`` with the command's settings."""
    from ..serving.metrics import SloTargets
    from ..serving.scheduler import SchedulerConfig
    from ..serving.simulator import ServingSimulator

    return ServingSimulator(
        args.model, args.hardware, gpus=args.gpus, policy=name,
        scheduler=SchedulerConfig(args.max_batch, args.token_budget, args.horizon),
        slo=SloTargets(args.ttft_slo, args.tpot_slo, args.e2e_slo, args.attainment),
        block_size=args.block_size, memory_utilization=args.memory_utilization,
        max_model_len=args.max_model_len, exact=args.exact, error_samples=args.error_samples, seed=args.seed,
        top_k=args.top_k, pimoe_unit=args.pimoe_unit if name == "pimoe" else None,
        policy_options=per_policy[name], prefill_gpus=args.prefill_gpus, gpu_model=args.gpu_model,
        weight_format=args.weight_format)


def _max_rate_record(args: argparse.Namespace, sim: Any, name: str, bracket: tuple[float, float]) -> dict[str, Any]:
    """``--max-rate`` of one policy: its bisection's answer with the settings it ran under."""
    from ..serving.simulator import max_rate_under_slos

    found = max_rate_under_slos(sim, requests=args.requests or DEFAULT_REQUESTS, lo=bracket[0], hi=bracket[1],
                                steps=args.bisect_steps, seed=args.seed, cv=args.cv, lengths=_lengths(args),
                                prompt_tokens=args.prompt_tokens, output_tokens=args.output_tokens,
                                arrival_window_s=args.arrival_window)
    return {"model": sim.model.name, "gpus": sim.gpus, "hardware": sim.hw.name, "policy": name,
            "pimoe_unit": sim.pricer.sim.pimoe_unit, "gpu_model": args.gpu_model,
            "slo": sim.slo.as_dict(), "requests": args.requests or DEFAULT_REQUESTS, "seed": args.seed,
            **({} if sim.pools is None else {"prefill_gpus": sim.pools[0].gpus,
                                             "decode_gpus": sim.pools[1].gpus}), **found}


def _workload(args: argparse.Namespace, n: int | None) -> tuple[Any, float | None]:
    from ..serving.simulator import make_requests

    return make_requests(rate=args.rate, requests=n, trace=args.trace, cv=args.cv, lengths=_lengths(args),
                         prompt_tokens=args.prompt_tokens, output_tokens=args.output_tokens, seed=args.seed)


def _serve_at_one_rate(args: argparse.Namespace, names: list[str], sims: list[Any]
                       ) -> tuple[list[Any], list[dict[str, Any]]]:
    """Every policy served with the same requests: ``--requests``, at least rate x
    ``--arrival-window``, or by default (neither given, arrivals at a rate) an arrival window that
    reaches a steady state (:func:`_default_window`). Each policy's row is printed as it ends."""
    from ..progress import is_terminal, progress_bar
    from ..serving.simulator import requests_for

    stream = None if args.quiet or not is_terminal(sys.stdout) else sys.stderr
    width = _width([{"policy": n, "pimoe_unit": args.pimoe_unit or SETTING_DEFAULTS["pimoe_unit"]}
                    if n == "pimoe" else {"policy": n} for n in names])
    window = {"arrival_window_s": args.arrival_window, "arrival_window_default": False}
    n = args.requests
    if args.arrival_window is not None:
        n = requests_for(args.rate, args.requests or 1, args.arrival_window)
    q, rate = _workload(args, n)
    results: list[Any] = []
    if args.trace is None and args.requests is None and args.arrival_window is None:
        results, window, q, rate = _default_window(args, names, sims, q, rate, stream)
    records: list[dict[str, Any]] = []
    for i, (name, sim) in enumerate(zip(names, sims)):
        if i == len(results):      # not served yet (the default window's first run may serve them all)
            with progress_bar(len(q), name, stream, unit="request") as bar:
                results.append(sim.run(q, rate, progress=_ticker(bar, name)))
        records.append({**results[i].to_dict(), **window})
        if not args.json:                                  # each policy's row as soon as it has run
            if i == 0:
                _print_head(records[0], False, width)
            print(_row(records[-1], width), flush=True)
    return results, records


def _default_window(args: argparse.Namespace, names: list[str], sims: list[Any], q: Any, rate: float,
                    stream: Any) -> tuple[list[Any], dict[str, Any], Any, float]:
    """The default arrival window: every policy serves :data:`DEFAULT_REQUESTS` requests; when each
    run reaches its steady-state window (its warm-up lasts a median time in service) those runs
    are the answer, else every policy serves again with the arrivals spanning
    :data:`DEFAULT_WINDOW_SERVICE_TIMES` median service times of the policy whose service is the
    longest (twice its ``window.suggested_arrival_window_s``; at most
    :data:`DEFAULT_WINDOW_MAX_REQUESTS` requests), the same requests for all. Returns (the
    results kept, the window's record fields, the requests and rate to serve the rest with)."""
    from ..progress import progress_bar
    from ..serving.metrics import WINDOW_SERVICE_TIMES
    from ..serving.simulator import requests_for

    first = []
    for name, sim in zip(names, sims):
        with progress_bar(len(q), f"{name} (sizing the window)", stream, unit="request") as bar:
            first.append(sim.run(q, rate, progress=_ticker(bar, name)))
    windows = [r.to_dict()["window"] for r in first]
    wanted = [w["suggested_arrival_window_s"] for w in windows if w["suggested_arrival_window_s"]]
    if all(w["reached"] for w in windows) or not wanted:
        return first, {"arrival_window_s": None, "arrival_window_default": False}, q, rate
    span = max(wanted) * DEFAULT_WINDOW_SERVICE_TIMES / WINDOW_SERVICE_TIMES
    n = min(requests_for(rate, DEFAULT_REQUESTS, span), DEFAULT_WINDOW_MAX_REQUESTS)
    q, rate = _workload(args, n)
    return [], {"arrival_window_s": span, "arrival_window_default": True}, q, rate


def _policy_rows(results: list[Any], rows: str) -> list[dict[str, Any]]:
    """The rows (``request_rows`` or ``iteration_rows``) of every policy's result in one table: one
    policy's as they are; several policies' one after the other, each row led by a ``policy``
    column (``pimoe(channel)`` with its unit), so that one file holds the comparison."""
    if len(results) == 1:
        return getattr(results[0], rows)()
    return [{"policy": policy_label(res.settings), **row} for res in results for row in getattr(res, rows)()]


def _ticker(bar: Any, name: str) -> Any:
    """A serving run's ``progress(finished, t)`` that moves ``bar`` to the requests finished and
    shows the simulated time."""
    seen = [0]

    def tick(finished: int, t: float) -> None:
        bar.update(finished - seen[0])
        seen[0] = finished
        bar.set_description(f"{name} {t:.4g} s simulated")
    return tick


def _warn_short(records: list[dict[str, Any]], *, trace: bool) -> None:
    """A warning on stderr for each policy whose run is too short to reach its steady-state window
    (``window.reached`` false), naming what to raise."""
    for r in records:
        if r["finished_requests"] == 0:        # every latency is NaN: say why rather than print the NaNs alone
            print(f"warning: {r['policy']}: no request finished before the horizon ({r['horizon_s']:.6g} s; "
                  f"{r['arrived_requests']} arrived): TTFT, TPOT and e2e are not defined; raise --horizon",
                  file=sys.stderr)
            continue
        w = r["window"]
        if w["reached"]:
            continue
        raise_it = ("a longer trace" if trace else
                    f"--arrival-window (to about {w['suggested_arrival_window_s']:g} s) or --requests (to about "
                    f"{math.ceil(r['rate'] * w['suggested_arrival_window_s'])})" if w["suggested_arrival_window_s"]
                    else "--requests or --arrival-window")
        if w["measured_on"] == "whole run":
            why = f"its window holds {w['requests']} requests or no time, so every figure is the whole run's"
        elif math.isnan(w["service_s"]):
            why = "no request of its window finished"
        else:
            why = (f"the first 10 % of its arrivals span {w['warmup_s']:.3g} s, less than a request's median time "
                   f"in service ({w['service_s']:.3g} s): the window still sees the batch filling")
        print(f"warning: {policy_label(r)}: the run is too short for a steady state ({why}); "
              f"{'use' if trace else 'raise'} {raise_it}", file=sys.stderr)


def _resumable_search(args: argparse.Namespace, names: list[str], per_policy: dict[str, dict[str, Any]],
                      bracket: tuple[float, float]) -> int:
    """``--max-rate --out DIR``: the bisection of every policy with each probe a sweep point in DIR."""
    from ..sweeps.grid import SERVE_DEFAULTS
    from ..sweeps.serve_points import check_serve_points, max_rate_search

    if args.plot or args.requests_csv or args.timeline_csv:
        raise field_error("--out", args.out, "no --plot, --requests-csv or --timeline-csv with --max-rate")
    same = {key: getattr(args, dest) for dest, key in POINT_SETTINGS.items()}
    groups = []
    for name in names:
        opts = ",".join(f"{k}={json.dumps(v)}" for k, v in per_policy[name].items()) or None
        unit = (args.pimoe_unit or SERVE_DEFAULTS["pimoe_unit"]) if name == "pimoe" else None
        groups.append({**same, "policy": name, "pimoe_unit": unit, "policy_options": opts})
    check_serve_points(groups, search=True)
    records = max_rate_search(groups, args.out, lo=bracket[0], hi=bracket[1], steps=args.bisect_steps,
                              progress=None if args.json else sys.stderr)
    if args.json:
        print(json.dumps(records[0] if len(records) == 1 else records))
        return 0
    _print(records, True)
    return 0


def _plot(results: list[Any], path: str) -> None:
    """Decode requests per iteration and KV blocks in use (share of the fullest GPU's) over time."""
    import pathlib

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..sweeps.plotting import save_plot

    fig, (ax_b, ax_k) = plt.subplots(2, 1, figsize=(7, 5), sharex=True)
    for res in results:
        lg, name = res.log, policy_label(res.settings)
        ax_b.plot(lg.it_start, lg.it_decode, lw=0.8, label=name)
        ax_k.plot(lg.it_start, [k / res.kv["blocks_per_gpu"] for k in lg.it_kv_blocks], lw=0.8, label=name)
    ax_b.set_ylabel("decode requests")
    ax_k.set_ylabel("KV blocks used (share)")
    ax_k.set_xlabel("time [s]")
    ax_b.legend()
    ax_b.set_title(f"{results[0].settings['model']}: {results[0].settings['workload']}")
    try:
        save_plot(fig, pathlib.Path(path))
    except OSError as exc:
        raise field_error("--plot", path, f"a writable file ({exc.strerror})") from None


def _bracket(text: str) -> tuple[float, float]:
    from .._validate import parse_number
    from ..serving.workload import MAX_RATE, MIN_RATE

    parts = text.split(":")
    if len(parts) != 2:
        raise field_error("--max-rate", text, f"LO:HI, two rates in requests/s with {MIN_RATE:g} <= LO < HI")
    lo, hi = (parse_number("--max-rate", x, lo=0.0, hi=MAX_RATE, what="requests/s") for x in parts)
    if not MIN_RATE <= lo < hi:
        raise field_error("--max-rate", text, f"LO:HI, two rates in requests/s with {MIN_RATE:g} <= LO < HI")
    return lo, hi


def _print(records: list[dict[str, Any]], bisect: bool) -> None:
    width = _width(records)
    _print_head(records[0], bisect, width)
    if bisect:
        from ..serving.search import describe_answer
        for r in records:
            print(f"{policy_label(r):{width}s} max rate meeting the SLOs: {describe_answer(r)}, {r['requests']} requests each")
        return
    for r in records:
        print(_row(r, width))
    _print_tail(records)


def _print_head(r0: dict[str, Any], bisect: bool, width: int = 8) -> None:
    """The settings, the workload, the steady-state window and the table's header."""
    slo = r0["slo"]
    split = r0.get("prefill_gpus")          # a resumable search's record carries it as a setting (None: colocated)
    pools = (f" ({split} prefill + {r0.get('decode_gpus', r0['gpus'] - split)} decode, disaggregated)"
             if split else "")
    print(f"{r0['model']} on {r0['gpus']} x {r0['hardware']}{pools}; SLOs: TTFT <= {slo['ttft_s']} s, TPOT <= "
          f"{slo['tpot_s']} s, " + (f"e2e <= {slo['e2e_s']} s" if slo['e2e_s'] is not None else "no e2e target")
          + f", met by {slo['attainment']:.0%} of the requests"
          + (f"; GPU model: {r0['gpu_model']}" if r0.get("gpu_model") else ""))
    if bisect:
        return
    print(f"workload: {r0['workload']}, {r0['requests']} requests, seed {r0['seed']}; max batch {r0['max_batch']}, "
          f"token budget {r0['token_budget']}; KV {r0['kv_capacity']['blocks_per_gpu']} blocks of "
          f"{r0['block_size']} tokens per GPU")
    if r0.get("arrival_window_default"):
        span, capped = r0["arrival_window_s"], r0["requests"] < math.ceil(r0["rate"] * r0["arrival_window_s"])
        print(f"arrival window: {span:g} s by default ({DEFAULT_WINDOW_SERVICE_TIMES} median service times of a "
              f"first run of {DEFAULT_REQUESTS} "
              f"requests, whose warm-up was shorter than one: the steady-state window opens once the batch has "
              f"filled)" + (f", cut to {DEFAULT_WINDOW_MAX_REQUESTS} requests" if capped else "")
              + "; --requests or --arrival-window to choose")
    w = r0["window"]
    if w["measured_on"] == "window":
        print(f"steady-state window: {w['requests']} requests arriving {w['start_s']:.4g} s .. {w['end_s']:.4g} s "
              f"(after the first 10 % and before the last 10 % of arrivals): TTFT, TPOT, e2e, goodput and attainment; "
              f"the rest over the whole run (both in --json)")
    else:
        print("no steady-state window (fewer than 2 requests in it, or arrivals at one instant): every figure is "
              "the whole run's")
    print(f"{'policy':{width}s} {'done':>6s} {'TTFT p50/p99 ms':>17s} {'TPOT p50/p99 ms':>17s} {'e2e p50/p99 s':>15s} "
          f"{'tok/s':>9s} {'goodput/s':>9s} {'attain':>6s} {'batch':>6s} {'preempt':>7s} {'Little':>6s} "
          f"{'memo err':>8s}")


def policy_label(r: dict[str, Any]) -> str:
    """The policy as ``run``, ``sweep`` and ``plot`` print it: PIMoE with its unit, ``pimoe(channel)``."""
    return r["policy"] + (f"({r['pimoe_unit']})" if r.get("pimoe_unit") else "")


def _width(records: list[dict[str, Any]]) -> int:
    """The policy column's width: the longest label, at least 8 characters."""
    return max([8] + [len(policy_label(r)) for r in records])


def _row(r: dict[str, Any], width: int = 8) -> str:
    """A policy's line of the table."""
    e = r["pricing"]["error_vs_exact"]
    return (f"{policy_label(r):{width}s} {r['finished_requests']:6d} {r['ttft_s']['p50'] * 1e3:8.2f}/{r['ttft_s']['p99'] * 1e3:8.2f}"
            f" {r['tpot_s']['p50'] * 1e3:8.3f}/{r['tpot_s']['p99'] * 1e3:8.3f} {r['e2e_s']['p50']:7.2f}/"
            f"{r['e2e_s']['p99']:7.2f} {r['throughput_tokens_per_s']:9.1f} {r['goodput_requests_per_s']:9.3f} "
            f"{r['slo_attainment']:6.1%} {r['batch']['mean']:6.1f} {r['preemptions']:7d} "
            f"{r['littles_law_ratio']:6.3f} {e['mean_abs_rel']:8.2%}")


def _print_tail(records: list[dict[str, Any]]) -> None:
    """Each policy's energy, then the KV transfers of a disaggregated run."""
    width = _width(records)
    for r in records:
        print(_energy_line(r, width))
    for r in records:
        if "kv_transfer" in r:
            x, p = r["kv_transfer"], r["pools"]
            print(f"{policy_label(r):{width}s} KV transfers {x['transfers']}, {x['bytes_mean'] / 2**20:.1f} MiB each on average, "
                  f"{x['time_s']['mean'] * 1e6:.1f} us mean / {x['time_s']['p99'] * 1e6:.1f} us p99 on the link after "
                  f"{x['wait_s']['mean'] * 1e3:.2f} ms mean from the end of prefill; busy prefill "
                  f"{p['prefill']['busy_share']:.0%}, decode {p['decode']['busy_share']:.0%}")


def _energy_line(r: dict[str, Any], width: int = 8) -> str:
    """A policy's energy in words: per request, per output token, tokens per joule, power per GPU."""
    if r.get("energy_j") is None:
        return f"{policy_label(r):{width}s} energy: none (the hardware file gives no energy fields; docs/energy.md)"
    idle = r["energy_breakdown_j"]["idle"] / r["energy_j"] if r["energy_j"] > 0 else 0.0
    total = f"{r['energy_j']:.4g} J" if r["energy_j"] < 1e4 else f"{r['energy_j'] / 1e3:.4g} kJ"
    return (f"{policy_label(r):{width}s} energy {total}: {r['energy_per_request_j']['mean']:.4g} J per request "
            f"(mean), {_joules(r['energy_per_output_token_j'])} per output token, {r['tokens_per_joule']:.4g} "
            f"tokens/J, {r['power_per_gpu_w']:.4g} W per GPU ({idle:.0%} idle), "
            f"{r['goodput_requests_per_joule'] * 1e3:.4g} requests meeting the SLOs per kJ")


def _joules(x: float) -> str:
    """Joules in J, or mJ below 1 J."""
    return f"{x:.4g} J" if not x < 1 else f"{x * 1e3:.4g} mJ"
