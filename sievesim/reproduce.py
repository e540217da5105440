"""``sievesim reproduce``: the Sieve paper's figures, each as CSV + PNG next to the paper's claims.

A figure is one function registered with :func:`register_figure`::

    @register_figure("fig3", "Activated-parameter ratio vs batch size", plot=_plot_fig3)
    def fig3(opts: FigureOptions) -> FigureData:
        records = [...]                      # flat dicts, units in the keys
        claims = [Claim("GPT-OSS act-ratio at B=1", "2.4 %", f"{x:.1%}")]
        return FigureData(records, claims)

``compute(opts)`` returns the records (written to ``NAME.csv``) and the paper's claims beside our
numbers (printed as a table); ``plot(data, path)`` draws ``NAME.png`` with matplotlib, which is an
optional extra: without it the CSV is still written and the report says how to get plots.
``opts.quick`` asks for the reduced version (fewer batch sizes and steps; under a minute on two
cores). ``reproduce("all", ...)`` runs every registered figure in registration order. A figure
that needs the executed step gets its rows from :func:`step_records` (a resumable sweep kept in
``OUT/NAME-points/``, run on ``opts.jobs`` processes).
"""
from __future__ import annotations

import functools
import json
import os
import pathlib
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from .errors import field_error

__all__ = ["Claim", "FigureData", "FigureOptions", "Figure", "FigureReport", "FIGURES",
           "register_figure", "figure_names", "reproduce", "step_records", "PAPER_MODELS"]

#: The four models of the paper's Figures 3 and 5, in its legend order.
PAPER_MODELS = ("mixtral-8x22b", "qwen3-30b-a3b", "qwen3-next-80b-a3b", "gpt-oss-120b")


@dataclass(frozen=True)
class Claim:
    """One statement of the paper and our number for it (``ours`` already formatted)."""

    what: str
    paper: str
    ours: str


@dataclass
class FigureData:
    """What a figure function returns: records (one CSV row each), claims, and notes that explain
    differences (printed under the claims)."""

    records: list[dict[str, Any]]
    claims: list[Claim] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class FigureOptions:
    """Options every figure function receives.

    quick: the reduced version (fewer batch sizes and steps).
    traces: routing trace files to add beside the synthetic routing where a figure can use them.
    seed: seed of every random draw.
    out_dir: where the figure's files go (:func:`step_records` keeps its points there too).
    jobs: worker processes for :func:`step_records` (1: in this process).
    """

    quick: bool = False
    traces: tuple[str, ...] = ()
    seed: int = 0
    out_dir: str = "figures"
    jobs: int = 1


@dataclass(frozen=True)
class Figure:
    """A registered figure: its name, title, compute function and optional plot function."""

    name: str
    title: str
    compute: Callable[[FigureOptions], FigureData]
    plot: Callable[[FigureData, pathlib.Path], None] | None = None


@dataclass
class FigureReport:
    """A reproduced figure: its data and the files written (``png`` is None without matplotlib)."""

    name: str
    title: str
    data: FigureData
    csv: pathlib.Path
    png: pathlib.Path | None
    message: str = ""


#: Registered figures, in the order ``all`` runs them.
FIGURES: dict[str, Figure] = {}


def register_figure(name: str, title: str, *, plot: Callable[[FigureData, pathlib.Path], None] | None = None
                    ) -> Callable[[Callable[[FigureOptions], FigureData]], Callable[[FigureOptions], FigureData]]:
    """Decorator: register ``compute(opts) -> FigureData`` as figure ``name`` (see module doc)."""
    def wrap(compute: Callable[[FigureOptions], FigureData]) -> Callable[[FigureOptions], FigureData]:
        if name in FIGURES or name == "all":
            raise ValueError(f"figure {name!r} is already registered")
        FIGURES[name] = Figure(name, title, compute, plot)
        return compute
    return wrap


def figure_names() -> list[str]:
    """Registered figure names and ``all``."""
    return list(FIGURES) + ["all"]


def _have_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def step_records(name: str, points: Sequence[dict[str, Any]], opts: FigureOptions, *,
                 point_fn: Callable[[dict[str, Any]], Any] | None = None) -> list[dict[str, Any]]:
    """Rows of the executed step (:func:`sievesim.sweep.step_point`, or ``point_fn``) at every
    point, in point order, for a figure that needs the step (Figures 6 and 9-11).

    The points run as a sweep in ``OUT/NAME-points/`` (``opts.jobs`` worker processes), so an
    interrupted ``reproduce`` resumes where it stopped and a rerun of a finished figure only
    redraws it. ``points`` are settings dicts as :func:`sievesim.sweep.expand_grid` gives them
    (``expand_grid`` fills the defaults)."""
    from concurrent.futures import ProcessPoolExecutor

    from .sweep import expand_grid, point_id, read_results, run_grid, step_point

    fn = point_fn or step_point
    pts = expand_grid([{k: [v] for k, v in p.items()} for p in points])
    out = pathlib.Path(opts.out_dir) / f"{name}-points"
    if opts.jobs > 1 and len(pts) > 1:
        with ProcessPoolExecutor(max_workers=min(opts.jobs, len(pts))) as pool:
            run_grid(pts, out, point_fn=fn, executor=pool, force=_grid_changed(out, pts, fn), progress=None)
    else:
        run_grid(pts, out, point_fn=fn, force=_grid_changed(out, pts, fn), progress=None)
    by_id = {r["point_id"]: r for r in read_results(out)}
    return [by_id[point_id(p)] for p in pts]


