"""Figure 9 of the Sieve paper: throughput per GPU against interactivity for every policy on the
paper's three models, executed, in both readings of the paper (docs/system.md, "Readings")."""
from __future__ import annotations

import pathlib
from typing import Any, Sequence

from .common import STEP_MODELS, TEXT_TOP_K, point_settings, series_name, with_series
from .plotting import save
from .registry import Claim, FigureData, FigureOptions, register_figure, step_records


def _step_batches(gpus: int, quick: bool) -> list[int]:
    """The batch sizes of a model on ``gpus`` GPUs: multiples of ``gpus``, at least ``gpus``."""
    wanted = (16, 256) if quick else (1, 4, 16, 32, 64, 128, 256)
    return sorted({max(gpus, b - b % gpus) for b in wanted})


def _ratio_text(a: float | None, b: float | None) -> str:
    """a / b as "1.23x" ("-" if either is missing or b is 0)."""
    return "-" if a is None or b is None or b == 0 else f"{a / b:.2f}x"


def _tput(records: Sequence[dict[str, Any]], panel: str, series: str, batch: int) -> float | None:
    """Throughput per GPU [tokens/s] of ``series`` in ``panel`` at batch size ``batch`` (None if it did not run)."""
    for r in records:
        if r.get("panel", r["model"]) == panel and r["series"] == series and r["batch"] == batch:
            return r["throughput_tokens_per_s_per_gpu"]
    return None


def plot_fig9(data: FigureData, path: pathlib.Path) -> None:
    """fig9.png: a panel per model (and top-k), throughput per GPU against interactivity, log-log."""
    import matplotlib.pyplot as plt

    panels = list(dict.fromkeys(r.get("panel", r["model"]) for r in data.records))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.4 * len(panels), 3.9), squeeze=False)
    for ax, panel in zip(axes[0], panels):
        rows = [r for r in data.records if r.get("panel", r["model"]) == panel]
        for series in dict.fromkeys(r["series"] for r in rows):
            pts = sorted((r for r in rows if r["series"] == series), key=lambda r: r["batch"])
            style = "--" if "[matching]" in series else "-"
            ax.plot([r["interactivity_tokens_per_s_per_user"] for r in pts],
                    [r["throughput_tokens_per_s_per_gpu"] for r in pts], style, marker="o", ms=3, label=series)
        ax.set_title(f"{panel} ({rows[0]['gpus']} GPU)", fontsize=9)
        ax.set_xlabel("interactivity [tokens/s/user]")
        ax.set_xscale("log")
        ax.set_yscale("log")
    axes[0][0].set_ylabel("throughput [tokens/s/GPU]")
    axes[0][-1].legend(fontsize=6, loc="best")
    fig.suptitle("executed step (engine-priced PIM)", fontsize=9)
    save(fig, path)


