"""``sievesim run``: decode steps of a model on G GPUs with HBM-PIM, executed as a dependency graph."""
from __future__ import annotations

import argparse
import json
from typing import Any

from .._validate import int_arg, number_arg
from ..errors import field_error

#: Policies that ``--policy all`` runs, in table order (the GPU-only reference first).
ALL_POLICIES = ("gpu-only", "noexp", "allexp", "pimoe", "sieve")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "run", help="decode steps of a model on G GPUs with HBM-PIM, executed as a dependency graph",
        description="Simulate decode steps of a MoE model on G GPUs whose HBM stacks carry PIM: the policy "
                    "splits each GPU's experts at each layer on its own estimate (Equation 1), every node of "
                    "the layer graph is priced (PIM nodes on the cycle-accurate engine) and the graph is "
                    "executed. Prints the executed step time beside the policy's estimate.")
    p.add_argument("--model", required=True, help="preset name, .toml or Hugging Face config.json")
    p.add_argument("--hardware", default="b200", help="preset name or .toml (default: b200)")
    p.add_argument("--gpus", type=int_arg("gpus"), default=1, help="GPUs G (default 1)")
    p.add_argument("--policy", default="all",
                   help="policy name, comma-separated names, or 'all' = " + ",".join(ALL_POLICIES)
                        + " ('gpu-only': attention and experts on the GPU, no PIM)")
    p.add_argument("--batch", type=int_arg("batch"), default=64, help="decode requests B over all GPUs (default 64)")
    p.add_argument("--trace", default=None, metavar="SOURCE",
                   help="routing: .npz trace, SGLang dump, or synthetic:MODEL (default: the model's "
                        "calibrated synthetic routing)")
    p.add_argument("--context-len", type=int_arg("context"), default=None, metavar="L",
                   help="context length of every request (tokens; default 4096)")
    p.add_argument("--context-preset", default=None, metavar="NAME",
                   help="draw context lengths from a dataset preset (hh-rlhf, math-500)")
    p.add_argument("--prefill", default=None, metavar="P:L", help="colocate P prefill requests of L tokens")
    p.add_argument("--steps", type=int_arg("batches"), default=1, help="measured steps (default 1)")
    p.add_argument("--warmup", type=_warmup_arg, default=2, metavar="N|converge",
                   help="warm-up steps before them, while the cost table learns (default 2), or 'converge': "
                        "until a step moves no table entry by more than 1 %% (at most 10 steps), then the table "
                        "is copied into a fresh simulator that measures after 2 warm-up steps")
    p.add_argument("--top-k", type=int_arg("experts"), default=None,
                   help="routed experts per token, overriding the model's (the Sieve paper runs "
                        "Qwen3-30B-A3B with 4; its config.json says 8)")
    p.add_argument("--seed", type=int_arg("seed"), default=0, help="seed of routing and lengths (default 0)")
    p.add_argument("--pimoe-unit", default=None, help="PIMoE placement unit: pseudo_channel, channel (default), "
                                                      "stack, or a fixed group BASE*S such as channel*4")
    p.add_argument("--microbatches", type=int_arg("batch"), default=1,
                   help="2 interleaves two halves of the batch (prior work's schedule; default 1)")
    p.add_argument("--early-loads", default=None, choices=("cheaper", "paper", "policy", "off"),
                   help="weights loaded before the decision: 'cheaper' (experts whose local tokens alone make the "
                        "GPU the cheaper side), 'paper' (>= 2 local tokens), 'policy' (the experts the policy "
                        "names and keeps on the GPU: overlap), 'off' (default: the policy's: 'cheaper' for Sieve, "
                        "'policy' for overlap, 'off' for PIMoE)")
    p.add_argument("--no-early-loads", action="store_true", help="the same as --early-loads off")
    p.add_argument("--sequential-gemm", action="store_true",
                   help="load all GPU experts' weights, then run the grouped GEMM (default: pipelined, the next "
                        "expert's weights stream while the current one computes)")
    p.add_argument("--no-contention", action="store_true",
                   help="let PIM and GPU HBM traffic overlap without slowing each other")
    p.add_argument("--scheduler-latency-us", type=number_arg(lo=0, hi=999999, what="microseconds"), default=None,
                   metavar="US",
                   help="modelled decision latency per layer for 256 experts (default: the hardware's, 20 us)")
    p.add_argument("--policy-option", action="append", default=[], metavar="KEY=VALUE",
                   help="constructor argument of the policies that take it, e.g. include_attention=false "
                        "(Sieve's variant without attention in T_PIM); repeatable")
    from ._gpu_args import add_gpu_args
    add_gpu_args(p)
    p.add_argument("--mtp-tokens", type=int_arg("layers", lo=0), default=None, metavar="K",
                   help="multi-token-prediction decoding: K draft tokens per request per step, verified in the "
                        "step (default: the model's mtp_tokens, 0; only a model with MTP layers, e.g. deepseek-v3)")
    p.add_argument("--mtp-acceptance", type=number_arg(lo=0, hi=1, what="acceptance rate"), default=None,
                   metavar="A", help="acceptance rate of a draft token (default 0.85, DeepSeek-V3 report); "
                                     "tokens per request per step = 1 + A + ... + A^K")
    p.add_argument("--no-energy", action="store_true",
                   help="leave out energy_j, its breakdown and tokens_per_joule (docs/energy.md)")
    p.add_argument("--json", action="store_true", help="JSON: one object (one policy) or a list")
    p.add_argument("--quiet", action="store_true",
                   help="no progress bar (it shows only on a terminal, with sievesim[progress])")
    p.add_argument("--chrome-trace", default=None, metavar="FILE",
                   help="write the last step's schedule as Chrome trace JSON (Perfetto); one policy only")
    p.set_defaults(func=_run)


