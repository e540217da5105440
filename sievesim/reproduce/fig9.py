"""Figure 9 of the Sieve paper: throughput per GPU against interactivity for every policy on the
paper's three models, executed, with a verdict for each of its claims.

``fig9`` is the default reading (the paper's text with the fidelity fixes of docs/system.md: the
decision latency of the rule's work, early loads that never waste, a pipelined grouped GEMM);
``fig9-matching`` is the alternative reading (no early loads, no decision latency, Sieve weighing
the expert work of each side alone) in a figure of its own; ``fig9-mb2`` runs the default reading
with two interleaved micro-batches, the one graph in which Equation 1's attention term overlaps
expert work."""
from __future__ import annotations

import pathlib
from typing import Any

from .common import STEP_MODELS, TEXT_TOP_K, point_settings, series_name, with_series
from .plotting import save
from ..models import get_model
from .reasons import decision_cost, few_on_pim_channel, pim_share, placement_times, sieve_behind, step_compare
from .registry import (COMPARABLE_TOLERANCE, NOT_OUR_MODEL, NOT_THE_PAPER, Claim, FigureData, FigureOptions, comparable,
                       judge, judge_gain, judge_not_behind, not_judged, ratio_text, register_figure, step_records)
from .warmup import WARMUP_LIMIT, converged_step_point, warmup_note

#: The five curves of a panel, in legend order: the baselines, PIMoE in the paper's unit (channel)
#: and in the strongest one (stack), and Sieve.
POLICIES = (("noexp", None), ("allexp", None), ("pimoe", "channel"), ("pimoe", "stack"), ("sieve", None))
#: One colour per curve, the same in every panel.
COLOURS = {"NoExp": "#7f7f7f", "AllExp": "#1f77b4", "PIMoE (channel)": "#ff7f0e", "PIMoE (stack)": "#d62728",
           "Sieve": "#2ca02c"}