@register_figure("fig9", "Throughput per GPU vs interactivity, executed (Sieve paper Figure 9)", plot=plot_fig9)
def fig9(opts: FigureOptions) -> FigureData:
    """Every policy on the paper's three models at B up to 256, executed, in both readings."""
    points, meta = [], []
    text = [("noexp", None), ("allexp", None), ("pimoe", "channel"), ("pimoe", "stack"), ("sieve", None)]
    matching = [("noexp", None), ("pimoe", "channel"), ("pimoe", "stack"), ("sieve", None)]
    if opts.quick:
        text = [("noexp", None), ("allexp", None), ("pimoe", "stack"), ("sieve", None)]
        matching = [("pimoe", "stack"), ("sieve", None)]
    warmup = 1 if opts.quick else 2
    for model, gpus in STEP_MODELS.items():
        for top_k in (None, TEXT_TOP_K.get(model)) if model in TEXT_TOP_K else (None,):
            for b in _step_batches(gpus, opts.quick):
                for reading, pols in (("text", text), ("matching", matching)):
                    for pol, unit in pols:
                        points.append(point_settings(model, gpus, pol, b, reading, unit=unit, warmup=warmup,
                                                     seed=opts.seed, top_k=top_k))
                        meta.append((series_name(pol, unit, reading), reading))
    records = with_series(step_records("fig9", points, opts), meta)

    def ratios(panel: str, unit: str, reading: str, batches: Sequence[int]) -> list[float]:
        """Sieve over PIMoE per ``unit`` in one reading, at each of ``batches`` that ran."""
        sfx = "" if reading == "text" else " [matching]"
        pairs = ((_tput(records, panel, "Sieve" + sfx, b), _tput(records, panel, f"PIMoE ({unit})" + sfx, b))
                 for b in batches)
        return [x / y for x, y in pairs if x is not None and y]

    def over_pimoe(panel: str, batches: Sequence[int], how: str) -> str:
        """Sieve/PIMoE per stack and per channel, text and matching: at one batch, the range over
        ``batches`` or the best of them (``how``: "at", "range", "best")."""
        parts = []
        for unit in ("stack", "channel"):
            cells = []
            for reading in ("text", "matching"):
                v = ratios(panel, unit, reading, batches)
                if v:
                    shown = f"{max(v):.2f}x" if how in ("at", "best") else f"{min(v):.2f}-{max(v):.2f}x"
                    cells.append(f"{reading} {shown}")
            if cells:
                parts.append(f"{unit}: " + ", ".join(cells))
        return "; ".join(parts) or "-"

    def claim_pair(model: str, batch: int, other: str) -> str:
        t = _ratio_text(_tput(records, model, "Sieve", batch), _tput(records, model, other, batch))
        m = _ratio_text(_tput(records, model, "Sieve [matching]", batch),
                        _tput(records, model, other + " [matching]", batch)
                        if "[" not in other and other != "AllExp" else _tput(records, model, other, batch))
        return f"text {t}; matching {m}"

    q35, gpt, q3 = "qwen3.5-397b-a17b", "gpt-oss-120b", "qwen3-30b-a3b"
    q3_k = f"{q3} top-{TEXT_TOP_K[q3]}"
    gpt_b = [b for b in _step_batches(4, opts.quick) if b >= 32]
    q3_b = _step_batches(1, opts.quick)
    small = {m: _step_batches(g, opts.quick)[0] for m, g in STEP_MODELS.items()}
    claims = [
        Claim("Qwen3.5 Sieve/PIMoE at B=256", "up to 1.26x", over_pimoe(q35, [256], "at")),
        Claim("GPT-OSS Sieve/PIMoE at B>=32", "1.11-1.17x", over_pimoe(gpt, gpt_b, "range")),
        Claim("Qwen3 (top-8, config) Sieve/PIMoE, best B", "up to 1.6x", over_pimoe(q3, q3_b, "best")),
        Claim(f"Qwen3 (top-{TEXT_TOP_K[q3]}, paper's text) Sieve/PIMoE, best B", "up to 1.6x",
              over_pimoe(q3_k, q3_b, "best")),
        Claim("Sieve/AllExp at the smallest B (Qwen3 / GPT-OSS / Qwen3.5)", "comparable (~1x)",
              " / ".join(claim_pair(m, small[m], "AllExp") for m in (q3, gpt, q35))),
        Claim("AllExp throughput B=256 over B=32 (GPT-OSS)", "flat (fails to scale past B=32)",
              "-" if opts.quick else _ratio_text(_tput(records, gpt, "AllExp", 256), _tput(records, gpt, "AllExp", 32))),
    ]
    notes = ["executed schedules (the dependency graph with engine-priced PIM nodes), not Equation 1",
             "text = the paper's text (attention in Sieve's T_PIM, early weight loads, 20 us decision per 256 "
             "experts); matching = no early loads, no decision latency, Sieve weighing the expert work of each "
             "side only (docs/system.md, Readings)",
             "PIMoE's unit: the paper's text says channel, its small-batch results fit stack (docs/policies.md); "
             "no one unit gives all three of its Sieve/PIMoE figures (docs/reproduction.md, Figure 9)",
             "Qwen3-30B-A3B twice: top-8 as its config.json says, and top-4 as the paper's text says (a panel "
             "of its own, the same calibrated routing shape drawing 4 experts per token)",
             "on G GPUs the smallest batch is G (B/G requests per GPU)"]
    return FigureData(records, claims, notes)