def _warmup_arg(text: str) -> int | str:
    if text.strip().lower() == "converge":
        return "converge"
    try:
        return int_arg("batches", lo=0)(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number of warm-up steps from 0 to 4096, or "
                                         "'converge'") from None


def _policies(text: str) -> list[str]:
    from ..policies import policy_class
    from ..system import GPU_ONLY

    names = list(ALL_POLICIES) if text.strip().lower() == "all" else [n.strip().lower() for n in text.split(",")]
    if not names or any(not n for n in names):
        raise field_error("--policy", text, "a policy name, comma-separated names, or 'all'")
    for n in names:
        if n != GPU_ONLY:
            policy_class(n, also=(GPU_ONLY, "all"))
    return list(dict.fromkeys(names))


def _policy_options(items: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs (see :func:`sievesim.policies.options.parse_option_text`)."""
    from ..policies.options import parse_option_text

    out: dict[str, Any] = {}
    for item in items:
        if "," in item or not item.strip():
            raise field_error("--policy-option", item, "one KEY=VALUE per --policy-option")
        parsed = parse_option_text(item, field="--policy-option")
        for key in parsed:
            if key in out:
                raise field_error("--policy-option", item, f"each key once ({key} is given twice)")
        out.update(parsed)
    return out


def options_for_policies(names: list[str], options: dict[str, Any], flag: str = "--policy-option"
                         ) -> dict[str, dict[str, Any]]:
    """The checked options of each policy in ``names`` (the keys its ``options`` table declares).
    A key that none of them takes is refused with every policy's options listed; a value is
    checked against the table of each policy that takes it."""
    from ..policies import policy_class
    from ..policies.options import check_policy_options, describe_options, option_names
    from ..system import GPU_ONLY

    classes = {n: policy_class("noexp" if n == GPU_ONLY else n) for n in names}
    per: dict[str, dict[str, Any]] = {}
    for n, cls in classes.items():
        takes = {k: v for k, v in options.items() if k in option_names(cls) and n != GPU_ONLY}
        per[n] = check_policy_options(cls, takes, prefix=flag + " ", cli=True)
    unused = [k for k in options if not any(k in per[n] for n in names)]
    if unused:
        listing = "; ".join(f"{n}: {describe_options(getattr(c, 'options', None))}" if option_names(c)
                            else f"{n} takes none" for n, c in classes.items())
        import difflib
        every = sorted({k for c in classes.values() for k in option_names(c)})
        close = difflib.get_close_matches(unused[0], every, n=1, cutoff=0.5)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise field_error(flag, unused[0], f"an option of the policies run{hint}: {listing}")
    return per


def _run(args: argparse.Namespace) -> int:
    from ..hardware import get_hardware
    from ..models import get_model
    import sys

    from ..progress import progress_bar
    from ..system import StepSimulator
    from ..system.chrome import write_chrome_trace
    from ._gpu_args import gpu_kwargs

    names = _policies(args.policy)
    if args.chrome_trace and len(names) != 1:
        raise field_error("--chrome-trace", args.chrome_trace, "one policy (--policy NAME)")
    if args.pimoe_unit is not None and "pimoe" not in names:
        raise field_error("--pimoe-unit", args.pimoe_unit, "only with policy pimoe")
    model = get_model(args.model, top_k=args.top_k)
    hw = get_hardware(args.hardware)
    latency_s = None
    if args.scheduler_latency_us is not None:
        lat = args.scheduler_latency_us
        if not (lat >= 0 and lat < 1e6):
            raise field_error("--scheduler-latency-us", lat, "a latency in microseconds, >= 0 and < 1e6")
        latency_s = lat * 1e-6
    options = _policy_options(args.policy_option)
    if args.pimoe_unit is not None and options.get("unit", args.pimoe_unit) != args.pimoe_unit:
        raise field_error("--policy-option unit", options["unit"], f"the unit of --pimoe-unit "
                          f"({args.pimoe_unit}), or only one of the two")
    per_policy = options_for_policies(names, options)
    if args.pimoe_unit is not None:
        from ..policies import policy_class
        from ..policies.options import check_policy_options
        check_policy_options(policy_class("pimoe"), {"unit": args.pimoe_unit}, prefix="--pimoe-", cli=True)
    results = []
    converge = args.warmup == "converge"
    warmups: dict[str, Any] = {}
    if converge:
        from ..reproduce.warmup import MEASURED_AFTER, WARMUP_LIMIT, warmed_simulator
        args.warmup = MEASURED_AFTER
    bar = progress_bar(len(names) * (args.warmup + args.steps), "run", None if args.quiet else sys.stderr)
    for name in names:
        if name == "pimoe":   # its static placement must fit the PIM units (exit 2 naming both)
            _check_pimoe_fits(model, hw, args)
        bar.set_description(f"run {name}")
        kwargs = dict(gpus=args.gpus, policy=name, batch=args.batch, trace=args.trace,
                      context_len=args.context_len, context_preset=args.context_preset,
                      prefill=args.prefill, seed=args.seed,
                      pimoe_unit=args.pimoe_unit if name == "pimoe" else None,
                      early_loads="off" if args.no_early_loads else args.early_loads,
                      pipelined_gemm=not args.sequential_gemm, microbatches=args.microbatches,
                      contention=not args.no_contention, policy_options=per_policy[name],
                      scheduler_latency_s=latency_s, energy=not args.no_energy, mtp_tokens=args.mtp_tokens,
                      mtp_acceptance=args.mtp_acceptance, **gpu_kwargs(args))
        if converge:    # the cost table warmed until it stops moving (docs/usage.md)
            sim, warm = warmed_simulator(WARMUP_LIMIT, model=model, hardware=hw, **kwargs)
            warmups[name] = {"table_warmup_steps": warm.steps, "table_converged": warm.converged,
                             "table_last_move": warm.last_move}
        else:
            sim = StepSimulator(model, hw, **kwargs)
        results.append(sim.run(steps=args.steps, warmup=args.warmup, on_step=bar.update))
    bar.close()
    if args.chrome_trace:
        try:
            write_chrome_trace(results[0].schedule, args.chrome_trace)
        except OSError as exc:
            raise field_error("--chrome-trace", args.chrome_trace, f"a writable file ({exc.strerror})") from None
    records = [r.to_dict() for r in results]
    for r in records:
        r.update(warmups.get(r["policy"], {}))
    _add_speedups(records)
    from .._outputs import check_finite
    check_finite(records)
    if args.json:
        print(json.dumps(records[0] if len(records) == 1 else records))
        return 0
    _print_table(records, model, hw)
    return 0


def _check_pimoe_fits(model: Any, hw: Any, args: argparse.Namespace) -> None:
    """PIMoE's layout of the experts over the PIM units against the units' share of the HBM
    (:func:`sievesim.policies.placement.check_pimoe_capacity`); after the policies before it ran, so
    that a mistyped option is named first."""
    from ..policies import DEFAULT_PIMOE_UNIT, PIMoE
    from ..policies.placement import check_pimoe_capacity
    from ..system.parallelism import resolve_redundant

    redundant = resolve_redundant(args.redundant_experts, model.num_experts, args.gpus, args.experts)
    check_pimoe_capacity(model, hw, args.gpus, PIMoE(args.pimoe_unit or DEFAULT_PIMOE_UNIT).unit, redundant)


def _add_speedups(records: list[dict[str, Any]]) -> None:
    """``speedup_over_<ref>`` = reference step time / this step time, for the references that ran."""
    by_name = {r["policy"]: r for r in records}
    for ref in ("gpu-only", "noexp"):
        if ref in by_name:
            for r in records:
                r[f"speedup_over_{ref.replace('-', '_')}"] = by_name[ref]["step_time_s"] / r["step_time_s"]


def _gpu_words(r: dict[str, Any]) -> str:
    """The GPU model, parallelism and formats of a record, in words (every output says them)."""
    model = {"roofline": "the paper's roofline", "calibrated": "calibrated"}[r["gpu_model"]]
    par = f"attention {r['attention']}, experts {r['experts']}" + (f", {r['nodes']} nodes" if r.get("nodes", 1) > 1 else "")
    par += ", DeepEP normal dispatch" if r.get("nodes", 1) > 1 and r.get("dispatch") == "normal" else ""
    par += f", {r['redundant_experts']} redundant experts" if r.get("redundant_experts") else ""
    formats = f"weights {r['weight_format']}, experts {r['expert_format']}, KV {r['kv_format']}"
    return f"GPU model: {model} ({par}; {formats})"


def _print_table(records: list[dict[str, Any]], model: Any, hw: Any) -> None:
    r0 = records[0]
    print(f"{model.name} (top-{model.top_k}) on {r0['gpus']} x {hw.name}, B = {r0['batch']}"
          + (f" + {r0['prefill_requests']} prefill x {r0['prefill_len']} tokens" if r0["prefill_requests"] else "")
          + f", context {r0['context']}, routing {r0['routing']}, seed {r0['seed']}, "
            f"{_gpu_words(r0)}; "
            f"mean of {r0['steps']} step(s) after {r0['warmup']} warm-up step(s)"
          + ("; std_ms and min-max_ms: the spread of the executed step over the measured steps" if r0["steps"] > 1
             else ""))
    print("executed = the dependency graph run with engine-priced PIM nodes; estimate = the policy's Equation 1 "
          "summed over layers")
    warmed = [r for r in records if "table_warmup_steps" in r]
    if warmed:
        print("cost table warmed until a step moved no entry by more than 1 %: " + "; ".join(
            f"{r['policy']} {r['table_warmup_steps']} step(s)" + ("" if r["table_converged"] else
                                                                  f", not converged (last move {r['table_last_move']:.1%})")
            for r in warmed))
    refs = [k for k in ("speedup_over_gpu_only", "speedup_over_noexp") if k in r0]

    def label(r: dict[str, Any]) -> str:
        name = r["policy"] + (f"({r['pimoe_unit']})" if r.get("pimoe_unit") else "")
        return name + "".join(f"[{k}={v}]" for k, v in r.get("policy_options", {}).items())

    width = max([14] + [len(label(r)) for r in records])
    spread = r0["steps"] > 1

    def std_ms(r: dict[str, Any]) -> str:
        import numpy as np
        return f" {np.std(r['step_times_s']) * 1e3:8.3f} {min(r['step_times_s']) * 1e3:7.3f}-{max(r['step_times_s']) * 1e3:<7.3f}"

    head = (f"{'policy':{width}s} {'executed_ms':>11s}" + (f" {'std_ms':>8s} {'min-max_ms':^15s}" if spread else "")
            + f" {'estimate_ms':>11s} {'tok/s/GPU':>10s} {'tok/s/user':>10s} "
            + " ".join(f"{'x ' + k[len('speedup_over_'):]:>10s}" for k in refs)
            + f" {'GPU exp/layer':>13s} {'PIM exp/layer':>13s}")
    print(head)
    for r in records:
        layers = len(r["layer_time_s"])
        print(f"{label(r):{width}s} {r['step_time_s'] * 1e3:11.3f}" + (std_ms(r) if spread else "")
              + f" {r['estimated_step_time_s'] * 1e3:11.3f} "
              f"{r['throughput_tokens_per_s_per_gpu']:10.1f} {r['interactivity_tokens_per_s_per_user']:10.1f} "
              + " ".join(f"{r[k]:10.2f}" for k in refs)
              + f" {r['experts_on_gpu'] / layers:13.1f} {r['experts_on_pim'] / layers:13.1f}")
    if len(records) == 1:
        r = r0
        print("busy per GPU [ms]: " + "; ".join(f"{k} " + ",".join(f"{x * 1e3:.3f}" for x in v)
                                                for k, v in r["busy_s"].items()))
        print(f"decision: modelled {r['scheduler_us']:.2f} us per layer and GPU, simulator wall "
              f"{r['wall_decision_us']:.2f} us")
        print(f"early weight loads: {r['early_load_bytes'] / 1e6:.1f} MB per step, of which wasted (ran on PIM) "
              f"{r['early_load_wasted_bytes'] / 1e6:.1f} MB")
    mem = r0["memory_per_gpu_bytes"]
    print(f"memory per GPU: {mem['total'] / 2**30:.1f} GiB of {mem['capacity'] / 2**30:.1f} GiB (expert weights "
          f"{mem['expert_weights'] / 2**30:.1f}, other weights {mem['replicated_weights'] / 2**30:.1f}, KV cache "
          f"{mem['kv_cache'] / 2**30:.2f}, activations {mem['activations'] / 2**30:.3f} GiB)")
    for r in records:
        if "energy_j" in r:
            parts = ", ".join(f"{k} {v:.4f}" for k, v in r["energy_breakdown_j"].items())
            print(f"energy {label(r)}: {r['energy_j']:.4f} J per step ({parts}); "
                  f"{r['tokens_per_joule']:.2f} tokens/J, {r['average_power_w_per_gpu']:.0f} W per GPU")