def _grid_changed(out: pathlib.Path, points: Sequence[dict[str, Any]], fn: Callable[..., Any]) -> bool:
    """Whether ``out`` holds the points of another grid (a figure's points changed with --quick or
    --seed): then its directory is started over."""
    from .sweep import MANIFEST, grid_manifest

    path = out / MANIFEST
    if not path.exists():
        return out.exists() and any(out.iterdir())
    try:
        return json.loads(path.read_text()) != grid_manifest(points, fn)
    except json.JSONDecodeError:
        return True


def reproduce(name: str, out_dir: str | os.PathLike[str] = "figures", *, quick: bool = False,
              traces: Sequence[str] = (), seed: int = 0, plot: bool = True, jobs: int = 1) -> list[FigureReport]:
    """Compute figure ``name`` (or ``all``), write ``NAME.csv`` and ``NAME.png`` into ``out_dir``
    and return the reports. An unknown name is a :class:`~sievesim.errors.SievesimError`."""
    if name not in FIGURES and name != "all":
        import difflib
        close = difflib.get_close_matches(name, figure_names(), n=1)
        raise field_error("figure", name, "one of " + ", ".join(figure_names())
                          + (f" (did you mean {close[0]!r}?)" if close else ""))
    for t in traces:
        if not os.path.exists(t):
            raise field_error("--trace", t, "an existing routing trace file")
    names = list(FIGURES) if name == "all" else [name]
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if jobs < 1:
        raise field_error("--jobs", jobs, "a positive number of worker processes")
    opts = FigureOptions(quick=quick, traces=tuple(traces), seed=seed, out_dir=str(out), jobs=jobs)
    reports = []
    for n in names:
        fig = FIGURES[n]
        data = fig.compute(opts)
        for r in data.records:
            r.setdefault("figure", n)
        csv_path = out / f"{n}.csv"
        tmp = csv_path.with_name(csv_path.name + ".tmp")
        from .sweep import csv_bytes
        tmp.write_bytes(csv_bytes(data.records))
        os.replace(tmp, csv_path)
        png, message = None, ""
        if plot and fig.plot is not None:
            if _have_matplotlib():
                import matplotlib
                matplotlib.use("Agg")
                png = out / f"{n}.png"
                fig.plot(data, png)
            else:
                message = "no PNG: matplotlib is not installed (pip install 'sievesim[plot]')"
        reports.append(FigureReport(n, fig.title, data, csv_path, png, message))
    return reports


def format_report(report: FigureReport) -> str:
    """The claims table of a report, with the files written and the notes."""
    lines = [f"{report.name}: {report.title}"]
    claims = report.data.claims
    if claims:
        w1 = max(len("claim"), *(len(c.what) for c in claims))
        w2 = max(len("paper"), *(len(c.paper) for c in claims))
        lines.append(f"  {'claim':<{w1}}  {'paper':<{w2}}  ours")
        for c in claims:
            lines.append(f"  {c.what:<{w1}}  {c.paper:<{w2}}  {c.ours}")
    for note in report.data.notes:
        lines.append(f"  note: {note}")
    files = [str(report.csv)] + ([str(report.png)] if report.png else [])
    lines.append("  wrote " + ", ".join(files) + (f"; {report.message}" if report.message else ""))
    return "\n".join(lines)


# ================================================================================================
# Figures 3 and 5: routing statistics
# ================================================================================================
def _routing_batches(quick: bool) -> tuple[list[int], int]:
    """(batch sizes, steps per batch size) of Figures 3 and 5."""
    if quick:
        return [1, 4, 16, 64, 256], 16
    return [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024], 64


@functools.lru_cache(maxsize=32)
def _stats(spec: str, model_name: str | None, batches: tuple[int, ...], steps: int, seed: int) -> tuple[Any, ...]:
    """``routing_stats`` of a routing spec (synthetic:MODEL or a trace file), cached so that
    Figures 3 and 5 share one computation."""
    from .models import get_model
    from .workload.batches import TraceSource, open_source
    from .workload.stats import routing_stats

    src = open_source(spec, seed=seed) if spec.startswith("synthetic:") else open_source(spec)
    opts = {"allow_reuse": True} if isinstance(src, TraceSource) else {}
    model = get_model(model_name) if model_name else None
    return tuple(routing_stats(src, list(batches), batches=steps, seed=seed, model=model, **opts))


def _trace_model(path: str) -> str | None:
    """The model preset a trace was recorded on, from its ``meta.model`` (None if no preset)."""
    from .models import list_models
    from .workload.traces import load_routing

    meta = getattr(load_routing(path), "meta", {}) or {}
    text = str(meta.get("model", "")).lower().replace("_", "-")
    return next((m for m in sorted(list_models(), key=len, reverse=True) if m in text), None)