def _step_batches(gpus: int, quick: bool, microbatches: int = 1) -> list[int]:
    """The batch sizes of a model on ``gpus`` GPUs: multiples of ``gpus``, at least ``gpus``, with at
    least ``microbatches`` requests per GPU; the quick ones are the smallest and B = 256."""
    wanted = (1, 4, 16, 32, 64, 128, 256)
    full = sorted(b for b in {max(gpus, b - b % gpus) for b in wanted} if b // gpus >= microbatches)
    return [full[0], full[-1]] if quick else full


def plot_fig9(data: FigureData, path: pathlib.Path) -> None:
    """A panel per model (and top-k): throughput per GPU against interactivity, log-log, five curves."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter

    panels = list(dict.fromkeys(r.get("panel", r["model"]) for r in data.records))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.8), squeeze=False)
    for ax, panel in zip(axes[0], panels):
        rows = [r for r in data.records if r.get("panel", r["model"]) == panel]
        for series in dict.fromkeys(r["series"] for r in rows):
            pts = sorted((r for r in rows if r["series"] == series), key=lambda r: r["batch"])
            name = series.split(" [")[0]
            ax.plot([r["interactivity_tokens_per_s_per_user"] for r in pts],
                    [r["throughput_tokens_per_s_per_gpu"] for r in pts], "-", marker="o", ms=3,
                    color=COLOURS.get(name), label=name)
        ax.set_title(f"{panel} ({rows[0]['gpus']} GPU)", fontsize=9)
        ax.set_xlabel("interactivity [tokens/s/user]", fontsize=8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        for axis in (ax.xaxis, ax.yaxis):     # after set_*scale, which resets locators and formatters
            axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
            axis.set_minor_locator(LogLocator(base=10, subs=()))
            fmt = ScalarFormatter()
            fmt.set_scientific(False)
            axis.set_major_formatter(fmt)
            axis.set_minor_formatter(NullFormatter())
        ax.tick_params(labelsize=7)
        ax.tick_params(axis="x", labelrotation=45)
    axes[0][0].set_ylabel("throughput [tokens/s/GPU]", fontsize=8)
    axes[0][-1].legend(fontsize=7, loc="best")
    reading = data.records[0].get("reading", "text") if data.records else "text"
    mbs = data.records[0].get("microbatches", 1) if data.records else 1
    fig.suptitle(f"executed step (engine-priced PIM), reading: {reading}"
                 + (f", {mbs} micro-batches" if mbs and mbs > 1 else ""), fontsize=9)
    save(fig, path)


def _points(opts: FigureOptions, reading: str, microbatches: int = 1) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """(settings of every point, its (series, reading)): every policy of :data:`POLICIES` on the
    paper's three models at the batches of :func:`_step_batches`. A quick run's points are full-run
    points, identical setting for setting (the warm-up runs to convergence in both), so that a claim
    judged in both gets the same verdict."""
    points, meta = [], []
    pols = POLICIES if not opts.quick or reading == "text" else (("allexp", None), ("pimoe", "stack"), ("sieve", None))
    for model, gpus in STEP_MODELS.items():
        for top_k in (None, TEXT_TOP_K.get(model)) if model in TEXT_TOP_K else (None,):
            for b in _step_batches(gpus, opts.quick, microbatches):
                for pol, unit in pols:
                    p = point_settings(model, gpus, pol, b, reading, unit=unit, warmup=WARMUP_LIMIT, seed=opts.seed,
                                       top_k=top_k)
                    if microbatches > 1:
                        p["microbatches"] = microbatches
                    points.append(p)
                    meta.append((series_name(pol, unit, reading), reading))
    return points, meta


#: The paper's panels: (panel name in the records, label in a claim, model, GPUs).
_Q3 = "qwen3-30b-a3b"
PANELS = (("qwen3.5-397b-a17b", "Qwen3.5", "qwen3.5-397b-a17b", 8),
          ("gpt-oss-120b", "GPT-OSS", "gpt-oss-120b", 4),
          (_Q3, "Qwen3 (top-8, config)", _Q3, 1),
          (f"{_Q3} top-{TEXT_TOP_K[_Q3]}", f"Qwen3 (top-{TEXT_TOP_K[_Q3]}, paper's text)", _Q3, 1))
#: The baselines the paper names against Sieve ("Sieve consistently outperforms all baselines"),
#: PIMoE in the paper's unit and in the strongest one.
BASELINES = ("NoExp", "AllExp", "PIMoE (channel)", "PIMoE (stack)")


def _claims(records: list[dict[str, Any]], opts: FigureOptions, microbatches: int) -> list[Claim]:
    """Every claim of the paper's Figure 9 text, judged by the rules of docs/reproduction.md."""
    def row(panel: str, series: str, b: int) -> dict[str, Any] | None:
        return next((r for r in records if r.get("panel", r["model"]) == panel
                     and r["series"].split(" [")[0] == series and r["batch"] == b), None)

    def ratio(panel: str, other: str, b: int) -> float | None:
        s, o = row(panel, "Sieve", b), row(panel, other, b)
        if s is None or o is None:
            return None
        return s["throughput_tokens_per_s_per_gpu"] / o["throughput_tokens_per_s_per_gpu"]

    def full_batches(gpus: int) -> list[int]:
        return _step_batches(gpus, False, microbatches)

    def missing(batches: list[int]) -> str:
        return "B = " + ", ".join(str(b) for b in batches) + " (the full figure)"

    def cause_for(panel: str, model: str, gpus: int, other: str):
        def cause(label: str, x: float) -> tuple[str, str]:
            b = int(label.removeprefix("B="))
            sieve, base = row(panel, "Sieve", b), row(panel, other, b)
            where = f"B = {b}"
            if other == "PIMoE (channel)":
                times = placement_times(model, gpus, "channel")
                why = few_on_pim_channel(times, base, sieve, where) if sieve and base else ""
                if x > 1.0:
                    stack = ratio(panel, "PIMoE (stack)", b)
                    why += (f"; Sieve/PIMoE per stack there: {ratio_text(stack)}" if stack is not None else "")
                    smallest = full_batches(gpus)[0]
                    at_smallest = ratio(panel, "PIMoE (channel)", smallest)
                    if at_smallest is None:
                        return None, f"whose miss it is needs B = {smallest}, the panel's smallest batch"
                    if not comparable(at_smallest):
                        # the paper's text names the channel, its small-batch results do not fit it
                        return NOT_THE_PAPER, ("the text gives PIMoE channel-level expert parallelism (Sections 6.2 "
                                               f"and 7.2), but at the smallest batch (B = {smallest}) Sieve/PIMoE per "
                                               f"channel is {ratio_text(at_smallest)} where the paper finds PIMoE "
                                               "comparable to Sieve; " + why)
                    return NOT_OUR_MODEL, why
                return NOT_OUR_MODEL, sieve_behind(sieve, base, other, where) if sieve and base else ""
            times = placement_times(model, gpus, "stack")
            if x < 1.0 and sieve and base:
                return NOT_OUR_MODEL, sieve_behind(sieve, base, other, where, times)
            return NOT_OUR_MODEL, (f"Sieve ran {pim_share(sieve):.0%} of the activated experts on PIM at {where}, "
                                   f"PIMoE per stack {pim_share(base):.0%}") if sieve and base else ""
        return cause

    claims: list[Claim] = []
    # the paper's speedups over PIMoE: (panel index, claim, paper text, lo, hi, batches, how)
    speedups = [(0, "Qwen3.5 Sieve/{} at B=256", "up to 1.26x", 1.26, 1.26, lambda g: [256], "best"),
                (1, "GPT-OSS Sieve/{} at B>=32", "1.11-1.17x", 1.11, 1.17,
                 lambda g: [b for b in full_batches(g) if b >= 32], "every"),
                (2, "Qwen3 (top-8, config) Sieve/{}, best B", "up to 1.6x", 1.6, 1.6, full_batches, "best"),
                (3, f"Qwen3 (top-{TEXT_TOP_K[_Q3]}, paper's text) Sieve/{{}}, best B", "up to 1.6x", 1.6, 1.6,
                 full_batches, "best")]
    for i, what, paper, lo, hi, batches_of, how in speedups:
        panel, _, model, gpus = PANELS[i]
        batches = batches_of(gpus)
        for other in ("PIMoE (channel)", "PIMoE (stack)"):
            ratios = {f"B={b}": ratio(panel, other, b) for b in batches}
            claims.append(judge_gain(what.format(other), paper, lo, hi, ratios, how=how, missing=missing(batches),
                                     cause=cause_for(panel, model, gpus, other)))

    # "on GPT-OSS ... with interactivity improvements reaching up to 1.25x" (tokens/s per user, same batch)
    panel, _, model, gpus = PANELS[1]
    for other in ("PIMoE (channel)", "PIMoE (stack)"):
        def per_user(b: int, other: str = other) -> float | None:
            s, o = row(panel, "Sieve", b), row(panel, other, b)
            return None if s is None or o is None else (s["interactivity_tokens_per_s_per_user"]
                                                         / o["interactivity_tokens_per_s_per_user"])
        batches = full_batches(gpus)
        claims.append(judge_gain(f"GPT-OSS Sieve/{other} interactivity, best B", "up to 1.25x", 1.25, 1.25,
                                 {f"B={b}": per_user(b) for b in batches}, how="best", missing=missing(batches),
                                 cause=cause_for(panel, model, gpus, other)))
    # "Sieve achieves significantly higher peak throughput (a ~1.26x improvement for Qwen3.5)"
    panel, label, _, gpus = PANELS[0]
    batches = full_batches(gpus)
    sieve_rows = [row(panel, "Sieve", b) for b in batches]
    for other in ("PIMoE (channel)", "PIMoE (stack)"):
        other_rows = [row(panel, other, b) for b in batches]
        peak, peak_cause = None, None
        if all(sieve_rows) and all(other_rows):
            best_sieve = max(sieve_rows, key=lambda r: r["throughput_tokens_per_s_per_gpu"])
            best_other = max(other_rows, key=lambda r: r["throughput_tokens_per_s_per_gpu"])
            peak = best_sieve["throughput_tokens_per_s_per_gpu"] / best_other["throughput_tokens_per_s_per_gpu"]
            label_peak = f"Sieve's peak at B={best_sieve['batch']}, {other}'s at B={best_other['batch']}"
            if best_sieve["batch"] == best_other["batch"]:      # the peak ratio is the ratio at that batch
                peak_cause = cause_for(panel, PANELS[0][2], gpus, other)
                label_peak = f"B={best_sieve['batch']}"
        claims.append(judge_gain(f"Qwen3.5 peak throughput Sieve/{other}", "~1.26x", 1.26, 1.26,
                                 {label_peak if peak is not None else "peak": peak}, how="best",
                                 missing=missing(batches), cause=peak_cause))

    # "Sieve consistently outperforms all baselines": every panel, every batch, each baseline apart
    for other in BASELINES:
        ratios = {f"{label} B={b}": ratio(panel, other, b)
                  for panel, label, _, gpus in PANELS for b in full_batches(gpus)}

        def behind(label: str, worst: float, other: str = other) -> str:
            panel_label, _, b_text = label.rpartition(" B=")
            panel, _, model, gpus = next(p for p in PANELS if p[1] == panel_label)
            b = int(b_text)
            sieve, base = row(panel, "Sieve", b), row(panel, other, b)
            times = placement_times(model, gpus, "stack") if other == "PIMoE (stack)" else None
            return sieve_behind(sieve, base, other, f"{panel_label} B = {b}", times) if sieve and base else ""
        claims.append(judge_not_behind(f"Sieve over {other}, every panel and B", "outperforms all baselines",
                                       ratios, missing="every batch of every panel (the full figure)", why=behind))

    claims += _small_batch_claims(row, ratio, full_batches)
    claims.append(_allexp_scaling_claim(row, full_batches))
    return claims


def _small_batch_claims(row: Any, ratio: Any, full_batches: Any) -> list[Claim]:
    """"For small batch sizes, PIMoE and AllExp achieve performance comparable to Sieve" (``row``,
    ``ratio`` and ``full_batches`` as :func:`_claims` defines them)."""
    claims: list[Claim] = []
    for other in ("AllExp", "PIMoE (channel)", "PIMoE (stack)"):
        smallest = {label: full_batches(gpus)[0] for _, label, _, gpus in PANELS}
        ratios = {f"{label} B={smallest[label]}": ratio(panel, other, smallest[label])
                  for panel, label, _, _ in PANELS}

        def off(label: str, x: float, other: str = other) -> str:
            panel_label, _, b_text = label.rpartition(" B=")
            panel, _, model, gpus = next(p for p in PANELS if p[1] == panel_label)
            b = int(b_text)
            sieve, base = row(panel, "Sieve", b), row(panel, other, b)
            if sieve is None or base is None:
                return ""
            where = f"{panel_label} B = {b}"
            if other == "AllExp" and x < 1.0:
                return decision_cost(sieve, base, other, where, get_model(model).num_moe_layers)
            if other == "PIMoE (channel)" and x > 1.0:
                return few_on_pim_channel(placement_times(model, gpus, "channel"), base, sieve, where)
            return step_compare(sieve, base, other, where)
        claims.append(_comparable_claim(f"Sieve/{other} at the smallest B", ratios,
                                        "the smallest batch of every panel: " + ", ".join(ratios), why=off))
    return claims


def _allexp_scaling_claim(row: Any, full_batches: Any) -> Claim:
    """"AllExp ... throughput fails to scale beyond B=32" (``row`` and ``full_batches`` as in :func:`_claims`)."""
    grow, active = {}, {}
    for panel, label, _, gpus in PANELS:
        a32, a256 = row(panel, "AllExp", 32), row(panel, "AllExp", 256)
        if 32 in full_batches(gpus):
            grow[label] = (a256["throughput_tokens_per_s_per_gpu"] / a32["throughput_tokens_per_s_per_gpu"]
                           if a32 and a256 else None)
            if a32 and a256:
                active[label] = (a32["experts_on_pim"], a256["experts_on_pim"])

    def grows(label: str, x: float) -> str:
        if label not in active:
            return ""
        n32, n256 = active[label]
        return (f"AllExp ran {n32:.0f} activated experts on PIM in a step (all layers and GPUs) at B = 32 and "
                f"{n256:.0f} at B = 256 ({n256 / n32:.2f}x): its PIM work still grows with the experts a step "
                "activates" if n32 else "")
    return _comparable_claim("AllExp throughput B=256 over B=32", grow, "B = 32 and 256 of every panel "
                             "(the full figure)", paper="flat (fails to scale past B=32)", why=grows)


def _comparable_claim(what: str, ratios: dict[str, float | None], missing: str, *, paper: str = "comparable (~1x)",
                      why: Any = None) -> Claim:
    """A claim of "about 1x" at every point of ``ratios`` (:func:`comparable`); a miss is explained at
    the point furthest from 1x by ``why(label, ratio)``."""
    if not ratios or any(v is None for v in ratios.values()):
        return not_judged(what, paper, missing)
    known = {k: float(v) for k, v in ratios.items() if v is not None}
    far = max(known, key=lambda k: abs(known[k] - 1.0))
    ok = all(comparable(v) for v in known.values())
    ours = "; ".join(f"{ratio_text(v)} {k}" for k, v in known.items())
    band = f"{1 - COMPARABLE_TOLERANCE:.2f}-{1 + COMPARABLE_TOLERANCE:.2f}x"
    reason = why(far, known[far]) if (why and not ok) else ""
    return judge(what, f"{paper} (accepts {band})", ours, ok,
                 why="" if ok else f"{ratio_text(known[far])} at {far} is outside {band}" + (f"; {reason}" if reason else ""))


def _figure(opts: FigureOptions, name: str, reading: str, microbatches: int = 1) -> FigureData:
    """Every policy of :data:`POLICIES` on the paper's three models at B up to 256, executed."""
    points, meta = _points(opts, reading, microbatches)
    raw = step_records(name, points, opts, point_fn=converged_step_point)
    records = with_series(raw, meta)
    for r, x in zip(records, raw):
        r["microbatches"] = microbatches
        for key in ("table_warmup_steps", "table_converged", "table_last_move", "scheduler_us"):
            r[key] = x[key]
    notes = ["executed schedules (the dependency graph with engine-priced PIM nodes), not Equation 1",
             f"reading: {reading} (docs/system.md, 'Readings'); PIMoE per channel is the paper's text, per stack "
             "the strongest unit on our engine",
             "Qwen3-30B-A3B twice: top-8 as its config.json says, and top-4 as the paper's text says",
             "on G GPUs the smallest batch is G (B/G requests per GPU)",
             warmup_note(records),
             "a claim whose batches this run does not have is 'not judged' (--quick runs a subset of the full "
             "figure's points, identical ones)"]
    return FigureData(records, _claims(records, opts, microbatches), notes)


@register_figure("fig9", "Throughput per GPU vs interactivity, executed (Sieve paper Figure 9)", plot=plot_fig9)
def fig9(opts: FigureOptions) -> FigureData:
    """The default reading: the paper's text with the fidelity fixes."""
    return _figure(opts, "fig9", "text")


@register_figure("fig9-matching", "Figure 9 in the alternative reading (no early loads, no decision latency, "
                 "Sieve on expert work alone)", plot=plot_fig9)
def fig9_matching(opts: FigureOptions) -> FigureData:
    """The alternative reading, a figure of its own."""
    return _figure(opts, "fig9-matching", "matching")


@register_figure("fig9-mb2", "Figure 9 with two interleaved micro-batches (Equation 1's attention term overlaps "
                 "expert work)", plot=plot_fig9)
def fig9_mb2(opts: FigureOptions) -> FigureData:
    """The default reading with ``--microbatches 2``."""
    return _figure(opts, "fig9-mb2", "text", microbatches=2)
