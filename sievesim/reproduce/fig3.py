"""Figure 3 of the Sieve paper: the activated-parameter ratio of a decode step against the batch
size, for its four models on calibrated synthetic routing (and routing traces recorded on a preset)."""
from __future__ import annotations

import pathlib

from .common import find_record, pct, routing_records
from .plotting import save
from .registry import Claim, FigureData, FigureOptions, register_figure


def plot_fig3(data: FigureData, path: pathlib.Path) -> None:
    """fig3.png: the activated-parameter ratio [%] against B (log2), a line per series (traces dashed)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for series in dict.fromkeys(r["series"] for r in data.records):
        rows = [r for r in data.records if r["series"] == series]
        style = "--" if "(trace)" in series else "-"
        ax.plot([r["batch"] for r in rows], [100 * r["act_param_ratio"] for r in rows], style, marker="o",
                ms=3, label=series)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("batch size B (decode requests)")
    ax.set_ylabel("activated parameter ratio [%]")
    ax.set_ylim(0, 105)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("Activated-parameter ratio vs batch size")
    save(fig, path)


@register_figure("fig3", "Activated-parameter ratio vs batch size (Sieve paper Figure 3)", plot=plot_fig3,
                 takes_traces=True)
def fig3(opts: FigureOptions) -> FigureData:
    """Activated parameters / total parameters per decode step, mean over steps, for the paper's
    four models on calibrated synthetic routing (and traces recorded on a preset model)."""
    rows, _ = routing_records(opts)
    keys = ("series", "model", "routing", "batch", "steps", "seed", "act_param_ratio",
            "act_param_ratio_median", "activated_expert_ratio", "activated_expert_ratio_median")
    records = [{k: r[k] for k in keys} for r in rows if r["model"] is not None]
    top = 256

    def val(series: str, batch: int, key: str = "act_param_ratio") -> float | None:
        r = find_record(records, series, batch)
        return None if r is None else r[key]

    claims = [
        Claim("GPT-OSS act-ratio at B=1", "2.4 %", f"{pct(val('gpt-oss-120b', 1))} "
              f"(routed experts active: {pct(val('gpt-oss-120b', 1, 'activated_expert_ratio'))})"),
        Claim("Mixtral-8x22B act-ratio at B=1", "25.0 %", f"{pct(val('mixtral-8x22b', 1))} "
              f"(routed experts active: {pct(val('mixtral-8x22b', 1, 'activated_expert_ratio'))})"),
        Claim("Mixtral median act-ratio at B=16", "100 %",
              f"{pct(val('mixtral-8x22b', 16, 'act_param_ratio_median'))} over steps; median over "
              f"(layer, step) of experts active: {pct(val('mixtral-8x22b', 16, 'activated_expert_ratio_median'))}"),
        Claim(f"GPT-OSS act-ratio at B={top}", "47.9 %", pct(val("gpt-oss-120b", top))),
        Claim(f"Qwen3-Next act-ratio at B={top}", "similar to GPT-OSS", pct(val("qwen3-next-80b-a3b", top))),
        Claim(f"Qwen3 act-ratio at B={top}", "above Qwen3-Next and GPT-OSS", pct(val("qwen3-30b-a3b", top))),
    ]
    notes = ["act-ratio = (total - routed + routed experts activated) / total parameters, the paper's "
             "written definition; at B=1 it is above the paper's GPT-OSS 2.4 % (docs/workloads.md)",
             "routing: synthetic, calibrated to the paper's Figure 3/5 numbers; Qwen3-30B-A3B with "
             "top-k 8 from its config.json (the paper says 4)"]
    return FigureData(records, claims, notes)