def _routing_series(opts: FigureOptions, need_model: bool) -> list[tuple[str, str, str | None]]:
    """(label, routing spec, model preset) of every series: the paper's four models on calibrated
    synthetic routing, then each trace (with its model preset, if it has one)."""
    series: list[tuple[str, str, str | None]] = [(m, f"synthetic:{m}", m) for m in PAPER_MODELS]
    for t in opts.traces:
        model = _trace_model(t)
        if model is None and need_model:
            continue
        series.append((f"{pathlib.Path(t).stem} (trace)", t, model))
    return series


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f} %"


@functools.lru_cache(maxsize=4)
def _routing_records(opts: FigureOptions) -> tuple[tuple[dict[str, Any], ...], tuple[str, ...]]:
    batches, steps = _routing_batches(opts.quick)
    records = []
    skipped = []
    for label, spec, model in _routing_series(opts, need_model=False):
        stats = _stats(spec, model, tuple(batches), steps, opts.seed)
        for s in stats:
            records.append({
                "series": label, "model": model, "routing": spec, "batch": s.batch_size, "steps": steps,
                "seed": opts.seed,
                "act_param_ratio": s.act_param_ratio, "act_param_ratio_median": s.act_param_ratio_median,
                "activated_expert_ratio": s.activated_ratio,
                "activated_expert_ratio_median": s.activated_ratio_median,
                "frac_n1": s.frac_1, "frac_n2": s.frac_2, "frac_n3_4": s.frac_3_4, "frac_gt4": s.frac_gt4,
                "frac_memory_bound": s.frac_memory_bound, "tokens_per_active_expert": s.tokens_per_active,
            })
        if model is None:
            skipped.append(label)
    return tuple(records), tuple(skipped)


def _find(records: Sequence[dict[str, Any]], series: str, batch: int) -> dict[str, Any] | None:
    return next((r for r in records if r["series"] == series and r["batch"] == batch), None)


@register_figure("fig3", "Activated-parameter ratio vs batch size (Sieve paper Figure 3)",
                 plot=lambda data, path: _plot_fig3(data, path))
def fig3(opts: FigureOptions) -> FigureData:
    """Activated parameters / total parameters per decode step, mean over steps, for the paper's
    four models on calibrated synthetic routing (and traces recorded on a preset model)."""
    rows, _ = _routing_records(opts)
    keys = ("series", "model", "routing", "batch", "steps", "seed", "act_param_ratio",
            "act_param_ratio_median", "activated_expert_ratio", "activated_expert_ratio_median")
    records = [{k: r[k] for k in keys} for r in rows if r["model"] is not None]
    top = 256

    def val(series: str, batch: int, key: str = "act_param_ratio") -> float | None:
        r = _find(records, series, batch)
        return None if r is None else r[key]

    claims = [
        Claim("GPT-OSS act-ratio at B=1", "2.4 %", f"{_pct(val('gpt-oss-120b', 1))} "
              f"(routed experts active: {_pct(val('gpt-oss-120b', 1, 'activated_expert_ratio'))})"),
        Claim("Mixtral-8x22B act-ratio at B=1", "25.0 %", f"{_pct(val('mixtral-8x22b', 1))} "
              f"(routed experts active: {_pct(val('mixtral-8x22b', 1, 'activated_expert_ratio'))})"),
        Claim("Mixtral median act-ratio at B=16", "100 %",
              f"{_pct(val('mixtral-8x22b', 16, 'act_param_ratio_median'))} over steps; median over "
              f"(layer, step) of experts active: {_pct(val('mixtral-8x22b', 16, 'activated_expert_ratio_median'))}"),
        Claim(f"GPT-OSS act-ratio at B={top}", "47.9 %", _pct(val("gpt-oss-120b", top))),
        Claim(f"Qwen3-Next act-ratio at B={top}", "similar to GPT-OSS", _pct(val("qwen3-next-80b-a3b", top))),
        Claim(f"Qwen3 act-ratio at B={top}", "above Qwen3-Next and GPT-OSS", _pct(val("qwen3-30b-a3b", top))),
    ]
    notes = ["act-ratio = (total - routed + routed experts activated) / total parameters, the paper's "
             "written definition; at B=1 it is above the paper's GPT-OSS 2.4 % (docs/workloads.md)",
             "routing: synthetic, calibrated to the paper's Figure 3/5 numbers; Qwen3-30B-A3B with "
             "top-k 8 from its config.json (the paper says 4)"]
    return FigureData(records, claims, notes)


def _plot_fig3(data: FigureData, path: pathlib.Path) -> None:
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
    fig.tight_layout()
    fig.savefig(path, dpi=120, metadata={"Software": None})
    plt.close(fig)


# ================================================================================================
# Figure 4: rooflines of the GPU and of its PIM, with operations placed by arithmetic intensity
# ================================================================================================
FIG4_MODEL = "qwen3-30b-a3b"
FIG4_HARDWARE = ("b200", "b200-pim4x")


def _roof(flops: float, bytes_moved: float, peak: float, bw: float) -> tuple[float, float]:
    """(time [s], attained FLOP/s) of one operation under a roofline."""
    t = max(flops / peak, bytes_moved / bw)
    return t, flops / t


@register_figure("fig4", "Rooflines of the B200 and of its HBM-PIM, operations placed by token count "
                 "(Sieve paper Figure 4)", plot=lambda data, path: _plot_fig4(data, path))
