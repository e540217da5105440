"""Energy of the executed step: tokens per joule against throughput per GPU for NoExp, AllExp,
PIMoE (channel) and Sieve on the paper's three models, and where the joules go per policy.

The Sieve paper reports no energy, so every claim here is ours alone (``judge(..., None)``); the
model and its sources are in docs/energy.md."""
from __future__ import annotations

import pathlib
from typing import Any, Sequence

from .common import STEP_MODELS, text_points, with_series
from .plotting import save
from .registry import Claim, FigureData, FigureOptions, judge, register_figure, step_records

#: The four curves, in legend order.
POLICIES = (("noexp", None), ("allexp", None), ("pimoe", "channel"), ("sieve", None))
COLOURS = {"NoExp": "#7f7f7f", "AllExp": "#1f77b4", "PIMoE (channel)": "#ff7f0e", "Sieve": "#2ca02c"}
#: Breakdown keys of a step (sievesim.system.energy.RESOURCE_KINDS), in stacking order.
KINDS = ("gpu_compute", "hbm", "pim", "link", "static")
KIND_COLOURS = {"gpu_compute": "#9467bd", "hbm": "#8c564b", "pim": "#2ca02c", "link": "#e377c2", "static": "#c7c7c7"}
NO_ENERGY = "no energy in the paper"


def _batches(gpus: int, quick: bool) -> list[int]:
    wanted = (16, 128) if quick else (1, 4, 16, 32, 64, 128, 256)
    return sorted({max(gpus, b - b % gpus) for b in wanted})


def _energy_rows(rows: list[dict[str, Any]], raw: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each CSV row with the step's energy per token and its breakdown per token [J/token]."""
    for r, x in zip(rows, raw):
        per = {k: x.get(f"energy_breakdown_{k}_j", x.get(f"energy_breakdown_j.{k}",      # a sweep row's column,
                                                          (x.get("energy_breakdown_j") or {}).get(k)))  # or older rows'
               for k in KINDS}
        for k in KINDS:
            r[f"energy_{k}_j_per_token"] = per[k] / x["batch"] if per[k] is not None else None
    return rows


def _find(records: Sequence[dict[str, Any]], model: str, series: str, batch: int) -> dict[str, Any] | None:
    return next((r for r in records if r["model"] == model and r["series"] == series and r["batch"] == batch), None)


def plot_energy(data: FigureData, path: pathlib.Path) -> None:
    """Top: tokens per joule against throughput per GPU, a panel per model. Bottom: energy per
    token by resource kind, one bar per policy at each model's largest batch."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter

    models = list(dict.fromkeys(r["model"] for r in data.records))
    fig, axes = plt.subplots(2, len(models), figsize=(4.2 * len(models), 7.0), squeeze=False)
    for col, model in enumerate(models):
        rows = [r for r in data.records if r["model"] == model]
        ax = axes[0][col]
        for series in dict.fromkeys(r["series"] for r in rows):
            pts = sorted((r for r in rows if r["series"] == series), key=lambda r: r["batch"])
            ax.plot([r["throughput_tokens_per_s_per_gpu"] for r in pts], [r["tokens_per_joule"] for r in pts],
                    "-", marker="o", ms=3, color=COLOURS.get(series), label=series)
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_minor_locator(LogLocator(base=10, subs=()))
        fmt = ScalarFormatter()
        fmt.set_scientific(False)
        ax.xaxis.set_major_formatter(fmt)
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.tick_params(axis="x", labelrotation=45)
        ax.set_title(f"{model} ({rows[0]['gpus']} GPU)", fontsize=9)
        ax.set_xlabel("throughput [tokens/s/GPU]", fontsize=8)
        ax.tick_params(labelsize=7)
        top = max(r["batch"] for r in rows)
        bars = [r for r in rows if r["batch"] == top]
        ax = axes[1][col]
        bottom = [0.0] * len(bars)
        for k in KINDS:
            vals = [(r[f"energy_{k}_j_per_token"] or 0.0) * 1e3 for r in bars]
            ax.bar(range(len(bars)), vals, bottom=bottom, color=KIND_COLOURS[k], label=k)
            bottom = [b + v for b, v in zip(bottom, vals)]
        ax.set_xticks(range(len(bars)))
        ax.set_xticklabels([r["series"] for r in bars], fontsize=7, rotation=20)
        ax.set_title(f"energy per token at B = {top}", fontsize=9)
        ax.tick_params(labelsize=7)
    axes[0][0].set_ylabel("tokens per joule", fontsize=8)
    axes[1][0].set_ylabel("energy per token [mJ]", fontsize=8)
    axes[0][-1].legend(fontsize=7, loc="best")
    axes[1][-1].legend(fontsize=7, loc="best")
    fig.suptitle("executed step, B200 + HBM3E-PIM energy model (docs/energy.md)", fontsize=9)
    save(fig, path)


def _claims(records: list[dict[str, Any]], quick: bool) -> list[Claim]:
    """Per model: Sieve's tokens per joule over each other policy at the smallest batch, 64 and the
    largest (the CSV has every batch), and where Sieve's joules go at the largest."""
    claims = []
    others = ("PIMoE (channel)", "NoExp", "AllExp")
    for model, gpus in STEP_MODELS.items():
        batches = _batches(gpus, quick)
        shown_at = sorted({batches[0], batches[-1]} | ({64} & set(batches)))
        for i, b in enumerate(shown_at):
            s = _find(records, model, "Sieve", b)
            vals = [(_find(records, model, o, b) or {}).get("tokens_per_joule") for o in others]
            shown = " / ".join(f"{s['tokens_per_joule'] / v:.2f}x" if s and v else "-" for v in vals)
            claims.append(judge(f"{model} B={b}: Sieve tokens/J over PIMoE (channel) / NoExp / AllExp", "-", shown,
                                None, why=NO_ENERGY if i == 0 else ""))
        top = batches[-1]
        s = _find(records, model, "Sieve", top)
        if s and s.get("energy_j"):
            shares = {k: (s[f"energy_{k}_j_per_token"] or 0.0) * s["batch"] / s["energy_j"] for k in KINDS}
            claims.append(judge(f"{model} B={top}: where Sieve's joules go", "-",
                                ", ".join(f"{k} {v:.0%}" for k, v in shares.items()), None,
                                why="static: the GPUs' static power and the DRAM background over the step"))
    return claims


@register_figure("energy", "Tokens per joule vs throughput per GPU, and energy per token by resource "
                 "(no counterpart in the paper)", plot=plot_energy)
def energy(opts: FigureOptions) -> FigureData:
    """The four policies on the paper's three models (text reading), executed, with their energy."""
    from .warmup import WARMUP_LIMIT, converged_step_point, warmup_note

    points, names = text_points(POLICIES, _batches, opts, WARMUP_LIMIT)
    meta = [(name, "text") for name in names]
    raw = step_records("energy", points, opts, point_fn=converged_step_point)
    records = _energy_rows(with_series(raw, meta), raw)
    notes = ["executed schedules (the dependency graph with engine-priced PIM nodes) on the b200 preset",
             "energy per node: GPU FLOPs and HBM bytes, link bytes, PIM command counts of the engine's programs; "
             "static: GPU static power and DRAM background over the step (docs/energy.md)",
             "PIMoE in the paper's unit (channel)",
             "the Sieve paper reports no energy: every number here is ours alone; static is the GPUs' static power "
             "(TDP less the dynamic power at both peaks) and the DRAM background over the step",
             warmup_note([dict(r, series=m[0]) for r, m in zip(raw, meta)])]
    return FigureData(records, _claims(records, opts.quick), notes)
