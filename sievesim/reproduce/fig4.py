"""Figure 4 of the Sieve paper: the rooflines of the B200 and of its HBM-PIM, with attention, QKV
generation and routed experts placed by arithmetic intensity (rooflines only, no engine)."""
from __future__ import annotations

import pathlib

from .plotting import save
from .registry import FigureData, FigureOptions, judge, register_figure

#: The model whose operations Figure 4 places, and the hardware presets whose PIM it draws.
FIG4_MODEL = "qwen3-30b-a3b"
FIG4_HARDWARE = ("b200", "b200-pim4x")


def _roof(flops: float, bytes_moved: float, peak: float, bw: float) -> tuple[float, float]:
    """(time [s], attained FLOP/s) of one operation under a roofline."""
    t = max(flops / peak, bytes_moved / bw)
    return t, flops / t


def plot_fig4(data: FigureData, path: pathlib.Path) -> None:
    """fig4.png: the GPU and PIM rooflines, each operation at its GPU (filled) and PIM (hollow) attainment."""
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    x = np.logspace(-1, 3.5, 200)
    first = data.records[0]
    ax.plot(x, np.minimum(first["gpu_peak_flop_per_s"], x * first["gpu_bandwidth_bytes_per_s"]) / 1e12,
            "k-", label="GPU (B200)")
    styles = {"b200": "b-", "b200-pim4x": "b:"}
    for hw_name in dict.fromkeys(r["hardware"] for r in data.records):
        r0 = next(r for r in data.records if r["hardware"] == hw_name)
        ax.plot(x, np.minimum(r0["pim_peak_flop_per_s"], x * r0["pim_bandwidth_bytes_per_s"]) / 1e12,
                styles.get(hw_name, "b--"), label=f"PIM ({hw_name})")
    rows = [r for r in data.records if r["hardware"] == "b200"]
    marks = {"expert": ("o", "tab:green"), "attention": ("s", "tab:pink"), "qkv_generation": ("^", "tab:red")}
    for op, (m, c) in marks.items():
        sel = [r for r in rows if r["op"] == op]
        ax.scatter([r["arithmetic_intensity_flop_per_byte"] for r in sel],
                   [r["gpu_attained_flop_per_s"] / 1e12 for r in sel], marker=m, color=c, zorder=3,
                   label=op.replace("_", " ") + " (filled: GPU, hollow: PIM b200)")
        ax.scatter([r["arithmetic_intensity_flop_per_byte"] for r in sel],
                   [r["pim_attained_flop_per_s"] / 1e12 for r in sel], marker=m, facecolors="none",
                   edgecolors=c, zorder=3)
        for r in sel:
            if op == "expert":
                ax.annotate(f"N={r['tokens']}", (r["arithmetic_intensity_flop_per_byte"],
                            r["gpu_attained_flop_per_s"] / 1e12), fontsize=6, xytext=(3, -8),
                            textcoords="offset points")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity [FLOP/byte]")
    ax.set_ylabel("attainable [TFLOP/s]")
    ax.grid(True, which="both", alpha=0.2)
    ax.legend(fontsize=7, loc="lower right")
    ax.set_title(f"Rooflines, {first['model']} operations", fontsize=10)
    save(fig, path)


@register_figure("fig4", "Rooflines of the B200 and of its HBM-PIM, operations placed by token count "
                 "(Sieve paper Figure 4)", plot=plot_fig4)