def fig4(opts: FigureOptions) -> FigureData:
    """Attention, QKV generation and routed experts with N tokens of Qwen3-30B-A3B on the B200
    roofline (2250 TFLOP/s, 8 TB/s) and on the roofline of its PIM (all 8 stacks; the 16x and the
    Samsung-like 4x presets). Each operation is placed where its roofline time is lower."""
    from .costs import attention_shape, default_layer
    from .hardware import get_hardware
    from .models import get_model

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
        Claim("attention is memory-bound; offload to PIM", "yes",
              f"{ai_attn:.1f} FLOP/B, placed on {placed('b200', 'attention')} (ridge: GPU "
              f"{records[0]['gpu_peak_flop_per_s'] / records[0]['gpu_bandwidth_bytes_per_s']:.0f} FLOP/B)"),
        Claim("experts with few tokens: low intensity, best on PIM", "yes",
              f"N <= {crossover['b200'] - 1} on PIM (b200), N <= {crossover['b200-pim4x'] - 1} (b200-pim4x)"),
        Claim("experts with many tokens: compute-bound, best on GPU", "yes",
              f"N >= {crossover['b200']} on GPU (b200), N >= {crossover['b200-pim4x']} (b200-pim4x)"),
    ]
    notes = ["the paper draws Samsung HBM-PIM; b200-pim4x is our Samsung-like preset (4x internal "
             "bandwidth), b200 the 16x bank-PU preset used everywhere else",
             "expert crossover N searched over every N = 1..4096; rooflines only: the engine's PIM expert times are 1.5-2x above this roof (docs/pim.md)"]
    return FigureData(records, claims, notes)


def _plot_fig4(data: FigureData, path: pathlib.Path) -> None:
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
    fig.tight_layout()
    fig.savefig(path, dpi=120, metadata={"Software": None})
    plt.close(fig)


@register_figure("fig5", "Expert computations by tokens per expert N (Sieve paper Figure 5)",
                 plot=lambda data, path: _plot_fig5(data, path))
def fig5(opts: FigureOptions) -> FigureData:
    """Share of activated (layer, step, expert) triples with N = 1, 2, 3-4, >4 tokens."""
    rows, _ = _routing_records(opts)
    keys = ("series", "model", "routing", "batch", "steps", "seed", "frac_n1", "frac_n2", "frac_n3_4",
            "frac_gt4", "frac_memory_bound", "tokens_per_active_expert")
    records = [{k: r[k] for k in keys} for r in rows]

    def val(series: str, batch: int, key: str) -> float | None:
        r = _find(records, series, batch)
        return None if r is None else r[key]

    claims = [
        Claim("Qwen3-Next N=1 at B=4", "92.5 %", _pct(val("qwen3-next-80b-a3b", 4, "frac_n1"))),
        Claim("Mixtral memory-bound (N<=4) at B=64", "almost none", _pct(val("mixtral-8x22b", 64, "frac_memory_bound"))),
        Claim("Qwen3 memory-bound at B=64", "47.6 %", _pct(val("qwen3-30b-a3b", 64, "frac_memory_bound"))),
        Claim("Qwen3-Next memory-bound at B=64", "89.3 %", _pct(val("qwen3-next-80b-a3b", 64, "frac_memory_bound"))),
        Claim("GPT-OSS memory-bound at B=64", "65.9 %", _pct(val("gpt-oss-120b", 64, "frac_memory_bound"))),
        Claim("Qwen3-Next memory-bound at B=256", "50.1 %", _pct(val("qwen3-next-80b-a3b", 256, "frac_memory_bound"))),
        Claim("GPT-OSS memory-bound at B=256", "56.6 %", _pct(val("gpt-oss-120b", 256, "frac_memory_bound"))),
        Claim("N=1 at B=64: Qwen3 / GPT-OSS / Qwen3-Next", "20.2 / 32.6 / 44.2 %",
              " / ".join(_pct(val(m, 64, "frac_n1")) for m in ("qwen3-30b-a3b", "gpt-oss-120b", "qwen3-next-80b-a3b"))),
        Claim("N=1 at B=256: Qwen3 / GPT-OSS / Qwen3-Next", "11.9 / 23.5 / 23.9 %",
              " / ".join(_pct(val(m, 256, "frac_n1")) for m in ("qwen3-30b-a3b", "gpt-oss-120b", "qwen3-next-80b-a3b"))),
    ]
    notes = ["routing: synthetic, calibrated to these very numbers (docs/workloads.md); agreement here "
             "checks the calibration, not an independent prediction"]
    if opts.traces:
        notes.append("traces: batches of distinct requests, requests reused when a trace has fewer than B")
    return FigureData(records, claims, notes)


