"""Figure 3 of the Sieve paper: the activated-parameter ratio of a decode step against the batch
size, for its four models on calibrated synthetic routing (and routing traces recorded on a preset)."""
from __future__ import annotations

import pathlib

from .common import find_record, pct, routing_records
from .plotting import save
from .registry import NOT_THE_PAPER, FigureData, FigureOptions, judge, register_figure, within


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

    from ..models import get_model

    gpt = get_model("gpt-oss-120b")
    floor = 1.0 - gpt.routed_expert_params / gpt.total_params   # weights every token reads
    g1, m1 = val("gpt-oss-120b", 1), val("mixtral-8x22b", 1)
    g_top, n_top, q_top = val("gpt-oss-120b", top), val("qwen3-next-80b-a3b", top), val("qwen3-30b-a3b", top)
    m16 = val("mixtral-8x22b", 16, "act_param_ratio_median")
    claims = [
        judge("GPT-OSS act-ratio at B=1", "2.4 %", f"{pct(g1)} "
              f"(routed experts active: {pct(val('gpt-oss-120b', 1, 'activated_expert_ratio'))})",
              within(g1, 0.024, rel=0.15), cause=NOT_THE_PAPER,
              why=f"the paper defines the ratio as activated over total parameters; the weights every token "
                  f"reads (attention, router, embeddings) are already {floor:.1%} of GPT-OSS-120B, so 2.4 % "
                  f"contradicts its own definition (it is close to the routed experts' share alone)"),
        judge("Mixtral-8x22B act-ratio at B=1", "25.0 %", f"{pct(m1)} "
              f"(routed experts active: {pct(val('mixtral-8x22b', 1, 'activated_expert_ratio'))})",
              within(m1, 0.25, rel=0.15)),
        judge("Mixtral median act-ratio at B=16", "100 %",
              f"{pct(m16)} over steps; median over (layer, step) of experts active: "
              f"{pct(val('mixtral-8x22b', 16, 'activated_expert_ratio_median'))}",
              None if m16 is None else m16 >= 0.95),
        judge(f"GPT-OSS act-ratio at B={top}", "47.9 %", pct(g_top), within(g_top, 0.479, rel=0.1)),
        judge(f"Qwen3-Next act-ratio at B={top}", "similar to GPT-OSS", pct(n_top),
              None if n_top is None or g_top is None else abs(n_top - g_top) <= 0.1,
              why="our synthetic routing is calibrated to the paper's Figure 5 token-count shares, which for "
                  "Qwen3-Next's 512 experts (top-10) activate far more of them at B=256; a recorded "
                  "Qwen3-Next trace would decide"),
        judge(f"Qwen3 act-ratio at B={top}", "above Qwen3-Next and GPT-OSS", pct(q_top),
              None if None in (q_top, n_top, g_top) else q_top > max(n_top, g_top)),
    ]
    notes = ["act-ratio = (total - routed + routed experts activated) / total parameters, the paper's "
             "written definition; at B=1 it is above the paper's GPT-OSS 2.4 % (docs/workloads.md)",
             "routing: synthetic, calibrated to the paper's Figure 3/5 numbers; Qwen3-30B-A3B with "
             "top-k 8 from its config.json (the paper says 4)"]
    return FigureData(records, claims, notes)