def fig4(opts: FigureOptions) -> FigureData:
    """Attention, QKV generation and routed experts with N tokens of Qwen3-30B-A3B on the B200
    roofline (2250 TFLOP/s, 8 TB/s) and on the roofline of its PIM (all 8 stacks; the 16x and the
    Samsung-like 4x presets). Each operation is placed where its roofline time is lower."""
    from ..costs import attention_shape, default_layer
    from ..hardware import get_hardware
    from ..models import get_model

    model = get_model(FIG4_MODEL)
    layer = default_layer(model)
    dtype = float(model.dtype_bytes)
    h, inter = float(model.hidden_size), float(model.moe_intermediate_size)
    context = 4096
    def expert_work(n: int) -> tuple[float, float]:
        """(FLOPs, bytes) of one routed expert with n tokens: weights once, activations per token."""
        return 2.0 * model.params_per_expert * n, float(model.bytes_per_expert) + n * dtype * (2 * h + 2 * inter)

    ops: list[tuple[str, int, float, float]] = []  # (op, tokens, flops, bytes)
    for n in ([1, 2, 4, 8, 16, 32, 64, 128, 256] if not opts.quick else [1, 4, 16, 64, 256]):
        ops.append(("expert", n, *expert_work(n)))
    attn = attention_shape(model, layer)
    ops.append(("attention", 1, attn.total_flops([context]), float(model.kv_bytes_per_token(layer)) * context))
    qkv = float(model.attention_params_per_layer(layer))
    for b in (16, 256):
        ops.append(("qkv_generation", b, 2.0 * qkv * b, qkv * dtype + b * dtype * 2 * h))
    records = []
    crossover: dict[str, int] = {}
    for hw_name in FIG4_HARDWARE:
        hw = get_hardware(hw_name)
        gpu_peak, gpu_bw = float(hw.gpu.peak_flops_bf16), float(hw.gpu.hbm_bandwidth_bytes_per_s)
        pim_peak, pim_bw = float(hw.pim_peak_flops), float(hw.pim_internal_bandwidth_bytes_per_s)
        for op, tokens, flops, nbytes in ops:
            t_gpu, f_gpu = _roof(flops, nbytes, gpu_peak, gpu_bw)
            t_pim, f_pim = _roof(flops, nbytes, pim_peak, pim_bw)
            records.append({
                "hardware": hw_name, "model": model.name, "layer": layer, "op": op, "tokens": tokens,
                "context_tokens": context if op == "attention" else None,
                "flops": flops, "bytes": nbytes, "arithmetic_intensity_flop_per_byte": flops / nbytes,
                "gpu_peak_flop_per_s": gpu_peak, "gpu_bandwidth_bytes_per_s": gpu_bw,
                "pim_peak_flop_per_s": pim_peak, "pim_bandwidth_bytes_per_s": pim_bw,
                "gpu_time_s": t_gpu, "pim_time_s": t_pim, "gpu_attained_flop_per_s": f_gpu,
                "pim_attained_flop_per_s": f_pim, "placed_on": "pim" if t_pim < t_gpu else "gpu",
            })
        crossover[hw_name] = next((n for n in range(1, 4097)
                                   if _roof(*expert_work(n), gpu_peak, gpu_bw)[0]
                                   <= _roof(*expert_work(n), pim_peak, pim_bw)[0]), None)

    def placed(hw_name: str, op: str) -> str:
        return ", ".join(sorted({r["placed_on"] for r in records if r["hardware"] == hw_name and r["op"] == op}))

    ai_attn = next(r["arithmetic_intensity_flop_per_byte"] for r in records if r["op"] == "attention")
    claims = [
        judge("attention is memory-bound; offload to PIM", "yes",
              f"{ai_attn:.1f} FLOP/B, placed on {placed('b200', 'attention')} (ridge: GPU "
              f"{records[0]['gpu_peak_flop_per_s'] / records[0]['gpu_bandwidth_bytes_per_s']:.0f} FLOP/B)",
              placed("b200", "attention") == "pim"),
        judge("experts with few tokens: low intensity, best on PIM", "yes",
              f"N <= {crossover['b200'] - 1} on PIM (b200), N <= {crossover['b200-pim4x'] - 1} (b200-pim4x)",
              all(c is not None and c > 1 for c in crossover.values())),
        judge("experts with many tokens: compute-bound, best on GPU", "yes",
              f"N >= {crossover['b200']} on GPU (b200), N >= {crossover['b200-pim4x']} (b200-pim4x)",
              all(c is not None for c in crossover.values())),
    ]
    notes = ["the paper draws Samsung HBM-PIM; b200-pim4x is our Samsung-like preset (4x internal "
             "bandwidth), b200 the 16x bank-PU preset used everywhere else",
             "expert crossover N searched over every N = 1..4096; rooflines only: the engine's PIM expert times are 1.5-2x above this roof (docs/pim.md)"]
    return FigureData(records, claims, notes)