def _plot_fig5(data: FigureData, path: pathlib.Path) -> None:
    import matplotlib.pyplot as plt

    series = list(dict.fromkeys(r["series"] for r in data.records))
    fig, axes = plt.subplots(1, len(series), figsize=(3.2 * len(series), 3.6), sharey=True, squeeze=False)
    bins = (("frac_n1", "N=1"), ("frac_n2", "N=2"), ("frac_n3_4", "N=3-4"), ("frac_gt4", "N>4"))
    colors = ("#1b9e77", "#7fc97f", "#fdc086", "#d95f02")
    for ax, name in zip(axes[0], series):
        rows = [r for r in data.records if r["series"] == name]
        x = list(range(len(rows)))
        bottom = [0.0] * len(rows)
        for (key, label), color in zip(bins, colors):
            h = [100 * r[key] for r in rows]
            ax.bar(x, h, bottom=bottom, color=color, label=label, width=0.8)
            bottom = [b + v for b, v in zip(bottom, h)]
        ax.set_xticks(x)
        ax.set_xticklabels([str(r["batch"]) for r in rows], rotation=90, fontsize=7)
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("B")
    axes[0][0].set_ylabel("share of expert computations [%]")
    axes[0][-1].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120, metadata={"Software": None})
    plt.close(fig)


# ================================================================================================
# Figures from the executed step (sievesim.system): 6, 9, 10, 11, overhead
# ================================================================================================
#: The paper's evaluation: model -> GPUs (Section 7.1).
STEP_MODELS = {"qwen3-30b-a3b": 1, "gpt-oss-120b": 4, "qwen3.5-397b-a17b": 8}

#: Readings of the paper (docs/system.md, "Readings"): ``text`` is what its text says (attention in
#: Sieve's T_PIM, early weight loads, a 20 us decision per 256 experts); ``matching`` is the reading
#: whose executed results come closest to its Figure 9 trends (no early loads, no decision latency,
#: and Sieve weighing only the expert work of each side, the terms that overlap in Figure 8).
READINGS = {
    "text": {},
    "matching": {"early_loads": False, "scheduler_latency_us": 0.0},
}


def _series_name(policy: str, unit: str | None, reading: str) -> str:
    name = {"noexp": "NoExp", "allexp": "AllExp", "sieve": "Sieve", "gpu-only": "GPU-only",
            "naive": "Naive"}.get(policy, "PIMoE")
    if policy == "pimoe":
        name += f" ({unit})"
    return name + ("" if reading == "text" else " [matching]")


#: Top-k the paper's text gives where the model's config.json says otherwise (Section 6:
#: "GPT-OSS and Qwen3 activate four experts out of 128"; Qwen3-30B-A3B's config says 8).
TEXT_TOP_K = {"qwen3-30b-a3b": 4}


def _step_point(model: str, gpus: int, policy: str, batch: int, reading: str, *, unit: str | None = None,
                steps: int = 1, warmup: int = 2, seed: int = 0, prefill: str | None = None,
                top_k: int | None = None) -> dict[str, Any]:
    p: dict[str, Any] = {"model": model, "gpus": gpus, "policy": policy, "batch": batch, "steps": steps,
                         "warmup": warmup, "seed": seed, **READINGS[reading]}
    if top_k is not None:
        p["top_k"] = top_k
    if policy == "pimoe":
        p["pimoe_unit"] = unit or "stack"
    if policy == "sieve" and reading == "matching":
        p["policy_options"] = "experts_only=true"
    if prefill:
        p["prefill"] = prefill
    return p


def _step_batches(gpus: int, quick: bool) -> list[int]:
    wanted = (16, 256) if quick else (1, 4, 16, 32, 64, 128, 256)
    return sorted({max(gpus, b - b % gpus) for b in wanted})


def _with_series(rows: list[dict[str, Any]], meta: list[tuple[str, str]]) -> list[dict[str, Any]]:
    out = []
    for r, (series, reading) in zip(rows, meta):
        out.append({
            "series": series, "reading": reading, "panel": _panel(r), "model": r["model"], "top_k": r.get("top_k"),
            "gpus": r["gpus"], "policy": r["policy"],
            "pimoe_unit": r.get("pimoe_unit"), "batch": r["batch"], "prefill_requests": r.get("prefill_requests", 0),
            "prefill_len": r.get("prefill_len", 0), "context": r.get("context"), "routing": r.get("routing"),
            "seed": r.get("seed"), "throughput_tokens_per_s_per_gpu": r["throughput_tokens_per_s_per_gpu"],
            "interactivity_tokens_per_s_per_user": r["interactivity_tokens_per_s_per_user"],
            "step_time_s": r["step_time_s"], "estimated_step_time_s": r["estimated_step_time_s"],
            "experts_on_gpu": r["experts_on_gpu"], "experts_on_pim": r["experts_on_pim"],
            "sievesim_version": r.get("sievesim_version"),
        })
    return out


def _panel(r: Mapping[str, Any]) -> str:
    """A figure panel: the model, with its top-k when a point overrode the config's."""
    return r["model"] + (f" top-{r['top_k']}" if r.get("top_k") is not None and r["model"] in TEXT_TOP_K
                         and r["top_k"] == TEXT_TOP_K[r["model"]] else "")


def _ratio_text(a: float | None, b: float | None) -> str:
    return "-" if a is None or b is None or b == 0 else f"{a / b:.2f}x"


def _tput(records: Sequence[dict[str, Any]], panel: str, series: str, batch: int) -> float | None:
    for r in records:
        if r.get("panel", r["model"]) == panel and r["series"] == series and r["batch"] == batch:
            return r["throughput_tokens_per_s_per_gpu"]
    return None


