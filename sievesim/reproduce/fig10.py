"""Figure 10 of the Sieve paper: the busy time of each PIM channel of GPU 0 over the step, PIMoE
(per channel and per stack) against Sieve, executed."""
from __future__ import annotations

import pathlib

from .common import point_settings, series_name
from .plotting import save
from .registry import FigureData, FigureOptions, judge, not_judged, register_figure, step_records
from .warmup import WARMUP_LIMIT, converged_step_point, warmup_note


def plot_fig10(data: FigureData, path: pathlib.Path) -> None:
    """fig10.png: a panel per model, the expert work of each PIM channel of GPU 0 [% of the step]."""
    import matplotlib.pyplot as plt

    models = list(dict.fromkeys(r["model"] for r in data.records))
    fig, axes = plt.subplots(len(models), 1, figsize=(8, 2.8 * len(models)), squeeze=False)
    for ax, model in zip(axes[:, 0], models):
        rows = [r for r in data.records if r["model"] == model]
        for series in dict.fromkeys(r["series"] for r in rows):
            pts = [r for r in rows if r["series"] == series]
            ax.plot([r["channel"] for r in pts], [100 * r["expert_utilisation"] for r in pts], lw=1, label=series)
        ax.set_title(f"{model}, B = {rows[0]['batch']}, GPU 0", fontsize=9)
        ax.set_ylabel("expert work [% of step]")
    axes[-1][0].set_xlabel("PIM channel")
    axes[0][0].legend(fontsize=7)
    save(fig, path)


@register_figure("fig10", "PIM channel utilisation, PIMoE vs Sieve, executed (Sieve paper Figure 10)", plot=plot_fig10)
def fig10(opts: FigureOptions) -> FigureData:
    """Busy time of each PIM channel of GPU 0 over the step time (expert work alone, and with attention)."""
    cases = [("gpt-oss-120b", 4, 64)] + ([] if opts.quick else [("qwen3.5-397b-a17b", 8, 256)])
    pols = [("pimoe", "channel"), ("pimoe", "stack"), ("sieve", None)]
    points, meta = [], []
    for model, gpus, b in cases:
        for pol, unit in pols:
            p = point_settings(model, gpus, pol, b, "text", unit=unit, warmup=WARMUP_LIMIT, seed=opts.seed)
            points.append(p)
            meta.append((model, series_name(pol, unit, "text")))
    rows = step_records("fig10", points, opts, point_fn=converged_step_point)
    records = []
    for r, (model, series) in zip(rows, meta):
        per_gpu = len(r["pim_unit_busy_s"]) // r["gpus"]
        unit = r["pim_unit"]
        # busy per channel of GPU 0: a stack spans 16 channels, a pseudo-channel is half of one
        if unit == "stack":
            expert = [x for x in r["pim_unit_expert_busy_s"][:per_gpu] for _ in range(16)]
            total = [x for x in r["pim_unit_busy_s"][:per_gpu] for _ in range(16)]
        else:
            expert, total = r["pim_unit_expert_busy_s"][:per_gpu], r["pim_unit_busy_s"][:per_gpu]
        for ch, (e, t) in enumerate(zip(expert, total)):
            records.append({"model": model, "gpus": r["gpus"], "batch": r["batch"], "series": series,
                            "policy": r["policy"], "pimoe_unit": r.get("pimoe_unit"), "channel": ch,
                            "expert_utilisation": e / r["step_time_s"], "utilisation": t / r["step_time_s"],
                            "step_time_s": r["step_time_s"], "seed": r.get("seed")})

    def stats(model: str, series: str) -> tuple[float, float] | None:
        """(busiest / mean, share of channels below 10 % of the busiest) of the expert utilisation."""
        u = [x["expert_utilisation"] for x in records if x["model"] == model and x["series"] == series]
        if not u or max(u) == 0:
            return None
        return max(u) / (sum(u) / len(u)), sum(1 for x in u if x < 0.1 * max(u)) / len(u)

    def spread(model: str, series: str) -> str:
        st = stats(model, series)
        return "-" if st is None else f"busiest/mean {st[0]:.2f}, {st[1]:.0%} of channels below 10 % of the busiest"

    claims = []
    for model, _, b in (("gpt-oss-120b", 4, 64), ("qwen3.5-397b-a17b", 8, 256)):
        if not any(m == model for m, _, _ in cases):
            claims.append(not_judged(f"PIMoE (channel) expert load across channels, {model} B={b}",
                                     "heavy on some channels, others underutilised", f"{model} at B = {b} (the full figure)"))
            continue
        pc, sv = stats(model, "PIMoE (channel)"), stats(model, "Sieve")
        claims += [judge(f"PIMoE (channel) expert load across channels, {model} B={b}",
                         "heavy on some channels, others underutilised (accepts busiest/mean >= 1.5)",
                         spread(model, "PIMoE (channel)"), None if pc is None else pc[0] >= 1.5,
                         why="with every unit of the GPU filled, one layer's experts spread over all channels, so "
                             "the imbalance comes from routing alone"),
                   judge(f"PIMoE (stack), {model}", "(not in the paper)", spread(model, "PIMoE (stack)"), None,
                         why="the paper shows PIMoE per channel only"),
                   judge(f"Sieve across channels, {model}", "uniform (accepts busiest/mean <= 1.05)",
                         spread(model, "Sieve"), None if sv is None else sv[0] <= 1.05)]
    notes = ["utilisation = busy time / executed step time, GPU 0; expert_utilisation counts the experts alone, "
             "utilisation adds attention (which occupies every channel alike)",
             warmup_note([{**r, "series": series} for r, (_, series) in zip(rows, meta)])]
    return FigureData(records, claims, notes)