@register_figure("fig9", "Throughput per GPU vs interactivity, executed (Sieve paper Figure 9)",
                 plot=lambda data, path: _plot_fig9(data, path))
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
                        points.append(_step_point(model, gpus, pol, b, reading, unit=unit, warmup=warmup,
                                                  seed=opts.seed, top_k=top_k))
                        meta.append((_series_name(pol, unit, reading), reading))
    records = _with_series(step_records("fig9", points, opts), meta)

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


def _plot_fig9(data: FigureData, path: pathlib.Path) -> None:
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
    fig.tight_layout()
    fig.savefig(path, dpi=120, metadata={"Software": None})
    plt.close(fig)


@register_figure("fig10", "PIM channel utilisation, PIMoE vs Sieve, executed (Sieve paper Figure 10)",
                 plot=lambda data, path: _plot_fig10(data, path))
def fig10(opts: FigureOptions) -> FigureData:
    """Busy time of each PIM channel of GPU 0 over the step time (expert work alone, and with attention)."""
    cases = [("gpt-oss-120b", 4, 64)] + ([] if opts.quick else [("qwen3.5-397b-a17b", 8, 256)])
    pols = [("pimoe", "channel"), ("pimoe", "stack"), ("sieve", None)]
    points, meta = [], []
    for model, gpus, b in cases:
        for pol, unit in pols:
            p = _step_point(model, gpus, pol, b, "text", unit=unit, warmup=1 if opts.quick else 2, seed=opts.seed)
            points.append(p)
            meta.append((model, _series_name(pol, unit, "text")))
    rows = step_records("fig10", points, opts)
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

    def spread(model: str, series: str) -> str:
        u = [x["expert_utilisation"] for x in records if x["model"] == model and x["series"] == series]
        if not u or max(u) == 0:
            return "-"
        idle = sum(1 for x in u if x < 0.1 * max(u)) / len(u)
        return f"busiest/mean {max(u) / (sum(u) / len(u)):.2f}, {idle:.0%} of channels below 10 % of the busiest"

    m0 = cases[0][0]
    claims = [Claim(f"PIMoE (channel) expert load across channels, {m0} B={cases[0][2]}",
                    "heavy on some channels, others underutilised", spread(m0, "PIMoE (channel)")),
              Claim(f"PIMoE (stack), {m0}", "(not in the paper)", spread(m0, "PIMoE (stack)")),
              Claim(f"Sieve across channels, {m0}", "uniform", spread(m0, "Sieve"))]
    notes = ["utilisation = busy time / executed step time, GPU 0; expert_utilisation counts the experts alone, "
             "utilisation adds attention (which occupies every channel alike)"]
    return FigureData(records, claims, notes)


def _plot_fig10(data: FigureData, path: pathlib.Path) -> None:
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
    fig.tight_layout()
    fig.savefig(path, dpi=120, metadata={"Software": None})
    plt.close(fig)


@register_figure("fig11", "Colocated prefill and decode on Qwen3, speedup over NoExp (Sieve paper Figure 11)",
                 plot=lambda data, path: _plot_fig11(data, path))
def fig11(opts: FigureOptions) -> FigureData:
    """Qwen3-30B-A3B on one GPU with P prefill requests of 1024 tokens in every decode batch."""
    length = 1024
    if opts.quick:
        combos = [(16, 2), (64, 8)]
    else:
        combos = [(b, p) for b in (16, 32) for p in (1, 2, 8)] + [(b, p) for b in (64, 128, 256) for p in (2, 4, 8)]
    pols = [("noexp", None, "text"), ("allexp", None, "text"), ("pimoe", "stack", "text"), ("sieve", None, "text"),
            ("noexp", None, "matching"), ("sieve", None, "matching")]
    points, meta = [], []
    for b, p in combos:
        for pol, unit, reading in pols:
            points.append(_step_point("qwen3-30b-a3b", 1, pol, b, reading, unit=unit, warmup=1, seed=opts.seed,
                                      prefill=f"{p}:{length}"))
            meta.append((_series_name(pol, unit, reading), reading))
    records = _with_series(step_records("fig11", points, opts), meta)
    for r in records:
        ref = next(x for x in records if x["batch"] == r["batch"] and x["prefill_requests"] == r["prefill_requests"]
                   and x["policy"] == "noexp" and x["reading"] == r["reading"])
        r["speedup_over_noexp"] = ref["step_time_s"] / r["step_time_s"]

    def sp(series: str, b: int, p: int) -> str:
        r = next((x for x in records if x["series"] == series and x["batch"] == b and x["prefill_requests"] == p), None)
        return "-" if r is None else f"{r['speedup_over_noexp']:.2f}x"

    claims = []
    for b, p in ([(16, 8), (32, 8)] if not opts.quick else [(16, 2)]):
        claims.append(Claim(f"Sieve over NoExp, B={b}, {p} prefills", {16: "2.4x", 32: "2.3x"}[b] if p == 8 else "-",
                            f"text {sp('Sieve', b, p)}; matching {sp('Sieve [matching]', b, p)}"))
    b_big = 64
    claims.append(Claim(f"AllExp / PIMoE over NoExp, B={b_big}, 8 prefills", "often below 1x",
                        f"{sp('AllExp', b_big, 8)} / {sp('PIMoE (stack)', b_big, 8)}"))
    notes = [f"prefill requests of {length} tokens (the paper: queries often exceed 1024 tokens); up to 2 prefills "
             "at B <= 32 and up to 8 at B >= 64 as the paper describes, plus 8 at B = 16 and 32, the case its text "
             "quotes (its text and setup disagree there)",
             "throughput counts decode tokens; prefill routing is the model's synthetic routing"]
    return FigureData(records, claims, notes)


def _plot_fig11(data: FigureData, path: pathlib.Path) -> None:
    import matplotlib.pyplot as plt

    series = [s for s in dict.fromkeys(r["series"] for r in data.records) if not s.startswith("NoExp")]
    cases = list(dict.fromkeys((r["batch"], r["prefill_requests"]) for r in data.records))
    fig, ax = plt.subplots(figsize=(max(6, 0.6 * len(cases) * len(series) / 2), 3.6))
    width = 0.8 / len(series)
    for i, s in enumerate(series):
        ys = [next(r["speedup_over_noexp"] for r in data.records if r["series"] == s and (r["batch"],
                                                                                          r["prefill_requests"]) == c)
              for c in cases]
        ax.bar([j + i * width for j in range(len(cases))], ys, width=width, label=s)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(cases))])
    ax.set_xticklabels([f"B={b}\nP={p}" for b, p in cases], fontsize=7)
    ax.set_ylabel("speedup over NoExp")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120, metadata={"Software": None})
    plt.close(fig)


_FIG6_STRATEGIES = (("a) mini-batch interleaving", "noexp", 2), ("b) attention-only PIM", "noexp", 1),
                    ("c) all experts on PIM", "allexp", 1), ("d) naive co-processing", "naive", 1),
                    ("e) Sieve", "sieve", 1))


@register_figure("fig6", "Five execution strategies as executed schedules (Sieve paper Figure 6)",
                 plot=lambda data, path: _plot_fig6(data, path))
def fig6(opts: FigureOptions) -> FigureData:
    """Gantt charts of two layers of GPU 0 (Qwen3-30B-A3B on one GPU, B = 64) for each strategy."""
    from .system import StepSimulator

    model, batch, first = "qwen3-30b-a3b", 64, 10
    records = []
    step = {}
    for label, policy, mbs in _FIG6_STRATEGIES:
        sim = StepSimulator(model, gpus=1, policy=policy, batch=batch, microbatches=mbs, seed=opts.seed)
        sim.run_step()
        raw = sim.run_step()
        s = raw["schedule"]
        g = s.graph
        step[label] = raw["step_time_s"]
        nodes = [i for i in range(len(g)) if g.meta[i].get("layer") in (first, first + 1)]
        t0 = min(s.start[i] for i in nodes)
        for i in nodes:
            for res in g.resources[i] or ("g0.decision",):
                records.append({"strategy": label, "policy": policy, "microbatches": mbs, "model": model,
                                "batch": batch, "layer": g.meta[i]["layer"], "microbatch": g.meta[i].get("microbatch", 0),
                                "node": g.names[i], "kind": g.meta[i]["kind"], "resource": res.split(".", 1)[1],
                                "start_us": (s.start[i] - t0) * 1e6, "end_us": (s.end[i] - t0) * 1e6,
                                "step_time_s": raw["step_time_s"]})
    best = min(step.values())
    claims = [Claim(f"step time {label}", "-", f"{t * 1e3:.3f} ms ({t / best:.2f}x the fastest)")
              for label, t in step.items()]
    notes = [f"{model} on one GPU, B = {batch}, layers {first}-{first + 1} of the executed step (after one warm-up "
             "step); the paper's Figure 6 is a schematic, so there is no number to compare",
             "naive co-processing: activated experts alternate GPU/PIM by id (policy 'naive')"]
    return FigureData(records, claims, notes)


def _plot_fig6(data: FigureData, path: pathlib.Path) -> None:
    import matplotlib.pyplot as plt

    strategies = list(dict.fromkeys(r["strategy"] for r in data.records))
    tracks = ("gpu", "hbm", "pim", "decision")
    colors = {"attention": "#1f78b4", "pim_experts": "#33a02c", "gemm": "#e31a1c", "weight_load": "#fb9a99",
              "early_load": "#fdbf6f", "pre_attention": "#a6cee3", "post_attention": "#a6cee3",
              "aggregate": "#cab2d6", "metadata": "#999999", "decision": "#6a3d9a", "dense_mlp": "#b15928"}
    fig, axes = plt.subplots(len(strategies), 1, figsize=(9, 1.5 * len(strategies)), sharex=True, squeeze=False)
    for ax, strat in zip(axes[:, 0], strategies):
        for r in (x for x in data.records if x["strategy"] == strat):
            if r["resource"] not in tracks:
                continue
            y = tracks.index(r["resource"])
            ax.barh(y, r["end_us"] - r["start_us"], left=r["start_us"], height=0.7,
                    color=colors.get(r["kind"], "#dddddd"), edgecolor="white" if r["microbatch"] else "none")
        ax.set_yticks(range(len(tracks)))
        ax.set_yticklabels(tracks, fontsize=7)
        ax.set_title(strat, fontsize=8, loc="left")
    axes[-1][0].set_xlabel("time [us] (two layers of GPU 0)")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in colors.values()]
    fig.legend(handles, list(colors), fontsize=6, ncol=6, loc="lower center")
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(path, dpi=120, metadata={"Software": None})
    plt.close(fig)


@register_figure("overhead", "Decision latency: modelled (in the step) and the simulator's wall clock")
def overhead(opts: FigureOptions) -> FigureData:
    """Modelled decision latency per layer and GPU beside the wall-clock time of our Sieve decision."""
    from .hardware import get_hardware
    from .models import get_model
    from .policies import get_policy
    from .policies.bench import bench_context, decision_latency_us, model_routing

    hw = get_hardware("b200")
    records = []
    cases = list(STEP_MODELS.items()) + [("deepseek-v3", 1)]
    for name, gpus in cases:
        model = get_model(name)
        local = model.num_experts // gpus
        for b in ((64,) if opts.quick else (1, 16, 64, 256)):
            b = max(gpus, b - b % gpus)
            counts, _, _ = model_routing(model, b, opts.seed)
            counts = counts[:local]
            ctx = bench_context(model, hw, b, counts, num_gpus=gpus)
            wall = decision_latency_us(get_policy("sieve"), counts, ctx, repeat=3 if opts.quick else 5,
                                       inner=50 if opts.quick else 200)
            records.append({"model": name, "gpus": gpus, "experts_per_gpu": local, "batch": b,
                            "modelled_us": hw.gpu.scheduler_time_s(local) * 1e6, "wall_decision_us": wall})
    ds = [r for r in records if r["model"] == "deepseek-v3"]
    claims = [Claim("Sieve decision, DeepSeek-R1 layer (256 experts), B200", "~20 us",
                    f"modelled {ds[0]['modelled_us']:.1f} us (the hardware field, from the paper); this simulator's "
                    f"kernel on one CPU core {min(r['wall_decision_us'] for r in ds):.1f}-"
                    f"{max(r['wall_decision_us'] for r in ds):.1f} us")]
    notes = ["DeepSeek-V3 stands in for DeepSeek-R1 (the same MoE layer: 256 routed experts, top-8)",
             "the modelled latency is what the executed step charges per layer and GPU for Sieve and PIMoE; "
             "wall_decision_us is the simulator's own time and varies between runs"]
    return FigureData(records, claims, notes)


@register_figure("overestimate", "Roofline vs engine PIM expert time, for each peak definition (Sieve paper Sec. 5)",
                 plot=lambda data, path: _plot_overestimate(data, path))
def overestimate(opts: FigureOptions) -> FigureData:
    """One expert on the PIM of one B200, N = 1..32 tokens: the engine's time (PIM programs alone and
    the whole round trip) against a roofline at the engine's MAC-issue peak and at 4x the external
    bandwidth (Samsung HBM-PIM's figure), docs/pim.md."""
    from .hardware import get_hardware
    from .models import get_model
    from .pim import roofline_overestimate

    hw = get_hardware("b200")
    tokens = (1, 4, 16) if opts.quick else (1, 2, 4, 8, 16, 32)
    records = []
    for name in STEP_MODELS:
        records += roofline_overestimate(get_model(name), hw, tokens)

    def span(key: str) -> str:
        vals = [r[key] for r in records]
        return f"{min(vals):.2f}-{max(vals):.2f}x"

    claims = [Claim("roofline / engine, 4x-external peak vs PIM programs", "1.8-4.2x (overestimate)",
                    span("external_over_programs")),
              Claim("roofline / engine, 4x-external peak vs the whole round trip", "1.8-4.2x",
                    span("external_over_engine")),
              Claim("roofline / engine, the engine's MAC-issue peak vs PIM programs", "1.8-4.2x",
                    span("mac_peak_over_programs"))]
    notes = ["above 1 the roofline overestimates; which peak a roofline divides by decides the sign: the "
             "engine's own MAC-issue peak can only underestimate (docs/pim.md)",
             "the paper does not say which peak its roofline uses; GPT-OSS-120B, Qwen3.5-397B-A17B and "
             "Qwen3-30B-A3B experts on one B200 with HBM3E-PIM"]
    return FigureData(records, claims, notes)


def _plot_overestimate(data: FigureData, path: pathlib.Path) -> None:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.6))
    for model in dict.fromkeys(r["model"] for r in data.records):
        rows = [r for r in data.records if r["model"] == model]
        ax.plot([r["tokens"] for r in rows], [r["external_over_programs"] for r in rows], marker="o",
                label=f"{model}: 4x-external peak")
        ax.plot([r["tokens"] for r in rows], [r["mac_peak_over_programs"] for r in rows], "--", marker="s",
                label=f"{model}: MAC-issue peak")
    ax.axhspan(1.8, 4.2, color="#dddddd", label="paper: 1.8-4.2x")
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("tokens per expert N")
    ax.set_ylabel("roofline / engine time")
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=120, metadata={"Software": None})
    plt.close(fig)


def _order_figures(order: Sequence[str]) -> None:
    """Put the registered figures in ``order`` (the paper's), the others after them, in place."""
    items = sorted(FIGURES.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order))
    FIGURES.clear()
    FIGURES.update(items)


_order_figures(("fig3", "fig4", "fig5", "fig6", "fig9", "fig10", "fig11", "overestimate", "overhead"))
